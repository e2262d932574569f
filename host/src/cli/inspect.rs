//! `udf-host inspect PLUGIN`: print what a plugin declares.

use super::{Failure, RuntimeArgs};
use crate::udf::{DTypePreference, DataAccess, Description, TileDepth, TileSize};
use crate::wasm::{WIT_PACKAGE, WIT_VERSION, WasmRuntime};
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
    if let Some(builtin) = args.plugin.to_str().and_then(crate::builtins::from_source) {
        let udf = builtin?;
        let d = udf.description();
        if args.json {
            super::print(format!("{}\n", serde_json::to_string_pretty(&description_json(d))?))?;
        } else {
            super::print(description_text(d, &[BUILTIN_KIND.to_owned()]))?;
        }
        return Ok(());
    }
    let runtime = WasmRuntime::new(args.runtime.options(crate::log::stderr(crate::log::LogLevel::Warn), 4)?)?;
    let (udf, stats) = runtime.load(&args.plugin)?;
    let d = crate::udf::Udf::description(&udf);
    if args.json {
        super::print(format!("{}\n", serde_json::to_string_pretty(&description_json(d))?))?;
        return Ok(());
    }
    let loaded = format!("  loaded in     {:.1} ms ({:?})", stats.load_time.as_secs_f64() * 1e3, stats.cache);
    super::print(description_text(d, &[contract_line(), loaded]))?;
    Ok(())
}

/// The line `inspect` prints for a built-in's kind.
pub const BUILTIN_KIND: &str = "  kind          native built-in (reads tiles in place)";

/// The line `inspect` prints for a plugin's contract.
pub fn contract_line() -> String {
    let (major, minor, patch) = WIT_VERSION;
    format!("  contract      {WIT_PACKAGE}@{major}.{minor}.{patch} (compatible)")
}

/// What `inspect` prints: the title, the `header` lines, then methods, preferences and
/// parameters.
pub fn description_text(d: &Description, header: &[String]) -> String {
    let mut out = format!("{} {} — {}\n", d.name, d.version, d.summary);
    for line in header {
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(&details_text(d));
    out
}

/// Methods, preferences and parameters of a description.
fn details_text(d: &Description) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "  methods       {}", d.methods.iter().map(|m| m.name()).collect::<Vec<_>>().join(", "));
    let _ = writeln!(out, "  input dtype   {}", dtype_pref(d.input_dtype));
    let _ = writeln!(out, "  tiling        depth {}, size {}", depth(d.tiling.depth), size(d.tiling.total_size));
    let _ = writeln!(out, "  custom merge  {}", yes_no(d.custom_merge));
    let _ = writeln!(out, "  get_results   {}", yes_no(d.custom_results));
    let _ = writeln!(out, "  main preprocess {}", yes_no(d.main_preprocess));
    let _ = writeln!(
        out,
        "  data access   {}",
        match d.data_access {
            DataAccess::Typed => "typed lists",
            DataAccess::Bytes => "bytes",
        }
    );
    out.push_str(&params_text(d));
    out
}

/// The parameters of a description, one or two lines each.
pub(super) fn params_text(d: &Description) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    if d.params.is_empty() {
        let _ = writeln!(out, "  parameters    none");
    } else {
        let _ = writeln!(out, "  parameters:");
        for p in &d.params {
            let default = p.default.as_ref().map_or_else(|| "required".to_owned(), |v| format!("default {v}"));
            let aux = if p.nav_aux { ", per-frame aux data" } else { "" };
            let _ = writeln!(out, "    {:<14} {:<6} {default}{aux}", p.name, p.ty.name());
            if !p.doc.is_empty() {
                let _ = writeln!(out, "    {:<14} {}", "", p.doc);
            }
        }
    }
    out
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn dtype_pref(p: DTypePreference) -> String {
    match p {
        DTypePreference::Native => "native".into(),
        DTypePreference::Prefer(d) => d.name().into(),
    }
}

fn depth(d: TileDepth) -> String {
    match d {
        TileDepth::Default => "default (32)".into(),
        TileDepth::Max => "max".into(),
        TileDepth::Frames(n) => format!("{n} frames"),
    }
}

fn size(s: TileSize) -> String {
    match s {
        TileSize::BestFit => "best fit (1 MiB)".into(),
        TileSize::Max => "max".into(),
        TileSize::Bytes(n) => format!("{n} bytes"),
    }
}

pub fn description_json(d: &Description) -> serde_json::Value {
    serde_json::json!({
        "name": d.name,
        "version": d.version,
        "summary": d.summary,
        "methods": d.methods.iter().map(|m| m.name()).collect::<Vec<_>>(),
        "input_dtype": dtype_pref(d.input_dtype),
        "tiling": {"depth": depth(d.tiling.depth), "total_size": size(d.tiling.total_size)},
        "custom_merge": d.custom_merge,
        "custom_results": d.custom_results,
        "main_preprocess": d.main_preprocess,
        "data_access": match d.data_access { DataAccess::Typed => "typed", DataAccess::Bytes => "bytes" },
        "params": d.params.iter().map(|p| serde_json::json!({
            "name": p.name,
            "type": p.ty.name(),
            "doc": p.doc,
            "default": p.default.as_ref().map(|v| v.to_json()),
            "nav_aux": p.nav_aux,
        })).collect::<Vec<_>>(),
    })
}
