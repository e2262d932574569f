//! The plugin conformance kit: runs a UDF under many executions of the same input and
//! reports, check by check, whether it obeys the contract (`docs/contract.md`).
//!
//! | file | checks |
//! |------|--------|
//! | [`invariance`] | same results for any partitioning, tiling, thread count, merge order, method |
//! | [`roi`] | a ROI gives the selected frames' results at their places in the scan; empty ROI; fill values outside |
//! | [`merge`] | merge is order-independent and associative on the plugin's own partition results |
//! | [`declarations`] | results match the declarations; `get_results` is pure |
//! | [`determinism`] | identical runs give bit-identical results |
//! | [`robustness`] | empty partitions, one frame, a 1-D scan, tiny and non-square frames, NaN/inf, extreme values, bad params |
//! | [`resources`] | peak memory and time per tile (reported), memory growth per tile (leaks) |
//! | [`vectors`] | language-neutral test vectors (`tests/vectors/`) |
//!
//! Shared by the checks: `compare` (the tolerance model, [`Tolerance`]), `geometry`
//! (whether results depend on the scan's geometry), `subject` (running the plugin),
//! `synthetic` (the data).
//!
//! [`check_plugin`] runs the suite on one UDF and returns a [`Report`]; the types here
//! are the report (also its JSON form, see `docs/conformance.md`). The CLI command
//! `udf-host conformance` is a thin wrapper.

mod compare;
pub mod declarations;
pub mod determinism;
mod geometry;
pub mod invariance;
pub mod merge;
mod render;
pub mod resources;
pub mod robustness;
pub mod roi;
mod subject;
mod synthetic;
pub mod vectors;

pub use compare::Tolerance;
pub use synthetic::Synthetic;

use crate::dataset::Dataset;
use crate::exec::RunError;
use crate::udf::{Params, Udf};
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;
use subject::{Ctx, Executed, Subject};

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

    fn buffer(mut self, name: &str) -> Self {
        self.buffer = Some(name.to_owned());
        self
    }

    fn diff(mut self, diff: &compare::Diff) -> Self {
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
    fn of(udf: &dyn Udf) -> Self {
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
    fn new(plugins: Vec<PluginInfo>, params: &Params, tolerance: Option<Tolerance>) -> Self {
        Report {
            format: REPORT_FORMAT,
            plugins,
            params: serde_json::Value::Object(params.iter().map(|p| (p.name.clone(), p.value.to_json())).collect()),
            datasets: Vec::new(),
            tolerance,
            checks: Vec::new(),
            resources: Vec::new(),
            counts: Counts::default(),
            passed: true,
            seconds: 0.0,
        }
    }

    fn finish(&mut self, started: Instant) {
        let count = |s| self.checks.iter().filter(|c| c.status == s).count();
        self.counts = Counts {
            pass: count(Status::Pass),
            fail: count(Status::Fail),
            not_applicable: count(Status::NotApplicable),
        };
        self.passed = self.counts.fail == 0;
        self.seconds = started.elapsed().as_secs_f64();
    }

    /// A check by id.
    pub fn check(&self, id: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.id == id)
    }

    /// Ids of the failed checks.
    pub fn failed(&self) -> Vec<&str> {
        self.checks.iter().filter(|c| c.status == Status::Fail).map(|c| c.id.as_str()).collect()
    }

    /// The report for a human (see [`render`]).
    pub fn to_text(&self, verbose: bool) -> String {
        render::text(self, verbose)
    }
}

/// Where the suite's data comes from.
#[derive(Clone)]
pub enum DataSource {
    /// Generated datasets (the default): LiberTEM-style 0/1 values with outliers, and
    /// uniform floats.
    Synthetic(Synthetic),
    /// A real dataset (`--data`).
    Dataset { name: String, dataset: Arc<dyn Dataset> },
}

/// How to run the suite.
#[derive(Clone)]
pub struct Config {
    /// Parameters for the plugin (defaults fill the rest).
    pub params: Params,
    pub data: DataSource,
    pub tolerance: Tolerance,
    /// The largest thread count tried (default 4).
    pub threads: usize,
    /// Run only these groups (default: all of [`Group::SUITE`]). The baseline always runs.
    pub groups: Option<Vec<Group>>,
    /// Seed of the random ROIs and shuffled merge orders.
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            params: Params::default(),
            data: DataSource::Synthetic(Synthetic::default()),
            tolerance: Tolerance::default(),
            threads: 4,
            groups: None,
            seed: 1,
        }
    }
}

