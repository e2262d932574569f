//! `udf-host live SOURCE PLUGIN...`: run plugins over a scan while it comes off the
//! detector (docs/live.md). A short script over library calls, as `run`: load the UDFs
//! ([`crate::loader`]), assign the parameters ([`crate::params::assign`]), start the
//! live run ([`crate::live::LiveRun`]), then write its results ([`crate::output`]) with a
//! [`RunSummary`] that carries the live statistics.

use super::run::run_failure;
use super::{Failure, RuntimeArgs, Shape, exit};
use crate::exec::{PartitionFailure, RunError, UdfSpec};
use crate::live::{LiveError, LiveOptions, LiveRun, LiveSource, Stop};
use crate::log::LogLevel;
use crate::output::{self, snapshot::Snapshots};
use crate::preview::{self, PreviewOptions};
use crate::report::{RunStatus, RunSummary};
use crate::roi::Roi;
use anyhow::anyhow;
use clap::Args;
use std::path::PathBuf;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct LiveArgs {
    /// Where the frames come from: merlin://HOST[:PORT] (default port 6342) or
    /// dectris://HOST[:PORT] (default 31001), then the plugins (.wasm or builtin:NAME).
    #[arg(required = true, num_args = 2.., value_name = "SOURCE PLUGIN")]
    inputs: Vec<String>,
    /// The scan shape, e.g. 256,256 (the detector sends frames, not a shape).
    #[arg(long, required = true)]
    nav_shape: Shape,
    #[command(flatten)]
    results: super::ResultsArgs,
    /// While the scan goes on, write the results merged so far to OUT/partial/ at most
    /// every SECONDS.
    #[arg(long, value_name = "SECONDS")]
    snapshot_every: Option<f64>,
    /// Write PNG previews of image results (and in the snapshots).
    #[arg(long)]
    preview: bool,
    #[command(flatten)]
    source: LiveSourceArgs,
    /// Process only a rectangle of scan positions: y0:y1,x0:x1 (end exclusive; ';' joins several).
    #[arg(long, value_name = "RANGES")]
    roi_rect: Option<String>,
    /// Worker threads [default: all cores].
    #[arg(long)]
    threads: Option<usize>,
    /// No progress line and no summary.
    #[arg(short, long)]
    quiet: bool,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// `--stall-timeout`'s default.
const DEFAULT_STALL_SECONDS: f64 = 10.0;

/// How to reach the detector and hold its frames: shared by `live` and `serve --live`.
#[derive(Args, Debug)]
pub struct LiveSourceArgs {
    /// Arm the detector before the scan [default: wait for an acquisition started by
    /// someone else]. DECTRIS: the SIMPLON API, e.g. http://HOST:80. Merlin: the control
    /// port, HOST[:PORT] (default port 6341): udf-host sets NUMFRAMESTOACQUIRE to the
    /// scan's frames and the --merlin-set values, then sends STARTACQUISITION.
    #[arg(long, value_name = "URL")]
    api: Option<String>,
    /// Merlin, with --api: a SET command sent before the start, e.g.
    /// --merlin-set COUNTERDEPTH=12 (repeat it for several, sent in order).
    #[arg(long, value_name = "NAME=VALUE")]
    merlin_set: Vec<String>,
    /// Merlin, with --api: send SOFTTRIGGER after STARTACQUISITION (a detector set to
    /// wait for a software trigger).
    #[arg(long)]
    soft_trigger: bool,
    /// Frames per partition: results update once per partition [default: ~16 MiB of frames].
    #[arg(long, value_name = "N")]
    partition_frames: Option<usize>,
    /// Received frames held in memory at most; past it udf-host stops reading from the
    /// detector until partitions catch up (back-pressure; nothing is dropped).
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = super::parse_memory)]
    max_buffer: u64,
    /// Seconds the detector may send nothing inside a scan before the scan is taken as
    /// ended (the results so far are kept; `live` exits with code 3).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_STALL_SECONDS)]
    stall_timeout: f64,
    /// Seconds to wait for the acquisition to start [default: until Ctrl-C].
    #[arg(long, value_name = "SECONDS")]
    start_timeout: Option<f64>,
}

