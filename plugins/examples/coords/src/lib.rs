//! LiberTEM's `CoordUDF` (docs: `udf/advanced.rst`, "Coordinates"): the true nav
//! coordinates of every frame (`self.meta.coordinates`), also with a ROI.
//!
//! Buffer `coords` (kind nav, int64, extra shape `(nav dims,)`).

use udf_sdk::prelude::*;

struct CoordUdf;

impl Udf for CoordUdf {
    fn declare() -> Declaration {
        Declaration::new("coords", "The nav coordinates of every frame")
            .nav("coords", DType::Int64)
            .extra_shape_with(|_, dataset| Ok(vec![dataset.nav_shape.len() as u64]))
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(CoordUdf)
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        results.assign("coords", &tile.coordinates().concat())
    }
}

udf_sdk::export_udf!(CoordUdf);
