//! The wasm runtime: one wasmtime [`Engine`], compiled-component cache, limits, and
//! loading plugins as [`WasmUdf`]s.
//!
//! | type | role |
//! |------|------|
//! | [`WasmRuntime`] | engine (pooling allocator, epochs), linker (log + deny-all WASI), cache |
//! | [`RuntimeOptions`] | memory caps (per instance, total), per-call timeout, `trusted`, cache directory, logger |
//! | [`WasmUdf`] | a loaded plugin: description, `InstancePre`, a main-side instance |
//! | [`ComponentCache`] | `.cwasm` files keyed by wasm hash and engine compatibility |
//! | [`MemoryBudget`] | the total memory of a runtime's instances and of what their calls return |
//!
//! What a plugin can make the host spend is bounded (`docs/security.md`): linear memory
//! per instance and in total ([`budget`]), time per call (epochs; timers are ready at
//! once, `state.rs`), what a call returns (hostcall fuel, [`budget::CallKind`]), the size
//! of descriptions and declarations ([`caps`]), and the log (per instance and per run).

mod arrays;
pub mod bindings;
pub mod budget;
mod cache;
pub mod caps;
mod convert;
mod fill;
mod plugin;
mod runner;
mod state;

pub use arrays::MAX_LIVE_ARRAYS;
pub use budget::{MemoryBudget, default_memory_total};
pub use cache::{CacheError, CacheOutcome, ComponentCache};
#[doc(hidden)]
pub use convert::ndarray_from_wit as validate_array;
pub use plugin::WasmUdf;
pub use runner::{RUNNER_FILE, class_reference, class_source_of_file, runner_path};
pub use state::{MAX_LOG_LINE, MAX_LOG_LINES, MAX_RESOURCES, MAX_RUN_LOG_BYTES};

use crate::log::{self, Logger};
use state::{FrozenTimers, HostData, HostState};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// The version of the `udf:plugin` WIT package this host implements.
pub const WIT_VERSION: (u64, u64, u64) = (0, 1, 1);
/// The WIT package name.
pub const WIT_PACKAGE: &str = "udf:plugin";

/// How often the epoch advances (the granularity of `--timeout`).
const EPOCH_TICK: Duration = Duration::from_millis(10);
/// The largest memory a 32-bit wasm instance can have.
pub const MAX_WASM_MEMORY: usize = 4 << 30;
/// The smallest total memory budget: room for a few small instances.
pub const MIN_MEMORY_TOTAL: usize = 16 << 20;

/// Settings of the wasm runtime.
#[derive(Clone)]
pub struct RuntimeOptions {
    /// Linear memory cap per instance, in bytes (at most 4 GiB).
    pub max_memory: usize,
    /// The total of every instance's linear memory and of what their calls return to
    /// the host, in bytes ([`MemoryBudget`]; default: [`default_memory_total`]).
    pub max_memory_total: usize,
    /// Wall-clock limit per call into a plugin (ignored when `trusted`).
    pub timeout: Duration,
    /// Turn off epoch interruption: faster tight loops, no timeout.
    pub trusted: bool,
    /// Where compiled components are cached.
    pub cache: ComponentCache,
    /// Instances that may exist at once (pool size).
    pub max_instances: u32,
    /// Instances of the Python runner kept, idle, for the next partition or run of
    /// their class (part of `max_instances`; 0: none kept).
    pub idle_runners: usize,
    /// Give up compiling a plugin after this long (the compiler thread is abandoned).
    pub compile_timeout: Duration,
    /// Where plugin log lines go.
    pub logger: Logger,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            max_memory: MAX_WASM_MEMORY,
            max_memory_total: default_memory_total(),
            timeout: Duration::from_secs(300),
            trusted: false,
            cache: ComponentCache::new(ComponentCache::default_dir()),
            max_instances: 64,
            idle_runners: 2,
            compile_timeout: Duration::from_secs(120),
            logger: log::discard(),
        }
    }
}

impl std::fmt::Debug for RuntimeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeOptions")
            .field("max_memory", &self.max_memory)
            .field("max_memory_total", &self.max_memory_total)
            .field("timeout", &self.timeout)
            .field("trusted", &self.trusted)
            .field("cache", &self.cache)
            .field("max_instances", &self.max_instances)
            .field("idle_runners", &self.idle_runners)
            .field("compile_timeout", &self.compile_timeout)
            .finish_non_exhaustive()
    }
}

/// Why a plugin could not be loaded.
#[derive(Debug, Clone, thiserror::Error)]
#[error("plugin {}: {message}", path.display())]
pub struct LoadError {
    pub path: PathBuf,
    pub kind: LoadErrorKind,
    pub message: String,
}

