/* `{{name}}`: the dot product of each frame with each mask of a stack — virtual detectors
 * (LiberTEM's ApplyMasksUDF, dense masks).
 *
 * Param `masks`: an array (M, *frame shape) of any real dtype. Buffer `intensity`: kind nav,
 * extra shape (M,), float32, intensity[n, m] = sum over y, x of F_n[y, x] * mask_m[y, x]
 * (summed in double). Frame method; nav buffers are merged by the host. Started from
 * `udf-host new --template masks`; sdk/udf_sdk.h documents every function used here. */

#include <stdlib.h>

#include "udf_sdk.h"

static const udf_param_spec PARAMS[] = {
    UDF_PARAM_REQUIRED("masks", UDF_PARAM_ARRAY, "mask stack (M, *frame shape)"),
};

/* The `masks` param, checked against the frame shape. */
static int read_masks(const udf_params *params, const udf_dataset *dataset, udf_view *masks) {
    if (udf_param_array(params, "masks", masks)) return -1;
    bool ok = masks->ndim == dataset->sig_dims + 1 && masks->shape[0] > 0;
    for (size_t a = 0; ok && a < dataset->sig_dims; a++) ok = masks->shape[a + 1] == dataset->sig_shape[a];
    if (!ok) return udf_fail(UDF_BAD_PARAM, "masks must be a stack of at least one mask of the frame shape");
    if (udf_dtype_is_complex(masks->dtype))
        return udf_fail(UDF_BAD_PARAM, "masks must be real, found %s", udf_dtype_name(masks->dtype));
    return 0;
}

static int result_buffers(const udf_params *params, const udf_dataset *dataset, udf_decls *out) {
    /* The description asks for float32 tiles; float64 or complex data still arrive as such. */
    if (dataset->input_dtype != UDF_F32)
        return udf_fail(UDF_INVALID_DATA, "{{name}} handles float32 input only, found %s",
                        udf_dtype_name(dataset->input_dtype));
    udf_view masks;
    if (read_masks(params, dataset, &masks)) return -1;
    const uint64_t count = masks.shape[0];
    return udf_decl(out, "intensity", UDF_NAV, UDF_F32, &count, 1, UDF_NORMAL);
}

/* Task data: the masks as doubles, one after the other. */
typedef struct task {
    double *masks;
    size_t count;
} task;

static int init(udf_context *ctx) {
    udf_view masks;
    if (read_masks(ctx->params, ctx->dataset, &masks)) return -1;
    task *t = malloc(sizeof *t);
    size_t n = udf_view_size(&masks);
    double *values = malloc(n * sizeof *values);
    if (!t || !values) {
        free(t);
        free(values);
        return udf_fail(UDF_INTERNAL, "out of memory for %zu mask values", n);
    }
    for (size_t i = 0; i < n; i++) values[i] = udf_view_get_f64(&masks, i);
    *t = (task){.masks = values, .count = masks.shape[0]};
    ctx->task = t;
    return 0;
}

static void finish(udf_context *ctx) {
    task *t = ctx->task;
    if (t) free(t->masks);
    free(t);
}

static int process_frame(udf_context *ctx, const udf_frame *frame, udf_buffers *results) {
    const task *t = ctx->task;
    const float *pixels = frame->data.data; /* frames are contiguous */
    const size_t n = udf_view_size(&frame->data);
    float *intensity = udf_buffer(results, "intensity").data; /* this frame's M values */
    for (size_t m = 0; m < t->count; m++) {
        const double *mask = t->masks + m * n;
        double dot = 0;
        for (size_t i = 0; i < n; i++) dot += pixels[i] * mask[i];
        intensity[m] = (float)dot;
    }
    return 0;
}

static const udf_plugin PLUGIN = {
    .description =
        {
            .name = "{{name}}",
            .version = "0.1.0",
            .summary = "Dot products of each frame with a mask stack",
            .params = PARAMS,
            .n_params = 1,
            .methods = {UDF_METHOD_FRAME},
            .n_methods = 1,
            .input_dtype = UDF_F32,
        },
    .result_buffers = result_buffers,
    .init = init,
    .process_frame = process_frame,
    .finish = finish,
};

UDF_EXPORT(PLUGIN)
