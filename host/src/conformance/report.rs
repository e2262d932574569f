//! The conformance report: the status of each check with its evidence, the plugins and
//! datasets checked, resource measurements, and the verdict ([`Report`], serialised as
//! the JSON report of `docs/conformance.md`). The checks build [`Check`]s from
//! [`Evidence`]; [`Report::assemble`] makes the report of a run of the suite.

use super::compare::Tolerance;
use crate::udf::{Params, Udf};
use serde::Serialize;
use std::time::Instant;

/// The outcome of a check or of one of its variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Status {
    #[serde(rename = "pass")]
    Pass,
    #[serde(rename = "fail")]
    Fail,
    /// Not applicable to this plugin or data (the evidence says why).
    #[serde(rename = "n/a")]
    NotApplicable,
}

impl Status {
    /// `pass`, `FAIL`, `n/a`.
    pub fn label(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "FAIL",
            Status::NotApplicable => "n/a",
        }
    }
}

/// The groups of checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Group {
    /// The baseline run: the plugin runs at all.
    Run,
    Invariance,
    Roi,
    Merge,
    Declarations,
    Determinism,
    Robustness,
    Resources,
    Vectors,
}

impl Group {
    /// Every group of the suite (vectors run separately).
    pub const SUITE: [Group; 8] = [
        Group::Run,
        Group::Invariance,
        Group::Roi,
        Group::Merge,
        Group::Declarations,
        Group::Determinism,
        Group::Robustness,
        Group::Resources,
    ];

    /// The lowercase name used in check ids and `--check`.
    pub fn name(self) -> &'static str {
        match self {
            Group::Run => "run",
            Group::Invariance => "invariance",
            Group::Roi => "roi",
            Group::Merge => "merge",
            Group::Declarations => "declarations",
            Group::Determinism => "determinism",
            Group::Robustness => "robustness",
            Group::Resources => "resources",
            Group::Vectors => "vectors",
        }
    }

    /// Parse a group name.
    pub fn parse(name: &str) -> Option<Group> {
        let name = name.trim().to_ascii_lowercase();
        Group::SUITE.into_iter().chain([Group::Vectors]).find(|g| g.name() == name)
    }
}

/// One piece of evidence: a variant (an execution, a merge tree, a bad parameter) and
/// what came of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evidence {
    /// What was run, e.g. `float: 7 partitions` or `tile 5x3x3`.
    pub variant: String,
    pub status: Status,
    /// What was found, in words.
    pub message: String,
    /// The result buffer the numbers refer to (the first that differs, or the one with
    /// the largest difference).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buffer: Option<String>,
    /// Largest absolute difference over finite elements.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_abs_diff: Option<f64>,
    /// Largest relative difference over finite elements.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_rel_diff: Option<f64>,
    /// Elements out of tolerance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mismatches: Option<usize>,
    /// Index (in the compared array) of the first element out of tolerance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_index: Option<Vec<usize>>,
    /// The reference value there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// The value found there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actual: Option<String>,
    /// The relative tolerance applied to `buffer` (float comparisons).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtol: Option<f64>,
    /// The absolute tolerance applied to `buffer` (float comparisons).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub atol: Option<f64>,
    /// The largest difference as a fraction of what the tolerance allows there (over all
    /// compared float results; below 1 when they agree).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tolerance_used: Option<f64>,
    /// Float results that agree only within the rounding of the accumulation (beyond the
    /// floor tolerance of their dtype), and why that rounding applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rounding: Option<String>,
}

impl Evidence {
    fn new(variant: &str, status: Status, message: impl Into<String>) -> Self {
        Evidence {
            variant: variant.to_owned(),
            status,
            message: message.into(),
            buffer: None,
            max_abs_diff: None,
            max_rel_diff: None,
            mismatches: None,
            first_index: None,
            expected: None,
            actual: None,
            rtol: None,
            atol: None,
            tolerance_used: None,
            rounding: None,
        }
    }

    /// Passing evidence.
    pub fn pass(variant: &str, message: impl Into<String>) -> Self {
        Self::new(variant, Status::Pass, message)
    }

    /// Failing evidence.
    pub fn fail(variant: &str, message: impl Into<String>) -> Self {
        Self::new(variant, Status::Fail, message)
    }

