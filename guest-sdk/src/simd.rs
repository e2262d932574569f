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

/// Calls `dot_block::<R, C>` for the run-time `(rows, width)` among the listed sizes.
macro_rules! block_for {
    ($rows:expr, $width:expr, [$($r:literal),*], $cs:tt, $args:tt) => {
        match $rows {
            $($r => block_for!(@width $r, $width, $cs, $args),)*
            _ => unreachable!("register block rows"),
        }
    };
    (@width $r:literal, $width:expr, [$($c:literal),*], $args:tt) => {
        match $width {
            $($c => dot_block::<_, $r, $c> $args,)*
            _ => unreachable!("register block width"),
        }
    };
}

/// Rows of `a` per register block of [`PackedVectors::dot_products`] (the `block_for!`
/// call lists the row counts up to it). Three rows need 17 `xmm` registers on x86 and
/// spill; two do not.
const ROWS: usize = 2;
/// Vectors per group of a [`PackedVectors`] (the width of the register block).
const VECTORS: usize = 4;
/// Elements per cache block of [`PackedVectors::dot_products`].
const BLOCK: usize = 4096;

/// Many dot products at once, the core of virtual detectors (masks):
/// `out[i * m + j] += Σ_{p < len} a[i * a_stride + p] · b[j * b_stride + p]` for the
/// `n = out.len() / m` rows of `a` and the `m` rows of `b`.
///
/// Packs `b` on every call ([`PackedVectors::new`]); when the same `b` serves many
/// calls (masks over every tile), pack it once and call [`PackedVectors::dot_products`].
///
/// # Panics
/// If `a`, `b` are too short for the strides and lengths given, `m` is 0 while `out`
/// is not empty, or `len` exceeds a stride.
pub fn dot_products(a: &[f32], a_stride: usize, b: &[f32], b_stride: usize, m: usize, len: usize, out: &mut [f32]) {
    if out.is_empty() || len == 0 {
        return;
    }
    assert!(m > 0, "dot_products: no vectors");
    PackedVectors::new(b, b_stride, m, len).dot_products(a, a_stride, out);
}

/// Elements [`PackedVectors::dot_products`] takes rows of: float32, and the unsigned
/// integers detectors write, converted to float32 (exactly) four at a time as they are
/// read, so that a plugin can take a run's native integer tiles and skip the host's
/// conversion and half of the copy into its memory.
pub trait RowElement: Copy + Into<f32> + sealed::Sealed {
    /// Four consecutive elements from `at`, as float32 lanes.
    ///
    /// # Safety
    /// `at .. at + 4` must be readable.
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    unsafe fn load4(at: *const Self) -> core::arch::wasm32::v128;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for u16 {}
    impl Sealed for u8 {}
}

impl RowElement for f32 {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    #[inline(always)]
    unsafe fn load4(at: *const Self) -> core::arch::wasm32::v128 {
        // SAFETY: the caller's; wasm loads need no alignment.
        unsafe { core::arch::wasm32::v128_load(at.cast()) }
    }
}

impl RowElement for u16 {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    #[inline(always)]
    unsafe fn load4(at: *const Self) -> core::arch::wasm32::v128 {
        use core::arch::wasm32::*;
        // SAFETY: the caller's (8 bytes); wasm loads need no alignment.
        let raw = unsafe { v128_load64_zero(at.cast()) };
        // Zero-extended, so the signed conversion (one x86 instruction; the unsigned one
        // is a sequence) is exact.
        f32x4_convert_i32x4(u32x4_extend_low_u16x8(raw))
    }
}

impl RowElement for u8 {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    #[inline(always)]
    unsafe fn load4(at: *const Self) -> core::arch::wasm32::v128 {
        use core::arch::wasm32::*;
        // SAFETY: the caller's (4 bytes); wasm loads need no alignment.
        let raw = unsafe { v128_load32_zero(at.cast()) };
        f32x4_convert_i32x4(u32x4_extend_low_u16x8(u16x8_extend_low_u8x16(raw)))
    }
}

/// Vectors of one length (masks over a run of pixels, say) laid out for
/// [`PackedVectors::dot_products`]: in groups of four, with elements `4s .. 4s + 4` of
/// the group's vectors side by side, so that the kernel reads a group as one stream.
/// Packing costs one pass over the vectors; do it once and use it for every tile.
#[derive(Debug, Clone, PartialEq)]
pub struct PackedVectors {
    count: usize,
    len: usize,
    /// Group `g` (vectors `4g .. 4g + width`): elements `4s .. 4s + 4` of its vector `c`
    /// at `4g * steps + s * width + c`, `steps = len / 4`.
    body: Vec<[f32; 4]>,
    /// The last `len % 4` elements of every vector, one row per vector.
    tail: Vec<f32>,
}

