/* udf_array.c: host arrays (udf_sdk.h, "Host arrays") over the `arrays` import that
 * `wit-bindgen c` generates (udf_plugin.h).
 *
 * A `udf_array` is a malloc'd box around an owned handle; every call borrows its
 * arguments' handles. Lists passed to an import are borrowed by the canonical ABI (the
 * generated wrapper does not free them), lists returned (shape, to-bytes, error messages)
 * are malloc'd by it and freed here. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "udf_plugin.h"
#include "udf_sdk.h"

typedef udf_plugin_arrays_own_array_t own_t;
typedef udf_plugin_arrays_borrow_array_t borrow_t;
typedef udf_plugin_arrays_array_error_t array_error_t;

struct udf_array {
    own_t handle;
};

/* ------------------------------------------------------------------------------------ */
/* Errors */

static udf_array_error_kind last_error = UDF_ARRAY_OK;

udf_array_error_kind udf_array_last_error(void) { return last_error; }

const char *udf_array_error_kind_name(udf_array_error_kind kind) {
    static const char *const NAMES[] = {"shape", "axis", "dtype", "index", "value", "memory", "expired", "unsupported",
                                        "ok"};
    return (unsigned)kind <= UDF_ARRAY_OK ? NAMES[kind] : "unknown";
}

/* The host's array-error as the SDK's error (udf_fail); frees its message. */
static void record(array_error_t *e) {
    last_error = (udf_array_error_kind)e->kind;
    udf_fail(UDF_INVALID_DATA, "array %s error: %.*s", udf_array_error_kind_name(last_error), (int)e->message.len,
             (const char *)e->message.ptr);
    udf_plugin_arrays_array_error_free(e);
}

/* A failure of the SDK itself (bad arguments, no memory), with the kind it would have. */
static void fail_here(udf_array_error_kind kind, const char *what) {
    last_error = kind;
    udf_fail(UDF_INVALID_DATA, "array %s error: %s", udf_array_error_kind_name(kind), what);
}

bool udf_error_pending_(void); /* udf_sdk.c */

/* A NULL argument: an earlier call failed, and its error (not yet handed to the host)
 * stands. */
static bool missing(const udf_array *a) {
    if (a) return false;
    if (!udf_error_pending_()) fail_here(UDF_ARRAY_VALUE, "a NULL array was passed (no failed call before it)");
    return true;
}

static borrow_t borrow(const udf_array *a) { return udf_plugin_arrays_borrow_array(a->handle); }

/* The result of a fallible import that returns an array. */
static udf_array *wrap(bool ok, own_t handle, array_error_t *err) {
    if (!ok) {
        record(err);
        return NULL;
    }
    udf_array *a = malloc(sizeof *a);
    if (!a) {
        udf_plugin_arrays_array_drop_own(handle);
        fail_here(UDF_ARRAY_MEMORY, "out of memory for an array handle");
        return NULL;
    }
    a->handle = handle;
    return a;
}

static int status(bool ok, array_error_t *err) {
    if (ok) return 0;
    record(err);
    return -1;
}

void udf_array_drop(udf_array *a) {
    if (!a) return;
    udf_plugin_arrays_array_drop_own(a->handle);
    free(a);
}

/* ------------------------------------------------------------------------------------ */
/* Arguments */

static udf_plugin_list_u64_t u64_list(const uint64_t *values, size_t n) {
    return (udf_plugin_list_u64_t){(uint64_t *)values, n};
}

static udf_plugin_list_s64_t s64_list(const int64_t *values, size_t n) {
    return (udf_plugin_list_s64_t){(int64_t *)values, n};
}

static udf_plugin_arrays_scalar_t scalar(udf_operand v) {
    udf_plugin_arrays_scalar_t s;
    switch (v.kind) {
    case UDF_OPERAND_BOOL:
        s.tag = UDF_PLUGIN_ARRAYS_SCALAR_BOOLEAN;
        s.val.boolean = v.i != 0;
        break;
    case UDF_OPERAND_INT:
        s.tag = UDF_PLUGIN_ARRAYS_SCALAR_INT;
        s.val.int_ = v.i;
        break;
    default:
        s.tag = UDF_PLUGIN_ARRAYS_SCALAR_FLOAT;
        s.val.float_ = v.f;
        break;
    }
    return s;
}

