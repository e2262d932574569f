/* `sumsig`: the sum over each frame (LiberTEM's SumSigUDF), in C.
 *
 * Buffer `intensity`: kind nav, dtype = input dtype, intensity[n] = sum_{y,x} F_n[y, x].
 * Merged natively by the host. */

#include "udf_sdk.h"

static int result_buffers(const udf_params *params, const udf_dataset *dataset, udf_decls *out) {
    (void)params;
    return udf_decl(out, "intensity", UDF_NAV, dataset->input_dtype, NULL, 0, UDF_NORMAL);
}

/* A tile may hold only part of each frame: accumulate the partial sums. Complex values
 * are (real, imaginary) pairs: W = 2 sums per frame. */
#define SUM_FRAMES(T, W)                                                                                           \
    do {                                                                                                           \
        const T *x = tile->data.data;                                                                              \
        T *acc = out.data;                                                                                         \
        for (size_t f = 0; f < tile->frames; f++) {                                                                \
            for (size_t w = 0; w < (W); w++) {                                                                     \
                T s = 0;                                                                                           \
                for (size_t i = w; i < (W) * n; i += (W)) s += x[f * (W) * n + i];                                \
                acc[f * (W) + w] += s;                                                                             \
            }                                                                                                      \
        }                                                                                                          \
    } while (0)

static int process_tile(udf_context *ctx, const udf_tile *tile, udf_buffers *results) {
    (void)ctx;
    udf_view out = udf_buffer(results, "intensity"); /* (frames in tile,): contiguous */
    size_t n = tile->frame_len;
    switch (tile->data.dtype) {
    case UDF_BOOL:
    case UDF_U8: SUM_FRAMES(uint8_t, 1); break;
    case UDF_U16: SUM_FRAMES(uint16_t, 1); break;
    case UDF_U32: SUM_FRAMES(uint32_t, 1); break;
    case UDF_U64: SUM_FRAMES(uint64_t, 1); break;
    case UDF_I8: SUM_FRAMES(int8_t, 1); break;
    case UDF_I16: SUM_FRAMES(int16_t, 1); break;
    case UDF_I32: SUM_FRAMES(int32_t, 1); break;
    case UDF_I64: SUM_FRAMES(int64_t, 1); break;
    case UDF_F32: SUM_FRAMES(float, 1); break;
    case UDF_F64: SUM_FRAMES(double, 1); break;
    case UDF_C64: SUM_FRAMES(float, 2); break;
    case UDF_C128: SUM_FRAMES(double, 2); break;
    }
    return 0;
}

static const udf_plugin SUMSIG = {
    .description =
        {
            .name = "sumsig",
            .version = "0.1.0",
            .summary = "Sum over each frame (LiberTEM SumSigUDF), C",
            .input_dtype = UDF_F32,
        },
    .result_buffers = result_buffers,
    .process_tile = process_tile,
};

UDF_EXPORT(SUMSIG)
