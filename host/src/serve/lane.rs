//! A lane: one thread that runs the page's requests of one kind (the virtual image,
//! the frame, the pattern, ...) one at a time, the newest first.
//!
//! A new request interrupts the run in flight at once ([`Progress::interrupt`], from the
//! thread that received it: running partitions stop at their next tile) and is planned
//! as soon as that run has wound down; requests that came in between are dropped — only
//! the newest matters while a detector is dragged. While a run goes on, its results
//! merged so far go to the page after the first merge and then at most every
//! [`UPDATE_EVERY`], and once more when it is complete.

use super::analysis::{Analysis, Job};
use super::catalog::Catalog;
use super::wire::{self, Progress as WireProgress};
use crate::exec::{Progress, Run, RunError, RunResults};
use crate::report::{LoadCache, PluginLoad, RunSummary};
use serde_json::json;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

/// The shortest time between two partial results sent to the page.
pub const UPDATE_EVERY: Duration = Duration::from_millis(40);

/// How long the lane waits for a merge before it looks for a newer request.
pub(super) const POLL: Duration = Duration::from_millis(5);

/// What the lane sends to the page.
#[derive(Debug)]
pub enum Outgoing {
    /// A binary message ([`wire`]).
    Binary(Vec<u8>),
    /// A JSON text message (errors).
    Text(String),
}

/// One request for a lane.
#[derive(Debug, Clone)]
pub struct Request {
    pub id: u64,
    pub dataset: String,
    pub analysis: Analysis,
    /// When the server received it.
    pub received: Instant,
}

/// The last complete run of a lane, for exports.
pub struct Finished {
    pub analysis: Analysis,
    /// What the library reports about the run as planned.
    pub summary: RunSummary,
    pub results: RunResults,
    pub show: Option<Vec<String>>,
    /// When the run started.
    pub started: Instant,
    /// Why it ended before every frame came (a live scan whose detector went away).
    pub ended_early: Option<String>,
}

/// What stops a lane's run in flight: a file run's [`Progress`] (interrupted at the next
/// tile), a live run's [`Stop`](crate::live::Stop).
pub trait Cancel: Send + 'static {
    fn cancel(&self);
}

impl Cancel for Progress {
    fn cancel(&self) {
        self.interrupt();
    }
}

impl Cancel for crate::live::Stop {
    fn cancel(&self) {
        self.stop();
    }
}

/// A lane as the page's session holds it: send it requests; its thread answers through
/// the channel it was made with. Dropping it (the page is gone) cancels the run in flight.
pub struct LaneHandle<C: Cancel> {
    requests: mpsc::Sender<Request>,
    current: Arc<Mutex<Option<C>>>,
    finished: Arc<Mutex<Option<Arc<Finished>>>>,
}

/// What a lane's thread shares with its handle: the requests, the run in flight's
/// cancel handle (to be set while it runs), the last complete run (for exports).
pub struct Inbox<C> {
    pub requests: mpsc::Receiver<Request>,
    current: Arc<Mutex<Option<C>>>,
    finished: Arc<Mutex<Option<Arc<Finished>>>>,
}

impl<C> Inbox<C> {
    /// Set (or clear) the cancel handle of the run in flight.
    pub fn running(&self, cancel: Option<C>) {
        if let Ok(mut current) = self.current.lock() {
            *current = cancel;
        }
    }

    /// Keep `finished` for exports.
    pub fn finish(&self, finished: Finished) {
        if let Ok(mut slot) = self.finished.lock() {
            *slot = Some(Arc::new(finished));
        }
    }
}

impl<C: Cancel> LaneHandle<C> {
    /// Start the thread `udf-host-serve-<name>` running `work` on the lane's inbox.
    pub fn spawn(name: &str, work: impl FnOnce(Inbox<C>) + Send + 'static) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel();
        let current = Arc::new(Mutex::new(None));
        let finished = Arc::new(Mutex::new(None));
        let inbox = Inbox { requests: rx, current: current.clone(), finished: finished.clone() };
        std::thread::Builder::new().name(format!("udf-host-serve-{name}")).spawn(move || work(inbox))?;
        Ok(LaneHandle { requests: tx, current, finished })
    }

    /// Run `request` next, cancelling the run in flight.
    pub fn submit(&self, request: Request) {
        self.stop();
        let _ = self.requests.send(request);
    }

    /// Cancel the run in flight (the page's stop).
    pub fn stop(&self) {
        if let Ok(current) = self.current.lock()
            && let Some(cancel) = current.as_ref()
        {
            cancel.cancel();
        }
    }

    /// The last complete run, if any.
    pub fn finished(&self) -> Option<Arc<Finished>> {
        self.finished.lock().ok().and_then(|f| f.clone())
    }
}

impl<C: Cancel> Drop for LaneHandle<C> {
    /// The page is gone: cancel the run in flight (the thread ends once it has wound down).
    fn drop(&mut self) {
        self.stop();
    }
}

/// A lane of file runs.
pub type Lane = LaneHandle<Progress>;

impl LaneHandle<Progress> {
    /// Start lane `name`'s thread, answering on `out`.
    pub fn start(
        name: &str,
        catalog: Arc<Catalog>,
        threads: usize,
        out: tokio::sync::mpsc::UnboundedSender<Outgoing>,
    ) -> std::io::Result<Lane> {
        let name = name.to_owned();
        Self::spawn(&name.clone(), move |inbox| Worker { name, catalog, threads, inbox, out }.work())
    }
}

