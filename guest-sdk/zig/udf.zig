//! udf.zig: write udf-host plugins in Zig.
//!
//! The Zig SDK sits on the C SDK (guest-sdk/c/udf_sdk.h), which implements the exports of
//! wit/udf.wit on the bindings `wit-bindgen c` generates; Zig compiles that C itself. This
//! module adds typed slices, dtype dispatch and error helpers. A sum plugin:
//!
//!     const udf = @import("udf");
//!     const c = udf.c;
//!
//!     fn buffers(_: ?*const c.udf_params, ds: [*c]const c.udf_dataset, out: ?*c.udf_decls) callconv(.c) c_int {
//!         return udf.declare(out, "intensity", c.UDF_SIG, ds.*.input_dtype, &.{}, c.UDF_NORMAL);
//!     }
//!     fn tile(_: [*c]c.udf_context, t: [*c]const c.udf_tile, results: ?*c.udf_buffers) callconv(.c) c_int {
//!         const acc = udf.buffer(results, "intensity"); // the tile's part of the frame
//!         for (0..t.*.frames) |f| udf.addInto(f32, acc, udf.sub(t.*.data, f));
//!         return 0;
//!     }
//!     ...
//!     const plugin = c.udf_plugin{ .description = .{ .name = "my-sum", ... }, .result_buffers = buffers, ... };
//!     export fn udf_plugin_get() *const c.udf_plugin { return &plugin; }
//!
//! Views (`c.udf_view`) count strides in elements; rows of the last axis are contiguous.

pub const c = @cImport(@cInclude("udf_sdk.h"));

pub const View = c.udf_view;

/// The Zig type of a dtype's values (complex dtypes: their float parts).
pub fn Elem(comptime dtype: c_uint) type {
    return switch (dtype) {
        c.UDF_BOOL, c.UDF_U8 => u8,
        c.UDF_U16 => u16,
        c.UDF_U32 => u32,
        c.UDF_U64 => u64,
        c.UDF_I8 => i8,
        c.UDF_I16 => i16,
        c.UDF_I32 => i32,
        c.UDF_I64 => i64,
        c.UDF_F32, c.UDF_C64 => f32,
        c.UDF_F64, c.UDF_C128 => f64,
        else => @compileError("unknown dtype"),
    };
}

/// Every dtype, for `inline for` dispatch: `inline for (udf.dtypes) |d| if (dtype == d) ...`.
pub const dtypes = [_]c_uint{
    c.UDF_BOOL, c.UDF_U8,  c.UDF_U16, c.UDF_U32, c.UDF_U64, c.UDF_I8,  c.UDF_I16,
    c.UDF_I32,  c.UDF_I64, c.UDF_F32, c.UDF_F64, c.UDF_C64, c.UDF_C128,
};

/// Record a typed error for the host; returns -1 (return it from a callback).
pub fn fail(kind: c_uint, message: [*:0]const u8) c_int {
    return c.udf_fail(kind, "%s", message);
}

/// Send a log line to the host.
pub fn log(level: c_uint, message: [*:0]const u8) void {
    c.udf_log(level, "%s", message);
}

/// Declare a result buffer.
pub fn declare(out: ?*c.udf_decls, name: [*:0]const u8, kind: c_uint, dtype: c_uint, extra: []const u64, use: c_uint) c_int {
    return c.udf_decl(out, name, kind, dtype, extra.ptr, extra.len, use);
}

/// The view of a result buffer for the current unit (see udf_buffer in udf_sdk.h).
pub fn buffer(results: ?*const c.udf_buffers, name: [*:0]const u8) View {
    return c.udf_buffer(results, name);
}

/// Index axis 0 of a view.
pub fn sub(v: View, i: usize) View {
    return c.udf_view_sub(&v, i);
}

/// Number of rows of the last axis.
pub fn rows(v: View) usize {
    return c.udf_view_rows(&v);
}

