//! Fast kernels for the common reductions, written so LLVM vectorises them with wasm
//! `simd128` (build plugins with `-C target-feature=+simd128`).
//!
//! Float addition is not associative, so a plain `iter().sum()` runs one element at a
//! time; [`sum`] and [`dot`] keep eight independent partial sums instead (the result
//! differs from a sequential sum in the last bits, as NumPy's pairwise sum does).

use crate::element::Numeric;
use ndarray::{ArrayViewD, ArrayViewMutD, Axis, Zip};

const LANES: usize = 8;

/// `acc[i] += values[i]` over the common length.
#[inline]
pub fn add_assign<T: Numeric>(acc: &mut [T], values: &[T]) {
    for (a, &v) in acc.iter_mut().zip(values) {
        *a += v;
    }
}

/// The sum of `values`, with eight partial sums.
#[inline]
pub fn sum<T: Numeric>(values: &[T]) -> T {
    let mut lanes = [T::ZERO; LANES];
    let chunks = values.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (l, &v) in lanes.iter_mut().zip(chunk) {
            *l += v;
        }
    }
    let mut total = T::ZERO;
    for l in lanes {
        total += l;
    }
    for &v in rest {
        total += v;
    }
    total
}

/// `Σ a[i]·b[i]` over the common length, with eight partial sums.
#[inline]
pub fn dot<T: Numeric>(a: &[T], b: &[T]) -> T {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut lanes = [T::ZERO; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for ((l, &p), &q) in lanes.iter_mut().zip(x).zip(y) {
            *l += p * q;
        }
    }
    let mut total = T::ZERO;
    for l in lanes {
        total += l;
    }
    for (&p, &q) in ra.iter().zip(rb) {
        total += p * q;
    }
    total
}

/// `acc += Σ rows` for `data` made of whole rows of `acc.len()` elements, four rows per
/// pass over `acc`: `acc += (r0 + r1) + (r2 + r3)` (pairwise, and a quarter of the loads
/// and stores of `acc` of adding row by row).
pub fn add_rows<T: Numeric>(acc: &mut [T], data: &[T]) {
    let n = acc.len();
    if n == 0 {
        return;
    }
    let mut quads = data.chunks_exact(4 * n);
    for quad in &mut quads {
        let (r01, r23) = quad.split_at(2 * n);
        let ((r0, r1), (r2, r3)) = (r01.split_at(n), r23.split_at(n));
        for ((((a, &x0), &x1), &x2), &x3) in acc.iter_mut().zip(r0).zip(r1).zip(r2).zip(r3) {
            *a += (x0 + x1) + (x2 + x3);
        }
    }
    for row in quads.remainder().chunks_exact(n) {
        add_assign(acc, row);
    }
}

/// Add every frame of `frames` (`[n, ..shape of acc]`) into `acc`: the sum over the tile's
/// first axis, e.g. a sig buffer's view of the tile. Contiguous data takes [`add_rows`];
/// `acc` may be a strided view (a tile covering part of the frame width).
pub fn add_frames<T: Numeric>(acc: &mut ArrayViewMutD<'_, T>, frames: &ArrayViewD<'_, T>) {
    if let (Some(a), Some(all)) = (acc.as_slice_mut(), frames.as_slice()) {
        add_rows(a, all);
        return;
    }
    for frame in frames.outer_iter() {
        if let (Some(a), Some(f)) = (acc.as_slice_mut(), frame.as_slice()) {
            add_assign(a, f);
            continue;
        }
        if acc.ndim() == 0 {
            Zip::from(&mut *acc).and(&frame).for_each(|a, &f| *a += f);
            continue;
        }
        let last = Axis(acc.ndim() - 1);
        Zip::from(acc.lanes_mut(last)).and(frame.lanes(last)).for_each(|mut a, f| {
            match (a.as_slice_mut(), f.as_slice()) {
                (Some(a), Some(f)) => add_assign(a, f),
                _ => Zip::from(a).and(f).for_each(|a, &f| *a += f),
            }
        });
    }
}

/// Frames (rows of `a`) per register block of [`dot_products`].
const ROWS: usize = 2;
/// Vectors (rows of `b`) per register block of [`dot_products`].
const VECTORS: usize = 4;
/// Elements per cache block of [`dot_products`].
const BLOCK: usize = 4096;

