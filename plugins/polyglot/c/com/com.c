/* `com`: centre of mass per frame and the derived field (LiberTEM's CoMUDF,
 * BUILTINS.md section 5), in C.
 *
 * Params: cy, cx (NaN = frame centre Y // 2, X // 2), r (disk radius, inf = whole frame),
 * ri (inner radius of a ring, 0 = disk), scan_rotation (degrees), flip_y, regression (-1:
 * none, 0: subtract the mean field over the valid positions).
 *
 * Per frame, over the disk `d^2 <= r^2` (or the ring `ri^2 < d^2 <= r^2`):
 *   I = sum F, Sy = sum F y, Sx = sum F x             (private nav buffer raw_mask_result)
 *   shift = (Sy / I - cy, Sx / I - cx)                (0 where I == 0)
 *   raw_com = shift + (cy, cx), raw_shifts = shift
 *   field = R(scan_rotation) @ Fy @ shift, R(t) = [[cos t, sin t], [-sin t, cos t]],
 *           Fy = [[-1, 0], [0, 1]] if flip_y
 *   field_y, field_x, magnitude = |field|,
 *   divergence = d field_y / dy + d field_x / dx, curl = d field_y / dx - d field_x / dy
 *   (np.gradient on the full nav grid: central differences, one-sided at the edges,
 *   NaN outside the ROI; 0 along an axis of length 1).
 * Results come back float64 except raw_com and raw_shifts (input dtype), as in LiberTEM.
 * Not implemented: regression 1 (linear fit) and a user-given regression matrix. */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "udf_sdk.h"

static const double PI = 3.14159265358979323846;

static const udf_param_spec PARAMS[] = {
    UDF_PARAM_FLOAT_DEFAULT("cy", "centre row in pixels (NaN: sig height // 2)", NAN),
    UDF_PARAM_FLOAT_DEFAULT("cx", "centre column in pixels (NaN: sig width // 2)", NAN),
    UDF_PARAM_FLOAT_DEFAULT("r", "outer radius in pixels (inf: whole frame)", INFINITY),
    UDF_PARAM_FLOAT_DEFAULT("ri", "inner radius in pixels (0: a disk)", 0.0),
    UDF_PARAM_FLOAT_DEFAULT("scan_rotation", "scan rotation in degrees", 0.0),
    UDF_PARAM_BOOL_DEFAULT("flip_y", "flip the y axis of the shifts", false),
    UDF_PARAM_INT_DEFAULT("regression", "-1: none, 0: subtract the mean field", -1),
};

typedef struct com_params {
    double cy, cx, r, ri, rotation;
    bool flip_y;
    int64_t regression;
} com_params;

static int read_params(const udf_params *p, const udf_dataset *ds, com_params *out) {
    if (ds->sig_dims != 2) return udf_fail(UDF_INVALID_DATA, "com needs 2-D frames, found %zu sig dims", ds->sig_dims);
    /* Divergence and curl are gradients over a 2-D scan, as in the Rust plugin. */
    if (ds->nav_dims != 2) return udf_fail(UDF_INVALID_DATA, "com needs a 2-D scan, found %zu nav dims", ds->nav_dims);
    if (ds->nav_shape[0] < 2 || ds->nav_shape[1] < 2)
        return udf_fail(UDF_INVALID_DATA,
                        "com needs at least 2 scan positions along each nav axis for divergence and curl, but the nav "
                        "shape is (%zu, %zu)",
                        (size_t)ds->nav_shape[0], (size_t)ds->nav_shape[1]);
    if (udf_param_float(p, "cy", &out->cy) || udf_param_float(p, "cx", &out->cx) || udf_param_float(p, "r", &out->r) ||
        udf_param_float(p, "ri", &out->ri) || udf_param_float(p, "scan_rotation", &out->rotation) ||
        udf_param_bool(p, "flip_y", &out->flip_y) || udf_param_int(p, "regression", &out->regression))
        return -1;
    if (isnan(out->cy)) out->cy = (double)(ds->sig_shape[0] / 2);
    if (isnan(out->cx)) out->cx = (double)(ds->sig_shape[1] / 2);
    if (out->ri >= out->r) return udf_fail(UDF_BAD_PARAM, "ri (%g) must be smaller than r (%g)", out->ri, out->r);
    if (out->regression != -1 && out->regression != 0)
        return udf_fail(UDF_BAD_PARAM, "regression %lld is not supported (expected -1 or 0)",
                        (long long)out->regression);
    return 0;
}

