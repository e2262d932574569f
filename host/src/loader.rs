//! Loading a plan's UDFs where its partitions run: built-ins by name, wasm plugins from
//! bytes sent ahead (a Dask worker gets each plugin once) or from their path — either
//! way checked against the SHA-256 the plan recorded before anything runs.
//!
//! This is the one module that knows both kinds of UDF; the executor sees only the
//! [`UdfLoader`] trait.

use crate::builtins::UnknownBuiltin;
use crate::exec::{Limits, Plan, UdfLoader};
use crate::report::{LoadCache, PluginLoad};
use crate::udf::{Udf, UdfOrigin};
use crate::wasm::{
    CacheOutcome, ComponentCache, LoadError, LoadErrorKind, RuntimeError, RuntimeOptions, WasmRuntime, sha256_hex,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Loads built-ins and wasm plugins, keeping each loaded plugin (by hash) for the next
/// plan: one compile per process, however many tasks use it.
pub struct Loader {
    runtime: WasmRuntime,
    /// Plugin bytes sent ahead, by SHA-256.
    bytes: Mutex<HashMap<String, Arc<Vec<u8>>>>,
    /// Plugins loaded so far, by SHA-256.
    loaded: Mutex<HashMap<String, Arc<dyn Udf>>>,
}

impl Loader {
    /// A loader whose plugins run in `runtime`.
    pub fn new(runtime: WasmRuntime) -> Self {
        Loader { runtime, bytes: Mutex::default(), loaded: Mutex::default() }
    }

    /// A loader with a runtime set up for `plan`'s limits (and the default compile cache).
    ///
    /// # Errors
    /// If the runtime cannot be created with those limits.
    pub fn for_plan(plan: &Plan) -> Result<Self, RuntimeError> {
        let instances = ((plan.threads + 2) * plan.udfs.len()).max(4) as u32;
        Ok(Loader::new(WasmRuntime::new(runtime_options(&plan.limits, instances))?))
    }

    /// The runtime plugins are loaded into.
    pub fn runtime(&self) -> &WasmRuntime {
        &self.runtime
    }

    /// Register a plugin's bytes (sent by the client); returns their SHA-256. A plan's
    /// plugin with that hash is then loaded from them instead of from its path.
    pub fn add_bytes(&self, wasm: Vec<u8>) -> String {
        let hash = sha256_hex(&wasm);
        if let Ok(mut bytes) = self.bytes.lock() {
            bytes.entry(hash.clone()).or_insert_with(|| Arc::new(wasm));
        }
        hash
    }

    /// Whether bytes or a loaded plugin with this hash are here already.
    pub fn has(&self, sha256: &str) -> bool {
        let in_map = |m: &Mutex<HashMap<String, _>>| m.lock().is_ok_and(|m| m.contains_key(sha256));
        in_map(&self.loaded) || self.bytes.lock().is_ok_and(|m| m.contains_key(sha256))
    }

    fn load_wasm(&self, path: &std::path::Path, sha256: &str) -> Result<Arc<dyn Udf>, String> {
        if let Some(udf) = self.loaded.lock().map_err(|_| "loader lock poisoned")?.get(sha256) {
            return Ok(udf.clone());
        }
        let sent = self.bytes.lock().map_err(|_| "loader lock poisoned")?.get(sha256).cloned();
        let wasm = match sent {
            Some(bytes) => bytes,
            None => Arc::new(std::fs::read(path).map_err(|e| {
                format!(
                    "{} cannot be read here ({e}); the plugin must be at the same path on every worker, \
                     or its bytes sent ahead",
                    path.display()
                )
            })?),
        };
        let found = sha256_hex(&wasm);
        if found != sha256 {
            return Err(format!(
                "{} has SHA-256 {found} here, but the plan was made with {sha256}: it is not the same plugin",
                path.display()
            ));
        }
        let (udf, _) = self.runtime.load_bytes(path, &wasm).map_err(|e| e.to_string())?;
        let udf: Arc<dyn Udf> = Arc::new(udf);
        self.loaded.lock().map_err(|_| "loader lock poisoned")?.insert(sha256.to_owned(), udf.clone());
        Ok(udf)
    }
}

impl UdfLoader for Loader {
    fn load(&self, origin: &UdfOrigin) -> Result<Arc<dyn Udf>, String> {
        match origin {
            UdfOrigin::Builtin { name } => crate::builtins::get(name)
                .ok_or_else(|| crate::builtins::UnknownBuiltin { name: name.clone() }.to_string()),
            UdfOrigin::Wasm { path, sha256 } => self.load_wasm(path, sha256),
            UdfOrigin::InProcess { source } => Err(format!(
                "'{source}' was made in the planning process (not a built-in or a wasm file), so it cannot be \
                 loaded elsewhere"
            )),
        }
    }
}

/// The wasm runtime's options for a plan's limits, with room for `instances` instances.
pub fn runtime_options(limits: &Limits, instances: u32) -> RuntimeOptions {
    RuntimeOptions {
        max_memory: usize::try_from(limits.max_memory).unwrap_or(usize::MAX).min(crate::wasm::MAX_WASM_MEMORY),
        max_memory_total: limits
            .max_memory_total
            .map_or_else(crate::wasm::default_memory_total, |t| usize::try_from(t).unwrap_or(usize::MAX)),
        timeout: Duration::try_from_secs_f64(limits.timeout_seconds).unwrap_or(Duration::from_secs(300)),
        trusted: limits.trusted,
        cache: ComponentCache::new(ComponentCache::default_dir()),
        max_instances: instances,
        ..RuntimeOptions::default()
    }
}

/// Whether `path` names a UDF rather than a dataset: `builtin:NAME` or a `.wasm` file.
pub fn names_a_udf(path: &Path) -> bool {
    path.to_str().is_some_and(|p| p.starts_with(crate::builtins::PREFIX))
        || path.extension().is_some_and(|e| e.eq_ignore_ascii_case("wasm"))
}

/// Why a UDF named by its source could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// `builtin:NAME` with no such built-in.
    #[error(transparent)]
    Builtin(#[from] UnknownBuiltin),
    /// A wasm plugin that cannot be read or loaded.
    #[error(transparent)]
    Wasm(#[from] LoadError),
}

impl SourceError {
    /// Whether the plugin is at fault (it was read, but is not a usable plugin) rather
    /// than the name given.
    pub fn is_plugin_failure(&self) -> bool {
        matches!(self, SourceError::Wasm(e) if e.kind != LoadErrorKind::Read)
    }
}

/// UDFs loaded from their sources, and how each was loaded (for `results.json`).
pub struct LoadedUdfs {
    pub udfs: Vec<Arc<dyn Udf>>,
    pub loads: Vec<PluginLoad>,
}

/// Load the UDFs named as the command line names them — `builtin:NAME` or the path of a
/// `.wasm` plugin — into `runtime`.
///
/// # Errors
/// The first UDF that cannot be loaded.
pub fn load_sources(runtime: &WasmRuntime, sources: &[PathBuf]) -> Result<LoadedUdfs, SourceError> {
    let mut udfs: Vec<Arc<dyn Udf>> = Vec::with_capacity(sources.len());
    let mut loads = Vec::with_capacity(sources.len());
    for path in sources {
        let source = path.display().to_string();
        if let Some(builtin) = path.to_str().and_then(crate::builtins::from_source) {
            udfs.push(builtin?);
            loads.push(PluginLoad { source, cache: LoadCache::Builtin, load_seconds: 0.0 });
            continue;
        }
        let (udf, stats) = runtime.load(path)?;
        let cache = match stats.cache {
            CacheOutcome::Hit => LoadCache::Hit,
            CacheOutcome::Compiled => LoadCache::Compiled,
        };
        loads.push(PluginLoad { source, cache, load_seconds: stats.load_time.as_secs_f64() });
        udfs.push(Arc::new(udf));
    }
    Ok(LoadedUdfs { udfs, loads })
}
