//! `map`: the sum of every row of each frame, as a frame map (LiberTEM's
//! `ctx.map(f=functools.partial(np.sum, axis=-1))`), in Zig.
//!
//! Buffer `result` (kind nav, float32, extra shape (sig rows,)): result[n, y] = sum_x F_n[y, x].
//! Frames arrive as float32 (float64 data is converted).

const udf = @import("udf");
fn rows(ds: *const udf.c.udf_dataset, shape: []u64) usize { shape[0] = ds.sig_shape[0]; return 1; }
fn rowSums(frame: udf.View, out: []f32) void {
    for (out, 0..) |*o, y| o.* = @floatCast(udf.sum(udf.sub(frame, y)));
}
comptime { udf.exportMap("row-sums", "Sum of each row of every frame (a frame map), Zig", f32, f32, rows, rowSums); }
