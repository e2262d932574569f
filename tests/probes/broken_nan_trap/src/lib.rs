//! Broken on purpose: the sum of all frames, which panics (traps) on a NaN pixel
//! instead of returning an `invalid-data` error. Caught by `robustness.nonfinite`.

use udf_sdk::prelude::*;

struct NanTrap;

impl Udf for NanTrap {
    fn describe() -> Description {
        Description::new("broken-nan-trap", "0.1.0", "Sum of frames; traps on NaN").custom_merge()
    }

    fn result_buffers(_: &Params, _: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        Ok(vec![BufferDecl::sig("intensity", DType::Float32)])
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(NanTrap)
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        let mut intensity = results.view_mut::<f32>("intensity")?;
        for frame in tile.data::<f32>()?.outer_iter() {
            Zip::from(&mut intensity).and(&frame).for_each(|acc, &x| {
                // The bug: bad data is a panic, not an error.
                assert!(!x.is_nan(), "NaN in the data");
                *acc += x;
            });
        }
        Ok(())
    }

    fn merge(_: &MergeContext, dest: &mut Buffers, src: &Buffers) -> Result<()> {
        Zip::from(&mut dest.view_mut::<f32>("intensity")?)
            .and(&src.view::<f32>("intensity")?)
            .for_each(|a, &b| *a += b);
        Ok(())
    }
}

udf_sdk::export_udf!(NanTrap);
