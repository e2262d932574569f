//! `udf-host live SOURCE PLUGIN...`: run plugins over a scan while it comes off the
//! detector (docs/live.md). The wiring of `run`, with [`crate::live::LiveRun`] in place
//! of the file's run.

use super::run::{assign_params, interrupt, run_failure};
use super::{Failure, RuntimeArgs, Shape, exit};
use crate::exec::RunError;
use crate::live::{LiveError, LiveOptions, LiveRun, LiveSource, Stop};
use crate::log::LogLevel;
use crate::output;
use crate::output::snapshot::Snapshots;
use crate::preview::{self, PreviewOptions};
use crate::roi::Roi;
use crate::udf::Udf;
use crate::wasm::{LoadErrorKind, WasmRuntime};
use anyhow::anyhow;
use clap::Args;
use serde_json::json;
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
    /// A parameter: NAME=VALUE, NAME=@array.npy, or UDF.NAME=VALUE for one plugin only.
    #[arg(long = "param", short = 'p', value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Output directory.
    #[arg(long, short = 'o', default_value = "udf-results")]
    out: PathBuf,
    /// Replace the output directory if it exists.
    #[arg(long)]
    force: bool,
    /// While the scan goes on, write the results merged so far to OUT/partial/ at most
    /// every SECONDS.
    #[arg(long, value_name = "SECONDS")]
    snapshot_every: Option<f64>,
    /// Write PNG previews of image results (and in the snapshots).
    #[arg(long)]
    preview: bool,
    /// DECTRIS: the SIMPLON API to arm the detector through, e.g. http://HOST:80
    /// [default: wait for a series armed by someone else].
    #[arg(long, value_name = "URL")]
    api: Option<String>,
    /// Frames per partition: results update once per partition [default: ~16 MiB of frames].
    #[arg(long, value_name = "N")]
    partition_frames: Option<usize>,
    /// Received frames held in memory at most; past it udf-host stops reading from the
    /// detector until partitions catch up (back-pressure; nothing is dropped).
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = super::parse_memory)]
    max_buffer: u64,
    /// Seconds the detector may send nothing inside a scan before the scan is taken as
    /// ended (the results so far are written; exit code 3).
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    stall_timeout: f64,
    /// Seconds to wait for the acquisition to start [default: until Ctrl-C].
    #[arg(long, value_name = "SECONDS")]
    start_timeout: Option<f64>,
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

fn seconds(name: &str, value: f64) -> anyhow::Result<Duration> {
    anyhow::ensure!(value.is_finite() && value > 0.0, "--{name} must be a positive number of seconds, got {value}");
    Ok(Duration::from_secs_f64(value))
}