impl PackedVectors {
    /// Pack the `count` vectors `b[j * stride .. j * stride + len]`.
    ///
    /// # Panics
    /// If `len` exceeds `stride` or `b` is too short.
    pub fn new(b: &[f32], stride: usize, count: usize, len: usize) -> Self {
        assert!(
            count == 0 || (len <= stride && b.len() >= (count - 1) * stride + len),
            "PackedVectors: {count} vectors of {len} elements {stride} apart need more than {} values",
            b.len()
        );
        let steps = len / 4;
        let mut body = Vec::with_capacity(count * steps);
        for g0 in (0..count).step_by(VECTORS) {
            let width = VECTORS.min(count - g0);
            for s in 0..steps {
                for c in 0..width {
                    let x = &b[(g0 + c) * stride + 4 * s..][..4];
                    body.push([x[0], x[1], x[2], x[3]]);
                }
            }
        }
        let rest = len - 4 * steps;
        let tail = (0..count).flat_map(|j| b[j * stride + 4 * steps..][..rest].iter().copied()).collect();
        PackedVectors { count, len, body, tail }
    }

    /// Number of vectors.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Length of every vector.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the vectors have no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `out[i * count + j] += Σ_{p < len} a[i * a_stride + p] · vector_j[p]` for the
    /// `out.len() / count` rows of `a`.
    ///
    /// Blocked so that it runs at the speed of the arithmetic, not of memory: two rows of
    /// `a` and a group of four vectors at a time in eight SIMD accumulators, over blocks
    /// of 4096 elements whose rows stay in cache while every group passes over them; each
    /// element of `a` is read from memory once. With `simd128` (how this repository
    /// builds plugins) the accumulators are wasm SIMD registers; elsewhere plain Rust
    /// with the same blocking. Sums are per lane, then across lanes: the result differs
    /// from a sequential sum in the last bits.
    ///
    /// # Panics
    /// If `out.len()` is not a multiple of the count, `len` exceeds `a_stride`, or `a` is
    /// too short.
    pub fn dot_products<T: RowElement>(&self, a: &[T], a_stride: usize, out: &mut [f32]) {
        let (count, len) = (self.count, self.len);
        if out.is_empty() || len == 0 {
            return;
        }
        assert!(
            count > 0 && out.len().is_multiple_of(count),
            "dot_products: {} results for {count} vectors",
            out.len()
        );
        let n = out.len() / count;
        assert!(
            len <= a_stride && a.len() >= (n - 1) * a_stride + len,
            "dot_products: {n} rows of {len} elements {a_stride} apart need more than {} values",
            a.len()
        );
        let steps = len / 4;
        for s0 in (0..steps).step_by(BLOCK / 4) {
            let block = (BLOCK / 4).min(steps - s0);
            let mut i = 0;
            while i < n {
                let r = ROWS.min(n - i);
                let rows: [&[T]; ROWS] =
                    std::array::from_fn(|k| if k < r { &a[(i + k) * a_stride + 4 * s0..][..4 * block] } else { &[] });
                for g0 in (0..count).step_by(VECTORS) {
                    let width = VECTORS.min(count - g0);
                    let group = &self.body[g0 * steps + s0 * width..][..block * width];
                    let out = &mut out[i * count + g0..];
                    block_for!(r, width, [1, 2], [1, 2, 3, 4], (&rows, group, out, count));
                }
                i += r;
            }
        }
        let rest = len - 4 * steps;
        if rest > 0 {
            for (i, out) in out.chunks_exact_mut(count).enumerate() {
                let x = &a[i * a_stride + 4 * steps..][..rest];
                for (o, y) in out.iter_mut().zip(self.tail.chunks_exact(rest)) {
                    *o += x.iter().zip(y).map(|(&x, y)| Into::<f32>::into(x) * y).sum::<f32>();
                }
            }
        }
    }
}