/// Many dot products at once, the core of virtual detectors (masks):
/// `out[i * m + j] += Σ_{p < len} a[i * a_stride + p] · b[j * b_stride + p]` for the
/// `n = out.len() / m` rows of `a` and the `m` rows of `b`.
///
/// Blocked so that it runs at the speed of the arithmetic, not of memory: two rows of
/// `a` and four of `b` at a time in eight SIMD accumulators (each step loads six vectors
/// for eight multiply-adds; three rows measured slower under Cranelift), over blocks of
/// 4096 elements that stay in cache while every group of `b` rows passes over them. Each element of `a` is read from
/// memory once. With `simd128` (how this repository builds plugins) the accumulators
/// are wasm SIMD registers; elsewhere plain Rust with the same blocking. Sums are per
/// lane, then across lanes: the result differs from a sequential sum in the last bits.
///
/// # Panics
/// If `a`, `b` are too short for the strides and lengths given, `m` is 0 while `out`
/// is not empty, or `len` exceeds a stride.
pub fn dot_products(a: &[f32], a_stride: usize, b: &[f32], b_stride: usize, m: usize, len: usize, out: &mut [f32]) {
    if out.is_empty() || len == 0 {
        return;
    }
    assert!(m > 0 && len <= a_stride && len <= b_stride, "dot_products: shapes");
    let n = out.len() / m;
    assert!(a.len() >= (n - 1) * a_stride + len && b.len() >= (m - 1) * b_stride + len, "dot_products: too short");
    for p0 in (0..len).step_by(BLOCK) {
        let block = BLOCK.min(len - p0);
        let mut i = 0;
        while i < n {
            let rows_here = ROWS.min(n - i);
            let rows: [&[f32]; ROWS] =
                std::array::from_fn(|r| if r < rows_here { &a[(i + r) * a_stride + p0..][..block] } else { &[] });
            let mut j = 0;
            while j < m {
                let count = VECTORS.min(m - j);
                let vectors: [&[f32]; VECTORS] =
                    std::array::from_fn(|c| if c < count { &b[(j + c) * b_stride + p0..][..block] } else { &[] });
                let out = &mut out[i * m + j..];
                match (rows_here, count) {
                    (2, 4) => dot_block::<2, 4>(&rows, &vectors, out, m),
                    (2, 3) => dot_block::<2, 3>(&rows, &vectors, out, m),
                    (2, 2) => dot_block::<2, 2>(&rows, &vectors, out, m),
                    (2, _) => dot_block::<2, 1>(&rows, &vectors, out, m),
                    (_, 4) => dot_block::<1, 4>(&rows, &vectors, out, m),
                    (_, 3) => dot_block::<1, 3>(&rows, &vectors, out, m),
                    (_, 2) => dot_block::<1, 2>(&rows, &vectors, out, m),
                    (_, _) => dot_block::<1, 1>(&rows, &vectors, out, m),
                }
                j += count;
            }
            i += rows_here;
        }
    }
}

/// `out[r * stride + c] += rows[r] · vectors[c]` for `r < R`, `c < C` (equal lengths).
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[inline(always)]
fn dot_block<const R: usize, const C: usize>(
    rows: &[&[f32]; ROWS],
    vectors: &[&[f32]; VECTORS],
    out: &mut [f32],
    stride: usize,
) {
    use core::arch::wasm32::*;
    let len = rows[0].len();
    assert!(rows[..R].iter().chain(&vectors[..C]).all(|r| r.len() == len) && out.len() > (R - 1) * stride + C - 1);
    let steps = len / 4;
    let mut acc = [[f32x4_splat(0.0); C]; R];
    let mut step = |p: usize| {
        // SAFETY: p + 4 <= len for every row and vector (asserted above, and p < steps * 4);
        // wasm loads need no alignment.
        let d: [v128; R] = std::array::from_fn(|r| unsafe { v128_load(rows[r].as_ptr().add(p).cast()) });
        for (c, vector) in vectors[..C].iter().enumerate() {
            // SAFETY: as above.
            let w = unsafe { v128_load(vector.as_ptr().add(p).cast()) };
            for (acc, &d) in acc.iter_mut().zip(&d) {
                acc[c] = f32x4_add(acc[c], f32x4_mul(d, w));
            }
        }
    };
    // Two steps per iteration: half the loop back-edges, each of which costs an epoch
    // check when the host interrupts plugins by epoch (its default).
    for s in (0..steps / 2 * 2).step_by(2) {
        step(s * 4);
        step(s * 4 + 4);
    }
    if steps % 2 == 1 {
        step((steps - 1) * 4);
    }
    for (r, (acc, row)) in acc.iter().zip(rows).enumerate() {
        for (c, (&v, vector)) in acc.iter().zip(vectors).enumerate() {
            let lanes = (f32x4_extract_lane::<0>(v) + f32x4_extract_lane::<2>(v))
                + (f32x4_extract_lane::<1>(v) + f32x4_extract_lane::<3>(v));
            let tail: f32 = row[steps * 4..].iter().zip(&vector[steps * 4..]).map(|(x, y)| x * y).sum();
            out[r * stride + c] += lanes + tail;
        }
    }
}

