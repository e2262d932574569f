//! `masks`: dot products of every frame with a stack of masks — virtual detectors
//! (LiberTEM's `ApplyMasksUDF`, BUILTINS.md §4).
//!
//! Buffer `intensity`: kind nav, extra shape `(M,)`, dtype `result_type(input,
//! mask dtype)`, `intensity[n, m] = Σ_{y,x} F_n[y, x] · mask_m[y, x]`. The products are
//! [`mask_engine`](super::mask_engine)'s.

use super::mask_engine::{MaskRun, MaskSet, MasksPartition, parse_use_sparse, result_dtype};
use super::spec;
use super::spec::nav_buffer;
use crate::cuda::{MaskStack, Request};
use crate::dtype::DType;
use crate::udf::{
    BufferDecl, CallError, DTypePreference, DatasetMeta, Description, DeviceClass, InitContext, Params,
    PartitionRunner, RunPlan, Udf,
};
use std::sync::Arc;

/// LiberTEM's `ApplyMasksUDF`.
pub struct ApplyMasks {
    description: Description,
    /// The masks of a run, in its copy ([`MaskRun`]).
    run: MaskRun,
}

impl Default for ApplyMasks {
    fn default() -> Self {
        let mut d = spec::describe("masks", "Dot product of each frame with a stack of masks (LiberTEM ApplyMasksUDF)");
        d.params = vec![
            spec::array("masks", "the masks: one of the frame's shape, or a stack (M, ..sig); @masks.npy", None),
            spec::text("use_sparse", "auto (as given: dense), true (CSR) or false", Some("auto")),
            spec::text("mask_dtype", "dtype of the masks for the product (default: the array's dtype)", Some("")),
            spec::text("preferred_dtype", "preferred input dtype (NumPy name)", Some("float32")),
        ];
        ApplyMasks { description: d, run: MaskRun::default() }
    }
}

impl ApplyMasks {
    fn mask_dtype(params: &Params) -> Result<DType, CallError> {
        Ok(match spec::get_dtype(params, "mask_dtype")? {
            Some(d) => d,
            None => match spec::get_array(params, "masks")?.dtype() {
                // Bool masks multiply like their 0/1 values in the input's precision.
                DType::Bool => DType::Bool,
                d => d,
            },
        })
    }

    fn masks(params: &Params, dataset: &DatasetMeta) -> Result<MaskSet, CallError> {
        let result = result_dtype(dataset.input_dtype, Self::mask_dtype(params)?)?;
        let sparse = parse_use_sparse(params)?.unwrap_or(false);
        MaskSet::new(spec::get_shared_array(params, "masks")?, &dataset.sig_shape, result, sparse, "masks")
    }
}

impl Udf for ApplyMasks {
    fn description(&self) -> &Description {
        &self.description
    }

    fn source(&self) -> &str {
        "builtin:masks"
    }

    fn for_run(&self) -> Option<Arc<dyn Udf>> {
        let run = self.run.for_run()?;
        Some(Arc::new(ApplyMasks { description: self.description.clone(), run }) as Arc<dyn Udf>)
    }

    fn reads_in_place(&self) -> bool {
        true
    }

    fn converts_on_read(&self) -> bool {
        true
    }

    fn plan(&self, params: &Params, _: &DatasetMeta) -> Result<RunPlan, CallError> {
        let mut plan = spec::plan_of(&self.description);
        if let Some(d) = spec::get_dtype(params, "preferred_dtype")? {
            plan.input_dtype = DTypePreference::Prefer(d);
        }
        parse_use_sparse(params)?;
        Self::mask_dtype(params)?;
        Ok(plan)
    }

    fn result_buffers(&self, params: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>, CallError> {
        let masks = Self::masks(params, dataset)?;
        Ok(vec![nav_buffer("intensity", masks.values.dtype(), &[masks.count])])
    }

    fn start(&self, ctx: InitContext<'_>) -> Result<Box<dyn PartitionRunner + '_>, CallError> {
        let masks = self.run.masks(&ctx, || Self::masks(ctx.params, ctx.dataset))?;
        if ctx.dataset.device_class == DeviceClass::Cuda {
            let stack = MaskStack { values: &masks.values, count: masks.count, sparse: masks.sparse };
            let request = Request::Masks { masks: stack, buffer: "intensity", extra_shape: &[masks.count] };
            return crate::cuda::start(&ctx, request);
        }
        Ok(Box::new(MasksPartition::new(&ctx, &self.run, &masks, "intensity", &[masks.count])?))
    }
}
