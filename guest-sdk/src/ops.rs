//! Buffer operations that work for every dtype, so that a plugin whose buffers follow the
//! input dtype needs no `match` over dtypes: fill, assign, accumulate frames with
//! [`Merge::Add`] / [`Merge::Min`] / [`Merge::Max`], per-frame sums, and merges by name.
//!
//! Values of different dtypes meet through [`Scalar`]: a value of the buffer's dtype
//! combines with one of the same dtype directly (`+` wraps for integers, as NumPy's
//! does); other dtypes are converted first, through `f64` (complex: real and imaginary
//! part), as NumPy's `same_kind` casting of `buffer += frame` would.

use crate::bindings::udf::plugin::types::{ArrayData, Dtype};
use crate::buffers::Buffers;
use crate::element::{Element, data_dtype, dtype_name};
use crate::error::{Result, UdfError};
use crate::tile::{Frame, Tile};
use ndarray::{ArrayViewD, ArrayViewMutD, Axis, IxDyn, Zip};
use num_complex::{Complex32, Complex64};

/// How two values combine: the merge of a buffer (by name, in a
/// [`Declaration`](crate::Declaration) or with [`Buffers::merge_from`]) and the
/// accumulation of frames into a buffer ([`Buffers::accumulate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merge {
    /// `a + b` (`bool`: or).
    Add,
    /// The smaller value; NaN wins, like `np.minimum` (`bool`: and). Real dtypes only.
    Min,
    /// The larger value; NaN wins, like `np.maximum` (`bool`: or). Real dtypes only.
    Max,
    /// `b`: the new value replaces the old one (LiberTEM's default merge of nav buffers).
    Assign,
}

impl Merge {
    /// Its NumPy-ish name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Merge::Add => "add",
            Merge::Min => "min",
            Merge::Max => "max",
            Merge::Assign => "assign",
        }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// An element type whose values convert to and from a pair of `f64` (real, imaginary)
/// and combine by a [`Merge`] rule: every [`Element`] type.
pub trait Scalar: Element + sealed::Sealed {
    /// The identity of `Merge::Min` (the largest value: `+inf`, `MAX`, `true`).
    const HIGHEST: Self;
    /// The identity of `Merge::Max` (the smallest value: `-inf`, `MIN`, `false`).
    const LOWEST: Self;
    /// `(real, imaginary)`; real types have imaginary part 0, `bool` is 0 or 1.
    fn to_parts(self) -> (f64, f64);
    /// From `(real, imaginary)`: real types take the real part (`as` conversion:
    /// saturating for integers), `bool` is `re != 0`.
    fn from_parts(re: f64, im: f64) -> Self;
    /// `self` combined with `other`.
    fn combine(self, other: Self, op: Merge) -> Self;
    /// `acc += Σ frames` when this is a fast kernel's type; `false` when not done.
    #[doc(hidden)]
    fn add_frames_fast(acc: &mut ArrayViewMutD<'_, Self>, frames: &ArrayViewD<'_, Self>) -> bool {
        let _ = (acc, frames);
        false
    }
}

/// `Scalar` for a real type: its identities, how `a + b` is done, and whether a NaN
/// can win `Min` / `Max` (`self != self` is false for integers).
macro_rules! real_scalar {
    ($highest:ident, $lowest:ident, |$a:ident, $b:ident| $add:expr; $($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Scalar for $t {
            const HIGHEST: Self = <$t>::$highest;
            const LOWEST: Self = <$t>::$lowest;
            fn to_parts(self) -> (f64, f64) {
                (self as f64, 0.0)
            }
            fn from_parts(re: f64, _: f64) -> Self {
                re as $t
            }
            #[allow(clippy::eq_op)]
            fn combine(self, other: Self, op: Merge) -> Self {
                let ($a, $b) = (self, other);
                match op {
                    Merge::Add => $add,
                    // NaN wins, as with np.minimum / np.maximum.
                    Merge::Min => if $a <= $b || $a != $a { $a } else { $b },
                    Merge::Max => if $a >= $b || $a != $a { $a } else { $b },
                    Merge::Assign => $b,
                }
            }
            fn add_frames_fast(acc: &mut ArrayViewMutD<'_, Self>, frames: &ArrayViewD<'_, Self>) -> bool {
                crate::simd::add_frames(acc, frames);
                true
            }
        }
    )*};
}