/// The lane's thread.
struct Worker {
    name: String,
    catalog: Arc<Catalog>,
    threads: usize,
    inbox: Inbox<Progress>,
    out: tokio::sync::mpsc::UnboundedSender<Outgoing>,
}

impl Worker {
    fn work(self) {
        let mut next: Option<Request> = None;
        loop {
            let Some(mut request) = next.take().or_else(|| self.inbox.requests.recv().ok()) else { return };
            while let Ok(newer) = self.inbox.requests.try_recv() {
                request = newer;
            }
            next = self.run(request);
            if self.out.is_closed() {
                return;
            }
        }
    }

    fn error(&self, id: u64, message: String) {
        let _ = self.out.send(error_message(&self.name, id, &message));
    }

    /// Run `request` until it is complete, fails, or a newer request comes (returned).
    fn run(&self, request: Request) -> Option<Request> {
        let id = request.id;
        let job = match self
            .catalog
            .dataset(&request.dataset)
            .map_err(|e| e.to_string())
            .and_then(|d| request.analysis.job(d, &self.catalog).map_err(|e| e.to_string()))
        {
            Ok(job) => job,
            Err(message) => {
                self.error(id, message);
                return None;
            }
        };
        let Job { dataset, specs, show, .. } = &job;
        let run = match Run::plan(dataset.clone(), specs.clone(), job.options(self.threads)) {
            Ok(run) => run,
            Err(e) => {
                self.error(id, e.to_string());
                return None;
            }
        };
        let summary = RunSummary::planned(&run, plugin_loads(specs), crate::cuda::Device::Cpu);
        let started = Instant::now();
        let mut iter = run.iter();
        let progress = iter.progress();
        self.inbox.running(Some(progress.clone()));
        let mut last_sent: Option<Instant> = None;
        let mut newer = None;
        let (mut merged, mut total) = (0, 0);
        loop {
            if let Ok(request) = self.inbox.requests.try_recv() {
                progress.interrupt();
                newer = Some(request);
                break;
            }
            match iter.next_timeout(POLL) {
                Poll::Pending => {}
                Poll::Ready(Some(Ok(step))) => {
                    (merged, total) = (step.merged, step.total);
                    if step.merged < step.total && last_sent.is_none_or(|t| t.elapsed() >= UPDATE_EVERY) {
                        let progress = WireProgress {
                            lane: &self.name,
                            id,
                            merged,
                            total,
                            done: false,
                            elapsed_ms: request.received.elapsed().as_secs_f64() * 1e3,
                        };
                        send_results(&self.out, &progress, iter.results().as_ref(), show.as_deref());
                        last_sent = Some(Instant::now());
                    }
                }
                Poll::Ready(Some(Err(RunError::Cancelled))) => break,
                Poll::Ready(Some(Err(e))) => {
                    self.error(id, e.to_string());
                    break;
                }
                Poll::Ready(None) => {
                    // Never complete with a partition neither merged nor failed.
                    if let Err(e) = iter.check_accounted() {
                        self.error(id, e.to_string());
                        break;
                    }
                    self.complete(&request, &iter, (merged, total), show.clone(), (summary, started));
                    break;
                }
            }
        }
        self.inbox.running(None);
        newer
    }

    /// Send the complete results and keep them (in `finished`) for exports.
    fn complete(
        &self,
        request: &Request,
        iter: &crate::exec::RunIter,
        (merged, total): (usize, usize),
        show: Option<Vec<String>>,
        (summary, started): (RunSummary, Instant),
    ) {
        let results = match iter.results() {
            Ok(results) => results,
            Err(e) => return self.error(request.id, e.to_string()),
        };
        let progress = WireProgress {
            lane: &self.name,
            id: request.id,
            merged,
            total,
            done: true,
            elapsed_ms: request.received.elapsed().as_secs_f64() * 1e3,
        };
        send_results::<RunError>(&self.out, &progress, Ok(&results), show.as_deref());
        let finished =
            Finished { analysis: request.analysis.clone(), summary, results, show, started, ended_early: None };
        self.inbox.finish(finished);
    }
}

/// An `error` text message of lane `lane` about request `id`.
pub fn error_message(lane: &str, id: u64, message: &str) -> Outgoing {
    Outgoing::Text(json!({"type": "error", "lane": lane, "id": id, "message": message}).to_string())
}

/// Send `results` (the buffers named in `show`) as a `result` message, or the error
/// that kept them from being made.
pub fn send_results<E: std::fmt::Display>(
    out: &tokio::sync::mpsc::UnboundedSender<Outgoing>,
    progress: &WireProgress<'_>,
    results: Result<&RunResults, E>,
    show: Option<&[String]>,
) {
    let message = results
        .map_err(|e| e.to_string())
        .and_then(|r| wire::results_message(progress, r, show).map_err(|e| e.to_string()));
    let _ = out.send(match message {
        Ok(bytes) => Outgoing::Binary(bytes),
        Err(message) => error_message(progress.lane, progress.id, &message),
    });
}

/// How the report of a run names its UDFs: built-ins as built-ins, plugins as loaded
/// (the catalog loaded them before).
pub fn plugin_loads(specs: &[crate::exec::UdfSpec]) -> Vec<PluginLoad> {
    specs
        .iter()
        .map(|s| PluginLoad {
            source: s.udf.source().to_owned(),
            cache: if s.udf.source().starts_with(crate::builtins::PREFIX) {
                LoadCache::Builtin
            } else {
                LoadCache::Hit
            },
            load_seconds: 0.0,
        })
        .collect()
}
