//! `udf-host run PLUGIN... DATA`: run plugins over a dataset in one pass and write their
//! results. A short script over library calls: load the UDFs ([`crate::loader`]), open
//! the dataset, assign the parameters ([`crate::params::assign`]), plan
//! ([`crate::exec::Run`]), then record the run ([`crate::output::record`]).

use super::dataset::DatasetArgs;
use super::progress::ProgressDisplay;
use super::{Failure, RuntimeArgs, Shape, exit};
use crate::dataset::DatasetSpec;
use crate::exec::{Progress, Run, RunError, RunOptions, UdfSpec};
use crate::loader::LoadedUdfs;
use crate::log::LogLevel;
use crate::output::record::{self, Destination, Recorded, Watch};
use crate::report::{RunStatus, RunSummary, Timings};
use crate::roi::Roi;
use anyhow::anyhow;
use clap::Args;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct RunArgs {
    /// Plugins (.wasm components) or built-ins (builtin:NAME, see `udf-host list`), then
    /// the dataset: PLUGIN... DATA. Options may come between them
    /// (`udf-host run builtin:ring --param ri=10 --param ro=40 data.mib`).
    // At least two in all, checked in `run`: clap counts a positional interrupted by
    // options per stretch, so `num_args = 2..` would refuse the example above.
    #[arg(required = true, num_args = 1.., value_name = "FILE")]
    inputs: Vec<PathBuf>,
    /// A parameter: NAME=VALUE, NAME=@array.npy, or UDF.NAME=VALUE for one plugin only.
    #[arg(long = "param", short = 'p', value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Output directory.
    #[arg(long, short = 'o', default_value = "udf-results")]
    out: PathBuf,
    /// Replace the output directory if it exists.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    dataset: DatasetArgs,
    /// Process only the frames selected by a nav-shaped .npy (nonzero = selected).
    #[arg(long, value_name = "ROI.npy", conflicts_with = "roi_rect")]
    roi: Option<PathBuf>,
    /// Process only a rectangle of scan positions: y0:y1,x0:x1 (end exclusive; ';' joins several).
    #[arg(long, value_name = "RANGES")]
    roi_rect: Option<String>,
    /// When a partition fails, go on with the others (its frames stay invalid; exit code 3).
    #[arg(long)]
    keep_going: bool,
    /// Write a PNG preview next to every image result (<buffer>.png) and show them in
    /// OUT/index.html.
    #[arg(long)]
    preview: bool,
    /// While the run goes on, write the results merged so far (npy, valid masks, PNG
    /// previews, a self-reloading index.html) to OUT/partial/ at most every SECONDS.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds, allow_hyphen_values = true)]
    snapshot_every: Option<f64>,
    /// Refuse runs whose merged results would need more host memory than this.
    #[arg(long, value_name = "SIZE", default_value = "16G", value_parser = super::parse_memory)]
    max_result_memory: u64,
    /// Also write the run plan as JSON (for running partitions elsewhere:
    /// `udf-host run-partition`).
    #[arg(long, value_name = "PLAN.json")]
    save_plan: Option<PathBuf>,
    /// Worker threads [default: all cores].
    #[arg(long)]
    threads: Option<usize>,
    /// Number of partitions [default: ~512 MiB each, at least 2 per thread].
    #[arg(long)]
    partitions: Option<usize>,
    /// Where built-ins with a CUDA kernel compute: cpu, cuda (an error without a usable
    /// GPU) or auto (the GPU when there is one). See docs/gpu.md.
    #[arg(long, value_name = "cpu|cuda|auto", default_value = "cpu", value_parser = parse_device)]
    device: crate::cuda::Device,
    /// Force the tile shape DEPTH,SIG... instead of negotiating it (testing).
    #[arg(long, value_name = "D,Y,X")]
    tile_shape: Option<Shape>,
    /// More output: -v shows the plan (dtype, partitions, tile shape) and plugin info logs.
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
    /// No progress bar and no summary.
    #[arg(short, long)]
    quiet: bool,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

pub fn run(args: RunArgs) -> Result<(), Failure> {
    let started = Instant::now();
    let (data_path, sources) = split_inputs(&args.inputs)?;
    if args.out.exists() && !args.force {
        return Err(crate::output::OutputError::Exists(args.out.clone()).into());
    }
    let level = match args.verbose {
        0 => LogLevel::Warn,
        1 => LogLevel::Info,
        _ => LogLevel::Debug,
    };
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    let runtime = args.runtime.build(crate::log::stderr(level), threads, sources.len())?;
    let LoadedUdfs { udfs, loads } = crate::loader::load_sources(&runtime, sources).map_err(super::load_failure)?;
    let load_seconds = started.elapsed().as_secs_f64();
    let opened = DatasetSpec::file(data_path, args.dataset.open_options()?).open()?;
    let roi = args.roi(&opened.dataset.shape().nav)?;
    let params = crate::params::assign(&udfs, &args.params)?;
    let specs = udfs.into_iter().zip(params).map(|(udf, params)| UdfSpec { udf, params }).collect();
    let options = RunOptions {
        roi,
        partitions: args.partitions,
        threads: Some(threads),
        tile_shape: args.tile_shape.clone().map(|s| s.0),
        keep_going: args.keep_going,
        max_result_bytes: Some(args.max_result_memory),
        limits: args.runtime.limits(),
        device: args.device,
        ..RunOptions::default()
    };
    let plan_started = Instant::now();
    let run = Run::plan(opened, specs, options).map_err(run_failure)?;
    let plan_seconds = plan_started.elapsed().as_secs_f64();
    if let Some(path) = &args.save_plan {
        std::fs::write(path, run.as_plan().to_json())
            .map_err(|e| anyhow!("--save-plan: cannot write {}: {e}", path.display()))?;
    }
    if args.verbose > 0 {
        eprint!("{}", crate::report::plan_text(&run, args.device));
    }
    let plan = run.worker().plan().clone();
    let mut summary = RunSummary::planned(&run, loads, args.device);
    summary.timings = Some(Timings { load_seconds, plan_seconds, ..Timings::default() });
    let to = Destination {
        dir: args.out.clone(),
        force: args.force,
        previews: args.preview,
        snapshot_every: args.snapshot_every.map(Duration::from_secs_f64),
    };
    crate::interrupt::listen_to_ctrl_c();
    let mut watch = Display { quiet: args.quiet, progress: None };
    let recorded = record::record(run, summary, &to, started, &mut watch).map_err(|e| match e {
        record::RecordError::Run(e) => run_failure(e),
        e => e.into(),
    })?;
    if !args.quiet {
        eprint!("{}", recorded.summary.to_text(&args.out));
    }
    outcome(recorded, &plan, &args.out)
}

/// The exit of a recorded run: 0 when complete, else what stopped it or how much is
/// missing, and where the rest is.
fn outcome(recorded: Recorded, plan: &crate::exec::Plan, out: &Path) -> Result<(), Failure> {
    let Recorded { summary, stopped_by } = recorded;
    let partitions = summary.partitions;
    match (summary.status, stopped_by) {
        (RunStatus::Interrupted, _) => Err(Failure {
            code: exit::PARTIAL,
            error: anyhow!("interrupted; the {} partitions merged so far are in {}", partitions.merged, out.display()),
        }),
        (_, Some(e)) => {
            let note = e.dtype_note(plan);
            let mut failure = run_failure(e);
            failure.error = failure.error.context(format!(
                "the run stopped; what is complete is in {} (results.json lists the failures)",
                out.display()
            ));
            if let Some(note) = note {
                // After the whole chain: the note explains its last part.
                failure.error = anyhow!("{}\nnote: {note}", super::error_text(&failure.error));
            }
            Err(failure)
        }
        (RunStatus::Partial, None) => Err(Failure {
            code: exit::PARTIAL,
            error: anyhow!(
                "{} failure(s) (--keep-going): {} of {} partitions failed; the rest is in {} and results.json \
                 lists the failures",
                summary.failures.as_ref().map_or(0, Vec::len),
                partitions.failed,
                partitions.count,
                out.display()
            ),
        }),
        _ => Ok(()),
    }
}

impl RunArgs {
    /// The ROI of `--roi` or `--roi-rect` for a scan of shape `nav`.
    fn roi(&self, nav: &[usize]) -> anyhow::Result<Option<Roi>> {
        Ok(match (&self.roi, &self.roi_rect) {
            (Some(path), _) => {
                let array = crate::npy::read_array(path).map_err(|e| anyhow!("--roi: {e}"))?;
                Some(Roi::from_array(&array, nav).map_err(|e| anyhow!("--roi {}: {e}", path.display()))?)
            }
            (None, Some(spec)) => Some(Roi::from_rect(spec, nav).map_err(|e| anyhow!("--roi-rect: {e}"))?),
            (None, None) => None,
        })
    }
}

/// The dataset (the last input) and the plugins before it.
fn split_inputs(inputs: &[PathBuf]) -> anyhow::Result<(&Path, &[PathBuf])> {
    let (data, plugins) = match inputs.split_last() {
        Some((data, plugins)) if !plugins.is_empty() => (data, plugins),
        _ => anyhow::bail!(
            "give at least one plugin (a .wasm file or builtin:NAME) and then the dataset: udf-host run PLUGIN... DATA"
        ),
    };
    if crate::loader::names_a_udf(data) {
        anyhow::bail!(
            "the last input, {}, is a plugin, but it must be the dataset: udf-host run PLUGIN... DATA",
            data.display()
        );
    }
    Ok((data, plugins))
}

/// What the command line shows while a run is recorded: a progress bar (unless quiet or
/// not on a terminal) and a warning per failed partition.
struct Display {
    quiet: bool,
    progress: Option<ProgressDisplay>,
}

impl Watch for Display {
    fn started(&mut self, progress: Progress) {
        self.progress = Some(ProgressDisplay::start(progress, self.quiet));
    }

    fn partition_failed(&mut self, error: &RunError) {
        eprintln!("warning: {error:#}; going on with the other partitions (--keep-going)");
    }

    fn finished(&mut self) {
        self.progress = None;
    }
}

/// `--device`.
fn parse_device(text: &str) -> Result<crate::cuda::Device, String> {
    crate::cuda::Device::parse(text).ok_or_else(|| format!("'{text}' is not a device: cpu, cuda or auto"))
}

/// `--snapshot-every`: a positive number of seconds.
fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s.is_finite() && s < 1e9 => Ok(s),
        _ => Err(format!("'{text}' is not a positive number of seconds (e.g. 5 or 0.5)")),
    }
}

/// The exit code of a run's error: the user's (1), a plugin's (2), or a bug (4).
pub(super) fn run_failure(e: RunError) -> Failure {
    let code = match &e {
        RunError::Internal(_) => exit::INTERNAL,
        e if e.is_user_error() => exit::USER_ERROR,
        _ => exit::PLUGIN_FAILURE,
    };
    Failure { code, error: e.into() }
}
