//! A port of `PixelsumUDF` from LiberTEM's documentation ("ROI and current slice",
//! `reference/seeds/udf-advanced-topics.txt`), for the conformance kit's tests.
//!
//! A custom version of "sum over sig": a `single` buffer with one entry per processed
//! frame (`extra_shape = (ROI count or nav size,)`), indexed with the current slice's
//! compressed nav position (`meta.slice`), merged by addition (every partition leaves the
//! others' entries at zero). The documentation uses the dataset's dtype; this port uses
//! the input dtype, so integer data is summed as floats instead of wrapping.

use udf_sdk::prelude::*;

struct Pixelsum;

impl Udf for Pixelsum {
    fn describe() -> Description {
        Description::new(
            "doc-pixelsum",
            "0.1.0",
            "Sum over each frame into a single buffer (LiberTEM docs: PixelsumUDF)",
        )
        .methods(&[Method::Frame])
        .custom_merge()
    }

    fn result_buffers(_: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        let navsize = dataset.roi_count.unwrap_or_else(|| dataset.nav_len());
        Ok(vec![BufferDecl::single("pixelsum_nav_raw", float_dtype(dataset)?).extra_shape(&[navsize])])
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(Pixelsum)
    }

    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        // `np_slice = self.meta.slice.get(nav_only=True)`: the compressed position.
        let at = frame.nav_index() as usize;
        udf_sdk::with_float_type!(frame.dtype(), T => {
            let sum: T = frame.flat::<T>()?.iter().copied().sum();
            results.view_mut::<T>("pixelsum_nav_raw")?[at] = sum;
            Ok(())
        }, Err(UdfError::invalid_data("doc-pixelsum needs float input")))
    }

    fn merge(ctx: &MergeContext, dest: &mut Buffers, src: &Buffers) -> Result<()> {
        udf_sdk::with_float_type!(ctx.dataset.input_dtype, T => {
            let mut acc = dest.view_mut::<T>("pixelsum_nav_raw")?;
            acc += &src.view::<T>("pixelsum_nav_raw")?;
            Ok(())
        }, Err(UdfError::invalid_data("doc-pixelsum needs float input")))
    }
}

fn float_dtype(dataset: &DatasetMeta) -> Result<DType> {
    match dataset.input_dtype {
        d @ (DType::Float32 | DType::Float64 | DType::Complex64 | DType::Complex128) => Ok(d),
        other => {
            Err(UdfError::invalid_data(format!("doc-pixelsum needs float input, got {}", udf_sdk::dtype_name(other))))
        }
    }
}

udf_sdk::export_udf!(Pixelsum);
