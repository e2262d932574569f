//! Reductions over any axes, with `keepdims` and `dtype=` (the accumulator and result
//! dtype), NumPy's result dtypes, and the NaN-ignoring forms.
//!
//! Every reduction sees its input as a matrix `(kept, reduced)`: a view when the
//! reduced axes are the trailing or the leading axes of a C-order array (a tile's
//! `sum(axis=0)` and `sum(axis=(1, 2))`), a C-order copy of the permuted array
//! otherwise. Sums, means and variances convert each element in registers to the
//! accumulator (`sum(tile_u16, dtype=float32)` reads the tile once); float sums along
//! a row are pairwise (NumPy's accuracy).

use super::array::{Dense, HostArray};
use super::element::{CastTo, Elem};
use super::elementwise::{CHECK_EVERY, Ctx, cast_dense, float_for, real_of};
use super::error::{ArrayError, normalize_axes, normalize_axis};
use super::ops::ReduceOp;
use crate::dtype::{Complex64, DType, Kind};
use ndarray::{ArrayView1, CowArray, Ix2};

/// The options of a reduction.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReduceOptions<'a> {
    /// The axes to reduce (`None`: all).
    pub axes: Option<&'a [i64]>,
    /// Keep the reduced axes with length 1.
    pub keepdims: bool,
    /// The accumulator and result dtype (`sum`, `prod`, `mean`, `var`, `std`).
    pub dtype: Option<DType>,
    /// Degrees of freedom subtracted from the count (`var`, `std`: NumPy's `ddof`).
    pub correction: f64,
}

fn default_sum_dtype(dtype: DType) -> DType {
    match dtype.kind() {
        Kind::Bool | Kind::Signed => DType::I64,
        Kind::Unsigned => DType::U64,
        _ => dtype,
    }
}

/// A reduction.
///
/// # Errors
/// Bad axes, a dtype the reduction does not take, an empty reduction without identity
/// (`min`, `max`, `argmin`, `argmax`), memory, interruption.
pub fn reduce(cx: &Ctx<'_>, op: ReduceOp, x: &HostArray, options: ReduceOptions<'_>) -> Result<HostArray, ArrayError> {
    reduce_with_sums(cx, op, x, options, None)
}

/// `sum` and `var` of `x` over the same axes, read once where the two calls would read it
/// twice: `var`'s passes already add each lane up for its mean, and those sums are the
/// `sum` (accumulated in `f64` in the rows' order, then cast). One dtype for both:
/// `options.dtype`, a floating dtype (default: `var`'s);
/// `correction` is the variance's. Complex arrays take two passes (`sum`, then `var`).
///
/// # Errors
/// As [`reduce`] for `var`; a non-floating `dtype`.
pub fn sum_var(cx: &Ctx<'_>, x: &HostArray, options: ReduceOptions<'_>) -> Result<(HostArray, HostArray), ArrayError> {
    const NAME: &str = "sum_var";
    let complex = |d: DType| d.kind() == Kind::Complex;
    if let Some(d) = options.dtype
        && d.kind() != Kind::Float
        && !complex(d)
    {
        return Err(ArrayError::dtype(NAME, &[d], "needs a floating dtype= (the result has a mean)"));
    }
    if complex(x.dtype()) || options.dtype.is_some_and(complex) {
        let sum = reduce(cx, ReduceOp::Sum, x, options)?;
        return Ok((sum, reduce(cx, ReduceOp::Var, x, options)?));
    }
    let mut sums = Vec::new();
    // The variance's dtype (given, or `var`'s default) is the sum's too.
    let var = reduce_with_sums(cx, ReduceOp::Var, x, options, Some(&mut sums))?;
    let HostArray::Dense(v) = &var else { return unreachable(NAME) };
    let sum = Dense::alloc(cx.memory, NAME, v.dtype, &v.shape, false)?;
    let mut w = sum.storage.write(NAME)?;
    crate::with_real!(v.dtype, A => {
        let o: &mut [A] = bytemuck::cast_slice_mut(&mut w);
        if o.len() != sums.len() {
            return unreachable(NAME);
        }
        for (o, &s) in o.iter_mut().zip(&sums) {
            *o = s.cast_to::<A>();
        }
    }, return unreachable(NAME));
    drop(w);
    Ok((HostArray::Dense(sum), var))
}

