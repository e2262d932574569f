//! `max`: the element-wise maximum of all frames, NumPy's `data.max(axis=nav)`.
//!
//! Buffer `intensity`: kind sig, dtype = the dataset's native dtype,
//! `intensity[y, x] = max_n F_n[y, x]` over the frames of the ROI. It has no LiberTEM
//! counterpart as a UDF (LiberTEM's GUI computes the max frame with its own job); the
//! values are NumPy's: a NaN anywhere in a pixel's frames makes that pixel NaN, complex
//! values compare lexicographically (real part, then imaginary part), `bool` is `any`.
//!
//! The accumulators start at the dtype's lowest value (`-inf` for floats), which the
//! main side's instance exports as the initial merged buffer (`main_preprocess`): a merge
//! is then the element-wise maximum whatever order partitions arrive in, and a ROI that
//! leaves a partition empty merges nothing into the result.

use super::element::{cast_mut, tile_data, with_dtype};
use super::kernels::{CHUNK, SliceRuns, by_column_blocks};
use super::spec;
use super::spec::sig_buffer;
use crate::array::NdArray;
use crate::dtype::{DType, Element};
use crate::udf::{
    BufferDecl, BufferViewMut, CallError, DTypePreference, DatasetMeta, Description, InitContext, MergeContext,
    NamedBuffer, Params, PartitionRunner, RunPlan, Tile, Udf,
};
use num_complex::{Complex32, Complex64};

/// The element-wise maximum of all frames.
pub struct Max {
    description: Description,
}

impl Default for Max {
    fn default() -> Self {
        let mut description = spec::describe("max", "Element-wise maximum of all frames (NumPy's data.max(axis=nav))");
        description.input_dtype = DTypePreference::Native;
        description.custom_merge = true;
        description.main_preprocess = true;
        Max { description }
    }
}

impl Udf for Max {
    fn description(&self) -> &Description {
        &self.description
    }

    fn source(&self) -> &str {
        "builtin:max"
    }

    fn reads_in_place(&self) -> bool {
        true
    }

    fn plan(&self, _: &Params, _: &DatasetMeta) -> Result<RunPlan, CallError> {
        Ok(spec::plan_of(&self.description))
    }

    fn result_buffers(&self, _: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>, CallError> {
        Ok(vec![sig_buffer("intensity", dataset.input_dtype)])
    }

    fn start(&self, ctx: InitContext<'_>) -> Result<Box<dyn PartitionRunner + '_>, CallError> {
        let sig = &ctx.dataset.sig_shape;
        let runs = ctx.partition.map(|p| SliceRuns::for_scheme(sig, &p.tiling.slices)).unwrap_or_default();
        let mut intensity = NdArray::zeros(ctx.dataset.input_dtype, sig);
        fill_lowest(&mut intensity)?;
        Ok(Box::new(MaxPartition { intensity: Some(intensity), runs }))
    }

    fn merge(&self, _: MergeContext<'_>, dest: &mut [BufferViewMut<'_>], src: &[NamedBuffer]) -> Result<(), CallError> {
        let d =
            dest.iter_mut().find(|b| b.name == "intensity").ok_or_else(|| CallError::internal("merge: intensity"))?;
        let s = src.iter().find(|b| b.name == "intensity").ok_or_else(|| CallError::internal("merge: intensity"))?;
        if s.array.dtype() != d.dtype || s.array.bytes().len() != d.bytes.len() {
            return Err(CallError::internal(format!(
                "merge: 'intensity' is {} of {} bytes and {} of {} bytes",
                d.dtype,
                d.bytes.len(),
                s.array.dtype(),
                s.array.bytes().len()
            )));
        }
        if d.dtype == DType::Bool {
            for (a, &x) in d.bytes.iter_mut().zip(s.array.bytes()) {
                *a = (*a).max(x);
            }
            return Ok(());
        }
        with_dtype!(d.dtype, T => {
            let acc = cast_mut::<T>(d.bytes, "intensity")?;
            let from = s.array.as_slice::<T>().ok_or_else(|| CallError::internal("merge: dtype"))?;
            for (a, &x) in acc.iter_mut().zip(from) {
                *a = a.max_numpy(x);
            }
            Ok(())
        }, Err(CallError::internal("merge: dtype")))
    }
}

/// An element with NumPy's maximum and the lowest value it can take.
pub trait Maximum: Element {
    /// The identity of [`max_numpy`](Self::max_numpy): `MIN` for integers, `-inf` for floats.
    const LOWEST: Self;