/* The operand as the import takes it; false (with the error recorded) for a NULL array. */
static bool operand(udf_operand v, udf_plugin_arrays_operand_t *out) {
    if (v.kind == UDF_OPERAND_ARRAY) {
        if (missing(v.array)) return false;
        out->tag = UDF_PLUGIN_ARRAYS_OPERAND_ARRAY;
        out->val.array = borrow(v.array);
        return true;
    }
    out->tag = UDF_PLUGIN_ARRAYS_OPERAND_SCALAR;
    out->val.scalar = scalar(v);
    return true;
}

static udf_plugin_option_s64_t opt_s64(int64_t v) {
    return (udf_plugin_option_s64_t){.is_some = v != UDF_NONE, .val = v == UDF_NONE ? 0 : v};
}

/* An index in the import's form, in `out` (room for n items). */
static void index_items(const udf_index *index, size_t n, udf_plugin_arrays_index_item_t *out) {
    for (size_t i = 0; i < n; i++) {
        switch (index[i].kind) {
        case UDF_INDEX_SLICE:
            out[i].tag = UDF_PLUGIN_ARRAYS_INDEX_ITEM_SLICE;
            out[i].val.slice.start = opt_s64(index[i].start);
            out[i].val.slice.stop = opt_s64(index[i].stop);
            out[i].val.slice.step = opt_s64(index[i].step);
            break;
        case UDF_INDEX_AT:
            out[i].tag = UDF_PLUGIN_ARRAYS_INDEX_ITEM_AT;
            out[i].val.at = index[i].start;
            break;
        case UDF_INDEX_NEW_AXIS: out[i].tag = UDF_PLUGIN_ARRAYS_INDEX_ITEM_NEW_AXIS; break;
        case UDF_INDEX_ELLIPSIS: out[i].tag = UDF_PLUGIN_ARRAYS_INDEX_ITEM_ELLIPSIS; break;
        }
    }
}

/* Room for an index on the stack: more entries than axes plus new axes make no sense. */
#define MAX_INDEX (2 * UDF_MAX_DIMS + 2)

static bool index_fits(size_t n) {
    if (n <= MAX_INDEX) return true;
    fail_here(UDF_ARRAY_INDEX, "an index of more than 18 entries");
    return false;
}

/* ------------------------------------------------------------------------------------ */
/* Sources and constructors */

udf_array *udf_array_tile(void) {
    own_t h;
    array_error_t e;
    bool ok = udf_plugin_arrays_tile(&h, &e);
    return wrap(ok, h, &e);
}

udf_array *udf_array_zeros(const uint64_t *shape, size_t ndim, udf_dtype dtype) {
    udf_plugin_list_u64_t s = u64_list(shape, ndim);
    own_t h;
    array_error_t e;
    bool ok = udf_plugin_arrays_zeros(&s, (udf_plugin_arrays_dtype_t)dtype, &h, &e);
    return wrap(ok, h, &e);
}

udf_array *udf_array_full(const uint64_t *shape, size_t ndim, udf_operand value, udf_dtype dtype) {
    if (value.kind == UDF_OPERAND_ARRAY) {
        fail_here(UDF_ARRAY_VALUE, "full: the value must be a scalar");
        return NULL;
    }
    udf_plugin_list_u64_t s = u64_list(shape, ndim);
    udf_plugin_arrays_scalar_t v = scalar(value);
    udf_plugin_arrays_dtype_t d = (udf_plugin_arrays_dtype_t)dtype;
    own_t h;
    array_error_t e;
    bool ok = udf_plugin_arrays_full(&s, &v, &d, &h, &e);
    return wrap(ok, h, &e);
}

udf_array *udf_array_arange(double start, double stop, double step, udf_dtype dtype) {
    own_t h;
    array_error_t e;
    bool ok = udf_plugin_arrays_arange(start, stop, step, (udf_plugin_arrays_dtype_t)dtype, &h, &e);
    return wrap(ok, h, &e);
}

static udf_array *from_bytes_once(udf_dtype dtype, const uint64_t *shape, size_t ndim, const void *data,
                                  size_t nbytes) {
    udf_plugin_list_u64_t s = u64_list(shape, ndim);
    udf_plugin_list_u8_t bytes = {(uint8_t *)data, nbytes};
    own_t h;
    array_error_t e;
    bool ok = udf_plugin_arrays_from_bytes((udf_plugin_arrays_dtype_t)dtype, &s, &bytes, &h, &e);
    return wrap(ok, h, &e);
}

