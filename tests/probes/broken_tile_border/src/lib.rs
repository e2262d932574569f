//! Broken on purpose: the sum over each frame, with an off-by-one that skips the last
//! frame of every tile deeper than one frame. Caught by `invariance.tiles`.

use udf_sdk::prelude::*;

struct TileBorder;

impl Udf for TileBorder {
    fn describe() -> Description {
        Description::new("broken-tile-border", "0.1.0", "Sum over frames; skips a frame at tile borders")
    }

    fn result_buffers(_: &Params, _: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        Ok(vec![BufferDecl::nav("intensity", DType::Float32)])
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(TileBorder)
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        let data = tile.flat::<f32>()?;
        let mut intensity = results.view_mut::<f32>("intensity")?;
        let frames = tile.frames();
        // The bug: `frames - 1` where `frames` was meant.
        let counted = if frames > 1 { frames - 1 } else { frames };
        for (acc, frame) in intensity.iter_mut().zip(data.chunks_exact(tile.frame_len())).take(counted) {
            *acc += frame.iter().sum::<f32>();
        }
        Ok(())
    }
}

udf_sdk::export_udf!(TileBorder);
