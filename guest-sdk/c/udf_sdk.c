/* udf_sdk.c: the exports of wit/udf.wit on top of the `wit-bindgen c` bindings
 * (udf_plugin.h), serving the plugin that UDF_EXPORT registers.
 *
 * Ownership follows wit-bindgen's C conventions: arguments of an export belong to it (we
 * free them, or hand them back as the return value), and everything returned is freed by
 * the generated post-return functions with free(), so returned strings and lists are
 * always malloc'd. Result buffers are allocated once per partition and handed to the host
 * by export-buffers without a copy; merge works in place on `dest` and returns it. */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "udf_plugin.h"
#include "udf_sdk.h"

/* ------------------------------------------------------------------------------------ */
/* Errors and logging */

static udf_error_kind err_kind = UDF_INTERNAL;
static char *err_message = NULL;

static char *vformat(const char *fmt, va_list args) {
    va_list copy;
    va_copy(copy, args);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0) n = 0;
    char *s = malloc((size_t)n + 1);
    if (s) vsnprintf(s, (size_t)n + 1, fmt, args);
    return s;
}

/* Whether an error is recorded and not yet handed to the host (udf_array.c keeps the
 * first error of a chain of failed calls). */
bool udf_error_pending_(void) { return err_message != NULL; }

int udf_fail(udf_error_kind kind, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    free(err_message);
    err_kind = kind;
    err_message = vformat(fmt, args);
    va_end(args);
    return -1;
}

void udf_log(udf_log_level level, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    char *s = vformat(fmt, args);
    va_end(args);
    if (!s) return;
    udf_plugin_string_t message = {(uint8_t *)s, strlen(s)};
    udf_plugin_host_log((udf_plugin_host_log_level_t)level, &message);
    free(s);
}

/* The recorded error as the wit error (ownership of the message moves to the host). */
static bool take_error(exports_udf_plugin_udf_udf_error_t *err) {
    if (!err_message) {
        err_kind = UDF_INTERNAL;
        err_message = strdup("a plugin callback failed without an error message (use udf_fail)");
    }
    err->kind = (udf_plugin_types_error_kind_t)err_kind;
    err->message.ptr = (uint8_t *)err_message;
    err->message.len = err_message ? strlen(err_message) : 0;
    err_message = NULL;
    return false;
}

__attribute__((noreturn)) static void plugin_bug(const char *fmt, const char *name) {
    udf_log(UDF_ERROR, fmt, name);
    __builtin_trap();
}

static void dup_string(udf_plugin_string_t *out, const char *s) {
    if (s && *s) udf_plugin_string_dup(out, s);
    else *out = (udf_plugin_string_t){NULL, 0};
}

/* A NUL-terminated copy of `len` bytes (malloc'd). */
static char *copy_n(const char *s, size_t len) {
    char *out = malloc(len + 1);
    if (out) {
        memcpy(out, s, len);
        out[len] = 0;
    }
    return out;
}

static bool string_is(const udf_plugin_string_t *s, const char *name) {
    size_t n = strlen(name);
    return s->len == n && memcmp(s->ptr, name, n) == 0;
}

/* ------------------------------------------------------------------------------------ */
/* Arrays */

/* Pointer and byte length of the elements of an array-data, whatever its form. */
static void *array_bytes(const udf_plugin_types_array_data_t *d, size_t *nbytes) {
    switch (d->tag) {
#define CASE(TAG, FIELD, T)                                                                                        \
    case TAG:                                                                                                      \
        *nbytes = d->val.FIELD.len * sizeof(T);                                                                    \
        return d->val.FIELD.ptr;
        CASE(UDF_PLUGIN_TYPES_ARRAY_DATA_BOOLEAN, boolean, bool)
        CASE(UDF_PLUGIN_TYPES_ARRAY_DATA_UINT8, uint8, uint8_t)
        CASE(UDF_PLUGIN_TYPES_ARRAY_DATA_UINT16, uint16, uint16_t)
        CASE(UDF_PLUGIN_TYPES_ARRAY_DATA_UINT32, uint32, uint32_t)
        CASE(UDF_PLUGIN_TYPES_ARRAY_DATA_UINT64, uint64, uint64_t)
        CASE(UDF_PLUGIN_TYPES_ARRAY_DATA_INT8, int8, int8_t)
        CASE(UDF_PLUGIN_TYPES_ARRAY_DATA_INT16, int16, int16_t)
        CASE(UDF_PLUGIN_TYPES_ARRAY_DATA_INT32, int32, int32_t)
        CASE(UDF_PLUGIN_TYPES_ARRAY_DATA_INT64, int64, int64_t)
        CASE(UDF_PLUGIN_TYPES_ARRAY_DATA_FLOAT32, float32, float)
        CASE(UDF_PLUGIN_TYPES_ARRAY_DATA_FLOAT64, float64, double)
        CASE(UDF_PLUGIN_TYPES_ARRAY_DATA_COMPLEX64, complex64, float)
        CASE(UDF_PLUGIN_TYPES_ARRAY_DATA_COMPLEX128, complex128, double)
        CASE(UDF_PLUGIN_TYPES_ARRAY_DATA_BYTES, bytes, uint8_t)
#undef CASE
    }
    *nbytes = 0;
    return NULL;
}

/* array-data of `dtype` owning `data` (malloc'd, `nbytes` long): the typed form, bool as
 * bytes (the host cannot vouch that data read from files holds only 0 and 1). */
