//! `udf-host inspect PLUGIN`: print what a plugin declares ([`PluginSummary`]).

use super::{Failure, RuntimeArgs};
use crate::report::{self, Loaded, PluginSummary};
use crate::wasm::WasmRuntime;
use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct InspectArgs {
    /// The plugin (.wasm component) or a built-in (builtin:NAME).
    plugin: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

pub fn inspect(args: InspectArgs) -> Result<(), Failure> {
    let summary = match args.plugin.to_str().and_then(crate::builtins::from_source) {
        Some(builtin) => PluginSummary::of(builtin?.description(), Loaded::Builtin),
        None => {
            let runtime = WasmRuntime::new(args.runtime.options(crate::log::stderr(crate::log::LogLevel::Warn), 4)?)?;
            let (udf, stats) = runtime.load(&args.plugin)?;
            let loaded = Loaded::Wasm { time: stats.load_time, cache: stats.cache };
            PluginSummary::of(crate::udf::Udf::description(&udf), loaded)
        }
    };
    super::print(if args.json { report::json_text(&summary)? } else { summary.to_text() })?;
    Ok(())
}
