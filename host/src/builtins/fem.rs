//! `fem`: the standard deviation of the pixels in a ring, per frame — fluctuation
//! electron microscopy (LiberTEM's `FEMUDF`, BUILTINS.md §7).
//!
//! Frame method. Ring `rad_in < d ≤ rad_out`, `d² = (y − center[0])² + (x − center[1])²`
//! (`center[0]` is the row, as LiberTEM uses it). Buffer `intensity`: kind nav, float32,
//! the population standard deviation (ddof 0) of the ring's pixels; NaN for an empty ring.

use super::frames::{FrameKernel, FramesPartition, frames_of, out_f32, require_real};
use super::spec;
use super::spec::nav_buffer;
use crate::array::NdArray;
use crate::dtype::DType;
use crate::udf::{
    BufferDecl, CallError, DatasetMeta, Description, InitContext, Method, Params, PartitionRunner, RunPlan, Udf,
};

/// LiberTEM's `FEMUDF`.
pub struct Fem {
    description: Description,
}

impl Default for Fem {
    fn default() -> Self {
        let mut d = spec::describe("fem", "Std. dev. of the pixels in a ring per frame (LiberTEM FEMUDF)");
        d.params = vec![
            spec::array("center", "ring centre: row y, then column x (2 numbers, e.g. 12,15.5)", None),
            spec::float("rad_in", "inner radius in pixels (pixels with d <= rad_in are excluded)", None),
            spec::float("rad_out", "outer radius in pixels (pixels with d <= rad_out are included)", None),
        ];
        d.methods = vec![Method::Frame];
        Fem { description: d }
    }
}

/// The flat indices of the ring's pixels.
fn ring_pixels(params: &Params, sig: &[usize]) -> Result<Vec<usize>, CallError> {
    let (sy, sx) = spec::sig_2d(sig, "fem")?;
    let center = spec::array_f64(spec::get_array(params, "center")?, "center")?;
    let [cy, cx] = center[..] else {
        return Err(CallError::bad_param(format!("parameter 'center' must be 2 numbers (y, x), got {center:?}")));
    };
    let (rin, rout) = (spec::get_float(params, "rad_in")?, spec::get_float(params, "rad_out")?);
    let inside = |d2: f64, r: f64| d2 <= r * r && r >= 0.0;
    Ok((0..sy * sx)
        .filter(|&i| {
            let d2 = ((i / sx) as f64 - cy).powi(2) + ((i % sx) as f64 - cx).powi(2);
            inside(d2, rout) && !inside(d2, rin)
        })
        .collect())
}

impl Udf for Fem {
    fn description(&self) -> &Description {
        &self.description
    }

    fn source(&self) -> &str {
        "builtin:fem"
    }

    fn reads_in_place(&self) -> bool {
        true
    }

    fn plan(&self, params: &Params, dataset: &DatasetMeta) -> Result<RunPlan, CallError> {
        ring_pixels(params, &dataset.sig_shape)?;
        Ok(spec::plan_of(&self.description))
    }

    fn result_buffers(&self, _: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>, CallError> {
        require_real(dataset.input_dtype, "fem")?;
        Ok(vec![nav_buffer("intensity", DType::F32, &[])])
    }

    fn start(&self, ctx: InitContext<'_>) -> Result<Box<dyn PartitionRunner + '_>, CallError> {
        require_real(ctx.dataset.input_dtype, "fem")?;
        let kernel = FemKernel { ring: ring_pixels(ctx.params, &ctx.dataset.sig_shape)? };
        let buffer = NdArray::zeros(DType::F32, &[frames_of(&ctx)]);
        Ok(Box::new(FramesPartition::new(&ctx, kernel, vec![("intensity", buffer)], "fem")))
    }
}

struct FemKernel {
    ring: Vec<usize>,
}

impl FemKernel {
    fn std(&self, value: impl Fn(usize) -> f64) -> f32 {
        let n = self.ring.len() as f64;
        let mean = self.ring.iter().map(|&i| value(i)).sum::<f64>() / n;
        let var = self.ring.iter().map(|&i| (value(i) - mean).powi(2)).sum::<f64>() / n;
        var.sqrt() as f32
    }
}

impl FrameKernel for FemKernel {
    fn frame_f32(&mut self, index: usize, frame: &[f32], out: &mut [NdArray]) -> Result<(), CallError> {
        let v = self.std(|i| f64::from(frame[i]));
        *out_f32(out)?.get_mut(index).ok_or_else(|| CallError::internal("frame beyond partition"))? = v;
        Ok(())
    }

    fn frame_f64(&mut self, index: usize, frame: &[f64], out: &mut [NdArray]) -> Result<(), CallError> {
        let v = self.std(|i| frame[i]);
        *out_f32(out)?.get_mut(index).ok_or_else(|| CallError::internal("frame beyond partition"))? = v;
        Ok(())
    }
}
