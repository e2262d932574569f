//! `udf-host run PLUGIN... DATA`: run plugins over a dataset in one pass.

use super::progress::ProgressDisplay;
use super::{Failure, RuntimeArgs, Shape, exit};
use crate::dataset::{DatasetSpec, ExcludedPixels, Format, OpenOptions};
use crate::dtype::StoredDType;
use crate::exec::{PartitionFailure, Run, RunError, RunOptions, UdfSpec};
use crate::log::LogLevel;
use crate::output::snapshot::Snapshots;
use crate::preview::{self, PreviewOptions};
use crate::roi::Roi;
use crate::udf::{Param, Params, Udf};
use crate::wasm::{CacheOutcome, WasmRuntime};
use crate::{output, params};
use anyhow::anyhow;
use clap::Args;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How to open the dataset: format, shapes, sync offset, corrections (shared by `run`
/// and `info`).
#[derive(Args, Debug, Clone)]
pub struct DatasetArgs {
    /// Dataset format (default: detected from the extension and content).
    #[arg(long, value_name = "raw|npy|mib|...")]
    format: Option<String>,
    /// Element type of raw data, NumPy style: float32, uint16, '>u2' (big-endian)...
    #[arg(long)]
    dtype: Option<String>,
    /// Nav (scan) shape, e.g. 64,64 (may use fewer frames than the files hold).
    #[arg(long)]
    nav_shape: Option<Shape>,
    /// Sig (frame) shape, e.g. 256,256 (the same number of pixels as the frames).
    #[arg(long)]
    sig_shape: Option<Shape>,
    /// Bytes to skip at the start of a raw file.
    #[arg(long, default_value_t = 0)]
    offset: u64,
    /// Skip K leading frames (K > 0) or insert |K| blank frames (K < 0).
    #[arg(long, value_name = "K", allow_negative_numbers = true)]
    sync_offset: Option<i64>,
    /// Dark frame to subtract (.npy of the frame shape).
    #[arg(long, value_name = "DARK.npy")]
    dark: Option<PathBuf>,
    /// Gain map to multiply with after the dark subtraction (.npy of the frame shape).
    #[arg(long, value_name = "GAIN.npy")]
    gain: Option<PathBuf>,
    /// Pixels to repair from their neighbours: a boolean .npy mask of the frame shape,
    /// or coordinates 'y,x;y,x;...'.
    #[arg(long, value_name = "MASK.npy|Y,X;...")]
    excluded_pixels: Option<String>,
    /// HDF5: the dataset to read, e.g. /entry/data/data [default: the only 3-D/4-D one].
    #[arg(long, value_name = "PATH")]
    dataset_path: Option<String>,
    /// HDF5: the array axes that form a frame, e.g. 0,1 for (height, width, frames)
    /// [default: what the file's layout says, else the last two].
    #[arg(long, value_name = "A,B")]
    sig_axes: Option<Shape>,
}

impl DatasetArgs {
    /// The library's open options.
    pub fn open_options(&self) -> anyhow::Result<OpenOptions> {
        Ok(OpenOptions {
            format: self
                .format
                .as_deref()
                .map(|f| Format::parse(f).ok_or_else(|| anyhow!("unknown --format '{f}' ({})", Format::NAMES)))
                .transpose()?,
            dtype: self
                .dtype
                .as_deref()
                .map(|d| {
                    StoredDType::parse(d)
                        .ok_or_else(|| anyhow!("--dtype '{d}' is not a dtype (try float32, uint16, '>u2')"))
                })
                .transpose()?,
            nav_shape: self.nav_shape.clone().map(|s| s.0),
            sig_shape: self.sig_shape.clone().map(|s| s.0),
            offset: self.offset,
            sync_offset: self.sync_offset,
            dark: self.dark.clone(),
            gain: self.gain.clone(),
            excluded_pixels: self
                .excluded_pixels
                .as_deref()
                .map(|e| ExcludedPixels::parse(e).map_err(|m| anyhow!("--excluded-pixels: {m}")))
                .transpose()?,
            dataset_path: self.dataset_path.clone(),
            sig_axes: self.sig_axes.clone().map(|s| s.0),
        })
    }
}

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
    /// Refuse runs whose results (merged buffers, results, valid masks, nav buffers
    /// expanded to the scan) would need more host memory than this [default: half the
    /// machine's memory].
    #[arg(long, value_name = "SIZE", value_parser = super::parse_memory)]
    max_result_memory: Option<u64>,
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
    let (data_path, plugin_paths) = match args.inputs.split_last() {
        Some((data, plugins)) if !plugins.is_empty() => (data, plugins),
        _ => {
            return Err(anyhow!(
                "give at least one plugin (a .wasm file or builtin:NAME) and then the dataset: \
                 udf-host run PLUGIN... DATA"
            )
            .into());
        }
    };
    if looks_like_plugin(data_path) {
        return Err(anyhow!(
            "the last input, {}, is a plugin, but it must be the dataset: udf-host run PLUGIN... DATA",
            data_path.display()
        )
        .into());
    }
    if args.out.exists() && !args.force {
        return Err(output::OutputError::Exists(args.out.clone()).into());
    }
    let level = match args.verbose {
        0 => LogLevel::Warn,
        1 => LogLevel::Info,
        _ => LogLevel::Debug,
    };
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    let instances = ((threads + 2) * plugin_paths.len()).max(4) as u32;
    let runtime = WasmRuntime::new(args.runtime.options(crate::log::stderr(level), instances)?)?;

    // Plugins.
    let mut udfs: Vec<Arc<dyn Udf>> = Vec::new();
    let mut loads = Vec::new();
    for path in plugin_paths {
        if let Some(builtin) = path.to_str().and_then(crate::builtins::from_source) {
            udfs.push(builtin?);
            loads.push(json!({"source": path.display().to_string(), "cache": "builtin", "load_seconds": 0.0}));
            continue;
        }
        let (udf, stats) = runtime.load(path).map_err(|e| Failure {
            code: if e.kind.is_users() { exit::USER_ERROR } else { exit::PLUGIN_FAILURE },
            error: e.into(),
        })?;
        loads.push(json!({
            "source": path.display().to_string(),
            "cache": match stats.cache { CacheOutcome::Hit => "hit", CacheOutcome::Compiled => "compiled" },
            "load_seconds": stats.load_time.as_secs_f64(),
        }));
        udfs.push(Arc::new(udf));
    }
    let load_seconds = started.elapsed().as_secs_f64();

    // Dataset (with its spec, so the plan could be shipped: `--save-plan`).
    let opened = DatasetSpec::file(data_path, args.dataset.open_options()?).open()?;
    let data = opened.dataset.clone();

    // ROI, params and plan.
    let nav = data.shape().nav.clone();
    let roi = match (&args.roi, &args.roi_rect) {
        (Some(path), _) => {
            let array = crate::npy::read_array(path).map_err(|e| anyhow!("--roi: {e}"))?;
            Some(Roi::from_array(&array, &nav).map_err(|e| anyhow!("--roi {}: {e}", path.display()))?)
        }
        (None, Some(spec)) => Some(Roi::from_rect(spec, &nav).map_err(|e| anyhow!("--roi-rect: {e}"))?),
        (None, None) => None,
    };
    let roi_json = roi.as_ref().map(|r| json!({"count": r.count(), "positions": r.len()}));
    let specs = assign_params(&udfs, &args.params)?;
    let run_options = RunOptions {
        roi,
        partitions: args.partitions,
        threads: Some(threads),
        tile_shape: args.tile_shape.clone().map(|s| s.0),
        keep_going: args.keep_going,
        max_result_bytes: args.max_result_memory,
        limits: args.runtime.limits(),
        device: args.device,
        ..RunOptions::default()
    };
    let plan_started = Instant::now();
    let run = Run::plan(opened, specs, run_options).map_err(run_failure)?;
    let plan_seconds = plan_started.elapsed().as_secs_f64();
    if let Some(path) = &args.save_plan {
        std::fs::write(path, run.as_plan().to_json())
            .map_err(|e| anyhow!("--save-plan: cannot write {}: {e}", path.display()))?;
    }
    let tile_shape = run.tiling().tile_shape();
    if args.verbose > 0 {
        let shape = data.shape();
        eprintln!(
            "dataset {} ({}): nav {:?} sig {:?} {}",
            data_path.display(),
            data.info().format,
            shape.nav,
            shape.sig,
            data.stored_dtype()
        );
        eprintln!(
            "input dtype {}, {} partitions, {threads} threads, tile shape {:?} ({} signal slices, {} intent)",
            run.input_dtype(),
            run.partitions().len(),
            tile_shape,
            run.tiling().slices.len(),
            run.tiling().intent.name()
        );
        for (name, plan, decls) in run.udfs() {
            let buffers: Vec<String> = decls.iter().map(|d| format!("{} ({:?} {})", d.name, d.kind, d.dtype)).collect();
            eprintln!("  {name}: {} method; buffers {}", plan.method.name(), buffers.join(", "));
        }
        if args.device != crate::cuda::Device::Cpu {
            for u in &run.as_plan().udfs {
                match &u.device_note {
                    Some(why) => eprintln!("  {}: on the CPU ({why})", u.name),
                    None => eprintln!("  {}: on the GPU ({:?})", u.name, u.device),
                }
            }
        }
    }
    let device_json = device_summary(args.device, run.as_plan());
    let tiling = run.tiling().clone();
    let run_names: Vec<String> = run.udfs().map(|(name, _, _)| name.to_owned()).collect();
    let planned = (
        run.udfs().map(|(name, plan, _)| (name.to_owned(), plan.input_dtype)).collect::<Planned>(),
        data.stored_dtype().dtype,
        run.input_dtype(),
    );
    let partitions = run.partitions().len();
    // What results.json says that does not change while the run goes on.
    let info = data.info();
    let shape = data.shape();
    let mut summary = json!({
        "udf_host_version": env!("CARGO_PKG_VERSION"),
        "contract": format!("{}@{}.{}.{}", crate::wasm::WIT_PACKAGE, crate::wasm::WIT_VERSION.0, crate::wasm::WIT_VERSION.1, crate::wasm::WIT_VERSION.2),
        "dataset": {
            "path": info.path.display().to_string(),
            "format": info.format,
            "nav_shape": shape.nav,
            "sig_shape": shape.sig,
            "dtype": data.stored_dtype().descr(),
            "details": info.details.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
        },
        "roi": roi_json,
        "threads": threads,
        "partitions": {"count": partitions},
        "tiling": {
            "tile_shape": tile_shape,
            "depth": tiling.depth,
            "signal_slices": tiling.slices.len(),
            "intent": tiling.intent.name(),
        },
        "plugins": loads,
        "device": device_json,
    });
    let mut snapshots =
        args.snapshot_every.map(|s| Snapshots::new(&args.out, Duration::from_secs_f64(s), summary.clone()));

    // Execute; Ctrl-C stops the run and keeps what is merged. The handler stays until
    // the results are written: a Ctrl-C while writing lets the writing finish, a second
    // one exits and removes what is half-written (`output::cleanup`).
    let mut iter = run.iter();
    let mut stopped_by: Option<RunError> = None;
    // A partition that failed by a bug of udf-host (a panic): exit 4 even with --keep-going.
    let mut internal_failure = false;
    let progress = iter.progress();
    let _interrupt = interrupt::Guard::install(Arc::new(move || progress.interrupt()));
    {
        let _display = ProgressDisplay::start(iter.progress(), args.quiet);
        while let Some(step) = iter.next() {
            if let Err(e) = step {
                if e.is_user_error() && iter.damage().iter().all(|d| !d) {
                    return Err(run_failure(e));
                }
                if !args.keep_going || matches!(e, RunError::Cancelled) {
                    stopped_by = Some(e);
                    break;
                }
                internal_failure |= matches!(e, RunError::Internal(_));
                eprintln!("warning: {e:#}; going on with the other partitions (--keep-going)");
            }
            if let Some(snapshots) = snapshots.as_mut() {
                snapshots.tick(&iter);
            }
        }
    }
    interrupt::writing();
    // Every UDF that has results keeps them; one whose merge or get_results failed is
    // listed among the failures instead (the first failure stays the reported one).
    let (results, udf_failures) = iter.results_each();
    let interrupted = iter.interrupted();
    let mut failures = iter.failures().to_vec();
    let partitions_failed = failures.iter().filter(|f| f.partition.is_some() && !is_merge(f)).count();
    let mut first_udf_failure = None;
    for (u, e) in udf_failures {
        let name = &run_names[u];
        // A failed merge is recorded by the run already.
        if failures.iter().any(|f| f.udf.as_deref() == Some(name.as_str()) && is_merge(f)) {
            continue;
        }
        failures.push(PartitionFailure {
            partition: None,
            frames: None,
            udf: Some(name.clone()),
            at: udf_at(&e),
            error: e.to_string(),
        });
        first_udf_failure.get_or_insert(e);
    }
    let mut stopped_by = stopped_by.or(first_udf_failure);
    // Never "complete" with a partition missing: every partition is merged or failed.
    let accounted = results.stats.partitions_merged + partitions_failed;
    if stopped_by.is_none() && !interrupted && accounted != partitions {
        stopped_by = Some(RunError::Internal(format!(
            "{accounted} of {partitions} partitions are accounted for ({} merged, {partitions_failed} failed)",
            results.stats.partitions_merged
        )));
    }
    let status = if interrupted {
        "interrupted"
    } else if stopped_by.is_some() {
        "failed"
    } else if !failures.is_empty() {
        "partial"
    } else {
        "complete"
    };

    // Write.
    let stats = &results.stats;
    let previews = if args.preview { preview::run_previews(&results, &PreviewOptions::default())? } else { Vec::new() };
    output::extend_summary(
        &mut summary,
        json!({
            "input_dtype": results.input_dtype.name(),
            "status": status,
            "failures": failures,
            "threads": stats.threads,
            "partitions": {"count": partitions, "merged": stats.partitions_merged, "failed": partitions_failed},
            "udfs": output::udfs_json(&results, &previews),
            "frames": stats.frames,
            "bytes_read": stats.bytes_read,
            "throughput_gb_per_s": stats.throughput_gbps(),
            "timings": {
                "load_seconds": load_seconds,
                "plan_seconds": plan_seconds,
                "process_seconds": stats.process_seconds,
                "merge_seconds": stats.merge_seconds,
                "results_seconds": stats.results_seconds,
                "total_seconds": started.elapsed().as_secs_f64(),
            },
        }),
    );
    // The snapshots made `--out` (holding only `partial/`): the results replace it.
    let replace = args.force || snapshots.as_ref().is_some_and(Snapshots::made_output_dir);
    let staged = output::stage(&args.out, &results, &summary, &previews, args.preview, replace)?;
    test_pause_before_commit();
    staged.commit()?;
    if let Some(snapshots) = snapshots {
        snapshots.finish();
    }
    if !args.quiet {
        print_summary(&args.out, &results, previews.len(), started);
    }
    match (stopped_by, interrupted, failures.is_empty()) {
        (_, true, _) => Err(Failure {
            code: exit::PARTIAL,
            error: anyhow!(
                "interrupted; the {} partitions merged so far are in {}",
                stats.partitions_merged,
                args.out.display()
            ),
        }),
        (Some(e), _, _) => {
            let mut failure = run_failure(e);
            let note = dtype_note(&failure.error, &planned);
            failure.error = failure.error.context(format!(
                "the run stopped; what is complete is in {} (results.json lists the failures)",
                args.out.display()
            ));
            if !note.is_empty() {
                // After the whole chain: the note explains its last part.
                failure.error = anyhow!("{}{note}", super::error_text(&failure.error));
            }
            Err(failure)
        }
        (None, false, false) => Err(Failure {
            code: if internal_failure { exit::INTERNAL } else { exit::PARTIAL },
            error: anyhow!(
                "{} failure(s) (--keep-going): {} of {} partitions failed; the rest is in {} and results.json \
                 lists the failures",
                failures.len(),
                partitions_failed,
                partitions,
                args.out.display()
            ),
        }),
        (None, false, true) => Ok(()),
    }
}

