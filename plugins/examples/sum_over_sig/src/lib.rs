//! LiberTEM's `SumOverSig` (docs: `udf/basic.rst`, "Implementing the processing
//! function"): the sum of each frame.
//!
//! Buffer `pixelsum` (kind nav, float32): `pixelsum[n] = Σ_{y,x} F_n[y, x]`.

use udf_sdk::prelude::*;

struct SumOverSig;

impl Udf for SumOverSig {
    fn declare() -> Declaration {
        Declaration::new("sum-over-sig", "Sum of each frame").method(Method::Frame).nav("pixelsum", DType::Float32)
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(SumOverSig)
    }

    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        // The nav buffer's view is this frame's entry.
        results.fill("pixelsum", frame.sum()?)
    }
}

udf_sdk::export_udf!(SumOverSig);
