//! Loading a plan's UDFs where its partitions run: built-ins by name, wasm plugins from
//! bytes sent ahead (a Dask worker gets each plugin once) or from their path — either
//! way checked against the SHA-256 the plan recorded before anything runs.
//!
//! This is the one module that knows both kinds of UDF; the executor sees only the
//! [`UdfLoader`] trait. [`RuntimeSetup`] is the one place that sets up a wasm runtime
//! from a run's limits, threads and UDFs; [`load_sources`] loads UDFs named as the
//! command line names them.

use crate::builtins::UnknownBuiltin;
use crate::exec::{Limits, Plan, UdfLoader};
use crate::log::{LogLevel, Logger};
use crate::report::{LoadCache, PluginLoad};
use crate::udf::{ClassSource, Udf, UdfOrigin};
use crate::wasm::{
    CacheOutcome, ComponentCache, LoadError, RuntimeError, RuntimeOptions, WasmRuntime, WasmUdf, sha256_hex,
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
    loaded: Mutex<HashMap<String, Arc<WasmUdf>>>,
    /// UDF classes on the Python runner, by the runner's and the class's SHA-256.
    classes: Mutex<HashMap<(String, String), Arc<dyn Udf>>>,
}

impl Loader {
    /// A loader whose plugins run in `runtime`.
    pub fn new(runtime: WasmRuntime) -> Self {
        Loader { runtime, bytes: Mutex::default(), loaded: Mutex::default(), classes: Mutex::default() }
    }

    /// A loader with a runtime set up for `plan` ([`RuntimeSetup`]: its limits, threads
    /// and UDFs; the default compile cache), never `trusted` ([`Limits::untrusted`]).
    ///
    /// # Errors
    /// If the runtime cannot be created with those limits.
    pub fn for_plan(plan: &Plan) -> Result<Self, RuntimeError> {
        Ok(Loader::new(RuntimeSetup::new(plan.limits.untrusted(), plan.threads, plan.udfs.len()).build()?))
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

    fn load_wasm(&self, path: &std::path::Path, sha256: &str) -> Result<Arc<WasmUdf>, String> {
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
        let udf = Arc::new(udf);
        self.loaded.lock().map_err(|_| "loader lock poisoned")?.insert(sha256.to_owned(), udf.clone());
        Ok(udf)
    }
}

impl Loader {
    /// A UDF class on the Python runner: the runner loaded (and checked) as any plugin,
    /// the class's source checked against the plan's hash, each pair loaded once.
    fn load_class(&self, runner: &Path, runner_sha256: &str, class: &ClassSource) -> Result<Arc<dyn Udf>, String> {
        class.check().map_err(|e| e.to_string())?;
        let key = (runner_sha256.to_owned(), class.sha256.clone());
        if let Some(udf) = self.classes.lock().map_err(|_| "loader lock poisoned")?.get(&key) {
            return Ok(udf.clone());
        }
        let runner = self.load_wasm(runner, runner_sha256)?;
        let udf: Arc<dyn Udf> = Arc::new(runner.with_class(class.clone()).map_err(|e| e.to_string())?);
        self.classes.lock().map_err(|_| "loader lock poisoned")?.insert(key, udf.clone());
        Ok(udf)
    }
}

impl UdfLoader for Loader {
    fn load(&self, origin: &UdfOrigin) -> Result<Arc<dyn Udf>, String> {
        match origin {
            UdfOrigin::Builtin { name } => crate::builtins::get(name)
                .ok_or_else(|| crate::builtins::UnknownBuiltin { name: name.clone() }.to_string()),
            UdfOrigin::Wasm { path, sha256 } => Ok(self.load_wasm(path, sha256)?),
            UdfOrigin::PythonClass { runner, runner_sha256, class } => self.load_class(runner, runner_sha256, class),
            UdfOrigin::InProcess { source } => Err(format!(
                "'{source}' was made in the planning process (not a built-in or a wasm file), so it cannot be \
                 loaded elsewhere"
            )),
        }
    }
}

/// How to set up the wasm runtime that runs plugins: the one place where the limits
/// plugins run under (as a plan records them), the threads and the UDFs of a run become
/// the runtime's options. Every front end and engine builds its runtime here.
#[derive(Clone)]
pub struct RuntimeSetup {
    pub limits: Limits,
    /// Worker threads of a run (each runs one instance per UDF at a time).
    pub threads: usize,
    /// UDFs of a run ([`UDFS_PER_SHARED_RUN`] for a runtime that serves runs not known
    /// yet).
    pub udfs: usize,
    /// The compiled-plugin cache (default: `~/.cache/udf-host`).
    pub cache: ComponentCache,
    /// Give up compiling a plugin after this long.
    pub compile_timeout: Duration,
    /// Where plugin log lines go (default: warnings and errors on stderr).
    pub logger: Logger,
}

/// The UDFs per run a runtime that serves many runs (a Python `Context`, a Dask worker
/// process, a LiberTEM session) has room for.
pub const UDFS_PER_SHARED_RUN: usize = 8;

impl RuntimeSetup {
    /// A runtime for runs of `udfs` UDFs on `threads` threads under `limits`, with the
    /// default cache, compile timeout and logger.
    pub fn new(limits: Limits, threads: usize, udfs: usize) -> Self {
        RuntimeSetup {
            limits,
            threads,
            udfs,
            cache: ComponentCache::new(ComponentCache::default_dir()),
            compile_timeout: RuntimeOptions::default().compile_timeout,
            logger: crate::log::stderr(LogLevel::Warn),
        }
    }

