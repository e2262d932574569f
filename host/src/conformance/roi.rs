//! Regions of interest: a run with a ROI must give the results of processing the
//! selected frames at their places in the scan; an all-false ROI must work; nav results
//! outside the ROI hold the fill value (NaN for float and complex, 0 for integers, false
//! for bool) and are not valid.
//!
//! A ROI run keeps the scan's geometry (the selected frames keep their coordinates), so
//! it is compared with references that keep it too:
//!
//! - nav results written while processing, at the selected positions, with a run
//!   without ROI (a frame's row depends on that frame alone);
//! - every result with the same ROI run in one partition on one thread;
//! - every result with the selected frames alone, gathered as a 1-D scan — only if the
//!   plugin's results do not depend on the scan geometry ([`Geometry`]); otherwise that
//!   reference is n/a and says why.
//!
//! A typed error of the plugin for a ROI is a refusal: n/a with its message.

use super::compare::{Bounds, Layout, compare_results, summarise};
use super::report::{Check, Evidence, Group};
use super::subject::{Ctx, Failure, classify};
use super::synthetic;
use crate::array::NdArray;
use crate::dtype::{DType, Kind};
use crate::exec::{RunOptions, RunResults, UdfResults};
use crate::roi::Roi;
use crate::udf::{BufferKind, BufferUse};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A random mask over `frames` positions selecting about half, at least one and (with
/// two frames or more) not all.
pub(crate) fn random_mask(frames: usize, seed: u64) -> Vec<bool> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x0123_4567);
    let mut mask: Vec<bool> = (0..frames).map(|_| rng.random_bool(0.5)).collect();
    if !mask.iter().any(|&b| b) {
        mask[frames / 2] = true;
    }
    if frames > 1 && mask.iter().all(|&b| b) {
        mask[0] = false;
    }
    mask
}

/// Run the primary dataset with ROI `mask` in `partitions` partitions and compare it with
/// the references of the module docs. Returns the evidence (one per reference) and the
/// ROI run.
pub(crate) fn compare_roi(
    ctx: &Ctx<'_>,
    variant: &str,
    mask: &[bool],
    partitions: usize,
) -> (Vec<Evidence>, Option<RunResults>) {
    let primary = ctx.primary();
    let roi_options = |partitions: usize, threads: usize| RunOptions {
        roi: Some(Roi::from_mask(mask.to_vec())),
        partitions: Some(partitions),
        threads: Some(threads),
        ..Default::default()
    };
    let with_roi = match ctx.subject.run(&primary.data, &ctx.subject.params, roi_options(partitions, ctx.threads())) {
        Ok(r) => r,
        Err(e) => {
            let evidence = match classify(&e) {
                Failure::Typed(m) => Evidence::na(variant, format!("skipped: the plugin refused the ROI: {m}")),
                Failure::Refused(m) | Failure::Broken(m) => Evidence::fail(variant, m),
            };
            return (vec![evidence], None);
        }
    };
    let rows: Vec<usize> = mask.iter().enumerate().filter(|(_, s)| **s).map(|(i, _)| i).collect();
    if rows.is_empty() {
        return (vec![Evidence::pass(variant, "ran (no frame selected)")], Some(with_roi));
    }
    let Ok(base) = ctx.baseline() else {
        return (vec![Evidence::na(variant, "the baseline run failed")], Some(with_roi));
    };
    let bounds = ctx.bounds(base, primary.data.as_ref());
    let actual = &with_roi.udfs[0];
    let mut evidence = Vec::new();

    // Nav results written while processing, at the selected positions of a full run.
    let from_processing: Vec<&str> = base
        .decls
        .iter()
        .filter(|d| d.kind == BufferKind::Nav && d.usage == BufferUse::Normal)
        .map(|d| d.name.as_str())
        .collect();
    let selected: Vec<(&str, NdArray)> = base.results.udfs[0]
        .buffers
        .iter()
        .filter(|b| from_processing.contains(&b.name.as_str()))
        .map(|b| (b.name.as_str(), b.raw.select_rows(rows.iter().copied())))
        .collect();
    if !selected.is_empty() {
        let pairs: Vec<(&str, &NdArray, Option<&NdArray>)> =
            selected.iter().map(|(n, e)| (*n, e, actual.buffer(n).map(|a| &a.raw))).collect();
        evidence.push(summarise(
            &format!("{variant}: nav results vs a run without ROI at the selected positions"),
            &pairs,
            None,
            &bounds,
            false,
            "differs from a run without ROI",
        ));
    }

    // The same ROI in one partition on one thread: the same coordinates, no splitting.
    let name = format!("{variant}: vs the same ROI in 1 partition, 1 thread");
    evidence.push(match ctx.subject.run(&primary.data, &ctx.subject.params, roi_options(1, 1)) {
        Ok(one) => compare_results(&name, &one.udfs[0], actual, &bounds, Layout::Raw, false),
        Err(e) => Evidence::fail(&name, format!("the reference run failed: {e}")),
    });

    evidence.push(compare_with_subset(ctx, variant, &rows, actual, &bounds));
    (evidence, Some(with_roi))
}