static udf_plugin_types_array_data_t array_data(udf_dtype dtype, void *data, size_t nbytes) {
    udf_plugin_types_array_data_t d;
    switch (dtype) {
#define CASE(DT, TAG, FIELD, T)                                                                                    \
    case DT:                                                                                                       \
        d.tag = TAG;                                                                                               \
        d.val.FIELD.ptr = data;                                                                                    \
        d.val.FIELD.len = nbytes / sizeof(T);                                                                      \
        return d;
        CASE(UDF_BOOL, UDF_PLUGIN_TYPES_ARRAY_DATA_BYTES, bytes, uint8_t)
        CASE(UDF_U8, UDF_PLUGIN_TYPES_ARRAY_DATA_UINT8, uint8, uint8_t)
        CASE(UDF_U16, UDF_PLUGIN_TYPES_ARRAY_DATA_UINT16, uint16, uint16_t)
        CASE(UDF_U32, UDF_PLUGIN_TYPES_ARRAY_DATA_UINT32, uint32, uint32_t)
        CASE(UDF_U64, UDF_PLUGIN_TYPES_ARRAY_DATA_UINT64, uint64, uint64_t)
        CASE(UDF_I8, UDF_PLUGIN_TYPES_ARRAY_DATA_INT8, int8, int8_t)
        CASE(UDF_I16, UDF_PLUGIN_TYPES_ARRAY_DATA_INT16, int16, int16_t)
        CASE(UDF_I32, UDF_PLUGIN_TYPES_ARRAY_DATA_INT32, int32, int32_t)
        CASE(UDF_I64, UDF_PLUGIN_TYPES_ARRAY_DATA_INT64, int64, int64_t)
        CASE(UDF_F32, UDF_PLUGIN_TYPES_ARRAY_DATA_FLOAT32, float32, float)
        CASE(UDF_F64, UDF_PLUGIN_TYPES_ARRAY_DATA_FLOAT64, float64, double)
        CASE(UDF_C64, UDF_PLUGIN_TYPES_ARRAY_DATA_COMPLEX64, complex64, float)
        CASE(UDF_C128, UDF_PLUGIN_TYPES_ARRAY_DATA_COMPLEX128, complex128, double)
#undef CASE
    }
    d.tag = UDF_PLUGIN_TYPES_ARRAY_DATA_BYTES;
    d.val.bytes.ptr = data;
    d.val.bytes.len = nbytes;
    return d;
}

/* A C-order view of `ndim` axes over `data`. */
static udf_view contiguous_view(void *data, udf_dtype dtype, const size_t *shape, size_t ndim) {
    udf_view v = {.data = data, .dtype = dtype, .ndim = ndim};
    ptrdiff_t step = 1;
    for (size_t a = ndim; a-- > 0;) {
        v.shape[a] = shape[a];
        v.strides[a] = step;
        step *= (ptrdiff_t)shape[a];
    }
    return v;
}

