//! The element types built-ins compute with: [`Sample`] (add and sum like NumPy, fast
//! where it matters) and [`Real`] for float-only kernels. The dispatch from a run-time
//! [`DType`](crate::dtype::DType) to a monomorphised kernel is the `with_*!` family of
//! [`crate::dtype`], re-exported here.

use crate::dtype::{CastFrom, Element};
use crate::udf::{CallError, Tile};
use num_complex::{Complex32, Complex64};

/// A numeric element: every dtype but `bool`.
pub trait Sample: Element + Default + PartialEq {
    /// `self + other`, wrapping for integers (NumPy's behaviour).
    fn add(self, other: Self) -> Self;

    /// The sum of `values`, each converted to `Self` as an `as` cast (so that a tile of
    /// stored integers sums like its converted copy would). Floats are summed in several
    /// lanes and blocks of `f64`, more accurate than a running `f32` sum (NumPy sums
    /// pairwise) and vectorised.
    fn sum_of<S: Copy>(values: &[S]) -> Self
    where
        Self: CastFrom<S>,
    {
        values.iter().fold(Self::default(), |acc, &v| acc.add(Self::cast_from(v)))
    }
}

macro_rules! integer_samples {
    ($($t:ty),*) => {$(
        impl Sample for $t {
            #[inline(always)]
            fn add(self, other: Self) -> Self {
                self.numpy_add(other)
            }
        }
    )*};
}

integer_samples!(u8, u16, u32, u64, i8, i16, i32, i64);

/// Lanes of the float sums: 16 independent accumulators keep the adder pipelines full.
const LANES: usize = 16;
/// Elements summed in lanes of `T` before the block's total goes into an `f64`.
const BLOCK: usize = 1024;

/// The sum of `values` converted to the float `T`: blocks of [`BLOCK`] elements summed in
/// [`LANES`] lanes of `T`, the block totals in `f64`.
#[inline(always)]
fn lane_sum<S: Copy, T: Copy + Default + std::ops::Add<Output = T> + CastFrom<S> + Into<f64>>(values: &[S]) -> f64 {
    let mut total = 0f64;
    for block in values.chunks(BLOCK) {
        let mut lanes = [T::default(); LANES];
        let mut groups = block.chunks_exact(LANES);
        for group in &mut groups {
            for (lane, &v) in lanes.iter_mut().zip(group) {
                *lane = *lane + T::cast_from(v);
            }
        }
        let rest = groups.remainder().iter().map(|&v| T::cast_from(v));
        total += lanes.into_iter().chain(rest).map(Into::into).sum::<f64>();
    }
    total
}

impl Sample for f32 {
    #[inline(always)]
    fn add(self, other: Self) -> Self {
        self + other
    }

    fn sum_of<S: Copy>(values: &[S]) -> f32
    where
        f32: CastFrom<S>,
    {
        lane_sum::<S, f32>(values) as f32
    }
}

impl Sample for f64 {
    #[inline(always)]
    fn add(self, other: Self) -> Self {
        self + other
    }

    fn sum_of<S: Copy>(values: &[S]) -> f64
    where
        f64: CastFrom<S>,
    {
        lane_sum::<S, f64>(values)
    }
}

impl Sample for Complex32 {
    #[inline(always)]
    fn add(self, other: Self) -> Self {
        self + other
    }

    fn sum_of<S: Copy>(values: &[S]) -> Complex32
    where
        Complex32: CastFrom<S>,
    {
        let (mut re, mut im) = (0f64, 0f64);
        for &v in values {
            let v = Complex32::cast_from(v);
            re += f64::from(v.re);
            im += f64::from(v.im);
        }
        Complex32::new(re as f32, im as f32)
    }
}

impl Sample for Complex64 {
    #[inline(always)]
    fn add(self, other: Self) -> Self {
        self + other
    }
}

/// A real float element, for kernels defined on real data only.
pub trait Real: Sample + Into<f64> + PartialOrd {
    /// `v` rounded to this type.
    fn from_f64(v: f64) -> Self;
}

impl Real for f32 {
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}

impl Real for f64 {
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v
    }
}

