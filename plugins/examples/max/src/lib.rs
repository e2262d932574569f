//! LiberTEM's `MaxUDF` (docs: `udf/basic.rst`, "Merging partial results"): the
//! maximum of every pixel over all frames.
//!
//! Buffer `maxbuf` (kind sig, input dtype): `maxbuf[y, x] = max_n F_n[y, x]`, NaN if any
//! frame is NaN there (`np.maximum`). LiberTEM's `preprocess` fills the buffer with
//! `-inf`; declaring the merge as `Merge::Max` does that here, on the workers and on the
//! main side.

use udf_sdk::prelude::*;

struct MaxUdf;

impl Udf for MaxUdf {
    fn declare() -> Declaration {
        Declaration::new("max", "Maximum of all frames")
            .method(Method::Frame)
            .sig("maxbuf", BufferDType::Input)
            .merge(Merge::Max)
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(MaxUdf)
    }

    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        results.accumulate("maxbuf", frame, Merge::Max)
    }
}

udf_sdk::export_udf!(MaxUdf);
