//! Determinism: two identical runs (same partitions, one thread, so the same merge
//! order) must give bit-identical results. A plugin that keeps state between runs — in its main-side
//! instance, which lives as long as the loaded plugin — fails here even when the
//! difference is within the invariance tolerance.

use super::compare::{Bounds, Layout, compare_results};
use super::report::{Check, Evidence, Group};
use super::subject::Ctx;
use crate::exec::RunOptions;

/// The determinism check.
pub(crate) fn check(ctx: &Ctx<'_>) -> Vec<Check> {
    let p = 3.min(ctx.frames());
    let options = RunOptions {
        partitions: Some(p),
        // One thread: partitions complete, and are merged, in index order. (With more,
        // completion order varies, and so may float sums; `shuffle_merges` shuffles the
        // completion order, so it does not fix the order either.)
        threads: Some(1),
        ..Default::default()
    };
    let title = "two identical runs give bit-identical results";
    let variant = format!("{p} partitions, 1 thread, run twice");
    let data = &ctx.primary().data;
    let first = ctx.subject.run(data, &ctx.subject.params, options.clone());
    let second = ctx.subject.run(data, &ctx.subject.params, options);
    let e = match (first, second) {
        (Ok(a), Ok(b)) => {
            let bounds = Bounds::fixed(&ctx.config.tolerance);
            compare_results(&variant, &a.udfs[0], &b.udfs[0], &bounds, Layout::Data, true)
        }
        (Err(e), _) => Evidence::fail(&variant, format!("first run: {e}")),
        (_, Err(e)) => Evidence::fail(&variant, format!("second run (the first worked): {e}")),
    };
    vec![Check::from_evidence(Group::Determinism, "repeat", title, vec![e])]
}
