//! `disk`, `ring` and `point`: virtual detectors whose masks are built from a few
//! numbers, so no mask file is needed (LiberTEM's disk, ring and point analyses,
//! BUILTINS.md §13, all `ApplyMasksUDF` underneath).
//!
//! | name | mask (float32) | parameters |
//! |------|----------------|------------|
//! | `disk` | `(y − cy)² + (x − cx)² ≤ r²` | `cx`, `cy`, `r` |
//! | `ring` | `ri² < (y − cy)² + (x − cx)² ≤ ro²` | `cx`, `cy`, `ri`, `ro` |
//! | `point` | the pixel `(int(cy), int(cx))` (sparse) | `cx`, `cy` |
//!
//! `cx`, `cy` default to the frame centre `X / 2`, `Y / 2` (floats, like LiberTEM's
//! analyses). Buffer `intensity`: kind nav, dtype `result_type(input, float32)`, one
//! value per frame — the analysis result (the masks UDF's `(M,) = (1,)` axis dropped).
//!
//! They are mask builders over [`masks`](super::masks) and need no wasm twin: the
//! `masks` plugin with the same mask as a `.npy` computes the same.

use super::mask_engine::{MaskRun, MaskSet, MasksPartition, parse_use_sparse, result_dtype};
use super::spec;
use super::spec::nav_buffer;
use crate::cuda::{RadialMask, Request};
use crate::dtype::DType;
use crate::udf::{
    BufferDecl, CallError, DatasetMeta, Description, DeviceClass, InitContext, Params, PartitionRunner, RunPlan, Udf,
};
use std::sync::Arc;

/// Which detector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DetectorKind {
    Disk,
    Ring,
    Point,
}

impl DetectorKind {
    pub fn name(self) -> &'static str {
        match self {
            DetectorKind::Disk => "disk",
            DetectorKind::Ring => "ring",
            DetectorKind::Point => "point",
        }
    }
}

/// A virtual detector built-in.
pub struct VirtualDetector {
    kind: DetectorKind,
    source: String,
    description: Description,
    /// The masks of a run, in its copy ([`MaskRun`]).
    run: MaskRun,
}

impl VirtualDetector {
    pub fn new(kind: DetectorKind) -> Self {
        let summary = match kind {
            DetectorKind::Disk => "Virtual disk detector: the sum over a disk of each frame",
            DetectorKind::Ring => "Virtual ring (annular) detector: the sum over a ring of each frame",
            DetectorKind::Point => "Virtual point detector: one pixel of each frame",
        };
        let mut d = spec::describe(kind.name(), summary);
        d.params.push(spec::float("cx", "centre column (x) in pixels; NaN: the frame centre X / 2", Some(f64::NAN)));
        d.params.push(spec::float("cy", "centre row (y) in pixels; NaN: the frame centre Y / 2", Some(f64::NAN)));
        match kind {
            DetectorKind::Disk => d.params.push(spec::float("r", "radius in pixels", None)),
            DetectorKind::Ring => {
                d.params.push(spec::float("ri", "inner radius in pixels (excluded)", None));
                d.params.push(spec::float("ro", "outer radius in pixels (included)", None));
            }
            DetectorKind::Point => {}
        }
        if kind != DetectorKind::Point {
            d.params.push(spec::text("use_sparse", "auto (dense), true (CSR) or false", Some("auto")));
        }
        VirtualDetector {
            kind,
            source: format!("{}{}", super::PREFIX, kind.name()),
            description: d,
            run: MaskRun::default(),
        }
    }