/// Whether a failure is a UDF's merge of a partition (not the partition's own).
fn is_merge(f: &PartitionFailure) -> bool {
    f.at.as_ref().is_some_and(|at| at.method == "merge")
}

/// Where a UDF's failure happened, if it says.
fn udf_at(e: &RunError) -> Option<crate::exec::FailurePoint> {
    match e {
        RunError::Udf { at, .. } => Some(at.clone()),
        _ => None,
    }
}

/// Whether `path` names a plugin rather than a dataset: `builtin:NAME` or a `.wasm` file.
fn looks_like_plugin(path: &Path) -> bool {
    path.to_str().is_some_and(|p| p.starts_with(crate::udf::BUILTIN_PREFIX))
        || path.extension().is_some_and(|e| e.eq_ignore_ascii_case("wasm"))
}

/// The run's choices of input dtype, for [`dtype_note`]: `(name, preference)` per UDF.
type Planned = Vec<(String, crate::udf::DTypePreference)>;

/// When a plugin failed in a run whose input dtype another plugin raised above its own
/// preference, say so: its error ("the tile holds float64, not float32") is about a
/// dtype it never asked for.
fn dtype_note(error: &anyhow::Error, planned: &(Planned, crate::dtype::DType, crate::dtype::DType)) -> String {
    use crate::udf::DTypePreference;
    let (udfs, stored, input) = planned;
    let Some(RunError::Udf { udf, .. }) = error.downcast_ref::<RunError>() else { return String::new() };
    let Some((_, own)) = udfs.iter().find(|(n, _)| n == udf) else { return String::new() };
    let wanted = match own {
        DTypePreference::Native => *stored,
        DTypePreference::Prefer(d) => crate::dtype::result_type(*d, *stored),
    };
    if wanted == *input {
        return String::new();
    }
    let raisers: Vec<String> = udfs
        .iter()
        .filter(|(n, p)| {
            n != udf && matches!(p, DTypePreference::Prefer(d) if crate::dtype::result_type(*d, *stored) == *input)
        })
        .map(|(n, _)| format!("'{n}'"))
        .collect();
    if raisers.is_empty() {
        return String::new();
    }
    format!(
        "\nnote: '{udf}' asks for {wanted} input, but {} raised the run's input dtype to {input}; \
         run '{udf}' in a run of its own if it cannot take {input}",
        raisers.join(", ")
    )
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

/// Ctrl-C: the first one stops the current run cleanly (and, while results are being
/// written, lets the writing finish); a second one removes what is half-written
/// ([`crate::output::cleanup`]) and exits at once.
mod interrupt {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex, Once};

    type Stop = Arc<dyn Fn() + Send + Sync>;
    static CURRENT: Mutex<Option<Stop>> = Mutex::new(None);
    static PRESSES: AtomicUsize = AtomicUsize::new(0);

    /// Routes Ctrl-C to a run while alive.
    pub struct Guard;

    impl Guard {
        pub fn install(stop: Stop) -> Guard {
            static HANDLER: Once = Once::new();
            HANDLER.call_once(|| {
                // If the handler cannot be installed, Ctrl-C keeps its default effect.
                let _ = ctrlc::set_handler(|| {
                    let current = CURRENT.lock().ok().and_then(|c| c.clone());
                    match current {
                        Some(stop) if PRESSES.fetch_add(1, Ordering::SeqCst) == 0 => stop(),
                        _ => {
                            crate::output::cleanup::undo_all();
                            std::process::exit(130);
                        }
                    }
                });
            });
            PRESSES.store(0, Ordering::SeqCst);
            set(Arc::new(move || {
                eprintln!("\ninterrupted: writing what is merged so far (Ctrl-C again to quit now)");
                stop();
            }));
            Guard
        }
    }

    fn set(stop: Stop) {
        if let Ok(mut c) = CURRENT.lock() {
            *c = Some(stop);
        }
    }

    /// The run is over and its results are being written: a first Ctrl-C now only says
    /// that the writing goes on.
    pub fn writing() {
        set(Arc::new(|| {
            eprintln!("\ninterrupted: finishing writing the results (Ctrl-C again to quit and discard them)");
        }));
    }

    impl Drop for Guard {
        fn drop(&mut self) {
            if let Ok(mut c) = CURRENT.lock() {
                *c = None;
            }
        }
    }
}

