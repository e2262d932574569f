use udf_sdk::prelude::*;

// The sum of every row of each frame: LiberTEM's `ctx.map(f=functools.partial(np.sum, axis=-1))`.
udf_sdk::export_map!("row-sums", |frame: ArrayViewD<'_, f32>| frame.sum_axis(Axis(frame.ndim() - 1)));
