//! Comparing result arrays: the tolerance model, differences as evidence.
//!
//! Float results are compared like NumPy's `allclose`, with a relative tolerance that
//! follows the precision of the arithmetic that produced them (see [`Tolerance`] and
//! `docs/conformance.md`, "Tolerance"): two correct executions that sum the same `n`
//! terms in another order differ by the rounding of the coarsest float type on the way,
//! so a float64 result computed from float32 sums is judged by float32 rounding.

use super::{Evidence, Status};
use crate::array::NdArray;
use crate::dtype::{DType, Kind};
use crate::exec::{ResultBuffer, UdfResults};
use crate::udf::{BufferDecl, BufferKind, BufferUse};
use serde::Serialize;

/// How close float results must be.
///
/// An element agrees when `|actual − expected| ≤ atol + rtol · max(|expected|, m)`, where
/// `m`, when the tolerance follows the accumulation, is the typical magnitude of the run's
/// largest float result (the largest median magnitude over the reference's float
/// results), so a small difference of large values keeps their absolute rounding; without
/// it `m` is 0, which is NumPy's `allclose`. NaN equals NaN, infinities must match;
/// integer and bool results must be equal.
///
/// `rtol` is the larger of the floor of the result's dtype (`rtol32`, `rtol64`) and, with
/// `accumulation`, the rounding of the accumulation: `2 · (n + 8) · u`, with `u` the unit
/// roundoff of the coarsest float among the input dtype and the declared buffers (2⁻²⁴
/// for float32, 2⁻⁵³ for float64) and `n` the number of terms summed into one element
/// (a frame's pixels for nav buffers, the frames for sig buffers, both for single ones;
/// the largest of the result's kind and of every float buffer on the way).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Tolerance {
    /// Relative tolerance for float32 and complex64 results (a floor with `accumulation`).
    pub rtol32: f64,
    /// Relative tolerance for float64 and complex128 results (a floor with `accumulation`).
    pub rtol64: f64,
    /// Absolute tolerance for all float results.
    pub atol: f64,
    /// Widen `rtol` to the rounding of the accumulation (the default); `false` uses the
    /// floors alone.
    pub accumulation: bool,
}

impl Default for Tolerance {
    fn default() -> Self {
        Tolerance { rtol32: 1e-5, rtol64: 1e-9, atol: 1e-8, accumulation: true }
    }
}

impl Tolerance {
    /// Fixed tolerances (no accumulation model): `rtol` for every float result.
    pub fn fixed(rtol: f64, atol: f64) -> Self {
        Tolerance { rtol32: rtol, rtol64: rtol, atol, accumulation: false }
    }

    /// `(rtol, atol)` floors for results of `dtype`; `None` means exact equality.
    pub fn for_dtype(&self, dtype: DType) -> Option<(f64, f64)> {
        match dtype {
            DType::F32 | DType::C64 => Some((self.rtol32, self.atol)),
            DType::F64 | DType::C128 => Some((self.rtol64, self.atol)),
            _ => None,
        }
    }
}

/// Unit roundoff of a float dtype (half the machine epsilon); 0 for exact types.
pub(crate) fn unit_roundoff(dtype: DType) -> f64 {
    match dtype {
        DType::F32 | DType::C64 => f64::from(f32::EPSILON) / 2.0,
        DType::F64 | DType::C128 => f64::EPSILON / 2.0,
        _ => 0.0,
    }
}

/// Terms summed into one element of a buffer of `kind`: a frame's pixels (nav), the
/// frames (sig), both (single).
fn terms(kind: BufferKind, frames: usize, sig_len: usize) -> usize {
    match kind {
        BufferKind::Nav => sig_len,
        BufferKind::Sig => frames,
        BufferKind::Single => frames.saturating_mul(sig_len),
    }
    .max(1)
}

