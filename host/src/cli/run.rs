//! `udf-host run PLUGIN... DATA`: run plugins over a dataset in one pass.

use super::progress::ProgressDisplay;
use super::{Failure, RuntimeArgs, Shape, exit};
use crate::dataset::{self, Format, OpenOptions};
use crate::dtype::StoredDType;
use crate::exec::{Run, RunError, RunOptions, UdfSpec};
use crate::log::LogLevel;
use crate::udf::{Param, Params, Udf};
use crate::wasm::{CacheOutcome, LoadErrorKind, WasmRuntime};
use crate::{output, params};
use anyhow::anyhow;
use clap::Args;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

#[derive(Args)]
pub struct RunArgs {
    /// Plugins (.wasm components), then the dataset: PLUGIN... DATA.
    #[arg(required = true, num_args = 2.., value_name = "FILE")]
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
    /// Dataset format (default: detected from the file).
    #[arg(long, value_name = "raw|npy|hdf5|...")]
    format: Option<String>,
    /// Element type of raw data, NumPy style: float32, uint16, '>u2' (big-endian)...
    #[arg(long)]
    dtype: Option<String>,
    /// Nav (scan) shape, e.g. 64,64.
    #[arg(long)]
    nav_shape: Option<Shape>,
    /// Sig (frame) shape, e.g. 256,256.
    #[arg(long)]
    sig_shape: Option<Shape>,
    /// Bytes to skip at the start of a raw file.
    #[arg(long, default_value_t = 0)]
    offset: u64,
    // Formats, part B.
    /// HDF5: the dataset to read, e.g. /entry/data/data [default: the only 3-D/4-D one].
    #[arg(long, value_name = "PATH")]
    dataset_path: Option<String>,
    /// Worker threads [default: all cores].
    #[arg(long)]
    threads: Option<usize>,
    /// Number of partitions [default: ~512 MiB each, at least 2 per thread].
    #[arg(long)]
    partitions: Option<usize>,
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
    let (data_path, plugin_paths) = args.inputs.split_last().ok_or_else(|| anyhow!("give plugins and a dataset"))?;
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
        let (udf, stats) = runtime.load(path).map_err(|e| Failure {
            code: if e.kind == LoadErrorKind::Read { exit::USER_ERROR } else { exit::PLUGIN_FAILURE },
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

    // Dataset.
    let options = OpenOptions {
        format: args
            .format
            .as_deref()
            .map(|f| Format::parse(f).ok_or_else(|| anyhow!("unknown --format '{f}' (raw, npy, hdf5, ...)")))
            .transpose()?,
        dtype: args
            .dtype
            .as_deref()
            .map(|d| {
                StoredDType::parse(d)
                    .ok_or_else(|| anyhow!("--dtype '{d}' is not a dtype (try float32, uint16, '>u2')"))
            })
            .transpose()?,
        nav_shape: args.nav_shape.clone().map(|s| s.0),
        sig_shape: args.sig_shape.clone().map(|s| s.0),
        offset: args.offset,
        // Formats, part B.
        dataset_path: args.dataset_path.clone(),
    };
    let data = dataset::open(data_path, &options)?;

    // Params and plan.
    let specs = assign_params(&udfs, &args.params)?;
    let run_options = RunOptions {
        roi: None,
        partitions: args.partitions,
        threads: Some(threads),
        tile_shape: args.tile_shape.clone().map(|s| s.0),
    };
    let plan_started = Instant::now();
    let run = Run::plan(data.clone(), specs, run_options).map_err(run_failure)?;
    let plan_seconds = plan_started.elapsed().as_secs_f64();
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
    }
    let tiling = run.tiling().clone();
    let partitions = run.partitions().len();

    // Execute.
    let mut iter = run.iter();
    let results = {
        let _display = ProgressDisplay::start(iter.progress(), args.quiet);
        for step in iter.by_ref() {
            step.map_err(run_failure)?;
        }
        iter.results().map_err(run_failure)?
    };

    // Write.
    let info = data.info();
    let shape = data.shape();
    let stats = &results.stats;
    let summary = json!({
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
        "input_dtype": results.input_dtype.name(),
        "roi": null,
        "threads": stats.threads,
        "partitions": {"count": partitions, "merged": stats.partitions_merged},
        "tiling": {
            "tile_shape": tile_shape,
            "depth": tiling.depth,
            "signal_slices": tiling.slices.len(),
            "intent": tiling.intent.name(),
        },
        "plugins": loads,
        "udfs": output::udfs_json(&results),
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
    });
    output::write_results(&args.out, &results, &summary, args.force)?;
    if !args.quiet {
        print_summary(&args.out, &results, started);
    }
    Ok(())
}

/// Map `--param` flags onto the UDFs: `UDF.NAME=VALUE` targets one plugin by name,
/// `NAME=VALUE` every plugin that declares `NAME` (an error if none does).
fn assign_params(udfs: &[Arc<dyn Udf>], flags: &[String]) -> anyhow::Result<Vec<UdfSpec>> {
    let mut given: Vec<Params> = vec![Params::default(); udfs.len()];
    for flag in flags {
        let (key, value) =
            flag.split_once('=').ok_or_else(|| anyhow!("--param '{flag}' must be NAME=VALUE (or UDF.NAME=VALUE)"))?;
        let (target, name) = match key.split_once('.') {
            Some((udf, name)) => (Some(udf), name),
            None => (None, key),
        };
        let mut matched = false;
        for (udf, params) in udfs.iter().zip(given.iter_mut()) {
            let desc = udf.description();
            if target.is_some_and(|t| t != desc.name) {
                continue;
            }
            let Some(spec) = desc.params.iter().find(|s| s.name == name) else {
                if target.is_some() {
                    let names: Vec<&str> = desc.params.iter().map(|s| s.name.as_str()).collect();
                    anyhow::bail!(
                        "'{}' has no parameter '{name}' (it accepts: {})",
                        desc.name,
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
                Some(t) => anyhow::bail!("--param {flag}: no plugin named '{t}' in this run"),
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

fn run_failure(e: RunError) -> Failure {
    let code = if e.is_user_error() { exit::USER_ERROR } else { exit::PLUGIN_FAILURE };
    Failure { code, error: e.into() }
}

fn print_summary(out: &Path, results: &crate::exec::RunResults, started: Instant) {
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
    eprintln!("results in {}/ (summary: results.json), total {:.2} s", out.display(), started.elapsed().as_secs_f64());
}
