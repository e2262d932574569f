//! Recording a run: drive a planned in-process run to its end — snapshots on the way,
//! interrupts routed to it ([`crate::interrupt`]) — and write its results directory,
//! whatever happened: complete results, or what was merged before a failure or an
//! interrupt, with `results.json` saying which (a [`RunSummary`]).
//!
//! This is what `udf-host run` does after planning; any front end that writes results
//! calls the same [`record`].
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let (run, plugins): (udf_host::exec::Run, Vec<udf_host::report::PluginLoad>) = todo!();
//! use udf_host::output::record::{self, Destination};
//! use udf_host::report::RunSummary;
//! let started = std::time::Instant::now();
//! let summary = RunSummary::planned(&run, plugins, Default::default());
//! let to = Destination { dir: "results".into(), force: false, previews: true, snapshot_every: None };
//! let recorded = record::record(run, summary, &to, started, &mut ())?;
//! println!("{}", recorded.summary.status.name());
//! # Ok(()) }
//! ```

use super::OutputError;
use super::snapshot::Snapshots;
use crate::exec::{PartitionFailure, Progress, Run, RunError, RunIter};
use crate::preview::{self, PreviewError, PreviewOptions};
use crate::report::{RunStatus, RunSummary};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where and how a run's results are written.
#[derive(Debug, Clone)]
pub struct Destination {
    /// The results directory (created; replaced only with `force`).
    pub dir: PathBuf,
    /// Replace `dir` if it exists.
    pub force: bool,
    /// A PNG preview beside every image result, shown in `index.html`.
    pub previews: bool,
    /// Snapshots of the results merged so far in `dir/partial/` at most this often.
    pub snapshot_every: Option<Duration>,
}

/// What a front end shows while a run is recorded. Every method does nothing by default:
/// `&mut ()` watches nothing.
pub trait Watch {
    /// The run started: `progress` reads it (frames done) and can interrupt it.
    fn started(&mut self, progress: Progress) {
        let _ = progress;
    }

    /// A partition failed and the run goes on with the others (`keep_going`).
    fn partition_failed(&mut self, error: &RunError) {
        let _ = error;
    }

    /// Processing is over; the results are being written.
    fn finished(&mut self) {}
}

impl Watch for () {}

/// A recorded run.
#[derive(Debug)]
pub struct Recorded {
    /// What `results.json` says.
    pub summary: RunSummary,
    /// The failure that stopped the run (its status is then `failed`), or that cost a UDF
    /// its results (`partial`).
    pub stopped_by: Option<RunError>,
}

/// Why a run was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The run failed for a reason the user can fix before anything was merged: nothing
    /// is written.
    #[error(transparent)]
    Run(RunError),
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error(transparent)]
    Preview(#[from] PreviewError),
}

/// Run `run` to its end and write its results as `to` says: `summary` is its
/// [`RunSummary::planned`] (its timings, if set, keep their load and plan times);
/// `started` is when the work for it began (for the total time); `watch` is told what
/// happens. Interrupts ([`crate::interrupt::press`]) stop the run and write what is
/// merged.
///
/// # Errors
/// [`RecordError::Run`] when the run fails for bad input before anything is merged;
/// errors writing the results or previews (nothing half-written is left). A run that
/// stops after merging something is recorded: see [`Recorded::stopped_by`].
pub fn record(
    run: Run,
    mut summary: RunSummary,
    to: &Destination,
    started: Instant,
    watch: &mut dyn Watch,
) -> Result<Recorded, RecordError> {
    let mut snapshots = to.snapshot_every.map(|every| Snapshots::new(&to.dir, every, summary.clone()));
    let names: Vec<String> = run.udfs().map(|(name, _, _)| name.to_owned()).collect();
    let mut iter = run.iter();
    let progress = iter.progress();
    // Routed until the results are written: a press while writing lets the writing finish.
    let _routing = crate::interrupt::Routing::to(Arc::new(move || progress.interrupt()));
    watch.started(iter.progress());
    let driven = drive(&mut iter, snapshots.as_mut(), watch);
    watch.finished();
    let stopped_by = driven.map_err(RecordError::Run)?;
    crate::interrupt::writing();
    let (results, udf_failures) = iter.results_each();
    let account = Account::of(&iter, &names, udf_failures, stopped_by);
    let previews = if to.previews { preview::run_previews(&results, &PreviewOptions::default())? } else { Vec::new() };
    summary.record_results(&results, &previews);
    summary.finish(account.status, &account.failures, account.partitions_failed, &results.stats, started);
    // The snapshots made the directory (holding only `partial/`): the results replace it.
    let replace = to.force || snapshots.as_ref().is_some_and(Snapshots::made_output_dir);
    let staged = super::stage(&to.dir, &results, &summary, &previews, to.previews, replace)?;
    test_pause_before_commit();
    staged.commit()?;
    if let Some(snapshots) = snapshots {
        snapshots.finish();
    }
    Ok(Recorded { summary, stopped_by: account.stopped_by })
}

