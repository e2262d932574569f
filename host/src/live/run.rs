//! The live engine: a receiver thread reads frames in scan order and, as each
//! partition's frames have all arrived, hands the partition to a pool of workers; the
//! caller's thread merges their outputs in completion order — the executor's
//! [`Worker`] and [`Merger`], fed by a network instead of a file.
//!
//! ```text
//!  detector ──TCP/ZeroMQ──▶ receiver thread ──partition (its frames)──▶ rayon pool ──output──▶ caller: Merger
//!                              ▲   waits while the frame budget is full (back-pressure)   │
//!                              └──────────── frames released when a partition ends ────────┘
//! ```
//!
//! The partitions are planned up front from the nav shape (contiguous ranges of
//! `partition_frames`); a scan that ends early is cut with [`Plan::truncated`] so the last,
//! partial partition is processed with the frames it has.

use super::budget::{BufferStats, FrameBudget, Reservation};
use super::frames::{FrameEncoding, LiveDescription, LiveShape, PartitionFrames};
use super::{LiveError, LiveSource, Receiver, Stop};
use crate::dataset::{DatasetShape, OpenedDataset};
use crate::exec::{Control, Merger, PartitionOutput, Plan, RunError, RunOptions, RunResults, UdfSpec, Worker};
use crate::udf::{Params, Udf};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::task::Poll;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How to run a live acquisition.
#[derive(Debug, Clone)]
pub struct LiveOptions {
    /// The scan shape (the detector sends frames, not a shape).
    pub nav_shape: Vec<usize>,
    /// ROI, threads, limits, device, ... as for a file (`partitions` is ignored: see
    /// `partition_frames`).
    pub run: RunOptions,
    /// Frames per partition (default: about 16 MiB of frames, at most 1024): results
    /// update once per partition.
    pub partition_frames: Option<usize>,
    /// Bytes of received frames held in memory at most (default 1 GiB); past it the
    /// receiver stops reading from the detector until partitions finish.
    pub max_buffer: u64,
    /// How long to wait for the acquisition to start (`None`: until stopped).
    pub start_timeout: Option<Duration>,
    /// How long the detector may send nothing in the middle of a scan before the scan
    /// is taken as ended (default 10 s).
    pub stall_timeout: Duration,
}

/// Default frame buffer: 1 GiB.
pub const DEFAULT_MAX_BUFFER: u64 = 1 << 30;

impl LiveOptions {
    /// Defaults for a scan of shape `nav_shape`.
    pub fn new(nav_shape: Vec<usize>) -> Self {
        LiveOptions {
            nav_shape,
            run: RunOptions::default(),
            partition_frames: None,
            max_buffer: DEFAULT_MAX_BUFFER,
            start_timeout: None,
            stall_timeout: Duration::from_secs(10),
        }
    }
}

/// One merged partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveStep {
    /// Index of the merged partition.
    pub partition: usize,
    /// Partitions merged so far, and in the run.
    pub merged: usize,
    pub total: usize,
    /// Frames received so far.
    pub frames_received: u64,
}

/// What happened during a live run (part of `results.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveStats {
    /// `merlin://127.0.0.1:6342`.
    pub source: String,
    /// Frames of the nav shape.
    pub frames_expected: u64,
    pub frames_received: u64,
    /// Bytes received (headers included).
    pub bytes_received: u64,
    /// Seconds from the first frame to the last merge (or now).
    pub seconds: f64,
    /// Frames per partition.
    pub partition_frames: usize,
    /// How the frames were encoded on the wire.
    pub encoding: String,
    /// The frame buffer and the back-pressure it applied.
    pub buffer: BufferStats,
    /// Why the scan ended early, if it did.
    pub ended_early: Option<String>,
}

impl LiveStats {
    /// Bytes received per second, in GB/s.
    pub fn gbps(&self) -> f64 {
        if self.seconds > 0.0 { self.bytes_received as f64 / self.seconds / 1e9 } else { 0.0 }
    }
}

/// What the receiver thread and the pool tell the caller's thread.
enum Event {
    Partition(Result<PartitionOutput, RunError>),
    /// The scan ended after `frames` frames (sent before the partial partition starts).
    Ended {
        frames: u64,
        reason: LiveError,
    },
    /// The run cannot go on (malformed data, stopped).
    Failed(LiveError),
    /// The receiver thread is done: it started this many partitions.
    Dispatched(usize),
}

