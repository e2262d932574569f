//! `udf-host run-partition PLAN.json --index N --out FILE`: run one partition of a saved
//! plan in this process and write its output (raw arrays; merge them with
//! `exec::Merger` in the process that made the plan).

use super::{Failure, exit};
use crate::exec::{RunError, Worker};
use crate::loader::{Loader, UDFS_PER_SHARED_RUN};
use anyhow::{Context, anyhow};
use clap::Args;
use std::path::PathBuf;

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
    /// The limits the plugins run under here. They come from this command line, never
    /// from the plan (a plan's `limits` are what the run was planned with, for the
    /// record): a plan cannot turn the timeout off or raise the memory caps.
    #[command(flatten)]
    runtime: super::RuntimeArgs,
}

pub fn run_partition(args: RunPartitionArgs) -> Result<(), Failure> {
    let json = std::fs::read_to_string(&args.plan).with_context(|| format!("cannot read {}", args.plan.display()))?;
    // The plan's UDFs are not known before it is read (Worker::from_json): room for as
    // many as a shared runtime has, on this one thread.
    let runtime = args.runtime.build(crate::log::stderr(crate::log::LogLevel::Warn), 1, UDFS_PER_SHARED_RUN)?;
    let loader = Loader::new(runtime);
    // The dataset is opened and checked against the plan before the plan's partitions
    // are built.
    let worker = Worker::from_json(&json, &loader).map_err(|e| match e {
        RunError::Invalid(_) => Failure { code: exit::USER_ERROR, error: anyhow!("{}: {e}", args.plan.display()) },
        e => super::run::run_failure(e),
    })?;
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