static udf_dtype result_dtype(const udf_dataset *ds) { return ds->input_dtype == UDF_F64 ? UDF_F64 : UDF_F32; }

static int result_buffers(const udf_params *params, const udf_dataset *ds, udf_decls *out) {
    com_params p;
    if (read_params(params, ds, &p)) return -1;
    if (udf_dtype_is_complex(ds->input_dtype)) return udf_fail(UDF_INVALID_DATA, "com needs real input");
    udf_dtype d = result_dtype(ds);
    static const uint64_t three[] = {3}, two[] = {2}, reg[] = {3, 2};
    int err = udf_decl(out, "raw_mask_result", UDF_NAV, d, three, 1, UDF_PRIVATE);
    err |= udf_decl(out, "raw_com", UDF_NAV, d, two, 1, UDF_RESULT_ONLY);
    err |= udf_decl(out, "raw_shifts", UDF_NAV, d, two, 1, UDF_RESULT_ONLY);
    err |= udf_decl(out, "field", UDF_NAV, d, two, 1, UDF_RESULT_ONLY);
    static const char *scalars[] = {"field_y", "field_x", "magnitude", "divergence", "curl"};
    for (size_t i = 0; i < 5; i++) err |= udf_decl(out, scalars[i], UDF_NAV, d, NULL, 0, UDF_RESULT_ONLY);
    err |= udf_decl(out, "regression", UDF_SINGLE, UDF_F64, reg, 2, UDF_RESULT_ONLY);
    return err;
}

/* Task data: the disk or ring of the frame as a mask (1 inside, 0 outside). */
static int init(udf_context *ctx) {
    com_params p;
    if (read_params(ctx->params, ctx->dataset, &p)) return -1;
    size_t sy = ctx->dataset->sig_shape[0], sx = ctx->dataset->sig_shape[1];
    unsigned char *mask = malloc(sy * sx);
    if (!mask) return udf_fail(UDF_INTERNAL, "out of memory for a %zu x %zu mask", sy, sx);
    for (size_t y = 0; y < sy; y++) {
        for (size_t x = 0; x < sx; x++) {
            double d2 = ((double)y - p.cy) * ((double)y - p.cy) + ((double)x - p.cx) * ((double)x - p.cx);
            mask[y * sx + x] = d2 <= p.r * p.r && (p.ri <= 0 || d2 > p.ri * p.ri);
        }
    }
    ctx->task = mask;
    return 0;
}

static void finish(udf_context *ctx) { free(ctx->task); }

#define ACCUMULATE(T)                                                                                              \
    for (size_t f = 0; f < tile->frames; f++) {                                                                    \
        double i = 0, gy = 0, gx = 0;                                                                              \
        for (size_t y = 0; y < h; y++) {                                                                           \
            const T *row = (const T *)tile->data.data + (f * h + y) * w;                                           \
            const unsigned char *m = mask + (y0 + y) * sx + x0;                                                    \
            for (size_t x = 0; x < w; x++) {                                                                       \
                double v = m[x] ? (double)row[x] : 0.0;                                                            \
                i += v;                                                                                            \
                gy += v * (double)(y0 + y);                                                                        \
                gx += v * (double)(x0 + x);                                                                        \
            }                                                                                                      \
        }                                                                                                          \
        add(&out, f, i, gy, gx);                                                                                   \
    }