real_scalar!(MAX, MIN, |a, b| a.wrapping_add(b); u8, u16, u32, u64, i8, i16, i32, i64);
real_scalar!(INFINITY, NEG_INFINITY, |a, b| a + b; f32, f64);

macro_rules! complex_scalar {
    ($($t:ty => $f:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Scalar for $t {
            // Complex numbers have no order: Min and Max are refused before any value
            // is combined (see `check_op`); these only satisfy the trait.
            const HIGHEST: Self = <$t>::new(<$f>::INFINITY, 0.0);
            const LOWEST: Self = <$t>::new(<$f>::NEG_INFINITY, 0.0);
            fn to_parts(self) -> (f64, f64) {
                (self.re as f64, self.im as f64)
            }
            fn from_parts(re: f64, im: f64) -> Self {
                <$t>::new(re as $f, im as $f)
            }
            fn combine(self, other: Self, op: Merge) -> Self {
                match op {
                    Merge::Add => self + other,
                    Merge::Min | Merge::Max | Merge::Assign => other,
                }
            }
            fn add_frames_fast(acc: &mut ArrayViewMutD<'_, Self>, frames: &ArrayViewD<'_, Self>) -> bool {
                crate::simd::add_frames(acc, frames);
                true
            }
        }
    )*};
}

complex_scalar!(Complex32 => f32, Complex64 => f64);

impl sealed::Sealed for bool {}
impl Scalar for bool {
    const HIGHEST: Self = true;
    const LOWEST: Self = false;
    fn to_parts(self) -> (f64, f64) {
        (f64::from(u8::from(self)), 0.0)
    }
    fn from_parts(re: f64, _: f64) -> Self {
        re != 0.0
    }
    fn combine(self, other: Self, op: Merge) -> Self {
        match op {
            Merge::Add | Merge::Max => self | other,
            Merge::Min => self & other,
            Merge::Assign => other,
        }
    }
}

/// Run `$body` with `$T` bound to the element type of `$dtype`, for all 13 dtypes.
macro_rules! with_scalar_type {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            Dtype::Boolean => {
                type $T = bool;
                $body
            }
            other => $crate::with_numeric_type!(other, $T => $body, unreachable!("every non-bool dtype is numeric")),
        }
    };
}
pub(crate) use with_scalar_type;

/// What [`Buffers::accumulate`] combines into a buffer: the frames of a [`Tile`] (one
/// after the other), one [`Frame`], or a number (broadcast).
#[derive(Clone, Copy)]
pub struct Operand<'a>(Source<'a>);

#[derive(Clone, Copy)]
enum Source<'a> {
    /// `frames` runs of `frame_len` elements of `data`, from element `start`.
    Frames { data: &'a ArrayData, start: usize, frames: usize, frame_len: usize },
    /// One value for every element.
    Number(f64),
}

impl<'a> From<&Tile<'a>> for Operand<'a> {
    fn from(tile: &Tile<'a>) -> Self {
        Operand(Source::Frames { data: &tile.raw.data, start: 0, frames: tile.frames(), frame_len: tile.frame_len() })
    }
}

impl<'a> From<&Frame<'a>> for Operand<'a> {
    fn from(frame: &Frame<'a>) -> Self {
        let n = frame.tile.frame_len();
        Operand(Source::Frames { data: &frame.tile.raw.data, start: frame.index * n, frames: 1, frame_len: n })
    }
}

macro_rules! number_operand {
    ($($t:ty),*) => {$(
        impl From<$t> for Operand<'_> {
            fn from(value: $t) -> Self {
                Operand(Source::Number(value as f64))
            }
        }
    )*};
}

number_operand!(f64, f32, i32, i64, u32, u64);

/// `Merge::Min` and `Merge::Max` need ordered values.
fn check_op(name: &str, dtype: Dtype, op: Merge) -> Result<()> {
    if matches!(op, Merge::Min | Merge::Max) && matches!(dtype, Dtype::Complex64 | Dtype::Complex128) {
        return Err(UdfError::internal(format!(
            "buffer '{name}' is {}: complex values have no {}",
            dtype_name(dtype),
            op.name()
        )));
    }
    Ok(())
}

