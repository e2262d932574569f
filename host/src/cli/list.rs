//! `udf-host list`: the native built-ins and their parameters.

use super::Failure;
use crate::report::{self, Loaded, PluginSummary};
use clap::Args;

#[derive(Args)]
pub struct ListArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn list(args: ListArgs) -> Result<(), Failure> {
    let all: Vec<PluginSummary> =
        crate::builtins::all().iter().map(|u| PluginSummary::of(u.description(), Loaded::Builtin)).collect();
    if args.json {
        super::print(report::json_text(&all)?)?;
        return Ok(());
    }
    let mut text =
        format!("Built-ins (run them as {}NAME, e.g. `udf-host run builtin:sum data.npy`):\n", crate::builtins::PREFIX);
    for summary in &all {
        text.push_str(&format!("\n{} — {}\n", summary.name, summary.summary));
        text.push_str(&summary.params_text());
    }
    super::print(text)?;
    Ok(())
}
