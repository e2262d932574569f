//! Robustness: the plugin survives unusual but legal input — partitions emptied by a
//! ROI, a single frame, the frames as a 1-D scan, 1×1 and non-square frames, NaN and
//! infinities, extreme values — and reports bad parameters as typed errors. Survive
//! means: success or a typed error (`bad-param`, `invalid-data`, `internal`), never a
//! trap or a contract violation.

use super::geometry::Geometry;
use super::report::{Check, Evidence, Group};
use super::subject::{Ctx, filled, survives};
use super::synthetic;
use crate::array::NdArray;
use crate::dataset::plan_partitions;
use crate::dtype::{DType, Kind};
use crate::exec::RunOptions;
use crate::udf::{ParamSpec, ParamType, ParamValue};
use std::sync::Arc;

fn options(partitions: usize, threads: usize) -> RunOptions {
    RunOptions { partitions: Some(partitions), threads: Some(threads), ..Default::default() }
}

/// A ROI that leaves some partitions of a `count`-way split without frames: it keeps
/// the frames of every third partition (index 1, 4, ...).
pub(crate) fn emptying_mask(frames: usize, count: usize) -> Vec<bool> {
    let mut mask = vec![false; frames];
    for p in plan_partitions(frames, count, None).iter().filter(|p| p.index % 3 == 1) {
        for &f in &p.frames {
            mask[f as usize] = true;
        }
    }
    mask
}

/// `robustness.flat_scan`: the frames as a 1-D scan run, or are refused with a typed
/// error (n/a with the plugin's message).
fn flat_scan(ctx: &Ctx<'_>) -> Check {
    let frames = ctx.frames();
    let title = "the frames as a 1-D scan";
    let variant = format!("{frames} frames as a 1-D scan, 1 partition");
    let e = match ctx.geometry() {
        Geometry::OneDimensional => Evidence::na(&variant, "the data is a 1-D scan already"),
        Geometry::Independent => Evidence::pass(&variant, "ran; the results equal those on the 2-D scan"),
        Geometry::Dependent(m) => {
            Evidence::pass(&variant, format!("ran; the results depend on the scan geometry: {m}"))
        }
        Geometry::Refused(m) => Evidence::na(&variant, format!("skipped: the plugin refused a 1-D scan: {m}")),
        Geometry::Broken(m) => Evidence::fail(&variant, m.clone()),
        Geometry::Unknown => Evidence::na(&variant, "the baseline run failed"),
    };
    Check::from_evidence(Group::Robustness, "flat_scan", title, vec![e])
}

/// Bad values for a parameter, derived from its spec and its current value.
pub(crate) fn bad_values(spec: &ParamSpec, current: Option<&ParamValue>) -> Vec<(String, ParamValue)> {
    match spec.ty {
        ParamType::Bool => Vec::new(),
        ParamType::Int => [-1, 0, i64::MAX, i64::MIN].iter().map(|&v| (v.to_string(), ParamValue::Int(v))).collect(),
        ParamType::Float => [-1.0, 0.0, 1e300, f64::NAN, f64::INFINITY, f64::NEG_INFINITY]
            .iter()
            .map(|&v| (format!("{v:?}"), ParamValue::Float(v)))
            .collect(),
        ParamType::Text => vec![
            ("empty text".into(), ParamValue::Text(String::new())),
            ("unknown text".into(), ParamValue::Text("no-such-value-\u{1F4A5}".into())),
        ],
        ParamType::Array => {
            let shape = match current {
                Some(ParamValue::Array(a)) => a.shape().to_vec(),
                _ => vec![3],
            };
            let mut wrong = shape.clone();
            match wrong.last_mut() {
                Some(last) => *last += 1,
                None => wrong.push(2),
            }
            let empty = NdArray::zeros(DType::F64, &[0]);
            vec![
                ("empty array".into(), ParamValue::Array(Arc::new(empty))),
                (format!("array of shape {wrong:?} (mis-shaped)"), ParamValue::Array(Arc::new(filled(&wrong, 1.0)))),
                (format!("NaN array of shape {shape:?}"), ParamValue::Array(Arc::new(filled(&shape, f64::NAN)))),
            ]
        }
    }
}

