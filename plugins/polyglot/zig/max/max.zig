//! `max`: the maximum of every pixel over all frames (LiberTEM's MaxUDF), in Zig, with the
//! SDK's operations for every dtype: no dispatch over dtypes here.
//!
//! Buffer `maxbuf` (kind sig, input dtype): maxbuf[y, x] = max_n F_n[y, x] (NaN wins, as
//! np.maximum); -inf (an integer dtype's minimum) where no frame was processed.

const udf = @import("udf");
const c = udf.c;

fn resultBuffers(_: ?*const c.udf_params, ds: [*c]const c.udf_dataset, out: ?*c.udf_decls) callconv(.c) c_int {
    return udf.declare(out, "maxbuf", c.UDF_SIG, ds.*.input_dtype, &.{}, c.UDF_NORMAL);
}

/// The neutral element of the maximum, on the workers and (main_preprocess) the main side.
fn preprocess(_: [*c]c.udf_context, results: ?*c.udf_buffers) callconv(.c) c_int {
    return udf.fillIdentity(udf.buffer(results, "maxbuf"), .max);
}

fn processTile(_: [*c]c.udf_context, t: [*c]const c.udf_tile, results: ?*c.udf_buffers) callconv(.c) c_int {
    return udf.accumulate(udf.buffer(results, "maxbuf"), t.*.data, .max);
}

fn merge(_: [*c]const c.udf_merge_context, dest: ?*c.udf_buffers, src: ?*const c.udf_buffers) callconv(.c) c_int {
    return udf.merge(dest, src, "maxbuf", .max);
}

const plugin = c.udf_plugin{
    .description = .{
        .name = "max",
        .version = "0.1.0",
        .summary = "Maximum of all frames (LiberTEM MaxUDF), Zig",
        .input_dtype = c.UDF_F32,
        .custom_merge = true,
        .main_preprocess = true,
    },
    .result_buffers = resultBuffers,
    .preprocess = preprocess,
    .process_tile = processTile,
    .merge = merge,
};

export fn udf_plugin_get() *const c.udf_plugin {
    return &plugin;
}