udf_array *udf_array_from_bytes(udf_dtype dtype, const uint64_t *shape, size_t ndim, const void *data,
                                size_t nbytes) {
    if (nbytes <= UDF_ARRAY_CHUNK_BYTES) return from_bytes_once(dtype, shape, ndim, data, nbytes);
    /* A flat array filled a piece at a time (the host takes at most 1 MiB per call), then
     * given its shape. */
    size_t size = udf_dtype_size(dtype), count = nbytes / size;
    if (count * size != nbytes) {
        fail_here(UDF_ARRAY_VALUE, "from_bytes: the byte count is not a whole number of elements");
        return NULL;
    }
    udf_array *flat = udf_array_zeros(UDF_SHAPE(count), dtype);
    if (!flat) return NULL;
    size_t step = UDF_ARRAY_CHUNK_BYTES / size;
    for (size_t start = 0; start < count; start += step) {
        size_t n = count - start < step ? count - start : step;
        udf_array *piece = from_bytes_once(dtype, UDF_SHAPE(n), (const char *)data + start * size, n * size);
        int rc = piece ? udf_array_set(flat, UDF_INDEX(udf_range((int64_t)start, (int64_t)(start + n))), udf_arr(piece))
                       : -1;
        udf_array_drop(piece);
        if (rc) {
            udf_array_drop(flat);
            return NULL;
        }
    }
    int64_t dims[UDF_MAX_DIMS];
    for (size_t a = 0; a < ndim && a < UDF_MAX_DIMS; a++) dims[a] = (int64_t)shape[a];
    udf_array *out = ndim <= UDF_MAX_DIMS ? udf_array_reshape(flat, dims, ndim) : NULL;
    if (ndim > UDF_MAX_DIMS) fail_here(UDF_ARRAY_SHAPE, "from_bytes: more than 8 axes");
    udf_array_drop(flat);
    return out;
}

udf_array *udf_array_from_view(const udf_view *v) {
    uint64_t shape[UDF_MAX_DIMS];
    for (size_t a = 0; a < v->ndim; a++) shape[a] = v->shape[a];
    size_t size = udf_dtype_size(v->dtype), nbytes = udf_view_size(v) * size;
    if (udf_view_contiguous(v)) return udf_array_from_bytes(v->dtype, shape, v->ndim, v->data, nbytes);
    /* A contiguous copy first (udf_view_combine converts nothing here: same dtype). */
    void *copy = malloc(nbytes ? nbytes : 1);
    if (!copy) {
        fail_here(UDF_ARRAY_MEMORY, "from_view: out of memory for a contiguous copy");
        return NULL;
    }
    udf_view dense = *v;
    dense.data = copy;
    ptrdiff_t step = 1;
    for (size_t a = v->ndim; a-- > 0;) {
        dense.strides[a] = step;
        step *= (ptrdiff_t)v->shape[a];
    }
    udf_array *out = NULL;
    if (udf_view_combine(dense, *v, UDF_MERGE_ASSIGN) == 0)
        out = udf_array_from_bytes(v->dtype, shape, v->ndim, copy, nbytes);
    free(copy);
    return out;
}

/* ------------------------------------------------------------------------------------ */
/* Properties and copies out */

size_t udf_array_shape(const udf_array *a, uint64_t *shape) {
    if (missing(a)) return 0;
    udf_plugin_list_u64_t s;
    udf_plugin_arrays_method_array_shape(borrow(a), &s);
    size_t n = s.len;
    if (n > UDF_MAX_DIMS) {
        fail_here(UDF_ARRAY_SHAPE, "the array has more than 8 axes");
        n = 0;
    } else if (shape) {
        memcpy(shape, s.ptr, n * sizeof(uint64_t));
    }
    udf_plugin_list_u64_free(&s);
    return n;
}

udf_dtype udf_array_dtype(const udf_array *a) {
    if (missing(a)) return UDF_F64;
    return (udf_dtype)udf_plugin_arrays_method_array_dtype(borrow(a));
}

size_t udf_array_size(const udf_array *a) {
    uint64_t shape[UDF_MAX_DIMS];
    size_t n = udf_array_shape(a, shape), size = 1;
    for (size_t i = 0; i < n; i++) size *= (size_t)shape[i];
    return a ? size : 0;
}

