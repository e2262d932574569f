//! Declarations: the results match the declared buffers (names, kinds, dtypes,
//! shapes), private buffers never come back, result-only buffers are produced, and
//! `get_results` is pure.
//!
//! The host enforces the `get_results` and export rules as contract errors; here they
//! become a failed check carrying the host's message.

use super::compare::{Bounds, Layout, compare_results};
use super::subject::Ctx;
use super::{Check, Evidence, Group};
use crate::exec::RunError;
use crate::udf::{BufferKind, BufferUse, CallError};

/// Whether a run error is a broken declaration rule.
fn declaration_error(e: &RunError) -> bool {
    match e {
        RunError::Udf { error: CallError::Contract(_), .. } => true,
        RunError::Invalid(m) => m.contains(" declares "),
        _ => false,
    }
}

/// The declaration checks.
pub(crate) fn check(ctx: &Ctx<'_>) -> Vec<Check> {
    let buffers_title = "results match the declared buffers; private ones are not returned, result-only ones are";
    let pure_title = "get_results is pure: asking for the results twice gives the same answer";
    let base = match ctx.baseline() {
        Ok(b) => b,
        Err(e) if declaration_error(e) => {
            let evidence = vec![Evidence::fail("baseline", e.to_string())];
            return vec![
                Check::from_evidence(Group::Declarations, "buffers", buffers_title, evidence),
                Check::not_applicable(Group::Declarations, "pure_results", pure_title, "not run: the baseline failed"),
            ];
        }
        Err(e) => {
            let reason = format!("not run: the baseline run failed ({})", super::first_line(&e.to_string()));
            return vec![
                Check::not_applicable(Group::Declarations, "buffers", buffers_title, reason.clone()),
                Check::not_applicable(Group::Declarations, "pure_results", pure_title, reason),
            ];
        }
    };
    let shape = ctx.primary().data.shape();
    let results = &base.results.udfs[0];
    let mut evidence = Vec::new();
    for d in &base.decls {
        let variant = format!("buffer '{}'", d.name);
        let found = results.buffer(&d.name);
        if d.usage == BufferUse::Private {
            evidence.push(match found {
                Some(_) => Evidence::fail(&variant, "private, but it is among the results"),
                None => Evidence::pass(&variant, "private: not among the results"),
            });
            continue;
        }
        let Some(b) = found else {
            evidence.push(Evidence::fail(&variant, "declared, but not among the results"));
            continue;
        };
        let mut expected = match d.kind {
            BufferKind::Nav => shape.nav.clone(),
            BufferKind::Sig => shape.sig.clone(),
            BufferKind::Single => Vec::new(),
        };
        expected.extend_from_slice(&d.extra_shape);
        if expected.is_empty() {
            expected.push(1);
        }
        let raw = d.storage_shape(shape.nav_len(), &shape.sig);
        let mut problems = Vec::new();
        if b.kind != d.kind {
            problems.push(format!("kind {:?} instead of {:?}", b.kind, d.kind));
        }
        if b.dtype().kind() != d.dtype.kind() {
            problems.push(format!("dtype {} is not of the kind of the declared {}", b.dtype(), d.dtype));
        }
        if b.data.shape() != expected.as_slice() {
            problems.push(format!("shape {:?} instead of {expected:?}", b.data.shape()));
        }
        if b.raw.shape() != raw.as_slice() {
            problems.push(format!("raw shape {:?} instead of {raw:?}", b.raw.shape()));
        }
        let kind = d.kind.name();
        let usage = if d.usage == BufferUse::ResultOnly { ", result-only" } else { "" };
        evidence.push(if problems.is_empty() {
            Evidence::pass(&variant, format!("{kind} {} {expected:?}{usage}, as declared", b.dtype()))
        } else {
            Evidence::fail(&variant, problems.join("; "))
        });
    }
    for b in &results.buffers {
        if !base.decls.iter().any(|d| d.name == b.name) {
            evidence.push(Evidence::fail(&format!("buffer '{}'", b.name), "among the results, but never declared"));
        }
    }
    let mut checks = vec![Check::from_evidence(Group::Declarations, "buffers", buffers_title, evidence)];

    if !ctx.subject.udf.description().custom_results {
        checks.push(Check::not_applicable(
            Group::Declarations,
            "pure_results",
            pure_title,
            "no custom get_results: the host passes the merged buffers through",
        ));
    } else {
        let e = match &base.again {
            Some(Ok(again)) => compare_results(
                "results asked for twice",
                results,
                &again.udfs[0],
                &Bounds::fixed(&ctx.config.tolerance),
                Layout::Data,
                true,
            ),
            Some(Err(e)) => Evidence::fail("results asked for twice", format!("the second call failed: {e}")),
            None => Evidence::na("results asked for twice", "not asked twice"),
        };
        checks.push(Check::from_evidence(Group::Declarations, "pure_results", pure_title, vec![e]));
    }
    checks
}