/* Whole view of an ndarray from the host; checks its size. */
static int ndarray_view(const udf_plugin_types_ndarray_t *a, const char *what, udf_view *out) {
    if (a->shape.len > UDF_MAX_DIMS)
        return udf_fail(UDF_BAD_PARAM, "%s has %zu dims, at most %d are supported", what, a->shape.len, UDF_MAX_DIMS);
    size_t shape[UDF_MAX_DIMS], n = 1;
    for (size_t i = 0; i < a->shape.len; i++) n *= shape[i] = (size_t)a->shape.ptr[i];
    size_t nbytes;
    void *data = array_bytes(&a->data, &nbytes);
    udf_dtype dtype = (udf_dtype)a->dtype;
    if (nbytes != n * udf_dtype_size(dtype))
        return udf_fail(UDF_INTERNAL, "%s holds %zu bytes, expected %zu for %zu %s elements", what, nbytes,
                        n * udf_dtype_size(dtype), n, udf_dtype_name(dtype));
    *out = contiguous_view(data, dtype, shape, a->shape.len);
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* Params and meta */

struct udf_params {
    const udf_plugin_types_param_t *ptr;
    size_t len;
};

static const udf_plugin_types_param_value_t *find_param(const udf_params *p, const char *name) {
    for (size_t i = 0; i < p->len; i++)
        if (string_is(&p->ptr[i].name, name)) return &p->ptr[i].value;
    return NULL;
}

static const udf_plugin_types_param_value_t *get_param(const udf_params *p, const char *name, uint8_t tag,
                                                       const char *what) {
    const udf_plugin_types_param_value_t *v = find_param(p, name);
    if (!v) {
        udf_fail(UDF_BAD_PARAM, "parameter '%s' is missing", name);
        return NULL;
    }
    if (v->tag != tag) {
        udf_fail(UDF_BAD_PARAM, "parameter '%s' is not %s", name, what);
        return NULL;
    }
    return v;
}

bool udf_param_has(const udf_params *p, const char *name) { return find_param(p, name) != NULL; }

int udf_param_bool(const udf_params *p, const char *name, bool *out) {
    const udf_plugin_types_param_value_t *v = get_param(p, name, UDF_PLUGIN_TYPES_PARAM_VALUE_BOOLEAN, "a boolean");
    if (!v) return -1;
    *out = v->val.boolean;
    return 0;
}

int udf_param_int(const udf_params *p, const char *name, int64_t *out) {
    const udf_plugin_types_param_value_t *v = get_param(p, name, UDF_PLUGIN_TYPES_PARAM_VALUE_INT, "an integer");
    if (!v) return -1;
    *out = v->val.int_;
    return 0;
}

int udf_param_float(const udf_params *p, const char *name, double *out) {
    const udf_plugin_types_param_value_t *v = find_param(p, name);
    if (v && v->tag == UDF_PLUGIN_TYPES_PARAM_VALUE_INT) {
        *out = (double)v->val.int_;
        return 0;
    }
    v = get_param(p, name, UDF_PLUGIN_TYPES_PARAM_VALUE_FLOAT, "a float");
    if (!v) return -1;
    *out = v->val.float_;
    return 0;
}

int udf_param_text(const udf_params *p, const char *name, const char **ptr, size_t *len) {
    const udf_plugin_types_param_value_t *v = get_param(p, name, UDF_PLUGIN_TYPES_PARAM_VALUE_TEXT, "text");
    if (!v) return -1;
    *ptr = (const char *)v->val.text.ptr;
    *len = v->val.text.len;
    return 0;
}

int udf_param_array(const udf_params *p, const char *name, udf_view *out) {
    const udf_plugin_types_param_value_t *v = get_param(p, name, UDF_PLUGIN_TYPES_PARAM_VALUE_ARRAY, "an array");
    if (!v) return -1;
    return ndarray_view(&v->val.array, name, out);
}

static int to_dataset(const udf_plugin_types_dataset_meta_t *m, udf_dataset *out) {
    if (m->nav_shape.len > UDF_MAX_DIMS || m->sig_shape.len > UDF_MAX_DIMS)
        return udf_fail(UDF_INVALID_DATA, "the dataset has more than %d nav or sig dims", UDF_MAX_DIMS);
    memset(out, 0, sizeof *out);
    out->nav_dims = m->nav_shape.len;
    out->sig_dims = m->sig_shape.len;
    memcpy(out->nav_shape, m->nav_shape.ptr, m->nav_shape.len * sizeof(uint64_t));
    memcpy(out->sig_shape, m->sig_shape.ptr, m->sig_shape.len * sizeof(uint64_t));
    out->dataset_dtype = (udf_dtype)m->dataset_dtype;
    out->input_dtype = (udf_dtype)m->input_dtype;
    out->has_roi = m->roi_count.is_some;
    out->roi_count = m->roi_count.val;
    uint64_t frames = 1;
    for (size_t i = 0; i < out->nav_dims; i++) frames *= out->nav_shape[i];
    out->frames = out->has_roi ? out->roi_count : frames;
    out->threads_per_worker = m->threads_per_worker;
    return 0;
}

static udf_partition to_partition(const udf_plugin_types_partition_meta_t *m) {
    return (udf_partition){.index = m->index, .origin = m->origin, .frames = m->frames,
                           .method = (udf_method)m->method, .tile_depth = m->tile_depth};
}

void udf_nav_coordinates(const udf_dataset *ds, uint64_t index, uint64_t *out) {
    for (size_t a = ds->nav_dims; a-- > 0;) {
        out[a] = ds->nav_shape[a] ? index % ds->nav_shape[a] : 0;
        index = ds->nav_shape[a] ? index / ds->nav_shape[a] : 0;
    }
}

/* ------------------------------------------------------------------------------------ */
/* Buffers */

typedef struct buffer {
    char *name;
    bool has_kind; /* false for buffers from the host (merge, get_results): whole views */
    udf_buffer_kind kind;
    udf_dtype dtype;
    size_t ndim;
    size_t shape[UDF_MAX_DIMS];
    void *data;
    size_t nbytes;
} buffer;

enum unit { UNIT_WHOLE, UNIT_TILE, UNIT_FRAME };

struct udf_buffers {
    buffer *items;
    size_t n;
    size_t sig_dims;
    enum unit unit;
    size_t nav0, nav1; /* tile: frames [nav0, nav1) of the partition; frame: nav0 */
    uint64_t sig_origin[UDF_MAX_DIMS], sig_shape[UDF_MAX_DIMS];
};

static const buffer *find_buffer(const udf_buffers *b, const char *name) {
    for (size_t i = 0; i < b->n; i++)
        if (strcmp(b->items[i].name, name) == 0) return &b->items[i];
    return NULL;
}

bool udf_buffer_has(const udf_buffers *b, const char *name) { return find_buffer(b, name) != NULL; }

udf_view udf_buffer_whole(const udf_buffers *b, const char *name) {
    const buffer *buf = find_buffer(b, name);
    if (!buf) plugin_bug("udf_buffer: no buffer '%s'", name);
    return contiguous_view(buf->data, buf->dtype, buf->shape, buf->ndim);
}

udf_view udf_buffer(const udf_buffers *b, const char *name) {
    const buffer *buf = find_buffer(b, name);
    udf_view v = udf_buffer_whole(b, name);
    if (b->unit == UNIT_WHOLE || !buf->has_kind || buf->kind == UDF_SINGLE) return v;
    if (buf->kind == UDF_NAV) {
        if (b->unit == UNIT_FRAME) return udf_view_sub(&v, b->nav0);
        v.data = (char *)v.data + b->nav0 * (size_t)v.strides[0] * udf_dtype_size(v.dtype);
        v.shape[0] = b->nav1 - b->nav0;
        return v;
    }
    if (b->unit == UNIT_TILE) return udf_view_window(&v, b->sig_origin, b->sig_shape, b->sig_dims);
    return v;
}

static void free_buffers(udf_buffers *b) {
    for (size_t i = 0; i < b->n; i++) {
        free(b->items[i].name);
        free(b->items[i].data);
    }
    free(b->items);
    memset(b, 0, sizeof *b);
}

/* Buffers viewing the arrays of a named-array list from the host (no copy). */
static int buffers_from_named(const exports_udf_plugin_udf_list_named_array_t *list, udf_buffers *out) {
    memset(out, 0, sizeof *out);
    out->items = calloc(list->len ? list->len : 1, sizeof(buffer));
    if (!out->items) return udf_fail(UDF_INTERNAL, "out of memory for %zu buffers", list->len);
    for (size_t i = 0; i < list->len; i++) {
        const udf_plugin_types_named_array_t *a = &list->ptr[i];
        buffer *b = &out->items[out->n++];
        b->name = copy_n((const char *)a->name.ptr, a->name.len);
        udf_view v;
        if (!b->name || ndarray_view(&a->data, b->name, &v)) return -1;
        b->dtype = v.dtype;
        b->ndim = v.ndim;
        memcpy(b->shape, v.shape, sizeof b->shape);
        b->nbytes = udf_view_size(&v) * udf_dtype_size(v.dtype);
        b->data = v.data; /* owned by the list: free_view_buffers does not free it */
    }
    return 0;
}

static void free_view_buffers(udf_buffers *b) {
    for (size_t i = 0; i < b->n; i++) free(b->items[i].name);
    free(b->items);
    memset(b, 0, sizeof *b);
}

/* ------------------------------------------------------------------------------------ */
/* Declarations and results */

struct udf_decls {
    udf_plugin_types_buffer_decl_t *items;
    size_t n, cap;
};

int udf_decl(udf_decls *out, const char *name, udf_buffer_kind kind, udf_dtype dtype, const uint64_t *extra_shape,
             size_t extra_dims, udf_buffer_use use) {
    if (out->n == out->cap) {
        size_t cap = out->cap ? 2 * out->cap : 4;
        void *items = realloc(out->items, cap * sizeof *out->items);
        if (!items) return udf_fail(UDF_INTERNAL, "out of memory declaring buffer '%s'", name);
        out->items = items;
        out->cap = cap;
    }
    udf_plugin_types_buffer_decl_t *d = &out->items[out->n++];
    dup_string(&d->name, name);
    d->kind = (udf_plugin_types_buffer_kind_t)kind;
    d->dtype = (udf_plugin_types_dtype_t)dtype;
    d->usage = (udf_plugin_types_buffer_use_t)use;
    d->extra_shape.len = extra_dims;
    d->extra_shape.ptr = extra_dims ? malloc(extra_dims * sizeof(uint64_t)) : NULL;
    if (extra_dims) memcpy(d->extra_shape.ptr, extra_shape, extra_dims * sizeof(uint64_t));
    return 0;
}

static void free_decls(udf_decls *d) {
    for (size_t i = 0; i < d->n; i++) udf_plugin_types_buffer_decl_free(&d->items[i]);
    free(d->items);
    memset(d, 0, sizeof *d);
}

/* Zeroed buffers for the declarations (result-only ones skipped), `frames` nav entries. */
static int allocate_buffers(const udf_decls *decls, uint64_t frames, const udf_dataset *ds, udf_buffers *out) {
    memset(out, 0, sizeof *out);
    out->sig_dims = ds->sig_dims;
    out->items = calloc(decls->n ? decls->n : 1, sizeof(buffer));
    if (!out->items) return udf_fail(UDF_INTERNAL, "out of memory");
    for (size_t i = 0; i < decls->n; i++) {
        const udf_plugin_types_buffer_decl_t *d = &decls->items[i];
        if (d->usage == UDF_PLUGIN_TYPES_BUFFER_USE_RESULT_ONLY) continue;
        buffer *b = &out->items[out->n++];
        b->name = copy_n((const char *)d->name.ptr, d->name.len);
        b->has_kind = true;
        b->kind = (udf_buffer_kind)d->kind;
        b->dtype = (udf_dtype)d->dtype;
        size_t ndim = 0;
        if (b->kind == UDF_NAV) b->shape[ndim++] = (size_t)frames;
        if (b->kind == UDF_SIG)
            for (size_t a = 0; a < ds->sig_dims; a++) b->shape[ndim++] = (size_t)ds->sig_shape[a];
        if (ndim + d->extra_shape.len > UDF_MAX_DIMS)
            return udf_fail(UDF_INTERNAL, "buffer '%s' has more than %d dims", b->name, UDF_MAX_DIMS);
        for (size_t a = 0; a < d->extra_shape.len; a++) b->shape[ndim++] = (size_t)d->extra_shape.ptr[a];
        if (ndim == 0) b->shape[ndim++] = 1;
        b->ndim = ndim;
        size_t n = 1;
        for (size_t a = 0; a < ndim; a++) n *= b->shape[a];
        b->nbytes = n * udf_dtype_size(b->dtype);
        /* calloc(0) may return NULL; the canonical ABI wants a non-null pointer only for len > 0 */
        b->data = calloc(b->nbytes ? b->nbytes : 1, 1);
        if (!b->name || !b->data)
            return udf_fail(UDF_INTERNAL, "out of memory for buffer '%.*s' (%zu bytes)", (int)d->name.len,
                            (const char *)d->name.ptr, b->nbytes);
    }
    return 0;
}

struct udf_results {
    exports_udf_plugin_udf_result_entry_t *items;
    size_t n, cap;
};

int udf_result_masked(udf_results *out, const char *name, udf_dtype dtype, const uint64_t *shape, size_t ndim,
                      const void *data, size_t nbytes, const bool *valid, size_t valid_len) {
    if (out->n == out->cap) {
        size_t cap = out->cap ? 2 * out->cap : 8;
        void *items = realloc(out->items, cap * sizeof *out->items);
        if (!items) return udf_fail(UDF_INTERNAL, "out of memory for result '%s'", name);
        out->items = items;
        out->cap = cap;
    }
    void *copy = nbytes ? malloc(nbytes) : NULL;
    if (nbytes && !copy) return udf_fail(UDF_INTERNAL, "out of memory for result '%s' (%zu bytes)", name, nbytes);
    if (nbytes) memcpy(copy, data, nbytes);
    exports_udf_plugin_udf_result_entry_t *e = &out->items[out->n++];
    memset(e, 0, sizeof *e);
    dup_string(&e->name, name);
    e->data.dtype = (udf_plugin_types_dtype_t)dtype;
    e->data.shape.len = ndim;
    e->data.shape.ptr = ndim ? malloc(ndim * sizeof(uint64_t)) : NULL;
    if (ndim) memcpy(e->data.shape.ptr, shape, ndim * sizeof(uint64_t));
    e->data.data = array_data(dtype, copy, nbytes);
    if (valid) {
        e->valid.is_some = true;
        e->valid.val.len = valid_len;
        e->valid.val.ptr = valid_len ? malloc(valid_len) : NULL;
        if (valid_len) memcpy(e->valid.val.ptr, valid, valid_len);
    }
    return 0;
}

int udf_result(udf_results *out, const char *name, udf_dtype dtype, const uint64_t *shape, size_t ndim,
               const void *data, size_t nbytes) {
    return udf_result_masked(out, name, dtype, shape, ndim, data, nbytes, NULL, 0);
}

int udf_result_buffer(udf_results *out, const udf_buffers *b, const char *name) {
    const buffer *buf = find_buffer(b, name);
    if (!buf) return udf_fail(UDF_INTERNAL, "udf_result_buffer: no buffer '%s'", name);
    uint64_t shape[UDF_MAX_DIMS];
    for (size_t a = 0; a < buf->ndim; a++) shape[a] = buf->shape[a];
    return udf_result(out, name, buf->dtype, shape, buf->ndim, buf->data, buf->nbytes);
}

/* ------------------------------------------------------------------------------------ */
/* Description and plan */

static udf_plugin_types_dtype_preference_t preference(bool native, udf_dtype dtype) {
    udf_plugin_types_dtype_preference_t p = {.tag = UDF_PLUGIN_TYPES_DTYPE_PREFERENCE_NATIVE};
    if (!native) {
        p.tag = UDF_PLUGIN_TYPES_DTYPE_PREFERENCE_PREFER;
        p.val.prefer = (udf_plugin_types_dtype_t)dtype;
    }
    return p;
}

static udf_plugin_types_tiling_preferences_t tiling(uint64_t depth, uint64_t size) {
    udf_plugin_types_tiling_preferences_t t;
    t.depth.tag = depth == 0 ? UDF_PLUGIN_TYPES_TILE_DEPTH_DEFAULT
                  : depth == UDF_DEPTH_MAX ? UDF_PLUGIN_TYPES_TILE_DEPTH_MAX
                                           : UDF_PLUGIN_TYPES_TILE_DEPTH_FRAMES;
    t.depth.val.frames = depth;
    t.total_size.tag = size == 0 ? UDF_PLUGIN_TYPES_TILE_SIZE_BEST_FIT
                       : size == UDF_SIZE_MAX ? UDF_PLUGIN_TYPES_TILE_SIZE_MAX
                                              : UDF_PLUGIN_TYPES_TILE_SIZE_BYTES;
    t.total_size.val.bytes = size;
    return t;
}

/* Host tiles are read in place: ask for larger tiles, where a few calls per tile cost
 * little (docs/contract.md, "Host arrays"). */
static uint64_t tile_size(bool host_arrays, uint64_t size) {
    return host_arrays && size == 0 ? UDF_HOST_ARRAY_TILE_BYTES : size;
}

static const udf_description *description(void) { return &udf_plugin_get()->description; }

static udf_method first_method(void) {
    return description()->n_methods ? description()->methods[0] : UDF_METHOD_TILE;
}

void exports_udf_plugin_udf_describe(exports_udf_plugin_udf_description_t *ret) {
    const udf_description *d = description();
    memset(ret, 0, sizeof *ret);
    dup_string(&ret->name, d->name);
    dup_string(&ret->version, d->version);
    dup_string(&ret->summary, d->summary);
    ret->params.len = d->n_params;
    ret->params.ptr = d->n_params ? calloc(d->n_params, sizeof *ret->params.ptr) : NULL;
    for (size_t i = 0; i < d->n_params && ret->params.ptr; i++) {
        const udf_param_spec *s = &d->params[i];
        udf_plugin_types_param_spec_t *o = &ret->params.ptr[i];
        dup_string(&o->name, s->name);
        dup_string(&o->doc, s->doc);
        o->ty = (udf_plugin_types_param_type_t)s->type;
        o->nav_aux = s->nav_aux;
        o->default_.is_some = s->has_default;
        udf_plugin_types_param_value_t *v = &o->default_.val;
        v->tag = (uint8_t)s->type;
        switch (s->type) {
        case UDF_PARAM_BOOL: v->val.boolean = s->bool_default; break;
        case UDF_PARAM_INT: v->val.int_ = s->int_default; break;
        case UDF_PARAM_FLOAT: v->val.float_ = s->float_default; break;
        case UDF_PARAM_TEXT: dup_string(&v->val.text, s->text_default); break;
        case UDF_PARAM_ARRAY: o->default_.is_some = false; break;
        }
    }
    size_t n_methods = d->n_methods ? d->n_methods : 1;
    ret->methods.len = n_methods;
    ret->methods.ptr = malloc(n_methods);
    for (size_t i = 0; i < n_methods && ret->methods.ptr; i++)
        ret->methods.ptr[i] = (udf_plugin_types_method_t)(d->n_methods ? d->methods[i] : UDF_METHOD_TILE);
    ret->input_dtype = preference(d->native_dtype, d->input_dtype);
    ret->tiling = tiling(d->tile_depth, tile_size(d->host_arrays, d->tile_size));
    ret->custom_merge = d->custom_merge;
    ret->custom_results = d->custom_results;
    ret->main_preprocess = d->main_preprocess;
    ret->data_access = UDF_PLUGIN_TYPES_DATA_ACCESS_TYPED;
    if (d->host_arrays) udf_plugin_arrays_use_host_tiles();
}

bool exports_udf_plugin_udf_plan(exports_udf_plugin_udf_list_param_t *params,
                                 exports_udf_plugin_udf_dataset_meta_t *dataset, exports_udf_plugin_udf_run_plan_t *ret,
                                 exports_udf_plugin_udf_udf_error_t *err) {
    const udf_description *d = description();
    udf_run_plan plan = {.method = first_method(), .input_dtype = d->input_dtype, .native_dtype = d->native_dtype,
                         .tile_depth = d->tile_depth, .tile_size = d->tile_size};
    udf_params p = {params->ptr, params->len};
    udf_dataset ds;
    int rc = to_dataset(dataset, &ds);
    if (!rc && udf_plugin_get()->plan) rc = udf_plugin_get()->plan(&p, &ds, &plan);
    exports_udf_plugin_udf_list_param_free(params);
    exports_udf_plugin_udf_dataset_meta_free(dataset);
    if (rc) return take_error(err);
    ret->method = (udf_plugin_types_method_t)plan.method;
    ret->input_dtype = preference(plan.native_dtype, plan.input_dtype);
    ret->tiling = tiling(plan.tile_depth, tile_size(d->host_arrays, plan.tile_size));
    return true;
}

bool exports_udf_plugin_udf_result_buffers(exports_udf_plugin_udf_list_param_t *params,
                                           exports_udf_plugin_udf_dataset_meta_t *dataset,
                                           exports_udf_plugin_udf_list_buffer_decl_t *ret,
                                           exports_udf_plugin_udf_udf_error_t *err) {
    udf_params p = {params->ptr, params->len};
    udf_dataset ds;
    udf_decls decls = {0};
    int rc = to_dataset(dataset, &ds);
    if (!rc) rc = udf_plugin_get()->result_buffers(&p, &ds, &decls);
    exports_udf_plugin_udf_list_param_free(params);
    exports_udf_plugin_udf_dataset_meta_free(dataset);
    if (rc) {
        free_decls(&decls);
        return take_error(err);
    }
    ret->ptr = decls.items; /* the post-return frees them */
    ret->len = decls.n;
    return true;
}

/* ------------------------------------------------------------------------------------ */
/* The worker: one partition per instance */

static struct worker {
    bool ready;
    exports_udf_plugin_udf_init_context_t raw; /* owns params and meta */
    udf_params params;
    udf_dataset dataset;
    udf_partition partition;
    udf_context ctx;
    udf_buffers buffers;
    udf_method method;
} W;

static bool fail_not_ready(exports_udf_plugin_udf_udf_error_t *err) {
    udf_fail(UDF_INTERNAL, "called before init");
    return take_error(err);
}

bool exports_udf_plugin_udf_init(exports_udf_plugin_udf_init_context_t *ctx, exports_udf_plugin_udf_udf_error_t *err) {
    if (W.ready) {
        free_buffers(&W.buffers);
        udf_plugin_types_init_context_free(&W.raw);
    }
    memset(&W, 0, sizeof W);
    W.raw = *ctx;
    W.params = (udf_params){W.raw.params.ptr, W.raw.params.len};
    if (to_dataset(&W.raw.dataset, &W.dataset)) return take_error(err);
    W.ctx.params = &W.params;
    W.ctx.dataset = &W.dataset;
    uint64_t frames = W.dataset.frames;
    W.method = UDF_METHOD_PARTITION;
    if (W.raw.partition.is_some) {
        W.partition = to_partition(&W.raw.partition.val);
        W.ctx.partition = &W.partition;
        frames = W.partition.frames;
        W.method = W.partition.method;
    }
    udf_decls decls = {0};
    int rc = udf_plugin_get()->result_buffers(&W.params, &W.dataset, &decls);
    if (!rc) rc = allocate_buffers(&decls, frames, &W.dataset, &W.buffers);
    free_decls(&decls);
    if (!rc && udf_plugin_get()->init) rc = udf_plugin_get()->init(&W.ctx);
    W.ready = true;
    return rc ? take_error(err) : true;
}

bool exports_udf_plugin_udf_preprocess(exports_udf_plugin_udf_udf_error_t *err) {
    if (!W.ready) return fail_not_ready(err);
    W.buffers.unit = UNIT_WHOLE;
    if (udf_plugin_get()->preprocess && udf_plugin_get()->preprocess(&W.ctx, &W.buffers)) return take_error(err);
    return true;
}

static int process(const exports_udf_plugin_udf_tile_t *raw) {
    const udf_plugin *plugin = udf_plugin_get();
    udf_tile t = {.origin = raw->origin, .frames = (size_t)raw->frames, .scheme_index = raw->scheme_index,
                  .true_nav_indices = raw->true_nav_indices.ptr, .ctx = &W.ctx};
    t.nav_offset = (size_t)(raw->origin - (W.ctx.partition ? W.partition.origin : 0));
    if (raw->sig.shape.len > UDF_MAX_DIMS || raw->sig.origin.len != raw->sig.shape.len)
        return udf_fail(UDF_INTERNAL, "the tile's signal slice has %zu dims", raw->sig.shape.len);
    t.sig_dims = raw->sig.shape.len;
    size_t shape[UDF_MAX_DIMS + 1] = {t.frames};
    t.frame_len = 1;
    for (size_t a = 0; a < t.sig_dims; a++) {
        t.sig_origin[a] = raw->sig.origin.ptr[a];
        t.sig_shape[a] = raw->sig.shape.ptr[a];
        shape[a + 1] = (size_t)t.sig_shape[a];
        t.frame_len *= (size_t)t.sig_shape[a];
    }
    size_t nbytes;
    void *data = array_bytes(&raw->data, &nbytes);
    udf_dtype dtype = W.dataset.input_dtype;
    if (description()->host_arrays) data = NULL; /* the tile is udf_array_tile() */
    else if (nbytes != t.frames * t.frame_len * udf_dtype_size(dtype))
        return udf_fail(UDF_INTERNAL, "the tile holds %zu bytes, expected %zu frames x %zu %s", nbytes, t.frames,
                        t.frame_len, udf_dtype_name(dtype));
    t.data = contiguous_view(data, dtype, shape, t.sig_dims + 1);
    switch (W.method) {
    case UDF_METHOD_TILE:
        if (!plugin->process_tile) return udf_fail(UDF_INTERNAL, "the tile method has no process_tile");
        W.buffers.unit = UNIT_TILE;
        W.buffers.nav0 = t.nav_offset;
        W.buffers.nav1 = t.nav_offset + t.frames;
        memcpy(W.buffers.sig_origin, t.sig_origin, sizeof t.sig_origin);
        memcpy(W.buffers.sig_shape, t.sig_shape, sizeof t.sig_shape);
        return plugin->process_tile(&W.ctx, &t, &W.buffers);
    case UDF_METHOD_FRAME:
        if (!plugin->process_frame) return udf_fail(UDF_INTERNAL, "the frame method has no process_frame");
        for (size_t i = 0; i < t.frames; i++) {
            udf_frame f = {.data = udf_view_sub(&t.data, i), .nav_index = t.origin + i,
                           .true_nav_index = t.true_nav_indices[i], .index = i, .tile = &t};
            if (t.sig_dims == 0) f.data.ndim = 0;
            if (!data) f.data.data = NULL; /* host arrays: the frame is udf_array_get(tile, i) */
            W.buffers.unit = UNIT_FRAME;
            W.buffers.nav0 = t.nav_offset + i;
            if (plugin->process_frame(&W.ctx, &f, &W.buffers)) return -1;
        }
        return 0;
    case UDF_METHOD_PARTITION:
        if (!plugin->process_partition) return udf_fail(UDF_INTERNAL, "the partition method has no process_partition");
        W.buffers.unit = UNIT_WHOLE;
        return plugin->process_partition(&W.ctx, &t, &W.buffers);
    }
    return 0;
}

bool exports_udf_plugin_udf_process(exports_udf_plugin_udf_tile_t *tile, exports_udf_plugin_udf_udf_error_t *err) {
    if (!W.ready) {
        exports_udf_plugin_udf_tile_free(tile);
        return fail_not_ready(err);
    }
    int rc = process(tile);
    exports_udf_plugin_udf_tile_free(tile);
    return rc ? take_error(err) : true;
}

bool exports_udf_plugin_udf_postprocess(exports_udf_plugin_udf_udf_error_t *err) {
    if (!W.ready) return fail_not_ready(err);
    W.buffers.unit = UNIT_WHOLE;
    if (udf_plugin_get()->postprocess && udf_plugin_get()->postprocess(&W.ctx, &W.buffers)) return take_error(err);
    return true;
}

bool exports_udf_plugin_udf_export_buffers(exports_udf_plugin_udf_list_named_array_t *ret,
                                           exports_udf_plugin_udf_udf_error_t *err) {
    if (!W.ready) return fail_not_ready(err);
    if (udf_plugin_get()->finish) udf_plugin_get()->finish(&W.ctx);
    udf_buffers *b = &W.buffers;
    ret->len = b->n;
    ret->ptr = calloc(b->n ? b->n : 1, sizeof *ret->ptr);
    if (!ret->ptr) {
        udf_fail(UDF_INTERNAL, "out of memory exporting %zu buffers", b->n);
        return take_error(err);
    }
    for (size_t i = 0; i < b->n; i++) {
        buffer *buf = &b->items[i];
        udf_plugin_types_named_array_t *a = &ret->ptr[i];
        a->name = (udf_plugin_string_t){(uint8_t *)buf->name, strlen(buf->name)};
        a->data.dtype = (udf_plugin_types_dtype_t)buf->dtype;
        a->data.shape.len = buf->ndim;
        a->data.shape.ptr = malloc(buf->ndim * sizeof(uint64_t));
        for (size_t d = 0; d < buf->ndim && a->data.shape.ptr; d++) a->data.shape.ptr[d] = buf->shape[d];
        a->data.data = array_data(buf->dtype, buf->data, buf->nbytes); /* moved, no copy */
    }
    free(b->items);
    udf_plugin_types_init_context_free(&W.raw);
    memset(&W, 0, sizeof W);
    return true;
}

/* ------------------------------------------------------------------------------------ */
/* Main side: merge and get_results */

bool exports_udf_plugin_udf_merge(exports_udf_plugin_udf_merge_context_t *ctx,
                                  exports_udf_plugin_udf_list_named_array_t *dest,
                                  exports_udf_plugin_udf_list_named_array_t *src,
                                  exports_udf_plugin_udf_list_named_array_t *ret,
                                  exports_udf_plugin_udf_udf_error_t *err) {
    udf_params p = {ctx->params.ptr, ctx->params.len};
    udf_dataset ds;
    udf_partition part = to_partition(&ctx->partition);
    udf_merge_context mc = {.params = &p, .dataset = &ds, .partition = &part, .valid_nav_mask = ctx->valid_nav_mask.ptr,
                            .valid_nav_len = ctx->valid_nav_mask.len};
    udf_buffers d = {0}, s = {0};
    int rc = to_dataset(&ctx->dataset, &ds);
    if (!rc) rc = buffers_from_named(dest, &d);
    if (!rc) rc = buffers_from_named(src, &s);
    if (!rc && !udf_plugin_get()->merge) rc = udf_fail(UDF_INTERNAL, "custom_merge is set but merge is missing");
    if (!rc) rc = udf_plugin_get()->merge(&mc, &d, &s);
    free_view_buffers(&d);
    free_view_buffers(&s);
    exports_udf_plugin_udf_list_named_array_free(src);
    exports_udf_plugin_udf_merge_context_free(ctx);
    if (rc) {
        exports_udf_plugin_udf_list_named_array_free(dest);
        return take_error(err);
    }
    *ret = *dest; /* merged in place: dest goes back to the host */
    return true;
}

bool exports_udf_plugin_udf_get_results(exports_udf_plugin_udf_results_context_t *ctx,
                                        exports_udf_plugin_udf_list_named_array_t *buffers,
                                        exports_udf_plugin_udf_list_result_entry_t *ret,
                                        exports_udf_plugin_udf_udf_error_t *err) {
    udf_params p = {ctx->params.ptr, ctx->params.len};
    udf_dataset ds;
    udf_results_context rc_ctx = {.params = &p, .dataset = &ds, .valid_nav_mask = ctx->valid_nav_mask.ptr,
                                  .valid_nav_len = ctx->valid_nav_mask.len,
                                  .roi = ctx->roi.is_some ? ctx->roi.val.ptr : NULL,
                                  .roi_len = ctx->roi.is_some ? ctx->roi.val.len : 0};
    udf_buffers b = {0};
    udf_results results = {0};
    int rc = to_dataset(&ctx->dataset, &ds);
    if (!rc) rc = buffers_from_named(buffers, &b);
    if (!rc) {
        if (udf_plugin_get()->get_results) rc = udf_plugin_get()->get_results(&rc_ctx, &b, &results);
        else
            for (size_t i = 0; i < b.n && !rc; i++) rc = udf_result_buffer(&results, &b, b.items[i].name);
    }
    free_view_buffers(&b);
    exports_udf_plugin_udf_list_named_array_free(buffers);
    exports_udf_plugin_udf_results_context_free(ctx);
    if (rc) {
        for (size_t i = 0; i < results.n; i++) udf_plugin_types_result_entry_free(&results.items[i]);
        free(results.items);
        return take_error(err);
    }
    ret->ptr = results.items;
    ret->len = results.n;
    return true;
}

/* ------------------------------------------------------------------------------------ */
/* Aux data */

static int aux_view(const udf_context *ctx, const char *name, udf_view *out) {
    if (udf_param_array(ctx->params, name, out)) return -1;
    if (out->ndim == 0) return udf_fail(UDF_BAD_PARAM, "aux parameter '%s' has no nav axis", name);
    return 0;
}

int udf_tile_aux(const udf_tile *t, const char *name, udf_view *out) {
    udf_view v;
    if (aux_view(t->ctx, name, &v)) return -1;
    if (t->nav_offset + t->frames > v.shape[0])
        return udf_fail(UDF_INTERNAL, "aux parameter '%s' has %zu entries, the tile needs %zu", name, v.shape[0],
                        t->nav_offset + t->frames);
    v.data = (char *)v.data + t->nav_offset * (size_t)v.strides[0] * udf_dtype_size(v.dtype);
    v.shape[0] = t->frames;
    *out = v;
    return 0;
}

int udf_frame_aux(const udf_frame *f, const char *name, udf_view *out) {
    udf_view v;
    if (aux_view(f->tile->ctx, name, &v)) return -1;
    size_t i = f->tile->nav_offset + f->index;
    if (i >= v.shape[0])
        return udf_fail(UDF_INTERNAL, "aux parameter '%s' has %zu entries, the frame is %zu", name, v.shape[0], i);
    *out = udf_view_sub(&v, i);
    return 0;
}
