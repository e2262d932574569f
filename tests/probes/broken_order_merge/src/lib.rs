//! Broken on purpose: "the last frame of the scan", whose merge assumes partitions
//! arrive in order (`dest = src`). Caught by `invariance.merge_order` (and the merge
//! algebra checks).

use udf_sdk::prelude::*;

struct OrderMerge;

impl Udf for OrderMerge {
    fn describe() -> Description {
        Description::new("broken-order-merge", "0.1.0", "Last frame; merge depends on the merge order").custom_merge()
    }

    fn result_buffers(_: &Params, _: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        Ok(vec![BufferDecl::sig("last", DType::Float32)])
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(OrderMerge)
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        // Within a partition tiles come in frame order for each signal slice.
        let data = tile.data::<f32>()?;
        if let Some(frame) = data.outer_iter().last() {
            results.view_mut::<f32>("last")?.assign(&frame);
        }
        Ok(())
    }

    fn merge(_: &MergeContext, dest: &mut Buffers, src: &Buffers) -> Result<()> {
        // The bug: the partition merged last is not necessarily the last one of the scan.
        dest.view_mut::<f32>("last")?.assign(&src.view::<f32>("last")?);
        Ok(())
    }
}

udf_sdk::export_udf!(OrderMerge);
