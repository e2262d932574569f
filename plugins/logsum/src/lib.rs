//! `logsum`: the sum of log-scaled frames (LiberTEM's `LogsumUDF`, BUILTINS.md §6).
//!
//! Each frame is shifted so that its minimum becomes 1 and then log-scaled, which makes
//! faint features visible next to a bright central beam:
//!
//! ```text
//! logsum[y, x] = Σ_n ln(F_n[y, x] − min_{y', x'} F_n[y', x'] + 1)
//! ```
//!
//! - Method: frame (`process_frame`); preferred input dtype float32 (float64 data gives
//!   float64 frames). Complex input is rejected (invalid-data).
//! - Buffer `logsum`: kind sig, float32, merged with `+=`.
//! - Params: none.
//!
//! The log is taken in float64 and added to the float32 buffer. A frame containing NaN
//! has a NaN minimum, so it makes the whole sum NaN, as with NumPy's `np.min`.

use udf_sdk::prelude::*;

struct Logsum;

/// `ln(v − min + 1)` of every pixel of `frame`, added to `acc` (same length, C order).
fn accumulate<T: Float>(frame: &[T], acc: &mut [f32]) {
    let min = frame
        .iter()
        .map(|v| v.to_f64())
        .fold(f64::INFINITY, |m, v| if m.is_nan() || v.is_nan() { f64::NAN } else { m.min(v) });
    for (a, v) in acc.iter_mut().zip(frame) {
        *a += (v.to_f64() - min + 1.0).ln() as f32;
    }
}

impl Udf for Logsum {
    fn describe() -> Description {
        Description::new("logsum", env!("CARGO_PKG_VERSION"), "Sum of log-scaled frames (LiberTEM LogsumUDF)")
            .methods(&[Method::Frame])
            .custom_merge()
    }

    fn result_buffers(_: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        match dataset.input_dtype {
            DType::Float32 | DType::Float64 => Ok(vec![BufferDecl::sig("logsum", DType::Float32)]),
            other => Err(UdfError::invalid_data(format!(
                "logsum needs real input, but the run's input dtype is {}",
                udf_sdk::dtype_name(other)
            ))),
        }
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(Logsum)
    }

    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        let mut logsum = results.view_mut::<f32>("logsum")?;
        let logsum =
            logsum.as_slice_mut().ok_or_else(|| UdfError::internal("the logsum frame view is not contiguous"))?;
        match frame.dtype() {
            DType::Float32 => accumulate(frame.flat::<f32>()?, logsum),
            DType::Float64 => accumulate(frame.flat::<f64>()?, logsum),
            other => {
                return Err(UdfError::invalid_data(format!(
                    "logsum needs float32 or float64 frames, got {}",
                    udf_sdk::dtype_name(other)
                )));
            }
        }
        Ok(())
    }

    fn merge(_: &MergeContext, dest: &mut Buffers, src: &Buffers) -> Result<()> {
        let mut acc = dest.view_mut::<f32>("logsum")?;
        acc += &src.view::<f32>("logsum")?;
        Ok(())
    }
}

udf_sdk::export_udf!(Logsum);
