/* udf_view.c: dtypes and strided n-d views (the part of the C SDK that needs no bindings). */

#include <string.h>

#include "udf_sdk.h"

static const struct {
    const char *name;
    size_t size;
} DTYPES[] = {
    [UDF_BOOL] = {"bool", 1},       [UDF_U8] = {"uint8", 1},      [UDF_U16] = {"uint16", 2},
    [UDF_U32] = {"uint32", 4},      [UDF_U64] = {"uint64", 8},    [UDF_I8] = {"int8", 1},
    [UDF_I16] = {"int16", 2},       [UDF_I32] = {"int32", 4},     [UDF_I64] = {"int64", 8},
    [UDF_F32] = {"float32", 4},     [UDF_F64] = {"float64", 8},   [UDF_C64] = {"complex64", 8},
    [UDF_C128] = {"complex128", 16},
};

size_t udf_dtype_size(udf_dtype dtype) { return DTYPES[dtype].size; }

const char *udf_dtype_name(udf_dtype dtype) { return DTYPES[dtype].name; }

bool udf_dtype_parse(const char *name, size_t len, udf_dtype *out) {
    for (size_t i = 0; i <= UDF_C128; i++) {
        if (strlen(DTYPES[i].name) == len && memcmp(DTYPES[i].name, name, len) == 0) {
            *out = (udf_dtype)i;
            return true;
        }
    }
    return false;
}

size_t udf_view_size(const udf_view *v) {
    size_t n = 1;
    for (size_t a = 0; a < v->ndim; a++) n *= v->shape[a];
    return n;
}

static char *element(const udf_view *v, ptrdiff_t offset) {
    return (char *)v->data + offset * (ptrdiff_t)udf_dtype_size(v->dtype);
}

udf_view udf_view_sub(const udf_view *v, size_t i) {
    udf_view out = *v;
    out.data = element(v, (ptrdiff_t)i * v->strides[0]);
    if (v->ndim == 1) {
        out.shape[0] = 1;
        out.strides[0] = 1;
        return out;
    }
    out.ndim = v->ndim - 1;
    memmove(out.shape, v->shape + 1, out.ndim * sizeof out.shape[0]);
    memmove(out.strides, v->strides + 1, out.ndim * sizeof out.strides[0]);
    return out;
}

size_t udf_view_rows(const udf_view *v) {
    size_t n = 1;
    for (size_t a = 0; a + 1 < v->ndim; a++) n *= v->shape[a];
    return n;
}

size_t udf_view_row_len(const udf_view *v) {
    size_t n = v->ndim ? v->shape[v->ndim - 1] : 1;
    return udf_dtype_is_complex(v->dtype) ? 2 * n : n;
}

void *udf_view_row(const udf_view *v, size_t r) {
    ptrdiff_t offset = 0;
    for (size_t a = v->ndim - 1; a-- > 0;) {
        offset += (ptrdiff_t)(r % v->shape[a]) * v->strides[a];
        r /= v->shape[a];
    }
    return element(v, offset);
}

void *udf_view_ptr(const udf_view *v, const size_t *idx) {
    ptrdiff_t offset = 0;
    for (size_t a = 0; a < v->ndim; a++) offset += (ptrdiff_t)idx[a] * v->strides[a];
    return element(v, offset);
}

bool udf_view_contiguous(const udf_view *v) {
    ptrdiff_t step = 1;
    for (size_t a = v->ndim; a-- > 0;) {
        if (v->shape[a] > 1 && v->strides[a] != step) return false;
        step *= (ptrdiff_t)v->shape[a];
    }
    return true;
}

double udf_view_get_f64(const udf_view *v, size_t i) {
    const char *p = element(v, (ptrdiff_t)i * (v->ndim ? v->strides[v->ndim - 1] : 1));
    switch (v->dtype) {
    case UDF_BOOL:
    case UDF_U8: return *(const uint8_t *)p;
    case UDF_U16: return *(const uint16_t *)p;
    case UDF_U32: return *(const uint32_t *)p;
    case UDF_U64: return (double)*(const uint64_t *)p;
    case UDF_I8: return *(const int8_t *)p;
    case UDF_I16: return *(const int16_t *)p;
    case UDF_I32: return *(const int32_t *)p;
    case UDF_I64: return (double)*(const int64_t *)p;
    case UDF_F32:
    case UDF_C64: return *(const float *)p;
    case UDF_F64:
    case UDF_C128: return *(const double *)p;
    }
    return 0;
}

udf_view udf_view_window(const udf_view *v, const uint64_t *origin, const uint64_t *shape, size_t n) {
    udf_view out = *v;
    ptrdiff_t offset = 0;
    for (size_t a = 0; a < n && a < v->ndim; a++) {
        offset += (ptrdiff_t)origin[a] * v->strides[a];
        out.shape[a] = (size_t)shape[a];
    }
    out.data = element(v, offset);
    return out;
}
