//! The in-process engine: partitions on a rayon pool, each run by the [`Worker`], their
//! outputs merged on the caller's thread by the [`Merger`] in completion order.
//! [`RunIter`] yields after each merge (LiberTEM's `run_udf_iter`).

use super::merge::Merger;
use super::partition::{Control, PartitionOutput, Worker};
use super::{PartitionFailure, Policy, RunError, RunResults};
use crate::udf::{NamedBuffer, Params};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, RwLock};
use std::task::Poll;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One merged partition, as yielded by [`RunIter`].
#[derive(Debug, Clone)]
pub struct MergeStep {
    /// Index of the merged partition.
    pub partition: usize,
    /// Partitions merged so far.
    pub merged: usize,
    /// Partitions in the run.
    pub total: usize,
}

/// What the pool and the caller share while a run is going.
struct Live {
    control: Control,
    /// Set when the user interrupted the run (as opposed to a failure stopping it).
    interrupted: AtomicBool,
    /// Current parameters per UDF (new partitions start with them).
    params: RwLock<Vec<Params>>,
}

/// A partition's outcome from the pool.
type Outcome = (usize, Result<PartitionOutput, RunError>);

/// Progress of a running run, readable (and cancellable) from any thread: the run's
/// interrupt handle.
#[derive(Clone)]
pub struct Progress {
    worker: Arc<Worker>,
    live: Arc<Live>,
}

impl Progress {
    /// Frames processed so far (updated per tile).
    pub fn frames_done(&self) -> u64 {
        self.live.control.frames_done.load(Ordering::Relaxed)
    }

    /// Frames the run processes.
    pub fn frames_total(&self) -> u64 {
        self.worker.plan().meta.frames() as u64
    }

    /// Ask the run to stop (e.g. on Ctrl-C): no new partitions start, running ones stop
    /// at the next tile, calls into plugins that are running now are interrupted; what is
    /// merged stays available.
    pub fn interrupt(&self) {
        self.live.interrupted.store(true, Ordering::Relaxed);
        self.live.control.cancel.store(true, Ordering::Relaxed);
        for udf in self.worker.udfs() {
            udf.interrupt();
        }
    }
}

/// A running run. Iterate to drive it (or poll with [`next_timeout`](Self::next_timeout));
/// call [`RunIter::results`] at any point for the results merged so far. Dropping it
/// stops the run.
///
/// Each item is a merged partition or an error. After an error the iterator ends —
/// unless the run has `keep_going`, in which case a failed partition is reported and the
/// others go on; either way [`RunIter::results`] still gives what was merged (the failed
/// partitions' positions are invalid) and [`RunIter::failures`] says what failed.
pub struct RunIter {
    worker: Arc<Worker>,
    merger: Merger,
    policy: Policy,
    live: Arc<Live>,
    receiver: Option<mpsc::Receiver<Outcome>>,
    /// Outcomes received but not merged yet (all of them when merges are shuffled).
    pending: VecDeque<Outcome>,
    driver: Option<JoinHandle<()>>,
    started: Instant,
    process_seconds: f64,
    partitions_failed: usize,
    failures: Vec<PartitionFailure>,
    failed: bool,
}

impl RunIter {
    pub(super) fn start(worker: Arc<Worker>, merger: Merger, policy: Policy) -> RunIter {
        let plan = worker.plan().clone();
        let live = Arc::new(Live {
            control: Control::default(),
            interrupted: AtomicBool::new(false),
            params: RwLock::new(merger.params().to_vec()),
        });
        let (tx, rx) = mpsc::sync_channel::<Outcome>(plan.threads * 2);
        let driver = {
            let (worker, live) = (worker.clone(), live.clone());
            std::thread::Builder::new()
                .name("udf-host-driver".into())
                .spawn(move || drive(&worker, &live, policy.keep_going, &tx))
                .ok()
        };
        RunIter {
            worker,
            merger,
            policy,
            live,
            receiver: Some(rx),
            pending: VecDeque::new(),
            driver,
            started: Instant::now(),
            process_seconds: 0.0,
            partitions_failed: 0,
            failures: Vec::new(),
            failed: false,
        }
    }

    /// A handle for progress displays and cancellation from other threads.
    pub fn progress(&self) -> Progress {
        Progress { worker: self.worker.clone(), live: self.live.clone() }
    }

    /// Partitions that failed so far (with `keep_going`, or the one that stopped the run).
    pub fn failures(&self) -> &[PartitionFailure] {
        &self.failures
    }

    /// Whether the run goes on with the other partitions when one fails (`keep_going`).
    pub fn keeps_going(&self) -> bool {
        self.policy.keep_going
    }