/// Map `--param` flags onto the UDFs: `UDF.NAME=VALUE` targets one plugin by its name
/// in the run (`NAME`, `NAME-2`, ... for repeats, as the output directories), or every
/// plugin of that name when none is named so; `NAME=VALUE` every plugin that declares
/// `NAME` (an error if none does).
pub(super) fn assign_params(udfs: &[Arc<dyn Udf>], flags: &[String]) -> anyhow::Result<Vec<UdfSpec>> {
    let run_names = crate::exec::unique_names(udfs.iter().map(|u| u.description().name.as_str()));
    let mut given: Vec<Params> = vec![Params::default(); udfs.len()];
    for flag in flags {
        let (key, value) =
            flag.split_once('=').ok_or_else(|| anyhow!("--param '{flag}' must be NAME=VALUE (or UDF.NAME=VALUE)"))?;
        let (target, name) = match key.split_once('.') {
            Some((udf, name)) => (Some(udf), name),
            None => (None, key),
        };
        let mut matched = false;
        let by_run_name = target.is_some_and(|t| run_names.iter().any(|n| n == t));
        for ((udf, params), run_name) in udfs.iter().zip(given.iter_mut()).zip(&run_names) {
            let desc = udf.description();
            let named = if by_run_name { run_name } else { &desc.name };
            if target.is_some_and(|t| t != named) {
                continue;
            }
            let Some(spec) = desc.params.iter().find(|s| s.name == name) else {
                if target.is_some() {
                    let names: Vec<&str> = desc.params.iter().map(|s| s.name.as_str()).collect();
                    anyhow::bail!(
                        "'{named}' has no parameter '{name}' (it accepts: {})",
                        if names.is_empty() { "none".into() } else { names.join(", ") }
                    );
                }
                continue;
            };
            let value = params::parse_value(spec, value).map_err(|e| anyhow!("--param {flag}: {e}"))?;
            params.0.push(Param { name: name.to_owned(), value });
            matched = true;
        }
        if !matched {
            match target {
                Some(t) => anyhow::bail!(
                    "--param {flag}: no plugin named '{t}' in this run (plugins: {})",
                    run_names.join(", ")
                ),
                None => {
                    let all: Vec<String> = udfs
                        .iter()
                        .map(|u| {
                            let d = u.description();
                            let names: Vec<&str> = d.params.iter().map(|s| s.name.as_str()).collect();
                            format!("{}: {}", d.name, if names.is_empty() { "none".into() } else { names.join(", ") })
                        })
                        .collect();
                    anyhow::bail!("no plugin has a parameter '{name}' (parameters: {})", all.join("; "));
                }
            }
        }
    }
    Ok(udfs.iter().cloned().zip(given).map(|(udf, params)| UdfSpec { udf, params }).collect())
}

