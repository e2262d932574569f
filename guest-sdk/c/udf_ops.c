/* udf_ops.c: operations on views that work for every dtype (udf_sdk.h, "Operations"), so
 * that a plugin whose buffers follow the input dtype needs no switch over dtypes: the one
 * switch is here. Values of the same dtype combine directly (integer addition wraps, as
 * NumPy's does); other dtypes meet as doubles (complex: their float parts), with
 * saturating conversion to integers. */

#include <math.h>
#include <string.h>

#include "udf_sdk.h"

/* Element `i` of a row of `dtype` as a double (complex: the float at position i). */
static double load(const void *row, udf_dtype dtype, size_t i) {
    switch (dtype) {
    case UDF_BOOL:
    case UDF_U8: return ((const uint8_t *)row)[i];
    case UDF_U16: return ((const uint16_t *)row)[i];
    case UDF_U32: return ((const uint32_t *)row)[i];
    case UDF_U64: return (double)((const uint64_t *)row)[i];
    case UDF_I8: return ((const int8_t *)row)[i];
    case UDF_I16: return ((const int16_t *)row)[i];
    case UDF_I32: return ((const int32_t *)row)[i];
    case UDF_I64: return (double)((const int64_t *)row)[i];
    case UDF_F32:
    case UDF_C64: return ((const float *)row)[i];
    case UDF_F64:
    case UDF_C128: return ((const double *)row)[i];
    }
    return 0;
}

/* `v` clamped to [lo, hi] (NaN: 0), for a conversion to an integer type. */
static double clamp(double v, double lo, double hi) { return isnan(v) ? 0 : v < lo ? lo : v > hi ? hi : v; }

/* Store `v` as element `i` of a row of `dtype` (integers saturate). */
static void store(void *row, udf_dtype dtype, size_t i, double v) {
    switch (dtype) {
    case UDF_BOOL: ((uint8_t *)row)[i] = v != 0; break;
    case UDF_U8: ((uint8_t *)row)[i] = (uint8_t)clamp(v, 0, UINT8_MAX); break;
    case UDF_U16: ((uint16_t *)row)[i] = (uint16_t)clamp(v, 0, UINT16_MAX); break;
    case UDF_U32: ((uint32_t *)row)[i] = (uint32_t)clamp(v, 0, UINT32_MAX); break;
    case UDF_U64: ((uint64_t *)row)[i] = v >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)clamp(v, 0, 1e300); break;
    case UDF_I8: ((int8_t *)row)[i] = (int8_t)clamp(v, INT8_MIN, INT8_MAX); break;
    case UDF_I16: ((int16_t *)row)[i] = (int16_t)clamp(v, INT16_MIN, INT16_MAX); break;
    case UDF_I32: ((int32_t *)row)[i] = (int32_t)clamp(v, INT32_MIN, INT32_MAX); break;
    case UDF_I64:
        ((int64_t *)row)[i] = v >= 9223372036854775807.0 ? INT64_MAX : (int64_t)clamp(v, (double)INT64_MIN, 1e300);
        break;
    case UDF_F32:
    case UDF_C64: ((float *)row)[i] = (float)v; break;
    case UDF_F64:
    case UDF_C128: ((double *)row)[i] = v; break;
    }
}

/* a op b for doubles; NaN wins min and max, as with np.minimum / np.maximum. */
static double combine_f64(double a, double b, udf_merge_op op) {
    switch (op) {
    case UDF_MERGE_ADD: return a + b;
    case UDF_MERGE_MIN: return a <= b || isnan(a) ? a : b;
    case UDF_MERGE_MAX: return a >= b || isnan(a) ? a : b;
    case UDF_MERGE_ASSIGN: return b;
    }
    return b;
}

/* d[i] = d[i] op s[i] over `n` values of type T; integers add through their unsigned type
 * (wrapping, without C's signed overflow). */
#define COMBINE_ROW(T, U, NAN_A)                                                                                   \
    do {                                                                                                           \
        T *d = dest_row;                                                                                           \
        const T *s = src_row;                                                                                      \
        for (size_t i = 0; i < n; i++) {                                                                           \
            T a = d[i], b = s[i];                                                                                  \
            switch (op) {                                                                                          \
            case UDF_MERGE_ADD: d[i] = (T)((U)a + (U)b); break;                                                    \
            case UDF_MERGE_MIN: d[i] = a <= b || NAN_A ? a : b; break;                                             \
            case UDF_MERGE_MAX: d[i] = a >= b || NAN_A ? a : b; break;                                             \
            case UDF_MERGE_ASSIGN: d[i] = b; break;                                                                \
            }                                                                                                      \
        }                                                                                                          \
    } while (0)

/* One row of `n` values (floats for complex) of the same dtype. */
static void combine_same(void *dest_row, const void *src_row, size_t n, udf_dtype dtype, udf_merge_op op) {
    switch (dtype) {
    case UDF_BOOL:
        for (size_t i = 0; i < n; i++) {
            uint8_t *d = dest_row;
            uint8_t b = ((const uint8_t *)src_row)[i] != 0;
            d[i] = op == UDF_MERGE_MIN ? d[i] && b : op == UDF_MERGE_ASSIGN ? b : d[i] || b;
        }
        break;
    case UDF_U8: COMBINE_ROW(uint8_t, uint8_t, 0); break;
    case UDF_U16: COMBINE_ROW(uint16_t, uint16_t, 0); break;
    case UDF_U32: COMBINE_ROW(uint32_t, uint32_t, 0); break;
    case UDF_U64: COMBINE_ROW(uint64_t, uint64_t, 0); break;
    case UDF_I8: COMBINE_ROW(int8_t, uint8_t, 0); break;
    case UDF_I16: COMBINE_ROW(int16_t, uint16_t, 0); break;
    case UDF_I32: COMBINE_ROW(int32_t, uint32_t, 0); break;
    case UDF_I64: COMBINE_ROW(int64_t, uint64_t, 0); break;
    case UDF_F32:
    case UDF_C64: COMBINE_ROW(float, float, isnan(a)); break;
    case UDF_F64:
    case UDF_C128: COMBINE_ROW(double, double, isnan(a)); break;
    }
}

