//! `crystallinity`: the integral of a frame's Fourier spectrum over a ring of spatial
//! frequencies (LiberTEM's `CrystallinityUDF`, BUILTINS.md §8).
//!
//! Frame method. Buffer `intensity`: kind nav, float32,
//! `intensity = Σ |rfft2(F · real_mask)| · half`, where
//! - `real_mask = 1 − [(y − real_center[0])² + (x − real_center[1])² ≤ real_rad²]` when
//!   both `real_center` and `real_rad` are given, else 1;
//! - `half = fftshift(ring)[:, : X // 2 + 1]`, `ring = [d ≤ rad_out] − [d ≤ rad_in]` with
//!   `d² = (y − Y/2)² + (x − X/2)²`.
//!
//! The transform is computed in `f64` (NumPy's `rfft2` is double precision): FFTs of
//! the rows, then of the `X // 2 + 1` needed columns (rustfft plans and scratch made once
//! per partition).

use super::frames::{FrameKernel, FramesPartition, frames_of, out_f32, require_real};
use super::spec;
use super::spec::nav_buffer;
use crate::array::NdArray;
use crate::dtype::DType;
use crate::udf::{
    BufferDecl, CallError, DatasetMeta, Description, InitContext, Method, Params, PartitionRunner, RunPlan, Udf,
};
use num_complex::Complex64;
use rustfft::{Fft, FftPlanner};
use std::sync::Arc;

/// LiberTEM's `CrystallinityUDF`.
pub struct Crystallinity {
    description: Description,
}

impl Default for Crystallinity {
    fn default() -> Self {
        let mut d = spec::describe(
            "crystallinity",
            "Integral of the Fourier spectrum over a ring of frequencies, per frame (LiberTEM CrystallinityUDF)",
        );
        d.params = vec![
            spec::float("rad_in", "inner radius of the Fourier ring (frequencies with d <= rad_in excluded)", None),
            spec::float("rad_out", "outer radius of the Fourier ring", None),
            spec::array(
                "real_center",
                "centre of the real-space disk to exclude: row y, column x (empty: none)",
                Some(&[]),
            ),
            spec::float("real_rad", "radius of the real-space disk to exclude (NaN: none)", Some(f64::NAN)),
        ];
        d.methods = vec![Method::Frame];
        Crystallinity { description: d }
    }
}

/// The real-space mask (`None`: all ones) and the half Fourier ring `(Y, X // 2 + 1)`.
fn masks(params: &Params, sig: &[usize]) -> Result<(Option<Vec<f64>>, Vec<f64>), CallError> {
    let (sy, sx) = spec::sig_2d(sig, "crystallinity")?;
    let (rin, rout) = (spec::get_float(params, "rad_in")?, spec::get_float(params, "rad_out")?);
    let center = spec::array_f64(spec::get_array(params, "real_center")?, "real_center")?;
    let real_rad = spec::get_float(params, "real_rad")?;
    let real = match (center.as_slice(), real_rad.is_nan()) {
        ([], _) | (_, true) => None,
        ([cy, cx], false) => Some(
            (0..sy * sx)
                .map(|i| {
                    let d2 = ((i / sx) as f64 - cy).powi(2) + ((i % sx) as f64 - cx).powi(2);
                    if d2 <= real_rad * real_rad { 0.0 } else { 1.0 }
                })
                .collect(),
        ),
        (other, _) => {
            return Err(CallError::bad_param(format!(
                "parameter 'real_center' must be empty or 2 numbers (y, x), got {other:?}"
            )));
        }
    };
    let inside = |d2: f64, r: f64| if r >= 0.0 && d2 <= r * r { 1.0 } else { 0.0 };
    let ring = |y: usize, x: usize| {
        let d2 = (y as f64 - sy as f64 * 0.5).powi(2) + (x as f64 - sx as f64 * 0.5).powi(2);
        inside(d2, rout) - inside(d2, rin)
    };
    // fftshift = roll by n // 2: shifted[k] = ring[(k - n // 2) mod n].
    let half_x = sx / 2 + 1;
    let half = (0..sy)
        .flat_map(|ky| (0..half_x).map(move |kx| (ky, kx)))
        .map(|(ky, kx)| ring((ky + sy - sy / 2) % sy, (kx + sx - sx / 2) % sx))
        .collect();
    Ok((real, half))
}