void *udf_array_to_bytes(const udf_array *a, size_t *nbytes) {
    *nbytes = 0;
    if (missing(a)) return NULL;
    udf_plugin_list_u8_t bytes;
    array_error_t e;
    if (!udf_plugin_arrays_method_array_to_bytes(borrow(a), &bytes, &e)) {
        record(&e);
        return NULL;
    }
    *nbytes = bytes.len;
    return bytes.ptr ? bytes.ptr : malloc(1); /* malloc'd by the canonical ABI */
}

int udf_view_combine_array(udf_view dest, const udf_array *a, udf_merge_op op) {
    uint64_t shape[UDF_MAX_DIMS];
    if (missing(a)) return -1;
    size_t ndim = udf_array_shape(a, shape);
    bool same = ndim == dest.ndim;
    for (size_t i = 0; same && i < ndim; i++) same = shape[i] == dest.shape[i];
    if (!same && ndim == 0 && udf_view_size(&dest) == 1) {
        /* A 0-d result (a reduction over every axis) into one element, e.g. a frame's
         * entry of a nav buffer ((1,)): seen in the view's shape. */
        same = true;
        ndim = dest.ndim;
        for (size_t i = 0; i < ndim; i++) shape[i] = dest.shape[i];
    }
    if (!same) {
        last_error = UDF_ARRAY_SHAPE;
        char got[160] = "", want[160] = "";
        for (size_t i = 0, g = 0, w = 0; i < UDF_MAX_DIMS; i++) {
            if (i < ndim) g += (size_t)snprintf(got + g, sizeof got - g, i ? ", %llu" : "%llu", (unsigned long long)shape[i]);
            if (i < dest.ndim)
                w += (size_t)snprintf(want + w, sizeof want - w, i ? ", %zu" : "%zu", dest.shape[i]);
        }
        return udf_fail(UDF_INVALID_DATA, "array shape error: combine: the array has shape (%s), the view (%s)", got,
                        want);
    }
    size_t nbytes;
    void *data = udf_array_to_bytes(a, &nbytes);
    if (!data) return -1;
    udf_view src = {.data = data, .dtype = udf_array_dtype(a), .ndim = ndim};
    ptrdiff_t step = 1;
    for (size_t i = ndim; i-- > 0;) {
        src.shape[i] = (size_t)shape[i];
        src.strides[i] = step;
        step *= (ptrdiff_t)shape[i];
    }
    int rc = udf_view_combine(dest, src, op);
    free(data);
    return rc;
}

/* ------------------------------------------------------------------------------------ */
/* Views and copies in the host */

udf_array *udf_array_get(const udf_array *x, const udf_index *index, size_t n) {
    if (missing(x) || !index_fits(n)) return NULL;
    udf_plugin_arrays_index_item_t items[MAX_INDEX];
    index_items(index, n, items);
    udf_plugin_arrays_list_index_item_t list = {items, n};
    own_t h;
    array_error_t e;
    bool ok = udf_plugin_arrays_method_array_get(borrow(x), &list, &h, &e);
    return wrap(ok, h, &e);
}

udf_array *udf_array_reshape(const udf_array *x, const int64_t *shape, size_t ndim) {
    if (missing(x)) return NULL;
    udf_plugin_list_s64_t s = s64_list(shape, ndim);
    own_t h;
    array_error_t e;
    bool ok = udf_plugin_arrays_method_array_reshape(borrow(x), &s, &h, &e);
    return wrap(ok, h, &e);
}

udf_array *udf_array_permute_dims(const udf_array *x, const int64_t *axes, size_t naxes) {
    if (missing(x)) return NULL;
    udf_plugin_list_s64_t a = s64_list(axes, naxes);
    own_t h;
    array_error_t e;
    bool ok = udf_plugin_arrays_method_array_permute_dims(borrow(x), axes ? &a : NULL, &h, &e);
    return wrap(ok, h, &e);
}

udf_array *udf_array_astype(const udf_array *x, udf_dtype dtype) {
    if (missing(x)) return NULL;
    own_t h;
    array_error_t e;
    bool ok = udf_plugin_arrays_method_array_astype(borrow(x), (udf_plugin_arrays_dtype_t)dtype, &h, &e);
    return wrap(ok, h, &e);
}

typedef bool (*write_fn)(borrow_t, udf_plugin_arrays_list_index_item_t *, udf_plugin_arrays_operand_t *,
                         array_error_t *);

