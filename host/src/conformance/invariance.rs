//! Invariance: the results must not depend on how the executor splits the work —
//! partition counts, tile shapes, thread counts, merge order, or the method used.
//!
//! Every variant runs on every dataset of the suite and is compared with a reference
//! that differs from it in the one thing the check is about, so a failure names its
//! cause: the dataset's baseline (1 partition, 1 thread, negotiated tiling) for
//! partition counts, tile shapes and methods, the same partitions on one thread (merged
//! in index order) for thread counts and merge orders. Integer and bool results must be
//! equal, float results within the [`Tolerance`](super::Tolerance) (widened to the
//! rounding of the plugin's accumulation).

use super::compare::{Layout, compare_results};
use super::report::{Check, Evidence, Group};
use super::subject::Ctx;
use crate::exec::RunOptions;
use crate::udf::Method;

/// One execution to compare with a reference.
struct Variant {
    name: String,
    options: RunOptions,
    /// The reference: `None` for the baseline, else a run with these options (named).
    reference: Option<(String, RunOptions)>,
}

impl Variant {
    fn against_baseline(name: String, options: RunOptions) -> Self {
        Variant { name, options, reference: None }
    }

    /// Compared with `partitions` partitions on one thread (merged in index order).
    fn against_one_thread(name: String, options: RunOptions, partitions: usize) -> Self {
        let reference = RunOptions { partitions: Some(partitions), threads: Some(1), ..Default::default() };
        Variant { name, options, reference: Some((format!("{partitions} partitions, 1 thread"), reference)) }
    }
}

/// Run `variants` on every dataset and compare each with its reference on that dataset.
fn evidence(ctx: &Ctx<'_>, variants: &[Variant]) -> Vec<Evidence> {
    let mut out = Vec::new();
    for (d, base) in ctx.datasets.iter().zip(&ctx.baselines) {
        let Ok(base) = base else {
            out.push(Evidence::na(&d.info.name, "the baseline run on this dataset failed"));
            continue;
        };
        let bounds = ctx.bounds(base, d.data.as_ref());
        // Reference runs by name, run once per dataset.
        let mut references: Vec<(&str, Result<crate::exec::RunResults, String>)> = Vec::new();
        for v in variants {
            let name = format!("{}: {}", d.info.name, v.name);
            let reference = match &v.reference {
                None => &base.results,
                Some((label, options)) => {
                    if !references.iter().any(|(l, _)| l == label) {
                        let run =
                            ctx.subject.run(&d.data, &ctx.subject.params, options.clone()).map_err(|e| e.to_string());
                        references.push((label, run));
                    }
                    match references.iter().find(|(l, _)| l == label).map(|(_, r)| r) {
                        Some(Ok(r)) => r,
                        Some(Err(e)) => {
                            out.push(Evidence::fail(&name, format!("the reference ({label}): {e}")));
                            continue;
                        }
                        None => continue,
                    }
                }
            };
            match ctx.subject.run(&d.data, &ctx.subject.params, v.options.clone()) {
                Ok(r) => out.push(compare_results(&name, &reference.udfs[0], &r.udfs[0], &bounds, Layout::Data, false)),
                Err(e) => out.push(Evidence::fail(&name, e.to_string())),
            }
        }
    }
    out
}

/// Partition counts {2, 3, 7, one per frame} (distinct, at most one per frame).
pub(crate) fn partition_counts(frames: usize) -> Vec<usize> {
    let mut counts: Vec<usize> = [2, 3, 7, frames].iter().map(|&c| c.min(frames)).filter(|&c| c > 1).collect();
    counts.dedup();
    counts
}

/// A slice extent for a frame axis of extent `n` that does not divide it (odd where it can).
fn odd_extent(n: usize) -> usize {
    [3, 5, 7, 2].into_iter().find(|&k| k < n && !n.is_multiple_of(k)).unwrap_or(n)
}

