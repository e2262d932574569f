//! `sum`: the sum of all frames (LiberTEM's `SumUDF`).
//!
//! Buffer `intensity`: kind sig, dtype = input dtype, `intensity[y, x] = Σ_n F_n[y, x]`.
//! Param `dtype` (default `float32`) is the preferred input dtype.

use udf_sdk::prelude::*;
use udf_sdk::{DtypePreference, RunPlan, dtype_from_name, with_numeric_type};

struct Sum;

impl Udf for Sum {
    fn describe() -> Description {
        Description::new("sum", env!("CARGO_PKG_VERSION"), "Sum of all frames (LiberTEM SumUDF)")
            .param(ParamSpec::text("dtype", "preferred input dtype (NumPy name)").default("float32"))
            .custom_merge()
    }

    fn plan(params: &Params, _: &DatasetMeta) -> Result<RunPlan> {
        let name = params.text("dtype")?;
        let dtype = dtype_from_name(name)
            .ok_or_else(|| UdfError::bad_param(format!("dtype '{name}' is not a NumPy dtype name")))?;
        let mut plan = RunPlan::from_description(&Self::describe());
        plan.input_dtype = DtypePreference::Prefer(dtype);
        Ok(plan)
    }

    fn result_buffers(_: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        Ok(vec![BufferDecl::sig("intensity", dataset.input_dtype)])
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(Sum)
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        with_numeric_type!(tile.dtype(), T => {
            let mut intensity = results.view_mut::<T>("intensity")?;
            udf_sdk::simd::add_frames(&mut intensity, &tile.data::<T>()?);
            Ok(())
        }, Err(UdfError::invalid_data("sum needs numeric input")))
    }

    fn merge(_: &MergeContext, dest: &mut Buffers, src: &Buffers) -> Result<()> {
        with_numeric_type!(src.dtype("intensity")?, T => {
            let mut acc = dest.view_mut::<T>("intensity")?;
            let src = src.view::<T>("intensity")?;
            udf_sdk::simd::add_frames(&mut acc, &src.insert_axis(Axis(0)));
            Ok(())
        }, Err(UdfError::internal("intensity is not numeric")))
    }
}

udf_sdk::export_udf!(Sum);
