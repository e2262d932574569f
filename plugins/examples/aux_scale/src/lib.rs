//! Per-frame auxiliary data (docs: `udf/advanced.rst`, "AUX data", which has no code):
//! a parameter with one value per scan position, sliced by the host to the frame being
//! processed (LiberTEM's `UDF.aux_data(kind='nav')`).
//!
//! Param `scale` (nav aux, float64, one value per scan position). Buffer `scaled` (kind
//! nav, float64): `scaled[n] = scale[n] · Σ_{y,x} F_n[y, x]`.

use udf_sdk::prelude::*;

struct AuxScale;

impl Udf for AuxScale {
    fn declare() -> Declaration {
        Declaration::new("aux-scale", "Sum of each frame times its own factor")
            .method(Method::Frame)
            .param(ParamSpec::nav_aux("scale", "one factor per scan position (float64)"))
            .nav("scaled", DType::Float64)
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(AuxScale)
    }

    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        let scale = frame.aux::<f64>("scale")?[0];
        results.fill("scaled", scale * frame.sum()?)
    }
}

udf_sdk::export_udf!(AuxScale);