/// Elements `range` of `data` (whatever its dtype) as values of `D`.
pub(crate) fn converted<D: Scalar>(data: &ArrayData, range: std::ops::Range<usize>) -> Result<Vec<D>> {
    let dtype = data_dtype(data).ok_or_else(|| UdfError::internal("array data of raw bytes"))?;
    with_scalar_type!(dtype, S => {
        let values = S::slice(data).ok_or_else(|| UdfError::internal("array data does not hold its dtype"))?;
        Ok(values[range].iter().map(|&v| {
            let (re, im) = v.to_parts();
            D::from_parts(re, im)
        }).collect())
    })
}

/// `view = op(view, frame)` for every frame of `source`, in `D`.
fn accumulate_into<D: Scalar>(view: &mut ArrayViewMutD<'_, D>, source: Source<'_>, op: Merge) -> Result<()> {
    let (data, start, frames, frame_len) = match source {
        Source::Number(value) => {
            let value = D::from_parts(value, 0.0);
            view.map_inplace(|a| *a = a.combine(value, op));
            return Ok(());
        }
        Source::Frames { data, start, frames, frame_len } => (data, start, frames, frame_len),
    };
    if view.len() != frame_len {
        return Err(UdfError::internal(format!(
            "a frame of {frame_len} elements does not fit a buffer view of shape {:?}",
            view.shape()
        )));
    }
    let range = start..start + frames * frame_len;
    let owned;
    let values: &[D] = match D::slice(data) {
        Some(values) => &values[range],
        None => {
            owned = converted::<D>(data, range)?;
            &owned
        }
    };
    let mut shape = vec![frames];
    shape.extend_from_slice(view.shape());
    let stack = ArrayViewD::from_shape(IxDyn(&shape), values)?;
    if op == Merge::Add && D::add_frames_fast(view, &stack) {
        return Ok(());
    }
    for frame in stack.outer_iter() {
        Zip::from(&mut *view).and(&frame).for_each(|a, &b| *a = a.combine(b, op));
    }
    Ok(())
}

impl Buffers {
    /// Set every element of a buffer's current view to `value` (converted to the
    /// buffer's dtype): `results.fill("maxbuf", f64::NEG_INFINITY)`.
    pub fn fill(&mut self, name: &str, value: f64) -> Result<()> {
        let dtype = self.dtype(name)?;
        with_scalar_type!(dtype, D => {
            let value = D::from_parts(value, 0.0);
            self.view_mut::<D>(name)?.fill(value);
            Ok(())
        })
    }

    /// Set a buffer's current view from `values` in C order (converted to the buffer's
    /// dtype): `results.assign("coords", &tile.coordinates().concat())`.
    ///
    /// # Errors
    /// If the number of values is not the number of elements of the view.
    pub fn assign<T: Scalar>(&mut self, name: &str, values: &[T]) -> Result<()> {
        let dtype = self.dtype(name)?;
        with_scalar_type!(dtype, D => {
            let mut view = self.view_mut::<D>(name)?;
            if view.len() != values.len() {
                return Err(UdfError::internal(format!(
                    "{} values for buffer '{name}', whose view has shape {:?}",
                    values.len(),
                    view.shape()
                )));
            }
            for (a, &v) in view.iter_mut().zip(values) {
                let (re, im) = v.to_parts();
                *a = D::from_parts(re, im);
            }
            Ok(())
        })
    }

    /// Set one element of a buffer's current view (converted to its dtype):
    /// `results.set_at("pixelsum_nav_raw", &[frame.nav_index()], frame.sum()?)`.
    ///
    /// # Errors
    /// If `index` has the wrong number of axes or lies outside the view.
    pub fn set_at(&mut self, name: &str, index: &[u64], value: f64) -> Result<()> {
        let dtype = self.dtype(name)?;
        let at: Vec<usize> = index.iter().map(|&i| usize::try_from(i).unwrap_or(usize::MAX)).collect();
        with_scalar_type!(dtype, D => {
            let mut view = self.view_mut::<D>(name)?;
            let shape = view.shape().to_vec();
            let slot = view.get_mut(IxDyn(&at)).ok_or_else(|| {
                UdfError::internal(format!("index {index:?} is outside buffer '{name}' of shape {shape:?}"))
            })?;
            *slot = D::from_parts(value, 0.0);
            Ok(())
        })
    }

