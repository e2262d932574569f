//! The live lane: a live source (`udf-host serve --live merlin://HOST:PORT --nav-shape
//! Y,X`) offered on the page beside the files, and the lane that runs its acquisitions.
//!
//! A request of the live lane ([`Analysis::Live`](super::Analysis::Live)) is one acquisition: the lane connects,
//! waits for the detector to start (the page says "waiting"), plans the pattern's UDF and
//! the scan image's (the detector's, or `builtin:sumsig`) for the frames the detector
//! announces, and runs them with [`LiveRun`] while the frames come; results merged so far
//! go to the page as the file lanes' do ([`super::wire`]), at most every
//! [`UPDATE_EVERY`], and once more when the scan is over. A newer request, the page's
//! *stop* or the page going away stops the acquisition through its [`Stop`] handle.
//!
//! The page does not send a new detector position while frames are coming (that would
//! throw the scan away): it applies to the next acquisition (docs/serve.md).

use super::analysis::{AnalysisError, RunDefaults};
use super::catalog::Catalog;
use super::lane::Request;
use super::lane::{
    Finished, Inbox, LaneHandle, Outgoing, POLL, UPDATE_EVERY, error_message, plugin_loads, send_results,
};
use super::wire::Progress as WireProgress;
use crate::dataset::DatasetShape;
use crate::live::{Acquisition, LiveError, LiveOptions, LiveRun, LiveSource, Receiver, Stop};
use crate::report::RunSummary;
use bytes::Bytes;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

/// The live source a server offers: where frames come from and how to run them (the
/// nav shape, buffer, timeouts; threads and limits are the server's).
#[derive(Debug, Clone)]
pub struct ServeLive {
    pub source: LiveSource,
    pub options: LiveOptions,
}

/// The live source of a running server, and what its last acquisition announced.
pub struct LiveSetup {
    config: ServeLive,
    /// Frame shape, dtype and header details of the last acquisition that started.
    last: Mutex<Option<Value>>,
}

impl LiveSetup {
    pub fn new(config: ServeLive) -> LiveSetup {
        LiveSetup { config, last: Mutex::new(None) }
    }

    /// The name the page uses for the source: its URL (`merlin://127.0.0.1:6342`).
    pub fn url(&self) -> String {
        self.config.source.url()
    }

    fn format(&self) -> &'static str {
        match self.config.source {
            LiveSource::Merlin { .. } => "merlin-live",
            LiveSource::Dectris { .. } => "dectris-live",
        }
    }

    /// What the dataset list and the info panel show: the source, the nav shape and,
    /// once an acquisition has started, its frame shape and dtype (`null` before).
    pub fn info(&self) -> Value {
        let nav = &self.config.options.nav_shape;
        let last = self.last.lock().ok().and_then(|l| l.clone()).unwrap_or(Value::Null);
        json!({
            "path": self.url(),
            "live": true,
            "format": self.format(),
            "nav_shape": nav,
            "frames": nav.iter().product::<usize>(),
            "sig_shape": last.get("sig_shape").cloned().unwrap_or(Value::Null),
            "dtype_name": last.get("dtype_name").cloned().unwrap_or(Value::Null),
            "details": last.get("details").cloned().unwrap_or_else(|| json!({})),
        })
    }

    fn remember(&self, acquisition: &Acquisition) -> Value {
        let details: serde_json::Map<String, Value> =
            acquisition.details.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        let value = json!({
            "sig_shape": acquisition.sig,
            "dtype_name": acquisition.stored.dtype.name(),
            "details": details,
        });
        if let Ok(mut last) = self.last.lock() {
            *last = Some(value.clone());
        }
        value
    }
}

/// The live lane of one page: its acquisitions are cancelled through their [`Stop`].
pub type LiveLane = LaneHandle<Stop>;

impl LaneHandle<Stop> {
    /// Start the live lane's thread, answering on `out`.
    pub fn start_live(
        setup: Arc<LiveSetup>,
        catalog: Arc<Catalog>,
        defaults: RunDefaults,
        out: tokio::sync::mpsc::UnboundedSender<Outgoing>,
    ) -> std::io::Result<LiveLane> {
        Self::spawn(LANE, move |inbox| Worker { setup, catalog, defaults, inbox, out }.work())
    }
}