/// [`reduce`]; for the variance family on real values, also each lane's sum in `sums`
/// (resized to the result's length).
fn reduce_with_sums(
    cx: &Ctx<'_>,
    op: ReduceOp,
    x: &HostArray,
    options: ReduceOptions<'_>,
    sums: Option<&mut Vec<f64>>,
) -> Result<HostArray, ArrayError> {
    use ReduceOp::*;
    let name = op.name();
    // A converting tile is reduced from its stored integers where that gives the values
    // of its converted copy (`in_registers`); `dtype` is the dtype the plugin sees.
    let converting = match x {
        HostArray::Converting(c) if matches!(op, Sum | Nansum | Mean | Nanmean | Var | Std | Nanvar | Nanstd) => {
            drop(c.stored.storage.read(name)?);
            Some(c)
        }
        _ => None,
    };
    let d = match converting {
        Some(c) => &c.stored,
        None => x.dense(name)?,
    };
    let dtype = x.dtype();
    let kind = dtype.kind();
    let axes: Vec<usize> = match op {
        Argmin | Argmax => match options.axes {
            None => (0..d.shape.len()).collect(),
            Some([axis]) => vec![normalize_axis(name, *axis, &d.shape)?],
            Some(_) => return Err(ArrayError::value(name, "takes one axis or None")),
        },
        _ => normalize_axes(name, options.axes, &d.shape)?,
    };
    let kept: Vec<usize> = (0..d.shape.len()).filter(|a| !axes.contains(a)).collect();
    let out_shape: Vec<usize> = if options.keepdims {
        (0..d.shape.len()).map(|a| if axes.contains(&a) { 1 } else { d.shape[a] }).collect()
    } else {
        kept.iter().map(|&a| d.shape[a]).collect()
    };
    let n_red: usize = axes.iter().map(|&a| d.shape[a]).product();
    let n_out: usize = kept.iter().map(|&a| d.shape[a]).product();
    let complex = kind == Kind::Complex;
    let nan_op = matches!(op, Nansum | Nanmean | Nanmin | Nanmax | Nanvar | Nanstd);
    let requested = |what: DType| options.dtype.unwrap_or(what);
    // Result dtype.
    let out_dtype = match op {
        Sum | Nansum | Prod => requested(default_sum_dtype(dtype)),
        Mean | Nanmean => requested(if kind == Kind::Bool { DType::F64 } else { float_for(dtype) }),
        Var | Std | Nanvar | Nanstd => {
            real_of(requested(if kind == Kind::Bool { DType::F64 } else { float_for(dtype) }))
        }
        Min | Max | Nanmin | Nanmax => dtype,
        Argmin | Argmax | CountNonzero => DType::I64,
        Any | All => DType::Bool,
    };
    if matches!(op, Min | Max | Nanmin | Nanmax | Argmin | Argmax) {
        if complex {
            return Err(ArrayError::dtype(name, &[dtype], "complex numbers have no order"));
        }
        if n_red == 0 {
            return Err(ArrayError::value(name, "zero-size array to a reduction which has no identity"));
        }
    }
    if options.dtype.is_some() && !matches!(op, Sum | Nansum | Prod | Mean | Nanmean | Var | Std | Nanvar | Nanstd) {
        return Err(ArrayError::value(name, "takes no dtype="));
    }
    if matches!(op, Mean | Nanmean | Var | Std | Nanvar | Nanstd)
        && !matches!(out_dtype.kind(), Kind::Float | Kind::Complex)
    {
        return Err(ArrayError::dtype(name, &[out_dtype], "needs a floating dtype= (the result is a mean)"));
    }
    if nan_op && out_dtype == DType::Bool {
        return Err(ArrayError::dtype(name, &[dtype], "needs a numeric dtype"));
    }
    // Summing the stored integers gives the converted values' sum when each converts
    // exactly or the accumulator is the converted dtype (the same `as` cast); variances
    // go through f64, so only exact conversions qualify.
    let in_registers = converting.is_some_and(|c| {
        matches!(out_dtype.kind(), Kind::Float | Kind::Complex)
            && (c.exact() || (matches!(op, Sum | Nansum | Mean | Nanmean) && out_dtype == c.dtype))
    });
    let d = match converting {
        Some(_) if !in_registers => x.dense(name)?,
        _ => d,
    };
    let out = Dense::alloc(cx.memory, name, out_dtype, &out_shape, false)?;
    // Integer sums and products accumulate in the result dtype: cast first.
    let source = if matches!(op, Sum | Nansum | Prod)
        && !matches!(out_dtype.kind(), Kind::Float | Kind::Complex)
        && dtype != out_dtype
    {
        cast_dense(cx, d, out_dtype, name)?
    } else {
        d.clone()
    };
    // A layout that is not a (kept, reduced) matrix yet is copied into one, charged to
    // the arrays' memory (a broadcast view's copy can be far larger than the view).
    let (source, order) = match matrix_order(&source, &axes) {
        (Some(order), false) => {
            let permuted = Dense {
                shape: order.iter().map(|&a| source.shape[a]).collect(),
                strides: order.iter().map(|&a| source.strides[a]).collect(),
                ..source
            };
            let identity = (0..order.len()).collect();
            (permuted.to_c_order(cx.memory, name)?, Some(identity))
        }
        (order, _) => (source, order),
    };
    let bytes = source.storage.read(name)?;
    let mut w = out.storage.write(name)?;
    let src_data = if source.dtype == DType::Bool { DType::U8 } else { source.dtype };
    let out_data = if out_dtype == DType::Bool { DType::U8 } else { out_dtype };
    crate::with_dtype!(src_data, S => {
        let full = source.view_in::<S>(&bytes, name)?;
        let m = as_matrix(full, &order, n_out, n_red, name)?;
        match op {
            Sum | Nansum | Mean | Nanmean => {
                let mean = matches!(op, Mean | Nanmean);
                sum_family::<S>(cx, name, &m, &mut w, out_data, nan_op, mean)?
            }
            Var | Std | Nanvar | Nanstd => {
                let std = matches!(op, Std | Nanstd);
                let complex = source.dtype.kind() == Kind::Complex;
                let variance = Variance { skip_nan: nan_op, std, correction: options.correction, complex };
                var_family::<S>(cx, name, &m, &mut w, out_data, variance, sums)?
            }
            Prod => {
                crate::with_dtype!(out_data, A => {
                    let o: &mut [A] = bytemuck::cast_slice_mut(&mut w);
                    fold_rows(cx, name, &m, o, |row: ArrayView1<'_, S>| row.iter().fold(1u8.cast_to::<A>(), |acc, &v| acc.mul(v.cast_to::<A>())))?
                }, unreachable(name)?)
            }
            Any | All | CountNonzero => {
                if op == CountNonzero {
                    let o: &mut [i64] = bytemuck::cast_slice_mut(&mut w);
                    fold_rows(cx, name, &m, o, |row: ArrayView1<'_, S>| row.iter().filter(|v| v.truthy()).count() as i64)?
                } else {
                    let o: &mut [u8] = &mut w;
                    let all = op == All;
                    fold_rows(cx, name, &m, o, |row: ArrayView1<'_, S>| {
                        (if all { row.iter().all(|v| v.truthy()) } else { row.iter().any(|v| v.truthy()) }) as u8
                    })?
                }
            }
            Min | Max | Nanmin | Nanmax | Argmin | Argmax => {
                extremes::<S>(cx, op, &m, &mut w)?
            }
        }
    }, {
        // Bool sources are read as u8 above; this arm is never taken.
        return unreachable(name);
    });
    drop(w);
    Ok(HostArray::Dense(out))
}

fn unreachable<T>(op: &str) -> Result<T, ArrayError> {
    Err(ArrayError::value(op, "internal error: unexpected dtype"))
}

/// The axes order `(kept..., reduced...)` and whether the source is already a C-order
/// matrix in that order (`trailing`); `None` order: reduced axes lead (a transposed view
/// of a C-order matrix).
fn matrix_order(d: &Dense, axes: &[usize]) -> (Option<Vec<usize>>, bool) {
    let ndim = d.shape.len();
    let mut sorted = axes.to_vec();
    sorted.sort_unstable();
    let contiguous = d.is_c_contiguous();
    let trailing = sorted.iter().enumerate().all(|(i, &a)| a == ndim - sorted.len() + i);
    let leading = sorted.iter().enumerate().all(|(i, &a)| a == i);
    if contiguous && trailing {
        return (Some((0..ndim).collect()), true);
    }
    if contiguous && leading {
        return (None, true);
    }
    let mut order: Vec<usize> = (0..ndim).filter(|a| !axes.contains(a)).collect();
    order.extend(sorted);
    (Some(order), false)
}

/// The source, C-contiguous in the axes order `order` (`None`: reduced axes first), as
/// an `(n_out, n_red)` matrix view.
fn as_matrix<'a, S>(
    full: ndarray::ArrayViewD<'a, S>,
    order: &Option<Vec<usize>>,
    n_out: usize,
    n_red: usize,
    op: &str,
) -> Result<CowArray<'a, S, Ix2>, ArrayError> {
    let broken = |e: ndarray::ShapeError| ArrayError::value(op, format!("internal error: {e}"));
    Ok(match order {
        Some(_) => CowArray::from(full.into_shape_with_order((n_out, n_red)).map_err(broken)?),
        None => CowArray::from(full.into_shape_with_order((n_red, n_out)).map_err(broken)?.reversed_axes()),
    })
}

/// Fill `out[i]` with `f(row i)`, checking for interruption every [`CHECK_EVERY`] elements.
fn fold_rows<S, O>(
    cx: &Ctx<'_>,
    op: &str,
    m: &CowArray<'_, S, Ix2>,
    out: &mut [O],
    f: impl Fn(ArrayView1<'_, S>) -> O,
) -> Result<(), ArrayError> {
    let per_check = (CHECK_EVERY / m.ncols().max(1)).max(1);
    for (i, (o, row)) in out.iter_mut().zip(m.rows()).enumerate() {
        if i % per_check == 0 {
            cx.check(op)?;
        }
        *o = f(row);
    }
    Ok(())
}

/// Pairwise sum of `cast(row)` (8 lanes below 256 elements, halves above), with AVX2
/// where the CPU has it (8 lanes in one vector instead of two).
fn pairwise<S: CastTo, A: Elem>(row: &[S], skip_nan: bool) -> A {
    #[cfg(target_arch = "x86_64")]
    if row.len() > 64 && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { pairwise_avx2(row, skip_nan) };
    }
    pairwise_portable(row, skip_nan)
}