static void add(const udf_view *out, size_t f, double i, double gy, double gx) {
    size_t idx[2] = {f, 0};
    if (out->dtype == UDF_F64) {
        double *p = udf_view_ptr(out, idx);
        p[0] += i, p[1] += gy, p[2] += gx;
    } else {
        float *p = udf_view_ptr(out, idx);
        p[0] += (float)i, p[1] += (float)gy, p[2] += (float)gx;
    }
}

static int process_tile(udf_context *ctx, const udf_tile *tile, udf_buffers *results) {
    const unsigned char *mask = ctx->task;
    udf_view out = udf_buffer(results, "raw_mask_result"); /* (frames in tile, 3) */
    size_t sx = ctx->dataset->sig_shape[1];
    size_t y0 = tile->sig_origin[0], x0 = tile->sig_origin[1], h = tile->sig_shape[0], w = tile->sig_shape[1];
    switch (tile->data.dtype) {
    case UDF_F32: ACCUMULATE(float) break;
    case UDF_F64: ACCUMULATE(double) break;
    default: return udf_fail(UDF_INVALID_DATA, "com needs float32 or float64 tiles, found %s", udf_dtype_name(tile->data.dtype));
    }
    return 0;
}

/* np.gradient of a (ny, nx) grid along one axis. */
static void gradient(const double *f, double *out, size_t ny, size_t nx, int axis) {
    size_t n = axis == 0 ? ny : nx, step = axis == 0 ? nx : 1;
    for (size_t y = 0; y < ny; y++) {
        for (size_t x = 0; x < nx; x++) {
            size_t k = axis == 0 ? y : x, at = y * nx + x;
            if (n < 2) out[at] = 0;
            else if (k == 0) out[at] = f[at + step] - f[at];
            else if (k == n - 1) out[at] = f[at] - f[at - step];
            else out[at] = (f[at + step] - f[at - step]) / 2;
        }
    }
}

