/* `shape-error`: a C plugin with a bug, for the tests (tests/all/polyglot.rs): it
 * multiplies the tile's frames [frames, pixels] with a matrix of one more row than there
 * are pixels, which the host refuses with a typed array-error (kind `shape`). The SDK hands it to the host as the
 * plugin's error; nothing traps. */

#include "udf_sdk.h"

static int result_buffers(const udf_params *params, const udf_dataset *dataset, udf_decls *out) {
    (void)params;
    return udf_decl(out, "intensity", UDF_NAV, dataset->input_dtype, NULL, 0, UDF_NORMAL);
}

static int process_tile(udf_context *ctx, const udf_tile *tile, udf_buffers *results) {
    (void)ctx;
    (void)results;
    udf_array *x = udf_array_tile();                        /* [frames, *sig] */
    udf_array *rows = udf_array_reshape(x, UDF_AXES((int64_t)tile->frames, -1)); /* [frames, pixels] */
    udf_array *bad = udf_array_zeros(UDF_SHAPE(tile->frame_len + 1, 1), UDF_F32);
    udf_array *dots = udf_array_matmul(rows, bad);         /* fails: NULL */
    /* A chain: the NULL goes on, the first error stays. */
    udf_array *total = udf_array_sum(dots, UDF_ALL_AXES);
    int rc = total ? 0 : -1;
    if (udf_array_last_error() != UDF_ARRAY_SHAPE)
        rc = udf_fail(UDF_INTERNAL, "expected a shape error, got '%s'", udf_array_error_kind_name(udf_array_last_error()));
    udf_array_drop(total);
    udf_array_drop(dots);
    udf_array_drop(bad);
    udf_array_drop(rows);
    udf_array_drop(x);
    return rc;
}

static const udf_plugin SHAPE_ERROR = {
    .description =
        {
            .name = "shape-error",
            .version = "0.1.0",
            .summary = "Adds arrays of shapes that do not broadcast (a test of the C SDK's array errors)",
            .input_dtype = UDF_F32,
            .host_arrays = true,
        },
    .result_buffers = result_buffers,
    .process_tile = process_tile,
};

UDF_EXPORT(SHAPE_ERROR)