    /// A variant that does not apply (the message says why).
    pub fn na(variant: &str, message: impl Into<String>) -> Self {
        Self::new(variant, Status::NotApplicable, message)
    }

    pub(super) fn buffer(mut self, name: &str) -> Self {
        self.buffer = Some(name.to_owned());
        self
    }

    pub(super) fn diff(mut self, diff: &super::compare::Diff) -> Self {
        if diff.note.is_none() {
            self.max_abs_diff = Some(diff.max_abs);
            self.max_rel_diff = Some(diff.max_rel);
            self.mismatches = Some(diff.mismatches);
        }
        if let Some((index, expected, actual)) = &diff.first {
            self.first_index = Some(index.clone());
            self.expected = Some(expected.clone());
            self.actual = Some(actual.clone());
        }
        self
    }
}

/// One check: its id (`group.name`), what it verifies, its status and the evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// `invariance.partitions`, `roi.subset`, ...
    pub id: String,
    pub group: Group,
    /// What the check verifies, in one line.
    pub title: String,
    /// Fail if any evidence fails; else pass if any passes; else n/a.
    pub status: Status,
    /// The outcome in one line.
    pub summary: String,
    pub evidence: Vec<Evidence>,
}

impl Check {
    /// A check whose status and summary follow from its evidence.
    pub fn from_evidence(group: Group, name: &str, title: &str, evidence: Vec<Evidence>) -> Check {
        let failed = evidence.iter().filter(|e| e.status == Status::Fail).count();
        let passed = evidence.iter().filter(|e| e.status == Status::Pass).count();
        let (status, summary) = if failed > 0 {
            let first = evidence
                .iter()
                .find(|e| e.status == Status::Fail)
                .map_or(String::new(), |e| format!("; first: {}: {}", e.variant, e.message));
            (Status::Fail, format!("{failed} of {} {} failed{first}", failed + passed, variants(failed + passed)))
        } else if passed > 0 {
            let worst = evidence
                .iter()
                .filter(|e| e.status == Status::Pass)
                .filter_map(|e| e.max_rel_diff.zip(e.max_abs_diff))
                .fold(None, |acc: Option<(f64, f64)>, (r, a)| match acc {
                    None => Some((r, a)),
                    Some((r0, a0)) => Some((r0.max(r), a0.max(a))),
                });
            let na: Vec<&Evidence> = evidence.iter().filter(|e| e.status == Status::NotApplicable).collect();
            let mut summary = format!("{passed} {} passed", variants(passed));
            if let Some((r, a)) = worst
                && (r > 0.0 || a > 0.0)
            {
                summary.push_str(&format!(" (largest difference: abs {a:.3e}, rel {r:.3e})"));
            }
            if evidence.iter().any(|e| e.status == Status::Pass && e.rounding.is_some()) {
                summary.push_str("; float differences within the rounding of the accumulation");
            }
            if let Some(first) = na.first() {
                summary.push_str(&format!(", {} not applicable ({}: {})", na.len(), first.variant, first.message));
            }
            (Status::Pass, summary)
        } else {
            let reason = evidence.first().map_or_else(|| "nothing to check".to_owned(), |e| e.message.clone());
            (Status::NotApplicable, reason)
        };
        Check { id: format!("{}.{name}", group.name()), group, title: title.to_owned(), status, summary, evidence }
    }

    /// A check that does not apply, and why.
    pub fn not_applicable(group: Group, name: &str, title: &str, reason: impl Into<String>) -> Check {
        let reason = reason.into();
        Check {
            id: format!("{}.{name}", group.name()),
            group,
            title: title.to_owned(),
            status: Status::NotApplicable,
            summary: reason,
            evidence: Vec::new(),
        }
    }
}

fn variants(n: usize) -> &'static str {
    if n == 1 { "variant" } else { "variants" }
}

/// What is known about the plugin under test.
#[derive(Debug, Clone, Serialize)]
pub struct PluginInfo {
    pub name: String,
    pub version: String,
    /// File path or `builtin:NAME`.
    pub source: String,
    /// Implemented methods.
    pub methods: Vec<&'static str>,
    /// The method the baseline run used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<&'static str>,
    pub custom_merge: bool,
    pub custom_results: bool,
    pub main_preprocess: bool,
}

