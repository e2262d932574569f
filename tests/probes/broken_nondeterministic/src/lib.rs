//! Broken on purpose: the sum over each frame, plus state that survives between runs
//! in the main-side instance (where an engine keeps it for several runs, as the LiberTEM
//! adapter does per UDF object, and the determinism check does): `plan` counts runs, and `get_results` flips the lowest
//! bit of every result on odd runs. The difference (one unit in the last place) is
//! within any float tolerance, so only `determinism.repeat` catches it.

use std::sync::atomic::{AtomicU32, Ordering};
use udf_sdk::RunPlan;
use udf_sdk::prelude::*;

/// Runs planned by this (main-side) instance.
static RUNS: AtomicU32 = AtomicU32::new(0);

struct Nondeterministic;

impl Udf for Nondeterministic {
    fn describe() -> Description {
        Description::new("broken-nondeterministic", "0.1.0", "Sum over frames; differs from run to run")
            .custom_results()
    }

    fn plan(_: &Params, _: &DatasetMeta) -> Result<RunPlan> {
        RUNS.fetch_add(1, Ordering::Relaxed);
        Ok(RunPlan::from_description(&Self::describe()))
    }

    fn result_buffers(_: &Params, _: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        Ok(vec![BufferDecl::nav("intensity", DType::Float32)])
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(Nondeterministic)
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
        let flip = RUNS.load(Ordering::Relaxed) & 1;
        let intensity = buffers.to_owned::<f32>("intensity")?.mapv(|x| f32::from_bits(x.to_bits() ^ flip));
        Ok(vec![ResultOut::new("intensity", intensity)])
    }
}

udf_sdk::export_udf!(Nondeterministic);