/// Why the suite could not run at all (the plugin's failures are checks, not errors).
#[derive(Debug, thiserror::Error)]
pub enum ConformanceError {
    /// The synthetic data or derived datasets could not be built.
    #[error("cannot prepare the data: {0}")]
    Data(#[from] crate::dataset::DatasetError),
    /// Options that cannot work.
    #[error("{0}")]
    Options(String),
    /// A vector set could not be read.
    #[error("vectors: {0}")]
    Vectors(String),
}

/// Run the suite on `udf`.
///
/// # Errors
/// Only if the data cannot be prepared or the options are wrong; everything the plugin
/// does wrong is a failed check in the report.
pub fn check_plugin(udf: Arc<dyn Udf>, config: &Config) -> Result<Report, ConformanceError> {
    let started = Instant::now();
    if config.threads == 0 {
        return Err(ConformanceError::Options("the thread count must be at least 1".into()));
    }
    let desc = udf.description();
    crate::params::resolve(&desc.name, &desc.params, &config.params).map_err(ConformanceError::Options)?;
    let datasets = synthetic::datasets(&config.data)?;
    let mut report = Report::new(vec![PluginInfo::of(udf.as_ref())], &config.params, Some(config.tolerance));
    report.datasets = datasets.iter().map(|d| d.info.clone()).collect();
    let primary_nav = datasets[0].data.shape().nav.clone();
    let subject = Subject { udf: udf.clone(), params: config.params.clone(), nav: primary_nav };

    // The baseline of every dataset: 1 partition, 1 thread, negotiated tiling. A plugin
    // that ran out of time on one is not given the time again on the others: the kit
    // takes about one --timeout for a plugin that hangs (or sleeps), not one per run.
    let mut timed_out: Option<String> = None;
    let baselines: Vec<Result<Executed, RunError>> = datasets
        .iter()
        .map(|d| {
            if let Some(first) = &timed_out {
                return Err(RunError::Invalid(format!("not run: the baseline on '{first}' timed out")));
            }
            let options = crate::exec::RunOptions { partitions: Some(1), threads: Some(1), ..Default::default() };
            let outcome = subject.execute(&d.data, &subject.params, options, true);
            if outcome.as_ref().err().is_some_and(is_timeout) {
                timed_out = Some(d.info.name.clone());
            }
            outcome
        })
        .collect();
    let ctx = Ctx::new(subject, config, datasets, baselines);
    if let Ok(base) = ctx.baseline() {
        report.plugins[0].method = Some(base.results.udfs[0].method.name());
        report.resources.push(resources::usage("baseline", &base.results));
    }
    report.checks.push(run_check(&ctx));
    let wanted = |g: Group| config.groups.as_ref().is_none_or(|gs| gs.contains(&g));
    for group in Group::SUITE.into_iter().skip(1).filter(|&g| wanted(g)) {
        if let Err(e) = ctx.baseline()
            && group != Group::Declarations
        {
            report.checks.push(Check::not_applicable(
                group,
                "*",
                "all checks of the group",
                format!("not run: the baseline run failed ({})", first_line(&e.to_string())),
            ));
            continue;
        }
        let checks = match group {
            Group::Invariance => invariance::check(&ctx),
            Group::Roi => roi::check(&ctx),
            Group::Merge => merge::check(&ctx),
            Group::Declarations => declarations::check(&ctx),
            Group::Determinism => determinism::check(&ctx),
            Group::Robustness => robustness::check(&ctx),
            Group::Resources => {
                let (checks, usage) = resources::check(&ctx);
                report.resources.extend(usage);
                checks
            }
            Group::Run | Group::Vectors => Vec::new(),
        };
        report.checks.extend(checks);
    }
    report.finish(started);
    Ok(report)
}

/// `run.baseline`: the plugin runs on every dataset with 1 partition and 1 thread.
fn run_check(ctx: &Ctx<'_>) -> Check {
    let evidence = ctx
        .datasets
        .iter()
        .zip(&ctx.baselines)
        .map(|(d, b)| {
            let variant = format!("{}: 1 partition, 1 thread", d.info.name);
            match b {
                Ok(e) => Evidence::pass(
                    &variant,
                    format!(
                        "ran: {} method, input {}, tile shape {:?}",
                        e.results.udfs[0].method.name(),
                        e.input_dtype,
                        e.tiling.tile_shape()
                    ),
                ),
                Err(e) => Evidence::fail(&variant, e.to_string()),
            }
        })
        .collect();
    Check::from_evidence(Group::Run, "baseline", "the plugin runs on the data with default settings", evidence)
}

/// Whether a run failed because a call into the plugin ran out of time.
fn is_timeout(e: &RunError) -> bool {
    matches!(e, RunError::Udf { error: crate::udf::CallError::Trap { message, .. }, .. } if message.starts_with("timed out"))
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

/// Run vector cases from `dir` against `udfs` (matched by name).
///
/// # Errors
/// The vector set cannot be read or is malformed.
pub fn check_vectors(
    dir: &std::path::Path,
    udfs: &[Arc<dyn Udf>],
    threads: usize,
    tolerance: Option<Tolerance>,
) -> Result<Report, ConformanceError> {
    let started = Instant::now();
    let plugins = udfs.iter().map(|u| PluginInfo::of(u.as_ref())).collect();
    let mut report = Report::new(plugins, &Params::default(), tolerance);
    report.checks = vectors::run(dir, udfs, threads, tolerance)?;
    report.finish(started);
    Ok(report)
}