fn pairwise_portable<S: CastTo, A: Elem>(row: &[S], skip_nan: bool) -> A {
    if row.len() <= 256 {
        return eight_lanes(row, skip_nan);
    }
    let half = row.len() / 2 / 8 * 8;
    pairwise_portable::<S, A>(&row[..half], skip_nan).add(pairwise_portable::<S, A>(&row[half..], skip_nan))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn pairwise_avx2<S: CastTo, A: Elem>(row: &[S], skip_nan: bool) -> A {
    if row.len() <= 256 {
        return eight_lanes(row, skip_nan);
    }
    let half = row.len() / 2 / 8 * 8;
    pairwise_avx2::<S, A>(&row[..half], skip_nan).add(pairwise_avx2::<S, A>(&row[half..], skip_nan))
}

/// The sum of `cast(row)` in 8 lanes, added pairwise at the end.
#[inline(always)]
fn eight_lanes<S: CastTo, A: Elem>(row: &[S], skip_nan: bool) -> A {
    let mut lanes = [A::default(); 8];
    let mut chunks = row.chunks_exact(8);
    for chunk in &mut chunks {
        for (l, &v) in lanes.iter_mut().zip(chunk) {
            let v = v.cast_to::<A>();
            *l = if skip_nan && v.is_nan() { *l } else { l.add(v) };
        }
    }
    let mut tail = A::default();
    for &v in chunks.remainder() {
        let v = v.cast_to::<A>();
        tail = if skip_nan && v.is_nan() { tail } else { tail.add(v) };
    }
    let [a, b, c, d, e, f, g, h] = lanes;
    a.add(b).add(c.add(d)).add(e.add(f).add(g.add(h))).add(tail)
}

/// Sum of one lane of the matrix (contiguous or strided).
fn lane_sum<S: CastTo, A: Elem>(row: ArrayView1<'_, S>, skip_nan: bool) -> A {
    match row.as_slice() {
        Some(s) => pairwise::<S, A>(s, skip_nan),
        None => row.iter().fold(A::default(), |acc, &v| {
            let v = v.cast_to::<A>();
            if skip_nan && v.is_nan() { acc } else { acc.add(v) }
        }),
    }
}

/// Non-NaN count of a lane.
fn lane_count<S: CastTo, A: Elem>(row: ArrayView1<'_, S>) -> usize {
    row.iter().filter(|&&v| !v.cast_to::<A>().is_nan()).count()
}

/// Columns per block of [`column_sums`]: 64 KiB of `f32` sums stay in L1/L2 while every
/// row's part passes, and runs this long keep the hardware prefetchers streaming (the
/// built-in `sum`'s `SUM_CHUNK`).
const COLUMN_BLOCK: usize = 16384;

/// Column sums of a matrix whose columns are contiguous rows of the source (leading
/// reduced axes): `out[j] = Σ_i m[j, i]`, in blocks of [`COLUMN_BLOCK`] columns, each
/// block one pass over its part of every row.
fn column_sums<S: CastTo, A: Elem>(
    cx: &Ctx<'_>,
    op: &str,
    m: &CowArray<'_, S, Ix2>,
    out: &mut [A],
    skip_nan: bool,
) -> Result<bool, ArrayError> {
    let Some(rows) = source_rows(m) else {
        return Ok(false);
    };
    out.iter_mut().for_each(|o| *o = A::default());
    for (b, block) in out.chunks_mut(COLUMN_BLOCK).enumerate() {
        let rows_per_check = (CHECK_EVERY / block.len()).max(4) / 4 * 4;
        for group in rows.chunks(rows_per_check) {
            cx.check(op)?;
            add_rows(block, group, b * COLUMN_BLOCK, skip_nan);
        }
    }
    Ok(true)
}

/// `block[i] += Σ_r rows[r][offset + i]`, with AVX2 where the CPU has it (the same
/// code, vectorised 8 lanes wide instead of the baseline's 4).
fn add_rows<S: CastTo, A: Elem>(block: &mut [A], rows: &[&[S]], offset: usize, skip_nan: bool) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { add_rows_avx2(block, rows, offset, skip_nan) };
    }
    add_rows_portable(block, rows, offset, skip_nan);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn add_rows_avx2<S: CastTo, A: Elem>(block: &mut [A], rows: &[&[S]], offset: usize, skip_nan: bool) {
    add_rows_portable(block, rows, offset, skip_nan);
}

#[inline(always)]
fn add_rows_portable<'a, S: CastTo, A: Elem>(block: &mut [A], rows: &[&'a [S]], offset: usize, skip_nan: bool) {
    let len = block.len();
    let part = |r: &'a [S]| -> &'a [S] { &r[offset..offset + len] };
    let mut quads = rows.chunks_exact(4);
    if !skip_nan {
        // Four rows per pass over `out`: a quarter of its loads and stores, which
        // bound the one-row loop (a standalone loop over 1024 × 65536 float32:
        // 18 → 30 GB/s; docs/benchmarks.md "LiberTEM classes").
        for quad in &mut quads {
            let (a, b, c, d) = (part(quad[0]), part(quad[1]), part(quad[2]), part(quad[3]));
            let pair = |p: S, q: S| p.cast_to::<A>().add(q.cast_to::<A>());
            for ((((o, &a), &b), &c), &d) in block.iter_mut().zip(a).zip(b).zip(c).zip(d) {
                *o = o.add(pair(a, b).add(pair(c, d)));
            }
        }
    }
    let rest = if skip_nan { rows } else { quads.remainder() };
    for &row in rest {
        if skip_nan {
            for (o, &v) in block.iter_mut().zip(part(row)) {
                let v = v.cast_to::<A>();
                if !v.is_nan() {
                    *o = o.add(v);
                }
            }
        } else {
            for (o, &v) in block.iter_mut().zip(part(row)) {
                *o = o.add(v.cast_to::<A>());
            }
        }
    }
}

/// The rows of the source of a matrix that is a transposed view (`(n_out, n_red)` with
/// stride 1 along `n_out`: leading reduced axes), as slices; `None` where they are not
/// contiguous.
fn source_rows<'a, S>(m: &'a CowArray<'_, S, Ix2>) -> Option<Vec<&'a [S]>> {
    (0..m.ncols()).map(|i| m.column(i).to_slice()).collect()
}

/// Whether the reduced axis of the matrix is the strided one (leading reduced axes).
fn reduced_is_strided<S>(m: &CowArray<'_, S, Ix2>) -> bool {
    m.nrows() > 1 && m.ncols() > 1 && m.strides()[0] == 1
}

/// `sum`, `nansum`, `mean`, `nanmean` into `out` of dtype `out_dtype`.
fn sum_family<S: CastTo>(
    cx: &Ctx<'_>,
    op: &str,
    m: &CowArray<'_, S, Ix2>,
    out: &mut [u8],
    out_dtype: DType,
    skip_nan: bool,
    mean: bool,
) -> Result<(), ArrayError> {
    let n = m.ncols();
    crate::with_dtype!(out_dtype, A => {
        let o: &mut [A] = bytemuck::cast_slice_mut(out);
        let done = reduced_is_strided(m) && column_sums::<S, A>(cx, op, m, o, skip_nan)?;
        if !done {
            fold_rows(cx, op, m, o, |row| lane_sum::<S, A>(row, skip_nan))?;
        }
        if mean {
            if skip_nan {
                for (o, row) in o.iter_mut().zip(m.rows()) {
                    let count = lane_count::<S, A>(row);
                    *o = divide::<A>(*o, count as f64);
                }
            } else {
                for o in o.iter_mut() {
                    *o = divide::<A>(*o, n as f64);
                }
            }
        }
    }, unreachable(op)?);
    Ok(())
}

