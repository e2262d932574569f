/* `{{name}}`: the sum of all frames (LiberTEM's SumUDF).
 *
 * Buffer `intensity`: kind sig, float32, intensity[y, x] = sum over frames n of F_n[y, x].
 * Tile method: each call adds a tile's frames into its part of the frame; the host merges
 * partitions with `merge`. Started from `udf-host new --template sum`; sdk/udf_sdk.h
 * documents every function used here. */

#include "udf_sdk.h"

static int result_buffers(const udf_params *params, const udf_dataset *dataset, udf_decls *out) {
    /* The description asks for float32 tiles; float64 or complex data still arrive as such. */
    if (dataset->input_dtype != UDF_F32)
        return udf_fail(UDF_INVALID_DATA, "{{name}} handles float32 input only, found %s",
                        udf_dtype_name(dataset->input_dtype));
    return udf_decl(out, "intensity", UDF_SIG, UDF_F32, NULL, 0, UDF_NORMAL);
}

/* dest += src for two float32 views of the same shape. */
static void add_into(udf_view dest, udf_view src) {
    for (size_t r = 0; r < udf_view_rows(&dest); r++) {
        float *a = udf_view_row(&dest, r);
        const float *x = udf_view_row(&src, r);
        for (size_t i = 0, n = udf_view_row_len(&dest); i < n; i++) a[i] += x[i];
    }
}

static int process_tile(udf_context *ctx, const udf_tile *tile, udf_buffers *results) {
    udf_view intensity = udf_buffer(results, "intensity"); /* the tile's part of the frame */
    for (size_t f = 0; f < tile->frames; f++) add_into(intensity, udf_view_sub(&tile->data, f));
    return 0;
}

static int merge(const udf_merge_context *ctx, udf_buffers *dest, const udf_buffers *src) {
    add_into(udf_buffer(dest, "intensity"), udf_buffer(src, "intensity"));
    return 0;
}

static const udf_plugin PLUGIN = {
    .description =
        {
            .name = "{{name}}",
            .version = "0.1.0",
            .summary = "Sum of all frames",
            .input_dtype = UDF_F32,
            .custom_merge = true,
        },
    .result_buffers = result_buffers,
    .process_tile = process_tile,
    .merge = merge,
};

UDF_EXPORT(PLUGIN)
