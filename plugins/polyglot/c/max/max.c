/* `max`: the maximum of every pixel over all frames (LiberTEM's MaxUDF), in C, with the
 * SDK's operations for every dtype: no switch over dtypes here.
 *
 * Buffer `maxbuf` (kind sig, input dtype): maxbuf[y, x] = max_n F_n[y, x] (NaN wins, as
 * np.maximum); -inf (an integer dtype's minimum) where no frame was processed. */

#include "udf_sdk.h"

static int buffers(const udf_params *params, const udf_dataset *ds, udf_decls *out) {
    return udf_decl(out, "maxbuf", UDF_SIG, ds->input_dtype, NULL, 0, UDF_NORMAL);
}

/* The neutral element of the maximum, on the workers and (main_preprocess) the main side. */
static int preprocess(udf_context *ctx, udf_buffers *results) {
    return udf_view_fill_identity(udf_buffer(results, "maxbuf"), UDF_MERGE_MAX);
}

static int process_tile(udf_context *ctx, const udf_tile *tile, udf_buffers *results) {
    return udf_view_accumulate(udf_buffer(results, "maxbuf"), &tile->data, UDF_MERGE_MAX);
}

static int merge(const udf_merge_context *ctx, udf_buffers *dest, const udf_buffers *src) {
    return udf_merge(dest, src, "maxbuf", UDF_MERGE_MAX);
}

static const udf_plugin MAX = {
    .description = {.name = "max", .version = "0.1.0", .summary = "Maximum of all frames (LiberTEM MaxUDF), C",
                    .input_dtype = UDF_F32, .custom_merge = true, .main_preprocess = true},
    .result_buffers = buffers,
    .preprocess = preprocess,
    .process_tile = process_tile,
    .merge = merge,
};

UDF_EXPORT(MAX)
