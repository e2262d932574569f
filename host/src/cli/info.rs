//! `udf-host info DATA`: what a dataset holds and how a run would split it ([`describe`]).

use super::Failure;
use super::run::DatasetArgs;
use crate::dataset::{
    self, Dataset, DatasetError, OpenOptions, TileRequest, default_partition_count, negotiate, plan_partitions,
};
use crate::dtype::{DType, result_type};
use crate::udf::{Method, TileDepth, TileSize};
use clap::Args;
use serde_json::json;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct InfoArgs {
    /// The dataset file (for multi-file formats: any file of the set).
    data: PathBuf,
    #[command(flatten)]
    dataset: DatasetArgs,
    /// Worker threads the partitioning is planned for [default: all cores].
    #[arg(long)]
    threads: Option<usize>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn info(args: InfoArgs) -> Result<(), Failure> {
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    let summary = describe(&args.data, &args.dataset.open_options()?, threads)?;
    if args.json {
        super::print(format!("{}\n", serde_json::to_string_pretty(&summary)?))?;
        return Ok(());
    }
    super::print(text(&summary))?;
    Ok(())
}

/// The text `info` prints for a [`describe`] summary.
pub fn text(s: &serde_json::Value) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "{} ({})", s["path"].as_str().unwrap_or_default(), s["format"].as_str().unwrap_or_default());
    let _ = writeln!(out, "  nav shape     {} ({} frames)", s["nav_shape"], s["frames"]);
    let _ = writeln!(out, "  sig shape     {} ({} bytes per frame)", s["sig_shape"], s["frame_bytes"]);
    let _ = writeln!(out, "  dtype         {}", s["dtype_name"].as_str().unwrap_or_default());
    let _ = writeln!(out, "  size          {:.1} MB", s["bytes"].as_f64().unwrap_or(0.0) / 1e6);
    if let Some(details) = s["details"].as_object() {
        for (key, value) in details {
            let _ = writeln!(out, "  {key:<13} {}", value.as_str().unwrap_or_default());
        }
    }
    let p = &s["partitions"];
    let _ = writeln!(
        out,
        "  partitions    {} ({}..{} frames each, planned for {} threads)",
        p["count"], p["min_frames"], p["max_frames"], s["threads"]
    );
    let t = &s["tile_udf"];
    let _ = writeln!(
        out,
        "  tile shape    {} for a tile UDF with default preferences ({} input, {} signal slices)",
        t["tile_shape"],
        t["input_dtype"].as_str().unwrap_or_default(),
        t["signal_slices"]
    );
    out
}

/// What `info` reports, as JSON: the dataset's format, shape, dtype and details, the
/// default partitioning for `threads`, and the tile shape negotiated for a tile UDF with
/// default preferences (float32 input, ~1 MiB tiles) delivered to a plugin.
///
/// # Errors
/// The dataset cannot be opened.
pub fn describe(path: &Path, options: &OpenOptions, threads: usize) -> Result<serde_json::Value, DatasetError> {
    Ok(describe_dataset(dataset::open(path, options)?.as_ref(), threads))
}

/// [`describe`] for a dataset that is open already.
pub fn describe_dataset(data: &dyn Dataset, threads: usize) -> serde_json::Value {
    let shape = data.shape();
    let stored = data.stored_dtype();
    let info = data.info();
    let count = default_partition_count(shape.nav_len(), shape.sig_len(), threads);
    let partitions = plan_partitions(shape.nav_len(), count, None);
    let input = result_type(DType::F32, stored.dtype);
    let request = TileRequest { method: Method::Tile, depth: TileDepth::Default, size: TileSize::BestFit };
    let first_len = partitions.first().map_or(1, |p| p.len());
    let tiling = negotiate(&[request], shape, &data.base_shape(), first_len, input.size(), stored.dtype.size(), true);
    let frame_bytes = shape.sig_len() * stored.dtype.size();
    let sizes: Vec<usize> = partitions.iter().map(|p| p.len()).collect();
    json!({
        "path": info.path.display().to_string(),
        "format": info.format,
        "nav_shape": shape.nav,
        "sig_shape": shape.sig,
        "frames": shape.nav_len(),
        "frame_bytes": frame_bytes,
        "bytes": shape.nav_len() * frame_bytes,
        "dtype": stored.descr(),
        "dtype_name": stored.to_string(),
        "details": info.details.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
        "threads": threads,
        "partitions": {
            "count": partitions.len(),
            "min_frames": sizes.iter().min().copied().unwrap_or(0),
            "max_frames": sizes.iter().max().copied().unwrap_or(0),
        },
        "tile_udf": {
            "input_dtype": input.name(),
            "tile_shape": tiling.tile_shape(),
            "signal_slices": tiling.slices.len(),
        },
    })
}