/// Row `r` of the last axis as a typed slice (complex: twice as many floats).
pub fn row(comptime T: type, v: View, r: usize) []T {
    const p: [*]T = @ptrCast(@alignCast(c.udf_view_row(&v, r)));
    return p[0..c.udf_view_row_len(&v)];
}

/// The whole view as one typed slice; null when it is not contiguous.
pub fn flat(comptime T: type, v: View) ?[]T {
    if (!c.udf_view_contiguous(&v)) return null;
    const values = c.udf_view_size(&v) * (if (c.udf_dtype_is_complex(v.dtype)) @as(usize, 2) else 1);
    const p: [*]T = @ptrCast(@alignCast(v.data));
    return p[0..values];
}

/// `dest += src` elementwise over two views of the same shape and element type.
pub fn addInto(comptime T: type, dest: View, src: View) void {
    for (0..rows(dest)) |r| {
        const d = row(T, dest, r);
        const s = row(T, src, r);
        if (@typeInfo(T) == .int) {
            for (d, s) |*a, b| a.* +%= b;
        } else {
            for (d, s) |*a, b| a.* += b;
        }
    }
}

/// The tile's part of a sig-shaped array (a mask, a reference frame).
pub fn tileSigPart(t: [*c]const c.udf_tile, sig_array: View) View {
    return c.udf_view_window(&sig_array, &t.*.sig_origin, &t.*.sig_shape, t.*.sig_dims);
}

/// A float parameter.
pub fn paramFloat(params: ?*const c.udf_params, name: [*:0]const u8) !f64 {
    var v: f64 = 0;
    if (c.udf_param_float(params, name, &v) != 0) return error.Udf;
    return v;
}

/// A text parameter.
pub fn paramText(params: ?*const c.udf_params, name: [*:0]const u8) ![]const u8 {
    var p: [*c]const u8 = null;
    var n: usize = 0;
    if (c.udf_param_text(params, name, &p, &n) != 0) return error.Udf;
    return p[0..n];
}

/// An array parameter as a view of the whole array.
pub fn paramArray(params: ?*const c.udf_params, name: [*:0]const u8) !View {
    var v: View = undefined;
    if (c.udf_param_array(params, name, &v) != 0) return error.Udf;
    return v;
}

/// Element `i` (flat, C order) of any real view as f64.
pub fn getF64(v: View, i: usize) f64 {
    var idx: [c.UDF_MAX_DIMS]usize = undefined;
    var rest = i;
    var a = v.ndim;
    while (a > 0) {
        a -= 1;
        idx[a] = rest % v.shape[a];
        rest /= v.shape[a];
    }
    const one = View{ .data = c.udf_view_ptr(&v, &idx), .dtype = v.dtype, .ndim = 1, .shape = .{1} ++ .{0} ** 7, .strides = .{1} ++ .{0} ** 7 };
    return c.udf_view_get_f64(&one, 0);
}

/// The C allocator (wasi-libc's malloc), for task data.
pub const allocator = @import("std").heap.c_allocator;

// ------------------------------------------------------------------------------------
// Operations for every dtype (udf_sdk.h, udf_ops.c): no dispatch over dtypes in plugins.

/// How two values combine (`udf_merge_op`): add, min, max (NaN wins), assign.
pub const Merge = enum(c_uint) {
    add = c.UDF_MERGE_ADD,
    min = c.UDF_MERGE_MIN,
    max = c.UDF_MERGE_MAX,
    assign = c.UDF_MERGE_ASSIGN,
};

/// `dest = dest op src` elementwise, for two views of the same shape (any dtypes).
pub fn combine(dest: View, src: View, op: Merge) c_int {
    return c.udf_view_combine(dest, src, @intFromEnum(op));
}

/// `dest = dest op frame` for every frame of `frames` (`[n, *dest shape]`), e.g. a tile's
/// frames into a sig buffer's part under the tile.
pub fn accumulate(dest: View, frames: View, op: Merge) c_int {
    return c.udf_view_accumulate(dest, &frames, @intFromEnum(op));
}

