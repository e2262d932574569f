//! LiberTEM's `PixelsumUDF` (docs: `udf/advanced.rst`, "Meta information"): the sum of
//! each frame, written by hand at the frame's position in the ROI-compressed flat nav
//! axis (`self.meta.slice`), into a single buffer.
//!
//! Buffer `pixelsum_nav_raw` (kind single, the dataset's dtype, shape `(N,)` with `N`
//! the selected frames): `pixelsum_nav_raw[i] = Σ_{y,x} F_i[y, x]`. Merged by adding
//! (each partition writes only its own positions).

use udf_sdk::prelude::*;

struct PixelsumUdf;

impl Udf for PixelsumUdf {
    fn declare() -> Declaration {
        Declaration::new("pixelsum", "Sum of each frame in a single buffer")
            .method(Method::Frame)
            .single("pixelsum_nav_raw", BufferDType::Dataset)
            .extra_shape_with(|_, dataset| Ok(vec![dataset.frames()]))
            .merge(Merge::Add)
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(PixelsumUdf)
    }

    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        results.set_at("pixelsum_nav_raw", &[frame.nav_index()], frame.sum()?)
    }
}

udf_sdk::export_udf!(PixelsumUdf);
