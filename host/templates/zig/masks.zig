//! `{{name}}`: the dot product of each frame with each mask of a stack — virtual detectors
//! (LiberTEM's ApplyMasksUDF, dense masks).
//!
//! Param `masks`: an array (M, *frame shape) of any real dtype. Buffer `intensity`: kind nav,
//! extra shape (M,), float32, intensity[n, m] = sum over y, x of F_n[y, x] * mask_m[y, x]
//! (summed in f64). Frame method; nav buffers are merged by the host. Started from
//! `udf-host new --template masks`; sdk/udf.zig and sdk/udf_sdk.h document the SDK.

const udf = @import("udf");
const c = udf.c;

const params = [_]c.udf_param_spec{.{
    .name = "masks",
    .type = c.UDF_PARAM_ARRAY,
    .doc = "mask stack (M, *frame shape)",
}};

/// The `masks` param, checked against the frame shape.
fn readMasks(p: ?*const c.udf_params, ds: [*c]const c.udf_dataset) !udf.View {
    const m = try udf.paramArray(p, "masks");
    var ok = m.ndim == ds.*.sig_dims + 1 and m.shape[0] > 0;
    if (ok) for (0..ds.*.sig_dims) |a| {
        if (m.shape[a + 1] != ds.*.sig_shape[a]) ok = false;
    };
    if (!ok) {
        _ = udf.fail(c.UDF_BAD_PARAM, "masks must be a stack of at least one mask of the frame shape");
        return error.Udf;
    }
    if (c.udf_dtype_is_complex(m.dtype)) {
        _ = c.udf_fail(c.UDF_BAD_PARAM, "masks must be real, found %s", c.udf_dtype_name(m.dtype));
        return error.Udf;
    }
    return m;
}

fn resultBuffers(p: ?*const c.udf_params, ds: [*c]const c.udf_dataset, out: ?*c.udf_decls) callconv(.c) c_int {
    // The description asks for float32 tiles; float64 or complex data still arrive as such.
    if (ds.*.input_dtype != c.UDF_F32)
        return c.udf_fail(c.UDF_INVALID_DATA, "{{name}} handles float32 input only, found %s", c.udf_dtype_name(ds.*.input_dtype));
    const m = readMasks(p, ds) catch return -1;
    return udf.declare(out, "intensity", c.UDF_NAV, c.UDF_F32, &.{@as(u64, m.shape[0])}, c.UDF_NORMAL);
}

/// Task data: the masks as f64, one after the other.
const Task = struct { masks: []f64, count: usize };

fn init(ctx: [*c]c.udf_context) callconv(.c) c_int {
    const m = readMasks(ctx.*.params, ctx.*.dataset) catch return -1;
    const values = udf.allocator.alloc(f64, c.udf_view_size(&m)) catch return udf.fail(c.UDF_INTERNAL, "out of memory for the masks");
    for (values, 0..) |*v, i| v.* = udf.getF64(m, i);
    const task = udf.allocator.create(Task) catch return udf.fail(c.UDF_INTERNAL, "out of memory");
    task.* = .{ .masks = values, .count = m.shape[0] };
    ctx.*.task = task;
    return 0;
}

fn finish(ctx: [*c]c.udf_context) callconv(.c) void {
    const task: *Task = @ptrCast(@alignCast(ctx.*.task orelse return));
    udf.allocator.free(task.masks);
    udf.allocator.destroy(task);
}

fn processFrame(ctx: [*c]c.udf_context, frame: [*c]const c.udf_frame, results: ?*c.udf_buffers) callconv(.c) c_int {
    const task: *Task = @ptrCast(@alignCast(ctx.*.task));
    const pixels = udf.flat(f32, frame.*.data).?; // frames are contiguous
    const intensity = udf.flat(f32, udf.buffer(results, "intensity")).?; // this frame's M values
    for (0..task.count) |m| {
        const mask = task.masks[m * pixels.len ..][0..pixels.len];
        var dot: f64 = 0;
        for (pixels, mask) |v, w| dot += v * w;
        intensity[m] = @floatCast(dot);
    }
    return 0;
}

const plugin = c.udf_plugin{
    .description = .{
        .name = "{{name}}",
        .version = "0.1.0",
        .summary = "Dot products of each frame with a mask stack",
        .params = &params,
        .n_params = params.len,
        .methods = .{ c.UDF_METHOD_FRAME, 0, 0 },
        .n_methods = 1,
        .input_dtype = c.UDF_F32,
    },
    .result_buffers = resultBuffers,
    .init = init,
    .process_frame = processFrame,
    .finish = finish,
};

export fn udf_plugin_get() *const c.udf_plugin {
    return &plugin;
}