static int get_results(const udf_results_context *ctx, const udf_buffers *buffers, udf_results *out) {
    com_params p;
    if (read_params(ctx->params, ctx->dataset, &p)) return -1;
    const udf_dataset *ds = ctx->dataset;
    udf_view raw = udf_buffer(buffers, "raw_mask_result"); /* (N, 3), compressed */
    size_t n = raw.shape[0];
    size_t nav = 1;
    for (size_t a = 0; a < ds->nav_dims; a++) nav *= ds->nav_shape[a];
    size_t ny = ds->nav_dims == 2 ? ds->nav_shape[0] : 1, nx = nav / (ny ? ny : 1);
    /* Compressed index -> full nav position. */
    size_t *pos = malloc((n ? n : 1) * sizeof *pos);
    double *grid = malloc(6 * (nav ? nav : 1) * sizeof *grid);
    double *res = malloc(13 * (n ? n : 1) * sizeof *res);
    if (!pos || !grid || !res) return udf_fail(UDF_INTERNAL, "out of memory for %zu positions", nav);
    for (size_t i = 0, k = 0; i < nav && k < n; i++)
        if (!ctx->roi || (i < ctx->roi_len && ctx->roi[i])) pos[k++] = i;
    double *fy = grid, *fx = grid + nav, *dyy = grid + 2 * nav, *dxx = grid + 3 * nav, *dyx = grid + 4 * nav,
           *dxy = grid + 5 * nav;
    for (size_t i = 0; i < nav; i++) fy[i] = fx[i] = NAN;
    double *raw_com = res, *raw_shifts = res + 2 * n, *field = res + 4 * n, *field_y = res + 6 * n,
           *field_x = res + 7 * n, *magnitude = res + 8 * n, *divergence = res + 9 * n, *curl = res + 10 * n;
    double c = cos(p.rotation * PI / 180), s = sin(p.rotation * PI / 180);
    for (size_t k = 0; k < n; k++) {
        double i = udf_view_get_f64(&raw, 3 * k), sy = udf_view_get_f64(&raw, 3 * k + 1),
               sx = udf_view_get_f64(&raw, 3 * k + 2);
        double shift_y = i == 0 ? 0 : sy / i - p.cy, shift_x = i == 0 ? 0 : sx / i - p.cx;
        raw_com[2 * k] = shift_y + p.cy, raw_com[2 * k + 1] = shift_x + p.cx;
        raw_shifts[2 * k] = shift_y, raw_shifts[2 * k + 1] = shift_x;
        double y = p.flip_y ? -shift_y : shift_y;
        field[2 * k] = c * y + s * shift_x, field[2 * k + 1] = -s * y + c * shift_x;
    }
    double regression[6] = {0};
    if (p.regression == 0) {
        double sum_y = 0, sum_x = 0;
        size_t valid = 0;
        for (size_t k = 0; k < n; k++) {
            if (k < ctx->valid_nav_len && ctx->valid_nav_mask[k]) sum_y += field[2 * k], sum_x += field[2 * k + 1], valid++;
        }
        if (valid) regression[0] = sum_y / (double)valid, regression[1] = sum_x / (double)valid;
        for (size_t k = 0; k < n; k++) field[2 * k] -= regression[0], field[2 * k + 1] -= regression[1];
    }
    for (size_t k = 0; k < n; k++) {
        field_y[k] = field[2 * k], field_x[k] = field[2 * k + 1];
        magnitude[k] = sqrt(field_y[k] * field_y[k] + field_x[k] * field_x[k]);
        fy[pos[k]] = field_y[k], fx[pos[k]] = field_x[k];
    }
    gradient(fy, dyy, ny, nx, 0), gradient(fx, dxx, ny, nx, 1);
    gradient(fy, dyx, ny, nx, 1), gradient(fx, dxy, ny, nx, 0);
    for (size_t k = 0; k < n; k++) {
        divergence[k] = dyy[pos[k]] + dxx[pos[k]];
        curl[k] = dyx[pos[k]] - dxy[pos[k]];
    }
    /* raw_com and raw_shifts in the buffer dtype, the rest float64 (as LiberTEM). */
    int err = 0;
    uint64_t shape2[2] = {n, 2}, shape1[1] = {n}, reg_shape[2] = {3, 2};
    if (raw.dtype == UDF_F32) {
        float *tmp = malloc((4 * n ? 4 * n : 1) * sizeof *tmp);
        if (!tmp) return udf_fail(UDF_INTERNAL, "out of memory");
        for (size_t k = 0; k < 4 * n; k++) tmp[k] = (float)res[k];
        err |= udf_result(out, "raw_com", UDF_F32, shape2, 2, tmp, 2 * n * sizeof *tmp);
        err |= udf_result(out, "raw_shifts", UDF_F32, shape2, 2, tmp + 2 * n, 2 * n * sizeof *tmp);
        free(tmp);
    } else {
        err |= udf_result(out, "raw_com", UDF_F64, shape2, 2, raw_com, 2 * n * sizeof(double));
        err |= udf_result(out, "raw_shifts", UDF_F64, shape2, 2, raw_shifts, 2 * n * sizeof(double));
    }
    err |= udf_result(out, "field", UDF_F64, shape2, 2, field, 2 * n * sizeof(double));
    static const char *scalars[] = {"field_y", "field_x", "magnitude", "divergence", "curl"};
    for (size_t i = 0; i < 5; i++) err |= udf_result(out, scalars[i], UDF_F64, shape1, 1, res + (6 + i) * n, n * sizeof(double));
    err |= udf_result(out, "regression", UDF_F64, reg_shape, 2, regression, sizeof regression);
    free(pos), free(grid), free(res);
    return err;
}

static const udf_plugin COM = {
    .description =
        {
            .name = "com",
            .version = "0.1.0",
            .summary = "Centre of mass per frame and its field (LiberTEM CoMUDF), C",
            .params = PARAMS,
            .n_params = sizeof PARAMS / sizeof PARAMS[0],
            .input_dtype = UDF_F32,
            .custom_results = true,
        },
    .result_buffers = result_buffers,
    .init = init,
    .process_tile = process_tile,
    .finish = finish,
    .get_results = get_results,
};

UDF_EXPORT(COM)
