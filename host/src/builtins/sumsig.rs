//! `sumsig`: the sum over each frame (LiberTEM's `SumSigUDF`, BUILTINS.md §2).
//!
//! Buffer `intensity`: kind nav, dtype `result_type(input, float32)`,
//! `intensity[n] = Σ_{y,x} F_n[y, x]`. Merged by the host (nav buffer).

use super::element::unconvertible;
use super::element::{tile_data, with_converting, with_dtype};
use super::kernels::add_frame_sums;
use super::spec;
use super::spec::nav_buffer;
use crate::array::NdArray;
use crate::dtype::{DType, result_type};
use crate::udf::{
    BufferDecl, CallError, DatasetMeta, Description, DeviceClass, InitContext, NamedBuffer, Params, PartitionRunner,
    RunPlan, Tile, Udf,
};

/// LiberTEM's `SumSigUDF`.
pub struct SumSig {
    description: Description,
}

impl Default for SumSig {
    fn default() -> Self {
        SumSig { description: spec::describe("sumsig", "Sum over each frame (LiberTEM SumSigUDF)") }
    }
}

impl Udf for SumSig {
    fn description(&self) -> &Description {
        &self.description
    }

    fn source(&self) -> &str {
        "builtin:sumsig"
    }

    fn reads_in_place(&self) -> bool {
        true
    }

    fn converts_on_read(&self) -> bool {
        true
    }

    fn plan(&self, _: &Params, _: &DatasetMeta) -> Result<RunPlan, CallError> {
        Ok(spec::plan_of(&self.description))
    }

    fn result_buffers(&self, _: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>, CallError> {
        Ok(vec![nav_buffer("intensity", result_type(dataset.input_dtype, DType::F32), &[])])
    }

    fn start(&self, ctx: InitContext<'_>) -> Result<Box<dyn PartitionRunner + '_>, CallError> {
        let dtype = result_type(ctx.dataset.input_dtype, DType::F32);
        if dtype != ctx.dataset.input_dtype {
            // Only when another UDF of the run asks for native integers and none for
            // floats; SumSig itself always asks for float32.
            return Err(CallError::invalid_data(format!(
                "sumsig needs float input, but the run's input dtype is {}",
                ctx.dataset.input_dtype
            )));
        }
        if ctx.dataset.device_class == DeviceClass::Cuda {
            return crate::cuda::start(&ctx, crate::cuda::Request::SumSig);
        }
        let (origin, frames) = ctx.partition.map_or((0, ctx.dataset.frames()), |p| (p.origin, p.frames));
        Ok(Box::new(SumSigPartition { intensity: Some(NdArray::zeros(dtype, &[frames])), origin }))
    }
}

struct SumSigPartition {
    intensity: Option<NdArray>,
    /// Compressed nav index of the partition's first frame.
    origin: u64,
}

impl PartitionRunner for SumSigPartition {
    fn process(&mut self, tile: &Tile<'_>) -> Result<(), CallError> {
        let intensity = self.intensity.as_mut().ok_or_else(|| CallError::internal("process after export"))?;
        let first =
            tile.origin.checked_sub(self.origin).ok_or_else(|| CallError::internal("tile before partition"))? as usize;
        let slice_len = tile.sig.len();
        let range = first..first + tile.frames;
        if tile.dtype != intensity.dtype() {
            // Stored integers, converted as they are read (`converts_on_read`).
            let (input, stored) = (intensity.dtype(), tile.dtype);
            return with_converting!(input, stored, T, S => {
                let acc = intensity.as_mut_slice::<T>().ok_or_else(|| CallError::internal("accumulator dtype"))?;
                let acc = acc.get_mut(range).ok_or_else(|| CallError::internal("tile beyond partition"))?;
                add_frame_sums(acc, tile_data::<S>(tile)?, slice_len);
                Ok(())
            }, Err(unconvertible(stored, input)));
        }
        with_dtype!(tile.dtype, T => {
            let acc = intensity.as_mut_slice::<T>().ok_or_else(|| CallError::internal("tile dtype is not the input dtype"))?;
            let acc = acc.get_mut(range).ok_or_else(|| CallError::internal("tile beyond partition"))?;
            add_frame_sums(acc, tile_data::<T>(tile)?, slice_len);
            Ok(())
        }, Err(CallError::invalid_data("sumsig needs numeric input, not bool")))
    }

    fn export(&mut self) -> Result<Vec<NamedBuffer>, CallError> {
        let array = self.intensity.take().ok_or_else(|| CallError::internal("exported twice"))?;
        Ok(vec![NamedBuffer { name: "intensity".into(), array }])
    }
}
