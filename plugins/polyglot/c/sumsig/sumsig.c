/* `sumsig`: the sum over each frame (LiberTEM's SumSigUDF), in C with host arrays.
 *
 * Buffer `intensity`: kind nav, dtype = input dtype, intensity[n] = sum_{y,x} F_n[y, x].
 * Merged natively by the host. */

#include "udf_sdk.h"

static int result_buffers(const udf_params *params, const udf_dataset *dataset, udf_decls *out) {
    (void)params;
    return udf_decl(out, "intensity", UDF_NAV, dataset->input_dtype, NULL, 0, UDF_NORMAL);
}

static int process_tile(udf_context *ctx, const udf_tile *tile, udf_buffers *results) {
    (void)ctx;
    /* A tile may hold only part of each frame: accumulate the partial sums over the
     * signal axes 1..sig_dims. */
    int64_t axes[UDF_MAX_DIMS];
    for (size_t a = 0; a < tile->sig_dims; a++) axes[a] = (int64_t)a + 1;
    udf_array *x = udf_array_tile();
    udf_array *s = udf_array_sum_as(x, axes, tile->sig_dims, tile->data.dtype); /* (frames,) */
    int rc = udf_view_combine_array(udf_buffer(results, "intensity"), s, UDF_MERGE_ADD);
    udf_array_drop(s);
    udf_array_drop(x);
    return rc;
}

static const udf_plugin SUMSIG = {
    .description =
        {
            .name = "sumsig",
            .version = "0.1.0",
            .summary = "Sum over each frame (LiberTEM SumSigUDF), C",
            .input_dtype = UDF_F32,
            .host_arrays = true,
        },
    .result_buffers = result_buffers,
    .process_tile = process_tile,
};

UDF_EXPORT(SUMSIG)
