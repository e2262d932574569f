//! `sumsig`: the sum over each frame (LiberTEM's `SumSigUDF`).
//!
//! Buffer `intensity`: kind nav, dtype = input dtype (at least float32),
//! `intensity[n] = Σ_{y,x} F_n[y, x]`. Merged natively by the host.

use udf_sdk::prelude::*;
use udf_sdk::with_numeric_type;

struct SumSig;

impl Udf for SumSig {
    fn describe() -> Description {
        Description::new("sumsig", env!("CARGO_PKG_VERSION"), "Sum over each frame (LiberTEM SumSigUDF)")
    }

    fn result_buffers(_: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        Ok(vec![BufferDecl::nav("intensity", dataset.input_dtype)])
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(SumSig)
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        with_numeric_type!(tile.dtype(), T => {
            let data = tile.flat::<T>()?;
            let mut intensity = results.view_mut::<T>("intensity")?;
            // A tile may hold only part of each frame: accumulate the partial sums.
            for (acc, frame) in intensity.iter_mut().zip(data.chunks_exact(tile.frame_len())) {
                *acc += udf_sdk::simd::sum(frame);
            }
            Ok(())
        }, Err(UdfError::invalid_data("sumsig needs numeric input")))
    }
}

udf_sdk::export_udf!(SumSig);
