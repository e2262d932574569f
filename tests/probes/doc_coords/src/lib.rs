//! A port of `CoordUDF` from LiberTEM's documentation ("Coordinates",
//! `reference/seeds/udf-advanced-topics.txt`), for the conformance kit's tests.
//!
//! Records the true scan coordinates of every frame (`meta.coordinates`): a nav buffer of
//! int64 with one entry per nav axis — two per frame on a 2-D scan, one on a 1-D scan. A
//! correct plugin whose result shape depends on the scan's geometry.

use udf_sdk::prelude::*;

struct Coords;

impl Udf for Coords {
    fn describe() -> Description {
        Description::new("doc-coords", "0.1.0", "The scan coordinates of every frame (LiberTEM docs: CoordUDF)")
    }

    fn result_buffers(_: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        let nav_dims = dataset.nav_shape.len() as u64;
        Ok(vec![BufferDecl::nav("coords", DType::Int64).extra_shape(&[nav_dims])])
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(Coords)
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        // `self.results.coords[:] = self.meta.coordinates`
        let mut coords = results.view_mut::<i64>("coords")?;
        for (mut row, frame) in coords.outer_iter_mut().zip(tile.coordinates()) {
            for (c, &v) in row.iter_mut().zip(&frame) {
                *c = i64::try_from(v).map_err(|_| UdfError::invalid_data("coordinate beyond int64"))?;
            }
        }
        Ok(())
    }
}

udf_sdk::export_udf!(Coords);
