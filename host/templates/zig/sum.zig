//! `{{name}}`: the sum of all frames (LiberTEM's SumUDF).
//!
//! Buffer `intensity`: kind sig, float32, intensity[y, x] = sum over frames n of F_n[y, x].
//! Tile method: each call adds a tile's frames into its part of the frame; the host merges
//! partitions with `merge`. Started from `udf-host new --template sum`; sdk/udf.zig and
//! sdk/udf_sdk.h document the SDK.

const udf = @import("udf");
const c = udf.c;

fn resultBuffers(_: ?*const c.udf_params, ds: [*c]const c.udf_dataset, out: ?*c.udf_decls) callconv(.c) c_int {
    // The description asks for float32 tiles; float64 or complex data still arrive as such.
    if (ds.*.input_dtype != c.UDF_F32)
        return c.udf_fail(c.UDF_INVALID_DATA, "{{name}} handles float32 input only, found %s", c.udf_dtype_name(ds.*.input_dtype));
    return udf.declare(out, "intensity", c.UDF_SIG, c.UDF_F32, &.{}, c.UDF_NORMAL);
}

fn processTile(_: [*c]c.udf_context, t: [*c]const c.udf_tile, results: ?*c.udf_buffers) callconv(.c) c_int {
    const intensity = udf.buffer(results, "intensity"); // the tile's part of the frame
    for (0..t.*.frames) |f| udf.addInto(f32, intensity, udf.sub(t.*.data, f));
    return 0;
}

fn merge(_: [*c]const c.udf_merge_context, dest: ?*c.udf_buffers, src: ?*const c.udf_buffers) callconv(.c) c_int {
    udf.addInto(f32, udf.buffer(dest, "intensity"), udf.buffer(src, "intensity"));
    return 0;
}

const plugin = c.udf_plugin{
    .description = .{
        .name = "{{name}}",
        .version = "0.1.0",
        .summary = "Sum of all frames",
        .input_dtype = c.UDF_F32,
        .custom_merge = true,
    },
    .result_buffers = resultBuffers,
    .process_tile = processTile,
    .merge = merge,
};

export fn udf_plugin_get() *const c.udf_plugin {
    return &plugin;
}