    /// The instances that may exist at once: one per UDF on every thread, and two
    /// threads' worth more (main-side instances, a partition finishing while the next
    /// starts); at least 4.
    pub fn instances(&self) -> u32 {
        let instances = (self.threads.max(1) + 2).saturating_mul(self.udfs.max(1)).max(4);
        u32::try_from(instances).unwrap_or(u32::MAX)
    }

    /// The runtime's options.
    pub fn options(&self) -> RuntimeOptions {
        let limits = &self.limits;
        RuntimeOptions {
            max_memory: usize::try_from(limits.max_memory).unwrap_or(usize::MAX).min(crate::wasm::MAX_WASM_MEMORY),
            max_memory_total: limits
                .max_memory_total
                .map_or_else(crate::wasm::default_memory_total, |t| usize::try_from(t).unwrap_or(usize::MAX)),
            timeout: Duration::try_from_secs_f64(limits.timeout_seconds).unwrap_or(Duration::from_secs(300)),
            trusted: limits.trusted,
            cache: self.cache.clone(),
            max_instances: self.instances(),
            // A runner's class on every thread and on the main side.
            idle_runners: self.threads.max(1) + 1,
            compile_timeout: self.compile_timeout,
            logger: self.logger.clone(),
        }
    }

    /// Build the runtime.
    ///
    /// # Errors
    /// If the runtime cannot be created with these limits.
    pub fn build(&self) -> Result<WasmRuntime, RuntimeError> {
        WasmRuntime::new(self.options())
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
        matches!(self, SourceError::Wasm(e) if !e.kind.is_users())
    }
}

/// UDFs loaded from their sources, and how each was loaded (for `results.json`).
pub struct LoadedUdfs {
    pub udfs: Vec<Arc<dyn Udf>>,
    pub loads: Vec<PluginLoad>,
}

/// Load the UDFs named as the command line names them — `builtin:NAME`, the path of a
/// `.wasm` plugin, or `FILE.py:Class` (a LiberTEM UDF class on the Python runner) — into
/// `runtime`.
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
        let (udf, stats) = match path.to_str().and_then(crate::wasm::class_reference) {
            Some((file, class)) => runtime.load_class_file(file, class)?,
            None => runtime.load(path)?,
        };
        let cache = match stats.cache {
            CacheOutcome::Hit => LoadCache::Hit,
            CacheOutcome::Compiled => LoadCache::Compiled,
        };
        loads.push(PluginLoad { source, cache, load_seconds: stats.load_time.as_secs_f64() });
        udfs.push(Arc::new(udf));
    }
    Ok(LoadedUdfs { udfs, loads })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runtime_has_room_for_an_instance_per_udf_per_thread_and_two_threads_more() {
        let room = |threads, udfs| RuntimeSetup::new(Limits::default(), threads, udfs).instances();
        assert_eq!(room(8, 3), 30);
        assert_eq!(room(1, 1), 4, "at least 4");
        assert_eq!(room(0, 0), 4);
        assert_eq!(room(16, UDFS_PER_SHARED_RUN), 144);
    }

    #[test]
    fn the_options_carry_the_limits() {
        let limits =
            Limits { timeout_seconds: 2.5, max_memory: 1 << 20, max_memory_total: Some(64 << 20), trusted: true };
        let options = RuntimeSetup::new(limits, 2, 2).options();
        assert_eq!(options.timeout, Duration::from_millis(2500));
        assert_eq!((options.max_memory, options.max_memory_total, options.trusted), (1 << 20, 64 << 20, true));
        assert_eq!(options.max_instances, 8);
    }
}
