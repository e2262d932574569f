/* udf_sdk.h: write udf-host plugins in C (and Zig, through guest-sdk/zig).
 *
 * The SDK implements the exports of wit/udf.wit on top of the bindings `wit-bindgen c`
 * generates, and gives a plugin LiberTEM's view of a UDF: callbacks for process_tile /
 * process_frame / process_partition, result buffers seen through the view shapes of
 * docs/contract.md (udf_buffer), pure merge and get_results. A plugin fills one
 * `udf_plugin` and exports it with UDF_EXPORT:
 *
 *     #include "udf_sdk.h"
 *
 *     static int buffers(const udf_params *p, const udf_dataset *ds, udf_decls *out) {
 *         return udf_decl(out, "intensity", UDF_SIG, ds->input_dtype, NULL, 0, UDF_NORMAL);
 *     }
 *     static int tile(udf_context *ctx, const udf_tile *t, udf_buffers *results) {
 *         // the tile's frames into the tile's part of the frame, whatever the dtype
 *         return udf_view_accumulate(udf_buffer(results, "intensity"), &t->data, UDF_MERGE_ADD);
 *     }
 *     static int merge(const udf_merge_context *ctx, udf_buffers *dest, const udf_buffers *src) {
 *         return udf_merge(dest, src, "intensity", UDF_MERGE_ADD);
 *     }
 *     static const udf_plugin SUM = {
 *         .description = {.name = "my-sum", .version = "0.1.0", .summary = "Sum of all frames",
 *                         .input_dtype = UDF_F32, .custom_merge = true},
 *         .result_buffers = buffers, .process_tile = tile, .merge = merge,
 *     };
 *     UDF_EXPORT(SUM)
 *
 * A function of one frame is a whole plugin with UDF_EXPORT_MAP (below).
 *
 * Conventions: callbacks return 0 on success; on failure they return
 * `udf_fail(kind, fmt, ...)` (which returns -1) and the host receives a typed `udf-error`.
 * Arrays arrive as typed lists (`data-access: typed`): aligned for their element type, no
 * copy. Views count strides in elements; a complex element is a pair of floats.
 *
 * Host arrays (the last section; udf_array.c): with `.host_arrays = true` in the description
 * the tile stays in the host and a plugin computes on it with host calls
 * (`udf_array_sum(udf_array_tile(), UDF_AXES(0))`) at the host's speed.
 */
#ifndef UDF_SDK_H
#define UDF_SDK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Most axes a view, a shape or a signal slice may have. */
#define UDF_MAX_DIMS 8

/* A compound literal `UDF_LITERAL_(T){...}`: `(T){...}` in C, `T{...}` in C++ (C++20 for
 * the designated initialisers, whose omitted members are zero as in C: C++ compilers warn
 * of them with -Wextra, not of anything wrong, and the header says so between
 * UDF_OMITTED_FIELDS_ARE_ZERO_ and UDF_END_OMITTED_FIELDS_). */
#ifdef __cplusplus
#define UDF_LITERAL_(T) T
#else
#define UDF_LITERAL_(T) (T)
#endif
#if defined(__cplusplus) && defined(__GNUC__)
#define UDF_OMITTED_FIELDS_ARE_ZERO_                                                                           \
    _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wmissing-field-initializers\"")
#define UDF_END_OMITTED_FIELDS_ _Pragma("GCC diagnostic pop")
#else
#define UDF_OMITTED_FIELDS_ARE_ZERO_
#define UDF_END_OMITTED_FIELDS_
#endif

/** Element types, in the order of the WIT `dtype` enum. */
typedef enum udf_dtype {
    UDF_BOOL, UDF_U8, UDF_U16, UDF_U32, UDF_U64, UDF_I8, UDF_I16, UDF_I32, UDF_I64,
    UDF_F32, UDF_F64, UDF_C64, UDF_C128,
} udf_dtype;

/** Bytes per element. */
size_t udf_dtype_size(udf_dtype dtype);
/** NumPy name ("float32"). */
const char *udf_dtype_name(udf_dtype dtype);
/** Parse a NumPy name; returns false for an unknown one. */
bool udf_dtype_parse(const char *name, size_t len, udf_dtype *out);
/** Whether the dtype is complex (an element is two floats). */
static inline bool udf_dtype_is_complex(udf_dtype d) { return d == UDF_C64 || d == UDF_C128; }

typedef enum udf_method { UDF_METHOD_TILE, UDF_METHOD_FRAME, UDF_METHOD_PARTITION } udf_method;
typedef enum udf_buffer_kind { UDF_NAV, UDF_SIG, UDF_SINGLE } udf_buffer_kind;
typedef enum udf_buffer_use { UDF_NORMAL, UDF_PRIVATE, UDF_RESULT_ONLY } udf_buffer_use;
typedef enum udf_error_kind { UDF_BAD_PARAM, UDF_INVALID_DATA, UDF_INTERNAL } udf_error_kind;
typedef enum udf_param_type { UDF_PARAM_BOOL, UDF_PARAM_INT, UDF_PARAM_FLOAT, UDF_PARAM_TEXT, UDF_PARAM_ARRAY } udf_param_type;
typedef enum udf_log_level { UDF_TRACE, UDF_DEBUG, UDF_INFO, UDF_WARN, UDF_ERROR } udf_log_level;

