//! `stddev`: per-pixel sum, variance, standard deviation and mean over all frames
//! (LiberTEM's `StdDevUDF`), in one numerically stable pass.
//!
//! # Definition
//!
//! Over the `N` processed frames `F_n` (all, or those in the ROI):
//! `mean = Σ_n F_n / N`, `var = Σ_n |F_n − mean|² / N` (population variance, NumPy's
//! `np.var(ddof=0)`), `std = sqrt(var)`, `varsum = N · var`, `num_frames = N`.
//!
//! # Buffers
//!
//! With `base` = the `dtype` param and `in` = the run's input dtype:
//!
//! | name         | kind   | dtype                   | use         |
//! |--------------|--------|-------------------------|-------------|
//! | `varsum`     | sig    | `base`                  |             |
//! | `num_frames` | single | int64                   |             |
//! | `sum`        | sig    | `result_type(in, base)` |             |
//! | `var`        | sig    | `base`                  | result-only |
//! | `std`        | sig    | `base`                  | result-only |
//! | `mean`       | sig    | `result_type(in, base)` | result-only |
//!
//! Complex input gives a complex `sum` and `mean` and a real `varsum`/`var`/`std` from
//! `|x − mean|²`.
//!
//! # Params
//!
//! - `dtype` (text, default `float64`): the base dtype, `float32` or `float64` (LiberTEM's
//!   `dtype`, whose `None` means float64). The preferred input dtype stays float32.
//!
//! # Algorithm
//!
//! Per tile (flattened to `(n1, px)`): `S1 = Σ x`, `m1 = S1 / n1`, `V1 = Σ |x − m1|²` per
//! pixel, computed in `result_type(in, base)`. The first tile at a signal position sets
//! `(sum, varsum)`, later ones are merged in with the pairwise formula of
//! [`pairwise`]. Frames seen are counted per signal slice of the tiling scheme (LiberTEM
//! keys them by `tiling_scheme_idx`); `postprocess` stores the count in `num_frames`.
//! `merge` applies the same formula to whole partitions, with `n0 = dest.num_frames`,
//! `n1 = src.num_frames`. `get_results`: `var = varsum / n`, `std = sqrt(var)`,
//! `mean = sum / n`. With no frame processed (an all-false ROI) `n = 0` and
//! `var`, `std`, `mean` are NaN, as NumPy's `0/0`; `sum`, `varsum` are 0.

mod pairwise;

use pairwise::{Acc, Moments, Real, Widen, combine};
use std::any::Any;
use udf_sdk::prelude::*;
use udf_sdk::{Complex32, Complex64, dtype_from_name, dtype_name};

/// Bind type aliases for the (input, sum, base) element types of a run and evaluate
/// `$body`; every combination that `result_buffers` can declare is listed.
macro_rules! with_tile_types {
    ($input:expr, $sum:expr, $base:expr, |$I:ident, $S:ident, $B:ident| $body:expr) => {
        match ($input, $sum, $base) {
            (DType::Float32, DType::Float32, DType::Float32) => with_tile_types!(@ $I = f32, $S = f32, $B = f32, $body),
            (DType::Float32, DType::Float64, DType::Float64) => with_tile_types!(@ $I = f32, $S = f64, $B = f64, $body),
            (DType::Float64, DType::Float64, DType::Float32) => with_tile_types!(@ $I = f64, $S = f64, $B = f32, $body),
            (DType::Float64, DType::Float64, DType::Float64) => with_tile_types!(@ $I = f64, $S = f64, $B = f64, $body),
            (DType::Complex64, DType::Complex64, DType::Float32) => {
                with_tile_types!(@ $I = Complex32, $S = Complex32, $B = f32, $body)
            }
            (DType::Complex64, DType::Complex128, DType::Float64) => {
                with_tile_types!(@ $I = Complex32, $S = Complex64, $B = f64, $body)
            }
            (DType::Complex128, DType::Complex128, DType::Float32) => {
                with_tile_types!(@ $I = Complex64, $S = Complex64, $B = f32, $body)
            }
            (DType::Complex128, DType::Complex128, DType::Float64) => {
                with_tile_types!(@ $I = Complex64, $S = Complex64, $B = f64, $body)
            }
            (input, sum, base) => Err(unsupported(input, sum, base)),
        }
    };
    (@ $I:ident = $it:ty, $S:ident = $st:ty, $B:ident = $bt:ty, $body:expr) => {{
        type $I = $it;
        type $S = $st;
        type $B = $bt;
        $body
    }};
}