/// The class of a [`LoadError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadErrorKind {
    /// The file cannot be read.
    Read,
    /// Not WebAssembly at all.
    NotWasm,
    /// A core module rather than a component.
    CoreModule,
    /// Built against another version of the contract.
    WitVersion,
    /// Imports something the host does not provide, or lacks the `udf` export.
    Interface,
    /// Wasmtime rejected or failed to compile it.
    Compile,
    /// `describe` failed or returned something invalid.
    Describe,
    /// The compile cache cannot be used safely (another user may write it) or at all.
    Cache,
}

impl LoadErrorKind {
    /// Whether the user must fix it (the file cannot be read, the cache is unsafe), as
    /// opposed to the plugin being at fault.
    pub fn is_users(self) -> bool {
        matches!(self, LoadErrorKind::Read | LoadErrorKind::Cache)
    }
}

/// Why the runtime could not be created.
#[derive(Debug, thiserror::Error)]
#[error("cannot set up the WebAssembly runtime: {0}")]
pub struct RuntimeError(String);

/// Advances the engine's epoch every [`EPOCH_TICK`] until dropped.
struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EpochTicker {
    fn start(engine: Engine) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("udf-host-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })
            .ok();
        EpochTicker { stop, thread }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub(crate) struct Shared {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<HostState>,
    pub(crate) options: RuntimeOptions,
    /// Whether epoch interruption is on (not `trusted`).
    pub(crate) epochs: bool,
    /// Bumped by [`WasmRuntime::interrupt`]; calls that started before trap.
    pub(crate) interrupts: Arc<AtomicU64>,
    /// The total memory of every instance, and of what their calls return.
    pub(crate) budget: Arc<MemoryBudget>,
    /// The Python runner's instances kept for the next partition or run of their class.
    runners: std::sync::Mutex<runner::RunnerPool>,
    _ticker: Option<EpochTicker>,
}

/// The wasm runtime: create one per process and load plugins with it.
#[derive(Clone)]
pub struct WasmRuntime {
    shared: Arc<Shared>,
}

/// How a plugin was loaded, for timings and `results.json`.
#[derive(Debug, Clone, Copy)]
pub struct LoadStats {
    pub cache: CacheOutcome,
    /// Reading, compiling or deserialising, and type-checking.
    pub load_time: Duration,
}

impl WasmRuntime {
    /// Create the engine and linker.
    ///
    /// # Errors
    /// If wasmtime rejects the configuration (e.g. an impossible memory limit).
    pub fn new(options: RuntimeOptions) -> Result<Self, RuntimeError> {
        if options.max_memory == 0 || options.max_memory > MAX_WASM_MEMORY {
            return Err(RuntimeError(format!(
                "--max-memory must be between 1 byte and 4 GiB (32-bit wasm), got {} bytes",
                options.max_memory
            )));
        }
        if options.max_memory_total < MIN_MEMORY_TOTAL {
            return Err(RuntimeError(format!(
                "--max-memory-total must be at least {} MiB, got {} bytes",
                MIN_MEMORY_TOTAL >> 20,
                options.max_memory_total
            )));
        }
        let mut pool = PoolingAllocationConfig::new();
        let instances = options.max_instances.max(4);
        // Room for `instances` component instances of the largest components allowed
        // (the per-component maxima below): componentize-py components hold ~20-30 core
        // instances each. Slots are virtual reservations, committed only when used.
        pool.total_component_instances(instances)
            .total_core_instances(instances * 64)
            .total_memories(instances * 4)
            .total_tables(instances * 16)
            .max_memories_per_component(4)
            .max_tables_per_component(16)
            .max_core_instances_per_component(64)
            .table_elements(200_000)
            .max_core_instance_size(8 << 20)
            .max_memory_size(options.max_memory);
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .concurrency_support(false)
            .epoch_interruption(!options.trusted)
            // Relaxed SIMD with one meaning on every CPU: `relaxed_madd` is always fused
            // (one FMA instruction where the CPU has FMA), swizzles and conversions take
            // their deterministic forms. A plugin's results do not depend on the host.
            .relaxed_simd_deterministic(true)
            .parallel_compilation(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config).map_err(|e| RuntimeError(format!("{e:#}")))?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| RuntimeError(format!("{e:#}")))?;
        FrozenTimers::shadow(&mut linker).map_err(|e| RuntimeError(format!("{e:#}")))?;
        bindings::UdfPlugin::add_to_linker::<HostState, HostData>(&mut linker, |s| s)
            .map_err(|e| RuntimeError(format!("{e:#}")))?;
        let epochs = !options.trusted;
        let ticker = epochs.then(|| EpochTicker::start(engine.clone()));
        let interrupts = Arc::new(AtomicU64::new(0));
        let budget = MemoryBudget::new(options.max_memory_total);
        Ok(WasmRuntime {
            shared: Arc::new(Shared {
                runners: std::sync::Mutex::new(runner::RunnerPool::new(options.idle_runners)),
                engine,
                linker,
                options,
                epochs,
                interrupts,
                budget,
                _ticker: ticker,
            }),
        })
    }

    /// Stop every call into a plugin of this runtime that is running now (within one
    /// epoch tick, 10 ms); they trap with "interrupted". Calls started later are not
    /// affected. Has no effect on `trusted` runtimes (no epoch checks).
    pub fn interrupt(&self) {
        self.shared.interrupts.fetch_add(1, Ordering::SeqCst);
    }

    pub fn options(&self) -> &RuntimeOptions {
        &self.shared.options
    }

    pub fn engine(&self) -> &Engine {
        &self.shared.engine
    }

    /// The memory budget of this runtime's instances (`max_memory_total`).
    pub fn budget(&self) -> &MemoryBudget {
        &self.shared.budget
    }

    /// Load a plugin: read, check the contract version and imports, compile (or load
    /// from the cache), and call `describe`.
    ///
    /// # Errors
    /// [`LoadError`] naming the file and the problem.
    pub fn load(&self, path: &Path) -> Result<(WasmUdf, LoadStats), LoadError> {
        let started = Instant::now();
        let wasm = std::fs::read(path).map_err(|e| LoadError {
            path: path.to_owned(),
            kind: LoadErrorKind::Read,
            message: format!("cannot read the file: {e}"),
        })?;
        let (udf, stats) = self.load_bytes(path, &wasm)?;
        Ok((udf, LoadStats { load_time: started.elapsed(), ..stats }))
    }

    /// Load a plugin from its bytes (e.g. sent to a worker process); `path` is where it
    /// came from, for messages and run plans.
    ///
    /// # Errors
    /// [`LoadError`] naming `path` and the problem.
    pub fn load_bytes(&self, path: &Path, wasm: &[u8]) -> Result<(WasmUdf, LoadStats), LoadError> {
        let started = Instant::now();
        let err = |kind, message: String| LoadError { path: path.to_owned(), kind, message };
        check_header(wasm).map_err(|(kind, message)| err(kind, message))?;
        let (component, cache) = self.compile(wasm).map_err(|(kind, message)| err(kind, message))?;
        check_interface(&component, &self.shared.engine).map_err(|(kind, message)| err(kind, message))?;
        let udf = WasmUdf::new(self.shared.clone(), path, sha256_hex(wasm), &component)?;
        Ok((udf, LoadStats { cache, load_time: started.elapsed() }))
    }
}

/// The SHA-256 of a plugin's bytes as lowercase hex: how run plans identify a plugin.
pub fn sha256_hex(wasm: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(wasm).iter().map(|b| format!("{b:02x}")).collect()
}

impl WasmRuntime {
    /// Compile (or load from the cache) on a separate thread, giving up after
    /// `compile_timeout`: Cranelift cannot be interrupted, so a plugin crafted to compile
    /// forever costs one abandoned thread, not a hung host.
    fn compile(&self, wasm: &[u8]) -> Result<(Component, CacheOutcome), (LoadErrorKind, String)> {
        let (tx, rx) = std::sync::mpsc::channel();
        let cache = self.shared.options.cache.clone();
        let engine = self.shared.engine.clone();
        let wasm = wasm.to_vec();
        std::thread::Builder::new()
            .name("udf-host-compile".into())
            .spawn(move || {
                let _ = tx.send(cache.load_or_compile(&engine, &wasm).map_err(|e| match e {
                    CacheError::Compile(e) => (LoadErrorKind::Compile, format!("not a valid component: {e:#}")),
                    e => (LoadErrorKind::Cache, e.to_string()),
                }));
            })
            .map_err(|e| (LoadErrorKind::Compile, format!("cannot start the compiler thread: {e}")))?;
        let timeout = self.shared.options.compile_timeout;
        match rx.recv_timeout(timeout) {
            Ok(compiled) => compiled,
            Err(_) => Err((
                LoadErrorKind::Compile,
                format!("did not compile within {:.1} s (--compile-timeout)", timeout.as_secs_f64()),
            )),
        }
    }
}

/// Distinguish "not wasm" and "core module" from a component by the preamble.
fn check_header(wasm: &[u8]) -> Result<(), (LoadErrorKind, String)> {
    if wasm.len() < 8 || &wasm[..4] != b"\0asm" {
        return Err((
            LoadErrorKind::NotWasm,
            "not a WebAssembly file (it does not start with \\0asm); give the .wasm component built from the plugin"
                .into(),
        ));
    }
    match wasm[6..8] {
        [0, 0] => Err((
            LoadErrorKind::CoreModule,
            "this is a core WebAssembly module, not a component; build the plugin for wasm32-wasip2 \
             (cargo build --target wasm32-wasip2) or wrap it with `wasm-tools component new`"
                .into(),
        )),
        [1, 0] => Ok(()),
        _ => Err((LoadErrorKind::NotWasm, "unknown WebAssembly binary layer".into())),
    }
}

/// Parse `udf:plugin/<iface>@x.y.z` into the interface and version.
fn parse_interface(name: &str) -> Option<(&str, (u64, u64, u64))> {
    let rest = name.strip_prefix(WIT_PACKAGE)?.strip_prefix('/')?;
    let (iface, version) = rest.split_once('@')?;
    let mut parts = version.split(['.', '-', '+']).map(|p| p.parse::<u64>());
    let v = (parts.next()?.ok()?, parts.next()?.ok()?, parts.next()?.ok()?);
    Some((iface, v))
}

/// Semver compatibility as the component model applies it: same major, and for 0.x the
/// same minor; the plugin may not be newer than the host within that range.
fn compatible(v: (u64, u64, u64)) -> bool {
    let host = WIT_VERSION;
    if host.0 == 0 { v.0 == 0 && v.1 == host.1 && v.2 <= host.2 } else { v.0 == host.0 && v.1 <= host.1 }
}

fn version_text(v: (u64, u64, u64)) -> String {
    format!("{}.{}.{}", v.0, v.1, v.2)
}

/// Check the plugin exports `udf:plugin/udf` of a compatible version and imports only
/// what the host provides.
fn check_interface(component: &Component, engine: &Engine) -> Result<(), (LoadErrorKind, String)> {
    let ty = component.component_type();
    let host = version_text(WIT_VERSION);
    let supported = if WIT_VERSION.0 == 0 {
        format!("{WIT_PACKAGE}@0.{}.x ({host})", WIT_VERSION.1)
    } else {
        format!("{WIT_PACKAGE}@{}.x ({host})", WIT_VERSION.0)
    };
    let exports: Vec<String> = ty.exports(engine).map(|(name, _)| name.to_owned()).collect();
    let udf_export = exports.iter().find_map(|n| parse_interface(n).filter(|(i, _)| *i == "udf"));
    match udf_export {
        None => {
            return Err((
                LoadErrorKind::Interface,
                format!(
                    "the component does not export the {WIT_PACKAGE}/udf interface (it exports: {}); \
                     build it against wit/udf.wit with the guest SDK",
                    if exports.is_empty() { "nothing".into() } else { exports.join(", ") }
                ),
            ));
        }
        Some((_, v)) if !compatible(v) => {
            return Err((
                LoadErrorKind::WitVersion,
                format!(
                    "it was built against {WIT_PACKAGE}@{}, but this udf-host supports {supported}; \
                     rebuild the plugin with a matching guest SDK or use a matching udf-host",
                    version_text(v)
                ),
            ));
        }
        Some(_) => {}
    }
    for (name, _) in ty.imports(engine) {
        if name.starts_with("wasi:") {
            continue;
        }
        match parse_interface(name) {
            Some(("host" | "types" | "arrays", v)) if compatible(v) => {}
            Some((iface @ ("host" | "types" | "arrays"), v)) => {
                return Err((
                    LoadErrorKind::WitVersion,
                    format!(
                        "it imports {WIT_PACKAGE}/{iface}@{}, but this udf-host supports {supported}",
                        version_text(v)
                    ),
                ));
            }
            _ => {
                return Err((
                    LoadErrorKind::Interface,
                    format!(
                        "it imports '{name}', which udf-host does not provide (plugins get only \
                         {WIT_PACKAGE}/host and a WASI that grants nothing)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(parse_interface("udf:plugin/udf@0.1.0"), Some(("udf", (0, 1, 0))));
        assert_eq!(parse_interface("udf:plugin/host@1.2.3-rc1"), Some(("host", (1, 2, 3))));
        assert_eq!(parse_interface("wasi:cli/stdout@0.2.0"), None);
        assert!(compatible((0, 1, 0)), "plugins of the first contract keep working");
        assert!(compatible((0, 1, 1)));
        assert!(!compatible((0, 2, 0)));
        assert!(!compatible((1, 0, 0)));
        assert!(!compatible((0, 1, 2)), "a plugin newer than the host may use what the host lacks");
    }

    #[test]
    fn headers() {
        assert_eq!(check_header(b"hello world").unwrap_err().0, LoadErrorKind::NotWasm);
        assert_eq!(check_header(b"\0asm\x01\0\0\0").unwrap_err().0, LoadErrorKind::CoreModule);
        assert!(check_header(b"\0asm\x0d\0\x01\0").is_ok());
    }
}