/// `out[r * stride + c] += rows[r] · vectors[c]` for `r < R`, `c < C` (equal lengths).
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
#[inline(always)]
fn dot_block<const R: usize, const C: usize>(
    rows: &[&[f32]; ROWS],
    vectors: &[&[f32]; VECTORS],
    out: &mut [f32],
    stride: usize,
) {
    for (r, row) in rows[..R].iter().enumerate() {
        for (c, vector) in vectors[..C].iter().enumerate() {
            out[r * stride + c] += dot(row, vector);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_match_plain_loops() {
        let x: Vec<f64> = (0..37).map(|i| f64::from(i) * 0.5).collect();
        let y: Vec<f64> = (0..37).map(|i| f64::from(i % 5)).collect();
        assert_eq!(sum(&x), x.iter().sum::<f64>());
        assert_eq!(dot(&x, &y), x.iter().zip(&y).map(|(a, b)| a * b).sum::<f64>());
        let mut acc = vec![1.0; 37];
        add_assign(&mut acc, &x);
        assert_eq!(acc, x.iter().map(|v| v + 1.0).collect::<Vec<_>>());
        // Nine rows of 5: two passes of four and one row left.
        let rows: Vec<f64> = (0..45).map(f64::from).collect();
        let mut acc = vec![0.5; 5];
        add_rows(&mut acc, &rows);
        let expected: Vec<f64> = (0..5).map(|i| 0.5 + (0..9).map(|r| f64::from(r * 5 + i)).sum::<f64>()).collect();
        assert_eq!(acc, expected);
    }

    #[test]
    fn dot_products_match_plain_loops() {
        // Every remainder of the register blocks; lengths ragged at the vector and the
        // cache block; strides wider than the length.
        for (n, m) in [(7, 5), (3, 4), (1, 1), (2, 16)] {
            let (len, a_stride, b_stride) = (BLOCK + 13, BLOCK + 20, BLOCK + 17);
            let a: Vec<f32> = (0..n * a_stride).map(|i| ((i * 31) % 1000) as f32).collect();
            let b: Vec<f32> = (0..m * b_stride).map(|i| ((i * 13) % 11) as f32 / 4.0 - 1.0).collect();
            let mut out = vec![1.0; n * m];
            dot_products(&a, a_stride, &b, b_stride, m, len, &mut out);
            for i in 0..n {
                for j in 0..m {
                    let terms = (0..len).map(|p| f64::from(a[i * a_stride + p]) * f64::from(b[j * b_stride + p]));
                    let expected = 1.0 + terms.clone().sum::<f64>();
                    let magnitude = 1.0 + terms.map(f64::abs).sum::<f64>();
                    let got = f64::from(out[i * m + j]);
                    assert!((got - expected).abs() <= 1e-6 * magnitude, "row {i}, vector {j}: {got} vs {expected}");
                }
            }
        }
    }

    #[test]
    fn add_frames_handles_strided_views() {
        let tile = ndarray::Array::from_shape_fn((3, 2, 3), |(n, y, x)| (n * 100 + y * 10 + x) as f64).into_dyn();
        let mut buffer = ndarray::Array::<f64, _>::zeros((4, 5)).into_dyn();
        {
            let mut view = buffer.slice_mut(ndarray::s![1..3, 2..5]).into_dyn();
            add_frames(&mut view, &tile.view());
        }
        assert_eq!(buffer[[1, 2]], 0.0 + 100.0 + 200.0);
        assert_eq!(buffer[[2, 4]], 12.0 + 112.0 + 212.0);
        assert_eq!(buffer[[0, 0]], 0.0);
        let mut full = ndarray::Array::<f64, _>::zeros((2, 3)).into_dyn();
        add_frames(&mut full.view_mut(), &tile.view());
        assert_eq!(full[[1, 2]], 12.0 + 112.0 + 212.0);
    }
}