impl LiveSourceArgs {
    /// Whether any of these options was given (they mean something only with a source).
    pub fn any_given(&self) -> bool {
        self.api.is_some()
            || !self.merlin_set.is_empty()
            || self.soft_trigger
            || self.partition_frames.is_some()
            || self.max_buffer != crate::live::DEFAULT_MAX_BUFFER
            || self.stall_timeout != DEFAULT_STALL_SECONDS
            || self.start_timeout.is_some()
    }

    /// `text` as a source armed as these options say, and the options for a scan of
    /// shape `nav`.
    ///
    /// # Errors
    /// Not a source, settings without a control port, a timeout that is not a positive
    /// number of seconds.
    pub fn source(&self, text: &str, nav: Vec<usize>) -> anyhow::Result<(LiveSource, LiveOptions)> {
        let mut source: LiveSource = text.parse()?;
        source.set_api(self.api.as_deref(), &self.merlin_set, self.soft_trigger)?;
        let mut options = LiveOptions::new(nav);
        options.partition_frames = self.partition_frames;
        options.max_buffer = self.max_buffer;
        options.stall_timeout = seconds("stall-timeout", self.stall_timeout)?;
        options.start_timeout = self.start_timeout.map(|s| seconds("start-timeout", s)).transpose()?;
        Ok((source, options))
    }
}

fn seconds(name: &str, value: f64) -> anyhow::Result<Duration> {
    anyhow::ensure!(value.is_finite() && value > 0.0, "--{name} must be a positive number of seconds, got {value}");
    Ok(Duration::from_secs_f64(value))
}

pub fn live(args: LiveArgs) -> Result<(), Failure> {
    let started = Instant::now();
    let (source_text, plugins) = args.inputs.split_first().ok_or_else(|| anyhow!("give the source, then plugins"))?;
    let (source, mut options) = args.source.source(source_text, args.nav_shape.0.clone())?;
    args.results.check_out()?;
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    let runtime = args.runtime.build(crate::log::stderr(LogLevel::Warn), threads, plugins.len())?;
    let sources: Vec<PathBuf> = plugins.iter().map(PathBuf::from).collect();
    let loaded = crate::loader::load_sources(&runtime, &sources).map_err(super::load_failure)?;
    let nav = args.nav_shape.0.clone();
    options.run.threads = Some(threads);
    options.run.limits = args.runtime.limits();
    options.run.roi = args
        .roi_rect
        .as_deref()
        .map(|r| Roi::from_rect(r, &nav).map_err(|e| anyhow!("--roi-rect: {e}")))
        .transpose()?;
    let snapshot_every = args.snapshot_every.map(|s| seconds("snapshot-every", s)).transpose()?;
    // Snapshots draw previews whether or not --preview asks for them in the results.
    options.run.result_extra =
        (args.preview || snapshot_every.is_some()).then(|| preview::result_extra(PreviewOptions::default()));
    let params = crate::params::assign(&loaded.udfs, &args.results.params)?;
    let specs = loaded.udfs.into_iter().zip(params).map(|(udf, params)| UdfSpec { udf, params }).collect();

    // Ctrl-C stops the wait for the acquisition, or the scan (what is merged is written).
    crate::output::interrupt::listen_to_ctrl_c();
    let stop = Stop::default();
    let _routing = {
        let stop = stop.clone();
        crate::output::interrupt::Routing::to(Arc::new(move || stop.stop()))
    };
    if !args.quiet {
        eprintln!("waiting for an acquisition on {} ...", source.url());
    }
    let mut run = LiveRun::start(&source, specs, options, stop).map_err(live_failure)?;
    let mut summary = RunSummary::of_plan(run.plan(), run.dataset().as_ref(), loaded.loads, crate::cuda::Device::Cpu);
    let mut snapshots = snapshot_every.map(|every| Snapshots::new(&args.results.out, every, summary.clone()));
    let stopped_by = drive(&mut run, snapshots.as_mut(), args.quiet);
    // A malformed message: nothing is written (the snapshots are removed with them).
    if let Some(e) = &stopped_by
        && !keeps_results(e)
    {
        drop(snapshots);
        return Err(live_failure(stopped_by.unwrap_or(LiveError::Stopped)));
    }
    crate::output::interrupt::writing();
    let (results, _) = run.results_each();
    let stats = run.stats();
    let (status, failures) = match &stopped_by {
        None => (RunStatus::Complete, Vec::new()),
        Some(LiveError::Stopped) => (RunStatus::Interrupted, Vec::new()),
        Some(e) => {
            let failure = PartitionFailure { partition: None, frames: None, udf: None, at: None, error: e.to_string() };
            let status = if matches!(e, LiveError::Ended { .. }) { RunStatus::Partial } else { RunStatus::Failed };
            (status, vec![failure])
        }
    };
    let previews = if args.preview { preview::run_previews(&results, &PreviewOptions::default())? } else { Vec::new() };
    summary.record_results(&results, &previews);
    summary.finish(status, &failures, 0, &results.stats, started);
    summary.live = Some(stats.clone());
    let replace = args.results.force || snapshots.as_ref().is_some_and(Snapshots::made_output_dir);
    output::stage(&args.results.out, &results, &summary, &previews, args.preview, replace)?.commit()?;
    if let Some(snapshots) = snapshots {
        snapshots.finish();
    }
    if !args.quiet {
        eprint!("{}", summary.to_text(&args.results.out));
        eprintln!(
            "{} of {} frames received in {:.2} s ({:.2} GB/s; the receiver waited for the partitions {} times, {:.2} s)",
            stats.frames_received,
            stats.frames_expected,
            stats.seconds,
            stats.gbps(),
            stats.buffer.back_pressure_waits,
            stats.buffer.back_pressure_seconds,
        );
    }
    match stopped_by {
        None => Ok(()),
        Some(LiveError::Run(e)) => {
            let mut failure = run_failure(e);
            failure.error = failure.error.context(format!("what was merged is in {}", args.results.out.display()));
            Err(failure)
        }
        Some(e) => Err(Failure {
            code: exit::PARTIAL,
            error: anyhow!("{e}; what was merged is in {} (valid masks say which frames)", args.results.out.display()),
        }),
    }
}

