//! Comparing result arrays: tolerances per dtype, differences as evidence.

use super::Evidence;
use crate::array::NdArray;
use crate::dtype::{DType, Kind};
use crate::exec::{ResultBuffer, UdfResults};
use serde::Serialize;

/// How close float results must be: `|actual - expected| <= atol + rtol * |expected|`
/// (NumPy's `allclose`), with `rtol` by precision. Integer and bool results must be
/// equal; NaN equals NaN, infinities must match.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Tolerance {
    /// Relative tolerance for float32 and complex64 results.
    pub rtol32: f64,
    /// Relative tolerance for float64 and complex128 results.
    pub rtol64: f64,
    /// Absolute tolerance for all float results.
    pub atol: f64,
}

impl Default for Tolerance {
    fn default() -> Self {
        Tolerance { rtol32: 1e-5, rtol64: 1e-9, atol: 1e-8 }
    }
}

impl Tolerance {
    /// `(rtol, atol)` for results of `dtype`; `None` means exact equality.
    pub fn for_dtype(&self, dtype: DType) -> Option<(f64, f64)> {
        match dtype {
            DType::F32 | DType::C64 => Some((self.rtol32, self.atol)),
            DType::F64 | DType::C128 => Some((self.rtol64, self.atol)),
            _ => None,
        }
    }
}

/// How two arrays differ.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Diff {
    /// Within tolerance (or bit-identical, for exact comparisons).
    pub equal: bool,
    /// Largest `|actual - expected|` over elements where both are finite.
    pub max_abs: f64,
    /// Largest `|actual - expected| / |expected|` over elements where both are finite.
    pub max_rel: f64,
    /// Elements out of tolerance.
    pub mismatches: usize,
    /// The first element out of tolerance: index, expected, actual.
    pub first: Option<(Vec<usize>, String, String)>,
    /// Why the arrays are not comparable (dtype or shape), if so.
    pub note: Option<String>,
}

impl Diff {
    fn incomparable(note: String) -> Diff {
        Diff { equal: false, max_abs: f64::NAN, max_rel: f64::NAN, mismatches: 0, first: None, note: Some(note) }
    }
}

/// The elements as `f64` (complex: real and imaginary part, interleaved).
fn values(array: &NdArray) -> Vec<f64> {
    match array.dtype() {
        DType::C64 => bytemuck::cast_slice::<u8, f32>(array.bytes()).iter().map(|&x| f64::from(x)).collect(),
        DType::C128 => bytemuck::cast_slice::<u8, f64>(array.bytes()).to_vec(),
        _ => crate::array::real_values(array).unwrap_or_default(),
    }
}

use crate::array::unravel;

/// Compare `actual` with `expected` within `tol` (`None`: exact, integers compared as
/// values; 64-bit integers beyond 2^53 by their bits).
pub(crate) fn compare(expected: &NdArray, actual: &NdArray, tol: Option<(f64, f64)>) -> Diff {
    if expected.dtype() != actual.dtype() {
        return Diff::incomparable(format!("dtype {} instead of {}", actual.dtype(), expected.dtype()));
    }
    if expected.shape() != actual.shape() {
        return Diff::incomparable(format!("shape {:?} instead of {:?}", actual.shape(), expected.shape()));
    }
    let complex = expected.dtype().kind() == Kind::Complex;
    let exact_ints = tol.is_none() && matches!(expected.dtype(), DType::U64 | DType::I64);
    let (e, a) = (values(expected), values(actual));
    let mut diff = Diff { equal: true, max_abs: 0.0, max_rel: 0.0, mismatches: 0, first: None, note: None };
    let size = expected.dtype().size();
    for (i, (&x, &y)) in e.iter().zip(&a).enumerate() {
        let ok = if exact_ints {
            let w = size;
            expected.bytes()[i * w..(i + 1) * w] == actual.bytes()[i * w..(i + 1) * w]
        } else if x.is_nan() || y.is_nan() {
            x.is_nan() && y.is_nan()
        } else if x.is_infinite() || y.is_infinite() {
            x == y
        } else {
            let abs = (y - x).abs();
            let rel = if x != 0.0 {
                abs / x.abs()
            } else if abs > 0.0 {
                f64::INFINITY
            } else {
                0.0
            };
            diff.max_abs = diff.max_abs.max(abs);
            diff.max_rel = diff.max_rel.max(rel);
            match tol {
                Some((rtol, atol)) => abs <= atol + rtol * x.abs(),
                None => abs == 0.0,
            }
        };
        if !ok {
            diff.equal = false;
            diff.mismatches += 1;
            if diff.first.is_none() {
                let element = if complex { i / 2 } else { i };
                let index = unravel(element, expected.shape());
                let part = if complex { if i % 2 == 0 { " (real part)" } else { " (imaginary part)" } } else { "" };
                diff.first = Some((index, format!("{x}{part}"), format!("{y}{part}")));
            }
        }
    }
    diff
}