    /// Combine data into a buffer's current view, frame by frame: `view = op(view,
    /// frame)` for every frame of a tile (`results.accumulate("intensity", tile,
    /// Merge::Add)` sums the tile's frames into a sig buffer's part under the tile), one
    /// frame, or a number for every element (`results.accumulate("n", 1, Merge::Add)`).
    /// A frame's elements are converted to the buffer's dtype when they differ.
    ///
    /// # Errors
    /// If a frame has a different number of elements than the view, or `op` is `Min` or
    /// `Max` on a complex buffer.
    pub fn accumulate<'a>(&mut self, name: &str, source: impl Into<Operand<'a>>, op: Merge) -> Result<()> {
        let dtype = self.dtype(name)?;
        check_op(name, dtype, op)?;
        let source = source.into().0;
        with_scalar_type!(dtype, D => accumulate_into(&mut self.view_mut::<D>(name)?, source, op))
    }

    /// Add the sum of every frame of `tile` (its part of each frame) to a nav buffer's
    /// rows for the tile: LiberTEM's `self.results.intensity[:] += np.sum(tile,
    /// axis=(1, 2))`, for the tile and partition methods.
    ///
    /// # Errors
    /// If the view does not have one element per frame of the tile.
    pub fn add_frame_sums(&mut self, name: &str, tile: &Tile<'_>) -> Result<()> {
        let dtype = self.dtype(name)?;
        let offset = if self.unit == crate::buffers::Unit::Whole { tile.nav_offset() } else { 0 };
        let n = tile.frame_len();
        with_scalar_type!(dtype, D => {
            let mut view = self.view_mut::<D>(name)?;
            if view.len() < offset + tile.frames() || view.ndim() != 1 {
                return Err(UdfError::internal(format!(
                    "buffer '{name}' (view {:?}) has no row for each of the {} frames of the tile",
                    view.shape(),
                    tile.frames()
                )));
            }
            let mut sums = Vec::with_capacity(tile.frames());
            for f in 0..tile.frames() {
                let range = f * n..(f + 1) * n;
                let zero = D::from_parts(0.0, 0.0);
                sums.push(match D::slice(&tile.raw.data) {
                    Some(values) => values[range].iter().fold(zero, |a, &b| a.combine(b, Merge::Add)),
                    None => {
                        let (re, im) = converted::<Complex64>(&tile.raw.data, range)?
                            .iter()
                            .fold((0.0, 0.0), |(r, i), c| (r + c.re, i + c.im));
                        D::from_parts(re, im)
                    }
                });
            }
            for (a, s) in view.slice_axis_mut(Axis(0), (offset..offset + tile.frames()).into()).iter_mut().zip(sums) {
                *a = a.combine(s, Merge::Add);
            }
            Ok(())
        })
    }

    /// Merge buffer `name` of `src` into this one, whole: `dest.merge_from(src,
    /// "maxbuf", Merge::Max)` is LiberTEM's `dest.maxbuf[:] = np.maximum(dest.maxbuf,
    /// src.maxbuf)`.
    ///
    /// # Errors
    /// If the buffer is missing from either side or the shapes or dtypes differ.
    pub fn merge_from(&mut self, src: &Buffers, name: &str, op: Merge) -> Result<()> {
        let dtype = self.dtype(name)?;
        check_op(name, dtype, op)?;
        if src.dtype(name)? != dtype {
            return Err(UdfError::internal(format!(
                "buffer '{name}' is {} in dest and {} in src",
                dtype_name(dtype),
                dtype_name(src.dtype(name)?)
            )));
        }
        with_scalar_type!(dtype, D => {
            let from = src.whole::<D>(name)?;
            let mut into = self.whole_mut::<D>(name)?;
            if from.shape() != into.shape() {
                return Err(UdfError::internal(format!(
                    "buffer '{name}' has shape {:?} in dest and {:?} in src",
                    into.shape(),
                    from.shape()
                )));
            }
            Zip::from(&mut into).and(&from).for_each(|a, &b| *a = a.combine(b, op));
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_combine_like_numpy_with_nan_winning_min_and_max() {
        assert_eq!(1.5f32.combine(2.0, Merge::Add), 3.5);
        assert_eq!(1.5f64.combine(-2.0, Merge::Max), 1.5);
        assert_eq!(1.5f64.combine(-2.0, Merge::Min), -2.0);
        assert!(f64::NAN.combine(1.0, Merge::Max).is_nan());
        assert!(1.0f32.combine(f32::NAN, Merge::Max).is_nan());
        assert!(1.0f32.combine(f32::NAN, Merge::Min).is_nan());
        assert_eq!(f32::LOWEST.combine(-7.0, Merge::Max), -7.0);
        assert_eq!(f64::HIGHEST.combine(7.0, Merge::Min), 7.0);
        assert_eq!(3.0f32.combine(9.0, Merge::Assign), 9.0);
    }

    #[test]
    fn integers_wrap_like_numpy_and_convert_by_saturating() {
        assert_eq!(250u8.combine(10, Merge::Add), 4);
        assert_eq!(i16::LOWEST.combine(-3, Merge::Max), -3);
        assert_eq!(u16::from_parts(70000.0, 0.0), u16::MAX);
        assert_eq!(i32::from_parts(-2.7, 0.0), -2);
        assert!(!true.combine(false, Merge::Min));
        assert!(false.combine(true, Merge::Add));
        let c = Complex32::new(1.0, 2.0).combine(Complex32::new(0.5, -1.0), Merge::Add);
        assert_eq!(c, Complex32::new(1.5, 1.0));
        assert_eq!(Complex64::from_parts(3.0, 4.0).to_parts(), (3.0, 4.0));
    }

    #[test]
    fn conversion_goes_through_real_and_imaginary_parts() {
        let data = ArrayData::Uint16(vec![1, 2, 65535]);
        assert_eq!(converted::<f32>(&data, 1..3).unwrap(), vec![2.0, 65535.0]);
        let data = ArrayData::Complex64(vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(converted::<f64>(&data, 0..2).unwrap(), vec![1.0, 3.0]);
        assert_eq!(converted::<Complex64>(&data, 1..2).unwrap(), vec![Complex64::new(3.0, 4.0)]);
        assert!(check_op("z", Dtype::Complex64, Merge::Max).is_err());
        assert!(check_op("z", Dtype::Complex64, Merge::Add).is_ok());
    }

    #[test]
    fn accumulating_frames_sums_or_takes_the_extreme_in_the_buffer_dtype() {
        let data = ArrayData::Float32(vec![1.0, -2.0, 3.0, 4.0, 5.0, -6.0]);
        let source = Source::Frames { data: &data, start: 0, frames: 3, frame_len: 2 };
        let mut acc = ndarray::ArrayD::<f64>::zeros(IxDyn(&[2]));
        accumulate_into(&mut acc.view_mut(), source, Merge::Add).unwrap();
        assert_eq!(acc.as_slice().unwrap(), &[9.0, -4.0]);
        let mut max = ndarray::ArrayD::<f32>::from_elem(IxDyn(&[2]), f32::LOWEST);
        accumulate_into(&mut max.view_mut(), source, Merge::Max).unwrap();
        assert_eq!(max.as_slice().unwrap(), &[5.0, 4.0]);
        let mut count = ndarray::ArrayD::<u64>::zeros(IxDyn(&[1]));
        accumulate_into(&mut count.view_mut(), Source::Number(1.0), Merge::Add).unwrap();
        accumulate_into(&mut count.view_mut(), Source::Number(1.0), Merge::Add).unwrap();
        assert_eq!(count[[0]], 2);
        let mut wrong = ndarray::ArrayD::<f32>::zeros(IxDyn(&[3]));
        let message = accumulate_into(&mut wrong.view_mut(), source, Merge::Add).unwrap_err().message;
        assert!(message.contains("frame of 2 elements") && message.contains("[3]"), "{message}");
    }
}