/// `value / count` in `A` (NaN for 0 / 0 in floats).
fn divide<A: Elem>(value: A, count: f64) -> A {
    let re = value.re_f64();
    let complex = A::DTYPE.kind() == Kind::Complex;
    if complex {
        let c: Complex64 = value.cast_to::<Complex64>();
        (c / count).cast_to::<A>()
    } else {
        (re / count).cast_to::<A>()
    }
}

/// Which member of the variance family.
#[derive(Debug, Clone, Copy)]
struct Variance {
    skip_nan: bool,
    std: bool,
    correction: f64,
    complex: bool,
}

/// `var`, `std` and the NaN forms: two passes (mean, then squared deviations) with f64
/// accumulators (complex: `|x - mean|²`). Real values also give each lane's sum to
/// `sums` ([`sum_var`]).
fn var_family<S: CastTo>(
    cx: &Ctx<'_>,
    op: &str,
    m: &CowArray<'_, S, Ix2>,
    out: &mut [u8],
    out_dtype: DType,
    Variance { skip_nan, std, correction, complex }: Variance,
    sums: Option<&mut Vec<f64>>,
) -> Result<(), ArrayError> {
    let n_out = m.nrows();
    let mut means = vec![Complex64::new(0.0, 0.0); n_out];
    let mut counts = vec![m.ncols() as f64; n_out];
    let mut sq = vec![0f64; n_out];
    let strided = reduced_is_strided(m);
    if !complex {
        let sums = sums.map(|s| {
            s.clear();
            s.resize(n_out, 0.0);
            &mut s[..]
        });
        real_squared_deviations(cx, op, m, skip_nan, &mut counts, &mut sq, sums)?;
    } else if strided {
        // Leading reduced axes: accumulate rows of the source in memory order.
        let t = m.t();
        for (i, row) in t.rows().into_iter().enumerate() {
            if i % 64 == 0 {
                cx.check(op)?;
            }
            for (j, &v) in row.iter().enumerate() {
                let v = v.cast_to::<Complex64>();
                if skip_nan && (v.re.is_nan() || v.im.is_nan()) {
                    continue;
                }
                means[j] += v;
            }
        }
        if skip_nan {
            for (j, c) in counts.iter_mut().enumerate() {
                *c = m
                    .row(j)
                    .iter()
                    .filter(|&&v| {
                        let v = v.cast_to::<Complex64>();
                        !(v.re.is_nan() || v.im.is_nan())
                    })
                    .count() as f64;
            }
        }
        for (mean, &c) in means.iter_mut().zip(&counts) {
            *mean /= c;
        }
        for (i, row) in t.rows().into_iter().enumerate() {
            if i % 64 == 0 {
                cx.check(op)?;
            }
            for (j, &v) in row.iter().enumerate() {
                let v = v.cast_to::<Complex64>();
                if skip_nan && (v.re.is_nan() || v.im.is_nan()) {
                    continue;
                }
                sq[j] += (v - means[j]).norm_sqr();
            }
        }
    } else {
        for (j, row) in m.rows().into_iter().enumerate() {
            if j % 64 == 0 {
                cx.check(op)?;
            }
            let mut sum = Complex64::new(0.0, 0.0);
            let mut count = 0usize;
            for &v in row.iter() {
                let v = v.cast_to::<Complex64>();
                if skip_nan && (v.re.is_nan() || v.im.is_nan()) {
                    continue;
                }
                sum += v;
                count += 1;
            }
            let mean = sum / count as f64;
            let mut acc = 0f64;
            for &v in row.iter() {
                let v = v.cast_to::<Complex64>();
                if skip_nan && (v.re.is_nan() || v.im.is_nan()) {
                    continue;
                }
                acc += (v - mean).norm_sqr();
            }
            counts[j] = count as f64;
            sq[j] = acc;
        }
    }
    crate::with_real!(out_dtype, A => {
        let o: &mut [A] = bytemuck::cast_slice_mut(out);
        for ((o, &s), &c) in o.iter_mut().zip(&sq).zip(&counts) {
            let dof = c - correction;
            let var = if dof > 0.0 { s / dof } else { f64::NAN };
            *o = (if std { var.sqrt() } else { var }).cast_to::<A>();
        }
    }, unreachable(op)?);
    Ok(())
}

/// Bytes of the source per column block of [`real_squared_deviations`]: within a
/// core's L2 cache, so the second pass reads the block from cache.
const VAR_BLOCK_BYTES: usize = 256 << 10;

/// Real inputs of [`var_family`]: per lane of the matrix the count of (non-NaN)
/// values, the sum of squared deviations from their mean and (into `sums`, if given)
/// the sum of the values, in f64, two passes. With
/// leading reduced axes (a tile's `var(axis=0)`) both passes run over a block of
/// columns at a time, row by row into per-column accumulators (NumPy's order: the
/// rows one after the other): the second pass finds the block in cache, so the source
/// is read from memory about once.
fn real_squared_deviations<S: CastTo>(
    cx: &Ctx<'_>,
    op: &str,
    m: &CowArray<'_, S, Ix2>,
    skip_nan: bool,
    counts: &mut [f64],
    sq: &mut [f64],
    mut sums: Option<&mut [f64]>,
) -> Result<(), ArrayError> {
    let value = |v: S| v.cast_to::<f64>();
    if let Some(rows) = reduced_is_strided(m).then(|| source_rows(m)).flatten() {
        let columns = m.nrows();
        // Columns per block: both passes over a block's rows stay in a core's cache.
        let block = (VAR_BLOCK_BYTES / (rows.len() * std::mem::size_of::<S>())).clamp(64, columns.max(64));
        let rows_per_check = (CHECK_EVERY / block).max(4) / 4 * 4;
        let mut means = vec![0f64; block];
        for start in (0..columns).step_by(block) {
            let end = (start + block).min(columns);
            let (means, counts, sq) = (&mut means[..end - start], &mut counts[start..end], &mut sq[start..end]);
            means.fill(0.0);
            if skip_nan {
                counts.fill(0.0);
            }
            for group in rows.chunks(rows_per_check) {
                cx.check(op)?;
                add_block_rows(means, counts, group, start, skip_nan);
            }
            if let Some(sums) = sums.as_deref_mut() {
                sums[start..end].copy_from_slice(means);
            }
            means.iter_mut().zip(counts.iter()).for_each(|(s, &c)| *s /= c);
            for group in rows.chunks(rows_per_check) {
                cx.check(op)?;
                add_block_squared_deviations(sq, means, group, start, skip_nan);
            }
        }
        return Ok(());
    }
    for (j, row) in m.rows().into_iter().enumerate() {
        if j % 64 == 0 {
            cx.check(op)?;
        }
        let (sum, count) = row.iter().fold((0f64, 0usize), |(sum, count), &v| {
            let v = value(v);
            if skip_nan && v.is_nan() { (sum, count) } else { (sum + v, count + 1) }
        });
        if let Some(sums) = sums.as_deref_mut() {
            sums[j] = sum;
        }
        let mean = sum / count as f64;
        sq[j] = row.iter().fold(0f64, |acc, &v| {
            let d = value(v) - mean;
            if skip_nan && d.is_nan() { acc } else { acc + d * d }
        });
        counts[j] = count as f64;
    }
    Ok(())
}

