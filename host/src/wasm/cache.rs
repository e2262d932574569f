//! The on-disk cache of compiled components (`.cwasm`).
//!
//! Compiling a component takes 20 ms (small Rust plugin) to several seconds (Python,
//! JS); loading a cached one takes well under a millisecond. Entries are keyed by the
//! SHA-256 of the wasm bytes and of the engine's compatibility hash (wasmtime version,
//! compiler settings, enabled features), so a changed plugin or engine never loads a
//! stale entry.
//!
//! An entry is native code that runs as the user, so the cache is trusted only as far as
//! nobody else can write it (as ssh treats `~/.ssh`):
//!
//! - the cache directory and its `components/` directory must belong to the user and be
//!   writable by nobody else (no group or world write bit); otherwise loading refuses
//!   with [`CacheError`], naming the directory and the fix;
//! - an entry must be a regular file of the user's that nobody else can write; it is
//!   read into memory (never mapped: the file could change after the checks) and starts
//!   with a header that records the SHA-256 of the wasm it was compiled from and of the
//!   compiled artifact that follows. An entry for other wasm bytes (a copy or a link of
//!   another plugin's entry), or whose artifact does not hash to the record (a torn or
//!   damaged write), is replaced by a fresh compilation;
//! - entries are written to a temporary file in the same directory, synced, renamed into
//!   place, and the directory is synced: a crash leaves the old entry or the new one.

use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The first bytes of an entry (format version 1): then the SHA-256 of the wasm, the
/// SHA-256 of the artifact, and the artifact (wasmtime's serialisation).
const MAGIC: &[u8; 16] = b"udf-host-cwasm1\n";
/// Bytes before the artifact.
const HEADER_LEN: usize = MAGIC.len() + 32 + 32;

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