/// Compare two arrays bit for bit (dtype, shape and bytes).
pub(crate) fn compare_bits(expected: &NdArray, actual: &NdArray) -> Diff {
    let mut diff = compare(expected, actual, None);
    if diff.note.is_some() {
        return diff;
    }
    let size = expected.dtype().size();
    let first = expected.bytes().chunks_exact(size).zip(actual.bytes().chunks_exact(size)).position(|(x, y)| x != y);
    match first {
        None => {
            diff.equal = true;
            diff.mismatches = 0;
            diff.first = None;
        }
        Some(i) => {
            let mismatches = expected
                .bytes()
                .chunks_exact(size)
                .zip(actual.bytes().chunks_exact(size))
                .filter(|(x, y)| x != y)
                .count();
            let (e, a) = (values(expected), values(actual));
            let per = if expected.dtype().kind() == Kind::Complex { 2 } else { 1 };
            let show = |v: &[f64]| {
                if per == 2 { format!("{}{:+}i", v[2 * i], v[2 * i + 1]) } else { format!("{:e}", v[i]) }
            };
            diff.equal = false;
            diff.mismatches = mismatches;
            diff.first = Some((unravel(i, expected.shape()), show(&e), show(&a)));
        }
    }
    diff
}

/// Which layout of a result buffer to compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `.data`: nav buffers expanded to the nav shape (fill values outside a ROI).
    Data,
    /// `.raw`: nav buffers flat and ROI-compressed.
    Raw,
}

fn pick(buffer: &ResultBuffer, layout: Layout) -> &NdArray {
    match layout {
        Layout::Data => &buffer.data,
        Layout::Raw => &buffer.raw,
    }
}

