//! `{{name}}`: the mean of each frame, one value per scan position.
//!
//! Buffer `mean`: kind nav, float32, mean[n] = sum over y, x of F_n[y, x] / (frame pixels).
//! Frame method: each call sees one whole frame; nav buffers are merged by the host. Started
//! from `udf-host new --template frame-map`; sdk/udf.zig and sdk/udf_sdk.h document the SDK.

const udf = @import("udf");
const c = udf.c;

fn resultBuffers(_: ?*const c.udf_params, ds: [*c]const c.udf_dataset, out: ?*c.udf_decls) callconv(.c) c_int {
    // The description asks for float32 tiles; float64 or complex data still arrive as such.
    if (ds.*.input_dtype != c.UDF_F32)
        return c.udf_fail(c.UDF_INVALID_DATA, "{{name}} handles float32 input only, found %s", c.udf_dtype_name(ds.*.input_dtype));
    return udf.declare(out, "mean", c.UDF_NAV, c.UDF_F32, &.{}, c.UDF_NORMAL);
}

fn processFrame(_: [*c]c.udf_context, frame: [*c]const c.udf_frame, results: ?*c.udf_buffers) callconv(.c) c_int {
    const pixels = udf.flat(f32, frame.*.data).?; // frames are contiguous
    var sum: f64 = 0;
    for (pixels) |v| sum += v;
    const mean = udf.flat(f32, udf.buffer(results, "mean")).?; // this frame's entry: shape (1,)
    mean[0] = @floatCast(sum / @as(f64, @floatFromInt(pixels.len)));
    return 0;
}

const plugin = c.udf_plugin{
    .description = .{
        .name = "{{name}}",
        .version = "0.1.0",
        .summary = "Mean of each frame",
        .methods = .{ c.UDF_METHOD_FRAME, 0, 0 },
        .n_methods = 1,
        .input_dtype = c.UDF_F32,
    },
    .result_buffers = resultBuffers,
    .process_frame = processFrame,
};

export fn udf_plugin_get() *const c.udf_plugin {
    return &plugin;
}
