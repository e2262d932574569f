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
            interrupts: Arc::default(),
            host_tiles: false,
            load_export: self.load_export,
            class: Some(Arc::new(class)),
        };
        udf.described().map_err(|e| err(LoadErrorKind::Describe, format!("the class {name} cannot be loaded: {e}")))
    }
}
