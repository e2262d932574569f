//! `udf-host info DATA`: what a dataset holds and how a run would split it
//! ([`DatasetSummary`]).

use super::Failure;
use super::dataset::DatasetArgs;
use crate::report::{self, DatasetSummary};
use clap::Args;
use std::path::PathBuf;

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
    let summary = DatasetSummary::open(&args.data, &args.dataset.open_options()?, threads)?;
    super::print(if args.json { report::json_text(&summary)? } else { summary.to_text() })?;
    Ok(())
}
