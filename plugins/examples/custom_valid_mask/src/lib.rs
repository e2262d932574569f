//! LiberTEM's `CustomValidMask` (docs: `udf/advanced.rst`, "Valid data masking"): a
//! kind single buffer laid out like a nav buffer, returned with the valid mask a nav
//! buffer would have (`self.meta.get_valid_nav_mask()` and `with_mask`).
//!
//! Buffer `custom_2d` (kind single, float32, shape: the nav shape, or `(N,)` with a ROI):
//! the sum of each frame at its nav coordinates (its ROI-compressed index with a ROI;
//! LiberTEM's example indexes with the coordinates either way, which fails with a ROI).

use udf_sdk::prelude::*;

struct CustomValidMask;

impl Udf for CustomValidMask {
    fn declare() -> Declaration {
        Declaration::new("custom-valid-mask", "A nav-like single buffer with a nav buffer's valid mask")
            .method(Method::Frame)
            .single("custom_2d", DType::Float32)
            .extra_shape_with(|_, dataset| Ok(dataset.compressed_nav_shape()))
            .merge(Merge::Add)
            .custom_results()
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(CustomValidMask)
    }

    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        let at = match frame.context().dataset().roi_count {
            Some(_) => vec![frame.nav_index()],
            None => frame.coordinates(),
        };
        results.set_at("custom_2d", &at, frame.sum()?)
    }

    fn get_results(ctx: &ResultsContext, buffers: &Buffers) -> Result<Vec<ResultOut>> {
        Ok(vec![buffers.pass_through("custom_2d")?.with_mask(ctx.valid_nav_mask.clone())])
    }
}

udf_sdk::export_udf!(CustomValidMask);