/// Shared between the caller, the receiver thread and the workers.
struct Shared {
    stop: Stop,
    control: Control,
    frames_received: AtomicU64,
    bytes_received: AtomicU64,
    budget: Arc<FrameBudget>,
}

/// A live acquisition being processed. Iterate (or poll with
/// [`next_timeout`](Self::next_timeout)) to drive it; [`results`](Self::results) at any
/// point gives what is merged. Dropping it stops the run.
pub struct LiveRun {
    plan: Arc<Plan>,
    dataset: Arc<LiveShape>,
    udfs: Vec<Arc<dyn Udf>>,
    merger: Merger,
    shared: Arc<Shared>,
    events: mpsc::Receiver<Event>,
    receiver_thread: Option<JoinHandle<()>>,
    dispatched: Option<usize>,
    outcomes: usize,
    ended: Option<(u64, LiveError)>,
    done: bool,
    started: Instant,
    stats: LiveStats,
}

impl LiveRun {
    /// Connect to `source`, wait for the acquisition to start, plan the run and start
    /// receiving.
    ///
    /// # Errors
    /// [`LiveError`]: cannot connect, no start in time, a malformed header, a frame
    /// count that does not fit the nav shape, a plan that fails (UDF params, ...).
    pub fn start(source: &LiveSource, udfs: Vec<UdfSpec>, options: LiveOptions, stop: Stop) -> Result<Self, LiveError> {
        let frames = options.nav_shape.iter().product::<usize>() as u64;
        Self::start_with(source.for_scan(frames).connect()?, udfs, options, stop)
    }