/* ------------------------------------------------------------------------------------ */
/* Views */

/** A strided n-d view of typed elements. Strides count elements; the last axis of every
 *  view the SDK hands out is contiguous. */
typedef struct udf_view {
    void *data;
    udf_dtype dtype;
    size_t ndim;
    size_t shape[UDF_MAX_DIMS];
    ptrdiff_t strides[UDF_MAX_DIMS];
} udf_view;

/** Number of elements. */
size_t udf_view_size(const udf_view *v);
/** Index axis 0: the view one dimension down (a 1-d view gives a 1-element view `(1,)`). */
udf_view udf_view_sub(const udf_view *v, size_t i);
/** Number of rows of the last axis (product of all but the last dimension). */
size_t udf_view_rows(const udf_view *v);
/** Values in one row: the last dimension, twice that for complex dtypes. */
size_t udf_view_row_len(const udf_view *v);
/** Pointer to row `r` (C order over all but the last axis). */
void *udf_view_row(const udf_view *v, size_t r);
/** Pointer to the element at `idx` (v->ndim indices). */
void *udf_view_ptr(const udf_view *v, const size_t *idx);
/** Whether the view is C-contiguous (then `data` holds udf_view_size elements). */
bool udf_view_contiguous(const udf_view *v);
/** Restrict the first `n` axes to the window at `origin` with `shape`. */
udf_view udf_view_window(const udf_view *v, const uint64_t *origin, const uint64_t *shape, size_t n);
/** Element `i` of a 1-d (or flat contiguous) view as a double (real part for complex). */
double udf_view_get_f64(const udf_view *v, size_t i);

/* ------------------------------------------------------------------------------------ */
/* Errors and logging */

