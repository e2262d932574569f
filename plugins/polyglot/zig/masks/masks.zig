//! `masks`: dot products of every frame with a stack of masks (LiberTEM's ApplyMasksUDF,
//! BUILTINS.md section 4; virtual detectors), in Zig.
//!
//! Param `masks`: an array `(M, *sig_shape)` (or one mask of the signal shape), any real
//! dtype. Buffer `intensity`: kind nav, extra shape `(M,)`,
//! `intensity[n, m] = sum_{y,x} F_n[y, x] * mask_m[y, x]`, dtype float64 when the input or
//! the masks need it (float64, 32/64-bit integers), else float32 (NumPy's result_type for
//! the common cases). Preferred input dtype float32. Dense masks only (no sparse, no shifts).

const std = @import("std");
const udf = @import("udf");
const c = udf.c;

const params = [_]c.udf_param_spec{.{
    .name = "masks",
    .type = c.UDF_PARAM_ARRAY,
    .doc = "mask stack (M, *sig_shape) or one mask (*sig_shape)",
}};

fn wide(d: c.udf_dtype) bool {
    return d == c.UDF_F64 or d == c.UDF_I32 or d == c.UDF_U32 or d == c.UDF_I64 or d == c.UDF_U64;
}

/// The mask stack and its count; checks it against the signal shape.
fn readMasks(p: ?*const c.udf_params, ds: [*c]const c.udf_dataset, count: *usize) !udf.View {
    var m = try udf.paramArray(p, "masks");
    if (c.udf_dtype_is_complex(m.dtype)) {
        _ = c.udf_fail(c.UDF_BAD_PARAM, "masks must be real, found %s", c.udf_dtype_name(m.dtype));
        return error.Udf;
    }
    const sig_dims = ds.*.sig_dims;
    if (m.ndim == sig_dims) {
        // One mask: view it as a stack of one.
        var i = m.ndim;
        while (i > 0) : (i -= 1) {
            m.shape[i] = m.shape[i - 1];
            m.strides[i] = m.strides[i - 1];
        }
        m.shape[0] = 1;
        m.strides[0] = @intCast(c.udf_view_size(&m));
        m.ndim += 1;
    }
    var ok = m.ndim == sig_dims + 1;
    if (ok) for (0..sig_dims) |a| {
        if (m.shape[a + 1] != ds.*.sig_shape[a]) ok = false;
    };
    if (!ok) {
        _ = c.udf_fail(c.UDF_BAD_PARAM, "masks must have shape (M, *sig_shape) with %zu signal dims matching the dataset", sig_dims);
        return error.Udf;
    }
    count.* = m.shape[0];
    return m;
}

fn resultBuffers(p: ?*const c.udf_params, ds: [*c]const c.udf_dataset, out: ?*c.udf_decls) callconv(.c) c_int {
    var count: usize = 0;
    const m = readMasks(p, ds, &count) catch return -1;
    if (c.udf_dtype_is_complex(ds.*.input_dtype)) return udf.fail(c.UDF_INVALID_DATA, "masks needs real input");
    const dtype: c.udf_dtype = if (wide(ds.*.input_dtype) or wide(m.dtype)) c.UDF_F64 else c.UDF_F32;
    return udf.declare(out, "intensity", c.UDF_NAV, dtype, &.{@as(u64, count)}, c.UDF_NORMAL);
}

/// Task data: the masks as float64, (M, *sig_shape), C order.
const Task = struct { masks: []f64, count: usize };

fn init(ctx: [*c]c.udf_context) callconv(.c) c_int {
    var count: usize = 0;
    const m = readMasks(ctx.*.params, ctx.*.dataset, &count) catch return -1;
    const n = c.udf_view_size(&m);
    const values = udf.allocator.alloc(f64, n) catch return udf.fail(c.UDF_INTERNAL, "out of memory for the masks");
    for (values, 0..) |*v, i| v.* = udf.getF64(m, i);
    const task = udf.allocator.create(Task) catch return udf.fail(c.UDF_INTERNAL, "out of memory");
    task.* = .{ .masks = values, .count = count };
    ctx.*.task = task;
    return 0;
}

fn finish(ctx: [*c]c.udf_context) callconv(.c) void {
    const task: *Task = @ptrCast(@alignCast(ctx.*.task orelse return));
    udf.allocator.free(task.masks);
    udf.allocator.destroy(task);
}

fn dots(comptime T: type, comptime A: type, t: [*c]const c.udf_tile, task: *Task, ds: [*c]const c.udf_dataset, out: udf.View) void {
    // The mask stack as a view, so that the SDK cuts out the tile's part of each mask.
    var stack = udf.View{ .data = task.masks.ptr, .dtype = c.UDF_F64, .ndim = ds.*.sig_dims + 1 };
    stack.shape[0] = task.count;
    for (0..ds.*.sig_dims) |a| stack.shape[a + 1] = @intCast(ds.*.sig_shape[a]);
    var step: isize = 1;
    var a = stack.ndim;
    while (a > 0) {
        a -= 1;
        stack.strides[a] = step;
        step *= @intCast(stack.shape[a]);
    }
    const acc = udf.flat(A, out).?; // (frames in tile, M)
    for (0..task.count) |k| {
        const mask = udf.tileSigPart(t, udf.sub(stack, k));
        for (0..t.*.frames) |f| {
            const frame = udf.sub(t.*.data, f);
            var s: f64 = 0;
            for (0..udf.rows(frame)) |r| {
                const x = udf.row(T, frame, r);
                const w = udf.row(f64, mask, r);
                for (x, w) |xv, wv| s += wv * (if (@typeInfo(T) == .int) @as(f64, @floatFromInt(xv)) else @as(f64, xv));
            }
            acc[f * task.count + k] += @floatCast(s);
        }
    }
}

fn processTile(ctx: [*c]c.udf_context, t: [*c]const c.udf_tile, results: ?*c.udf_buffers) callconv(.c) c_int {
    const task: *Task = @ptrCast(@alignCast(ctx.*.task));
    const out = udf.buffer(results, "intensity");
    inline for (udf.dtypes) |d| {
        if (d != c.UDF_C64 and d != c.UDF_C128 and t.*.data.dtype == d) {
            if (out.dtype == c.UDF_F64) dots(udf.Elem(d), f64, t, task, ctx.*.dataset, out) else dots(udf.Elem(d), f32, t, task, ctx.*.dataset, out);
        }
    }
    return 0;
}

const plugin = c.udf_plugin{
    .description = .{
        .name = "masks",
        .version = "0.1.0",
        .summary = "Dot products of each frame with a mask stack (LiberTEM ApplyMasksUDF), Zig",
        .params = &params,
        .n_params = params.len,
        .input_dtype = c.UDF_F32,
    },
    .result_buffers = resultBuffers,
    .init = init,
    .process_tile = processTile,
    .finish = finish,
};

export fn udf_plugin_get() *const c.udf_plugin {
    return &plugin;
}

comptime {
    _ = std;
}
