//! The on-disk cache of compiled components (`.cwasm`).
//!
//! Compiling a component takes 20 ms (small Rust plugin) to several seconds (Python,
//! JS); loading a cached one takes well under a millisecond. Entries are keyed by the
//! SHA-256 of the wasm bytes and of the engine's compatibility hash (wasmtime version,
//! compiler settings, enabled features), so a changed plugin or engine never loads a
//! stale entry.

use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Where compiled components are kept.
#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: Option<PathBuf>,
}

/// Whether a component came from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded a compiled component from disk.
    Hit,
    /// Compiled it (and stored it, if the cache is enabled).
    Compiled,
}

/// Feeds `Hash` output into SHA-256, so `precompile_compatibility_hash` gives a stable
/// digest.
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

impl ComponentCache {
    /// A cache in `dir`, or no cache with `None`.
    pub fn new(dir: Option<PathBuf>) -> Self {
        ComponentCache { dir }
    }

    /// The user's default cache directory: `$UDF_HOST_CACHE_DIR`, else
    /// `$XDG_CACHE_HOME/udf-host`, else `~/.cache/udf-host`.
    pub fn default_dir() -> Option<PathBuf> {
        let env = |name| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        env("UDF_HOST_CACHE_DIR")
            .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("udf-host")))
            .or_else(|| env("HOME").map(|d| d.join(".cache").join("udf-host")))
    }

    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The cache file for `wasm` under `engine`.
    fn entry(&self, engine: &Engine, wasm: &[u8]) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        let wasm_hash = hex(&Sha256::digest(wasm));
        let mut engine_hash = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut engine_hash);
        let engine_hash = hex(&engine_hash.0.finalize()[..8]);
        Some(dir.join("components").join(format!("{wasm_hash}-{engine_hash}.cwasm")))
    }

    /// Load the compiled form of `wasm` from the cache, or compile it and store it.
    /// A damaged cache entry is replaced; failing to write the cache is not an error.
    ///
    /// # Errors
    /// Compilation errors of wasmtime (invalid or unsupported wasm).
    pub fn load_or_compile(&self, engine: &Engine, wasm: &[u8]) -> wasmtime::Result<(Component, CacheOutcome)> {
        let entry = self.entry(engine, wasm);
        if let Some(path) = entry.as_deref().filter(|p| p.exists()) {
            // SAFETY: the entry was written by `store` below from wasmtime's own
            // serialisation into the user's private cache directory; wasmtime checks its
            // header and engine compatibility. Whoever can write that directory can
            // already run code as this user (docs/security.md).
            match unsafe { Component::deserialize_file(engine, path) } {
                Ok(component) => return Ok((component, CacheOutcome::Hit)),
                Err(_) => {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
        let component = Component::from_binary(engine, wasm)?;
        if let Some(path) = entry
            && let Ok(bytes) = component.serialize()
        {
            let _ = store(&path, &bytes);
        }
        Ok((component, CacheOutcome::Compiled))
    }
}

/// Write `bytes` to `path` atomically (temporary file + rename), creating a private
/// directory.
fn store(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().ok_or_else(|| std::io::Error::other("no parent directory"))?;
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
