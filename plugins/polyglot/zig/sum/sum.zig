//! `sum`: the sum of all frames (LiberTEM's SumUDF), in Zig with host arrays.
//!
//! Buffer `intensity`: kind sig, dtype = input dtype, intensity[y, x] = sum_n F_n[y, x].
//! Param `dtype` (default float32) is the preferred input dtype. The tile stays in the
//! host (`.host_arrays`): one reduction per tile at the host's speed, and one small copy
//! of its result (the tile's part of the frame) into the buffer.

const udf = @import("udf");
const c = udf.c;

const params = [_]c.udf_param_spec{.{
    .name = "dtype",
    .type = c.UDF_PARAM_TEXT,
    .doc = "preferred input dtype (NumPy name)",
    .has_default = true,
    .text_default = "float32",
}};

fn plan(p: ?*const c.udf_params, _: [*c]const c.udf_dataset, out: [*c]c.udf_run_plan) callconv(.c) c_int {
    const name = udf.paramText(p, "dtype") catch return -1;
    if (!c.udf_dtype_parse(name.ptr, name.len, &out.*.input_dtype))
        return c.udf_fail(c.UDF_BAD_PARAM, "dtype '%.*s' is not a NumPy dtype name", @as(c_int, @intCast(name.len)), name.ptr);
    return 0;
}

fn resultBuffers(_: ?*const c.udf_params, ds: [*c]const c.udf_dataset, out: ?*c.udf_decls) callconv(.c) c_int {
    return udf.declare(out, "intensity", c.UDF_SIG, ds.*.input_dtype, &.{}, c.UDF_NORMAL);
}

fn processTile(_: [*c]c.udf_context, t: [*c]const c.udf_tile, results: ?*c.udf_buffers) callconv(.c) c_int {
    sumTile(t.*.data.dtype, udf.buffer(results, "intensity")) catch return -1;
    return 0;
}

/// The tile's frames summed in the host (`np.sum(x, axis=0, dtype=x.dtype)`: integer sums
/// stay in the buffer's dtype), added to the tile's part of the frame.
fn sumTile(dtype: c_uint, acc: udf.View) udf.Array.Error!void {
    const x = try udf.Array.tile(); // [frames, *sig slice]
    defer x.deinit();
    const s = try x.reduce(c.UDF_SUM, .{ .axes = &.{0}, .dtype = dtype });
    defer s.deinit();
    try s.combineInto(acc, .add);
}

fn merge(_: [*c]const c.udf_merge_context, dest: ?*c.udf_buffers, src: ?*const c.udf_buffers) callconv(.c) c_int {
    return udf.merge(dest, src, "intensity", .add);
}

const plugin = c.udf_plugin{
    .description = .{
        .name = "sum",
        .version = "0.1.0",
        .summary = "Sum of all frames (LiberTEM SumUDF), Zig",
        .params = &params,
        .n_params = params.len,
        .input_dtype = c.UDF_F32,
        .custom_merge = true,
        .host_arrays = true,
    },
    .plan = plan,
    .result_buffers = resultBuffers,
    .process_tile = processTile,
    .merge = merge,
};

export fn udf_plugin_get() *const c.udf_plugin {
    return &plugin;
}