/// The tolerance applied to one float result buffer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bound {
    /// The floor of the result's dtype.
    pub floor: f64,
    /// The relative tolerance applied (≥ `floor`).
    pub rtol: f64,
    pub atol: f64,
    /// The magnitude the rounding happened in: elements smaller than this are judged
    /// relative to it (0 without the accumulation model).
    pub scale: f64,
    /// Why `rtol` is larger than the floor: the accumulation it follows, in words.
    pub basis: Option<String>,
}

/// The precision model of one run: where float rounding enters, and how many terms.
#[derive(Debug, Clone)]
pub(crate) struct Bounds {
    tol: Tolerance,
    /// The coarsest float on the way (input or declared buffer) and where it comes from.
    coarsest: Option<(DType, String)>,
    /// Largest number of terms over the float buffers on the way, and the kind.
    widest: Option<(usize, BufferKind)>,
    /// Kinds of the declared buffers.
    kinds: Vec<(String, BufferKind)>,
    frames: usize,
    sig_len: usize,
    /// The typical magnitude of the run's largest float result (see [`Bounds::with_scale`]).
    scale: f64,
}

impl Bounds {
    /// The model for a run of `decls` on `frames` frames of `sig_len` pixels, with tiles
    /// of `input` dtype.
    pub fn new(tol: &Tolerance, decls: &[BufferDecl], input: DType, frames: usize, sig_len: usize) -> Bounds {
        let mut coarsest: Option<(DType, String)> = None;
        let mut consider = |dtype: DType, what: String| {
            let u = unit_roundoff(dtype);
            if u > 0.0 && coarsest.as_ref().is_none_or(|(d, _)| unit_roundoff(*d) < u) {
                coarsest = Some((dtype, what));
            }
        };
        consider(input, format!("input {input}"));
        let on_the_way: Vec<&BufferDecl> =
            decls.iter().filter(|d| d.usage != BufferUse::ResultOnly && unit_roundoff(d.dtype) > 0.0).collect();
        for d in &on_the_way {
            consider(d.dtype, format!("buffer '{}' {}", d.name, d.dtype));
        }
        let widest = on_the_way.iter().map(|d| (terms(d.kind, frames, sig_len), d.kind)).max_by_key(|(n, _)| *n);
        Bounds {
            tol: *tol,
            coarsest,
            widest,
            kinds: decls.iter().map(|d| (d.name.clone(), d.kind)).collect(),
            frames,
            sig_len,
            scale: 0.0,
        }
    }

    /// Judge small elements relative to the typical magnitude of the largest float result
    /// of `reference` (the largest median magnitude): rounding errors are absolute, and a
    /// result that is a difference of nearly equal values (a centred coordinate, a
    /// gradient) keeps the absolute error of the values it came from.
    pub fn with_scale(mut self, reference: &UdfResults) -> Bounds {
        self.scale = reference
            .buffers
            .iter()
            .filter(|b| unit_roundoff(b.dtype()) > 0.0)
            .map(|b| median_magnitude(&values(&b.raw)))
            .fold(0.0, f64::max);
        self
    }

    /// Floors only (no declarations known).
    pub fn fixed(tol: &Tolerance) -> Bounds {
        Bounds { tol: *tol, coarsest: None, widest: None, kinds: Vec::new(), frames: 1, sig_len: 1, scale: 0.0 }
    }