impl Udf for Crystallinity {
    fn description(&self) -> &Description {
        &self.description
    }

    fn source(&self) -> &str {
        "builtin:crystallinity"
    }

    fn reads_in_place(&self) -> bool {
        true
    }

    fn plan(&self, params: &Params, dataset: &DatasetMeta) -> Result<RunPlan, CallError> {
        masks(params, &dataset.sig_shape)?;
        Ok(spec::plan_of(&self.description))
    }

    fn result_buffers(&self, _: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>, CallError> {
        require_real(dataset.input_dtype, "crystallinity")?;
        Ok(vec![nav_buffer("intensity", DType::F32, &[])])
    }

    fn start(&self, ctx: InitContext<'_>) -> Result<Box<dyn PartitionRunner + '_>, CallError> {
        require_real(ctx.dataset.input_dtype, "crystallinity")?;
        let (sy, sx) = spec::sig_2d(&ctx.dataset.sig_shape, "crystallinity")?;
        let (real, half) = masks(ctx.params, &ctx.dataset.sig_shape)?;
        let mut planner = FftPlanner::<f64>::new();
        let (rows, cols) = (planner.plan_fft_forward(sx), planner.plan_fft_forward(sy));
        let scratch_len = rows.get_inplace_scratch_len().max(cols.get_inplace_scratch_len());
        let kernel = CrystallinityKernel {
            sy,
            sx,
            real,
            half,
            rows,
            cols,
            image: vec![Complex64::default(); sy * sx],
            columns: vec![Complex64::default(); sy * (sx / 2 + 1)],
            scratch: vec![Complex64::default(); scratch_len],
        };
        let buffer = NdArray::zeros(DType::F32, &[frames_of(&ctx)]);
        Ok(Box::new(FramesPartition::new(&ctx, kernel, vec![("intensity", buffer)], "crystallinity")))
    }
}

struct CrystallinityKernel {
    sy: usize,
    sx: usize,
    real: Option<Vec<f64>>,
    /// `(Y, X // 2 + 1)` weights.
    half: Vec<f64>,
    rows: Arc<dyn Fft<f64>>,
    cols: Arc<dyn Fft<f64>>,
    image: Vec<Complex64>,
    /// The needed columns, transposed: `(X // 2 + 1, Y)`.
    columns: Vec<Complex64>,
    scratch: Vec<Complex64>,
}

impl CrystallinityKernel {
    fn integrate(&mut self, value: impl Fn(usize) -> f64) -> f32 {
        let (sy, sx) = (self.sy, self.sx);
        let half_x = sx / 2 + 1;
        for (i, c) in self.image.iter_mut().enumerate() {
            let m = self.real.as_ref().map_or(1.0, |r| r[i]);
            *c = Complex64::new(value(i) * m, 0.0);
        }
        self.rows.process_with_scratch(&mut self.image, &mut self.scratch);
        for kx in 0..half_x {
            for y in 0..sy {
                self.columns[kx * sy + y] = self.image[y * sx + kx];
            }
        }
        self.cols.process_with_scratch(&mut self.columns, &mut self.scratch);
        let mut total = 0.0;
        for kx in 0..half_x {
            for ky in 0..sy {
                let w = self.half[ky * half_x + kx];
                if w != 0.0 {
                    total += self.columns[kx * sy + ky].norm() * w;
                }
            }
        }
        total as f32
    }
}

impl FrameKernel for CrystallinityKernel {
    fn frame_f32(&mut self, index: usize, frame: &[f32], out: &mut [NdArray]) -> Result<(), CallError> {
        let v = self.integrate(|i| f64::from(frame[i]));
        *out_f32(out)?.get_mut(index).ok_or_else(|| CallError::internal("frame beyond partition"))? = v;
        Ok(())
    }

    fn frame_f64(&mut self, index: usize, frame: &[f64], out: &mut [NdArray]) -> Result<(), CallError> {
        let v = self.integrate(|i| frame[i]);
        *out_f32(out)?.get_mut(index).ok_or_else(|| CallError::internal("frame beyond partition"))? = v;
        Ok(())
    }
}
