//! Broken on purpose: the sum of all frames, which keeps a 16 KiB scratch buffer per
//! tile "for later" and never frees it. Caught by `resources.memory_growth`.

use std::sync::Mutex;
use udf_sdk::prelude::*;

/// Scratch buffers kept forever (the instance lives for one partition).
static KEPT: Mutex<Vec<Vec<f32>>> = Mutex::new(Vec::new());

struct Leak;

impl Udf for Leak {
    fn describe() -> Description {
        Description::new("broken-leak", "0.1.0", "Sum of frames; leaks memory per tile").custom_merge()
    }

    fn result_buffers(_: &Params, _: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        Ok(vec![BufferDecl::sig("intensity", DType::Float32)])
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(Leak)
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        let mut intensity = results.view_mut::<f32>("intensity")?;
        for frame in tile.data::<f32>()?.outer_iter() {
            Zip::from(&mut intensity).and(&frame).for_each(|acc, &x| *acc += x);
        }
        // The bug: scratch space that is never given back.
        let first = intensity.iter().copied().next().unwrap_or(0.0);
        KEPT.lock().map_err(|_| UdfError::internal("lock poisoned"))?.push(vec![first; 4096]);
        Ok(())
    }

    fn merge(_: &MergeContext, dest: &mut Buffers, src: &Buffers) -> Result<()> {
        Zip::from(&mut dest.view_mut::<f32>("intensity")?)
            .and(&src.view::<f32>("intensity")?)
            .for_each(|a, &b| *a += b);
        Ok(())
    }
}

udf_sdk::export_udf!(Leak);