impl PluginInfo {
    pub(super) fn of(udf: &dyn Udf) -> Self {
        let d = udf.description();
        PluginInfo {
            name: d.name.clone(),
            version: d.version.clone(),
            source: udf.source().to_owned(),
            methods: d.methods.iter().map(|m| m.name()).collect(),
            method: None,
            custom_merge: d.custom_merge,
            custom_results: d.custom_results,
            main_preprocess: d.main_preprocess,
        }
    }
}

/// A dataset the suite ran on.
#[derive(Debug, Clone, Serialize)]
pub struct DataInfo {
    /// `binary` (LiberTEM-style 0/1 with outliers), `float` (uniform), or `file`.
    pub name: String,
    pub nav_shape: Vec<usize>,
    pub sig_shape: Vec<usize>,
    pub dtype: String,
    /// Where it comes from: `synthetic (seed N)` or the file path.
    pub source: String,
}

/// Resource use of one run, per partition instance (reported, not judged).
#[derive(Debug, Clone, Serialize)]
pub struct ResourceUse {
    /// Which run: `baseline`, `memory: 8 frames`, ...
    pub run: String,
    pub partitions: usize,
    /// Tiles processed per partition (largest).
    pub tiles_per_partition: u64,
    /// Largest peak linear memory of a partition's instance, in bytes.
    pub peak_memory: usize,
    /// Calls into the instances (all partitions).
    pub calls: u64,
    /// `process` calls (tiles, all partitions).
    pub process_calls: u64,
    /// Seconds in `process` (all partitions).
    pub process_seconds: f64,
    /// `process_seconds / process_calls`.
    pub seconds_per_tile: f64,
    /// The most host arrays a partition's instance held at once.
    pub peak_arrays: usize,
    /// Host arrays a partition's instance still held after its export (the most of any
    /// partition): buffers and parameters kept as host arrays, and any it leaked.
    pub arrays_left: usize,
}

/// Counts of checks by status.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Counts {
    pub pass: usize,
    pub fail: usize,
    #[serde(rename = "n/a")]
    pub not_applicable: usize,
}

/// The result of the suite (or of a vector run).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Format tag of the JSON report.
    pub format: &'static str,
    /// The plugins checked (one for the suite; those given for vectors).
    pub plugins: Vec<PluginInfo>,
    /// The parameters given (as in `results.json`).
    pub params: serde_json::Value,
    pub datasets: Vec<DataInfo>,
    /// The tolerance used; `None` for vectors run with each case's own.
    pub tolerance: Option<Tolerance>,
    pub checks: Vec<Check>,
    pub resources: Vec<ResourceUse>,
    pub counts: Counts,
    /// No check failed.
    pub passed: bool,
    pub seconds: f64,
}

/// The JSON report's format tag.
pub const REPORT_FORMAT: &str = "udf-host-conformance/2";

impl Report {
    /// The report of a suite or vector run that started at `started`: the plugins checked,
    /// the parameters given, the tolerance, the datasets, the checks and the resource
    /// measurements; the counts and the verdict follow from the checks.
    pub(super) fn assemble(
        plugins: Vec<PluginInfo>,
        params: &Params,
        tolerance: Option<Tolerance>,
        datasets: Vec<DataInfo>,
        checks: Vec<Check>,
        resources: Vec<ResourceUse>,
        started: Instant,
    ) -> Self {
        let count = |s| checks.iter().filter(|c| c.status == s).count();
        let counts = Counts {
            pass: count(Status::Pass),
            fail: count(Status::Fail),
            not_applicable: count(Status::NotApplicable),
        };
        Report {
            format: REPORT_FORMAT,
            plugins,
            params: serde_json::Value::Object(params.iter().map(|p| (p.name.clone(), p.value.to_json())).collect()),
            datasets,
            tolerance,
            checks,
            resources,
            counts,
            passed: counts.fail == 0,
            seconds: started.elapsed().as_secs_f64(),
        }
    }

    /// A check by id.
    pub fn check(&self, id: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.id == id)
    }

    /// Ids of the failed checks.
    pub fn failed(&self) -> Vec<&str> {
        self.checks.iter().filter(|c| c.status == Status::Fail).map(|c| c.id.as_str()).collect()
    }

    /// The report for a human (see `render`).
    pub fn to_text(&self, verbose: bool) -> String {
        super::render::text(self, verbose)
    }
}
