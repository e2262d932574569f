//! `udf_host._native`: the host library for Python. The Python package (`udf_host/`) puts a
//! LiberTEM-like API (`Context`, `WasmUDF`, `BuiltinUDF`, `Buffer`) on top; this module only
//! converts between Python and the library.

mod convert;
mod distributed;
mod engine;
mod session;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use std::path::PathBuf;
use std::sync::OnceLock;
use udf_host::report::{Loaded, PluginSummary};
use udf_host::udf::Udf;
use udf_host::wasm::{ComponentCache, RuntimeOptions, WasmRuntime};

create_exception!(udf_host, DatasetError, PyException, "A dataset could not be opened or read.");
create_exception!(
    udf_host,
    UDFError,
    PyException,
    "A UDF failed: `plugin`, `source`, `call` (the lifecycle call), `partition`, `frames` (first, last), \
     `kind`, `error` and `log` (the plugin's last log lines) say where and why."
);

/// A runtime for `describe` (default limits and compile cache).
fn describe_runtime() -> PyResult<&'static WasmRuntime> {
    static RUNTIME: OnceLock<WasmRuntime> = OnceLock::new();
    if let Some(runtime) = RUNTIME.get() {
        return Ok(runtime);
    }
    let options =
        RuntimeOptions { cache: ComponentCache::new(ComponentCache::default_dir()), ..RuntimeOptions::default() };
    let runtime = WasmRuntime::new(options).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(RUNTIME.get_or_init(|| runtime))
}

/// What `udf-host inspect` prints for a wasm plugin given by its bytes (`path` is for
/// messages).
#[pyfunction]
fn describe_wasm(py: Python<'_>, path: PathBuf, wasm: Vec<u8>) -> PyResult<String> {
    let runtime = describe_runtime()?;
    let (udf, stats) =
        py.detach(|| runtime.load_bytes(&path, &wasm)).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let loaded = Loaded::Wasm { time: stats.load_time, cache: stats.cache };
    Ok(PluginSummary::of(udf.description(), loaded).to_text())
}

/// What `udf-host inspect builtin:NAME` prints.
#[pyfunction]
fn describe_builtin(name: &str) -> PyResult<String> {
    let udf = udf_host::builtins::get(name).ok_or_else(|| {
        PyValueError::new_err(udf_host::builtins::UnknownBuiltin { name: name.to_owned() }.to_string())
    })?;
    Ok(PluginSummary::of(udf.description(), Loaded::Builtin).to_text())
}

/// The names of the built-ins.
#[pyfunction]
fn builtin_names() -> Vec<&'static str> {
    udf_host::builtins::names().collect()
}

/// The contract this host implements, `udf:plugin@x.y.z`.
#[pyfunction]
fn contract_version() -> String {
    udf_host::report::contract_id()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("DatasetError", py.get_type::<DatasetError>())?;
    m.add("UDFError", py.get_type::<UDFError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<engine::Engine>()?;
    m.add_class::<engine::Dataset>()?;
    m.add_class::<engine::RunHandle>()?;
    m.add_class::<engine::Buffer>()?;
    m.add_class::<distributed::PlanHandle>()?;
    m.add_class::<distributed::MergerHandle>()?;
    m.add_function(wrap_pyfunction!(distributed::install_plugin, m)?)?;
    m.add_function(wrap_pyfunction!(distributed::has_plugin, m)?)?;
    m.add_function(wrap_pyfunction!(distributed::run_partition, m)?)?;
    m.add_class::<session::Plugin>()?;
    m.add_class::<session::Instance>()?;
    m.add_function(wrap_pyfunction!(describe_wasm, m)?)?;
    m.add_function(wrap_pyfunction!(describe_builtin, m)?)?;
    m.add_function(wrap_pyfunction!(builtin_names, m)?)?;
    m.add_function(wrap_pyfunction!(contract_version, m)?)?;
    Ok(())
}
