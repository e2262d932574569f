//! Probe: the sum over frames (sig buffer) and over each frame's pixels (nav buffer)
//! computed with host arrays — the tile never enters the plugin (`use_host_tiles`), the
//! sums are host calls, only the per-tile sums are copied out. Param `leak` (bool,
//! default false) keeps every array it makes, to show the live-array cap.

use udf_sdk::array::{Array, use_host_tiles};
use udf_sdk::prelude::*;

struct HostArrays {
    leak: bool,
    kept: Vec<Array>,
}

impl Udf for HostArrays {
    fn describe() -> Description {
        use_host_tiles();
        Description::new("host-arrays", "0.1.0", "Sum and sum over pixels with host arrays")
            .param(ParamSpec::boolean("leak", "keep every array made (tests the cap)").default(false))
            .custom_merge()
    }

    fn result_buffers(_: &Params, _: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        Ok(vec![BufferDecl::sig("intensity", DType::Float32), BufferDecl::nav("sumsig", DType::Float32)])
    }

    fn new(ctx: &Context) -> Result<Self> {
        Ok(HostArrays { leak: ctx.params().boolean("leak")?, kept: Vec::new() })
    }

    fn process_tile(&mut self, _tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        let tile = Array::tile()?;
        let ndim = tile.shape().len() as i64;
        let over_frames = tile.sum(Some(&[0]))?.to_vec::<f32>()?;
        let pixels: Vec<i64> = (1..ndim).collect();
        let per_frame = tile.sum(Some(&pixels))?.to_vec::<f32>()?;
        for (o, v) in results.view_mut::<f32>("intensity")?.iter_mut().zip(over_frames) {
            *o += v;
        }
        for (o, v) in results.view_mut::<f32>("sumsig")?.iter_mut().zip(per_frame) {
            *o += v;
        }
        if self.leak {
            self.kept.push(tile);
        }
        Ok(())
    }

    fn merge(_: &MergeContext, dest: &mut Buffers, src: &Buffers) -> Result<()> {
        let mut d = dest.view_mut::<f32>("intensity")?;
        d += &src.view::<f32>("intensity")?;
        let mut n = dest.view_mut::<f32>("sumsig")?;
        n.assign(&src.view::<f32>("sumsig")?);
        Ok(())
    }
}

udf_sdk::export_udf!(HostArrays);