/// Iterate the run to its end (snapshots after each step): `Ok(Some(e))` for the failure
/// that stopped it, `Err` for one the user must fix before anything was merged.
fn drive(
    iter: &mut RunIter,
    mut snapshots: Option<&mut Snapshots>,
    watch: &mut dyn Watch,
) -> Result<Option<RunError>, RunError> {
    let keep_going = iter.keeps_going();
    while let Some(step) = iter.next() {
        if let Err(e) = step {
            if e.is_user_error() && iter.damage().iter().all(|merged| !merged) {
                return Err(e);
            }
            if !keep_going || matches!(e, RunError::Cancelled) {
                return Ok(Some(e));
            }
            watch.partition_failed(&e);
        }
        if let Some(snapshots) = snapshots.as_deref_mut() {
            snapshots.tick(iter);
        }
    }
    Ok(None)
}

/// How a run ended, as `results.json` tells it.
struct Account {
    status: RunStatus,
    /// Every failure: the run's (partitions, merges), then each UDF's that has no results.
    failures: Vec<PartitionFailure>,
    /// Partitions that failed themselves (not a UDF's merge of them).
    partitions_failed: usize,
    stopped_by: Option<RunError>,
}

impl Account {
    /// Every UDF that has results keeps them; one whose merge or `get_results` failed is
    /// listed among the failures instead (the first failure stays the reported one).
    fn of(
        iter: &RunIter,
        names: &[String],
        udf_failures: Vec<(usize, RunError)>,
        stopped_by: Option<RunError>,
    ) -> Self {
        let is_merge = |f: &PartitionFailure| f.at.as_ref().is_some_and(|at| at.method == "merge");
        let mut failures = iter.failures().to_vec();
        let partitions_failed = failures.iter().filter(|f| f.partition.is_some() && !is_merge(f)).count();
        let mut first_udf_failure = None;
        for (u, e) in udf_failures {
            let name = &names[u];
            // A failed merge is recorded by the run already.
            if failures.iter().any(|f| f.udf.as_deref() == Some(name.as_str()) && is_merge(f)) {
                continue;
            }
            let at = match &e {
                RunError::Udf { at, .. } => Some(at.clone()),
                _ => None,
            };
            failures.push(PartitionFailure {
                partition: None,
                frames: None,
                udf: Some(name.clone()),
                at,
                error: e.to_string(),
            });
            first_udf_failure.get_or_insert(e);
        }
        let stopped_by = stopped_by.or(first_udf_failure);
        let status = if iter.interrupted() {
            RunStatus::Interrupted
        } else if stopped_by.is_some() {
            RunStatus::Failed
        } else if !failures.is_empty() {
            RunStatus::Partial
        } else {
            RunStatus::Complete
        };
        Account { status, failures, partitions_failed, stopped_by }
    }
}

/// For the interrupt tests (`tests/all/interrupt.rs`) only: with
/// `UDF_HOST_TEST_PAUSE_BEFORE_COMMIT=FILE`, create FILE once the results are staged and
/// wait (at most a minute) until it is removed, so a test can press Ctrl-C while
/// results are being written.
fn test_pause_before_commit() {
    let Some(marker) = std::env::var_os("UDF_HOST_TEST_PAUSE_BEFORE_COMMIT") else { return };
    let marker = PathBuf::from(marker);
    if std::fs::write(&marker, b"staged").is_err() {
        return;
    }
    let started = Instant::now();
    while marker.exists() && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(10));
    }
}
