//! `sumsig`: the sum over each frame (LiberTEM's SumSigUDF), in Zig.
//!
//! Buffer `intensity`: kind nav, dtype = input dtype, intensity[n] = sum_{y,x} F_n[y, x].
//! Merged natively by the host.

const udf = @import("udf");
const c = udf.c;

fn resultBuffers(_: ?*const c.udf_params, ds: [*c]const c.udf_dataset, out: ?*c.udf_decls) callconv(.c) c_int {
    return udf.declare(out, "intensity", c.UDF_NAV, ds.*.input_dtype, &.{}, c.UDF_NORMAL);
}

/// Accumulate the (partial, when the tile covers part of the frame) sum of every frame;
/// complex values are (real, imaginary) pairs: `w` = 2 sums per frame.
fn sumFrames(comptime T: type, comptime w: usize, t: *const c.udf_tile, out: udf.View) void {
    const data = udf.flat(T, t.data).?; // tiles are contiguous
    const acc = udf.flat(T, out).?; // (frames in tile, [2])
    const n = t.frame_len;
    for (0..t.frames) |f| {
        inline for (0..w) |k| {
            var s: T = 0;
            var i: usize = k;
            while (i < w * n) : (i += w) {
                if (@typeInfo(T) == .int) s +%= data[f * w * n + i] else s += data[f * w * n + i];
            }
            if (@typeInfo(T) == .int) acc[f * w + k] +%= s else acc[f * w + k] += s;
        }
    }
}

fn processTile(_: [*c]c.udf_context, t: [*c]const c.udf_tile, results: ?*c.udf_buffers) callconv(.c) c_int {
    const out = udf.buffer(results, "intensity");
    inline for (udf.dtypes) |d| {
        if (t.*.data.dtype == d) {
            const complex = d == c.UDF_C64 or d == c.UDF_C128;
            sumFrames(udf.Elem(d), if (complex) 2 else 1, t, out);
        }
    }
    return 0;
}

const plugin = c.udf_plugin{
    .description = .{
        .name = "sumsig",
        .version = "0.1.0",
        .summary = "Sum over each frame (LiberTEM SumSigUDF), Zig",
        .input_dtype = c.UDF_F32,
    },
    .result_buffers = resultBuffers,
    .process_tile = processTile,
};

export fn udf_plugin_get() *const c.udf_plugin {
    return &plugin;
}