pub fn live(args: LiveArgs) -> Result<(), Failure> {
    let started = Instant::now();
    let (source_text, plugins) = args.inputs.split_first().ok_or_else(|| anyhow!("give the source, then plugins"))?;
    let mut source: LiveSource = source_text.parse()?;
    if let (LiveSource::Dectris { api, .. }, Some(url)) = (&mut source, &args.api) {
        *api = Some(url.clone());
    } else if args.api.is_some() {
        return Err(anyhow!("--api is for dectris:// sources (the SIMPLON API)").into());
    }
    if args.out.exists() && !args.force {
        return Err(output::OutputError::Exists(args.out.clone()).into());
    }
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    let instances = ((threads + 2) * plugins.len()).max(4) as u32;
    let runtime = WasmRuntime::new(args.runtime.options(crate::log::stderr(LogLevel::Warn), instances)?)?;
    let mut udfs: Vec<Arc<dyn Udf>> = Vec::new();
    for plugin in plugins {
        if let Some(builtin) = crate::builtins::from_source(plugin) {
            udfs.push(builtin?);
            continue;
        }
        let (udf, _) = runtime.load(plugin.as_ref()).map_err(|e| Failure {
            code: if e.kind == LoadErrorKind::Read { exit::USER_ERROR } else { exit::PLUGIN_FAILURE },
            error: e.into(),
        })?;
        udfs.push(Arc::new(udf));
    }
    let nav = args.nav_shape.0.clone();
    let mut options = LiveOptions::new(nav.clone());
    options.run.threads = Some(threads);
    options.run.limits = args.runtime.limits();
    options.run.roi = args
        .roi_rect
        .as_deref()
        .map(|r| Roi::from_rect(r, &nav).map_err(|e| anyhow!("--roi-rect: {e}")))
        .transpose()?;
    options.partition_frames = args.partition_frames;
    options.max_buffer = args.max_buffer;
    options.stall_timeout = seconds("stall-timeout", args.stall_timeout)?;
    options.start_timeout = args.start_timeout.map(|s| seconds("start-timeout", s)).transpose()?;
    let specs = assign_params(&udfs, &args.params)?;

    // Ctrl-C stops the wait for the acquisition, or the scan (what is merged is written).
    let stop = Stop::default();
    let _interrupt = {
        let stop = stop.clone();
        interrupt::Guard::install(Arc::new(move || stop.stop()))
    };
    if !args.quiet {
        eprintln!("waiting for an acquisition on {} ...", source.url());
    }
    let mut run = LiveRun::start(&source, specs, options, stop.clone()).map_err(live_failure)?;
    let plan = run.plan().clone();
    let mut summary = json!({
        "udf_host_version": env!("CARGO_PKG_VERSION"),
        "dataset": {
            "path": source.url(),
            "format": plan.dataset.as_ref().map_or("live", |_| "live"),
            "nav_shape": plan.shape.nav,
            "sig_shape": plan.shape.sig,
            "dtype": plan.stored_dtype.descr(),
        },
        "threads": threads,
        "partitions": {"count": plan.partitions.len()},
    });
    let mut snapshots = args
        .snapshot_every
        .map(|s| seconds("snapshot-every", s).map(|every| (Snapshots::new(&args.out, every, summary.clone()), every)))
        .transpose()?;
    let mut last_snapshot = Instant::now();
    let mut stopped_by = None;
    let mut last_report = Instant::now();
    loop {
        match run.next_timeout(Duration::from_millis(200)) {
            Poll::Ready(None) => break,
            Poll::Ready(Some(Ok(_))) | Poll::Pending => {}
            Poll::Ready(Some(Err(e))) => {
                stopped_by = Some(e);
                break;
            }
        }
        if let Some((snapshots, every)) = snapshots.as_mut()
            && last_snapshot.elapsed() >= *every
        {
            last_snapshot = Instant::now();
            if let Ok(results) = run.results()
                && let Err(e) = snapshots.write(&results)
            {
                eprintln!("warning: cannot write a snapshot: {e}");
            }
        }
        if !args.quiet && last_report.elapsed() >= Duration::from_secs(2) {
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
    // A malformed message or a failed start: nothing is written (snapshots removed).
    let keep = match &stopped_by {
        None | Some(LiveError::Ended { .. } | LiveError::Stopped) => true,
        Some(LiveError::Run(RunError::Udf { .. })) => true,
        Some(_) => false,
    };
    if !keep {
        drop(snapshots);
        return Err(live_failure(stopped_by.unwrap_or(LiveError::Stopped)));
    }
    interrupt::writing();
    let (results, _failures) = run.results_each();
    let stats = run.stats();
    let status = match &stopped_by {
        None => "complete",
        Some(LiveError::Stopped) => "interrupted",
        Some(LiveError::Ended { .. }) => "ended early",
        Some(_) => "failed",
    };
    let previews = if args.preview { preview::run_previews(&results, &PreviewOptions::default())? } else { Vec::new() };
    output::extend_summary(
        &mut summary,
        json!({
            "input_dtype": results.input_dtype.name(),
            "status": status,
            "error": stopped_by.as_ref().map(|e| e.to_string()),
            "live": stats,
            "udfs": output::udfs_json(&results, &previews),
            "frames": results.stats.frames,
            "partitions": {"count": results.stats.partitions, "merged": results.stats.partitions_merged},
            "timings": {"total_seconds": started.elapsed().as_secs_f64()},
        }),
    );
    let replace = args.force || snapshots.as_ref().is_some_and(|(s, _)| s.made_output_dir());
    let staged = output::stage(&args.out, &results, &summary, &previews, args.preview, replace)?;
    staged.commit()?;
    if let Some((snapshots, _)) = snapshots {
        snapshots.finish();
    }
    if !args.quiet {
        eprintln!(
            "{} of {} frames received in {:.2} s ({:.2} GB/s, back-pressure {} times, {:.2} s); results in {}/",
            stats.frames_received,
            stats.frames_expected,
            stats.seconds,
            stats.gbps(),
            stats.buffer.back_pressure_waits,
            stats.buffer.back_pressure_seconds,
            args.out.display()
        );
    }
    match stopped_by {
        None => Ok(()),
        Some(LiveError::Run(e)) => {
            let mut failure = run_failure(e);
            failure.error = failure.error.context(format!("what was merged is in {}", args.out.display()));
            Err(failure)
        }
        Some(e) => Err(Failure {
            code: exit::PARTIAL,
            error: anyhow!("{e}; what was merged is in {} (valid masks say which frames)", args.out.display()),
        }),
    }
}

/// A live run that could not start or go on: the plugin's fault (exit 2), udf-host's
/// (4), else the input's or the detector's (1).
fn live_failure(e: LiveError) -> Failure {
    match e {
        LiveError::Run(e) => run_failure(e),
        e => Failure { code: exit::USER_ERROR, error: e.into() },
    }
}