/// `out[r * stride + c] += rows[r] · vector c of group` for `r < R`, `c < C`, where
/// `group` holds the group's `C` vectors interleaved by four elements.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[inline(always)]
fn dot_block<T: RowElement, const R: usize, const C: usize>(
    rows: &[&[T]; ROWS],
    group: &[[f32; 4]],
    out: &mut [f32],
    stride: usize,
) {
    use core::arch::wasm32::*;
    let steps = group.len() / C;
    assert!(rows[..R].iter().all(|r| r.len() == 4 * steps) && group.len() == steps * C);
    assert!(out.len() > (R - 1) * stride + C - 1);
    let mut acc = [[f32x4_splat(0.0); C]; R];
    let row_at: [*const T; R] = std::array::from_fn(|r| rows[r].as_ptr());
    let group_at: *const v128 = group.as_ptr().cast();
    let mut step = |s: usize| {
        // SAFETY: 4 * s + 4 <= 4 * steps, the length of every row, and s * C + c <
        // group.len() (asserted above); wasm loads need no alignment.
        let d: [v128; R] = std::array::from_fn(|r| unsafe { T::load4(row_at[r].add(4 * s)) });
        for c in 0..C {
            // SAFETY: as above.
            let w = unsafe { v128_load(group_at.add(s * C + c)) };
            for (acc, &d) in acc.iter_mut().zip(&d) {
                acc[c] = madd(d, w, acc[c]);
            }
        }
    };
    // Four steps per loop iteration, each behind its own exit test: with epoch
    // interruption (the host's default) every loop back-edge may call into the host, and
    // Cranelift spills the accumulators around it, so fewer back-edges are cheaper; the
    // exit tests keep each step in its own block, so that LLVM does not hoist the next
    // step's loads above this one's arithmetic (more live vectors than x86 has
    // registers). Measured against 3 x 4 blocks and plain 2 x unrolling: docs/benchmarks.md.
    let mut s = 0;
    while s < steps {
        step(s);
        if s + 1 == steps {
            break;
        }
        step(s + 1);
        if s + 2 == steps {
            break;
        }
        step(s + 2);
        if s + 3 == steps {
            break;
        }
        step(s + 3);
        s += 4;
    }
    for (r, acc) in acc.iter().enumerate() {
        for (c, &v) in acc.iter().enumerate() {
            out[r * stride + c] += (f32x4_extract_lane::<0>(v) + f32x4_extract_lane::<2>(v))
                + (f32x4_extract_lane::<1>(v) + f32x4_extract_lane::<3>(v));
        }
    }
}

/// `out[r * stride + c] += rows[r] · vector c of group` (portable twin of the wasm SIMD
/// kernel, with the same per-lane sums).
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
#[inline(always)]
fn dot_block<T: RowElement, const R: usize, const C: usize>(
    rows: &[&[T]; ROWS],
    group: &[[f32; 4]],
    out: &mut [f32],
    stride: usize,
) {
    let mut acc = [[[0.0f32; 4]; C]; R];
    for (s, w) in group.chunks_exact(C).enumerate() {
        for (c, w) in w.iter().enumerate() {
            for r in 0..R {
                for lane in 0..4 {
                    acc[r][c][lane] += rows[r][4 * s + lane].into() * w[lane];
                }
            }
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        for (c, v) in acc.iter().enumerate() {
            out[r * stride + c] += (v[0] + v[2]) + (v[1] + v[3]);
        }
    }
}

/// `c + a * b` per lane: a multiply and an add. (`f32x4.relaxed_madd` would fuse them,
/// but Cranelift's x86 lowering of FMA overwrites a multiplicand, costing a register copy
/// per product and spilling accumulators: measured slower.)
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[inline(always)]
fn madd(
    a: core::arch::wasm32::v128,
    b: core::arch::wasm32::v128,
    c: core::arch::wasm32::v128,
) -> core::arch::wasm32::v128 {
    use core::arch::wasm32::{f32x4_add, f32x4_mul};
    f32x4_add(c, f32x4_mul(a, b))
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
    fn integer_rows_give_the_results_of_their_float32_values() {
        let (n, m, len, stride) = (5, 6, BLOCK + 7, BLOCK + 9);
        let wide: Vec<u16> = (0..n * stride).map(|i| ((i * 7919) % 65536) as u16).collect();
        let narrow: Vec<u8> = (0..n * stride).map(|i| ((i * 31) % 256) as u8).collect();
        let b: Vec<f32> = (0..m * len).map(|i| ((i * 13) % 11) as f32 / 8.0 - 0.5).collect();
        let packed = PackedVectors::new(&b, len, m, len);
        let check = |ints: &mut dyn FnMut(&mut [f32]), floats: &[f32]| {
            let (mut got, mut expected) = (vec![0.25; n * m], vec![0.25; n * m]);
            ints(&mut got);
            packed.dot_products(floats, stride, &mut expected);
            assert_eq!(got, expected);
        };
        let floats: Vec<f32> = wide.iter().map(|&x| f32::from(x)).collect();
        check(&mut |out| packed.dot_products(&wide, stride, out), &floats);
        let floats: Vec<f32> = narrow.iter().map(|&x| f32::from(x)).collect();
        check(&mut |out| packed.dot_products(&narrow, stride, out), &floats);
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