    /// [`start`](Self::start) with a receiver made by the caller.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub fn start_with(
        mut receiver: Box<dyn Receiver>,
        udfs: Vec<UdfSpec>,
        options: LiveOptions,
        stop: Stop,
    ) -> Result<Self, LiveError> {
        let nav_len: usize = options.nav_shape.iter().product();
        if nav_len == 0 {
            return Err(LiveError::Invalid(format!("the nav shape {:?} has no frames", options.nav_shape)));
        }
        let acquisition = receiver.start(&stop, options.start_timeout)?;
        if let Some(n) = acquisition.frames
            && n != nav_len as u64
        {
            return Err(LiveError::Invalid(format!(
                "{} announces {n} frames, but the nav shape {:?} has {nav_len}; give the scan's shape",
                receiver.endpoint(),
                options.nav_shape
            )));
        }
        let shape = DatasetShape { nav: options.nav_shape.clone(), sig: acquisition.sig.clone() };
        let frame_bytes = (shape.sig_len() * acquisition.stored.dtype.size()).max(1);
        let partition_frames = options.partition_frames.unwrap_or((16 << 20) / frame_bytes).clamp(1, 1024).min(nav_len);
        let partition_bytes = (partition_frames * frame_bytes) as u64;
        if options.max_buffer < 2 * partition_bytes {
            return Err(LiveError::Invalid(format!(
                "a frame buffer of {} MiB holds fewer than two partitions of {partition_frames} frames ({} MiB \
                 each); raise the buffer or use fewer frames per partition",
                options.max_buffer >> 20,
                partition_bytes >> 20
            )));
        }
        let mut details = vec![("encoding".to_owned(), acquisition.encoding.name())];
        details.extend(acquisition.details.iter().cloned());
        let description =
            Arc::new(LiveDescription { format: receiver.format(), source: receiver.endpoint().to_owned(), details });
        let dataset =
            Arc::new(LiveShape { shape: shape.clone(), stored: acquisition.stored, description: description.clone() });
        let mut run_options = options.run.clone();
        run_options.partitions = Some(nav_len.div_ceil(partition_frames));
        let udfs: Vec<UdfSpec> = udfs.into_iter().map(UdfSpec::for_run).collect();
        let plan = Arc::new(Plan::make(&OpenedDataset::from(dataset.clone()), &udfs, &run_options)?);
        let udfs: Vec<Arc<dyn Udf>> = udfs.into_iter().map(|s| s.udf).collect();
        let merger = Merger::new(plan.clone(), udfs.clone())?;
        let shared = Arc::new(Shared {
            stop,
            control: Control::default(),
            frames_received: AtomicU64::new(0),
            bytes_received: AtomicU64::new(0),
            budget: FrameBudget::new(options.max_buffer),
        });
        let stats = LiveStats {
            source: receiver.endpoint().to_owned(),
            frames_expected: nav_len as u64,
            frames_received: 0,
            bytes_received: 0,
            seconds: 0.0,
            partition_frames,
            encoding: acquisition.encoding.name(),
            buffer: shared.budget.stats(),
            ended_early: None,
        };
        let (tx, events) = mpsc::channel();
        let feed_udfs = udfs.clone();
        let feed = Feed {
            plan: plan.clone(),
            udfs,
            params: plan.udfs.iter().map(|u| u.params.clone()).collect(),
            shape,
            stored: acquisition.stored,
            encoding: Arc::new(acquisition.encoding.clone()),
            description,
            shared: shared.clone(),
            tx,
            stall: options.stall_timeout,
        };
        let receiver_thread = std::thread::Builder::new()
            .name("udf-host-live-receiver".into())
            .spawn(move || feed.run(receiver.as_mut()))
            .map_err(|e| LiveError::Invalid(format!("cannot start the receiver thread: {e}")))?;
        Ok(LiveRun {
            plan,
            dataset,
            udfs: feed_udfs,
            merger,
            shared,
            events,
            receiver_thread: Some(receiver_thread),
            dispatched: None,
            outcomes: 0,
            ended: None,
            done: false,
            started: Instant::now(),
            stats,
        })
    }

    /// The plan (UDF names, partitions, the nav and sig shape).
    pub fn plan(&self) -> &Arc<Plan> {
        &self.plan
    }

    /// The acquisition as a dataset: its shape, dtype and description (source, header
    /// details); it reads no frames (they reach the partitions as they arrive).
    pub fn dataset(&self) -> Arc<dyn crate::dataset::Dataset> {
        self.dataset.clone()
    }

    /// The results of what has been merged so far; valid where frames were merged.
    ///
    /// # Errors
    /// A UDF's `get_results` fails.
    pub fn results(&self) -> Result<RunResults, RunError> {
        let mut results = self.merger.results()?;
        results.stats.process_seconds = self.started.elapsed().as_secs_f64();
        Ok(results)
    }

    /// The results of every UDF that has them, and the failure of each that has not.
    pub fn results_each(&self) -> (RunResults, Vec<(usize, RunError)>) {
        let (mut results, failures) = self.merger.results_each();
        results.stats.process_seconds = self.started.elapsed().as_secs_f64();
        (results, failures)
    }

    /// Merged nav positions so far (compressed by the ROI).
    pub fn damage(&self) -> &[bool] {
        self.merger.damage()
    }

    /// Merged positions so far over the whole scan ([`Merger::nav_damage`]).
    pub fn nav_damage(&self) -> Vec<bool> {
        self.merger.nav_damage()
    }

    /// Frames received so far.
    pub fn frames_received(&self) -> u64 {
        self.shared.frames_received.load(Ordering::Relaxed)
    }

    /// What happened so far.
    pub fn stats(&self) -> LiveStats {
        let mut stats = self.stats.clone();
        stats.frames_received = self.frames_received();
        stats.bytes_received = self.shared.bytes_received.load(Ordering::Relaxed);
        stats.buffer = self.shared.budget.stats();
        if !self.done {
            stats.seconds = self.started.elapsed().as_secs_f64();
        }
        stats.ended_early = self.ended.as_ref().map(|(_, reason)| reason.to_string()).or(stats.ended_early);
        stats
    }

    /// Stop: no more frames are read, running partitions stop at their next tile.
    pub fn stop(&self) {
        self.shared.stop.stop();
        self.shared.control.cancel.store(true, Ordering::Relaxed);
    }

    /// The next merge, waiting at most `timeout`: `Poll::Pending` if none came in time,
    /// `Poll::Ready(None)` when the run is over, else what [`Iterator::next`] gives.
    pub fn next_timeout(&mut self, timeout: Duration) -> Poll<Option<Result<LiveStep, LiveError>>> {
        self.poll(Some(Instant::now() + timeout))
    }

    fn poll(&mut self, deadline: Option<Instant>) -> Poll<Option<Result<LiveStep, LiveError>>> {
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            if self.dispatched.is_some_and(|d| self.outcomes >= d) {
                return Poll::Ready(self.finish());
            }
            let event = match deadline {
                None => self.events.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
                Some(deadline) => self.events.recv_timeout(deadline.saturating_duration_since(Instant::now())),
            };
            let event = match event {
                Ok(event) => event,
                Err(mpsc::RecvTimeoutError::Timeout) => return Poll::Pending,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let error = LiveError::Run(RunError::Internal("the live receiver thread ended early".into()));
                    return Poll::Ready(Some(Err(self.fail(error))));
                }
            };
            match event {
                Event::Dispatched(n) => self.dispatched = Some(n),
                Event::Ended { frames, reason } => {
                    if let Err(e) = self.merger.truncate(frames) {
                        return Poll::Ready(Some(Err(self.fail(e.into()))));
                    }
                    self.ended = Some((frames, reason));
                }
                Event::Failed(error) => return Poll::Ready(Some(Err(self.fail(error)))),
                Event::Partition(Err(error)) => {
                    self.outcomes += 1;
                    let error = if self.shared.stop.is_stopped() { LiveError::Stopped } else { error.into() };
                    return Poll::Ready(Some(Err(self.fail(error))));
                }
                Event::Partition(Ok(output)) => {
                    self.outcomes += 1;
                    return Poll::Ready(Some(match self.merger.merge(output) {
                        Ok(step) => Ok(LiveStep {
                            partition: step.partition,
                            merged: step.merged,
                            total: step.total,
                            frames_received: self.frames_received(),
                        }),
                        Err(e) => Err(self.fail(e.into())),
                    }));
                }
            }
        }
    }

    /// Every partition dispatched has reported: the scan is over, complete or ended early.
    /// Never a finished scan with a partition neither merged nor failed.
    fn finish(&mut self) -> Option<Result<LiveStep, LiveError>> {
        self.done = true;
        self.stats.seconds = self.started.elapsed().as_secs_f64();
        self.join();
        if !self.merger.is_complete() {
            let stats = self.merger.stats();
            return Some(Err(LiveError::Run(RunError::Internal(format!(
                "{} of {} partitions were merged, and no other reported; a partition was lost",
                stats.partitions_merged, stats.partitions
            )))));
        }
        let (received, reason) = self.ended.take()?;
        self.stats.ended_early = Some(reason.to_string());
        Some(Err(LiveError::Ended { received, expected: self.stats.frames_expected, reason: Box::new(reason) }))
    }

    /// Stop everything after a failure; the error to report.
    fn fail(&mut self, error: LiveError) -> LiveError {
        self.done = true;
        self.stats.seconds = self.started.elapsed().as_secs_f64();
        self.stop();
        for udf in &self.udfs {
            udf.interrupt();
        }
        self.join();
        error
    }

    fn join(&mut self) {
        if let Some(thread) = self.receiver_thread.take() {
            let _ = thread.join();
        }
    }
}

