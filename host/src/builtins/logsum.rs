//! `logsum`: the sum of log-scaled frames (LiberTEM's `LogsumUDF`, BUILTINS.md §6).
//!
//! Frame method. Buffer `logsum`: kind sig, float32,
//! `logsum[y, x] = Σ_n ln(F_n[y, x] − min_{y', x'} F_n + 1)` (the log in the input's
//! precision, like NumPy's).

use super::frames::{FrameKernel, FramesPartition, out_f32, require_real};
use super::kernels::add_buffers;
use super::spec;
use super::spec::sig_buffer;
use crate::array::NdArray;
use crate::dtype::DType;
use crate::udf::{
    BufferDecl, BufferViewMut, CallError, DatasetMeta, Description, InitContext, MergeContext, Method, NamedBuffer,
    Params, PartitionRunner, RunPlan, Udf,
};

/// LiberTEM's `LogsumUDF`.
pub struct Logsum {
    description: Description,
}

impl Default for Logsum {
    fn default() -> Self {
        let mut d = spec::describe("logsum", "Sum of log-scaled frames (LiberTEM LogsumUDF)");
        d.methods = vec![Method::Frame];
        d.custom_merge = true;
        Logsum { description: d }
    }
}

impl Udf for Logsum {
    fn description(&self) -> &Description {
        &self.description
    }

    fn source(&self) -> &str {
        "builtin:logsum"
    }

    fn reads_in_place(&self) -> bool {
        true
    }

    fn plan(&self, _: &Params, _: &DatasetMeta) -> Result<RunPlan, CallError> {
        Ok(spec::plan_of(&self.description))
    }

    fn result_buffers(&self, _: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>, CallError> {
        require_real(dataset.input_dtype, "logsum")?;
        Ok(vec![sig_buffer("logsum", DType::F32)])
    }

    fn start(&self, ctx: InitContext<'_>) -> Result<Box<dyn PartitionRunner + '_>, CallError> {
        require_real(ctx.dataset.input_dtype, "logsum")?;
        let buffer = NdArray::zeros(DType::F32, &ctx.dataset.sig_shape);
        Ok(Box::new(FramesPartition::new(&ctx, LogsumKernel, vec![("logsum", buffer)], "logsum")))
    }

    fn merge(&self, _: MergeContext<'_>, dest: &mut [BufferViewMut<'_>], src: &[NamedBuffer]) -> Result<(), CallError> {
        add_buffers(dest, src)
    }
}

struct LogsumKernel;

impl FrameKernel for LogsumKernel {
    fn frame_f32(&mut self, _: usize, frame: &[f32], out: &mut [NdArray]) -> Result<(), CallError> {
        let acc = out_f32(out)?;
        let min = frame.iter().copied().fold(f32::INFINITY, f32::min);
        for (a, &x) in acc.iter_mut().zip(frame) {
            *a += (x - min + 1.0).ln();
        }
        Ok(())
    }

    fn frame_f64(&mut self, _: usize, frame: &[f64], out: &mut [NdArray]) -> Result<(), CallError> {
        let acc = out_f32(out)?;
        let min = frame.iter().copied().fold(f64::INFINITY, f64::min);
        for (a, &x) in acc.iter_mut().zip(frame) {
            *a = (f64::from(*a) + (x - min + 1.0).ln()) as f32;
        }
        Ok(())
    }
}