/// Compare a ROI run's results with the selected frames `rows` alone, gathered as a 1-D
/// scan, where that is a fair reference.
fn compare_with_subset(ctx: &Ctx<'_>, variant: &str, rows: &[usize], actual: &UdfResults, bounds: &Bounds) -> Evidence {
    let frames = if rows.len() == 1 { "frame".to_owned() } else { format!("{} frames", rows.len()) };
    let name = format!("{variant}: vs the selected {frames} alone (a 1-D scan)");
    let geometry = ctx.geometry();
    if let Some(why) = geometry.why_not_flat() {
        return Evidence::na(&name, format!("skipped: {why}; the other references keep the scan's geometry"));
    }
    let subset = match synthetic::gather("subset", ctx.primary().data.as_ref(), rows, &[rows.len()]) {
        Ok(s) => s,
        Err(e) => return Evidence::fail(&name, format!("cannot gather the selected frames: {e}")),
    };
    let options = RunOptions { partitions: Some(2), threads: Some(ctx.threads()), ..Default::default() };
    match ctx.subject.run(&subset.data, &ctx.subject.params_for_rows(rows), options) {
        Ok(alone) => compare_results(&name, &alone.udfs[0], actual, bounds, Layout::Raw, false),
        Err(e) => match classify(&e) {
            Failure::Typed(m) | Failure::Refused(m) => {
                Evidence::na(&name, format!("skipped: the plugin refused the selected frames alone: {m}"))
            }
            Failure::Broken(m) => Evidence::fail(&name, format!("on the selected frames alone: {m}")),
        },
    }
}

/// Whether `bytes` (one element of `dtype`) is the fill value outside a ROI.
fn is_fill(dtype: DType, bytes: &[u8]) -> bool {
    match dtype.kind() {
        Kind::Float | Kind::Complex => {
            let part = if dtype.kind() == Kind::Complex { dtype.size() / 2 } else { dtype.size() };
            bytes.chunks_exact(part).all(|p| match part {
                4 => p.try_into().is_ok_and(|b| f32::from_le_bytes(b).is_nan()),
                _ => p.try_into().is_ok_and(|b| f64::from_le_bytes(b).is_nan()),
            })
        }
        _ => bytes.iter().all(|&b| b == 0),
    }
}

/// Check that nav results outside `mask` hold the fill value and are not valid.
pub(crate) fn fill_evidence(variant: &str, results: &UdfResults, mask: &[bool]) -> Evidence {
    let mut checked = 0;
    for b in results.buffers.iter().filter(|b| b.kind == BufferKind::Nav) {
        let dtype = b.data.dtype();
        let per_frame = b.extra_shape.iter().product::<usize>();
        let size = dtype.size();
        let valid = b.valid.to_bools().unwrap_or_default();
        for (frame, _) in mask.iter().enumerate().filter(|(_, s)| !**s) {
            for k in 0..per_frame {
                let i = frame * per_frame + k;
                let Some(bytes) = b.data.bytes().get(i * size..(i + 1) * size) else {
                    return Evidence::fail(variant, format!("'{}' has fewer elements than the nav shape", b.name));
                };
                if !is_fill(dtype, bytes) {
                    let index = crate::array::unravel(i, b.data.shape());
                    let expected = match dtype.kind() {
                        Kind::Float | Kind::Complex => "NaN",
                        Kind::Bool => "false",
                        _ => "0",
                    };
                    let mut e = Evidence::fail(
                        variant,
                        format!("'{}' at unselected position {index:?} is not the fill value {expected}", b.name),
                    );
                    e.buffer = Some(b.name.clone());
                    e.first_index = Some(index);
                    e.expected = Some(expected.into());
                    return e;
                }
                if valid.get(i).copied().unwrap_or(false) {
                    return Evidence::fail(
                        variant,
                        format!("'{}' is marked valid at unselected flat position {frame}", b.name),
                    );
                }
                checked += 1;
            }
        }
    }
    let unselected = mask.iter().filter(|s| !**s).count();
    Evidence::pass(variant, format!("{checked} elements at {unselected} unselected positions hold the fill value"))
}