impl Iterator for LiveRun {
    type Item = Result<LiveStep, LiveError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.poll(None) {
            Poll::Ready(item) => item,
            Poll::Pending => unreachable!("without a deadline the iterator waits"),
        }
    }
}

impl Drop for LiveRun {
    fn drop(&mut self) {
        if !self.done {
            self.stop();
        }
        self.join();
    }
}

/// The receiver thread: frames in, partitions out.
struct Feed {
    plan: Arc<Plan>,
    udfs: Vec<Arc<dyn Udf>>,
    params: Vec<Params>,
    shape: DatasetShape,
    stored: crate::dtype::StoredDType,
    encoding: Arc<FrameEncoding>,
    description: Arc<LiveDescription>,
    shared: Arc<Shared>,
    tx: mpsc::Sender<Event>,
    stall: Duration,
}

/// The frames of the partition being received.
struct Filling {
    position: usize,
    payloads: Vec<Option<Bytes>>,
    held: Reservation,
}

impl Feed {
    fn run(self, receiver: &mut dyn Receiver) {
        let pool = match rayon::ThreadPoolBuilder::new()
            .num_threads(self.plan.threads)
            .thread_name(|i| format!("udf-host-live-worker-{i}"))
            .build()
        {
            Ok(pool) => pool,
            Err(e) => {
                let error = RunError::Internal(format!("cannot start {} worker threads: {e}", self.plan.threads));
                let _ = self.tx.send(Event::Failed(error.into()));
                let _ = self.tx.send(Event::Dispatched(0));
                return;
            }
        };
        let (dispatched, end) = self.receive(receiver, &pool);
        receiver.finish();
        let mut dispatched = dispatched;
        match end {
            End::Complete => {}
            End::Early { frames, reason, filling } => {
                // The merger is cut before the partial partition's output can reach it.
                let _ = self.tx.send(Event::Ended { frames, reason });
                if let Some(filling) = filling {
                    let truncated = Arc::new(self.plan.truncated(frames));
                    if truncated.partitions.iter().any(|p| p.index == self.plan.partitions[filling.position].index) {
                        self.dispatch(&pool, &truncated, filling);
                        dispatched += 1;
                    }
                }
            }
            End::Failed(error) => {
                let _ = self.tx.send(Event::Failed(error));
            }
        }
        let _ = self.tx.send(Event::Dispatched(dispatched));
    }