/// Compare every result buffer of `actual` with `expected` (within `tol`, or bit for bit
/// with `bits`), summarised as one piece of evidence for `variant`: the first buffer
/// that differs, or the largest differences if all agree.
pub(crate) fn compare_results(
    variant: &str,
    expected: &UdfResults,
    actual: &UdfResults,
    tol: &Tolerance,
    layout: Layout,
    bits: bool,
) -> Evidence {
    let mut worst: Option<(String, Diff)> = None;
    for e in &expected.buffers {
        let Some(a) = actual.buffer(&e.name) else {
            return Evidence::fail(variant, format!("result '{}' is missing", e.name)).buffer(&e.name);
        };
        let diff = if bits {
            compare_bits(pick(e, layout), pick(a, layout))
        } else {
            compare(pick(e, layout), pick(a, layout), tol.for_dtype(e.dtype()))
        };
        if !diff.equal {
            let mut message = match &diff.note {
                Some(note) => format!("'{}' is not comparable: {note}", e.name),
                None => format!(
                    "'{}' differs in {} of {} elements{}",
                    e.name,
                    diff.mismatches,
                    pick(e, layout).len(),
                    match tol.for_dtype(e.dtype()) {
                        Some((rtol, atol)) if !bits => format!(" (rtol {rtol:e}, atol {atol:e})"),
                        _ if bits => " (bit for bit)".into(),
                        _ => " (exact)".into(),
                    }
                ),
            };
            if bits && pick(e, layout).dtype().kind() == Kind::Float && diff.max_abs > 0.0 {
                message.push_str(&format!("; largest difference {:e}", diff.max_abs));
            }
            return Evidence::fail(variant, message).buffer(&e.name).diff(&diff);
        }
        let replace = match &worst {
            None => true,
            Some((_, w)) => diff.max_rel > w.max_rel || (diff.max_rel == w.max_rel && diff.max_abs > w.max_abs),
        };
        if replace {
            worst = Some((e.name.clone(), diff));
        }
    }
    if let Some(extra) = actual.buffers.iter().find(|a| expected.buffer(&a.name).is_none()) {
        return Evidence::fail(variant, format!("result '{}' appears only in this variant", extra.name))
            .buffer(&extra.name);
    }
    let what = if bits { "bit-identical" } else { "agree" };
    match worst {
        Some((name, diff)) => {
            Evidence::pass(variant, format!("{} results {what}", expected.buffers.len())).buffer(&name).diff(&diff)
        }
        None => Evidence::pass(variant, "no results to compare"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_within_tolerance_and_nan_equal_nan() {
        let e = NdArray::from_vec(&[2, 2], vec![1.0f32, f32::NAN, 100.0, 0.0]).unwrap();
        let a = NdArray::from_vec(&[2, 2], vec![1.000_001f32, f32::NAN, 100.0, 0.0]).unwrap();
        let d = compare(&e, &a, Some((1e-5, 1e-8)));
        assert!(d.equal, "{d:?}");
        assert!(d.max_rel > 0.0 && d.max_rel < 2e-6);
        let d = compare(&e, &a, Some((1e-7, 0.0)));
        assert!(!d.equal);
        assert_eq!(d.first.as_ref().map(|f| f.0.clone()), Some(vec![0, 0]));
    }

    #[test]
    fn nan_against_number_and_exact_ints() {
        let e = NdArray::from_vec(&[3], vec![1.0f64, 2.0, 3.0]).unwrap();
        let a = NdArray::from_vec(&[3], vec![1.0f64, f64::NAN, 3.0]).unwrap();
        let d = compare(&e, &a, Some((1.0, 1.0)));
        assert_eq!((d.equal, d.mismatches), (false, 1));
        assert_eq!(d.first.unwrap().0, vec![1]);
        let e = NdArray::from_vec(&[2, 2], vec![1u32, 2, 3, 4]).unwrap();
        let a = NdArray::from_vec(&[2, 2], vec![1u32, 2, 3, 5]).unwrap();
        let d = compare(&e, &a, None);
        assert_eq!((d.equal, d.max_abs), (false, 1.0));
        assert_eq!(d.first.unwrap().0, vec![1, 1]);
    }

    #[test]
    fn bits_see_one_ulp_and_dtype_or_shape_changes() {
        let e = NdArray::from_vec(&[2], vec![1.0f32, 2.0]).unwrap();
        let a = NdArray::from_vec(&[2], vec![1.0f32, f32::from_bits(2.0f32.to_bits() + 1)]).unwrap();
        assert!(compare(&e, &a, Some((1e-5, 0.0))).equal);
        let d = compare_bits(&e, &a);
        assert_eq!((d.equal, d.mismatches), (false, 1));
        let f = NdArray::from_vec(&[2], vec![1.0f64, 2.0]).unwrap();
        assert!(compare(&e, &f, None).note.unwrap().contains("dtype float64"));
        let g = NdArray::from_vec(&[1, 2], vec![1.0f32, 2.0]).unwrap();
        assert!(compare(&e, &g, None).note.unwrap().contains("shape"));
    }

    #[test]
    fn unravel_is_c_order() {
        assert_eq!(unravel(7, &[2, 3, 4]), vec![0, 1, 3]);
        assert_eq!(unravel(23, &[2, 3, 4]), vec![1, 2, 3]);
    }
}
