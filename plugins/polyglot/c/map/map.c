/* `map`: the sum of every row of each frame, as a frame map (LiberTEM's
 * `ctx.map(f=functools.partial(np.sum, axis=-1))`), in C.
 *
 * Buffer `result` (kind nav, float32, extra shape (sig rows,)): result[n, y] = sum_x F_n[y, x].
 * Frames arrive as float32 (float64 data is converted). */

#include "udf_sdk.h"

static size_t rows(const udf_dataset *ds, uint64_t *shape) { return shape[0] = ds->sig_shape[0], 1; }

static int row_sums(const udf_view *frame, udf_view *out) {
    for (size_t y = 0; y < frame->shape[0]; y++) {
        udf_view row = udf_view_sub(frame, y);
        ((float *)out->data)[y] = (float)udf_view_sum(&row);
    }
    return 0;
}

UDF_EXPORT_MAP("row-sums", "Sum of each row of every frame (a frame map), C", UDF_F32, UDF_F32, rows, row_sums)