/// `--device`.
fn parse_device(text: &str) -> Result<crate::cuda::Device, String> {
    crate::cuda::Device::parse(text).ok_or_else(|| format!("'{text}' is not a device: cpu, cuda or auto"))
}

/// What results.json says about devices: what was asked for, the GPU used, and per UDF
/// where it computed (and why not on the GPU).
fn device_summary(device: crate::cuda::Device, plan: &crate::exec::Plan) -> serde_json::Value {
    let gpu = (device != crate::cuda::Device::Cpu).then(|| crate::cuda::available().ok()).flatten();
    let udfs: serde_json::Map<String, serde_json::Value> =
        plan.udfs.iter().map(|u| (u.name.clone(), json!({"device": u.device, "cpu_because": u.device_note}))).collect();
    json!({"requested": device, "gpu": gpu, "udfs": udfs})
}

/// `--snapshot-every`: a positive number of seconds.
fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s.is_finite() && s < 1e9 => Ok(s),
        _ => Err(format!("'{text}' is not a positive number of seconds (e.g. 5 or 0.5)")),
    }
}

pub(super) fn run_failure(e: RunError) -> Failure {
    let code = match &e {
        RunError::Internal(_) => exit::INTERNAL,
        e if e.is_user_error() => exit::USER_ERROR,
        _ => exit::PLUGIN_FAILURE,
    };
    Failure { code, error: e.into() }
}

fn print_summary(out: &Path, results: &crate::exec::RunResults, previews: usize, started: Instant) {
    let s = &results.stats;
    eprintln!(
        "processed {} frames ({:.1} MB) in {:.2} s ({:.2} GB/s), {} partitions on {} threads",
        s.frames,
        s.bytes_read as f64 / 1e6,
        s.process_seconds,
        s.throughput_gbps(),
        s.partitions_merged,
        s.threads
    );
    for (udf, buffer, file, _) in output::file_names(results) {
        let shape = results
            .udfs
            .iter()
            .find(|u| u.name == udf)
            .and_then(|u| u.buffer(&buffer))
            .map(|b| format!("{:?} {}", b.data.shape(), b.dtype()))
            .unwrap_or_default();
        eprintln!("  {}  {shape}", out.join(file).display());
    }
    if previews > 0 {
        eprintln!("  {previews} PNG previews beside them");
    }
    eprintln!(
        "results in {}/ (summary: results.json, report: index.html), total {:.2} s",
        out.display(),
        started.elapsed().as_secs_f64()
    );
}
