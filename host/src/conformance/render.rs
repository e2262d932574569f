//! The report as text for a human: one line per check, the failing evidence under it
//! (all evidence when verbose), resource use, and a summary.

use super::report::{Evidence, Report, Status};
use std::fmt::Write;

/// Failed variants shown per check unless verbose.
const MAX_FAILURES: usize = 3;

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn evidence_lines(out: &mut String, e: &Evidence) {
    let _ = writeln!(out, "          {:<4} {}: {}", e.status.label(), e.variant, e.message);
    let mut details = Vec::new();
    if let (Some(index), Some(expected), Some(actual)) = (&e.first_index, &e.expected, &e.actual) {
        let buffer = e.buffer.as_deref().map_or(String::new(), |b| format!("'{b}' "));
        details.push(format!("first difference at {buffer}{index:?}: expected {expected}, got {actual}"));
    }
    if let (Some(abs), Some(rel)) = (e.max_abs_diff, e.max_rel_diff)
        && (abs > 0.0 || rel > 0.0)
    {
        details.push(format!("max abs diff {abs:.3e}, max rel diff {rel:.3e}"));
        if let Some(used) = e.tolerance_used.filter(|u| u.is_finite()) {
            details.push(format!("{:.1} % of the tolerance", 100.0 * used));
        }
    }
    if !details.is_empty() {
        let _ = writeln!(out, "               {}", details.join("; "));
    }
    if let Some(rounding) = &e.rounding {
        let _ = writeln!(out, "               {rounding}");
    }
}

/// The text report.
pub(crate) fn text(report: &Report, verbose: bool) -> String {
    let mut out = String::new();
    for p in &report.plugins {
        let _ = writeln!(out, "udf-host conformance: {} {} ({})", p.name, p.version, p.source);
        let _ = writeln!(
            out,
            "  methods: {}{}; custom merge: {}; custom results: {}; main-side preprocess: {}",
            p.methods.join(", "),
            p.method.map_or(String::new(), |m| format!(" (baseline uses {m})")),
            yes(p.custom_merge),
            yes(p.custom_results),
            yes(p.main_preprocess)
        );
    }
    if let Some(params) = report.params.as_object()
        && !params.is_empty()
    {
        let list: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(out, "  params: {}", list.join(", "));
    }
    for d in &report.datasets {
        let _ = writeln!(
            out,
            "  data '{}': nav {:?}, sig {:?}, {} ({})",
            d.name, d.nav_shape, d.sig_shape, d.dtype, d.source
        );
    }
    match &report.tolerance {
        Some(t) if t.accumulation => {
            let _ = writeln!(
                out,
                "  tolerance: float32/complex64 rtol {:e}, float64/complex128 rtol {:e}, widened to the rounding of the \
                 accumulation, 2·(n + 8)·u; atol {:e}; integers and bools exact; determinism and purity bit for bit",
                t.rtol32, t.rtol64, t.atol
            );
        }
        Some(t) => {
            let _ = writeln!(
                out,
                "  tolerance (fixed): float32/complex64 rtol {:e}, float64/complex128 rtol {:e}, atol {:e}; integers \
                 and bools exact; determinism and purity bit for bit",
                t.rtol32, t.rtol64, t.atol
            );
        }
        None => {
            let _ = writeln!(out, "  tolerance: each case's own (case.json); integers and bools exact");
        }
    }
    let _ = writeln!(out);
    let width = report.checks.iter().map(|c| c.id.len()).max().unwrap_or(0);
    for c in &report.checks {
        let _ = writeln!(out, "  {:<4}  {:<width$}  {}", c.status.label(), c.id, c.title);
        let _ = writeln!(out, "        {:<width$}  {}", "", c.summary);
        let shown: Vec<&Evidence> = c.evidence.iter().filter(|e| verbose || e.status == Status::Fail).collect();
        let limit = if verbose { shown.len() } else { MAX_FAILURES };
        for e in shown.iter().take(limit) {
            evidence_lines(&mut out, e);
        }
        if shown.len() > limit {
            let _ = writeln!(
                out,
                "          ... and {} more failed variants (-v or --json shows all)",
                shown.len() - limit
            );
        }
    }
    if !report.resources.is_empty() {
        let _ = writeln!(out, "\n  resource use (reported, not judged):");
        for r in &report.resources {
            let _ = writeln!(
                out,
                "    {}: {} partition(s), peak memory {:.1} MiB per instance, {} tiles ({} per partition at most), \
                 {:.1} µs per tile",
                r.run,
                r.partitions,
                r.peak_memory as f64 / f64::from(1u32 << 20),
                r.process_calls,
                r.tiles_per_partition,
                r.seconds_per_tile * 1e6
            );
            if r.peak_arrays > 0 {
                let _ = writeln!(
                    out,
                    "      host arrays: at most {} alive at once, {} left after the partition's export",
                    r.peak_arrays, r.arrays_left
                );
            }
        }
    }
    let c = &report.counts;
    let _ = writeln!(
        out,
        "\n  {} checks: {} pass, {} fail, {} n/a in {:.1} s — {}",
        report.checks.len(),
        c.pass,
        c.fail,
        c.not_applicable,
        report.seconds,
        if report.passed { "CONFORMS" } else { "DOES NOT CONFORM" }
    );
    out
}
