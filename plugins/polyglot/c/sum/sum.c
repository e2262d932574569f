/* `sum`: the sum of all frames (LiberTEM's SumUDF), in C.
 *
 * Buffer `intensity`: kind sig, dtype = input dtype, intensity[y, x] = sum_n F_n[y, x].
 * Param `dtype` (default float32) is the preferred input dtype. */

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

/* dest += src over two views of the same shape, for element type T (complex: its floats). */
#define ADD_INTO(T, dest, src)                                                                                     \
    for (size_t r = 0; r < udf_view_rows(&(dest)); r++) {                                                          \
        T *a = udf_view_row(&(dest), r);                                                                           \
        const T *x = udf_view_row(&(src), r);                                                                      \
        for (size_t i = 0, n = udf_view_row_len(&(dest)); i < n; i++) a[i] += x[i];                                \
    }

static int add_into(udf_view dest, udf_view src) {
    switch (dest.dtype) {
    case UDF_BOOL:
    case UDF_U8: ADD_INTO(uint8_t, dest, src) break;
    case UDF_U16: ADD_INTO(uint16_t, dest, src) break;
    case UDF_U32: ADD_INTO(uint32_t, dest, src) break;
    case UDF_U64: ADD_INTO(uint64_t, dest, src) break;
    case UDF_I8: ADD_INTO(int8_t, dest, src) break;
    case UDF_I16: ADD_INTO(int16_t, dest, src) break;
    case UDF_I32: ADD_INTO(int32_t, dest, src) break;
    case UDF_I64: ADD_INTO(int64_t, dest, src) break;
    case UDF_F32:
    case UDF_C64: ADD_INTO(float, dest, src) break;
    case UDF_F64:
    case UDF_C128: ADD_INTO(double, dest, src) break;
    }
    return 0;
}

static int process_tile(udf_context *ctx, const udf_tile *tile, udf_buffers *results) {
    (void)ctx;
    udf_view acc = udf_buffer(results, "intensity"); /* the tile's part of the frame */
    for (size_t f = 0; f < tile->frames; f++) add_into(acc, udf_view_sub(&tile->data, f));
    return 0;
}

static int merge(const udf_merge_context *ctx, udf_buffers *dest, const udf_buffers *src) {
    (void)ctx;
    return add_into(udf_buffer(dest, "intensity"), udf_buffer(src, "intensity"));
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
        },
    .plan = plan,
    .result_buffers = result_buffers,
    .process_tile = process_tile,
    .merge = merge,
};

UDF_EXPORT(SUM)
