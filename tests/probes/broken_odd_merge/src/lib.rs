//! Broken on purpose: the sum of all frames, whose merge overwrites instead of adding
//! when the last partition has an even index — i.e. whenever the partition count is
//! odd (but not 1). Caught by `invariance.partitions`.

use udf_sdk::prelude::*;

struct OddMerge;

impl Udf for OddMerge {
    fn describe() -> Description {
        Description::new("broken-odd-merge", "0.1.0", "Sum of frames; wrong merge for odd partition counts")
            .custom_merge()
    }

    fn result_buffers(_: &Params, _: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        Ok(vec![BufferDecl::sig("intensity", DType::Float32)])
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(OddMerge)
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        let mut intensity = results.view_mut::<f32>("intensity")?;
        for frame in tile.data::<f32>()?.outer_iter() {
            Zip::from(&mut intensity).and(&frame).for_each(|acc, &x| *acc += x);
        }
        Ok(())
    }

    fn merge(ctx: &MergeContext, dest: &mut Buffers, src: &Buffers) -> Result<()> {
        let total = ctx.dataset.roi_count.unwrap_or_else(|| ctx.dataset.nav_shape.iter().product());
        let last = ctx.partition.origin + ctx.partition.frames == total;
        let mut acc = dest.view_mut::<f32>("intensity")?;
        let src = src.view::<f32>("intensity")?;
        if last && ctx.partition.index.is_multiple_of(2) {
            // The bug: "the last partition starts the sum" only holds for one partition.
            acc.assign(&src);
        } else {
            Zip::from(&mut acc).and(&src).for_each(|a, &b| *a += b);
        }
        Ok(())
    }
}

udf_sdk::export_udf!(OddMerge);