/// The ROI checks.
pub(crate) fn check(ctx: &Ctx<'_>) -> Vec<Check> {
    let frames = ctx.frames();
    let random = random_mask(frames, ctx.config.seed);
    let single: Vec<bool> = (0..frames).map(|i| i == frames / 2).collect();
    let count = random.iter().filter(|s| **s).count();

    let (mut evidence, random_run) =
        compare_roi(ctx, &format!("random ROI ({count} of {frames} frames), 3 partitions"), &random, 3);
    let (single_evidence, _) =
        compare_roi(ctx, &format!("one-frame ROI (frame {}), 3 partitions", frames / 2), &single, 3);
    evidence.extend(single_evidence);
    let mut checks = vec![Check::from_evidence(
        Group::Roi,
        "subset",
        "a run with a ROI gives the results of the selected frames at their places in the scan",
        evidence,
    )];

    let all_false = vec![false; frames];
    let options = RunOptions {
        roi: Some(Roi::from_mask(all_false.clone())),
        partitions: Some(3),
        threads: Some(ctx.threads()),
        ..Default::default()
    };
    let variant = "all-false ROI, 3 partitions";
    let empty = match ctx.subject.run(&ctx.primary().data, &ctx.subject.params, options) {
        Ok(r) => {
            let mut e = fill_evidence(variant, &r.udfs[0], &all_false);
            if e.status == super::Status::Pass {
                e.message = format!("ran; {}", e.message);
            }
            e
        }
        Err(e) => match classify(&e) {
            Failure::Typed(m) => Evidence::na(variant, format!("skipped: the plugin refused an empty ROI: {m}")),
            Failure::Refused(m) | Failure::Broken(m) => Evidence::fail(variant, m),
        },
    };
    checks.push(Check::from_evidence(Group::Roi, "all_false", "a ROI selecting no frame works", vec![empty]));

    let has_nav = ctx.baseline().is_ok_and(|b| b.results.udfs[0].buffers.iter().any(|b| b.kind == BufferKind::Nav));
    let title = "nav results outside the ROI are NaN / 0 / false and not valid";
    if !has_nav {
        checks.push(Check::not_applicable(Group::Roi, "fill", title, "the plugin has no nav results"));
    } else {
        let evidence = match &random_run {
            Some(r) => fill_evidence(&format!("random ROI ({count} of {frames} frames)"), &r.udfs[0], &random),
            None => Evidence::na("random ROI", "the ROI run failed or was refused (see roi.subset)"),
        };
        checks.push(Check::from_evidence(Group::Roi, "fill", title, vec![evidence]));
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_masks_select_some_but_not_all() {
        for frames in [1, 2, 3, 35] {
            let m = random_mask(frames, 7);
            assert_eq!(m.len(), frames);
            assert!(m.iter().any(|&b| b));
            assert!(frames == 1 || m.iter().any(|&b| !b));
        }
    }

    #[test]
    fn fill_values() {
        assert!(is_fill(DType::F32, &f32::NAN.to_le_bytes()));
        assert!(!is_fill(DType::F32, &0f32.to_le_bytes()));
        let c: Vec<u8> = [f64::NAN.to_le_bytes(), 1f64.to_le_bytes()].concat();
        assert!(!is_fill(DType::C128, &c));
        assert!(is_fill(DType::U16, &[0, 0]));
        assert!(!is_fill(DType::Bool, &[1]));
    }
}
