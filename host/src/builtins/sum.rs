//! `sum`: the sum of all frames (LiberTEM's `SumUDF`, BUILTINS.md §1).
//!
//! Buffer `intensity`: kind sig, dtype = input dtype, `intensity[y, x] = Σ_n F_n[y, x]`.
//! Param `dtype` (default `float32`) is the preferred input dtype.

use super::element::unconvertible;
use super::element::{tile_data, with_converting, with_dtype};
use super::kernels::{SliceRuns, add_buffers, add_frames};
use super::spec;
use super::spec::sig_buffer;
use crate::array::NdArray;
use crate::udf::{
    BufferDecl, BufferViewMut, CallError, DTypePreference, DatasetMeta, Description, DeviceClass, InitContext,
    MergeContext, NamedBuffer, Params, PartitionRunner, RunPlan, Tile, Udf,
};

/// LiberTEM's `SumUDF`.
pub struct Sum {
    description: Description,
}

impl Default for Sum {
    fn default() -> Self {
        let mut description = spec::describe("sum", "Sum of all frames (LiberTEM SumUDF)");
        description.params.push(spec::text("dtype", "preferred input dtype (NumPy name)", Some("float32")));
        description.custom_merge = true;
        Sum { description }
    }
}

impl Udf for Sum {
    fn description(&self) -> &Description {
        &self.description
    }

    fn source(&self) -> &str {
        "builtin:sum"
    }

    fn reads_in_place(&self) -> bool {
        true
    }

    fn converts_on_read(&self) -> bool {
        true
    }

    fn plan(&self, params: &Params, _: &DatasetMeta) -> Result<RunPlan, CallError> {
        let mut plan = spec::plan_of(&self.description);
        if let Some(dtype) = spec::get_dtype(params, "dtype")? {
            plan.input_dtype = DTypePreference::Prefer(dtype);
        }
        Ok(plan)
    }

    fn result_buffers(&self, _: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>, CallError> {
        Ok(vec![sig_buffer("intensity", dataset.input_dtype)])
    }

    fn start(&self, ctx: InitContext<'_>) -> Result<Box<dyn PartitionRunner + '_>, CallError> {
        if ctx.dataset.device_class == DeviceClass::Cuda {
            return crate::cuda::start(&ctx, crate::cuda::Request::Sum);
        }
        let sig = &ctx.dataset.sig_shape;
        let runs = ctx.partition.map(|p| SliceRuns::for_scheme(sig, &p.tiling.slices)).unwrap_or_default();
        let intensity = NdArray::zeros(ctx.dataset.input_dtype, sig);
        Ok(Box::new(SumPartition { intensity: Some(intensity), runs }))
    }

    fn merge(&self, _: MergeContext<'_>, dest: &mut [BufferViewMut<'_>], src: &[NamedBuffer]) -> Result<(), CallError> {
        add_buffers(dest, src)
    }
}

struct SumPartition {
    intensity: Option<NdArray>,
    runs: Vec<SliceRuns>,
}

impl PartitionRunner for SumPartition {
    fn process(&mut self, tile: &Tile<'_>) -> Result<(), CallError> {
        let intensity = self.intensity.as_mut().ok_or_else(|| CallError::internal("process after export"))?;
        let runs = self.runs.get(tile.scheme_index).ok_or_else(|| CallError::internal("unknown signal slice"))?;
        if tile.dtype != intensity.dtype() {
            // Stored integers, converted as they are read (`converts_on_read`).
            let (input, stored) = (intensity.dtype(), tile.dtype);
            return with_converting!(input, stored, T, S => {
                let acc = intensity.as_mut_slice::<T>().ok_or_else(|| CallError::internal("accumulator dtype"))?;
                add_frames(acc, tile_data::<S>(tile)?, runs);
                Ok(())
            }, Err(unconvertible(stored, input)));
        }
        with_dtype!(tile.dtype, T => {
            let acc = intensity.as_mut_slice::<T>().ok_or_else(|| CallError::internal("tile dtype is not the input dtype"))?;
            add_frames(acc, tile_data::<T>(tile)?, runs);
            Ok(())
        }, Err(CallError::invalid_data("sum needs numeric input, not bool")))
    }

    fn export(&mut self) -> Result<Vec<NamedBuffer>, CallError> {
        let array = self.intensity.take().ok_or_else(|| CallError::internal("exported twice"))?;
        Ok(vec![NamedBuffer { name: "intensity".into(), array }])
    }
}