/** Record a typed error for the host and return -1 (return it from a callback). */
int udf_fail(udf_error_kind kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** Send a log line to the host. */
void udf_log(udf_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------------------------------ */
/* Description */

typedef struct udf_param_spec {
    const char *name;
    udf_param_type type;
    const char *doc;
    bool has_default;
    bool bool_default;
    int64_t int_default;
    double float_default;
    const char *text_default;
    /** Array params: per-frame aux data (sliced by the host to the partition). */
    bool nav_aux;
} udf_param_spec;

#define UDF_PARAM_BOOL_DEFAULT(n, d, v) {.name = (n), .type = UDF_PARAM_BOOL, .doc = (d), .has_default = true, .bool_default = (v)}
#define UDF_PARAM_INT_DEFAULT(n, d, v) {.name = (n), .type = UDF_PARAM_INT, .doc = (d), .has_default = true, .int_default = (v)}
#define UDF_PARAM_FLOAT_DEFAULT(n, d, v) {.name = (n), .type = UDF_PARAM_FLOAT, .doc = (d), .has_default = true, .float_default = (v)}
#define UDF_PARAM_TEXT_DEFAULT(n, d, v) {.name = (n), .type = UDF_PARAM_TEXT, .doc = (d), .has_default = true, .text_default = (v)}
#define UDF_PARAM_REQUIRED(n, t, d) {.name = (n), .type = (t), .doc = (d)}
#define UDF_PARAM_AUX(n, d) {.name = (n), .type = UDF_PARAM_ARRAY, .doc = (d), .nav_aux = true}

/** Tile depth preference: 0 = host default, UDF_DEPTH_MAX, or a number of frames. */
#define UDF_DEPTH_MAX UINT64_MAX
/** Tile size preference: 0 = best fit (~1 MiB), UDF_SIZE_MAX, or bytes. */
#define UDF_SIZE_MAX UINT64_MAX

typedef struct udf_description {
    const char *name;
    const char *version;
    const char *summary;
    const udf_param_spec *params;
    size_t n_params;
    /** Implemented methods in order of preference; n_methods == 0 means {tile}. */
    udf_method methods[3];
    size_t n_methods;
    /** Preferred input dtype; `native_dtype` for the dataset's own. */
    udf_dtype input_dtype;
    bool native_dtype;
    uint64_t tile_depth;
    uint64_t tile_size;
    bool custom_merge;
    bool custom_results;
    bool main_preprocess;
    /** Tiles as host arrays (below): `process_*` get tiles without data
     *  (`tile->data.data` is NULL), udf_array_tile() is the tile; `tile_size` 0 then asks
     *  for UDF_HOST_ARRAY_TILE_BYTES. */
    bool host_arrays;
} udf_description;

/* ------------------------------------------------------------------------------------ */
/* Params and meta */

/** The run's parameters (opaque). */
typedef struct udf_params udf_params;

/* Getters return 0, or a bad-param error (missing, wrong type) via udf_fail. */
int udf_param_bool(const udf_params *p, const char *name, bool *out);
int udf_param_int(const udf_params *p, const char *name, int64_t *out);
/** A float param (an int param is converted). */
int udf_param_float(const udf_params *p, const char *name, double *out);
/** A text param: pointer and length (not NUL-terminated). */
int udf_param_text(const udf_params *p, const char *name, const char **ptr, size_t *len);
/** An array param as a view of the whole array. */
int udf_param_array(const udf_params *p, const char *name, udf_view *out);
/** Whether a param is present. */
bool udf_param_has(const udf_params *p, const char *name);

typedef struct udf_dataset {
    size_t nav_dims;
    uint64_t nav_shape[UDF_MAX_DIMS];
    size_t sig_dims;
    uint64_t sig_shape[UDF_MAX_DIMS];
    udf_dtype dataset_dtype;
    /** The dtype of every tile (final in result_buffers and later). */
    udf_dtype input_dtype;
    bool has_roi;
    uint64_t roi_count;
    /** Selected frames: roi_count with a ROI, else the product of nav_shape. */
    uint64_t frames;
    uint32_t threads_per_worker;
} udf_dataset;

/** True nav coordinates of a true flat nav index (dataset->nav_dims values). */
void udf_nav_coordinates(const udf_dataset *ds, uint64_t index, uint64_t *out);

typedef struct udf_partition {
    uint32_t index;
    /** Compressed flat nav index of the first frame. */
    uint64_t origin;
    uint64_t frames;
    udf_method method;
    uint64_t tile_depth;
} udf_partition;

/** Everything a worker callback gets besides the data. */
typedef struct udf_context {
    const udf_params *params;
    const udf_dataset *dataset;
    /** NULL on the main side (main_preprocess). */
    const udf_partition *partition;
    /** Task data: set it in `init`, free it in `finish`. */
    void *task;
} udf_context;

typedef struct udf_merge_context {
    const udf_params *params;
    const udf_dataset *dataset;
    const udf_partition *partition;
    /** Compressed positions merged before this partition. */
    const bool *valid_nav_mask;
    size_t valid_nav_len;
} udf_merge_context;

typedef struct udf_results_context {
    const udf_params *params;
    const udf_dataset *dataset;
    const bool *valid_nav_mask;
    size_t valid_nav_len;
    /** The ROI over the flat uncompressed nav axis, or NULL. */
    const bool *roi;
    size_t roi_len;
} udf_results_context;

/* ------------------------------------------------------------------------------------ */
/* Tiles and frames */

typedef struct udf_tile {
    /** The data: [frames, *sig_shape], contiguous, of the input dtype. */
    udf_view data;
    /** Compressed flat nav index of the first frame. */
    uint64_t origin;
    size_t frames;
    /** First frame within the partition. */
    size_t nav_offset;
    uint32_t scheme_index;
    size_t sig_dims;
    uint64_t sig_origin[UDF_MAX_DIMS];
    uint64_t sig_shape[UDF_MAX_DIMS];
    /** Elements per frame of this tile (product of sig_shape). */
    size_t frame_len;
    const uint64_t *true_nav_indices;
    const udf_context *ctx;
} udf_tile;

typedef struct udf_frame {
    /** The frame: a view of the signal shape. */
    udf_view data;
    /** Compressed flat nav index. */
    uint64_t nav_index;
    uint64_t true_nav_index;
    /** Index within the tile. */
    size_t index;
    const udf_tile *tile;
} udf_frame;

/** The tile's part of a sig-shaped array (e.g. a mask or reference frame, or one of a
 *  stack after udf_view_sub): its first sig_dims axes restricted to the tile's slice. */
static inline udf_view udf_tile_sig_part(const udf_tile *t, const udf_view *sig_array) {
    return udf_view_window(sig_array, t->sig_origin, t->sig_shape, t->sig_dims);
}
/** Per-frame aux data of a tile's frames: [frames, *extra]. */
int udf_tile_aux(const udf_tile *t, const char *name, udf_view *out);
/** Per-frame aux data of one frame: extra, or (1,). */
int udf_frame_aux(const udf_frame *f, const char *name, udf_view *out);

/* ------------------------------------------------------------------------------------ */
/* Buffers */

/** Result buffers by name, viewed through the current unit (opaque). */
typedef struct udf_buffers udf_buffers;

/** The view of buffer `name` for the current unit (docs/contract.md): in process_tile a
 *  nav buffer's rows of the tile (T, *E), a sig buffer's part under the tile (*s, *E); in
 *  process_frame a nav buffer's entry E or (1,), the whole sig buffer; otherwise (and for
 *  single buffers) the whole buffer. An unknown name is a plugin bug: it logs and traps. */
udf_view udf_buffer(const udf_buffers *b, const char *name);
/** The whole buffer, whatever the unit. */
udf_view udf_buffer_whole(const udf_buffers *b, const char *name);
/** Whether a buffer exists. */
bool udf_buffer_has(const udf_buffers *b, const char *name);

/** Result buffer declarations being collected (opaque). */
typedef struct udf_decls udf_decls;
/** Declare a buffer; returns 0. */
int udf_decl(udf_decls *out, const char *name, udf_buffer_kind kind, udf_dtype dtype, const uint64_t *extra_shape,
             size_t extra_dims, udf_buffer_use use);

/** Results being collected in get_results (opaque). */
typedef struct udf_results udf_results;
/** Add a result: a copy of `nbytes` bytes of `data` with `shape`. */
int udf_result(udf_results *out, const char *name, udf_dtype dtype, const uint64_t *shape, size_t ndim,
               const void *data, size_t nbytes);
/** Add a result with a valid mask (1 value, one per nav position, or one per element). */
int udf_result_masked(udf_results *out, const char *name, udf_dtype dtype, const uint64_t *shape, size_t ndim,
                      const void *data, size_t nbytes, const bool *valid, size_t valid_len);
/** Add a buffer unchanged. */
int udf_result_buffer(udf_results *out, const udf_buffers *b, const char *name);

/* ------------------------------------------------------------------------------------ */
/* Operations for every dtype (udf_ops.c): the one switch over dtypes lives in the SDK.
 * Values of the same dtype combine directly (integer addition wraps, as in NumPy); other
 * dtypes meet as doubles (complex: their float parts; complex and real do not mix), and
 * integers saturate. Errors go through udf_fail and return -1. */

/** How two values combine: merge rules and accumulation. */
typedef enum udf_merge_op {
    UDF_MERGE_ADD,    /**< a + b (bool: or) */
    UDF_MERGE_MIN,    /**< the smaller; NaN wins (np.minimum); not for complex */
    UDF_MERGE_MAX,    /**< the larger; NaN wins (np.maximum); not for complex */
    UDF_MERGE_ASSIGN, /**< b: copy (and convert) */
} udf_merge_op;

/** dest = dest op src, elementwise, for two views of the same shape (any dtypes). */
int udf_view_combine(udf_view dest, udf_view src, udf_merge_op op);
/** dest = dest op frame for every frame of `frames` ([n, *dest shape]): with
 *  UDF_MERGE_ADD, `udf_view_accumulate(udf_buffer(results, "sum"), &tile->data, ...)`
 *  adds a tile's frames to a sig buffer's part under the tile. */
int udf_view_accumulate(udf_view dest, const udf_view *frames, udf_merge_op op);
/** Every element = value (complex: value + 0i). */
int udf_view_fill(udf_view v, double value);
/** Every element = the identity of `op`: +inf / -inf (integers: their extremes) for
 *  UDF_MERGE_MIN / UDF_MERGE_MAX, 0 otherwise. */
int udf_view_fill_identity(udf_view v, udf_merge_op op);
/** The sum of the elements as a double (complex: of the real parts). */
double udf_view_sum(const udf_view *v);
/** out[f] += sum of frame f of the tile, for a nav buffer's view of the tile (T,). */
int udf_tile_add_frame_sums(const udf_tile *t, udf_view out);
/** Merge buffer `name` of `src` into `dest` (whole buffers): `udf_merge(dest, src,
 *  "intensity", UDF_MERGE_ADD)` is LiberTEM's `dest.intensity[:] += src.intensity`. */
int udf_merge(udf_buffers *dest, const udf_buffers *src, const char *name, udf_merge_op op);

/* ------------------------------------------------------------------------------------ */
/* The plugin */

typedef struct udf_run_plan {
    udf_method method;
    udf_dtype input_dtype;
    bool native_dtype;
    uint64_t tile_depth;
    uint64_t tile_size;
} udf_run_plan;

/** A plugin: its description and callbacks. Every callback is optional except
 *  result_buffers and the process_* named by the description's methods. */
typedef struct udf_plugin {
    udf_description description;
    /** Run-time choices; `out` starts from the description. */
    int (*plan)(const udf_params *params, const udf_dataset *dataset, udf_run_plan *out);
    int (*result_buffers)(const udf_params *params, const udf_dataset *dataset, udf_decls *out);
    /** Per partition, before preprocess: prepare ctx->task. */
    int (*init)(udf_context *ctx);
    int (*preprocess)(udf_context *ctx, udf_buffers *results);
    int (*process_tile)(udf_context *ctx, const udf_tile *tile, udf_buffers *results);
    int (*process_frame)(udf_context *ctx, const udf_frame *frame, udf_buffers *results);
    int (*process_partition)(udf_context *ctx, const udf_tile *tile, udf_buffers *results);
    int (*postprocess)(udf_context *ctx, udf_buffers *results);
    /** Free ctx->task (called when the partition's buffers are exported). */
    void (*finish)(udf_context *ctx);
    /** dest += src, pure (custom_merge). */
    int (*merge)(const udf_merge_context *ctx, udf_buffers *dest, const udf_buffers *src);
    /** Results from the merged buffers, pure (custom_results). Buffers not added are
     *  passed through by the host (normal ones). */
    int (*get_results)(const udf_results_context *ctx, const udf_buffers *buffers, udf_results *out);
} udf_plugin;

/** Defined by UDF_EXPORT: the plugin the SDK serves. */
const udf_plugin *udf_plugin_get(void);

/** Export a plugin (a `udf_plugin` variable), once per program. */
#define UDF_EXPORT(plugin)                                                                                 \
    const udf_plugin *udf_plugin_get(void) { return &(plugin); }

/* ------------------------------------------------------------------------------------ */
/* Frame maps (udf_map.c): LiberTEM's AutoUDF / ctx.map */

/** A function of one frame. The plugin's nav buffer `result` holds its value per frame. */
typedef struct udf_map {
    /** The frame's element type (the preferred input dtype; frames of another input dtype
     *  are converted to it). */
    udf_dtype frame_dtype;
    /** The value's element type. */
    udf_dtype value_dtype;
    /** The value's shape for a dataset: writes it to `shape` and returns its number of
     *  axes. NULL: the value is one number. */
    size_t (*shape)(const udf_dataset *ds, uint64_t *shape);
    /** Write the value for `frame` (a view of the signal shape) to `out` (the frame's
     *  entry of `result`: the value's shape, or (1,)). Returns 0 or udf_fail(...). */
    int (*f)(const udf_view *frame, udf_view *out);
} udf_map;

/** Defined by UDF_EXPORT_MAP. */
const udf_map *udf_map_get(void);
/* The callbacks UDF_EXPORT_MAP's plugin uses. */
int udf_map_result_buffers(const udf_params *params, const udf_dataset *dataset, udf_decls *out);
int udf_map_init(udf_context *ctx);
void udf_map_finish(udf_context *ctx);
int udf_map_process_frame(udf_context *ctx, const udf_frame *frame, udf_buffers *results);

/** Export a frame map as the plugin, once per program:
 *
 *      static int sum(const udf_view *frame, udf_view *out) {
 *          *(double *)out->data = udf_view_sum(frame);
 *          return 0;
 *      }
 *      UDF_EXPORT_MAP("frame-sum", "The sum of each frame", UDF_F32, UDF_F64, NULL, sum)
 */
#define UDF_EXPORT_MAP(NAME, SUMMARY, FRAME_DTYPE, VALUE_DTYPE, SHAPE, F)                                        \
    static const udf_map udf_map_value_ = {(FRAME_DTYPE), (VALUE_DTYPE), (SHAPE), (F)};                          \
    const udf_map *udf_map_get(void) { return &udf_map_value_; }                                               \
    UDF_OMITTED_FIELDS_ARE_ZERO_                                                                               \
    static const udf_plugin udf_map_plugin_ = {                                                                \
        .description = {.name = (NAME), .version = "0.1.0", .summary = (SUMMARY), .methods = {UDF_METHOD_FRAME}, \
                        .n_methods = 1, .input_dtype = (FRAME_DTYPE)},                                         \
        .result_buffers = udf_map_result_buffers,                                                              \
        .init = udf_map_init,                                                                                  \
        .process_frame = udf_map_process_frame,                                                                \
        .finish = udf_map_finish,                                                                              \
    };                                                                                                         \
    UDF_END_OMITTED_FIELDS_                                                                                    \
    UDF_EXPORT(udf_map_plugin_)

/* ------------------------------------------------------------------------------------ */
/* Host arrays (udf_array.c): arrays that live in the host — the contract's `arrays`
 * interface (docs/contract.md, "Host arrays"), the C face of the Rust SDK's `Array`.
 *
 * A plugin whose description sets `.host_arrays = true` gets its tiles as host arrays:
 * the tile is never copied into the plugin, and per-tile work is a few host calls that
 * run at the host's speed:
 *
 *     static int tile(udf_context *ctx, const udf_tile *t, udf_buffers *results) {
 *         udf_array *x = udf_array_tile();                   // [frames, *sig], in the host
 *         udf_array *s = udf_array_sum(x, UDF_AXES(0));      // np.sum(x, axis=0), in the host
 *         int rc = udf_view_combine_array(udf_buffer(results, "intensity"), s, UDF_MERGE_ADD);
 *         udf_array_drop(s);
 *         udf_array_drop(x);
 *         return rc;
 *     }
 *
 * Ownership: every function that returns a `udf_array *` returns a new handle the caller
 * owns and drops with udf_array_drop (a view, too: it keeps its base alive in the host).
 * Arguments are borrowed. The host frees an instance's arrays when its partition ends,
 * but a plugin that keeps one handle per tile grows towards the live-array cap (4096):
 * drop every handle in the callback that made it.
 *
 * Errors: a failed call returns NULL (or -1) and records the host's typed array-error as
 * the SDK's error (udf_fail: kind `invalid-data`, message "array <kind> error: <the
 * host's message, naming the operation and the shapes>"), so `if (!s) return -1;` hands
 * it to the host. udf_array_last_error() tells the kind. A NULL array argument (from an
 * earlier failed call) makes a call fail at once and keeps the first error, so a chain
 * of calls may be checked once at its end.
 */

/** An array in the host (opaque handle). */
typedef struct udf_array udf_array;

/** The kinds of the host's array-error (wit/udf.wit), and UDF_ARRAY_OK. */
typedef enum udf_array_error_kind {
    UDF_ARRAY_SHAPE,       /**< shapes that do not broadcast, reshape or multiply together */
    UDF_ARRAY_AXIS,        /**< an axis out of range or repeated */
    UDF_ARRAY_DTYPE,       /**< a dtype the operation does not take */
    UDF_ARRAY_INDEX,       /**< an index out of range or malformed */
    UDF_ARRAY_VALUE,       /**< a value that cannot be used */
    UDF_ARRAY_MEMORY,      /**< more memory or more arrays than the plugin may have */
    UDF_ARRAY_EXPIRED,     /**< a view of a tile used after its process call returned */
    UDF_ARRAY_UNSUPPORTED, /**< not supported for this array's representation */
    UDF_ARRAY_OK,          /**< no array call has failed */
} udf_array_error_kind;

/** The kind of the last failed array call (UDF_ARRAY_OK if none has failed). */
udf_array_error_kind udf_array_last_error(void);
/** "shape", "axis", ... */
const char *udf_array_error_kind_name(udf_array_error_kind kind);

/* Operations: the order of the WIT enums (the one table: host/src/arrays/ops.rs). */

/** Elementwise functions of one array. */
typedef enum udf_unary_op {
    UDF_ABS, UDF_NEGATIVE, UDF_POSITIVE, UDF_SQUARE, UDF_SQRT, UDF_EXP, UDF_EXPM1, UDF_LOG, UDF_LOG1P,
    UDF_LOG2, UDF_LOG10, UDF_SIN, UDF_COS, UDF_TAN, UDF_ASIN, UDF_ACOS, UDF_ATAN, UDF_SINH, UDF_COSH,
    UDF_TANH, UDF_ASINH, UDF_ACOSH, UDF_ATANH, UDF_FLOOR, UDF_CEIL, UDF_TRUNC, UDF_ROUND, UDF_SIGN,
    UDF_ISNAN, UDF_ISINF, UDF_ISFINITE, UDF_LOGICAL_NOT, UDF_BITWISE_INVERT, UDF_REAL, UDF_IMAG, UDF_CONJ,
} udf_unary_op;

/** Elementwise functions of two operands (broadcasting, NumPy 2 promotion). */
typedef enum udf_binary_op {
    UDF_ADD, UDF_SUBTRACT, UDF_MULTIPLY, UDF_DIVIDE, UDF_FLOOR_DIVIDE, UDF_REMAINDER, UDF_POW,
    UDF_MAXIMUM, UDF_MINIMUM, UDF_EQUAL, UDF_NOT_EQUAL, UDF_LESS, UDF_LESS_EQUAL, UDF_GREATER,
    UDF_GREATER_EQUAL, UDF_LOGICAL_AND, UDF_LOGICAL_OR, UDF_LOGICAL_XOR, UDF_BITWISE_AND, UDF_BITWISE_OR,
    UDF_BITWISE_XOR, UDF_BITWISE_LEFT_SHIFT, UDF_BITWISE_RIGHT_SHIFT, UDF_ATAN2, UDF_HYPOT, UDF_COPYSIGN,
} udf_binary_op;

/** Reductions over some axes (or all). */
typedef enum udf_reduce_op {
    UDF_SUM, UDF_PROD, UDF_MEAN, UDF_MIN, UDF_MAX, UDF_VAR, UDF_STD, UDF_ARGMIN, UDF_ARGMAX, UDF_ANY,
    UDF_ALL, UDF_COUNT_NONZERO, UDF_NANSUM, UDF_NANMEAN, UDF_NANMIN, UDF_NANMAX, UDF_NANVAR, UDF_NANSTD,
} udf_reduce_op;

/** Fourier transforms over two axes and the shifts. */
typedef enum udf_fft_op { UDF_FFT2, UDF_IFFT2, UDF_RFFT2, UDF_IRFFT2, UDF_FFTSHIFT, UDF_IFFTSHIFT } udf_fft_op;

/* ------------------------------------------------------------------------------------ */
/* Operands, axes, indices */

/** What an operand is. */
typedef enum udf_operand_kind {
    UDF_OPERAND_ARRAY, UDF_OPERAND_BOOL, UDF_OPERAND_INT, UDF_OPERAND_FLOAT
} udf_operand_kind;

/** An operand: an array, or a Python-like scalar ("weak" in promotion: it takes the
 *  array's dtype). Build one with udf_arr, udf_float, udf_int, udf_bool. */
typedef struct udf_operand {
    udf_operand_kind kind;
    const udf_array *array; /**< UDF_OPERAND_ARRAY (NULL: the call fails) */
    int64_t i;              /**< UDF_OPERAND_BOOL, UDF_OPERAND_INT */
    double f;               /**< UDF_OPERAND_FLOAT */
} udf_operand;

UDF_OMITTED_FIELDS_ARE_ZERO_
static inline udf_operand udf_arr(const udf_array *a) { return UDF_LITERAL_(udf_operand){.kind = UDF_OPERAND_ARRAY, .array = a}; }
static inline udf_operand udf_float(double v) { return UDF_LITERAL_(udf_operand){.kind = UDF_OPERAND_FLOAT, .f = v}; }
static inline udf_operand udf_int(int64_t v) { return UDF_LITERAL_(udf_operand){.kind = UDF_OPERAND_INT, .i = v}; }
static inline udf_operand udf_bool(bool v) { return UDF_LITERAL_(udf_operand){.kind = UDF_OPERAND_BOOL, .i = v}; }
UDF_END_OMITTED_FIELDS_

/* A list as two arguments (pointer, count) from its values: a compound literal in C, a
 * braced list bound to an array reference in C++ (both live until the end of the call
 * they are passed to). */
#ifdef __cplusplus
}
template <typename T, size_t N> static inline const T *udf_list_items_(const T (&items)[N]) { return items; }
template <typename T, size_t N> static inline size_t udf_list_count_(const T (&)[N]) { return N; }
#define UDF_LIST_(T, ...) udf_list_items_<T>({__VA_ARGS__}), udf_list_count_<T>({__VA_ARGS__})
extern "C" {
#else
#define UDF_LIST_(T, ...) ((const T[]){__VA_ARGS__}), (sizeof((const T[]){__VA_ARGS__}) / sizeof(T))
#endif

/** A list of axes as two arguments (pointer, count): `udf_array_sum(x, UDF_AXES(1, 2))`.
 *  `NULL, 0` is no axes at all; the reductions take `UDF_ALL_AXES` for all. */
#define UDF_AXES(...) UDF_LIST_(int64_t, __VA_ARGS__)
/** Every axis (a reduction over the whole array). */
#define UDF_ALL_AXES NULL, 0
/** A shape as two arguments: `udf_array_zeros(UDF_SHAPE(16, 256), UDF_F32)`. */
#define UDF_SHAPE(...) UDF_LIST_(uint64_t, __VA_ARGS__)

/** An absent start, stop or step of a slice (Python's default). */
#define UDF_NONE INT64_MIN

/** What an entry of an index is. */
typedef enum udf_index_kind { UDF_INDEX_SLICE, UDF_INDEX_AT, UDF_INDEX_NEW_AXIS, UDF_INDEX_ELLIPSIS } udf_index_kind;

/** One entry of a basic index (`x[1:5:2, None, ..., 3]`). */
typedef struct udf_index {
    udf_index_kind kind;
    int64_t start, stop, step; /**< slice: UDF_NONE where absent; at: `start` */
} udf_index;

/** `start:stop:step` (UDF_NONE for an absent one). */
static inline udf_index udf_slice(int64_t start, int64_t stop, int64_t step) {
    return UDF_LITERAL_(udf_index){UDF_INDEX_SLICE, start, stop, step};
}
/** `start:stop`. */
static inline udf_index udf_range(int64_t start, int64_t stop) { return udf_slice(start, stop, UDF_NONE); }
/** `:`. */
static inline udf_index udf_all(void) { return udf_slice(UDF_NONE, UDF_NONE, UDF_NONE); }
/** One position (negative counts from the end); the axis goes away. */
static inline udf_index udf_at(int64_t i) { return UDF_LITERAL_(udf_index){UDF_INDEX_AT, i, 0, 0}; }
/** `None`: a new axis of length 1. */
static inline udf_index udf_new_axis(void) { return UDF_LITERAL_(udf_index){UDF_INDEX_NEW_AXIS, 0, 0, 0}; }
/** `...`. */
static inline udf_index udf_ellipsis(void) { return UDF_LITERAL_(udf_index){UDF_INDEX_ELLIPSIS, 0, 0, 0}; }
/** An index as two arguments: `udf_array_get(x, UDF_INDEX(udf_at(0), udf_range(2, 5)))`. */
#define UDF_INDEX(...) UDF_LIST_(udf_index, __VA_ARGS__)

/* ------------------------------------------------------------------------------------ */
/* Sources and constructors */

/** The most bytes one call hands the host (it takes at most 1 MiB from a plugin per call
 *  during init and process): udf_array_from_bytes sends larger arrays in pieces. */
#define UDF_ARRAY_CHUNK_BYTES ((size_t)1 << 19)
/** The tile size a plugin with host arrays asks for when its description names none. */
#define UDF_HOST_ARRAY_TILE_BYTES ((uint64_t)8 << 20)

/** The tile of the current process call (a plugin with `.host_arrays`): a read-only view
 *  of the host's memory, [frames, *sig_shape], valid until the callback returns. */
udf_array *udf_array_tile(void);
/** `zeros(shape, dtype)`. */
udf_array *udf_array_zeros(const uint64_t *shape, size_t ndim, udf_dtype dtype);
/** `full(shape, value, dtype)`. */
udf_array *udf_array_full(const uint64_t *shape, size_t ndim, udf_operand value, udf_dtype dtype);
/** `arange(start, stop, step, dtype)`. */
udf_array *udf_array_arange(double start, double stop, double step, udf_dtype dtype);
/** An array of `dtype` and `shape` from `nbytes` bytes in C order (little-endian); sent in
 *  pieces of UDF_ARRAY_CHUNK_BYTES when larger. */
udf_array *udf_array_from_bytes(udf_dtype dtype, const uint64_t *shape, size_t ndim, const void *data, size_t nbytes);
/** A copy of a view (an array parameter, a buffer) in the host. */
udf_array *udf_array_from_view(const udf_view *v);
/** Drop a handle (NULL is fine). */
void udf_array_drop(udf_array *a);

/* ------------------------------------------------------------------------------------ */
/* Properties and copies out */

/** Number of axes; writes the shape (at most UDF_MAX_DIMS values) when `shape` is not
 *  NULL. An array of more axes fails (returns 0 and records an error). */
size_t udf_array_shape(const udf_array *a, uint64_t *shape);
udf_dtype udf_array_dtype(const udf_array *a);
/** Number of elements. */
size_t udf_array_size(const udf_array *a);
/** The elements in C order, copied into the plugin: malloc'd (free it), `*nbytes` long. */
void *udf_array_to_bytes(const udf_array *a, size_t *nbytes);
/** `dest = dest op a` for a view of the plugin's memory (a result buffer's view) and an
 *  array of the same shape: `udf_view_combine_array(udf_buffer(results, "x"), a,
 *  UDF_MERGE_ADD)` is LiberTEM's `self.results.x[:] += a`. Any dtypes (udf_view_combine). */
int udf_view_combine_array(udf_view dest, const udf_array *a, udf_merge_op op);

/* ------------------------------------------------------------------------------------ */
/* Views and copies in the host */

/** `x[index]`: a view. */
udf_array *udf_array_get(const udf_array *x, const udf_index *index, size_t n);
/** `reshape(x, shape)`, one -1 allowed: a view when the layout allows. */
udf_array *udf_array_reshape(const udf_array *x, const int64_t *shape, size_t ndim);
/** `permute_dims(x, axes)`; `NULL, 0` reverses them (`x.T`). */
udf_array *udf_array_permute_dims(const udf_array *x, const int64_t *axes, size_t naxes);
/** `astype(x, dtype)`: a C-order copy. */
udf_array *udf_array_astype(const udf_array *x, udf_dtype dtype);
/** `x[index] = value` (broadcast and cast to x's dtype). Returns 0 or -1. */
int udf_array_set(const udf_array *x, const udf_index *index, size_t n, udf_operand value);
/** `x[index] += value` in place (NumPy's same_kind casting). Returns 0 or -1. */
int udf_array_add_at(const udf_array *x, const udf_index *index, size_t n, udf_operand value);

/* ------------------------------------------------------------------------------------ */
/* Computation */

/** An elementwise function: `udf_array_unary(UDF_SQRT, x)`. */
udf_array *udf_array_unary(udf_unary_op op, const udf_array *x);
/** `op(a, b)`, broadcasting: `udf_array_binary(UDF_MULTIPLY, udf_arr(x), udf_float(2))`. */
udf_array *udf_array_binary(udf_binary_op op, udf_operand a, udf_operand b);
static inline udf_array *udf_array_add(udf_operand a, udf_operand b) { return udf_array_binary(UDF_ADD, a, b); }
static inline udf_array *udf_array_subtract(udf_operand a, udf_operand b) { return udf_array_binary(UDF_SUBTRACT, a, b); }
static inline udf_array *udf_array_multiply(udf_operand a, udf_operand b) { return udf_array_binary(UDF_MULTIPLY, a, b); }
static inline udf_array *udf_array_divide(udf_operand a, udf_operand b) { return udf_array_binary(UDF_DIVIDE, a, b); }

/** The options of a reduction (zero-initialised: all axes, no keepdims, the default
 *  dtype, correction 0). */
typedef struct udf_reduce_options {
    /** The axes to reduce; NULL: all. */
    const int64_t *axes;
    size_t naxes;
    /** Keep the reduced axes with length 1. */
    bool keepdims;
    /** Accumulate in and return `dtype` (sum, prod, mean, var, std and the NaN forms). */
    bool has_dtype;
    udf_dtype dtype;
    /** Degrees of freedom subtracted from the count (var, std; NumPy's ddof). */
    double correction;
} udf_reduce_options;

/** A reduction; `options` NULL: over all axes with the defaults. */
udf_array *udf_array_reduce(udf_reduce_op op, const udf_array *x, const udf_reduce_options *options);
/** `sum(x, axis=axes)` (`UDF_ALL_AXES`: all), in the array API's default dtype (integers:
 *  int64/uint64; floats keep theirs). */
UDF_OMITTED_FIELDS_ARE_ZERO_
static inline udf_array *udf_array_sum(const udf_array *x, const int64_t *axes, size_t naxes) {
    udf_reduce_options o = {.axes = axes, .naxes = naxes};
    return udf_array_reduce(UDF_SUM, x, axes ? &o : NULL);
}
/** `sum(x, axis=axes, dtype=dtype)`. */
static inline udf_array *udf_array_sum_as(const udf_array *x, const int64_t *axes, size_t naxes, udf_dtype dtype) {
    udf_reduce_options o = {.axes = axes, .naxes = naxes, .has_dtype = true, .dtype = dtype};
    return udf_array_reduce(UDF_SUM, x, &o);
}
UDF_END_OMITTED_FIELDS_

/** `where(condition, a, b)`. */
udf_array *udf_array_where(const udf_array *condition, udf_operand a, udf_operand b);
/** `a @ b`: a stack of masks [m, p] against frames [n, p] is `frames @ masks.T`. */
udf_array *udf_array_matmul(const udf_array *a, const udf_array *b);
/** `tensordot(a, b, axes=(axes_a, axes_b))` (`n` axes each). */
udf_array *udf_array_tensordot(const udf_array *a, const udf_array *b, const int64_t *axes_a,
                               const int64_t *axes_b, size_t n);
/** A Fourier transform or shift over `axes` (`NULL, 0`: the last two). */
udf_array *udf_array_fft(udf_fft_op op, const udf_array *x, const int64_t *axes, size_t naxes);

#ifdef __cplusplus
}
#endif
#endif