/// Like [`with_tile_types!`] for the (sum, base) pair of the merged buffers.
macro_rules! with_buffer_types {
    ($sum:expr, $base:expr, |$S:ident, $B:ident| $body:expr) => {
        match ($sum, $base) {
            (DType::Float32, DType::Float32) => with_buffer_types!(@ $S = f32, $B = f32, $body),
            (DType::Float64, DType::Float32) => with_buffer_types!(@ $S = f64, $B = f32, $body),
            (DType::Float64, DType::Float64) => with_buffer_types!(@ $S = f64, $B = f64, $body),
            (DType::Complex64, DType::Float32) => with_buffer_types!(@ $S = Complex32, $B = f32, $body),
            (DType::Complex128, DType::Float32) => with_buffer_types!(@ $S = Complex64, $B = f32, $body),
            (DType::Complex128, DType::Float64) => with_buffer_types!(@ $S = Complex64, $B = f64, $body),
            (sum, base) => Err(UdfError::internal(format!(
                "stddev: buffers 'sum' ({}) and 'varsum' ({}) do not fit together",
                dtype_name(sum),
                dtype_name(base)
            ))),
        }
    };
    (@ $S:ident = $st:ty, $B:ident = $bt:ty, $body:expr) => {{
        type $S = $st;
        type $B = $bt;
        $body
    }};
}

fn unsupported(input: DType, sum: DType, base: DType) -> UdfError {
    UdfError::invalid_data(format!(
        "stddev needs float or complex input, got {} (sum {}, varsum {})",
        dtype_name(input),
        dtype_name(sum),
        dtype_name(base)
    ))
}

/// The base dtype from the `dtype` param.
fn base_dtype(params: &Params) -> Result<DType> {
    let name = params.text("dtype")?;
    match dtype_from_name(name) {
        Some(d @ (DType::Float32 | DType::Float64)) => Ok(d),
        _ => Err(UdfError::bad_param(format!("stddev: parameter 'dtype' must be float32 or float64, found '{name}'"))),
    }
}

/// `result_type(input, base)` for a float or complex input and a real float base.
fn sum_dtype(input: DType, base: DType) -> Result<DType> {
    let wide = base == DType::Float64;
    match input {
        DType::Float32 | DType::Float64 if wide => Ok(DType::Float64),
        DType::Float32 | DType::Float64 => Ok(input),
        DType::Complex64 | DType::Complex128 if wide => Ok(DType::Complex128),
        DType::Complex64 | DType::Complex128 => Ok(input),
        other => Err(unsupported(other, other, base)),
    }
}

/// The count in the `num_frames` buffer.
fn frame_count(buffers: &Buffers, which: &str) -> Result<u64> {
    let n = buffers.view::<i64>("num_frames")?.iter().next().copied().unwrap_or(0);
    u64::try_from(n).map_err(|_| UdfError::invalid_data(format!("stddev: {which} num_frames is negative ({n})")))
}

/// Per-partition state (LiberTEM's task data).
struct StdDev {
    /// Frames seen so far per signal slice of the tiling scheme.
    seen: Vec<u64>,
    /// A `Moments<S>` for the run's sum type, reused from tile to tile.
    scratch: Option<Box<dyn Any>>,
}

impl StdDev {
    fn accumulate<I: Widen<S>, S: Acc, B: Real>(
        &mut self,
        tile: &Tile<'_>,
        n0: u64,
        results: &mut Buffers,
    ) -> Result<()> {
        let px = tile.frame_len();
        let mut moments: Box<Moments<S>> = self.scratch.take().and_then(|b| b.downcast().ok()).unwrap_or_default();
        moments.compute(tile.flat::<I>()?, px);
        let n1 = tile.frames() as u64;
        let [sum, varsum] = results.many_mut(["sum", "varsum"])?;
        let (mut sum, mut varsum) = (sum.view_mut::<S>()?, varsum.view_mut::<B>()?);
        if sum.len() != px || varsum.len() != px {
            return Err(UdfError::internal(format!(
                "stddev: the tile has {px} pixels per frame, the buffer views {} and {}",
                sum.len(),
                varsum.len()
            )));
        }
        let pixels = sum.iter_mut().zip(varsum.iter_mut()).zip(moments.sum.iter().zip(&moments.varsum));
        for ((s0, v0), (&s1, &v1)) in pixels {
            let (s, v) = combine(n0, *s0, v0.cast::<S::Real>(), n1, s1, v1);
            *s0 = s;
            *v0 = v.cast();
        }
        self.scratch = Some(moments);
        Ok(())
    }
}

