//! Broken on purpose: the sum over each frame, whose `get_results` also returns a
//! buffer it never declared. Caught by `declarations.buffers` (the host's contract
//! error).

use udf_sdk::prelude::*;

struct Undeclared;

impl Udf for Undeclared {
    fn describe() -> Description {
        Description::new("broken-undeclared", "0.1.0", "Sum over frames; returns an undeclared buffer").custom_results()
    }

    fn result_buffers(_: &Params, _: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        Ok(vec![BufferDecl::nav("intensity", DType::Float32)])
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(Undeclared)
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        let data = tile.flat::<f32>()?;
        let mut intensity = results.view_mut::<f32>("intensity")?;
        for (acc, frame) in intensity.iter_mut().zip(data.chunks_exact(tile.frame_len())) {
            *acc += frame.iter().sum::<f32>();
        }
        Ok(())
    }

    fn get_results(_: &ResultsContext, buffers: &Buffers) -> Result<Vec<ResultOut>> {
        let intensity = buffers.to_owned::<f32>("intensity")?;
        let debug = intensity.mapv(|x| x * 2.0);
        // The bug: "debug" is not declared.
        Ok(vec![buffers.pass_through("intensity")?, ResultOut::new("debug", debug)])
    }
}

udf_sdk::export_udf!(Undeclared);