/// The element types of [`FUSED_STORED`](crate::udf::FUSED_STORED): stored integers a
/// built-in that converts on read takes in tiles, exactly representable in `f64`. Kernels
/// implement their per-element traits once for all of them (`impl<T: FusedInt> ...`);
/// `with_fused_stored!` dispatches to exactly these types.
pub trait FusedInt: Element + Into<f64> + Send + Sync {
    /// The value as `f32`, as an `as` cast (what the executor's conversion gives).
    fn to_f32(self) -> f32;
}

macro_rules! fused_ints {
    ($($t:ty),*) => {$(
        impl FusedInt for $t {
            #[inline(always)]
            fn to_f32(self) -> f32 {
                self as f32
            }
        }
    )*};
}

fused_ints!(u8, u16, u32, i8, i16, i32);

pub use crate::{with_converting, with_dtype, with_fused_stored, with_inexact, with_real};

/// A tile in a dtype that is neither the input dtype nor one a converting built-in
/// accepts: the executor broke its promise.
pub(crate) fn unconvertible(tile: crate::dtype::DType, input: crate::dtype::DType) -> CallError {
    CallError::internal(format!("a tile of {tile} cannot be read into the input dtype {input}"))
}

/// The tile's elements as `T`.
///
/// # Errors
/// An internal error if `T` is not the tile's dtype or the bytes are misaligned (the
/// executor guarantees neither happens).
pub fn tile_data<'a, T: Element>(tile: &Tile<'a>) -> Result<&'a [T], CallError> {
    if T::DTYPE != tile.dtype {
        return Err(CallError::internal(format!("tile is {}, expected {}", tile.dtype, T::DTYPE)));
    }
    bytemuck::try_cast_slice(tile.data).map_err(|e| {
        CallError::internal(format!("tile of {} bytes cannot be read as {}: {e}", tile.data.len(), T::DTYPE))
    })
}

/// Bytes viewed as `T` (merge destinations, exported buffers).
///
/// # Errors
/// An internal error naming `what` if the bytes are misaligned or of the wrong length.
pub fn cast_mut<'a, T: Element>(bytes: &'a mut [u8], what: &str) -> Result<&'a mut [T], CallError> {
    let len = bytes.len();
    bytemuck::try_cast_slice_mut(bytes).map_err(|e| {
        CallError::internal(format!("buffer '{what}' ({len} bytes) cannot be viewed as {}: {e}", T::DTYPE))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_sums_are_accurate() {
        let values: Vec<f32> = (0..100_003).map(|i| 0.1 + (i % 7) as f32 * 0.01).collect();
        let exact: f64 = values.iter().map(|&v| f64::from(v)).sum();
        assert!((f64::from(f32::sum_of(&values)) - exact).abs() <= 1e-6 * exact);
        let values: Vec<f64> = values.iter().map(|&v| f64::from(v)).collect();
        assert!((f64::sum_of(&values) - exact).abs() <= 1e-12 * exact);
    }

    #[test]
    fn sums_of_stored_integers_equal_sums_of_their_converted_copies() {
        let values: Vec<u16> = (0..5000u32).map(|i| (i * 7919 % 65536) as u16).collect();
        let as_f32: Vec<f32> = values.iter().map(|&v| f32::from(v)).collect();
        assert_eq!(f32::sum_of(&values).to_bits(), f32::sum_of(&as_f32).to_bits());
        let as_f64: Vec<f64> = values.iter().map(|&v| f64::from(v)).collect();
        assert_eq!(f64::sum_of(&values).to_bits(), f64::sum_of(&as_f64).to_bits());
        let exact: u64 = values.iter().map(|&v| u64::from(v)).sum();
        assert_eq!(f64::sum_of(&values), exact as f64);
    }

    #[test]
    fn the_fused_dispatch_covers_every_stored_dtype_the_executor_fuses() {
        // `with_fused_stored!` must accept exactly `FUSED_STORED`, or a converting built-in
        // would get tiles it cannot read.
        for dtype in crate::dtype::DType::ALL {
            let dispatched = with_fused_stored!(dtype, S => S::DTYPE == dtype, false);
            assert_eq!(dispatched, crate::udf::FUSED_STORED.contains(&dtype), "{dtype}");
        }
    }

    #[test]
    fn integer_sums_wrap_like_numpy() {
        assert_eq!(u8::sum_of(&[200u8, 100]), 44);
        assert_eq!(i16::sum_of(&[i16::MAX, 1]), i16::MIN);
    }
}
