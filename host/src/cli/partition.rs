//! `udf-host run-partition PLAN.json --index N --out FILE`: run one partition of a saved
//! plan in this process and write its output (raw arrays; merge them with
//! `exec::Merger` in the process that made the plan).

use super::{Failure, exit};
use crate::exec::{Plan, RunError, Worker};
use crate::loader::{Loader, RuntimeSetup};
use crate::wasm::ComponentCache;
use anyhow::{Context, anyhow};
use clap::Args;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Args)]
pub struct RunPartitionArgs {
    /// The plan, as `udf-host run --save-plan` (or `exec::Plan::to_json`) wrote it.
    #[arg(value_name = "PLAN.json")]
    plan: PathBuf,
    /// The partition to run (its index in the plan).
    #[arg(long)]
    index: usize,
    /// Where to write the partition's output.
    #[arg(long, short = 'o', value_name = "FILE")]
    out: PathBuf,
    /// Don't read or write the compiled-plugin cache.
    #[arg(long)]
    no_cache: bool,
    /// Directory of the compiled-plugin cache [default: ~/.cache/udf-host].
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
}

pub fn run_partition(args: RunPartitionArgs) -> Result<(), Failure> {
    let json = std::fs::read_to_string(&args.plan).with_context(|| format!("cannot read {}", args.plan.display()))?;
    let plan = Arc::new(Plan::from_json(&json).map_err(|e| anyhow!("{}: {e}", args.plan.display()))?);
    let cache_dir = if args.no_cache { None } else { args.cache_dir.clone().or_else(ComponentCache::default_dir) };
    let setup =
        RuntimeSetup { cache: ComponentCache::new(cache_dir), ..RuntimeSetup::new(plan.limits, 1, plan.udfs.len()) };
    let loader = Loader::new(setup.build()?);
    let worker = Worker::load(plan, &loader).map_err(super::run::run_failure)?;
    let output = worker.run_partition(args.index).map_err(|e| match e {
        RunError::Invalid(_) => Failure { code: exit::USER_ERROR, error: e.into() },
        e => super::run::run_failure(e),
    })?;
    write_atomically(&args.out, &output.to_bytes()).with_context(|| format!("cannot write {}", args.out.display()))?;
    Ok(())
}

/// Write `bytes` to a temporary file beside `path` and rename it into place: a reader
/// never sees half an output.
fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    let mut file = tempfile::Builder::new().prefix(".udf-host-part-").tempfile_in(dir)?;
    file.write_all(bytes)?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}
