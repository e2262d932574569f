//! The plugin summary: what `udf-host inspect` and `udf-host list` print for a plugin's
//! or built-in's description.

use crate::udf::{DTypePreference, DataAccess, Description, TileDepth, TileSize};
use crate::wasm::CacheOutcome;
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::time::Duration;

/// A UDF's description in the words the front ends show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginSummary {
    pub name: String,
    pub version: String,
    pub summary: String,
    /// The methods it implements (`tile`, `frame`, `partition`).
    pub methods: Vec<String>,
    /// `native` or a NumPy dtype name.
    pub input_dtype: String,
    pub tiling: TilingSummary,
    pub custom_merge: bool,
    pub custom_results: bool,
    pub main_preprocess: bool,
    /// `typed` (typed lists) or `bytes`.
    pub data_access: String,
    pub params: Vec<ParamSummary>,
    /// How it was loaded (the text's header lines; not part of the JSON).
    #[serde(skip)]
    pub loaded: Loaded,
}

/// Tiling preferences in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TilingSummary {
    pub depth: String,
    pub total_size: String,
}

/// One parameter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParamSummary {
    pub name: String,
    /// `bool`, `int`, `float`, `text`, `array`.
    #[serde(rename = "type")]
    pub ty: String,
    pub doc: String,
    /// `None`: required.
    pub default: Option<serde_json::Value>,
    /// The default as the text shows it (`array(float64, [1])`; not part of the JSON).
    #[serde(skip)]
    pub default_text: Option<String>,
    /// Sliced per frame by the host (LiberTEM's aux data).
    pub nav_aux: bool,
}

/// Where a described UDF came from.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Loaded {
    /// A native built-in.
    #[default]
    Builtin,
    /// A wasm plugin, loaded in `time` (compiled or from the cache).
    Wasm { time: Duration, cache: CacheOutcome },
}

impl PluginSummary {
    /// The summary of `description`, loaded as `loaded` says.
    pub fn of(description: &Description, loaded: Loaded) -> Self {
        let d = description;
        PluginSummary {
            name: d.name.clone(),
            version: d.version.clone(),
            summary: d.summary.clone(),
            methods: d.methods.iter().map(|m| m.name().to_owned()).collect(),
            input_dtype: dtype_preference(d.input_dtype),
            tiling: TilingSummary { depth: depth(d.tiling.depth), total_size: size(d.tiling.total_size) },
            custom_merge: d.custom_merge,
            custom_results: d.custom_results,
            main_preprocess: d.main_preprocess,
            data_access: match d.data_access {
                DataAccess::Typed => "typed",
                DataAccess::Bytes => "bytes",
            }
            .to_owned(),
            params: d
                .params
                .iter()
                .map(|p| ParamSummary {
                    name: p.name.clone(),
                    ty: p.ty.name().to_owned(),
                    doc: p.doc.clone(),
                    default: p.default.as_ref().map(|v| v.to_json()),
                    default_text: p.default.as_ref().map(|v| v.to_string()),
                    nav_aux: p.nav_aux,
                })
                .collect(),
            loaded,
        }
    }

    /// The text `udf-host inspect` prints: the title, where it came from, then methods,
    /// preferences and parameters.
    pub fn to_text(&self) -> String {
        let mut out = format!("{} {} — {}\n", self.name, self.version, self.summary);
        match self.loaded {
            Loaded::Builtin => out.push_str("  kind          native built-in (reads tiles in place)\n"),
            Loaded::Wasm { time, cache } => {
                let _ = writeln!(out, "  contract      {} (compatible)", super::contract_id());
                let _ = writeln!(out, "  loaded in     {:.1} ms ({cache:?})", time.as_secs_f64() * 1e3);
            }
        }
        let _ = writeln!(out, "  methods       {}", self.methods.join(", "));
        let _ = writeln!(out, "  input dtype   {}", self.input_dtype);
        let _ = writeln!(out, "  tiling        depth {}, size {}", self.tiling.depth, self.tiling.total_size);
        let _ = writeln!(out, "  custom merge  {}", yes_no(self.custom_merge));
        let _ = writeln!(out, "  get_results   {}", yes_no(self.custom_results));
        let _ = writeln!(out, "  main preprocess {}", yes_no(self.main_preprocess));
        let access = if self.data_access == "bytes" { "bytes" } else { "typed lists" };
        let _ = writeln!(out, "  data access   {access}");
        out.push_str(&self.params_text());
        out
    }

    /// The parameters, one or two lines each (what `udf-host list` shows per built-in).
    pub fn params_text(&self) -> String {
        let mut out = String::new();
        if self.params.is_empty() {
            let _ = writeln!(out, "  parameters    none");
            return out;
        }
        let _ = writeln!(out, "  parameters:");
        for p in &self.params {
            let default = match (&p.default_text, &p.default) {
                (Some(text), _) => format!("default {text}"),
                (None, Some(json)) => format!("default {json}"),
                (None, None) => "required".to_owned(),
            };
            let aux = if p.nav_aux { ", per-frame aux data" } else { "" };
            let _ = writeln!(out, "    {:<14} {:<6} {default}{aux}", p.name, p.ty);
            if !p.doc.is_empty() {
                let _ = writeln!(out, "    {:<14} {}", "", p.doc);
            }
        }
        out
    }
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn dtype_preference(p: DTypePreference) -> String {
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