/// Why a component could not be loaded or compiled.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The cache directory or an entry could be written by someone else: loading native
    /// code from it would run their code as this user.
    #[error("{}: {problem}; udf-host loads compiled code only from a cache nobody else can write: {fix}, or run with --no-cache", path.display())]
    Unsafe { path: PathBuf, problem: String, fix: String },
    /// The cache directory cannot be created or read.
    #[error("the compile cache {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// Wasmtime rejected or failed to compile the wasm.
    #[error("{0:#}")]
    Compile(wasmtime::Error),
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

    /// The entry's file name for wasm of SHA-256 `wasm_hash` under `engine`.
    fn entry_name(engine: &Engine, wasm_hash: &[u8]) -> String {
        let mut engine_hash = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut engine_hash);
        format!("{}-{}.cwasm", hex(wasm_hash), hex(&engine_hash.0.finalize()[..8]))
    }

    /// Load the compiled form of `wasm` from the cache, or compile it and store it.
    /// A damaged or mismatched entry is replaced; failing to write the cache is not an
    /// error.
    ///
    /// # Errors
    /// [`CacheError::Unsafe`] for a cache directory or entry someone else can write,
    /// [`CacheError::Io`] for one that cannot be created or read, and
    /// [`CacheError::Compile`] for wasm that wasmtime rejects.
    pub fn load_or_compile(&self, engine: &Engine, wasm: &[u8]) -> Result<(Component, CacheOutcome), CacheError> {
        let Some(dir) = &self.dir else {
            return Ok((Component::from_binary(engine, wasm).map_err(CacheError::Compile)?, CacheOutcome::Compiled));
        };
        let components = dir.join("components");
        private_dir(dir)?;
        private_dir(&components)?;
        let wasm_hash = Sha256::digest(wasm);
        let path = components.join(Self::entry_name(engine, &wasm_hash));
        if let Some(artifact) = read_entry(&path, &wasm_hash)? {
            // SAFETY: `artifact` is what `store` below wrote from wasmtime's own
            // serialisation of these wasm bytes (the header records their hash and the
            // artifact's, both checked), read into memory from a file and directories
            // that only this user can write (checked above); wasmtime checks its header
            // and engine compatibility.
            match unsafe { Component::deserialize(engine, &artifact) } {
                Ok(component) => return Ok((component, CacheOutcome::Hit)),
                Err(_) => {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        let component = Component::from_binary(engine, wasm).map_err(CacheError::Compile)?;
        if let Ok(artifact) = component.serialize() {
            let _ = store(&path, &wasm_hash, &artifact);
        }
        Ok((component, CacheOutcome::Compiled))
    }
}

/// Create `dir` (mode 0700) if it is missing, and check that it is the user's and that
/// nobody else can write it.
fn private_dir(dir: &Path) -> Result<(), CacheError> {
    let io = |source| CacheError::Io { path: dir.to_owned(), source };
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(io)?;
    let meta = std::fs::metadata(dir).map_err(io)?;
    if !meta.is_dir() {
        return Err(io(std::io::Error::other("not a directory")));
    }
    owned_privately(dir, &meta, "chmod go-w")
}

/// The owner and mode checks of a cache directory or entry (`fix` says what to run).
#[cfg(unix)]
fn owned_privately(path: &Path, meta: &std::fs::Metadata, fix: &str) -> Result<(), CacheError> {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    let unsafe_because = |problem: String, fix: String| CacheError::Unsafe { path: path.to_owned(), problem, fix };
    if meta.uid() != me {
        return Err(unsafe_because(
            format!("it belongs to user id {}, not to you (user id {me})", meta.uid()),
            format!("remove it (it is recreated) or use a --cache-dir of your own instead of {}", path.display()),
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(unsafe_because(
            format!("group or others may write it (mode {:04o})", meta.mode() & 0o7777),
            format!("{fix} {}", path.display()),
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
fn owned_privately(_: &Path, _: &std::fs::Metadata, _: &str) -> Result<(), CacheError> {
    Ok(())
}

/// The artifact of the entry at `path` for wasm of SHA-256 `wasm_hash`: `None` when
/// there is none, or it is damaged or for other wasm (then it is removed, to be
/// replaced).
///
/// # Errors
/// [`CacheError::Unsafe`] for an entry that is not a regular file of the user's that
/// nobody else can write.
fn read_entry(path: &Path, wasm_hash: &[u8]) -> Result<Option<Vec<u8>>, CacheError> {
    #[cfg(unix)]
    let opened = {
        use rustix::fs::{Mode, OFlags};
        // Not following a link, not blocking on a FIFO: the entry is checked on the
        // descriptor it is read from.
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        rustix::fs::open(path, flags, Mode::empty()).map(std::fs::File::from).map_err(std::io::Error::from)
    };
    #[cfg(not(unix))]
    let opened = std::fs::File::open(path);
    let mut file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(CacheError::Unsafe {
                path: path.to_owned(),
                problem: format!("the entry cannot be opened as a file ({source})"),
                fix: "remove it".into(),
            });
        }
    };
    let meta = file.metadata().map_err(|source| CacheError::Io { path: path.to_owned(), source })?;
    if !meta.is_file() {
        return Err(CacheError::Unsafe {
            path: path.to_owned(),
            problem: "the entry is not a regular file".into(),
            fix: "remove it".into(),
        });
    }
    owned_privately(path, &meta, "remove it, or chmod go-w")?;
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    if file.read_to_end(&mut bytes).is_err() {
        return Ok(None);
    }
    let valid = bytes.len() >= HEADER_LEN
        && bytes.starts_with(MAGIC)
        && bytes[MAGIC.len()..MAGIC.len() + 32] == *wasm_hash
        && bytes[MAGIC.len() + 32..HEADER_LEN] == *Sha256::digest(&bytes[HEADER_LEN..]);
    if !valid {
        let _ = std::fs::remove_file(path);
        return Ok(None);
    }
    bytes.drain(..HEADER_LEN);
    Ok(Some(bytes))
}

/// Write the entry for wasm of SHA-256 `wasm_hash` to `path` atomically and durably:
/// a temporary file (mode 0600) in the same directory, synced, renamed into place, and
/// the directory synced.
fn store(path: &Path, wasm_hash: &[u8], artifact: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().ok_or_else(|| std::io::Error::other("no parent directory"))?;
    let mut tmp = tempfile::Builder::new().prefix(".cwasm-").tempfile_in(dir)?;
    tmp.write_all(MAGIC)?;
    tmp.write_all(wasm_hash)?;
    tmp.write_all(&Sha256::digest(artifact))?;
    tmp.write_all(artifact)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    std::fs::File::open(dir)?.sync_all()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn engine() -> Engine {
        Engine::new(wasmtime::Config::new().wasm_component_model(true)).unwrap()
    }

    /// `(component)` in the binary format.
    const EMPTY: &[u8] = b"\0asm\x0d\0\x01\0";
    /// `(component (core module))`: other bytes, another entry.
    const WITH_MODULE: &[u8] = b"\0asm\x0d\0\x01\0\x01\x08\0asm\x01\0\0\0";

    /// Issue 33, finding 5: in a world-writable `--cache-dir`, an entry planted under a
    /// plugin's name ran instead of the plugin.
    #[test]
    fn a_cache_directory_others_can_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::new(Some(dir.path().join("c")));
        let wasm = EMPTY;
        assert_eq!(cache.load_or_compile(&engine(), wasm).unwrap().1, CacheOutcome::Compiled);
        assert_eq!(cache.load_or_compile(&engine(), wasm).unwrap().1, CacheOutcome::Hit);
        std::fs::set_permissions(dir.path().join("c"), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = cache.load_or_compile(&engine(), wasm).unwrap_err().to_string();
        assert!(e.contains("group or others may write it (mode 0777)") && e.contains("--no-cache"), "{e}");
    }

    /// An entry of other wasm bytes under this wasm's name (a copy of another plugin's
    /// entry), or a damaged one, is never loaded: it is replaced.
    #[test]
    fn an_entry_that_is_not_of_these_wasm_bytes_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::new(Some(dir.path().to_owned()));
        let (a, b) = (EMPTY, WITH_MODULE);
        cache.load_or_compile(&engine(), a).unwrap();
        cache.load_or_compile(&engine(), b).unwrap();
        let entry = |wasm: &[u8]| {
            dir.path().join("components").join(ComponentCache::entry_name(&engine(), &Sha256::digest(wasm)))
        };
        std::fs::copy(entry(b), entry(a)).unwrap();
        assert_eq!(cache.load_or_compile(&engine(), a).unwrap().1, CacheOutcome::Compiled);
        assert_eq!(cache.load_or_compile(&engine(), a).unwrap().1, CacheOutcome::Hit);
        // A torn write: the artifact cut short.
        let bytes = std::fs::read(entry(a)).unwrap();
        std::fs::write(entry(a), &bytes[..bytes.len() - 1]).unwrap();
        std::fs::set_permissions(entry(a), std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(cache.load_or_compile(&engine(), a).unwrap().1, CacheOutcome::Compiled);
        // An entry others may write is refused, not loaded.
        std::fs::set_permissions(entry(a), std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = cache.load_or_compile(&engine(), a).unwrap_err().to_string();
        assert!(e.contains("mode 0666"), "{e}");
    }
}
