//! The process's shared plugin loaders, one per set of limits (each with its wasm
//! runtime and the default compile cache): what `describe_wasm`, the LiberTEM session
//! and Dask workers load plugins with, so a process compiles each plugin once. A
//! `Context` has a runtime of its own (its limits, threads and cache directory).

use std::sync::{Arc, Mutex, OnceLock};
use udf_host::exec::Limits;
use udf_host::loader::{Loader, RuntimeSetup, UDFS_PER_SHARED_RUN};

/// The loaders made so far, by the limits they run plugins under.
type Loaders = Mutex<Vec<(Limits, Arc<Loader>)>>;

/// The loader of this process for plugins that run under `limits`, made on first use.
///
/// # Errors
/// The runtime cannot be made with these limits.
pub fn shared_loader(limits: Limits) -> Result<Arc<Loader>, String> {
    static LOADERS: OnceLock<Loaders> = OnceLock::new();
    let mut loaders = LOADERS.get_or_init(Mutex::default).lock().map_err(|_| "the loaders' lock is poisoned")?;
    if let Some((_, loader)) = loaders.iter().find(|(l, _)| *l == limits) {
        return Ok(loader.clone());
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let runtime = RuntimeSetup::new(limits, threads, UDFS_PER_SHARED_RUN).build().map_err(|e| e.to_string())?;
    let loader = Arc::new(Loader::new(runtime));
    loaders.push((limits, loader.clone()));
    Ok(loader)
}
