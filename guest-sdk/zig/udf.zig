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

// ------------------------------------------------------------------------------------
// Host arrays (udf_sdk.h, "Host arrays"): arrays that live in the host, with methods, error unions and
// `defer a.deinit()`. A plugin whose description sets `.host_arrays = true` gets its
// tiles as host arrays (never copied into the plugin):
//
//     fn processTile(_: [*c]c.udf_context, t: [*c]const c.udf_tile, results: ?*c.udf_buffers) callconv(.c) c_int {
//         const x = udf.Array.tile() catch return -1;   // [frames, *sig], in the host
//         defer x.deinit();
//         const s = x.sum(&.{0}) catch return -1;       // np.sum(x, axis=0)
//         defer s.deinit();
//         s.combineInto(udf.buffer(results, "intensity"), .add) catch return -1;
//         return 0;
//     }
//
// A failed call returns `error.Array`; the host's typed array-error is then recorded as
// the plugin's error (udf_sdk.h, "Host arrays"), so `catch return -1` hands it to the host, and
// `udf.Array.lastError()` tells its kind. Operations take the C constants
// (`c.UDF_SQRT`, `c.UDF_MULTIPLY`, `c.UDF_MEAN`, `c.UDF_FFT2`).

/// An operand: an `Array`, a float, an integer or a bool (weak scalars: they take the
/// array's dtype).
pub fn operand(v: anytype) c.udf_operand {
    const T = @TypeOf(v);
    if (T == Array) return .{ .kind = c.UDF_OPERAND_ARRAY, .array = v.ptr };
    return switch (@typeInfo(T)) {
        .float, .comptime_float => .{ .kind = c.UDF_OPERAND_FLOAT, .f = v },
        .int, .comptime_int => .{ .kind = c.UDF_OPERAND_INT, .i = v },
        .bool => .{ .kind = c.UDF_OPERAND_BOOL, .i = @intFromBool(v) },
        else => @compileError("not an operand: " ++ @typeName(T)),
    };
}

/// One entry of a basic index: `.at(3)`, `.range(2, 5)`, `.slice(null, null, 2)`, `.all`,
/// `.new_axis`, `.ellipsis`.
pub const Index = union(enum) {
    at: i64,
    slice: struct { start: ?i64 = null, stop: ?i64 = null, step: ?i64 = null },
    all,
    new_axis,
    ellipsis,

    pub fn range(start: i64, stop: i64) Index {
        return .{ .slice = .{ .start = start, .stop = stop } };
    }

    fn toC(self: Index) c.udf_index {
        const none: i64 = @import("std").math.minInt(i64); // UDF_NONE: absent
        return switch (self) {
            .at => |i| .{ .kind = c.UDF_INDEX_AT, .start = i, .stop = 0, .step = 0 },
            .slice => |s| .{ .kind = c.UDF_INDEX_SLICE, .start = s.start orelse none, .stop = s.stop orelse none, .step = s.step orelse none },
            .all => .{ .kind = c.UDF_INDEX_SLICE, .start = none, .stop = none, .step = none },
            .new_axis => .{ .kind = c.UDF_INDEX_NEW_AXIS, .start = 0, .stop = 0, .step = 0 },
            .ellipsis => .{ .kind = c.UDF_INDEX_ELLIPSIS, .start = 0, .stop = 0, .step = 0 },
        };
    }
};

/// The options of a reduction: all axes (`null`), no keepdims, the default dtype.
pub const ReduceOptions = struct {
    axes: ?[]const i64 = null,
    keepdims: bool = false,
    dtype: ?c_uint = null,
    correction: f64 = 0,
};