    /// Whether the run was interrupted with [`Progress::interrupt`].
    pub fn interrupted(&self) -> bool {
        self.live.interrupted.load(Ordering::Relaxed)
    }

    /// Merged nav positions so far (compressed; LiberTEM's `damage`).
    pub fn damage(&self) -> &[bool] {
        self.merger.damage()
    }

    /// Replace parameters of UDF `udf` for partitions started from now on
    /// (LiberTEM's `update_parameters_experimental`). Only given names change.
    ///
    /// # Errors
    /// Unknown parameter or wrong type.
    pub fn update_params(&mut self, udf: usize, updates: &Params) -> Result<(), RunError> {
        let resolved = self.merger.update_params(udf, updates)?;
        let mut params = self.live.params.write().map_err(|_| RunError::Internal("parameter lock poisoned".into()))?;
        params[udf] = resolved;
        Ok(())
    }

    /// The results of what has been merged so far (calls `get_results`; LiberTEM's
    /// `UDFResultsLazy.buffers`).
    ///
    /// # Errors
    /// A UDF's `get_results` fails or returns something that breaks the rules.
    pub fn results(&self) -> Result<RunResults, RunError> {
        let mut results = self.merger.results()?;
        results.stats.process_seconds = self.process_seconds;
        results.stats.partitions_failed = self.partitions_failed;
        Ok(results)
    }

    /// The results of every UDF that has them so far, and the failure of each that has
    /// not (see [`Merger::results_each`]).
    pub fn results_each(&self) -> (RunResults, Vec<(usize, RunError)>) {
        let (mut results, failures) = self.merger.results_each();
        results.stats.process_seconds = self.process_seconds;
        results.stats.partitions_failed = self.partitions_failed;
        (results, failures)
    }

    /// Each partition's exported buffers for UDF `udf`, in merge order (only with
    /// `RunOptions::keep_partition_buffers`).
    pub fn partition_buffers(&self, udf: usize) -> &[(usize, Vec<NamedBuffer>)] {
        self.merger.partition_buffers(udf)
    }

    /// The next merge, waiting at most `timeout` for it: `Poll::Pending` if none came in
    /// time (the caller can check for Ctrl-C and call again), `Poll::Ready(None)` when
    /// the run is over, else what [`Iterator::next`] gives.
    pub fn next_timeout(&mut self, timeout: Duration) -> Poll<Option<Result<super::MergeStep, RunError>>> {
        self.poll(Some(Instant::now() + timeout))
    }

