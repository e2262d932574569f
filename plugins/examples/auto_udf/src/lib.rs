//! LiberTEM's `ctx.map(f=functools.partial(np.sum, axis=-1))` and
//! `AutoUDF(f=functools.partial(np.sum, axis=-1))` (docs: `udf.rst` "Getting started",
//! `udf/advanced.rst` "Auto UDF"): the sum over the last signal axis of every frame.
//!
//! Buffer `result` (kind nav, float32, extra shape `(sig rows,)`):
//! `result[n, y] = Σ_x F_n[y, x]`. The buffer's shape and dtype come from calling the
//! function on a frame of zeros, as in LiberTEM.

use udf_sdk::prelude::*;

udf_sdk::export_map!("auto-udf", |frame: ArrayViewD<'_, f32>| frame.sum_axis(Axis(frame.ndim() - 1)));
