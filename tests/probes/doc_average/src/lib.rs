//! A port of `AverageUDF` from LiberTEM's documentation ("Post-processing after merging",
//! `reference/seeds/udf-advanced-topics.txt`), for the conformance kit's tests.
//!
//! `sum` (sig, float32) and `num_frames` (single, uint64) are accumulated per frame and
//! merged by addition; `average = sum / num_frames` is a result-only buffer computed in
//! `get_results`, as **float64** (the documentation declares float32; float64 is what
//! makes the point here: a float64 result of float32 sums carries float32 rounding, and
//! the kit must judge it by that). `sum` is passed through unchanged.

use udf_sdk::prelude::*;

struct Average;

impl Udf for Average {
    fn describe() -> Description {
        Description::new("doc-average", "0.1.0", "Sum and average of all frames (LiberTEM docs: AverageUDF)")
            .methods(&[Method::Frame])
            .custom_merge()
            .custom_results()
    }

    fn result_buffers(_: &Params, _: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        Ok(vec![
            BufferDecl::sig("sum", DType::Float32),
            BufferDecl::single("num_frames", DType::Uint64),
            BufferDecl::sig("average", DType::Float64).result_only(),
        ])
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(Average)
    }

    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        // `self.results.sum[:] += frame`: NumPy adds in the wider type, then stores float32.
        let mut sum = results.view_mut::<f32>("sum")?;
        match frame.dtype() {
            DType::Float32 => Zip::from(&mut sum).and(&frame.data::<f32>()?).for_each(|s, &x| *s += x),
            DType::Float64 => {
                Zip::from(&mut sum).and(&frame.data::<f64>()?).for_each(|s, &x| *s = (f64::from(*s) + x) as f32);
            }
            other => {
                return Err(UdfError::invalid_data(format!(
                    "doc-average needs real float input, got {}",
                    udf_sdk::dtype_name(other)
                )));
            }
        }
        results.view_mut::<u64>("num_frames")?[0] += 1;
        Ok(())
    }

    fn merge(_: &MergeContext, dest: &mut Buffers, src: &Buffers) -> Result<()> {
        let mut sum = dest.view_mut::<f32>("sum")?;
        sum += &src.view::<f32>("sum")?;
        dest.view_mut::<u64>("num_frames")?[0] += src.view::<u64>("num_frames")?[0];
        Ok(())
    }

    fn get_results(_: &ResultsContext, buffers: &Buffers) -> Result<Vec<ResultOut>> {
        // 'sum' omitted: returned unchanged. No frame (an empty ROI) gives NaN, as NumPy.
        let n = buffers.view::<u64>("num_frames")?[0] as f64;
        let average = buffers.view::<f32>("sum")?.mapv(|s| f64::from(s) / n);
        Ok(vec![ResultOut::new("average", average)])
    }
}

udf_sdk::export_udf!(Average);