/// Every element = `value`.
pub fn fill(v: View, value: f64) c_int {
    return c.udf_view_fill(v, value);
}

/// Every element = the identity of `op` (-inf / +inf for max / min).
pub fn fillIdentity(v: View, op: Merge) c_int {
    return c.udf_view_fill_identity(v, @intFromEnum(op));
}

/// The sum of the elements as f64 (complex: of the real parts).
pub fn sum(v: View) f64 {
    return c.udf_view_sum(&v);
}

/// Merge buffer `name` of `src` into `dest` by `op` (whole buffers).
pub fn merge(dest: ?*c.udf_buffers, src: ?*const c.udf_buffers, name: [*:0]const u8, op: Merge) c_int {
    return c.udf_merge(dest, src, name, @intFromEnum(op));
}

/// The dtype of a Zig element type.
pub fn dtypeOf(comptime T: type) c_uint {
    return switch (T) {
        u8 => c.UDF_U8,
        u16 => c.UDF_U16,
        u32 => c.UDF_U32,
        u64 => c.UDF_U64,
        i8 => c.UDF_I8,
        i16 => c.UDF_I16,
        i32 => c.UDF_I32,
        i64 => c.UDF_I64,
        f32 => c.UDF_F32,
        f64 => c.UDF_F64,
        else => @compileError("no dtype for " ++ @typeName(T)),
    };
}

/// Export a frame map (LiberTEM's AutoUDF) as the plugin, from a `comptime` block:
///
///     fn rows(ds: *const udf.c.udf_dataset, shape: []u64) usize { shape[0] = ds.sig_shape[0]; return 1; }
///     fn rowSums(frame: udf.View, out: []f32) void {
///         for (out, 0..) |*o, y| o.* = @floatCast(udf.sum(udf.sub(frame, y)));
///     }
///     comptime { udf.exportMap("row-sums", "Sum of each row", f32, f32, rows, rowSums); }
///
/// `Frame` is the frame's element type (other input dtypes are converted to it), `Value`
/// the value's; `shape` writes the value's shape for a dataset and returns its number of
/// axes (`null`: one number); `f` writes the value of `frame` to `out`. The plugin's nav
/// buffer `result` holds the values.
pub fn exportMap(
    comptime name: [*:0]const u8,
    comptime summary: [*:0]const u8,
    comptime Frame: type,
    comptime Value: type,
    comptime shape: ?fn (ds: *const c.udf_dataset, shape: []u64) usize,
    comptime f: fn (frame: View, out: []Value) void,
) void {
    const S = struct {
        fn call(frame: [*c]const c.udf_view, out: [*c]c.udf_view) callconv(.c) c_int {
            f(frame.*, flat(Value, out.*).?);
            return 0;
        }
        fn shapeOf(ds: [*c]const c.udf_dataset, out: [*c]u64) callconv(.c) usize {
            return shape.?(ds, out[0..c.UDF_MAX_DIMS]);
        }
        const map = c.udf_map{
            .frame_dtype = dtypeOf(Frame),
            .value_dtype = dtypeOf(Value),
            .shape = if (shape == null) null else shapeOf,
            .f = call,
        };
        fn getMap() callconv(.c) *const c.udf_map {
            return &map;
        }
        const plugin = c.udf_plugin{
            .description = .{
                .name = name,
                .version = "0.1.0",
                .summary = summary,
                .methods = .{ c.UDF_METHOD_FRAME, 0, 0 },
                .n_methods = 1,
                .input_dtype = dtypeOf(Frame),
            },
            .result_buffers = c.udf_map_result_buffers,
            .init = c.udf_map_init,
            .process_frame = c.udf_map_process_frame,
            .finish = c.udf_map_finish,
        };
        fn getPlugin() callconv(.c) *const c.udf_plugin {
            return &plugin;
        }
    };
    @export(&S.getMap, .{ .name = "udf_map_get" });
    @export(&S.getPlugin, .{ .name = "udf_plugin_get" });
}
