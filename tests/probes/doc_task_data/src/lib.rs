//! Task data and the tile's signal slice, in the pattern of the documentation's
//! `SparseCorrelationUDF` examples ("Tiled processing", "Task data", "Post-processing of
//! partition results", `reference/seeds/udf-advanced-topics.txt`), for the conformance
//! kit's tests.
//!
//! `new` builds the task data once per partition: a ring mask (`rad_in ≤ r < rad_out`
//! around the frame centre) over the whole frame. `process_tile` cuts the part of the
//! mask that matches the tile's signal slice (`meta.slice`) and adds each frame's masked
//! sum to `intensity` (nav, float32). `postprocess` fills a second buffer from the first
//! once the partition is done: `normalized = intensity / (pixels in the ring)`.

use udf_sdk::prelude::*;

/// The task data: the ring mask of the whole frame.
struct Ring {
    mask: Vec<f32>,
    width: usize,
    pixels: f32,
}

impl Udf for Ring {
    fn describe() -> Description {
        Description::new("doc-task-data", "0.1.0", "Masked sum per frame with the mask as task data, cut per tile")
            .param(ParamSpec::float("rad_in", "inner radius of the ring, pixels").default(1.0))
            .param(ParamSpec::float("rad_out", "outer radius of the ring, pixels").default(4.0))
    }

    fn result_buffers(params: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        udf_sdk::frame_shape_2d(dataset, "doc-task-data")?;
        params.radii("rad_in", "rad_out")?;
        Ok(vec![BufferDecl::nav("intensity", DType::Float32), BufferDecl::nav("normalized", DType::Float32)])
    }

    fn new(ctx: &Context) -> Result<Self> {
        let (height, width) = udf_sdk::frame_shape_2d(ctx.dataset(), "doc-task-data")?;
        let (rad_in, rad_out) = ctx.params().radii("rad_in", "rad_out")?;
        let (cy, cx) = ((height / 2) as f64, (width / 2) as f64);
        let mask: Vec<f32> = (0..height * width)
            .map(|i| {
                let r = ((i / width) as f64 - cy).hypot((i % width) as f64 - cx);
                f32::from(u8::from(rad_in <= r && r < rad_out))
            })
            .collect();
        let pixels = mask.iter().sum();
        Ok(Ring { mask, width, pixels })
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        // The part of the mask under the tile (`c.get(key=tile_slice)`).
        let (&[y0, x0], &[h, w]) = (tile.sig_origin(), tile.sig_shape()) else {
            return Err(UdfError::internal("a 2-D signal slice was expected"));
        };
        let (y0, x0) = (y0 as usize, x0 as usize);
        let part: Vec<f32> = (0..h * w).map(|i| self.mask[(y0 + i / w) * self.width + x0 + i % w]).collect();
        let mut intensity = results.view_mut::<f32>("intensity")?;
        udf_sdk::with_float_type!(tile.dtype(), T => {
            let data = tile.flat::<T>()?;
            for (acc, frame) in intensity.iter_mut().zip(data.chunks_exact(tile.frame_len().max(1))) {
                *acc += frame.iter().zip(&part).map(|(x, m)| x.to_f64() as f32 * m).sum::<f32>();
            }
            Ok(())
        }, Err(UdfError::invalid_data("doc-task-data needs float input")))
    }

    fn postprocess(&mut self, _: &Context, results: &mut Buffers) -> Result<()> {
        let intensity = results.view::<f32>("intensity")?.to_owned();
        let pixels = self.pixels;
        let mut normalized = results.view_mut::<f32>("normalized")?;
        Zip::from(&mut normalized).and(&intensity).for_each(|n, &i| *n = if pixels > 0.0 { i / pixels } else { 0.0 });
        Ok(())
    }
}

udf_sdk::export_udf!(Ring);
