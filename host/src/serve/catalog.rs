//! What the server offers: the datasets and plugins under the root (and the datasets
//! named on the command line), opened once and kept while the server runs.

use super::access::{Access, Refusal};
use crate::dataset::{DatasetSpec, FORMATS, OpenOptions, OpenedDataset};
use crate::loader::RuntimeSetup;
use crate::udf::Udf;
use crate::wasm::WasmRuntime;
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

/// Folders below the root that the listing looks into.
const MAX_DEPTH: usize = 4;
/// Entries the listing reads at most (a root with more lists the first ones).
const MAX_ENTRIES: usize = 5000;

/// Why something the page asked for cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error(transparent)]
    Dataset(#[from] crate::dataset::DatasetError),
    #[error(transparent)]
    Plugin(#[from] crate::wasm::LoadError),
    #[error(transparent)]
    Runtime(#[from] crate::wasm::RuntimeError),
    #[error("{0} is not a plugin: plugins are WebAssembly components (.wasm) or LiberTEM UDF classes (FILE.py:Class)")]
    NotAPlugin(String),
    #[error("internal error in udf-host serve (please report it): {0}")]
    Internal(String),
}

/// A file the page may open.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    /// Relative to the root.
    pub path: String,
    pub bytes: u64,
    /// Named on the command line.
    pub named: bool,
}

/// What the listing found.
#[derive(Debug, Clone, Serialize)]
pub struct Listing {
    pub root: String,
    pub datasets: Vec<Entry>,
    pub plugins: Vec<Entry>,
    /// The listing stopped early (too many entries under the root).
    pub truncated: bool,
}

/// A plugin loaded from a file, and the file's modification time then.
type LoadedPlugin = (Option<SystemTime>, Arc<dyn Udf>);

/// A plugin's file (resolved under the root) and, for a LiberTEM UDF class, its name.
type PluginKey = (PathBuf, Option<String>);

/// The datasets and plugins of one server.
pub struct Catalog {
    access: Access,
    named: Vec<PathBuf>,
    open_options: OpenOptions,
    datasets: Mutex<HashMap<PathBuf, OpenedDataset>>,
    runtime: OnceLock<Result<WasmRuntime, String>>,
    runtime_setup: RuntimeSetup,
    plugins: Mutex<HashMap<PluginKey, LoadedPlugin>>,
}

impl Catalog {
    /// A catalog of what is under `access`'s root; `named` datasets (resolved under the
    /// root) are listed first and opened with `open_options`, as are the others.
    pub fn new(access: Access, named: Vec<PathBuf>, open_options: OpenOptions, runtime: RuntimeSetup) -> Catalog {
        Catalog {
            access,
            named,
            open_options,
            datasets: Mutex::new(HashMap::new()),
            runtime: OnceLock::new(),
            runtime_setup: runtime,
            plugins: Mutex::new(HashMap::new()),
        }
    }

    pub fn access(&self) -> &Access {
        &self.access
    }

    /// The datasets (files with a known format's extension) and plugins (`.wasm`, and
    /// `FILE.py:Class` for each class of a `.py` file that names `UDF` among its bases,
    /// see [`udf_classes`]) under the root, at most [`MAX_DEPTH`] folders deep, hidden
    /// folders skipped. Read anew at each call: files added later are listed.
    pub fn list(&self) -> Listing {
        let extensions: Vec<&str> = FORMATS.iter().flat_map(|f| f.extensions.iter().copied()).collect();
        let mut datasets: Vec<Entry> =
            self.named.iter().map(|p| Entry { path: self.access.relative(p), bytes: size(p), named: true }).collect();
        let mut plugins = Vec::new();
        let mut seen = 0;
        let mut stack = vec![(self.access.root().to_owned(), 0)];
        while let Some((dir, depth)) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            let mut entries: Vec<_> = entries.flatten().collect();
            entries.sort_by_key(|e| e.file_name());
            for entry in entries {
                seen += 1;
                if seen > MAX_ENTRIES {
                    break;
                }
                let name = entry.file_name();
                let Some(name) = name.to_str() else { continue };
                let path = entry.path();
                let Ok(kind) = entry.file_type() else { continue };
                if kind.is_dir() {
                    if depth < MAX_DEPTH && !name.starts_with('.') && name != "target" {
                        stack.push((path, depth + 1));
                    }
                    continue;
                }
                let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).unwrap_or_default();
                let entry = Entry { path: self.access.relative(&path), bytes: size(&path), named: false };
                if ext == "wasm" {
                    plugins.push(entry);
                } else if ext == "py" {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    plugins.extend(
                        udf_classes(&text)
                            .into_iter()
                            .map(|class| Entry { path: format!("{}:{class}", entry.path), ..entry.clone() }),
                    );
                } else if extensions.contains(&ext.as_str())
                    && !name.ends_with(".valid.npy")
                    && !self.named.contains(&path)
                {
                    datasets.push(entry);
                }
            }
        }
        datasets[self.named.len()..].sort_by(|a, b| a.path.cmp(&b.path));
        plugins.sort_by(|a, b| a.path.cmp(&b.path));
        Listing { root: self.access.root().display().to_string(), datasets, plugins, truncated: seen > MAX_ENTRIES }
    }

    /// The dataset at `path` (under the root), opened once.
    ///
    /// # Errors
    /// Outside the root, missing, or not a dataset udf-host can read.
    pub fn dataset(&self, path: &str) -> Result<OpenedDataset, CatalogError> {
        let resolved = self.access.resolve(path)?;
        let mut open = self.datasets.lock().map_err(|_| CatalogError::Internal("dataset cache poisoned".into()))?;
        if let Some(opened) = open.get(&resolved) {
            return Ok(opened.clone());
        }
        let opened = DatasetSpec::file(&resolved, self.open_options.clone()).open()?;
        open.insert(resolved, opened.clone());
        Ok(opened)
    }

    /// The plugin at `path` — a `.wasm` under the root, or `FILE.py:Class`, a LiberTEM
    /// UDF class of a file under the root on the Python runner, as the command line
    /// names it — loaded once (again when the file changes) and run sandboxed like every
    /// plugin.
    ///
    /// # Errors
    /// Outside the root, missing, neither a `.wasm` nor `FILE.py:Class`, or the runtime
    /// refuses it (for a class: its file does not parse, imports what the sandbox does
    /// not have, ... — the message carries the Python traceback).
    pub fn plugin(&self, path: &str) -> Result<Arc<dyn Udf>, CatalogError> {
        let (file, class) = match crate::wasm::class_reference(path) {
            Some((file, class)) => (file.to_str().unwrap_or(path), Some(class)),
            None => (path, None),
        };
        let resolved = self.access.resolve(file)?;
        if class.is_none() && !resolved.extension().is_some_and(|e| e.eq_ignore_ascii_case("wasm")) {
            return Err(CatalogError::NotAPlugin(path.to_owned()));
        }
        let modified = std::fs::metadata(&resolved).and_then(|m| m.modified()).ok();
        let poisoned = || CatalogError::Internal("plugin cache poisoned".into());
        let key = (resolved, class.map(str::to_owned));
        if let Some((when, udf)) = self.plugins.lock().map_err(|_| poisoned())?.get(&key)
            && *when == modified
        {
            return Ok(udf.clone());
        }
        let (udf, _) = match class {
            Some(class) => self.runtime()?.load_class_file(&key.0, class)?,
            None => self.runtime()?.load(&key.0)?,
        };
        let udf: Arc<dyn Udf> = Arc::new(udf);
        self.plugins.lock().map_err(|_| poisoned())?.insert(key, (modified, udf.clone()));
        Ok(udf)
    }

    /// The WebAssembly runtime, made when the first plugin is loaded.
    fn runtime(&self) -> Result<&WasmRuntime, CatalogError> {
        let made = self.runtime.get_or_init(|| self.runtime_setup.build().map_err(|e| e.to_string()));
        made.as_ref().map_err(|e| CatalogError::Internal(e.clone()))
    }

    /// A file under the root that a parameter names (`@file.npy`).
    ///
    /// # Errors
    /// Outside the root or missing.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, Refusal> {
        self.access.resolve(path)
    }
}

/// The classes of a Python file that look like UDFs: `class Name(...):` at the start of
/// a line with `UDF` among the bases (`UDF`, `udf_host.UDF`, `libertem.udf.UDF`). A
/// listing only, read without running Python: whether a class really is one is found
/// out when it is chosen (and said on the page if not).
pub fn udf_classes(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("class ")?;
            let (name, rest) = rest.split_once('(')?;
            let (bases, _) = rest.split_once(')')?;
            let name = name.trim();
            let is_udf = bases.split(',').any(|b| b.trim() == "UDF" || b.trim().ends_with(".UDF"));
            let identifier = name.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_alphanumeric() || c == '_');
            (is_udf && identifier).then(|| name.to_owned())
        })
        .collect()
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udf_classes_are_the_top_level_classes_with_udf_among_their_bases() {
        let text = "import numpy as np\nfrom udf_host import UDF\n\nclass MySum(UDF):\n    pass\n\n\
                    class Helper:\n    pass\nclass Other(base.UDF, Mixin):\n  class Inner(UDF):\n\
                    class NotOne(UDFBase):\n";
        assert_eq!(udf_classes(text), ["MySum", "Other"]);
    }
}