    /// The tolerance for result `name` of `dtype`; `None`: exact comparison.
    pub fn bound(&self, name: &str, dtype: DType) -> Option<Bound> {
        let (floor, atol) = self.tol.for_dtype(dtype)?;
        let fixed = Bound { floor, rtol: floor, atol, scale: 0.0, basis: None };
        if !self.tol.accumulation {
            return Some(fixed);
        }
        // The coarsest float of the input, the buffers on the way and the result itself.
        let (coarse, source) = match &self.coarsest {
            Some((d, s)) if unit_roundoff(*d) >= unit_roundoff(dtype) => (*d, s.clone()),
            _ => (dtype, format!("result {dtype}")),
        };
        let own = self.kinds.iter().find(|(n, _)| n == name).map(|(_, k)| *k);
        let mut n = (1, None);
        if let Some(kind) = own {
            n = (terms(kind, self.frames, self.sig_len), Some(kind));
        }
        if let Some((w, kind)) = self.widest
            && w > n.0
        {
            n = (w, Some(kind));
        }
        let u = unit_roundoff(coarse);
        let rtol = 2.0 * (n.0 as f64 + 8.0) * u;
        if rtol <= floor {
            return Some(Bound { scale: self.scale, ..fixed });
        }
        let per = match n.1 {
            Some(kind @ BufferKind::Nav) => format!(" (a frame's pixels, {} buffer)", kind.name()),
            Some(kind @ BufferKind::Sig) => format!(" (the frames, {} buffer)", kind.name()),
            Some(kind @ BufferKind::Single) => format!(" (frames × pixels, {} buffer)", kind.name()),
            None => String::new(),
        };
        let basis = format!("{} accumulation ({source}) over {} terms{per}", coarse.name(), n.0);
        Some(Bound { floor, rtol, atol, scale: self.scale, basis: Some(basis) })
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
    /// Elements within tolerance only thanks to the accumulation's rounding (beyond the
    /// floor of the result's dtype).
    pub beyond_floor: usize,
    /// Largest `|actual − expected|` as a fraction of what the tolerance allows there.
    pub used: f64,
    /// The first element out of tolerance: index, expected, actual.
    pub first: Option<(Vec<usize>, String, String)>,
    /// Why the arrays are not comparable (dtype or shape), if so.
    pub note: Option<String>,
}

impl Diff {
    fn incomparable(note: String) -> Diff {
        Diff {
            equal: false,
            max_abs: f64::NAN,
            max_rel: f64::NAN,
            mismatches: 0,
            beyond_floor: 0,
            used: f64::NAN,
            first: None,
            note: Some(note),
        }
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

/// The median magnitude of the finite values (0 if there are none).
fn median_magnitude(values: &[f64]) -> f64 {
    let mut m: Vec<f64> = values.iter().filter(|v| v.is_finite()).map(|v| v.abs()).collect();
    if m.is_empty() {
        return 0.0;
    }
    let mid = m.len() / 2;
    *m.select_nth_unstable_by(mid, f64::total_cmp).1
}

use crate::array::unravel;

/// When an element agrees: `|a − e| ≤ atol + rtol · max(|e|, scale)`.
#[derive(Debug, Clone, Copy)]
struct Criterion {
    rtol: f64,
    atol: f64,
    scale: f64,
    /// The dtype's floor (counts elements that need more).
    floor: f64,
}

/// Compare `actual` with `expected` within `tol` (`None`: exact, integers compared as
/// values; 64-bit integers beyond 2^53 by their bits), like NumPy's `allclose`.
pub(crate) fn compare(expected: &NdArray, actual: &NdArray, tol: Option<(f64, f64)>) -> Diff {
    compare_with(expected, actual, tol.map(|(rtol, atol)| Criterion { rtol, atol, scale: 0.0, floor: rtol }))
}

/// Compare `actual` with `expected` within `bound` (`None`: exact).
pub(crate) fn compare_bound(expected: &NdArray, actual: &NdArray, bound: Option<&Bound>) -> Diff {
    compare_with(
        expected,
        actual,
        bound.map(|b| Criterion { rtol: b.rtol, atol: b.atol, scale: b.scale, floor: b.floor }),
    )
}

fn compare_with(expected: &NdArray, actual: &NdArray, tol: Option<Criterion>) -> Diff {
    if expected.dtype() != actual.dtype() {
        return Diff::incomparable(format!("dtype {} instead of {}", actual.dtype(), expected.dtype()));
    }
    if expected.shape() != actual.shape() {
        return Diff::incomparable(format!("shape {:?} instead of {:?}", actual.shape(), expected.shape()));
    }
    let complex = expected.dtype().kind() == Kind::Complex;
    let exact_ints = tol.is_none() && matches!(expected.dtype(), DType::U64 | DType::I64);
    let (e, a) = (values(expected), values(actual));
    let mut diff = Diff {
        equal: true,
        max_abs: 0.0,
        max_rel: 0.0,
        mismatches: 0,
        beyond_floor: 0,
        used: 0.0,
        first: None,
        note: None,
    };
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
                Some(c) => {
                    let allowed = c.atol + c.rtol * x.abs().max(c.scale);
                    let ok = abs <= allowed;
                    if abs > 0.0 {
                        diff.used = diff.used.max(if allowed > 0.0 { abs / allowed } else { f64::INFINITY });
                    }
                    if ok && abs > c.atol + c.floor * x.abs() {
                        diff.beyond_floor += 1;
                    }
                    ok
                }
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

/// The tolerance in words, for messages: `rtol 1e-5, atol 1e-8`, with the accumulation
/// it follows.
pub(crate) fn describe_bound(bound: Option<&Bound>) -> String {
    match bound {
        None => "exact".into(),
        Some(b) => match &b.basis {
            Some(basis) => format!("rtol {:.2e} from the rounding of {basis}, atol {:e}", b.rtol, b.atol),
            None => format!("rtol {:e}, atol {:e}", b.rtol, b.atol),
        },
    }
}

/// Evidence that two arrays of result `name` agree or not, within `bound` (or bit for bit
/// with `bits`). `what` names the reference for a failure ("differs", "differs from the
/// run's result"); `len` is the compared element count.
pub(crate) fn buffer_evidence(
    variant: &str,
    name: &str,
    expected: &NdArray,
    actual: &NdArray,
    bound: Option<&Bound>,
    bits: bool,
    what: &str,
) -> (Evidence, Diff) {
    let diff = if bits { compare_bits(expected, actual) } else { compare_bound(expected, actual, bound) };
    if diff.equal {
        let mut e = Evidence::pass(variant, "agree").buffer(name).diff(&diff);
        if let Some(b) = bound.filter(|_| !bits) {
            e.rtol = Some(b.rtol);
            e.atol = Some(b.atol);
            e.tolerance_used = Some(diff.used);
            if diff.beyond_floor > 0
                && let Some(basis) = &b.basis
            {
                e.rounding = Some(format!(
                    "within the rounding of {basis} (rtol {:.2e}): '{name}' ({} of {} elements beyond the {} floor \
                     rtol {:e})",
                    b.rtol,
                    diff.beyond_floor,
                    expected.len(),
                    expected.dtype(),
                    b.floor,
                ));
            }
        }
        return (e, diff);
    }
    let mut message = match &diff.note {
        Some(note) => format!("'{name}' is not comparable: {note}"),
        None => format!(
            "'{name}' {what} in {} of {} elements ({})",
            diff.mismatches,
            expected.len(),
            if bits { "bit for bit".to_owned() } else { describe_bound(bound) }
        ),
    };
    if bits && expected.dtype().kind() == Kind::Float && diff.max_abs > 0.0 {
        message.push_str(&format!("; largest difference {:e}", diff.max_abs));
    }
    let mut e = Evidence::fail(variant, message).buffer(name).diff(&diff);
    if let Some(b) = bound.filter(|_| !bits) {
        e.rtol = Some(b.rtol);
        e.atol = Some(b.atol);
    }
    (e, diff)
}

/// Compare every result buffer of `actual` with `expected` (within `bounds`, or bit for
/// bit with `bits`), summarised as one piece of evidence for `variant`: the first buffer
/// that differs, or the largest differences if all agree (saying which agree only
/// within the rounding of the accumulation).
pub(crate) fn compare_results(
    variant: &str,
    expected: &UdfResults,
    actual: &UdfResults,
    bounds: &Bounds,
    layout: Layout,
    bits: bool,
) -> Evidence {
    let pairs: Vec<(&str, &NdArray, Option<&NdArray>)> = expected
        .buffers
        .iter()
        .map(|e| (e.name.as_str(), pick(e, layout), actual.buffer(&e.name).map(|a| pick(a, layout))))
        .collect();
    let extra = actual.buffers.iter().find(|a| expected.buffer(&a.name).is_none()).map(|a| a.name.as_str());
    summarise(variant, &pairs, extra, bounds, bits, "differs")
}

/// One piece of evidence for `(name, expected, actual)` arrays: the first that differs or
/// is missing, `extra` (a result only the actual run has), or the largest differences.
pub(crate) fn summarise(
    variant: &str,
    pairs: &[(&str, &NdArray, Option<&NdArray>)],
    extra: Option<&str>,
    bounds: &Bounds,
    bits: bool,
    what: &str,
) -> Evidence {
    let mut worst: Option<(Evidence, Diff)> = None;
    let mut rounding: Vec<String> = Vec::new();
    let mut used: f64 = 0.0;
    for &(name, e, a) in pairs {
        let Some(a) = a else {
            return Evidence::fail(variant, format!("result '{name}' is missing")).buffer(name);
        };
        let bound = bounds.bound(name, e.dtype());
        let (evidence, diff) = buffer_evidence(variant, name, e, a, bound.as_ref(), bits, what);
        if evidence.status != Status::Pass {
            return evidence;
        }
        used = used.max(evidence.tolerance_used.unwrap_or(0.0));
        if let Some(r) = &evidence.rounding {
            // One basis for the run: name it once, then list the buffers.
            match (rounding.first(), r.split_once(": ")) {
                (Some(first), Some((basis, buffer))) if first.starts_with(basis) => rounding.push(buffer.to_owned()),
                _ => rounding.push(r.clone()),
            }
        }
        let replace = match &worst {
            None => true,
            Some((_, w)) => diff.max_rel > w.max_rel || (diff.max_rel == w.max_rel && diff.max_abs > w.max_abs),
        };
        if replace {
            worst = Some((evidence, diff));
        }
    }
    if let Some(extra) = extra {
        return Evidence::fail(variant, format!("result '{extra}' appears only in this variant")).buffer(extra);
    }
    let agree = match (bits, pairs.len()) {
        (true, 1) => "result is bit-identical",
        (true, _) => "results are bit-identical",
        (false, 1) => "result agrees",
        (false, _) => "results agree",
    };
    match worst {
        Some((mut e, _)) => {
            e.message = format!("{} {agree}", pairs.len());
            if !bits {
                e.tolerance_used = Some(used);
            }
            if !rounding.is_empty() {
                e.message.push_str(" (float differences within the rounding of the accumulation)");
                e.rounding = Some(rounding.join(", "));
            }
            e
        }
        None => Evidence::pass(variant, "no results to compare"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(name: &str, kind: BufferKind, dtype: DType, usage: BufferUse) -> BufferDecl {
        BufferDecl { name: name.into(), kind, dtype, extra_shape: Vec::new(), usage }
    }

    const U32: f64 = 5.960_464_477_539_063e-8; // 2^-24
    const U64: f64 = 1.110_223_024_625_156_5e-16; // 2^-53

    #[test]
    fn rtol_follows_the_coarsest_float_and_the_terms_on_the_way() {
        let tol = Tolerance::default();
        // AverageUDF: float32 `sum` (sig, 24 frames), uint64 count, float64 `average`.
        let decls = [
            decl("sum", BufferKind::Sig, DType::F32, BufferUse::Normal),
            decl("num_frames", BufferKind::Single, DType::U64, BufferUse::Normal),
            decl("average", BufferKind::Sig, DType::F64, BufferUse::ResultOnly),
        ];
        let bounds = Bounds::new(&tol, &decls, DType::F32, 24, 256);
        let average = bounds.bound("average", DType::F64).unwrap();
        assert_eq!(average.floor, 1e-9);
        assert!((average.rtol - 2.0 * 32.0 * U32).abs() < 1e-18, "{average:?}");
        let basis = average.basis.unwrap();
        assert!(basis.contains("float32") && basis.contains("24 terms"), "{basis}");
        // Below the float32 floor, the floor applies (and no basis is given).
        let sum = bounds.bound("sum", DType::F32).unwrap();
        assert_eq!((sum.rtol, sum.basis), (1e-5, None));
        assert!(bounds.bound("num_frames", DType::U64).is_none());

        // A nav buffer: a frame's pixels; a single one: frames × pixels.
        let nav = Bounds::new(&tol, &[decl("x", BufferKind::Nav, DType::F32, BufferUse::Normal)], DType::F32, 24, 256);
        assert!((nav.bound("x", DType::F32).unwrap().rtol - 2.0 * 264.0 * U32).abs() < 1e-18);
        let single =
            Bounds::new(&tol, &[decl("x", BufferKind::Single, DType::F32, BufferUse::Normal)], DType::F32, 24, 256);
        assert!((single.bound("x", DType::F32).unwrap().rtol - 2.0 * (6144.0 + 8.0) * U32).abs() < 1e-18);

        // Float64 all the way (float64 input): float64 rounding, under the floor.
        let f64s = [decl("s", BufferKind::Sig, DType::F64, BufferUse::Normal)];
        let b = Bounds::new(&tol, &f64s, DType::F64, 1000, 256).bound("s", DType::F64).unwrap();
        assert!(2.0 * 1008.0 * U64 < 1e-9 && b.rtol == 1e-9);
        // Float32 input into float64 buffers: the input's rounding counts.
        let b = Bounds::new(&tol, &f64s, DType::F32, 1000, 256).bound("s", DType::F64).unwrap();
        assert!((b.rtol - 2.0 * 1008.0 * U32).abs() < 1e-15 && b.basis.unwrap().contains("input float32"));
        // Integer input and buffers: only the result's own rounding.
        let ints = [decl("n", BufferKind::Sig, DType::U32, BufferUse::Normal)];
        let b = Bounds::new(&tol, &ints, DType::U16, 100_000_000, 256).bound("n", DType::F64).unwrap();
        assert!((b.rtol - 2.0 * 100_000_008.0 * U64).abs() < 1e-15, "{b:?}");

        // Fixed tolerances ignore the model.
        let fixed = Tolerance { accumulation: false, ..tol };
        let b = Bounds::new(&fixed, &decls, DType::F32, 24, 256).bound("average", DType::F64).unwrap();
        assert_eq!((b.rtol, b.scale, b.basis), (1e-9, 0.0, None));
    }

    #[test]
    fn small_elements_are_judged_at_the_runs_scale_and_beyond_floor_is_counted() {
        // A centred quantity near 0 next to values of ~8: absolute rounding of ~8.
        let e = NdArray::from_vec(&[3], vec![8.0f64, 0.01, -0.02]).unwrap();
        let a = NdArray::from_vec(&[3], vec![8.0f64, 0.01 + 1e-6, -0.02]).unwrap();
        let bound = Bound { floor: 1e-9, rtol: 3e-5, atol: 0.0, scale: 8.0, basis: Some("float32".into()) };
        let d = compare_bound(&e, &a, Some(&bound));
        assert!(d.equal && d.beyond_floor == 1, "{d:?}");
        assert!((d.used - 1e-6 / (3e-5 * 8.0)).abs() < 1e-9);
        // Without the scale, the same difference is 1e-4 relative: out of tolerance.
        let d = compare_bound(&e, &a, Some(&Bound { scale: 0.0, ..bound }));
        assert_eq!((d.equal, d.mismatches), (false, 1));
        // The scale is the largest median magnitude over the float results.
        assert_eq!(median_magnitude(&[-3.0, 1.0, f64::NAN, 2.0, 100.0]), 3.0);
        assert_eq!(median_magnitude(&[f64::NAN]), 0.0);
    }

    #[test]
    fn unit_roundoffs() {
        assert_eq!(unit_roundoff(DType::F32), U32);
        assert_eq!(unit_roundoff(DType::C128), U64);
        assert_eq!(unit_roundoff(DType::I64), 0.0);
    }

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
