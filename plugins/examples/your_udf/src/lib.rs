//! LiberTEM's `YourUDF`, the UDF of the "Running UDFs" examples (docs: `udf/basic.rst`:
//! run alone, with a ROI, and together with `SumUDF` in one pass).
//!
//! Buffer `buf1` (kind nav, float32): 42 for every frame.

use udf_sdk::prelude::*;

struct YourUdf;

impl Udf for YourUdf {
    fn declare() -> Declaration {
        Declaration::new("your-udf", "42 for every frame").method(Method::Frame).nav("buf1", DType::Float32)
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(YourUdf)
    }

    fn process_frame(&mut self, _: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        results.fill("buf1", 42.0)
    }
}

udf_sdk::export_udf!(YourUdf);
