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

/// Add every frame of `frames` (`[n, ..shape of acc]`) into `acc`: the sum over the tile's
/// first axis, e.g. a sig buffer's view of the tile. Contiguous rows take the vectorised
/// path; `acc` may be a strided view (a tile covering part of the frame width).
pub fn add_frames<T: Numeric>(acc: &mut ArrayViewMutD<'_, T>, frames: &ArrayViewD<'_, T>) {
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
