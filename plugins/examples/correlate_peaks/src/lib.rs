//! LiberTEM's `MyUDF` of "Passing parameters" (docs: `udf/basic.rst`), which calls
//! `correlate_peaks(frame, self.params.peaks)`. The docs leave `correlate_peaks` and the
//! buffers undefined; here it is the intensity of the frame at each peak.
//!
//! Param `peaks` (array `(n, 2)`: row y, column x of each peak, whole pixels inside the
//! frame). Buffer `correlation` (kind nav, float32, extra shape `(n,)`):
//! `correlation[f, i] = F_f[peaks[i, 0], peaks[i, 1]]`.

use udf_sdk::prelude::*;

struct MyUdf {
    peaks: Vec<[usize; 2]>,
}

impl Udf for MyUdf {
    fn declare() -> Declaration {
        Declaration::new("correlate-peaks", "The intensity at each peak of every frame")
            .method(Method::Frame)
            .param(ParamSpec::array("peaks", "peak positions, one row (y, x) per peak"))
            .nav("correlation", DType::Float32)
            .extra_shape_with(|params, _| Ok(vec![params.array_f64("peaks")?.len() as u64 / 2]))
    }

    fn new(ctx: &Context) -> Result<Self> {
        let (sy, sx) = udf_sdk::frame_shape_2d(ctx.dataset(), "correlate-peaks")?;
        let peaks = ctx.params().array_f64("peaks")?;
        if peaks.ndim() != 2 || peaks.shape()[1] != 2 {
            return Err(UdfError::bad_param(format!("peaks must have shape (n, 2), found {:?}", peaks.shape())));
        }
        let inside = |v: f64, n: usize| (v >= 0.0 && v < n as f64 && v.fract() == 0.0).then_some(v as usize);
        let peaks = peaks.outer_iter().map(|p| match (inside(p[0], sy), inside(p[1], sx)) {
            (Some(y), Some(x)) => Ok([y, x]),
            _ => Err(UdfError::bad_param(format!("peak ({}, {}) is not a pixel of the {sy} x {sx} frame", p[0], p[1]))),
        });
        Ok(MyUdf { peaks: peaks.collect::<Result<_>>()? })
    }

    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        let frame = frame.to_f64()?;
        let values: Vec<f64> = self.peaks.iter().map(|&[y, x]| frame[[y, x]]).collect();
        results.assign("correlation", &values)
    }
}

udf_sdk::export_udf!(MyUdf);