    fn poll(&mut self, deadline: Option<Instant>) -> Poll<Option<Result<super::MergeStep, RunError>>> {
        loop {
            if self.failed {
                return Poll::Ready(None);
            }
            let outcome = match self.next_outcome(deadline) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(outcome) => outcome,
            };
            let Some((index, result)) = outcome else {
                return Poll::Ready(self.finished());
            };
            match self.handle(index, result) {
                Some(item) => return Poll::Ready(Some(item)),
                None => continue,
            }
        }
    }

    /// The next outcome to merge: in completion order, or — with shuffled merges — all
    /// outcomes first, then in a seeded random order. `None` when every task is done.
    fn next_outcome(&mut self, deadline: Option<Instant>) -> Poll<Option<Outcome>> {
        if let Some(seed) = self.policy.shuffle_merges {
            if let Some(rx) = self.receiver.take() {
                let mut all: Vec<Outcome> = self.pending.drain(..).chain(rx.iter()).collect();
                // From partition order, not completion order: the same seed gives the same
                // merge order in every run.
                all.sort_by_key(|(index, _)| *index);
                shuffle(&mut all, seed);
                self.pending.extend(all);
            }
            return Poll::Ready(self.pending.pop_front());
        }
        let Some(rx) = &self.receiver else { return Poll::Ready(None) };
        match deadline {
            None => Poll::Ready(rx.recv().ok()),
            Some(deadline) => match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(outcome) => Poll::Ready(Some(outcome)),
                Err(RecvTimeoutError::Timeout) => Poll::Pending,
                Err(RecvTimeoutError::Disconnected) => Poll::Ready(None),
            },
        }
    }

    /// Every task is done: join the pool; a run stopped early ends with `Cancelled`.
    fn finished(&mut self) -> Option<Result<super::MergeStep, RunError>> {
        self.receiver = None;
        if let Some(driver) = self.driver.take() {
            let _ = driver.join();
        }
        self.process_seconds = self.started.elapsed().as_secs_f64();
        let stats = self.merger.stats();
        if self.live.control.cancel.load(Ordering::Relaxed) && stats.partitions_merged < stats.partitions {
            self.failed = true;
            return Some(Err(RunError::Cancelled));
        }
        None
    }

    /// Merge one outcome or record its failure; `None` to go on to the next outcome.
    fn handle(
        &mut self,
        index: usize,
        result: Result<PartitionOutput, RunError>,
    ) -> Option<Result<super::MergeStep, RunError>> {
        let output = match result {
            Ok(output) => output,
            Err(_) if self.interrupted() => {
                // Everything failing after an interrupt is its consequence, not a failure.
                self.stop();
                return Some(Err(RunError::Cancelled));
            }
            Err(RunError::Cancelled) if self.policy.keep_going => return None,
            Err(e) => {
                if !matches!(e, RunError::Cancelled) {
                    self.failures.push(self.failure_record(index, &e));
                }
                if self.policy.keep_going && !matches!(e, RunError::Cancelled) {
                    self.partitions_failed += 1;
                } else {
                    self.stop();
                }
                return Some(Err(e));
            }
        };
        let step = self.merger.merge(output);
        self.process_seconds = self.started.elapsed().as_secs_f64();
        if let Err(e) = &step {
            // A UDF's merge failed (the partition is merged into the others): record it
            // like any failure; it stops the run unless the run goes on.
            self.failures.push(self.failure_record(index, e));
            if !self.policy.keep_going || !matches!(e, RunError::Udf { .. }) {
                self.stop();
            }
        }
        Some(step)
    }

    fn failure_record(&self, index: usize, error: &RunError) -> PartitionFailure {
        let frames = self.worker.plan().partition(index).ok().and_then(|p| super::first_last(&p.frames));
        let (udf, at) = match error {
            RunError::Udf { udf, at, .. } => (Some(udf.clone()), Some(at.clone())),
            _ => (None, None),
        };
        PartitionFailure { partition: Some(index), frames, udf, at, error: error.to_string() }
    }

    /// Stop the run: no new partitions, running ones stop at the next tile, and calls
    /// into plugins running now are interrupted: their outcomes are discarded anyway, and
    /// a plugin looping (or sleeping) in another partition would otherwise hold the run
    /// up to its own `--timeout` (issue 15: a failing run ends in about one timeout).
    fn stop(&mut self) {
        self.failed = true;
        self.live.control.cancel.store(true, Ordering::Relaxed);
        if self.driver.is_some() {
            for udf in self.worker.udfs() {
                udf.interrupt();
            }
        }
        self.receiver = None;
        if let Some(driver) = self.driver.take() {
            let _ = driver.join();
        }
    }
}

impl Iterator for RunIter {
    type Item = Result<super::MergeStep, RunError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.poll(None) {
            Poll::Ready(item) => item,
            Poll::Pending => unreachable!("without a deadline the iterator waits"),
        }
    }
}

impl Drop for RunIter {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Run every partition on a pool of the plan's threads, in order of index as far as the
/// pool allows, sending each outcome to the caller. Stops starting new partitions once
/// the run is cancelled (or, without `keep_going`, once one fails).
fn drive(worker: &Worker, live: &Live, keep_going: bool, tx: &mpsc::SyncSender<Outcome>) {
    let plan = worker.plan();
    let pool = match rayon::ThreadPoolBuilder::new()
        .num_threads(plan.threads)
        .thread_name(|i| format!("udf-host-worker-{i}"))
        .build()
    {
        Ok(pool) => pool,
        Err(e) => {
            let first = plan.partitions.first().map_or(0, |p| p.index);
            let error = RunError::Internal(format!("cannot start {} worker threads: {e}", plan.threads));
            let _ = tx.send((first, Err(error)));
            return;
        }
    };
    pool.scope_fifo(|scope| {
        for partition in &plan.partitions {
            scope.spawn_fifo(move |_| {
                if live.control.cancel.load(Ordering::Relaxed) {
                    return;
                }
                let result = match live.params.read() {
                    Ok(params) => {
                        let params = params.clone();
                        worker.run_partition_with(partition.index, &params, &live.control)
                    }
                    Err(_) => Err(RunError::Internal("parameter lock poisoned".into())),
                };
                if result.is_err() && !keep_going {
                    live.control.cancel.store(true, Ordering::Relaxed);
                }
                // The caller may have stopped listening; then the outcome is moot.
                let _ = tx.send((partition.index, result));
            });
        }
    });
}

/// A seeded Fisher-Yates shuffle (splitmix64 as the generator).
fn shuffle<T>(items: &mut [T], seed: u64) {
    let mut state = seed;
    for i in (1..items.len()).rev() {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        items.swap(i, (z % (i as u64 + 1)) as usize);
    }
}