    /// Receive every frame of the scan, starting each partition when its frames are in.
    fn receive(&self, receiver: &mut dyn Receiver, pool: &rayon::ThreadPool) -> (usize, End) {
        let nav_len = self.shape.nav_len() as u64;
        let partitions = &self.plan.partitions;
        let roi = self.plan.roi.as_ref();
        let mut next = 0usize;
        let mut filling: Option<Filling> = None;
        let mut dispatched = 0;
        for frame in 0..nav_len {
            if !self.shared.budget.wait_for_room(self.shared.stop.flag()) {
                return (dispatched, End::Failed(LiveError::Stopped));
            }
            let payload = match receiver.next_frame(&self.shared.stop, self.stall) {
                Ok(Some(payload)) => payload,
                Ok(None) => {
                    let reason = LiveError::Disconnected {
                        endpoint: receiver.endpoint().to_owned(),
                        frames: frame,
                        during: "(the detector ended the acquisition)".into(),
                    };
                    return (dispatched, End::Early { frames: frame, reason, filling });
                }
                Err(e) if e.ends_scan() => return (dispatched, End::Early { frames: frame, reason: e, filling }),
                Err(e) => return (dispatched, End::Failed(e)),
            };
            self.shared.frames_received.store(frame + 1, Ordering::Relaxed);
            self.shared.bytes_received.store(receiver.bytes_received(), Ordering::Relaxed);
            let Some(partition) = partitions.get(next).filter(|p| p.range.contains(&frame)) else {
                continue; // outside the ROI's partitions
            };
            let f = filling.get_or_insert_with(|| Filling {
                position: next,
                payloads: Vec::with_capacity((partition.range.end - partition.range.start) as usize),
                held: self.shared.budget.reserve(0),
            });
            if roi.is_none_or(|r| r.contains(frame as usize)) {
                f.held.add(payload.len() as u64);
                f.payloads.push(Some(payload));
            } else {
                f.payloads.push(None);
            }
            if frame + 1 == partition.range.end {
                if let Some(full) = filling.take() {
                    self.dispatch(pool, &self.plan, full);
                    dispatched += 1;
                }
                next += 1;
            }
        }
        (dispatched, End::Complete)
    }

    /// Run a partition whose frames are in on the pool.
    fn dispatch(&self, pool: &rayon::ThreadPool, plan: &Arc<Plan>, filling: Filling) {
        let index = self.plan.partitions[filling.position].index;
        let start = self.plan.partitions[filling.position].range.start;
        let frames = PartitionFrames::new(
            self.shape.clone(),
            self.stored,
            self.encoding.clone(),
            self.description.clone(),
            start,
            filling.payloads,
            filling.held,
        );
        let (tx, shared, params) = (self.tx.clone(), self.shared.clone(), self.params.clone());
        let worker = Worker::new(plan.clone(), Arc::new(frames), self.udfs.clone());
        pool.spawn_fifo(move || {
            let result = worker.and_then(|w| w.run_partition_with(index, &params, &shared.control));
            let _ = tx.send(Event::Partition(result));
        });
    }
}

/// How the reception ended.
enum End {
    /// Every frame of the nav shape came.
    Complete,
    /// The scan ended after `frames` frames (disconnect, stall, the detector's end).
    Early { frames: u64, reason: LiveError, filling: Option<Filling> },
    /// The run cannot go on.
    Failed(LiveError),
}
