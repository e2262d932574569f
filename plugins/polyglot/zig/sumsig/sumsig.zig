//! `sumsig`: the sum over each frame (LiberTEM's SumSigUDF), in Zig with host arrays.
//!
//! Buffer `intensity`: kind nav, dtype = input dtype, intensity[n] = sum_{y,x} F_n[y, x].
//! Merged natively by the host.

const udf = @import("udf");
const c = udf.c;

fn resultBuffers(_: ?*const c.udf_params, ds: [*c]const c.udf_dataset, out: ?*c.udf_decls) callconv(.c) c_int {
    return udf.declare(out, "intensity", c.UDF_NAV, ds.*.input_dtype, &.{}, c.UDF_NORMAL);
}

fn processTile(_: [*c]c.udf_context, t: [*c]const c.udf_tile, results: ?*c.udf_buffers) callconv(.c) c_int {
    sumFrames(t, udf.buffer(results, "intensity")) catch return -1;
    return 0;
}

/// A tile may hold only part of each frame: accumulate the partial sums over the signal
/// axes 1..sig_dims, in the host.
fn sumFrames(t: [*c]const c.udf_tile, acc: udf.View) udf.Array.Error!void {
    var axes: [c.UDF_MAX_DIMS]i64 = undefined;
    for (0..t.*.sig_dims) |a| axes[a] = @intCast(a + 1);
    const x = try udf.Array.tile();
    defer x.deinit();
    const s = try x.reduce(c.UDF_SUM, .{ .axes = axes[0..t.*.sig_dims], .dtype = t.*.data.dtype }); // (frames,)
    defer s.deinit();
    try s.combineInto(acc, .add);
}

const plugin = c.udf_plugin{
    .description = .{
        .name = "sumsig",
        .version = "0.1.0",
        .summary = "Sum over each frame (LiberTEM SumSigUDF), Zig",
        .input_dtype = c.UDF_F32,
        .host_arrays = true,
    },
    .result_buffers = resultBuffers,
    .process_tile = processTile,
};

export fn udf_plugin_get() *const c.udf_plugin {
    return &plugin;
}
