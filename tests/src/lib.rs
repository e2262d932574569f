//! Shared pieces of the integration tests: fixture writers, plain-Rust references,
//! and access to the plugins built by `build.rs`.

pub mod bench_data;
#[cfg(unix)]
pub mod browser;
pub mod fixture_formats;
pub mod fixtures;
pub mod reference;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use udf_host::exec::{Run, RunOptions, RunResults, UdfSpec};
use udf_host::udf::{Param, ParamValue, Params, Udf};
use udf_host::wasm::{ComponentCache, RuntimeOptions, WasmRuntime};

/// The compiled plugin or probe `name` (its lib name, e.g. `sum`, `probe_trap`). From
/// the build's plugin directory, or from `$UDF_PLUGIN_DIR` where the test binary runs on
/// another machine (the GPU kit, scripts/gpu/).
pub fn plugin(name: &str) -> PathBuf {
    let dir = std::env::var_os("UDF_PLUGIN_DIR").map_or_else(|| PathBuf::from(env!("UDF_PLUGIN_DIR")), PathBuf::from);
    let path = dir.join(format!("{name}.wasm"));
    assert!(path.exists(), "{} was not built (plugins: {})", path.display(), env!("UDF_PLUGIN_NAMES"));
    path
}

/// A cache directory shared by the test processes (kept between runs); `$UDF_TEST_CACHE_DIR`
/// where the test binary runs on another machine.
pub fn test_cache_dir() -> PathBuf {
    match std::env::var_os("UDF_TEST_CACHE_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-cache"),
    }
}

/// Runtime options for tests: the shared test cache, plugin logs discarded.
pub fn runtime_options() -> RuntimeOptions {
    RuntimeOptions { cache: ComponentCache::new(Some(test_cache_dir())), ..RuntimeOptions::default() }
}

/// One runtime for the whole test binary.
pub fn runtime() -> &'static WasmRuntime {
    static RUNTIME: OnceLock<WasmRuntime> = OnceLock::new();
    RUNTIME.get_or_init(|| WasmRuntime::new(runtime_options()).expect("runtime"))
}

/// Load a plugin with the shared runtime.
pub fn load(name: &str) -> Arc<dyn Udf> {
    let (udf, _) = runtime().load(&plugin(name)).unwrap_or_else(|e| panic!("{e}"));
    Arc::new(udf)
}

/// Params from `(name, value)` pairs.
pub fn params(pairs: &[(&str, ParamValue)]) -> Params {
    Params(pairs.iter().map(|(n, v)| Param { name: (*n).to_owned(), value: v.clone() }).collect())
}

/// Run `udfs` over the dataset at `path` (format detected; raw needs `open`).
pub fn run_on(
    path: &Path,
    open: &udf_host::dataset::OpenOptions,
    udfs: Vec<(Arc<dyn Udf>, Params)>,
    options: RunOptions,
) -> Result<RunResults, udf_host::exec::RunError> {
    let data = udf_host::dataset::open(path, open)?;
    let specs = udfs.into_iter().map(|(udf, params)| UdfSpec { udf, params }).collect();
    Run::plan(data, specs, options)?.execute()
}
