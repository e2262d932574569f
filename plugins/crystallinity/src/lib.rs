//! `crystallinity`: the integral of each frame's Fourier amplitude over a ring of spatial
//! frequencies (LiberTEM's `CrystallinityUDF`, BUILTINS.md §8). Crystalline regions
//! diffract into sharp spots whose regular spacing shows up as strong Fourier
//! components at the ring's frequencies.
//!
//! For a `Y × X` frame `F`:
//!
//! ```text
//! real_mask[y, x] = 1 − [(y − real_center[0])² + (x − real_center[1])² ≤ real_rad²]
//!                   (1 everywhere unless both real_center and real_rad are given)
//! ring[y, x]      = [d² ≤ rad_out²] − [d² ≤ rad_in²],  d² = (y − Y/2)² + (x − X/2)²
//! fm              = fftshift(ring)                     (np.fft.fftshift over both axes)
//! half            = fm[:, : X//2 + 1]
//! intensity[n]    = Σ_{k,l} |rfft2(F_n · real_mask)[k, l]| · half[k, l]
//! ```
//!
//! `rfft2` is the unnormalised forward 2-D DFT of a real array, keeping the columns
//! `l = 0 ..= X/2` (`R[k, l] = Σ_{y,x} f[y, x] e^{−2πi (k y / Y + l x / X)}`). The ring is
//! centred at `(Y · 0.5, X · 0.5)` in float, as LiberTEM builds it, before the shift.
//!
//! - Method: frame (`process_frame`); preferred input dtype float32. Needs a 2-D signal
//!   shape and real input (invalid-data otherwise). The transform runs in float64 with
//!   `rustfft` (rows, then the kept columns).
//! - Buffer `intensity`: kind nav, float32 (merged by the host).
//! - Params:
//!   - `rad_in`, `rad_out` (required): ring radii in Fourier pixels, `0 ≤ rad_in ≤ rad_out`.
//!   - `real_center` (optional): array of 2 numbers, row (y) first; the default, an empty
//!     array, means "not given". On the command line: `--param real_center=32,30.5`.
//!   - `real_rad` (optional): radius of the disk excluded in real space (typically the
//!     central beam); the default NaN means "not given".
//!
//!   Give both `real_center` and `real_rad` or neither: LiberTEM silently ignores one
//!   without the other, this plugin reports a bad-param error instead. Negative, NaN or
//!   crossed radii and a non-finite centre are bad-param errors too.

use rustfft::num_complex::Complex;
use rustfft::{Fft, FftPlanner};
use std::sync::Arc;
use udf_sdk::RunPlan;
use udf_sdk::prelude::*;

/// The parsed parameters.
struct CrystallinityParams {
    rad_in: f64,
    rad_out: f64,
    /// `(row, column, radius)` of the disk removed in real space.
    real_disk: Option<(f64, f64, f64)>,
}

impl CrystallinityParams {
    fn parse(params: &Params) -> Result<Self> {
        let (rad_in, rad_out) = params.radii("rad_in", "rad_out")?;
        let center = params.point_yx("real_center")?;
        let real_rad = params.float("real_rad")?;
        let real_disk = match (center, real_rad.is_nan()) {
            (None, true) => None,
            (Some([cy, cx]), false) => {
                if real_rad < 0.0 {
                    return Err(UdfError::bad_param(format!("real_rad must be non-negative, found {real_rad}")));
                }
                Some((cy, cx, real_rad))
            }
            (None, false) => {
                return Err(UdfError::bad_param("real_rad is given but real_center is not; give both or neither"));
            }
            (Some(_), true) => {
                return Err(UdfError::bad_param("real_center is given but real_rad is not; give both or neither"));
            }
        };
        Ok(CrystallinityParams { rad_in, rad_out, real_disk })
    }
}

/// Task data: masks, FFT plans and work space.
struct Crystallinity {
    ny: usize,
    nx: usize,
    /// `real_mask` in C order, if any.
    real_mask: Option<Vec<f64>>,
    /// `half` stored column by column: `half[l * ny + k]`.
    half: Vec<f64>,
    /// Whether column `l` of `half` has any non-zero entry.
    column_used: Vec<bool>,
    fft_x: Arc<dyn Fft<f64>>,
    fft_y: Arc<dyn Fft<f64>>,
    row: Vec<Complex<f64>>,
    /// The kept columns after the row transforms, column by column.
    spectrum: Vec<Complex<f64>>,
    scratch: Vec<Complex<f64>>,
}

