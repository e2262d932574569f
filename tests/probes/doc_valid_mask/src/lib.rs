//! A port of `CustomValidMask` from LiberTEM's documentation ("Valid data masking",
//! `reference/seeds/udf-advanced-topics.txt`), for the conformance kit's tests.
//!
//! Emulates a nav buffer with a `single` buffer whose extra shape is the nav shape (the
//! ROI count with a ROI): each frame's sum goes to its position, partitions merge by
//! addition, and `get_results` sets the valid mask a nav buffer would have (the merged
//! positions). The documentation indexes with `meta.coordinates`, which only fits the
//! buffer without a ROI; this port uses the frame's position in the buffer: its true flat
//! index without a ROI (the same element as its coordinates), its compressed index with
//! one.

use udf_sdk::prelude::*;

struct CustomValidMask;

impl Udf for CustomValidMask {
    fn describe() -> Description {
        Description::new("doc-valid-mask", "0.1.0", "Frame sums in a nav-shaped single buffer with a custom valid mask")
            .methods(&[Method::Frame])
            .custom_merge()
            .custom_results()
    }

    fn result_buffers(_: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        let extra = match dataset.roi_count {
            Some(count) => vec![count],
            None => dataset.nav_shape.clone(),
        };
        Ok(vec![BufferDecl::single("custom_2d", DType::Float32).extra_shape(&extra)])
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(CustomValidMask)
    }

    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        let dataset = frame.context().dataset();
        let at = if dataset.roi_count.is_some() { frame.nav_index() } else { frame.true_nav_index() } as usize;
        let sum: f32 = match frame.dtype() {
            DType::Float32 => frame.flat::<f32>()?.iter().sum(),
            DType::Float64 => frame.flat::<f64>()?.iter().sum::<f64>() as f32,
            other => {
                return Err(UdfError::invalid_data(format!(
                    "doc-valid-mask needs real float input, got {}",
                    udf_sdk::dtype_name(other)
                )));
            }
        };
        let mut custom = results.view_mut::<f32>("custom_2d")?;
        let slot = custom.iter_mut().nth(at).ok_or_else(|| UdfError::internal(format!("no position {at}")))?;
        *slot = sum;
        Ok(())
    }

    fn merge(_: &MergeContext, dest: &mut Buffers, src: &Buffers) -> Result<()> {
        let mut custom = dest.view_mut::<f32>("custom_2d")?;
        custom += &src.view::<f32>("custom_2d")?;
        Ok(())
    }

    fn get_results(ctx: &ResultsContext, buffers: &Buffers) -> Result<Vec<ResultOut>> {
        // The valid mask of a nav buffer: the merged positions, one per element here.
        let custom = buffers.to_owned::<f32>("custom_2d")?;
        Ok(vec![ResultOut::new("custom_2d", custom).with_mask(ctx.valid_nav_mask.clone())])
    }
}

udf_sdk::export_udf!(CustomValidMask);
