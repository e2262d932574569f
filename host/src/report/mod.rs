//! What the host reports, as library types that every front end renders: the command
//! line prints them as text or JSON, the Python package hands them to notebooks, and a
//! web page can show them — none of the front ends imports another.
//!
//! | type | what | shown by |
//! |------|------|----------|
//! | [`DatasetSummary`] | a dataset: format, shapes, dtype, details, default partitions and tile shape | `udf-host info`, `DataSet.info()` |
//! | [`PluginSummary`] | a plugin's or built-in's description: methods, preferences, parameters | `udf-host inspect`, `udf-host list`, `WasmUDF.describe()` |
//! | [`RunSummary`] | a run: dataset, plan, plugins, status, failures, buffers, timings | `results.json`, `index.html`, snapshots |
//! | [`contract_id`] | the plugin contract this host speaks, `udf:plugin@0.1.0` | `--version`, `inspect`, `results.json`, new projects |
//!
//! Each type is `Serialize` (and `Deserialize`, so what was written can be read back);
//! [`json_text`] is the JSON form the front ends print: pretty, with the keys of every
//! object sorted (as `results.json` has always had them).

mod dataset;
mod plan;
mod plugin;
mod run;

pub use dataset::{DatasetSummary, PartitionSizes, TileForDefaultUdf};
pub use plan::plan_text;
pub use plugin::{Loaded, ParamSummary, PluginSummary, TilingSummary as PluginTiling};
pub use run::{
    BufferSummary, DatasetOfRun, DeviceSummary, FailureAt, FailureSummary, LoadCache, PartitionCounts, PluginLoad,
    PreviewSummary, ResourceSummary, RoiSummary, RunStatus, RunSummary, TilingOfRun, Timings, UdfDevice, UdfSummary,
    data_file, valid_file,
};

use crate::wasm::{WIT_PACKAGE, WIT_VERSION};

/// The plugin contract this host implements, as plugins and projects name it:
/// `udf:plugin@0.1.0`.
pub fn contract_id() -> String {
    let (major, minor, patch) = WIT_VERSION;
    format!("{WIT_PACKAGE}@{major}.{minor}.{patch}")
}

/// `value` as pretty JSON with the keys of every object sorted, and a final newline:
/// what `--json` prints and `results.json` holds.
///
/// # Errors
/// Only if a value cannot be represented in JSON (a map with non-string keys).
pub fn json_text<T: serde::Serialize>(value: &T) -> Result<String, serde_json::Error> {
    // Through `Value`, whose objects keep their keys sorted: field order is the struct's
    // reading order, the file's is alphabetical.
    let value = serde_json::to_value(value)?;
    Ok(serde_json::to_string_pretty(&value)? + "\n")
}

/// `value` as compact JSON with sorted keys (one line).
///
/// # Errors
/// As [`json_text`].
pub fn json_line<T: serde::Serialize>(value: &T) -> Result<String, serde_json::Error> {
    serde_json::to_value(value).map(|v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_is_named_with_its_version() {
        let (major, minor, patch) = WIT_VERSION;
        assert_eq!(contract_id(), format!("udf:plugin@{major}.{minor}.{patch}"));
    }

    #[test]
    fn json_text_sorts_keys_at_every_level() {
        #[derive(serde::Serialize)]
        struct Inner {
            zeta: u8,
            alpha: u8,
        }
        #[derive(serde::Serialize)]
        struct Outer {
            b: Inner,
            a: bool,
        }
        let text = json_text(&Outer { b: Inner { zeta: 1, alpha: 2 }, a: true }).unwrap();
        assert_eq!(text, "{\n  \"a\": true,\n  \"b\": {\n    \"alpha\": 2,\n    \"zeta\": 1\n  }\n}\n");
    }
}