/// The robustness checks.
pub(crate) fn check(ctx: &Ctx<'_>) -> Vec<Check> {
    vec![
        empty_partitions(ctx),
        single_frame(ctx),
        flat_scan(ctx),
        frame_shapes(ctx),
        nonfinite(ctx),
        extreme_values(ctx),
        bad_params(ctx),
    ]
}

/// `robustness.empty_partitions`: partitions emptied by a ROI.
fn empty_partitions(ctx: &Ctx<'_>) -> Check {
    let (frames, title) = (ctx.frames(), "partitions left empty by a ROI");
    if frames < 3 {
        return Check::not_applicable(Group::Robustness, "empty_partitions", title, "fewer than 3 frames");
    }
    let count = 6.min(frames);
    let mask = emptying_mask(frames, count);
    let kept = mask.iter().filter(|s| **s).count();
    let variant = format!("{count} partitions, ROI keeping {kept} frames of partitions 1 and 4");
    let (evidence, _) = super::roi::compare_roi(ctx, &variant, &mask, count);
    Check::from_evidence(Group::Robustness, "empty_partitions", title, evidence)
}

/// `robustness.single_frame`: a single frame, on a scan of the data's dimensionality.
fn single_frame(ctx: &Ctx<'_>) -> Check {
    let primary = ctx.primary();
    let one = vec![1; primary.data.shape().nav.len()];
    let variant = format!("a dataset of one frame (nav {one:?})");
    let variant = variant.as_str();
    let e = match synthetic::gather("one frame", primary.data.as_ref(), &[0], &one) {
        Ok(one) => survives(
            variant,
            ctx.subject.run(&one.data, &ctx.subject.params_for_rows(&[0]), options(3, ctx.threads())),
            "ran",
        ),
        Err(e) => Evidence::fail(variant, format!("cannot build the dataset: {e}")),
    };
    Check::from_evidence(Group::Robustness, "single_frame", "a dataset of a single frame", vec![e])
}

/// `robustness.frame_shapes`: 1×1 and non-square frames.
fn frame_shapes(ctx: &Ctx<'_>) -> Check {
    let primary = ctx.primary();
    let shape = primary.data.shape().clone();
    let dtype = primary.data.stored_dtype().dtype;
    let mut evidence = Vec::new();
    let tiny = vec![1; shape.sig.len()];
    let mut non_square = match shape.sig.len() {
        1 => vec![9],
        _ => {
            let mut s = vec![1; shape.sig.len() - 2];
            s.extend([5, 9]);
            s
        }
    };
    if non_square == shape.sig {
        non_square.reverse();
    }
    for (name, sig) in [("1×1 frames", tiny), ("non-square frames", non_square)] {
        let variant = format!("{name} {sig:?}");
        if let Some(reason) = ctx.subject.sig_tied(&shape.sig) {
            evidence.push(Evidence::na(&variant, format!("skipped: {reason}")));
            continue;
        }
        let e = match synthetic::shaped(name, &shape.nav, &sig, dtype, ctx.config.seed) {
            Ok(d) => {
                survives(&variant, ctx.subject.run(&d.data, &ctx.subject.params, options(2, ctx.threads())), "ran")
            }
            Err(e) => Evidence::fail(&variant, format!("cannot build the dataset: {e}")),
        };
        evidence.push(e);
    }
    Check::from_evidence(Group::Robustness, "frame_shapes", "1×1 and non-square frames", evidence)
}

