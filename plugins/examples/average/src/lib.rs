//! LiberTEM's `AverageUDF` (docs: `udf/advanced.rst`, "Post-processing after
//! merging"): like `SumUDF`, but also computes the average in `get_results`.
//!
//! Buffers: `sum` (kind sig, float32) `= Σ_n F_n`, `num_frames` (kind single, uint64)
//! `= N`, `average` (kind sig, float32, result only) `= sum / num_frames`.

use udf_sdk::prelude::*;

struct AverageUdf;

impl Udf for AverageUdf {
    fn declare() -> Declaration {
        Declaration::new("average", "Like SumUDF, but also computes the average")
            .method(Method::Frame)
            .sig("sum", DType::Float32)
            .merge(Merge::Add)
            .single("num_frames", DType::Uint64)
            .merge(Merge::Add)
            .sig("average", DType::Float32)
            .result_only()
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(AverageUdf)
    }

    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        results.accumulate("sum", frame, Merge::Add)?;
        results.accumulate("num_frames", 1, Merge::Add)
    }

    fn get_results(_: &ResultsContext, buffers: &Buffers) -> Result<Vec<ResultOut>> {
        // `sum` and `num_frames` are returned unchanged.
        let num_frames = buffers.whole::<u64>("num_frames")?[0] as f32;
        Ok(vec![ResultOut::new("average", buffers.to_owned::<f32>("sum")? / num_frames)])
    }
}

udf_sdk::export_udf!(AverageUdf);
