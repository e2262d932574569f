//! `radial-fourier`: Fourier coefficients of the angular intensity distribution in
//! radial bins (LiberTEM's radial Fourier analysis, BUILTINS.md §13), one complex
//! mask per bin and order applied with the [`masks`](super::masks) engine.
//!
//! Bins: `n_bins` equal-width rings between `ri` and `ro` around `(cy, cx)`; bin `b`
//! with centre `r0` and width `w` has the antialiased profile
//! `clip(w/2 + 0.5 − |r − r0|, 0, 1)`, `r` the pixel's distance from the centre. The mask
//! of bin `b` and order `o` (`0..=max_order`) is `profile_b · exp(i·o·φ)`,
//! `φ = atan2(y − cy, x − cx)`, complex64.
//!
//! | buffer | kind | extra | dtype |
//! |--------|------|-------|-------|
//! | `complex` | nav | `(n_bins, max_order + 1)` | `result_type(input, complex64)` |
//! | `absolute`, `phase` | nav | `(n_bins, max_order + 1)` | its real counterpart (result-only) |
//! | `dominant` | nav | `(n_bins,)` | int64: `1 + argmax_{o ≥ 1} absolute` (0 if `max_order == 0`) (result-only) |
//!
//! Native only: the masks are built here from a few numbers; the `masks` plugin
//! with these masks as a `.npy` computes `complex`.

use super::mask_engine::{MaskRun, MaskSet, MasksPartition, result_dtype};
use super::spec;
use crate::array::NdArray;
use crate::dtype::{CastFrom, DType};
use crate::udf::{
    BufferDecl, BufferKind, BufferUse, CallError, DatasetMeta, Description, InitContext, NamedBuffer, Params,
    PartitionRunner, ResultEntry, ResultsContext, RunPlan, Udf,
};
use num_complex::{Complex32, Complex64};
use std::sync::Arc;

/// The radial Fourier analysis.
pub struct RadialFourier {
    description: Description,
    /// The masks of a run, in its copy ([`MaskRun`]).
    run: MaskRun,
}

impl Default for RadialFourier {
    fn default() -> Self {
        let mut d = spec::describe(
            "radial-fourier",
            "Angular Fourier coefficients in radial bins per frame (LiberTEM radial Fourier analysis)",
        );
        d.params = vec![
            spec::float("cx", "centre column (x) in pixels; NaN: X / 2", Some(f64::NAN)),
            spec::float("cy", "centre row (y) in pixels; NaN: Y / 2", Some(f64::NAN)),
            spec::float("ri", "inner radius in pixels", Some(0.0)),
            spec::float("ro", "outer radius in pixels; NaN: the distance to the farthest frame corner", Some(f64::NAN)),
            spec::int("n_bins", "number of radial bins", Some(1)),
            spec::int("max_order", "highest angular Fourier order", Some(24)),
        ];
        d.custom_results = true;
        RadialFourier { description: d, run: MaskRun::default() }
    }
}

struct Geometry {
    cy: f64,
    cx: f64,
    ri: f64,
    ro: f64,
    bins: usize,
    orders: usize,
}

impl Geometry {
    fn parse(params: &Params, sig: &[usize]) -> Result<Self, CallError> {
        let (sy, sx) = spec::sig_2d(sig, "radial-fourier")?;
        let or = |v: f64, d: f64| if v.is_nan() { d } else { v };
        let cx = or(spec::get_float(params, "cx")?, sx as f64 / 2.0);
        let cy = or(spec::get_float(params, "cy")?, sy as f64 / 2.0);
        let corner = cy.abs().max((sy as f64 - cy).abs()).hypot(cx.abs().max((sx as f64 - cx).abs()));
        let ri = spec::get_float(params, "ri")?;
        let ro = or(spec::get_float(params, "ro")?, corner);
        let bins = spec::get_int(params, "n_bins")?;
        let max_order = spec::get_int(params, "max_order")?;
        if !(0.0 <= ri && ri < ro) {
            return Err(CallError::bad_param(format!("radial-fourier needs 0 <= ri < ro, got ri={ri}, ro={ro}")));
        }
        if !(1..=4096).contains(&bins) || !(0..=4096).contains(&max_order) {
            return Err(CallError::bad_param(format!(
                "radial-fourier needs 1 <= n_bins and 0 <= max_order (at most 4096), got {bins} and {max_order}"
            )));
        }
        Ok(Geometry { cy, cx, ri, ro, bins: bins as usize, orders: max_order as usize + 1 })
    }

    fn masks(&self, sy: usize, sx: usize) -> MaskSet {
        let width = (self.ro - self.ri) / self.bins as f64;
        let mut values = Vec::with_capacity(self.bins * self.orders * sy * sx);
        for b in 0..self.bins {
            let r0 = self.ri + (b as f64 + 0.5) * width;
            for o in 0..self.orders {
                for y in 0..sy {
                    for x in 0..sx {
                        let (dy, dx) = (y as f64 - self.cy, x as f64 - self.cx);
                        let profile = (width / 2.0 + 0.5 - (dy.hypot(dx) - r0).abs()).clamp(0.0, 1.0);
                        let phase = o as f64 * dy.atan2(dx);
                        values.push(Complex32::new((profile * phase.cos()) as f32, (profile * phase.sin()) as f32));
                    }
                }
            }
        }
        let count = self.bins * self.orders;
        let values = NdArray::from_vec(&[count, sy * sx], values).unwrap_or_else(|_| unreachable!("count x frame"));
        MaskSet { values: std::sync::Arc::new(values), count, frame_len: sy * sx, sparse: false }
    }
}