/// Run the plugin on frames of the data's shapes with `values` planted among them
/// (`dtype`: of that dtype, its range clipping them; else float32).
fn planted(ctx: &Ctx<'_>, name: &str, variant: &str, values: &[f64], dtype: Option<crate::dtype::DType>) -> Evidence {
    let shape = ctx.primary().data.shape();
    let seed = ctx.config.seed;
    let data = match dtype {
        Some(dtype) => synthetic::planted_as(name, &shape.nav, &shape.sig, values, seed, dtype),
        None => synthetic::planted(name, &shape.nav, &shape.sig, values, seed),
    };
    match data {
        Ok(d) => survives(variant, ctx.subject.run(&d.data, &ctx.subject.params, options(2, ctx.threads())), "ran"),
        Err(e) => Evidence::fail(variant, format!("cannot build the dataset: {e}")),
    }
}

/// `robustness.nonfinite`: NaN and infinities.
fn nonfinite(ctx: &Ctx<'_>) -> Check {
    let variant = "float32 frames with NaN, +inf and -inf";
    let e = planted(ctx, "nonfinite", variant, &[f64::NAN, f64::INFINITY, f64::NEG_INFINITY], None);
    Check::from_evidence(Group::Robustness, "nonfinite", "frames containing NaN and infinities", vec![e])
}

/// `robustness.extreme_values`: the float32 extremes, and an integer dtype's range.
fn extreme_values(ctx: &Ctx<'_>) -> Check {
    let extremes = [f64::from(f32::MAX), f64::from(-f32::MAX), f64::from(f32::MIN_POSITIVE), 1e-45, -0.0, 65535.0];
    let variant = "float32 frames with ±3.4e38, 1.2e-38, 1e-45 (subnormal), -0, 65535";
    let mut evidence = vec![planted(ctx, "extreme", variant, &extremes, None)];
    let dtype = ctx.primary().data.stored_dtype().dtype;
    if matches!(dtype.kind(), Kind::Unsigned | Kind::Signed) {
        let variant = format!("{} frames with the type's minimum and maximum", dtype.name());
        evidence.push(planted(ctx, "extreme-int", &variant, &[1e300, -1e300], Some(dtype)));
    }
    Check::from_evidence(Group::Robustness, "extreme_values", "frames with extreme values", evidence)
}

/// `robustness.bad_params`: bad parameter values give typed errors, never traps.
fn bad_params(ctx: &Ctx<'_>) -> Check {
    let title = "bad parameter values are reported as typed errors, never traps";
    let specs = ctx.subject.udf.description().params.clone();
    let mut evidence = Vec::new();
    for spec in &specs {
        let current = ctx.subject.params.get(&spec.name).or(spec.default.as_ref());
        for (label, value) in bad_values(spec, current) {
            let variant = format!("{} = {label}", spec.name);
            let mut params = ctx.subject.params.clone();
            params.set(&spec.name, value);
            let outcome = ctx.subject.run(&ctx.primary().data, &params, options(2, ctx.threads()));
            evidence.push(survives(&variant, outcome, "accepted (ran)"));
        }
    }
    if evidence.is_empty() {
        let reason =
            if specs.is_empty() { "the plugin has no parameters" } else { "the plugin has only boolean parameters" };
        return Check::not_applicable(Group::Robustness, "bad_params", title, reason);
    }
    Check::from_evidence(Group::Robustness, "bad_params", title, evidence)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emptying_mask_keeps_every_third_partition() {
        let mask = emptying_mask(12, 6);
        let kept: Vec<usize> = mask.iter().enumerate().filter(|(_, s)| **s).map(|(i, _)| i).collect();
        assert_eq!(kept, vec![2, 3, 8, 9]);
    }

    #[test]
    fn bad_values_follow_the_spec() {
        let spec = |ty| ParamSpec { name: "x".into(), ty, doc: String::new(), default: None, nav_aux: false };
        assert_eq!(bad_values(&spec(ParamType::Float), None).len(), 6);
        assert!(bad_values(&spec(ParamType::Bool), None).is_empty());
        let current = ParamValue::Array(Arc::new(NdArray::zeros(DType::F32, &[4, 4])));
        let arrays = bad_values(&spec(ParamType::Array), Some(&current));
        assert!(arrays.iter().any(|(l, _)| l.contains("[4, 5]")), "{arrays:?}");
    }
}
