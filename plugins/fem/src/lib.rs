//! `fem`: fluctuation electron microscopy, the standard deviation of the pixels in a ring
//! of each frame (LiberTEM's `FEMUDF`, BUILTINS.md §7).
//!
//! ```text
//! d²[y, x]     = (y − center[0])² + (x − center[1])²
//! ring[y, x]   = [d² ≤ rad_out²] − [d² ≤ rad_in²]
//! intensity[n] = std({F_n[y, x] : ring[y, x] = 1})     (population std, ddof = 0)
//! ```
//!
//! - Method: frame (`process_frame`); preferred input dtype float32. Needs a 2-D signal
//!   shape and real input (invalid-data otherwise).
//! - Buffer `intensity`: kind nav, float32 (merged by the host).
//! - Params (all required):
//!   - `center`: array of 2 numbers, **row (y) first**, then column (x). LiberTEM's
//!     docstring says `(x, y)`, but its code uses `center[0]` as the row; this plugin does
//!     what the code does. On the command line: `--param center=12,15.5`.
//!   - `rad_in`, `rad_out`: inner and outer radius in pixels, `0 ≤ rad_in ≤ rad_out`
//!     (`inf` allowed for `rad_out`).
//!
//! Bad params (wrong length, non-finite center, negative, NaN or crossed radii) are
//! bad-param errors. A ring that contains no pixel gives NaN, like `np.std` of an empty
//! selection. The statistics are computed in float64 (two passes) and stored as float32.

use udf_sdk::RunPlan;
use udf_sdk::prelude::*;

/// The parsed parameters.
struct FemParams {
    center: [f64; 2],
    rad_in: f64,
    rad_out: f64,
}

impl FemParams {
    fn parse(params: &Params) -> Result<Self> {
        let center = params
            .point_yx("center")?
            .ok_or_else(|| UdfError::bad_param("parameter 'center' must hold 2 numbers (row y, column x), found 0"))?;
        let (rad_in, rad_out) = params.radii("rad_in", "rad_out")?;
        Ok(FemParams { center, rad_in, rad_out })
    }
}

/// Task data: flat indices of the ring's pixels.
struct Fem {
    ring: Vec<usize>,
    frame_len: usize,
}

impl Udf for Fem {
    fn describe() -> Description {
        Description::new(
            "fem",
            env!("CARGO_PKG_VERSION"),
            "Std. dev. of the pixels in a ring per frame (LiberTEM FEMUDF)",
        )
        .param(ParamSpec::array("center", "ring centre: row y, then column x (2 numbers, e.g. 12,15.5)"))
        .param(ParamSpec::float("rad_in", "inner radius in pixels (pixels with d <= rad_in are excluded)"))
        .param(ParamSpec::float("rad_out", "outer radius in pixels (pixels with d <= rad_out are included)"))
        .methods(&[Method::Frame])
    }

    fn plan(params: &Params, dataset: &DatasetMeta) -> Result<RunPlan> {
        udf_sdk::frame_shape_2d(dataset, "fem")?;
        FemParams::parse(params)?;
        Ok(RunPlan::from_description(&Self::describe()))
    }

    fn result_buffers(_: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        match dataset.input_dtype {
            DType::Float32 | DType::Float64 => Ok(vec![BufferDecl::nav("intensity", DType::Float32)]),
            other => Err(UdfError::invalid_data(format!(
                "fem needs real input, but the run's input dtype is {}",
                udf_sdk::dtype_name(other)
            ))),
        }
    }

    fn new(ctx: &Context) -> Result<Self> {
        let (ny, nx) = udf_sdk::frame_shape_2d(ctx.dataset(), "fem")?;
        let p = FemParams::parse(ctx.params())?;
        let (out2, in2) = (p.rad_out * p.rad_out, p.rad_in * p.rad_in);
        let mut ring = Vec::new();
        for y in 0..ny {
            for x in 0..nx {
                let (dy, dx) = (y as f64 - p.center[0], x as f64 - p.center[1]);
                let d2 = dy * dy + dx * dx;
                if d2 <= out2 && d2 > in2 {
                    ring.push(y * nx + x);
                }
            }
        }
        Ok(Fem { ring, frame_len: ny * nx })
    }

    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        let len: usize = frame.sig_shape().iter().product();
        if len != self.frame_len {
            return Err(UdfError::internal(format!("got a frame of {len} pixels, expected {}", self.frame_len)));
        }
        let std = match frame.dtype() {
            DType::Float32 => ring_std(frame.flat::<f32>()?, &self.ring),
            DType::Float64 => ring_std(frame.flat::<f64>()?, &self.ring),
            other => {
                return Err(UdfError::invalid_data(format!(
                    "fem needs float32 or float64 frames, got {}",
                    udf_sdk::dtype_name(other)
                )));
            }
        };
        results.view_mut::<f32>("intensity")?.fill(std as f32);
        Ok(())
    }
}

/// Population standard deviation of `frame` at `indices` (NaN if there are none).
fn ring_std<T: Float>(frame: &[T], indices: &[usize]) -> f64 {
    if indices.is_empty() {
        return f64::NAN;
    }
    let n = indices.len() as f64;
    let mean = indices.iter().map(|&i| frame[i].to_f64()).sum::<f64>() / n;
    let var = indices
        .iter()
        .map(|&i| {
            let d = frame[i].to_f64() - mean;
            d * d
        })
        .sum::<f64>()
        / n;
    var.sqrt()
}

udf_sdk::export_udf!(Fem);