/// The tile shapes for `method` on frames of `sig` with partitions of up to `frames`:
/// full frames at depth 1 and maximal depth, odd shapes that don't divide the frame,
/// single rows.
fn tile_shapes(method: Method, sig: &[usize], frames: usize) -> Vec<(String, Vec<usize>)> {
    let shape = |depth: usize, slice: &[usize]| {
        let mut s = vec![depth];
        s.extend_from_slice(slice);
        s
    };
    let show = |s: &[usize]| s.iter().map(usize::to_string).collect::<Vec<_>>().join("x");
    let mut out = Vec::new();
    match method {
        Method::Partition => {}
        Method::Frame => {
            for depth in [1, 3, frames] {
                let s = shape(depth, sig);
                out.push((format!("depth {depth}, full frames"), s));
            }
        }
        Method::Tile => {
            out.push(("depth 1, full frames".into(), shape(1, sig)));
            out.push((format!("depth {frames} (max), full frames"), shape(frames, sig)));
            let odd: Vec<usize> = sig.iter().map(|&n| odd_extent(n)).collect();
            let s = shape(5, &odd);
            out.push((format!("tile {} (odd)", show(&s)), s));
            if sig.len() >= 2 {
                let mut row = vec![1; sig.len()];
                if let (Some(r), Some(&w)) = (row.last_mut(), sig.last()) {
                    *r = w;
                }
                let s = shape(1, &row);
                out.push((format!("tile {} (single rows)", show(&s)), s));
            }
        }
    }
    out.dedup_by(|a, b| a.1 == b.1);
    out
}

/// The invariance checks.
pub(crate) fn check(ctx: &Ctx<'_>) -> Vec<Check> {
    let method = ctx.method();
    let others: Vec<Method> = ctx.subject.udf.description().methods.iter().copied().filter(|&m| m != method).collect();
    vec![partitions(ctx, &others), tiles(ctx, method), threads(ctx), merge_order(ctx), methods(ctx, method, &others)]
}

/// `invariance.partitions`: partition counts 2, 3, 7 and one per frame against one
/// partition; the `others` methods split too, compared with themselves.
fn partitions(ctx: &Ctx<'_>, others: &[Method]) -> Check {
    let (frames, threads) = (ctx.frames(), ctx.threads());
    let mut variants: Vec<Variant> = partition_counts(frames)
        .into_iter()
        .map(|p| {
            Variant::against_baseline(
                if p == frames { format!("{p} partitions (one per frame)") } else { format!("{p} partitions") },
                RunOptions { partitions: Some(p), threads: Some(threads), ..Default::default() },
            )
        })
        .collect();
    // The other implemented methods split too, compared with themselves in one partition.
    if frames >= 3 {
        for &m in others {
            let one = RunOptions { partitions: Some(1), threads: Some(1), force_method: Some(m), ..Default::default() };
            variants.push(Variant {
                name: format!("3 partitions, {} method", m.name()),
                options: RunOptions { partitions: Some(3), threads: Some(threads), ..one.clone() },
                reference: Some((format!("1 partition, {} method", m.name()), one)),
            });
        }
    }
    Check::from_evidence(
        Group::Invariance,
        "partitions",
        "same results for partition counts 2, 3, 7 and one per frame as for one partition (every method)",
        evidence(ctx, &variants),
    )
}

/// `invariance.tiles`: other tile shapes against the negotiated ones.
fn tiles(ctx: &Ctx<'_>, method: Method) -> Check {
    let sig = ctx.primary().data.shape().sig.clone();
    let shapes = tile_shapes(method, &sig, ctx.frames());
    if shapes.is_empty() {
        return Check::not_applicable(
            Group::Invariance,
            "tiles",
            "same results for other tile shapes",
            "the partition method always gets the whole partition as one tile",
        );
    }
    let variants: Vec<Variant> = shapes
        .into_iter()
        .map(|(name, shape)| {
            Variant::against_baseline(
                format!("{name}, 1 partition"),
                RunOptions { partitions: Some(1), threads: Some(1), tile_shape: Some(shape), ..Default::default() },
            )
        })
        .collect();
    Check::from_evidence(
        Group::Invariance,
        "tiles",
        "same results for full-frame tiles at depth 1 and maximal depth, odd tile shapes, single rows as for the \
         negotiated tiles",
        evidence(ctx, &variants),
    )
}