/// `$vis fn $name<S: CastTo>(args)`: `$portable(args)` compiled with AVX-512F or AVX2
/// where the CPU has them, chosen at run time (the same loops, 8 or 4 `f64` lanes wide;
/// each element's additions in the same order, so the results are the same).
macro_rules! with_avx512_or_avx2 {
    ($(#[$doc:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) => $portable:ident) => {
        $(#[$doc])*
        $vis fn $name<S: CastTo>($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                fn avx512<S: CastTo>($($arg: $ty),*) {
                    $portable($($arg),*);
                }
                #[target_feature(enable = "avx2")]
                fn avx2<S: CastTo>($($arg: $ty),*) {
                    $portable($($arg),*);
                }
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU has AVX-512F (checked just above).
                    return unsafe { avx512($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU has AVX2 (checked just above).
                    return unsafe { avx2($($arg),*) };
                }
            }
            $portable($($arg),*);
        }
    };
}

with_avx512_or_avx2! {
    /// The first pass of a variance over a block of columns: `sums[i] += rows[r][offset +
    /// i]` for the rows one after the other (NaN skipped and the rest counted into
    /// `counts` with `skip_nan`; `counts` is not touched without it), with AVX-512 or AVX2
    /// where the CPU has them. Also the built-in `stddev`'s first pass over a block of
    /// frames.
    pub(crate) fn add_block_rows(
        sums: &mut [f64],
        counts: &mut [f64],
        rows: &[&[S]],
        offset: usize,
        skip_nan: bool,
    ) => add_block_rows_portable
}

/// `v`, or 0 for NaN: adding it to a sum that starts at +0 is the same as skipping a
/// NaN (such a sum is never -0), without a branch.
#[inline(always)]
fn zero_nan(v: f64) -> f64 {
    if v.is_nan() { 0.0 } else { v }
}

#[inline(always)]
fn add_block_rows_portable<'a, S: CastTo>(
    sums: &mut [f64],
    counts: &mut [f64],
    rows: &[&'a [S]],
    offset: usize,
    skip_nan: bool,
) {
    let len = sums.len();
    let part = |r: &'a [S]| -> &'a [S] { &r[offset..offset + len] };
    let value = |v: S| v.cast_to::<f64>();
    let counted = |v: S| if value(v).is_nan() { 0.0 } else { 1.0 };
    // Four rows per pass over the sums (a quarter of their loads and stores), added
    // in row order.
    let mut quads = rows.chunks_exact(4);
    for quad in &mut quads {
        let (a, b, c, d) = (part(quad[0]), part(quad[1]), part(quad[2]), part(quad[3]));
        if skip_nan {
            let nan = |v: S| zero_nan(value(v));
            let columns = sums.iter_mut().zip(counts.iter_mut()).zip(a).zip(b).zip(c).zip(d);
            for (((((s, n), &a), &b), &c), &d) in columns {
                *s = *s + nan(a) + nan(b) + nan(c) + nan(d);
                *n = *n + counted(a) + counted(b) + counted(c) + counted(d);
            }
        } else {
            for ((((s, &a), &b), &c), &d) in sums.iter_mut().zip(a).zip(b).zip(c).zip(d) {
                *s = *s + value(a) + value(b) + value(c) + value(d);
            }
        }
    }
    for &row in quads.remainder() {
        if skip_nan {
            for ((s, n), &v) in sums.iter_mut().zip(counts.iter_mut()).zip(part(row)) {
                *s += zero_nan(value(v));
                *n += counted(v);
            }
        } else {
            for (s, &v) in sums.iter_mut().zip(part(row)) {
                *s += value(v);
            }
        }
    }
}

with_avx512_or_avx2! {
    /// The second pass of a variance over a block of columns: `sq[i] += (rows[r][offset +
    /// i] - means[i])²` for the rows one after the other (NaN deviations skipped with
    /// `skip_nan`), with AVX-512 or AVX2 where the CPU has them. Also the built-in
    /// `stddev`'s second pass over a block of frames.
    pub(crate) fn add_block_squared_deviations(
        sq: &mut [f64],
        means: &[f64],
        rows: &[&[S]],
        offset: usize,
        skip_nan: bool,
    ) => add_block_squared_deviations_portable
}

#[inline(always)]
fn add_block_squared_deviations_portable<'a, S: CastTo>(
    sq: &mut [f64],
    means: &[f64],
    rows: &[&'a [S]],
    offset: usize,
    skip_nan: bool,
) {
    let len = sq.len();
    let part = |r: &'a [S]| -> &'a [S] { &r[offset..offset + len] };
    let square = |v: S, mean: f64| {
        let d = v.cast_to::<f64>() - mean;
        if skip_nan { zero_nan(d * d) } else { d * d }
    };
    let mut quads = rows.chunks_exact(4);
    for quad in &mut quads {
        let (a, b, c, d) = (part(quad[0]), part(quad[1]), part(quad[2]), part(quad[3]));
        for (((((q, &m), &a), &b), &c), &d) in sq.iter_mut().zip(means).zip(a).zip(b).zip(c).zip(d) {
            *q = *q + square(a, m) + square(b, m) + square(c, m) + square(d, m);
        }
    }
    for &row in quads.remainder() {
        for ((q, &m), &v) in sq.iter_mut().zip(means).zip(part(row)) {
            *q += square(v, m);
        }
    }
}

/// `min`, `max`, their NaN forms, `argmin`, `argmax` (NaN wins `min`/`max`/`arg*`, as in NumPy).
fn extremes<S: bytemuck::Pod + CastTo>(
    cx: &Ctx<'_>,
    op: ReduceOp,
    m: &CowArray<'_, S, Ix2>,
    out: &mut [u8],
) -> Result<(), ArrayError> {
    use ReduceOp::*;
    let name = op.name();
    let pick = |row: ArrayView1<'_, S>| -> usize {
        let mut best = 0usize;
        let mut best_v = row[0].cast_to::<f64>();
        let greater = matches!(op, Max | Nanmax | Argmax);
        let skip_nan = matches!(op, Nanmin | Nanmax);
        if skip_nan
            && best_v.is_nan()
            && let Some(i) = row.iter().position(|&v| !v.cast_to::<f64>().is_nan())
        {
            best = i;
            best_v = row[i].cast_to::<f64>();
        }
        if best_v.is_nan() && !skip_nan {
            return best;
        }
        for (i, &v) in row.iter().enumerate().skip(best + 1) {
            let v = v.cast_to::<f64>();
            if v.is_nan() {
                if skip_nan {
                    continue;
                }
                return i;
            }
            if (greater && v > best_v) || (!greater && v < best_v) {
                best = i;
                best_v = v;
            }
        }
        best
    };
    match op {
        Argmin | Argmax => {
            let o: &mut [i64] = bytemuck::cast_slice_mut(out);
            fold_rows(cx, name, m, o, |row| pick(row) as i64)
        }
        _ => {
            let o: &mut [S] = bytemuck::cast_slice_mut(out);
            fold_rows(cx, name, m, o, |row| row[pick(row)])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrays::memory::{ArrayMemory, Lease};
    use crate::arrays::ops::BinaryOp;
    use crate::arrays::{IndexItem, Operand, Scalar, WriteMode, binary, to_vec, write};

    /// A `2 × 3 × 4` tile of stored `u16` (values up to 65535) lent as `float32`, and
    /// the same values converted by a plain loop (the reference).
    fn converting_tile(memory: &Arc<ArrayMemory>, lease: &Arc<Lease>, values: &[u16]) -> HostArray {
        // Leaked as u16 (aligned for the view, which otherwise copies and never expires).
        let values: &'static [u16] = Box::leak(values.to_vec().into_boxed_slice());
        let bytes: &'static [u8] = bytemuck::cast_slice(values);
        // SAFETY: the bytes are leaked (never freed nor written).
        unsafe { HostArray::borrowed_converting(memory, DType::U16, DType::F32, &[2, 3, 4], bytes, lease.clone()) }
            .unwrap()
    }

    use std::sync::Arc;

    const VALUES: [u16; 24] =
        [0, 1, 2, 65535, 7, 300, 12, 9, 65000, 4, 5, 6, 1, 1, 1, 1, 40000, 2, 3, 9, 11, 65535, 8, 100];

    fn reference() -> Vec<f32> {
        VALUES.iter().map(|&v| v as f32).collect()
    }

    #[test]
    fn a_converting_tile_reduces_to_the_converted_values_sums_and_variances() {
        let memory = ArrayMemory::with_limit(1 << 20);
        let lease = Lease::new();
        let cx = Ctx { memory: &memory, stop: &|| None };
        let tile = converting_tile(&memory, &lease, &VALUES);
        assert_eq!(tile.dtype(), DType::F32);
        let f = reference();
        // sum(axis=0): frame by frame, in f32.
        let sum0 = reduce(&cx, ReduceOp::Sum, &tile, ReduceOptions { axes: Some(&[0]), ..Default::default() }).unwrap();
        assert_eq!(sum0.dtype(), DType::F32);
        let expected: Vec<f32> = (0..12).map(|i| f[i] + f[12 + i]).collect();
        assert_eq!(to_vec::<f32>(&sum0).unwrap(), expected);
        // sum(axis=(1, 2)) and the mean over a frame.
        let sums = reduce(&cx, ReduceOp::Sum, &tile, ReduceOptions { axes: Some(&[1, 2]), ..Default::default() });
        let frame_sum = |n: usize| f[n * 12..(n + 1) * 12].iter().map(|&v| v as f64).sum::<f64>();
        assert_eq!(to_vec::<f32>(&sums.unwrap()).unwrap(), [frame_sum(0) as f32, frame_sum(1) as f32]);
        // var(axis=0, dtype=float64): population variance of two values, |a - b|² / 4.
        let var = reduce(
            &cx,
            ReduceOp::Var,
            &tile,
            ReduceOptions { axes: Some(&[0]), dtype: Some(DType::F64), ..Default::default() },
        )
        .unwrap();
        let expected: Vec<f64> = (0..12).map(|i| (f[i] as f64 - f[12 + i] as f64).powi(2) / 4.0).collect();
        assert_eq!(to_vec::<f64>(&var).unwrap(), expected);
        // Any other operation sees the converted copy.
        let doubled = binary(&cx, BinaryOp::Multiply, Operand::Array(&tile), Operand::Scalar(Scalar::Float(2.0)));
        let expected: Vec<f32> = f.iter().map(|v| v * 2.0).collect();
        assert_eq!(to_vec::<f32>(&doubled.unwrap()).unwrap(), expected);
        assert_eq!(to_vec::<f32>(&tile.get(&[IndexItem::At(1)]).unwrap()).unwrap(), f[12..]);
    }

    #[test]
    fn a_converting_tile_reshaped_times_masks_is_the_converted_product() {
        let memory = ArrayMemory::with_limit(1 << 20);
        let lease = Lease::new();
        let cx = Ctx { memory: &memory, stop: &|| None };
        let tile = converting_tile(&memory, &lease, &VALUES);
        let flat = tile.reshape(&memory, &[2, -1]).unwrap();
        assert!(matches!(flat, HostArray::Converting(_)));
        // Two masks over 12 pixels: all ones, and the pixel index.
        let masks: Vec<f32> = (0..12).flat_map(|p| [1.0, p as f32]).collect();
        let masks = HostArray::from_bytes(&memory, DType::F32, &[12, 2], bytemuck::cast_slice(&masks)).unwrap();
        let product = crate::arrays::linalg::matmul(&cx, &flat, &masks).unwrap();
        assert_eq!(product.shape(), [2, 2]);
        let f = reference();
        let expected: Vec<f32> = (0..2)
            .flat_map(|n| {
                let frame = &f[n * 12..(n + 1) * 12];
                [frame.iter().sum::<f32>(), frame.iter().enumerate().map(|(p, v)| p as f32 * v).sum::<f32>()]
            })
            .collect();
        assert_eq!(to_vec::<f32>(&product).unwrap(), expected);
    }

    #[test]
    fn a_converting_tile_is_read_only_and_expires_with_its_call() {
        let memory = ArrayMemory::with_limit(1 << 20);
        let lease = Lease::new();
        let cx = Ctx { memory: &memory, stop: &|| None };
        let tile = converting_tile(&memory, &lease, &VALUES);
        let view = tile.get(&[IndexItem::At(0)]).unwrap();
        for target in [&tile, &view] {
            let e = write(&cx, target, &[], Operand::Scalar(Scalar::Float(1.0)), WriteMode::Add).unwrap_err();
            assert!(e.to_string().contains("read-only"), "{e}");
        }
        lease.revoke();
        let e = reduce(&cx, ReduceOp::Sum, &tile, ReduceOptions::default()).unwrap_err();
        assert!(matches!(e, ArrayError::Expired { .. }), "{e}");
        assert!(matches!(to_vec::<f32>(&tile).unwrap_err(), ArrayError::Expired { .. }));
    }

    /// Found writing the `host_arrays` fuzz target: a reduction over a layout that is
    /// not a matrix yet copied it with ndarray, outside the arrays' memory limit — a
    /// broadcast view of 2**40 bytes asked for 1 TiB. The copy is charged: refused.
    /// Expected values of the small case: NumPy, `np.broadcast_to([1, 2, 3, 4], (3, 4))`
    /// summed over axis 0 and axis 1.
    #[test]
    fn reducing_a_broadcast_view_copies_it_within_the_memory_limit() {
        let memory = ArrayMemory::with_limit(1 << 20);
        let cx = Ctx { memory: &memory, stop: &|| None };
        let row = HostArray::from_bytes(&memory, DType::U8, &[4], &[1, 2, 3, 4]).unwrap();
        let rows = row.broadcast_to(&[3, 4]).unwrap();
        let sum = |x: &HostArray, axis: i64| {
            reduce(&cx, ReduceOp::Sum, x, ReduceOptions { axes: Some(&[axis]), ..Default::default() })
        };
        assert_eq!(to_vec::<u64>(&sum(&rows, 0).unwrap()).unwrap(), [3, 6, 9, 12]);
        assert_eq!(to_vec::<u64>(&sum(&rows, 1).unwrap()).unwrap(), [10, 10, 10]);
        let huge = row.get(&[crate::arrays::IndexItem::NewAxis]).unwrap().broadcast_to(&[1 << 38, 4]).unwrap();
        // `max` reads the elements as they are (a sum casts them first, charged anyway).
        let refused = reduce(&cx, ReduceOp::Max, &huge, ReduceOptions { axes: Some(&[0]), ..Default::default() });
        assert!(matches!(refused, Err(ArrayError::Memory { .. })), "{refused:?}");
    }

    /// `astype` of a converting tile to float64 (cast from the stored integers) and to
    /// float32 and int32 give the converted values; the tile still expires with its lease.
    #[test]
    fn a_converting_tiles_astype_gives_the_converted_values() {
        let memory = ArrayMemory::with_limit(1 << 20);
        let lease = Lease::new();
        let cx = Ctx { memory: &memory, stop: &|| None };
        let tile = converting_tile(&memory, &lease, &VALUES);
        let f64s = crate::arrays::astype(&cx, &tile, DType::F64).unwrap();
        let expected: Vec<f64> = VALUES.iter().map(|&v| f64::from(v)).collect();
        assert_eq!(to_vec::<f64>(&f64s).unwrap(), expected);
        let f32s = crate::arrays::astype(&cx, &tile, DType::F32).unwrap();
        assert_eq!(to_vec::<f32>(&f32s).unwrap(), reference());
        let i32s = crate::arrays::astype(&cx, &tile, DType::I32).unwrap();
        let expected: Vec<i32> = VALUES.iter().map(|&v| i32::from(v)).collect();
        assert_eq!(to_vec::<i32>(&i32s).unwrap(), expected);
        lease.revoke();
        assert!(matches!(crate::arrays::astype(&cx, &tile, DType::F64), Err(ArrayError::Expired { .. })));
    }

    /// `sum(axis=0)` adds four rows per pass where it can (then the rest one by one), in
    /// blocks of columns: the column sums of 4k, 4k + 1, ..., 4k + 3 rows, of fewer
    /// columns than a block and of two blocks and a bit, float and integer, against a
    /// plain f64 loop.
    #[test]
    fn column_sums_by_four_rows_and_the_rest_match_a_plain_loop() {
        let memory = ArrayMemory::with_limit(1 << 26);
        let cx = Ctx { memory: &memory, stop: &|| None };
        for (rows, cols) in
            [1usize, 3, 4, 5, 7, 8, 9, 11].into_iter().flat_map(|r| [(r, 13), (r, 2 * COLUMN_BLOCK + 3)])
        {
            let values: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919) % 1000) as f32 * 0.25 - 40.0).collect();
            let expected: Vec<f64> =
                (0..cols).map(|j| (0..rows).map(|i| f64::from(values[i * cols + j])).sum()).collect();
            let x = HostArray::from_bytes(&memory, DType::F32, &[rows, cols], bytemuck::cast_slice(&values)).unwrap();
            let sum = reduce(&cx, ReduceOp::Sum, &x, ReduceOptions { axes: Some(&[0]), ..Default::default() }).unwrap();
            let got = to_vec::<f32>(&sum).unwrap();
            for (j, (&g, &e)) in got.iter().zip(&expected).enumerate() {
                assert!((f64::from(g) - e).abs() <= 1e-6 * e.abs().max(1.0), "{rows} x {cols}, column {j}: {g} != {e}");
            }
            let ints: Vec<i32> = values.iter().map(|&v| (v * 4.0) as i32).collect();
            let x = HostArray::from_bytes(&memory, DType::I32, &[rows, cols], bytemuck::cast_slice(&ints)).unwrap();
            let sum = reduce(&cx, ReduceOp::Sum, &x, ReduceOptions { axes: Some(&[0]), ..Default::default() }).unwrap();
            let expected: Vec<i64> =
                (0..cols).map(|j| (0..rows).map(|i| i64::from(ints[i * cols + j])).sum()).collect();
            assert_eq!(to_vec::<i64>(&sum).unwrap(), expected, "{rows} rows of int32");
        }
    }

    /// The variance of `rows × cols` values over the rows (`axis=0`, the rows one
    /// after the other as NumPy adds them), NaN skipped and the rest counted with
    /// `skip_nan`, by a plain f64 loop: the reference of the blocked kernels.
    fn plain_variance(values: &[f64], rows: usize, cols: usize, skip_nan: bool, ddof: f64) -> Vec<f64> {
        (0..cols)
            .map(|j| {
                let column: Vec<f64> =
                    (0..rows).map(|i| values[i * cols + j]).filter(|v| !(skip_nan && v.is_nan())).collect();
                let mut sum = 0.0;
                for &v in &column {
                    sum += v;
                }
                let mean = sum / column.len() as f64;
                let mut sq = 0.0;
                for &v in &column {
                    sq += (v - mean) * (v - mean);
                }
                let dof = column.len() as f64 - ddof;
                if dof > 0.0 { sq / dof } else { f64::NAN }
            })
            .collect()
    }

    /// `var`/`std`/`nanvar` over leading axes run four rows at a time in blocks of
    /// columns, with AVX2 where the CPU has it: 1 to 9 rows (4k, 4k + 1, ...), column
    /// counts that are not a multiple of 8 (fewer than a block, two blocks and a bit),
    /// float32 (magnitudes 1e-4 to 4e9) with NaNs (a column of NaN only) and uint16
    /// input, `ddof` 0 and 1, two leading axes — against a plain f64 loop in NumPy's
    /// order (row after row), so equal to the last bit.
    #[test]
    fn variances_over_leading_axes_match_a_plain_loop() {
        let memory = ArrayMemory::with_limit(1 << 28);
        let cx = Ctx { memory: &memory, stop: &|| None };
        let same = |got: &[f64], expected: &[f64], what: &str| {
            assert_eq!(got.len(), expected.len(), "{what}");
            for (j, (&g, &e)) in got.iter().zip(expected).enumerate() {
                assert!(g.to_bits() == e.to_bits() || (g.is_nan() && e.is_nan()), "{what}, column {j}: {g} != {e}");
            }
        };
        let var = |op: ReduceOp, x: &HostArray, axes: &[i64], ddof: f64| {
            let options =
                ReduceOptions { axes: Some(axes), dtype: Some(DType::F64), correction: ddof, ..Default::default() };
            to_vec::<f64>(&reduce(&cx, op, x, options).unwrap()).unwrap()
        };
        for rows in 1..=9usize {
            let block = VAR_BLOCK_BYTES / (rows * 4);
            for cols in [13, 67, 2 * block + 5] {
                let what = |name: &str| format!("{name} of {rows} x {cols}");
                // Magnitudes from 1e-4 to 4e9 in every column, so that the order of
                // the additions shows in the last bits of the means too.
                let scale = |i: usize| [1.0, 4.1e9, 1.3e-4][(i / cols + i % cols) % 3];
                let values: Vec<f32> = (0..rows * cols)
                    .map(|i| (((i * 7919) % 1013) as f32 * 0.37 - 150.0 + (i / cols) as f32) * scale(i))
                    .collect();
                let wide: Vec<f64> = values.iter().map(|&v| f64::from(v)).collect();
                let x =
                    HostArray::from_bytes(&memory, DType::F32, &[rows, cols], bytemuck::cast_slice(&values)).unwrap();
                for ddof in [0.0, 1.0] {
                    let expected = plain_variance(&wide, rows, cols, false, ddof);
                    same(&var(ReduceOp::Var, &x, &[0], ddof), &expected, &what("var"));
                    let std: Vec<f64> = expected.iter().map(|v| v.sqrt()).collect();
                    same(&var(ReduceOp::Std, &x, &[0], ddof), &std, &what("std"));
                }
                // NaN in every third value of column 5 and on, and column 3 all NaN.
                let mut holed = values.clone();
                for (i, v) in holed.iter_mut().enumerate() {
                    if (i % cols == 3) || (i % cols >= 5 && i % 3 == 0) {
                        *v = f32::NAN;
                    }
                }
                let wide: Vec<f64> = holed.iter().map(|&v| f64::from(v)).collect();
                let x =
                    HostArray::from_bytes(&memory, DType::F32, &[rows, cols], bytemuck::cast_slice(&holed)).unwrap();
                for ddof in [0.0, 1.0] {
                    let expected = plain_variance(&wide, rows, cols, true, ddof);
                    assert!(expected[3].is_nan());
                    same(&var(ReduceOp::Nanvar, &x, &[0], ddof), &expected, &what("nanvar"));
                    let std: Vec<f64> = expected.iter().map(|v| v.sqrt()).collect();
                    same(&var(ReduceOp::Nanstd, &x, &[0], ddof), &std, &what("nanstd"));
                }
                same(&var(ReduceOp::Var, &x, &[0], 0.0), &plain_variance(&wide, rows, cols, false, 0.0), &what("var"));
                // uint16 (variances in float64, NumPy's default), up to 65535.
                let ints: Vec<u16> = (0..rows * cols).map(|i| ((i * 40503) % 65536) as u16).collect();
                let wide: Vec<f64> = ints.iter().map(|&v| f64::from(v)).collect();
                let x = HostArray::from_bytes(&memory, DType::U16, &[rows, cols], bytemuck::cast_slice(&ints)).unwrap();
                same(
                    &var(ReduceOp::Var, &x, &[0], 0.0),
                    &plain_variance(&wide, rows, cols, false, 0.0),
                    &what("u16 var"),
                );
                same(
                    &var(ReduceOp::Nanvar, &x, &[0], 1.0),
                    &plain_variance(&wide, rows, cols, true, 1.0),
                    &what("u16 nanvar"),
                );
            }
        }
        // Two leading axes: (3, 2, 13) over axes (0, 1) is the (6, 13) case.
        let values: Vec<f32> = (0..78).map(|i| ((i * 31) % 17) as f32 - 8.5).collect();
        let wide: Vec<f64> = values.iter().map(|&v| f64::from(v)).collect();
        let x = HostArray::from_bytes(&memory, DType::F32, &[3, 2, 13], bytemuck::cast_slice(&values)).unwrap();
        same(&var(ReduceOp::Var, &x, &[0, 1], 0.0), &plain_variance(&wide, 6, 13, false, 0.0), "var of (3, 2, 13)");
    }

    /// `sum_var` gives what `sum` (accumulated in f64) and `var` give: over leading axes
    /// (the blocked passes), trailing axes (a row at a time) and all axes, with `keepdims`,
    /// `correction` 1, float32 and uint16 input, a float32 `dtype`, and complex input (two
    /// passes) — against plain f64 loops; an integer `dtype` is refused.
    #[test]
    fn sum_var_gives_the_sum_and_the_variance_in_one_call() {
        let memory = ArrayMemory::with_limit(1 << 28);
        let cx = Ctx { memory: &memory, stop: &|| None };
        let (rows, cols) = (9, 2 * VAR_BLOCK_BYTES / (9 * 4) + 5);
        let values: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919) % 1013) as f32 * 0.37 - 150.0).collect();
        let ints: Vec<u16> = (0..rows * cols).map(|i| ((i * 40503) % 65536) as u16).collect();
        let f32s = HostArray::from_bytes(&memory, DType::F32, &[rows, cols], bytemuck::cast_slice(&values)).unwrap();
        let u16s = HostArray::from_bytes(&memory, DType::U16, &[rows, cols], bytemuck::cast_slice(&ints)).unwrap();
        for (x, wide, what) in [
            (&f32s, values.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), "float32"),
            (&u16s, ints.iter().map(|&v| f64::from(v)).collect(), "uint16"),
        ] {
            let transposed: Vec<f64> = (0..cols * rows).map(|i| wide[(i % rows) * cols + i / rows]).collect();
            for (axes, keepdims, ddof) in [(&[0i64][..], false, 0.0), (&[0][..], true, 1.0), (&[1][..], false, 0.0)] {
                let options = ReduceOptions { axes: Some(axes), keepdims, correction: ddof, dtype: Some(DType::F64) };
                let (sum, var) = sum_var(&cx, x, options).unwrap();
                // `plain_variance(values, r, c)` is over the `r` rows of each of `c` columns.
                let (r, c, columns) = if axes == [0] { (rows, cols, &wide) } else { (cols, rows, &transposed) };
                let shape: Vec<usize> = match (axes, keepdims) {
                    ([0], true) => vec![1, cols],
                    ([0], false) => vec![cols],
                    _ => vec![rows],
                };
                let what = format!("{what}, axes {axes:?}, keepdims {keepdims}, ddof {ddof}");
                assert_eq!((sum.shape(), var.shape()), (&shape[..], &shape[..]), "{what}");
                assert_eq!((sum.dtype(), var.dtype()), (DType::F64, DType::F64), "{what}");
                let expected_sums: Vec<f64> = (0..c).map(|j| (0..r).map(|i| columns[i * c + j]).sum()).collect();
                let expected_vars = plain_variance(columns, r, c, false, ddof);
                let near = |got: Vec<f64>, want: &[f64], name: &str| {
                    for (j, (g, w)) in got.iter().zip(want).enumerate() {
                        assert!((g - w).abs() <= 1e-9 * w.abs().max(1.0), "{what}: {name} {j}: {g} != {w}");
                    }
                };
                near(to_vec::<f64>(&sum).unwrap(), &expected_sums, "sum");
                near(to_vec::<f64>(&var).unwrap(), &expected_vars, "var");
                let alone = reduce(&cx, ReduceOp::Var, x, options).unwrap();
                assert_eq!(to_vec::<f64>(&var).unwrap(), to_vec::<f64>(&alone).unwrap(), "{what}: var as var gives it");
            }
        }
        // Default dtype: `var`'s.
        let default = ReduceOptions { axes: Some(&[0]), ..Default::default() };
        for x in [&f32s, &u16s] {
            let (sum, var) = sum_var(&cx, x, default).unwrap();
            let dtype = reduce(&cx, ReduceOp::Var, x, default).unwrap().dtype();
            assert_eq!((sum.dtype(), var.dtype()), (dtype, dtype));
        }
        let all = ReduceOptions { dtype: Some(DType::F32), ..Default::default() };
        let (sum, var) = sum_var(&cx, &f32s, all).unwrap();
        assert_eq!((sum.shape(), sum.dtype()), (&[][..], DType::F32));
        let total: f64 = values.iter().map(|&v| f64::from(v)).sum();
        assert_eq!(to_vec::<f32>(&sum).unwrap(), vec![total as f32]);
        assert_eq!(
            to_vec::<f32>(&var).unwrap(),
            to_vec::<f32>(&reduce(&cx, ReduceOp::Var, &f32s, all).unwrap()).unwrap()
        );
        // Complex: two passes, the two calls' results.
        let complex: Vec<f32> = (0..2 * 6 * 5).map(|i| (i % 7) as f32 - 3.0).collect();
        let c = HostArray::from_bytes(&memory, DType::C64, &[6, 5], bytemuck::cast_slice(&complex)).unwrap();
        let options = ReduceOptions { axes: Some(&[0]), ..Default::default() };
        let (sum, var) = sum_var(&cx, &c, options).unwrap();
        let bytes = |x: &HostArray| to_vec::<u8>(x).unwrap();
        assert_eq!(bytes(&sum), bytes(&reduce(&cx, ReduceOp::Sum, &c, options).unwrap()));
        assert_eq!(bytes(&var), bytes(&reduce(&cx, ReduceOp::Var, &c, options).unwrap()));
        let refused = sum_var(&cx, &u16s, ReduceOptions { dtype: Some(DType::I64), ..Default::default() });
        assert!(refused.is_err_and(|e| e.to_string().contains("floating")));
    }
}
