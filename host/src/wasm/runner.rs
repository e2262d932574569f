//! The Python runner of LiberTEM UDF classes (`wit/udf.wit`'s `udf-runner` world): a
//! plugin that exports `runner.load` besides `udf`. [`WasmUdf::with_class`] makes a
//! UDF of the runner and one class; each of its instances loads the class's source
//! before any other call, so `describe` and everything after it are the class's.

use super::bindings::udf::plugin::types as wit;
use super::budget::CallKind;
use super::convert::error_from_wit;
use super::plugin::{Instance, WasmUdf};
use super::{LoadError, LoadErrorKind, Shared, WIT_PACKAGE, WIT_VERSION};
use crate::udf::{CallError, ClassSource};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use wasmtime::component::{Component, ComponentExportIndex, Func, TypedFunc};

/// `runner.load` of a component, if it exports the runner interface of this host's
/// contract version.
pub(super) fn load_export(component: &Component) -> Option<ComponentExportIndex> {
    let (major, minor, patch) = WIT_VERSION;
    let interface = format!("{WIT_PACKAGE}/runner@{major}.{minor}.{patch}");
    let runner = component.get_export_index(None, &interface)?;
    component.get_export_index(Some(&runner), "load")
}

type LoadParams<'a> = (&'a str,);
type LoadResults = (Result<(), wit::UdfError>,);

/// Call `runner.load` with the class's document on a fresh instance.
pub(super) fn load_class(
    shared: &Shared,
    instance: &mut Instance,
    load: Option<Func>,
    class: &ClassSource,
) -> Result<(), CallError> {
    let load = load.ok_or_else(|| {
        CallError::Contract(format!("{} was given to a component that does not export runner.load", class.class_name))
    })?;
    let typed: TypedFunc<LoadParams<'_>, LoadResults> =
        load.typed(&instance.store).map_err(|e| CallError::Contract(format!("runner.load has the wrong type: {e}")))?;
    let json = class.json.as_str();
    let outcome = instance.call_raw(shared, CallKind::Control, |_, store| typed.call(store, (json,)).map(|(r,)| r));
    outcome.map_err(|e| instance.trap(shared, e))?.map_err(error_from_wit)
}

impl WasmUdf {
    /// Whether this component is the Python runner (it exports `runner.load`).
    pub fn is_runner(&self) -> bool {
        self.load_export.is_some()
    }

    /// The runner with a class: a UDF whose instances load `class` first, described by
    /// the class. The compiled component is shared; only `describe` runs here.
    ///
    /// # Errors
    /// [`LoadError`] naming the class: this component is not the runner, or loading or
    /// describing the class failed (the message then carries the Python traceback).
    pub fn with_class(&self, class: ClassSource) -> Result<WasmUdf, LoadError> {
        let err = |kind, message: String| LoadError { path: self.path.clone(), kind, message };
        if !self.is_runner() {
            return Err(err(
                LoadErrorKind::Interface,
                format!(
                    "cannot run the class {} ({}): this component is not udf-host's Python runner (it does not \
                     export {WIT_PACKAGE}/runner)",
                    class.class_name, class.file
                ),
            ));
        }
        let name = format!("{} ({})", class.class_name, class.file);
        let udf = WasmUdf {
            shared: self.shared.clone(),
            source: name.clone(),
            path: self.path.clone(),
            sha256: self.sha256.clone(),
            name: Arc::from(class.class_name.as_str()),
            description: self.description.clone(),
            pre: self.pre.clone(),
            exports: self.exports,
            main: Mutex::new(None),
            spares: Mutex::default(),
            interrupts: Arc::default(),
            host_tiles: false,
            run_log: Arc::default(),
            run_copy: false,
            load_export: self.load_export,
            class: Some(Arc::new(class)),
        };
        udf.described().map_err(|e| err(LoadErrorKind::Describe, format!("the class {name} cannot be loaded: {e}")))
    }
}

/// The runner's file name (`scripts/polyglot/runner.sh` builds it).
pub const RUNNER_FILE: &str = "udf-runner.wasm";

/// `FILE.py:Class`, as the command line names a LiberTEM UDF class: the file and the
/// class name, or `None` for anything else.
pub fn class_reference(source: &str) -> Option<(&Path, &str)> {
    let (file, class) = source.rsplit_once(':')?;
    let identifier = class.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && class.chars().all(|c| c.is_alphanumeric() || c == '_');
    (file.ends_with(".py") && identifier).then(|| (Path::new(file), class))
}

/// Where the Python runner is: `$UDF_HOST_RUNNER`, beside the executable, or where the
/// repository builds it (`target/polyglot/runner/`, next to `target/debug/`).
pub fn runner_path() -> Result<PathBuf, String> {
    let mut candidates = Vec::new();
    if let Some(path) = std::env::var_os("UDF_HOST_RUNNER") {
        candidates.push(PathBuf::from(path));
    }
    if let Some(dir) = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_owned)) {
        candidates.push(dir.join(RUNNER_FILE));
        candidates.push(dir.join("../polyglot/runner").join(RUNNER_FILE));
    }
    candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        let looked: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
        format!(
            "udf-host's Python runner ({RUNNER_FILE}) is not built: build it with scripts/polyglot/runner.sh, or set \
             UDF_HOST_RUNNER to its path (looked in: {})",
            looked.join(", ")
        )
    })
}

/// A class in a Python file as the runner's document: the whole file runs inside the
/// sandbox, and the class is taken from it.
///
/// # Errors
/// The file cannot be read, or is too large.
pub fn class_source_of_file(file: &Path, class: &str) -> Result<ClassSource, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: cannot read the file: {e}", file.display()))?;
    let document = serde_json::json!({
        "class_name": class,
        "file": file.display().to_string(),
        "text": text,
        "first_line": 1,
    });
    ClassSource::from_json(document.to_string()).map_err(|e| format!("{}: {e}", file.display()))
}

impl super::WasmRuntime {
    /// Load `FILE.py:Class`: the runner (compiled once and cached like any plugin) with
    /// the class from the file.
    ///
    /// # Errors
    /// [`LoadError`] naming the file: it cannot be read, the runner is missing, or the
    /// class cannot be loaded (the message carries the Python traceback).
    pub fn load_class_file(&self, file: &Path, class: &str) -> Result<(WasmUdf, super::LoadStats), LoadError> {
        let read_error = |message| LoadError { path: file.to_owned(), kind: LoadErrorKind::Read, message };
        let class = class_source_of_file(file, class).map_err(read_error)?;
        let runner = runner_path().map_err(read_error)?;
        let (runner, stats) = self.load(&runner)?;
        Ok((runner.with_class(class)?, stats))
    }
}
