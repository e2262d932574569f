/* `{{name}}`: the mean of each frame, one value per scan position.
 *
 * Buffer `mean`: kind nav, float32, mean[n] = sum over y, x of F_n[y, x] / (frame pixels).
 * Frame method: each call sees one whole frame; nav buffers are merged by the host. Started
 * from `udf-host new --template frame-map`; sdk/udf_sdk.h documents every function used here. */

#include "udf_sdk.h"

static int result_buffers(const udf_params *params, const udf_dataset *dataset, udf_decls *out) {
    /* The description asks for float32 tiles; float64 or complex data still arrive as such. */
    if (dataset->input_dtype != UDF_F32)
        return udf_fail(UDF_INVALID_DATA, "{{name}} handles float32 input only, found %s",
                        udf_dtype_name(dataset->input_dtype));
    return udf_decl(out, "mean", UDF_NAV, UDF_F32, NULL, 0, UDF_NORMAL);
}

static int process_frame(udf_context *ctx, const udf_frame *frame, udf_buffers *results) {
    double sum = 0;
    for (size_t r = 0; r < udf_view_rows(&frame->data); r++) {
        const float *x = udf_view_row(&frame->data, r);
        for (size_t i = 0, n = udf_view_row_len(&frame->data); i < n; i++) sum += x[i];
    }
    udf_view mean = udf_buffer(results, "mean"); /* this frame's entry: shape (1,) */
    *(float *)mean.data = (float)(sum / (double)udf_view_size(&frame->data));
    return 0;
}

static const udf_plugin PLUGIN = {
    .description =
        {
            .name = "{{name}}",
            .version = "0.1.0",
            .summary = "Mean of each frame",
            .methods = {UDF_METHOD_FRAME},
            .n_methods = 1,
            .input_dtype = UDF_F32,
        },
    .result_buffers = result_buffers,
    .process_frame = process_frame,
};

UDF_EXPORT(PLUGIN)