    /// The detector as a mask computed from the pixel position (`ri2 < d² <= ro2`): the
    /// same for the CPU's mask and the GPU's kernel.
    fn geometry(&self, params: &Params, dataset: &DatasetMeta) -> Result<RadialMask, CallError> {
        let (sy, sx) = spec::sig_2d(&dataset.sig_shape, self.kind.name())?;
        let centre = |name: &str, size: usize| -> Result<f64, CallError> {
            let v = spec::get_float(params, name)?;
            Ok(if v.is_nan() { size as f64 / 2.0 } else { v })
        };
        let (cx, cy) = (centre("cx", sx)?, centre("cy", sy)?);
        let radial = |ri2: f64, ro2: f64, sparse: bool| RadialMask { cy, cx, ri2, ro2, weighted: false, sparse };
        Ok(match self.kind {
            DetectorKind::Disk => {
                let r = spec::get_float(params, "r")?;
                if r.is_nan() || r < 0.0 {
                    return Err(CallError::bad_param(format!("parameter 'r' must be a radius >= 0, got {r}")));
                }
                radial(f64::NEG_INFINITY, r * r, parse_use_sparse(params)?.unwrap_or(false))
            }
            DetectorKind::Ring => {
                let (ri, ro) = (spec::get_float(params, "ri")?, spec::get_float(params, "ro")?);
                if ri.is_nan() || ro.is_nan() || ri < 0.0 || ro < ri {
                    return Err(CallError::bad_param(format!(
                        "parameters 'ri' and 'ro' must be radii with 0 <= ri <= ro, got ri={ri}, ro={ro}"
                    )));
                }
                radial(ri * ri, ro * ro, parse_use_sparse(params)?.unwrap_or(false))
            }
            DetectorKind::Point => {
                // Python's int(): truncation towards zero.
                let (py, px) = (cy.trunc(), cx.trunc());
                if !(0.0..sy as f64).contains(&py) || !(0.0..sx as f64).contains(&px) {
                    return Err(CallError::bad_param(format!(
                        "point (cy={cy}, cx={cx}) is outside the frame of shape ({sy}, {sx})"
                    )));
                }
                // The one pixel at distance 0 from the integer centre, as a sparse mask.
                RadialMask { cy: py, cx: px, ri2: f64::NEG_INFINITY, ro2: 0.0, weighted: false, sparse: true }
            }
        })
    }

    /// The detector's mask in the result dtype for `dataset`.
    fn masks(&self, params: &Params, dataset: &DatasetMeta) -> Result<MaskSet, CallError> {
        let (sy, sx) = spec::sig_2d(&dataset.sig_shape, self.kind.name())?;
        let g = self.geometry(params, dataset)?;
        let masks = MaskSet::from_fn_f32(1, sy, sx, g.sparse, |_, y, x| if g.inside(y, x) { 1.0 } else { 0.0 });
        Ok(masks.to_dtype(result_dtype(dataset.input_dtype, DType::F32)?))
    }
}

impl Udf for VirtualDetector {
    fn description(&self) -> &Description {
        &self.description
    }

    fn source(&self) -> &str {
        &self.source
    }

    fn for_run(&self) -> Option<Arc<dyn Udf>> {
        let run = self.run.for_run()?;
        Some(Arc::new(VirtualDetector {
            kind: self.kind,
            source: self.source.clone(),
            description: self.description.clone(),
            run,
        }) as Arc<dyn Udf>)
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

    fn result_buffers(&self, params: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>, CallError> {
        let masks = self.masks(params, dataset)?;
        Ok(vec![nav_buffer("intensity", masks.values.dtype(), &[])])
    }

    fn start(&self, ctx: InitContext<'_>) -> Result<Box<dyn PartitionRunner + '_>, CallError> {
        if ctx.dataset.device_class == DeviceClass::Cuda {
            let mask = self.geometry(ctx.params, ctx.dataset)?;
            let result = result_dtype(ctx.dataset.input_dtype, DType::F32)?;
            return crate::cuda::start(&ctx, Request::Radial { mask, result, buffer: "intensity", extra_shape: &[] });
        }
        let masks = self.run.masks(&ctx, || self.masks(ctx.params, ctx.dataset))?;
        Ok(Box::new(MasksPartition::new(&ctx, &self.run, &masks, "intensity", &[])?))
    }
}
