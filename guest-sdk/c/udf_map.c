/* udf_map.c: frame maps (udf_sdk.h, UDF_EXPORT_MAP), LiberTEM's AutoUDF: a function of
 * one frame served as a whole plugin with one nav buffer, `result`. */

#include <stdlib.h>

#include "udf_sdk.h"

/* Defined by UDF_EXPORT_MAP; this weak default keeps plugins without a map linking. */
__attribute__((weak)) const udf_map *udf_map_get(void) { return NULL; }

int udf_map_result_buffers(const udf_params *params, const udf_dataset *dataset, udf_decls *out) {
    (void)params;
    const udf_map *m = udf_map_get();
    uint64_t shape[UDF_MAX_DIMS];
    size_t ndim = m->shape ? m->shape(dataset, shape) : 0;
    if (ndim >= UDF_MAX_DIMS) return udf_fail(UDF_INTERNAL, "a frame map value of %zu dims", ndim);
    return udf_decl(out, "result", UDF_NAV, m->value_dtype, shape, ndim, UDF_NORMAL);
}

/* Task data: room for one frame converted to the map's frame dtype, if the input differs. */
int udf_map_init(udf_context *ctx) {
    ctx->task = NULL;
    if (ctx->dataset->input_dtype == udf_map_get()->frame_dtype) return 0;
    size_t n = 1;
    for (size_t a = 0; a < ctx->dataset->sig_dims; a++) n *= (size_t)ctx->dataset->sig_shape[a];
    ctx->task = malloc(n * udf_dtype_size(udf_map_get()->frame_dtype) + 1);
    return ctx->task ? 0 : udf_fail(UDF_INTERNAL, "out of memory for a frame of %zu pixels", n);
}

void udf_map_finish(udf_context *ctx) { free(ctx->task); }

int udf_map_process_frame(udf_context *ctx, const udf_frame *frame, udf_buffers *results) {
    const udf_map *m = udf_map_get();
    udf_view in = frame->data;
    if (ctx->task) { /* frames are contiguous: the same strides fit the converted copy */
        udf_view converted = in;
        converted.data = ctx->task;
        converted.dtype = m->frame_dtype;
        if (udf_view_combine(converted, in, UDF_MERGE_ASSIGN)) return -1;
        in = converted;
    }
    udf_view out = udf_buffer(results, "result");
    return m->f(&in, &out);
}