    /// The larger of the two as NumPy's `maximum` says (NaN wins).
    fn max_numpy(self, other: Self) -> Self;
}

macro_rules! integer_maximum {
    ($($t:ty),*) => {$(
        impl Maximum for $t {
            const LOWEST: Self = <$t>::MIN;

            #[inline(always)]
            fn max_numpy(self, other: Self) -> Self {
                Ord::max(self, other)
            }
        }
    )*};
}

integer_maximum!(u8, u16, u32, u64, i8, i16, i32, i64);

macro_rules! float_maximum {
    ($($t:ty),*) => {$(
        impl Maximum for $t {
            const LOWEST: Self = <$t>::NEG_INFINITY;

            #[inline(always)]
            fn max_numpy(self, other: Self) -> Self {
                // A NaN in `self` stays (no comparison is true), one in `other` is taken.
                if self < other || other.is_nan() { other } else { self }
            }
        }
    )*};
}

float_maximum!(f32, f64);

macro_rules! complex_maximum {
    ($($t:ty => $f:ty),*) => {$(
        impl Maximum for $t {
            const LOWEST: Self = <$t>::new(<$f>::NEG_INFINITY, <$f>::NEG_INFINITY);

            #[inline(always)]
            fn max_numpy(self, other: Self) -> Self {
                if self.is_nan() {
                    return self;
                }
                let greater = other.is_nan() || other.re > self.re || (other.re == self.re && other.im > self.im);
                if greater { other } else { self }
            }
        }
    )*};
}

complex_maximum!(Complex32 => f32, Complex64 => f64);

/// Every element of `array` set to its dtype's lowest value (`false` for `bool`).
fn fill_lowest(array: &mut NdArray) -> Result<(), CallError> {
    if array.dtype() == DType::Bool {
        return Ok(());
    }
    with_dtype!(array.dtype(), T => {
        let values = array.as_mut_slice::<T>().ok_or_else(|| CallError::internal("accumulator dtype"))?;
        values.fill(T::LOWEST);
        Ok(())
    }, Err(CallError::internal("accumulator dtype")))
}

/// `acc[p] = max(acc[p], max_f tile[f, p])` over the frames of a tile covering `runs`, in
/// column blocks of [`CHUNK`] so that the accumulators stay in cache.
pub fn max_frames<T: Maximum>(acc: &mut [T], tile: &[T], runs: &SliceRuns) {
    by_column_blocks(acc, tile, runs, CHUNK, max_column_block::<T>);
}

fn max_column_block<T: Maximum>(block: &mut [T], tile: &[T], stride: usize, offset: usize) {
    let len = block.len();
    for frame in tile.chunks_exact(stride) {
        for (a, &x) in block.iter_mut().zip(&frame[offset..offset + len]) {
            *a = a.max_numpy(x);
        }
    }
}

struct MaxPartition {
    intensity: Option<NdArray>,
    runs: Vec<SliceRuns>,
}

impl PartitionRunner for MaxPartition {
    fn process(&mut self, tile: &Tile<'_>) -> Result<(), CallError> {
        let intensity = self.intensity.as_mut().ok_or_else(|| CallError::internal("process after export"))?;
        let runs = self.runs.get(tile.scheme_index).ok_or_else(|| CallError::internal("unknown signal slice"))?;
        if tile.dtype != intensity.dtype() {
            return Err(CallError::internal(format!(
                "a tile of {} for an accumulator of {}",
                tile.dtype,
                intensity.dtype()
            )));
        }
        if tile.dtype == DType::Bool {
            // `bool` is one byte, 0 or 1: its maximum is that of the bytes.
            max_frames(intensity.bytes_mut(), tile.data, runs);
            return Ok(());
        }
        with_dtype!(tile.dtype, T => {
            let acc = intensity.as_mut_slice::<T>().ok_or_else(|| CallError::internal("accumulator dtype"))?;
            max_frames(acc, tile_data::<T>(tile)?, runs);
            Ok(())
        }, Err(CallError::internal("tile dtype")))
    }

    fn export(&mut self) -> Result<Vec<NamedBuffer>, CallError> {
        let array = self.intensity.take().ok_or_else(|| CallError::internal("exported twice"))?;
        Ok(vec![NamedBuffer { name: "intensity".into(), array }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maximum_propagates_nan_like_numpy() {
        assert!(f32::NAN.max_numpy(1.0).is_nan());
        assert!(1.0f32.max_numpy(f32::NAN).is_nan());
        assert_eq!(f64::LOWEST.max_numpy(-3.0), -3.0);
        let c = |re, im| Complex32::new(re, im);
        assert_eq!(c(1.0, 5.0).max_numpy(c(2.0, -1.0)), c(2.0, -1.0));
        assert_eq!(c(2.0, 5.0).max_numpy(c(2.0, -1.0)), c(2.0, 5.0));
        assert!(c(1.0, f32::NAN).max_numpy(c(2.0, 0.0)).is_nan());
        assert_eq!(i16::LOWEST.max_numpy(-7), -7);
    }
}