fn merge_typed<S: Acc, B: Real>(dest: &mut Buffers, src: &Buffers, n0: u64, n1: u64) -> Result<()> {
    let (src_sum, src_varsum) = (src.view::<S>("sum")?, src.view::<B>("varsum")?);
    let [sum, varsum] = dest.many_mut(["sum", "varsum"])?;
    let (mut sum, mut varsum) = (sum.view_mut::<S>()?, varsum.view_mut::<B>()?);
    if sum.shape() != src_sum.shape() || varsum.shape() != src_varsum.shape() {
        return Err(UdfError::internal("stddev: merged and partition buffers differ in shape"));
    }
    let pixels = sum.iter_mut().zip(varsum.iter_mut()).zip(src_sum.iter().zip(src_varsum.iter()));
    for ((s0, v0), (&s1, &v1)) in pixels {
        let (s, v) = combine(n0, *s0, v0.cast::<S::Real>(), n1, s1, v1.cast::<S::Real>());
        *s0 = s;
        *v0 = v.cast();
    }
    Ok(())
}

fn results_typed<S: Acc, B: Real>(buffers: &Buffers, n: u64) -> Result<Vec<ResultOut>> {
    let var = buffers.to_owned::<B>("varsum")?.mapv(|v| v / B::from_count(n));
    let std = var.mapv(B::sqrt);
    let mean = buffers.to_owned::<S>("sum")?.mapv(|s| s.div_real(S::Real::from_count(n)));
    Ok(vec![ResultOut::new("var", var), ResultOut::new("std", std), ResultOut::new("mean", mean)])
}

impl Udf for StdDev {
    fn describe() -> Description {
        Description::new(
            "stddev",
            env!("CARGO_PKG_VERSION"),
            "Per-pixel sum, variance, standard deviation and mean (LiberTEM StdDevUDF)",
        )
        .param(ParamSpec::text("dtype", "base dtype of varsum/var/std: float32 or float64").default("float64"))
        .custom_merge()
        .custom_results()
    }

    fn result_buffers(params: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        let base = base_dtype(params)?;
        let sum = sum_dtype(dataset.input_dtype, base)?;
        Ok(vec![
            BufferDecl::sig("varsum", base),
            BufferDecl::single("num_frames", DType::Int64),
            BufferDecl::sig("sum", sum),
            BufferDecl::sig("var", base).result_only(),
            BufferDecl::sig("std", base).result_only(),
            BufferDecl::sig("mean", sum).result_only(),
        ])
    }

    fn new(ctx: &Context) -> Result<Self> {
        let slices = ctx.partition().map_or(1, |p| p.tiling_scheme.len().max(1));
        Ok(StdDev { seen: vec![0; slices], scratch: None })
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        let index = tile.scheme_index() as usize;
        if index >= self.seen.len() {
            self.seen.resize(index + 1, 0);
        }
        let n0 = self.seen[index];
        if tile.frames() == 0 || tile.frame_len() == 0 {
            return Ok(());
        }
        let (sum, base) = (results.dtype("sum")?, results.dtype("varsum")?);
        with_tile_types!(tile.dtype(), sum, base, |I, S, B| self.accumulate::<I, S, B>(tile, n0, results))?;
        self.seen[index] = n0 + tile.frames() as u64;
        Ok(())
    }

    fn postprocess(&mut self, _: &Context, results: &mut Buffers) -> Result<()> {
        let n = self.seen.first().copied().unwrap_or(0);
        if let Some(other) = self.seen.iter().find(|&&m| m != n) {
            return Err(UdfError::internal(format!(
                "stddev: signal slices of the partition saw different frame counts ({n} and {other})"
            )));
        }
        let n = i64::try_from(n).map_err(|_| UdfError::internal("stddev: frame count overflows int64"))?;
        results.view_mut::<i64>("num_frames")?.fill(n);
        Ok(())
    }

    fn merge(_: &MergeContext, dest: &mut Buffers, src: &Buffers) -> Result<()> {
        let (n0, n1) = (frame_count(dest, "merged")?, frame_count(src, "partition")?);
        let (sum, base) = (dest.dtype("sum")?, dest.dtype("varsum")?);
        with_buffer_types!(sum, base, |S, B| merge_typed::<S, B>(dest, src, n0, n1))?;
        let n = i64::try_from(n0 + n1).map_err(|_| UdfError::internal("stddev: frame count overflows int64"))?;
        dest.view_mut::<i64>("num_frames")?.fill(n);
        Ok(())
    }

    fn get_results(_: &ResultsContext, buffers: &Buffers) -> Result<Vec<ResultOut>> {
        let n = frame_count(buffers, "merged")?;
        let (sum, base) = (buffers.dtype("sum")?, buffers.dtype("varsum")?);
        with_buffer_types!(sum, base, |S, B| results_typed::<S, B>(buffers, n))
    }
}

udf_sdk::export_udf!(StdDev);