/// An array in the host (udf_sdk.h, "Host arrays"); `deinit` drops it.
pub const Array = struct {
    ptr: *c.udf_array,

    pub const Error = error{Array};

    fn wrap(p: ?*c.udf_array) Error!Array {
        return if (p) |q| .{ .ptr = q } else error.Array;
    }

    fn check(rc: c_int) Error!void {
        if (rc != 0) return error.Array;
    }

    /// Drop the handle.
    pub fn deinit(self: Array) void {
        c.udf_array_drop(self.ptr);
    }

    /// The kind of the last failed call (`c.UDF_ARRAY_SHAPE`, ...; `c.UDF_ARRAY_OK`).
    pub fn lastError() c_uint {
        return c.udf_array_last_error();
    }

    /// The tile of the current process call (a plugin with `.host_arrays`).
    pub fn tile() Error!Array {
        return wrap(c.udf_array_tile());
    }

    /// `zeros(shape, dtype)`.
    pub fn zeros(shape_: []const u64, dtype_: c_uint) Error!Array {
        return wrap(c.udf_array_zeros(shape_.ptr, shape_.len, dtype_));
    }

    /// `full(shape, value, dtype)`.
    pub fn full(shape_: []const u64, value: anytype, dtype_: c_uint) Error!Array {
        return wrap(c.udf_array_full(shape_.ptr, shape_.len, operand(value), dtype_));
    }

    /// An array of the plugin's values (C order), sent in pieces when large.
    pub fn fromSlice(comptime T: type, shape_: []const u64, values: []const T) Error!Array {
        return wrap(c.udf_array_from_bytes(dtypeOf(T), shape_.ptr, shape_.len, values.ptr, values.len * @sizeOf(T)));
    }

    /// A copy of a view (an array parameter, a buffer) in the host.
    pub fn fromView(v: View) Error!Array {
        return wrap(c.udf_array_from_view(&v));
    }

    /// The shape, written to `buf`.
    pub fn shape(self: Array, buf: *[c.UDF_MAX_DIMS]u64) []u64 {
        return buf[0..c.udf_array_shape(self.ptr, buf)];
    }

    pub fn dtype(self: Array) c_uint {
        return c.udf_array_dtype(self.ptr);
    }

    /// The elements, copied into the plugin (C order); free them with `udf.allocator`.
    /// `T` must be the array's element type.
    pub fn toSlice(self: Array, comptime T: type) Error![]T {
        if (self.dtype() != dtypeOf(T)) {
            _ = c.udf_fail(c.UDF_INTERNAL, "toSlice: the array is %s, not " ++ @typeName(T), c.udf_dtype_name(self.dtype()));
            return error.Array;
        }
        var n: usize = 0;
        const p = c.udf_array_to_bytes(self.ptr, &n) orelse return error.Array;
        const values: [*]T = @ptrCast(@alignCast(p));
        return values[0 .. n / @sizeOf(T)];
    }

    /// `dest = dest op self` for a view of the plugin's memory (a buffer's view) of the
    /// same shape: `s.combineInto(udf.buffer(results, "x"), .add)` is `results.x[:] += s`.
    pub fn combineInto(self: Array, dest: View, op: Merge) Error!void {
        return check(c.udf_view_combine_array(dest, self.ptr, @intFromEnum(op)));
    }

    fn cIndex(index: []const Index, buf: []c.udf_index) Error![]c.udf_index {
        if (index.len > buf.len) {
            _ = c.udf_fail(c.UDF_INVALID_DATA, "array index error: more than %d index entries", @as(c_int, @intCast(buf.len)));
            return error.Array;
        }
        for (index, 0..) |item, i| buf[i] = item.toC();
        return buf[0..index.len];
    }

    /// `x[index]`: a view.
    pub fn get(self: Array, index: []const Index) Error!Array {
        var buf: [2 * c.UDF_MAX_DIMS + 2]c.udf_index = undefined;
        const items = try cIndex(index, &buf);
        return wrap(c.udf_array_get(self.ptr, items.ptr, items.len));
    }

    /// `x[index] = value`.
    pub fn set(self: Array, index: []const Index, value: anytype) Error!void {
        var buf: [2 * c.UDF_MAX_DIMS + 2]c.udf_index = undefined;
        const items = try cIndex(index, &buf);
        return check(c.udf_array_set(self.ptr, items.ptr, items.len, operand(value)));
    }

    /// `x[index] += value`, in place.
    pub fn addAt(self: Array, index: []const Index, value: anytype) Error!void {
        var buf: [2 * c.UDF_MAX_DIMS + 2]c.udf_index = undefined;
        const items = try cIndex(index, &buf);
        return check(c.udf_array_add_at(self.ptr, items.ptr, items.len, operand(value)));
    }

    /// `reshape(x, shape)`, one -1 allowed.
    pub fn reshape(self: Array, shape_: []const i64) Error!Array {
        return wrap(c.udf_array_reshape(self.ptr, shape_.ptr, shape_.len));
    }

    /// `permute_dims(x, axes)`; `null` reverses them (`x.T`).
    pub fn permuteDims(self: Array, axes: ?[]const i64) Error!Array {
        const a = axes orelse return wrap(c.udf_array_permute_dims(self.ptr, null, 0));
        return wrap(c.udf_array_permute_dims(self.ptr, a.ptr, a.len));
    }

    /// `astype(x, dtype)`.
    pub fn astype(self: Array, dtype_: c_uint) Error!Array {
        return wrap(c.udf_array_astype(self.ptr, dtype_));
    }

    /// An elementwise function: `x.unary(c.UDF_SQRT)`.
    pub fn unary(self: Array, op: c_uint) Error!Array {
        return wrap(c.udf_array_unary(op, self.ptr));
    }

    /// `op(self, other)` with broadcasting: `x.binary(c.UDF_MULTIPLY, 2.0)`.
    pub fn binary(self: Array, op: c_uint, other: anytype) Error!Array {
        return wrap(c.udf_array_binary(op, operand(self), operand(other)));
    }

    pub fn add(self: Array, other: anytype) Error!Array {
        return self.binary(c.UDF_ADD, other);
    }
    pub fn subtract(self: Array, other: anytype) Error!Array {
        return self.binary(c.UDF_SUBTRACT, other);
    }
    pub fn multiply(self: Array, other: anytype) Error!Array {
        return self.binary(c.UDF_MULTIPLY, other);
    }
    pub fn divide(self: Array, other: anytype) Error!Array {
        return self.binary(c.UDF_DIVIDE, other);
    }

    /// A reduction: `x.reduce(c.UDF_MEAN, .{ .axes = &.{0} })`.
    pub fn reduce(self: Array, op: c_uint, options: ReduceOptions) Error!Array {
        const o = c.udf_reduce_options{
            .axes = if (options.axes) |a| a.ptr else null,
            .naxes = if (options.axes) |a| a.len else 0,
            .keepdims = options.keepdims,
            .has_dtype = options.dtype != null,
            .dtype = options.dtype orelse 0,
            .correction = options.correction,
        };
        return wrap(c.udf_array_reduce(op, self.ptr, &o));
    }

    /// `sum(x, axis=axes)` (`null`: all axes).
    pub fn sum(self: Array, axes: ?[]const i64) Error!Array {
        return self.reduce(c.UDF_SUM, .{ .axes = axes });
    }

    /// `self @ other`.
    pub fn matmul(self: Array, other: Array) Error!Array {
        return wrap(c.udf_array_matmul(self.ptr, other.ptr));
    }

    /// `tensordot(self, other, axes=(axes_a, axes_b))`.
    pub fn tensordot(self: Array, other: Array, axes_a: []const i64, axes_b: []const i64) Error!Array {
        if (axes_a.len != axes_b.len) {
            _ = c.udf_fail(c.UDF_INVALID_DATA, "array axis error: tensordot: %d axes of a, %d of b", @as(c_int, @intCast(axes_a.len)), @as(c_int, @intCast(axes_b.len)));
            return error.Array;
        }
        return wrap(c.udf_array_tensordot(self.ptr, other.ptr, axes_a.ptr, axes_b.ptr, axes_a.len));
    }

    /// `where(self, a, b)` for a boolean `self`.
    pub fn where(self: Array, a: anytype, b: anytype) Error!Array {
        return wrap(c.udf_array_where(self.ptr, operand(a), operand(b)));
    }

    /// A Fourier transform or shift over `axes` (`null`: the last two).
    pub fn fft(self: Array, op: c_uint, axes: ?[]const i64) Error!Array {
        const a = axes orelse return wrap(c.udf_array_fft(op, self.ptr, null, 0));
        return wrap(c.udf_array_fft(op, self.ptr, a.ptr, a.len));
    }
};