static bool same_shape(const udf_view *a, const udf_view *b) {
    if (a->ndim != b->ndim) return udf_view_size(a) == 1 && udf_view_size(b) == 1;
    for (size_t k = 0; k < a->ndim; k++)
        if (a->shape[k] != b->shape[k]) return false;
    return true;
}

static int check_op(udf_dtype dtype, udf_merge_op op) {
    if (udf_dtype_is_complex(dtype) && (op == UDF_MERGE_MIN || op == UDF_MERGE_MAX))
        return udf_fail(UDF_INTERNAL, "%s values have no %s", udf_dtype_name(dtype),
                        op == UDF_MERGE_MIN ? "minimum" : "maximum");
    return 0;
}

int udf_view_combine(udf_view dest, udf_view src, udf_merge_op op) {
    if (!same_shape(&dest, &src))
        return udf_fail(UDF_INTERNAL, "udf_view_combine: views of %zu and %zu elements (shapes differ)",
                        udf_view_size(&dest), udf_view_size(&src));
    if (check_op(dest.dtype, op)) return -1;
    if (udf_dtype_is_complex(dest.dtype) != udf_dtype_is_complex(src.dtype))
        return udf_fail(UDF_INTERNAL, "udf_view_combine: %s and %s (complex and real) do not mix",
                        udf_dtype_name(dest.dtype), udf_dtype_name(src.dtype));
    size_t rows = udf_view_rows(&dest), n = udf_view_row_len(&dest);
    if (dest.ndim == 0 || src.ndim == 0) rows = 1, n = udf_dtype_is_complex(dest.dtype) ? 2 : 1;
    for (size_t r = 0; r < rows; r++) {
        void *d = dest.ndim ? udf_view_row(&dest, r) : dest.data;
        const void *s = src.ndim ? udf_view_row(&src, r) : src.data;
        if (dest.dtype == src.dtype) {
            combine_same(d, s, n, dest.dtype, op);
            continue;
        }
        for (size_t i = 0; i < n; i++) store(d, dest.dtype, i, combine_f64(load(d, dest.dtype, i), load(s, src.dtype, i), op));
    }
    return 0;
}

int udf_view_accumulate(udf_view dest, const udf_view *frames, udf_merge_op op) {
    for (size_t f = 0; f < (frames->ndim ? frames->shape[0] : 1); f++)
        if (udf_view_combine(dest, udf_view_sub(frames, f), op)) return -1;
    return 0;
}

int udf_view_fill(udf_view v, double value) {
    size_t rows = udf_view_rows(&v), n = udf_view_row_len(&v);
    for (size_t r = 0; r < rows; r++) {
        void *row = v.ndim ? udf_view_row(&v, r) : v.data;
        for (size_t i = 0; i < n; i++) store(row, v.dtype, i, udf_dtype_is_complex(v.dtype) && i % 2 ? 0 : value);
    }
    return 0;
}

int udf_view_fill_identity(udf_view v, udf_merge_op op) {
    if (check_op(v.dtype, op)) return -1;
    double identity = op == UDF_MERGE_MIN ? INFINITY : op == UDF_MERGE_MAX ? -INFINITY : 0;
    if (v.dtype == UDF_BOOL) identity = op == UDF_MERGE_MIN; /* and: true, or: false */
    return udf_view_fill(v, identity);
}

double udf_view_sum(const udf_view *v) {
    size_t rows = udf_view_rows(v), n = udf_view_row_len(v), step = udf_dtype_is_complex(v->dtype) ? 2 : 1;
    double total = 0;
    for (size_t r = 0; r < rows; r++) {
        const void *row = v->ndim ? udf_view_row(v, r) : v->data;
        for (size_t i = 0; i < n; i += step) total += load(row, v->dtype, i);
    }
    return total;
}

int udf_tile_add_frame_sums(const udf_tile *t, udf_view out) {
    if (udf_view_size(&out) != t->frames)
        return udf_fail(UDF_INTERNAL, "udf_tile_add_frame_sums: a view of %zu elements for %zu frames",
                        udf_view_size(&out), t->frames);
    for (size_t f = 0; f < t->frames; f++) {
        udf_view frame = udf_view_sub(&t->data, f), one = udf_view_sub(&out, f);
        void *p = one.data;
        store(p, out.dtype, 0, load(p, out.dtype, 0) + udf_view_sum(&frame));
    }
    return 0;
}

int udf_merge(udf_buffers *dest, const udf_buffers *src, const char *name, udf_merge_op op) {
    if (!udf_buffer_has(dest, name) || !udf_buffer_has(src, name))
        return udf_fail(UDF_INTERNAL, "udf_merge: no buffer '%s'", name);
    return udf_view_combine(udf_buffer_whole(dest, name), udf_buffer_whole(src, name), op);
}