impl Crystallinity {
    /// `Σ |rfft2(frame · real_mask)| · half`.
    fn intensity<T: Float>(&mut self, frame: &[T]) -> f64 {
        let (ny, nx) = (self.ny, self.nx);
        let kept = nx / 2 + 1;
        for y in 0..ny {
            let pixels = &frame[y * nx..(y + 1) * nx];
            match &self.real_mask {
                Some(mask) => {
                    let mask = &mask[y * nx..(y + 1) * nx];
                    for ((c, v), m) in self.row.iter_mut().zip(pixels).zip(mask) {
                        *c = Complex::new(v.to_f64() * m, 0.0);
                    }
                }
                None => {
                    for (c, v) in self.row.iter_mut().zip(pixels) {
                        *c = Complex::new(v.to_f64(), 0.0);
                    }
                }
            }
            self.fft_x.process_with_scratch(&mut self.row, &mut self.scratch);
            for l in 0..kept {
                self.spectrum[l * ny + y] = self.row[l];
            }
        }
        let mut sum = 0.0;
        for l in (0..kept).filter(|&l| self.column_used[l]) {
            let column = &mut self.spectrum[l * ny..(l + 1) * ny];
            self.fft_y.process_with_scratch(column, &mut self.scratch);
            for (c, &w) in column.iter().zip(&self.half[l * ny..(l + 1) * ny]) {
                if w != 0.0 {
                    sum += c.norm() * w;
                }
            }
        }
        sum
    }
}

impl Udf for Crystallinity {
    fn describe() -> Description {
        Description::new(
            "crystallinity",
            env!("CARGO_PKG_VERSION"),
            "Fourier-ring integral per frame (LiberTEM CrystallinityUDF)",
        )
        .param(ParamSpec::float("rad_in", "inner radius of the Fourier ring (frequencies with d <= rad_in excluded)"))
        .param(ParamSpec::float("rad_out", "outer radius of the Fourier ring"))
        .param(
            ParamSpec::array("real_center", "centre of the real-space disk to exclude: row y, column x (empty: none)")
                .default_array(&[0], Vec::<f64>::new()),
        )
        .param(ParamSpec::float("real_rad", "radius of the real-space disk to exclude (NaN: none)").default(f64::NAN))
        .methods(&[Method::Frame])
    }

    fn plan(params: &Params, dataset: &DatasetMeta) -> Result<RunPlan> {
        udf_sdk::frame_shape_2d(dataset, "crystallinity")?;
        CrystallinityParams::parse(params)?;
        Ok(RunPlan::from_description(&Self::describe()))
    }

    fn result_buffers(_: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        match dataset.input_dtype {
            DType::Float32 | DType::Float64 => Ok(vec![BufferDecl::nav("intensity", DType::Float32)]),
            other => Err(UdfError::invalid_data(format!(
                "crystallinity needs real input, but the run's input dtype is {}",
                udf_sdk::dtype_name(other)
            ))),
        }
    }

    fn new(ctx: &Context) -> Result<Self> {
        let (ny, nx) = udf_sdk::frame_shape_2d(ctx.dataset(), "crystallinity")?;
        let p = CrystallinityParams::parse(ctx.params())?;
        let real_mask = p.real_disk.map(|(cy, cx, r)| {
            let mut mask = Vec::with_capacity(ny * nx);
            for y in 0..ny {
                for x in 0..nx {
                    let (dy, dx) = (y as f64 - cy, x as f64 - cx);
                    mask.push(if dy * dy + dx * dx <= r * r { 0.0 } else { 1.0 });
                }
            }
            mask
        });
        // The ring centred at (Y/2, X/2), fftshifted: fm[k, l] = ring[(k − Y//2) mod Y, (l − X//2) mod X].
        let (cy, cx) = (ny as f64 * 0.5, nx as f64 * 0.5);
        let (out2, in2) = (p.rad_out * p.rad_out, p.rad_in * p.rad_in);
        let kept = nx / 2 + 1;
        let mut half = vec![0.0; kept * ny];
        let mut column_used = vec![false; kept];
        for l in 0..kept.min(nx) {
            let x = (l + nx - nx / 2) % nx;
            for k in 0..ny {
                let y = (k + ny - ny / 2) % ny;
                let (dy, dx) = (y as f64 - cy, x as f64 - cx);
                let d2 = dy * dy + dx * dx;
                let w = f64::from(u8::from(d2 <= out2)) - f64::from(u8::from(d2 <= in2));
                half[l * ny + k] = w;
                column_used[l] |= w != 0.0;
            }
        }
        let mut planner = FftPlanner::new();
        let fft_x = planner.plan_fft_forward(nx);
        let fft_y = planner.plan_fft_forward(ny);
        let scratch_len = fft_x.get_inplace_scratch_len().max(fft_y.get_inplace_scratch_len());
        Ok(Crystallinity {
            ny,
            nx,
            real_mask,
            half,
            column_used,
            fft_x,
            fft_y,
            row: vec![Complex::default(); nx],
            spectrum: vec![Complex::default(); kept * ny],
            scratch: vec![Complex::default(); scratch_len],
        })
    }

    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        let len: usize = frame.sig_shape().iter().product();
        if len != self.ny * self.nx {
            return Err(UdfError::internal(format!("got a frame of {len} pixels, expected {}", self.ny * self.nx)));
        }
        let intensity = match frame.dtype() {
            DType::Float32 => self.intensity(frame.flat::<f32>()?),
            DType::Float64 => self.intensity(frame.flat::<f64>()?),
            other => {
                return Err(UdfError::invalid_data(format!(
                    "crystallinity needs float32 or float64 frames, got {}",
                    udf_sdk::dtype_name(other)
                )));
            }
        };
        results.view_mut::<f32>("intensity")?.fill(intensity as f32);
        Ok(())
    }
}

udf_sdk::export_udf!(Crystallinity);