/// Iterate the run to its end, writing snapshots and a progress line: the error that
/// ended it, if one did.
fn drive(run: &mut LiveRun, mut snapshots: Option<&mut Snapshots>, quiet: bool) -> Option<LiveError> {
    let mut last_report = Instant::now();
    loop {
        match run.next_timeout(Duration::from_millis(200)) {
            Poll::Ready(None) => return None,
            Poll::Ready(Some(Err(e))) => return Some(e),
            Poll::Ready(Some(Ok(_))) => {
                if let Some(snapshots) = snapshots.as_deref_mut() {
                    snapshots.tick_on(run.damage(), || run.results());
                }
            }
            Poll::Pending => {}
        }
        if !quiet && last_report.elapsed() >= Duration::from_secs(2) {
            last_report = Instant::now();
            let s = run.stats();
            eprintln!(
                "{}/{} frames received ({:.2} GB/s), buffer peak {} MiB",
                s.frames_received,
                s.frames_expected,
                s.gbps(),
                s.buffer.peak_bytes >> 20
            );
        }
    }
}

/// Whether a run that ended with `e` has results worth writing: what was merged before a
/// disconnect, stall, Ctrl-C or plugin failure; not what came before malformed input.
fn keeps_results(e: &LiveError) -> bool {
    matches!(e, LiveError::Ended { .. } | LiveError::Stopped | LiveError::Run(RunError::Udf { .. }))
}

/// A live run that could not start or go on: the plugin's fault (exit 2), udf-host's
/// (4), else the input's or the detector's (1).
fn live_failure(e: LiveError) -> Failure {
    match e {
        LiveError::Run(e) => run_failure(e),
        e => Failure { code: exit::USER_ERROR, error: e.into() },
    }
}