static int write(write_fn f, const udf_array *x, const udf_index *index, size_t n, udf_operand value) {
    udf_plugin_arrays_operand_t v;
    if (missing(x) || !index_fits(n) || !operand(value, &v)) return -1;
    udf_plugin_arrays_index_item_t items[MAX_INDEX];
    index_items(index, n, items);
    udf_plugin_arrays_list_index_item_t list = {items, n};
    array_error_t e;
    return status(f(borrow(x), &list, &v, &e), &e);
}

int udf_array_set(const udf_array *x, const udf_index *index, size_t n, udf_operand value) {
    return write(udf_plugin_arrays_method_array_set, x, index, n, value);
}

int udf_array_add_at(const udf_array *x, const udf_index *index, size_t n, udf_operand value) {
    return write(udf_plugin_arrays_method_array_add_at, x, index, n, value);
}

/* ------------------------------------------------------------------------------------ */
/* Computation */

udf_array *udf_array_unary(udf_unary_op op, const udf_array *x) {
    if (missing(x)) return NULL;
    own_t h;
    array_error_t e;
    bool ok = udf_plugin_arrays_unary((udf_plugin_arrays_unary_op_t)op, borrow(x), &h, &e);
    return wrap(ok, h, &e);
}

udf_array *udf_array_binary(udf_binary_op op, udf_operand a, udf_operand b) {
    udf_plugin_arrays_operand_t x, y;
    if (!operand(a, &x) || !operand(b, &y)) return NULL;
    own_t h;
    array_error_t e;
    bool ok = udf_plugin_arrays_binary((udf_plugin_arrays_binary_op_t)op, &x, &y, &h, &e);
    return wrap(ok, h, &e);
}

udf_array *udf_array_reduce(udf_reduce_op op, const udf_array *x, const udf_reduce_options *options) {
    if (missing(x)) return NULL;
    udf_reduce_options defaults = {0};
    const udf_reduce_options *o = options ? options : &defaults;
    udf_plugin_arrays_reduce_options_t wit = {
        .axes = {.is_some = o->axes != NULL, .val = s64_list(o->axes, o->naxes)},
        .keepdims = o->keepdims,
        .dtype = {.is_some = o->has_dtype, .val = (udf_plugin_arrays_dtype_t)o->dtype},
        .correction = o->correction,
    };
    own_t h;
    array_error_t e;
    bool ok = udf_plugin_arrays_reduce((udf_plugin_arrays_reduce_op_t)op, borrow(x), &wit, &h, &e);
    return wrap(ok, h, &e);
}

udf_array *udf_array_where(const udf_array *condition, udf_operand a, udf_operand b) {
    udf_plugin_arrays_operand_t x, y;
    if (missing(condition) || !operand(a, &x) || !operand(b, &y)) return NULL;
    own_t h;
    array_error_t e;
    bool ok = udf_plugin_arrays_where(borrow(condition), &x, &y, &h, &e);
    return wrap(ok, h, &e);
}

udf_array *udf_array_matmul(const udf_array *a, const udf_array *b) {
    if (missing(a) || missing(b)) return NULL;
    own_t h;
    array_error_t e;
    bool ok = udf_plugin_arrays_matmul(borrow(a), borrow(b), &h, &e);
    return wrap(ok, h, &e);
}

udf_array *udf_array_tensordot(const udf_array *a, const udf_array *b, const int64_t *axes_a,
                               const int64_t *axes_b, size_t n) {
    if (missing(a) || missing(b)) return NULL;
    udf_plugin_list_s64_t x = s64_list(axes_a, n), y = s64_list(axes_b, n);
    own_t h;
    array_error_t e;
    bool ok = udf_plugin_arrays_tensordot(borrow(a), borrow(b), &x, &y, &h, &e);
    return wrap(ok, h, &e);
}

udf_array *udf_array_fft(udf_fft_op op, const udf_array *x, const int64_t *axes, size_t naxes) {
    if (missing(x)) return NULL;
    udf_plugin_list_s64_t a = s64_list(axes, naxes);
    own_t h;
    array_error_t e;
    bool ok = udf_plugin_arrays_fft((udf_plugin_arrays_fft_op_t)op, borrow(x), axes ? &a : NULL, &h, &e);
    return wrap(ok, h, &e);
}