fn decl(name: &str, dtype: DType, extra: &[usize], usage: BufferUse) -> BufferDecl {
    BufferDecl { name: name.to_owned(), kind: BufferKind::Nav, dtype, extra_shape: extra.to_vec(), usage }
}

fn real_of(complex: DType) -> DType {
    if complex == DType::C128 { DType::F64 } else { DType::F32 }
}

impl Udf for RadialFourier {
    fn description(&self) -> &Description {
        &self.description
    }

    fn source(&self) -> &str {
        "builtin:radial-fourier"
    }

    fn for_run(&self) -> Option<Arc<dyn Udf>> {
        let run = self.run.for_run()?;
        Some(Arc::new(RadialFourier { description: self.description.clone(), run }) as Arc<dyn Udf>)
    }

    fn reads_in_place(&self) -> bool {
        true
    }

    fn converts_on_read(&self) -> bool {
        true
    }

    fn plan(&self, params: &Params, dataset: &DatasetMeta) -> Result<RunPlan, CallError> {
        Geometry::parse(params, &dataset.sig_shape)?;
        Ok(spec::plan_of(&self.description))
    }

    fn result_buffers(&self, params: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>, CallError> {
        let g = Geometry::parse(params, &dataset.sig_shape)?;
        let d = result_dtype(dataset.input_dtype, DType::C64)?;
        let extra = [g.bins, g.orders];
        Ok(vec![
            decl("complex", d, &extra, BufferUse::Normal),
            decl("absolute", real_of(d), &extra, BufferUse::ResultOnly),
            decl("phase", real_of(d), &extra, BufferUse::ResultOnly),
            decl("dominant", DType::I64, &[g.bins], BufferUse::ResultOnly),
        ])
    }

    fn start(&self, ctx: InitContext<'_>) -> Result<Box<dyn PartitionRunner + '_>, CallError> {
        let g = Geometry::parse(ctx.params, &ctx.dataset.sig_shape)?;
        let (sy, sx) = spec::sig_2d(&ctx.dataset.sig_shape, "radial-fourier")?;
        let dtype = result_dtype(ctx.dataset.input_dtype, DType::C64)?;
        let masks = self.run.masks(&ctx, || Ok(g.masks(sy, sx).to_dtype(dtype)))?;
        Ok(Box::new(MasksPartition::new(&ctx, &self.run, &masks, "complex", &[g.bins, g.orders])?))
    }

    fn get_results(&self, ctx: ResultsContext<'_>, buffers: &[NamedBuffer]) -> Result<Vec<ResultEntry>, CallError> {
        let g = Geometry::parse(ctx.params, &ctx.dataset.sig_shape)?;
        let raw = buffers.iter().find(|b| b.name == "complex").ok_or_else(|| CallError::internal("no complex"))?;
        let dtype = raw.array.dtype();
        let values: Vec<Complex64> = crate::with_inexact!(dtype, T => {
            raw.array.as_slice::<T>().unwrap_or_default().iter().map(|&c| Complex64::cast_from(c)).collect()
        }, return Err(CallError::internal(format!("complex is {dtype}"))));
        let n = raw.array.shape()[0];
        let shape = [n, g.bins, g.orders];
        let real = real_of(raw.array.dtype());
        let as_real = |v: Vec<f64>| -> Result<NdArray, CallError> {
            match real {
                DType::F32 => NdArray::from_vec(&shape, v.into_iter().map(|x| x as f32).collect::<Vec<f32>>()),
                _ => NdArray::from_vec(&shape, v),
            }
            .map_err(|e| CallError::internal(e.to_string()))
        };
        let absolute: Vec<f64> = values.iter().map(|c| c.norm()).collect();
        let phase: Vec<f64> = values.iter().map(|c| c.arg()).collect();
        let dominant: Vec<i64> = absolute
            .chunks_exact(g.orders)
            .map(|orders| {
                let mut best = 0;
                for (o, &a) in orders.iter().enumerate().skip(1) {
                    if best == 0 || a > orders[best] {
                        best = o;
                    }
                }
                best as i64
            })
            .collect();
        let dominant = NdArray::from_vec(&[n, g.bins], dominant).map_err(|e| CallError::internal(e.to_string()))?;
        Ok(vec![
            ResultEntry { name: "absolute".into(), array: as_real(absolute)?, valid: None },
            ResultEntry { name: "phase".into(), array: as_real(phase)?, valid: None },
            ResultEntry { name: "dominant".into(), array: dominant, valid: None },
        ])
    }
}