/// `invariance.threads`: more worker threads against one, with the same partitions.
fn threads(ctx: &Ctx<'_>) -> Check {
    let p = 7.min(ctx.frames());
    // One thread is the reference's.
    let mut counts = vec![2.min(ctx.config.threads), ctx.config.threads];
    counts.sort_unstable();
    counts.dedup();
    let variants: Vec<Variant> = counts
        .into_iter()
        .map(|t| {
            Variant::against_one_thread(
                format!("{t} threads, {p} partitions"),
                RunOptions { partitions: Some(p), threads: Some(t), ..Default::default() },
                p,
            )
        })
        .collect();
    Check::from_evidence(
        Group::Invariance,
        "threads",
        "same results on more worker threads as on one (same partitions)",
        evidence(ctx, &variants),
    )
}

/// `invariance.merge_order`: shuffled merge orders against index order.
fn merge_order(ctx: &Ctx<'_>) -> Check {
    let (frames, p) = (ctx.frames(), 7.min(ctx.frames()));
    // One thread: partitions complete in index order, so the seed alone fixes the merge
    // order (the executor shuffles the completion order).
    let seed = ctx.config.seed;
    let shuffled = |partitions: usize| {
        Variant::against_one_thread(
            format!("{partitions} partitions merged in shuffled order (seed {seed})"),
            RunOptions {
                partitions: Some(partitions),
                threads: Some(1),
                shuffle_merges: Some(seed),
                ..Default::default()
            },
            partitions,
        )
    };
    let mut variants = vec![shuffled(p)];
    if frames > p {
        variants.push(shuffled(frames));
    }
    Check::from_evidence(
        Group::Invariance,
        "merge_order",
        "same results when partitions are merged in shuffled orders as in index order",
        evidence(ctx, &variants),
    )
}

/// `invariance.methods`: every other implemented method against the baseline's.
fn methods(ctx: &Ctx<'_>, method: Method, others: &[Method]) -> Check {
    if others.is_empty() {
        return Check::not_applicable(
            Group::Invariance,
            "methods",
            "same results with every implemented method",
            format!("the plugin implements one method ({})", method.name()),
        );
    }
    let variants: Vec<Variant> = others
        .iter()
        .map(|&m| {
            Variant::against_baseline(
                format!("{} method, 1 partition", m.name()),
                RunOptions { partitions: Some(1), threads: Some(1), force_method: Some(m), ..Default::default() },
            )
        })
        .collect();
    Check::from_evidence(
        Group::Invariance,
        "methods",
        "same results with every implemented method",
        evidence(ctx, &variants),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_counts_are_distinct_and_bounded() {
        assert_eq!(partition_counts(35), vec![2, 3, 7, 35]);
        assert_eq!(partition_counts(5), vec![2, 3, 5]);
        assert_eq!(partition_counts(1), Vec::<usize>::new());
    }

    #[test]
    fn odd_tiles_do_not_divide_the_frame() {
        assert_eq!(odd_extent(16), 3);
        assert_eq!(odd_extent(9), 5);
        assert_eq!(odd_extent(1), 1);
        let shapes = tile_shapes(Method::Tile, &[16, 12], 35);
        assert!(shapes.iter().any(|(_, s)| s == &vec![5, 3, 5]), "{shapes:?}");
        assert!(shapes.iter().any(|(_, s)| s == &vec![1, 1, 12]));
        assert!(tile_shapes(Method::Partition, &[4, 4], 9).is_empty());
    }
}
