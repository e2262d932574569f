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
//! [`check_plugin`] runs the suite on one UDF and returns a [`Report`], assembled in one
//! place ([`Report::assemble`]); `report` holds its types (also its JSON form, see
//! `docs/conformance.md`), `render` its text. The checks import only the report's types
//! and the shared pieces below them. The CLI command `udf-host conformance` is a thin
//! wrapper.

mod compare;
pub mod declarations;
pub mod determinism;
mod geometry;
pub mod invariance;
pub mod merge;
mod render;
mod report;
pub mod resources;
pub mod robustness;
pub mod roi;
mod subject;
mod synthetic;
pub mod vectors;

pub use compare::Tolerance;
pub use report::{Check, Counts, DataInfo, Evidence, Group, PluginInfo, REPORT_FORMAT, Report, ResourceUse, Status};
pub use synthetic::Synthetic;

use crate::dataset::Dataset;
use crate::exec::RunError;
use crate::udf::{Params, Udf};
use std::sync::Arc;
use std::time::Instant;
use subject::{Ctx, Executed, Subject};

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
    let data_info = datasets.iter().map(|d| d.info.clone()).collect();
    let nav = datasets[0].data.shape().nav.clone();
    let subject = Subject { udf: udf.clone(), params: config.params.clone(), nav };
    let baselines = baselines(&subject, &datasets);
    let ctx = Ctx::new(subject, config, datasets, baselines);
    let mut plugin = PluginInfo::of(udf.as_ref());
    let mut resources = Vec::new();
    if let Ok(base) = ctx.baseline() {
        plugin.method = Some(base.results.udfs[0].method.name());
        resources.push(resources::usage("baseline", &base.results));
    }
    let mut checks = vec![run_check(&ctx)];
    let wanted = |g: Group| config.groups.as_ref().is_none_or(|gs| gs.contains(&g));
    for group in Group::SUITE.into_iter().skip(1).filter(|&g| wanted(g)) {
        checks.extend(group_checks(&ctx, group, &mut resources));
    }
    let tolerance = Some(config.tolerance);
    Ok(Report::assemble(vec![plugin], &config.params, tolerance, data_info, checks, resources, started))
}

/// The baseline of every dataset: 1 partition, 1 thread, negotiated tiling. A plugin
/// that ran out of time on one is not given the time again on the others: the kit takes
/// about one `--timeout` for a plugin that hangs (or sleeps), not one per run.
fn baselines(subject: &Subject, datasets: &[synthetic::Named]) -> Vec<Result<Executed, RunError>> {
    let mut timed_out: Option<String> = None;
    datasets
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
        .collect()
}

/// The checks of `group` (its resource measurements added to `resources`); a group
/// other than the declarations is not applicable when the baseline failed.
fn group_checks(ctx: &Ctx<'_>, group: Group, resources: &mut Vec<ResourceUse>) -> Vec<Check> {
    if let Err(e) = ctx.baseline()
        && group != Group::Declarations
    {
        return vec![Check::not_applicable(
            group,
            "*",
            "all checks of the group",
            format!("not run: the baseline run failed ({})", first_line(&e.to_string())),
        )];
    }
    match group {
        Group::Invariance => invariance::check(ctx),
        Group::Roi => roi::check(ctx),
        Group::Merge => merge::check(ctx),
        Group::Declarations => declarations::check(ctx),
        Group::Determinism => determinism::check(ctx),
        Group::Robustness => robustness::check(ctx),
        Group::Resources => {
            let (checks, usage) = resources::check(ctx);
            resources.extend(usage);
            checks
        }
        Group::Run | Group::Vectors => Vec::new(),
    }
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
    let checks = vectors::run(dir, udfs, threads, tolerance)?;
    Ok(Report::assemble(plugins, &Params::default(), tolerance, Vec::new(), checks, Vec::new(), started))
}
