/* `array-ops`: the C SDK's host-array calls beyond sum, for the tests (tests/all/polyglot.rs
 * checks every column against plain loops).
 *
 * Buffer `ops` (kind nav, float64, extra shape (3,)), per frame n over its pixels x:
 *   ops[n, 0] = sum of x * x where x > 0.5                (binary with scalars, where, reduce)
 *   ops[n, 1] = sum of (x + 1)                            (full, add_at, set, get)
 *   ops[n, 2] = sum_{i < 200000} (i % 7)                  (from_bytes in pieces, astype)
 * Tiles may cover part of each frame: columns 0 and 1 add up over the tiles, column 2 is
 * added by the tile at the signal's origin. */

#include <stdlib.h>

#include "udf_sdk.h"

#define BIG 200000 /* 800 KB of float32: more than one piece of UDF_ARRAY_CHUNK_BYTES */

static int result_buffers(const udf_params *params, const udf_dataset *dataset, udf_decls *out) {
    (void)params;
    (void)dataset;
    return udf_decl(out, "ops", UDF_NAV, UDF_F64, UDF_SHAPE(3), UDF_NORMAL);
}

/* The sum of BIG values sent to the host in pieces. */
static udf_array *big_total(void) {
    float *values = malloc(BIG * sizeof(float));
    if (!values) return NULL;
    for (size_t i = 0; i < BIG; i++) values[i] = (float)(i % 7);
    udf_array *big = udf_array_from_bytes(UDF_F32, UDF_SHAPE(BIG / 4, 4), values, BIG * sizeof(float));
    free(values);
    udf_array *wide = udf_array_astype(big, UDF_F64);
    udf_array *total = udf_array_sum(wide, UDF_ALL_AXES);
    udf_array_drop(wide);
    udf_array_drop(big);
    return total;
}

static int process_tile(udf_context *ctx, const udf_tile *tile, udf_buffers *results) {
    (void)ctx;
    int64_t sig_axes[UDF_MAX_DIMS];
    bool at_origin = true;
    for (size_t a = 0; a < tile->sig_dims; a++) {
        sig_axes[a] = (int64_t)a + 1;
        at_origin = at_origin && tile->sig_origin[a] == 0;
    }
    udf_array *x = udf_array_tile();
    /* column 0 */
    udf_array *above = udf_array_binary(UDF_GREATER, udf_arr(x), udf_float(0.5));
    udf_array *squares = udf_array_multiply(udf_arr(x), udf_arr(x));
    udf_array *kept = udf_array_where(above, udf_arr(squares), udf_float(0));
    udf_array *col0 = udf_array_sum(kept, sig_axes, tile->sig_dims);
    /* column 1: ones, then += x in place */
    uint64_t shape[UDF_MAX_DIMS + 1];
    size_t ndim = udf_array_shape(x, shape);
    udf_array *plus = udf_array_full(shape, ndim, udf_float(1), UDF_F32);
    int rc = udf_array_add_at(plus, UDF_INDEX(udf_ellipsis()), udf_arr(x));
    udf_array *col1 = udf_array_sum(plus, sig_axes, tile->sig_dims);
    /* the tile's rows of `ops`, filled column by column */
    udf_array *out = udf_array_zeros(UDF_SHAPE(tile->frames, 3), UDF_F64);
    if (!rc) rc = udf_array_set(out, UDF_INDEX(udf_all(), udf_at(0)), udf_arr(col0));
    if (!rc) rc = udf_array_set(out, UDF_INDEX(udf_all(), udf_at(1)), udf_arr(col1));
    if (!rc && at_origin) {
        udf_array *total = big_total();
        udf_array *column = udf_array_get(out, UDF_INDEX(udf_all(), udf_range(2, 3)));
        rc = udf_array_add_at(column, UDF_INDEX(udf_ellipsis()), udf_arr(total));
        udf_array_drop(column);
        udf_array_drop(total);
    }
    if (!rc) rc = udf_view_combine_array(udf_buffer(results, "ops"), out, UDF_MERGE_ADD);
    udf_array *arrays[] = {x, above, squares, kept, col0, plus, col1, out};
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++) udf_array_drop(arrays[i]);
    return rc;
}

static const udf_plugin ARRAY_OPS = {
    .description =
        {
            .name = "array-ops",
            .version = "0.1.0",
            .summary = "Host-array calls of the C SDK (a test plugin)",
            .input_dtype = UDF_F32,
            .host_arrays = true,
        },
    .result_buffers = result_buffers,
    .process_tile = process_tile,
};

UDF_EXPORT(ARRAY_OPS)