/// A receiver whose acquisition has started already: [`LiveRun::start_with`] gets the
/// acquisition the lane read (to plan the UDFs for its frame shape) instead of a second
/// start.
struct Started {
    inner: Box<dyn Receiver>,
    acquisition: Option<Acquisition>,
}

impl Receiver for Started {
    fn endpoint(&self) -> &str {
        self.inner.endpoint()
    }

    fn format(&self) -> &'static str {
        self.inner.format()
    }

    fn start(&mut self, stop: &Stop, timeout: Option<Duration>) -> Result<Acquisition, LiveError> {
        match self.acquisition.take() {
            Some(acquisition) => Ok(acquisition),
            None => self.inner.start(stop, timeout),
        }
    }

    fn next_frame(&mut self, stop: &Stop, stall: Duration) -> Result<Option<Bytes>, LiveError> {
        self.inner.next_frame(stop, stall)
    }

    fn bytes_received(&self) -> u64 {
        self.inner.bytes_received()
    }

    fn finish(&mut self) {
        self.inner.finish();
    }
}

/// Why an acquisition could not be run.
#[derive(Debug, thiserror::Error)]
enum AcquireError {
    #[error(transparent)]
    Live(#[from] LiveError),
    #[error(transparent)]
    Analysis(#[from] AnalysisError),
}

/// The lane's thread.
struct Worker {
    setup: Arc<LiveSetup>,
    catalog: Arc<Catalog>,
    defaults: RunDefaults,
    inbox: Inbox<Stop>,
    out: tokio::sync::mpsc::UnboundedSender<Outgoing>,
}

const LANE: &str = "live";

impl Worker {
    fn work(self) {
        let mut next: Option<Request> = None;
        loop {
            let Some(mut request) = next.take().or_else(|| self.inbox.requests.recv().ok()) else { return };
            // From here on a newer request stops this one (see `LiveLane::submit`).
            let stop = Stop::default();
            self.inbox.running(Some(stop.clone()));
            while let Ok(newer) = self.inbox.requests.try_recv() {
                request = newer;
            }
            next = match self.acquire(&request, &stop) {
                Ok(newer) => newer,
                Err(AcquireError::Live(LiveError::Stopped)) => {
                    self.status(request.id, "stopped", json!({}));
                    None
                }
                Err(e) => {
                    let _ = self.out.send(error_message(LANE, request.id, &e.to_string()));
                    self.status(request.id, "failed", json!({}));
                    None
                }
            };
            self.inbox.running(None);
            if self.out.is_closed() {
                return;
            }
        }
    }

    /// A `live` text message: where the acquisition of request `id` stands.
    fn status(&self, id: u64, state: &str, extra: Value) {
        let mut message = json!({"type": "live", "lane": LANE, "id": id, "state": state, "source": self.setup.url()});
        if let (Some(message), Value::Object(extra)) = (message.as_object_mut(), extra) {
            message.extend(extra);
        }
        let _ = self.out.send(Outgoing::Text(message.to_string()));
    }

    /// Run one acquisition for `request` until it is over, fails, is stopped, or a newer
    /// request comes (returned).
    fn acquire(&self, request: &Request, stop: &Stop) -> Result<Option<Request>, AcquireError> {
        let config = &self.setup.config;
        let nav = config.options.nav_shape.clone();
        let frames = nav.iter().product::<usize>() as u64;
        self.status(request.id, "waiting", json!({"nav_shape": nav}));
        let mut receiver = config.source.for_scan(frames).connect()?;
        let acquisition = receiver.start(stop, config.options.start_timeout)?;
        let announced = self.setup.remember(&acquisition);
        let shape = DatasetShape { nav: nav.clone(), sig: acquisition.sig.clone() };
        let udfs = request.analysis.udfs(&shape, &self.catalog)?;
        let mut options = config.options.clone();
        self.defaults.apply(&mut options.run);
        let started = Started { inner: receiver, acquisition: Some(acquisition) };
        let loads = plugin_loads(&udfs.specs);
        let mut run = LiveRun::start_with(Box::new(started), udfs.specs, options, stop.clone())?;
        self.status(request.id, "receiving", announced);
        let summary = RunSummary::of_plan(run.plan(), run.dataset().as_ref(), loads, crate::cuda::Device::Cpu);
        let show = udfs.show;
        let started = Instant::now();
        let mut last_sent: Option<Instant> = None;
        let (mut merged, mut total) = (0, run.plan().partitions.len());
        let progress = |merged, total, done| WireProgress {
            lane: LANE,
            id: request.id,
            merged,
            total,
            done,
            elapsed_ms: request.received.elapsed().as_secs_f64() * 1e3,
        };
        loop {
            if let Ok(newer) = self.inbox.requests.try_recv() {
                run.stop();
                return Ok(Some(newer));
            }
            match run.next_timeout(POLL) {
                Poll::Pending => {}
                Poll::Ready(Some(Ok(step))) => {
                    (merged, total) = (step.merged, step.total);
                    if step.merged < step.total && last_sent.is_none_or(|t| t.elapsed() >= UPDATE_EVERY) {
                        send_results(
                            &self.out,
                            &progress(merged, total, false),
                            run.results().as_ref(),
                            show.as_deref(),
                        );
                        last_sent = Some(Instant::now());
                    }
                }
                Poll::Ready(Some(Err(ended @ LiveError::Ended { received, .. }))) => {
                    // What came is kept and shown (valid where frames came), and said.
                    let why = ended.to_string();
                    self.finish(
                        request,
                        &run,
                        progress(merged, total, true),
                        show,
                        (summary, started),
                        Some(why.clone()),
                    );
                    let _ = self.out.send(error_message(LANE, request.id, &why));
                    self.status(request.id, "ended", json!({"frames_received": received}));
                    return Ok(None);
                }
                Poll::Ready(Some(Err(LiveError::Stopped))) => {
                    // Stopped from the page: what is merged stays on it.
                    send_results(&self.out, &progress(merged, total, false), run.results().as_ref(), show.as_deref());
                    return Err(LiveError::Stopped.into());
                }
                Poll::Ready(Some(Err(e))) => return Err(e.into()),
                Poll::Ready(None) => {
                    self.finish(request, &run, progress(merged, total, true), show, (summary, started), None);
                    self.status(request.id, "complete", json!({"frames_received": run.frames_received()}));
                    return Ok(None);
                }
            }
        }
    }

    /// Send the acquisition's final results and keep them (in `finished`) for exports.
    fn finish(
        &self,
        request: &Request,
        run: &LiveRun,
        progress: WireProgress<'_>,
        show: Option<Vec<String>>,
        (mut summary, started): (RunSummary, Instant),
        ended_early: Option<String>,
    ) {
        summary.live = Some(run.stats());
        let results = match run.results() {
            Ok(results) => results,
            Err(e) => {
                let _ = self.out.send(error_message(LANE, request.id, &e.to_string()));
                return;
            }
        };
        send_results::<LiveError>(&self.out, &progress, Ok(&results), show.as_deref());
        let finished = Finished { analysis: request.analysis.clone(), summary, results, show, started, ended_early };
        self.inbox.finish(finished);
    }
}

#[cfg(test)]
mod tests {
    use crate::serve::Analysis;

    #[test]
    fn a_live_request_is_read_from_the_pages_json() {
        let with: Analysis = serde_json::from_str(
            r#"{"kind":"live","stat":"sum","detector":{"kind":"ring","cx":1,"cy":2,"ri":3,"ro":4}}"#,
        )
        .unwrap();
        let ring = Analysis::Ring { cx: 1.0, cy: 2.0, ri: 3.0, ro: 4.0 };
        assert_eq!(with, Analysis::Live { stat: "sum".into(), detector: Some(Box::new(ring)) });
        let without: Analysis = serde_json::from_str(r#"{"kind":"live","stat":"mean","detector":null}"#).unwrap();
        assert_eq!(without, Analysis::Live { stat: "mean".into(), detector: None });
    }
}
