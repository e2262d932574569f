//! Broken on purpose: a mean over each frame that keeps the pixel count in a private
//! buffer and then returns that private buffer from `get_results`. Caught by
//! `declarations.buffers` (the host's contract error).

use udf_sdk::prelude::*;

struct PrivateResult;

impl Udf for PrivateResult {
    fn describe() -> Description {
        Description::new("broken-private-result", "0.1.0", "Mean over frames; returns a private buffer")
            .custom_results()
    }

    fn result_buffers(_: &Params, _: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        Ok(vec![BufferDecl::nav("mean", DType::Float32), BufferDecl::nav("pixels", DType::Float32).private()])
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(PrivateResult)
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        let data = tile.flat::<f32>()?;
        let [mean, pixels] = results.many_mut(["mean", "pixels"])?;
        let (mut mean, mut pixels) = (mean.view_mut::<f32>()?, pixels.view_mut::<f32>()?);
        for ((m, n), frame) in mean.iter_mut().zip(pixels.iter_mut()).zip(data.chunks_exact(tile.frame_len())) {
            *m += frame.iter().sum::<f32>();
            *n += frame.len() as f32;
        }
        Ok(())
    }

    fn get_results(_: &ResultsContext, buffers: &Buffers) -> Result<Vec<ResultOut>> {
        let sums = buffers.to_owned::<f32>("mean")?;
        let pixels = buffers.to_owned::<f32>("pixels")?;
        let mean = &sums / &pixels.mapv(|n| n.max(1.0));
        // The bug: "pixels" is private.
        Ok(vec![ResultOut::new("mean", mean), buffers.pass_through("pixels")?])
    }
}

udf_sdk::export_udf!(PrivateResult);
