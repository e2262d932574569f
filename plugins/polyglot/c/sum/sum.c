/* `sum`: the sum of all frames (LiberTEM's SumUDF), in C with host arrays.
 *
 * Buffer `intensity`: kind sig, dtype = input dtype, intensity[y, x] = sum_n F_n[y, x].
 * Param `dtype` (default float32) is the preferred input dtype. The tile stays in the
 * host (`.host_arrays`): one reduction per tile at the host's speed, and one small copy of
 * its result (the tile's part of the frame) into the buffer. */

#include "udf_sdk.h"

static const udf_param_spec PARAMS[] = {
    UDF_PARAM_TEXT_DEFAULT("dtype", "preferred input dtype (NumPy name)", "float32"),
};

static int plan(const udf_params *params, const udf_dataset *dataset, udf_run_plan *out) {
    (void)dataset;
    const char *name;
    size_t len;
    if (udf_param_text(params, "dtype", &name, &len)) return -1;
    if (!udf_dtype_parse(name, len, &out->input_dtype))
        return udf_fail(UDF_BAD_PARAM, "dtype '%.*s' is not a NumPy dtype name", (int)len, name);
    return 0;
}

static int result_buffers(const udf_params *params, const udf_dataset *dataset, udf_decls *out) {
    (void)params;
    return udf_decl(out, "intensity", UDF_SIG, dataset->input_dtype, NULL, 0, UDF_NORMAL);
}

static int process_tile(udf_context *ctx, const udf_tile *tile, udf_buffers *results) {
    (void)ctx;
    udf_array *x = udf_array_tile(); /* [frames, *sig slice] */
    /* np.sum(x, axis=0, dtype=x.dtype): integer sums stay in the buffer's dtype */
    udf_array *s = udf_array_sum_as(x, UDF_AXES(0), tile->data.dtype);
    int rc = udf_view_combine_array(udf_buffer(results, "intensity"), s, UDF_MERGE_ADD);
    udf_array_drop(s);
    udf_array_drop(x);
    return rc;
}

static int merge(const udf_merge_context *ctx, udf_buffers *dest, const udf_buffers *src) {
    (void)ctx;
    return udf_merge(dest, src, "intensity", UDF_MERGE_ADD);
}

static const udf_plugin SUM = {
    .description =
        {
            .name = "sum",
            .version = "0.1.0",
            .summary = "Sum of all frames (LiberTEM SumUDF), C",
            .params = PARAMS,
            .n_params = 1,
            .input_dtype = UDF_F32,
            .custom_merge = true,
            .host_arrays = true,
        },
    .plan = plan,
    .result_buffers = result_buffers,
    .process_tile = process_tile,
    .merge = merge,
};

UDF_EXPORT(SUM)
