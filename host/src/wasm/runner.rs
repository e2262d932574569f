//! The Python runner of LiberTEM UDF classes (`wit/udf.wit`'s `udf-runner` world): a
//! plugin that exports `runner.load` besides `udf`. [`WasmUdf::with_class`] makes a
//! UDF of the runner and one class; each of its instances loads the class's source
//! before any other call, so `describe` and everything after it are the class's.

use super::bindings::udf::plugin::types as wit;
use super::budget::CallKind;
use super::convert::error_from_wit;
use super::plugin::{Instance, WasmUdf};
use super::state::LogOrigin;
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

/// Runner instances that have loaded a class, kept between the partitions and the runs
/// of that class: making one costs ~10-15 ms (the runner's Python loading the class, the
/// copy-on-write of its memory image), which a class's run paid for every partition.
/// Only the runner's: its `init` makes a fresh instance of the class for every
/// partition, as LiberTEM gives each partition its own copy of the UDF, and the class's
/// module stays loaded, as it does in a LiberTEM worker process. A plugin gets a fresh
/// instance per partition (the contract).
///
/// At most `cap` instances wait (the runtime's `idle_runners`), the oldest dropped
/// first; one is kept only when it holds no host arrays (those of a partition never
/// outlive it) and its last call did not trap. While waiting, an instance keeps its
/// linear memory, counted in `--max-memory-total`, and a pool slot: when a new instance
/// (of any plugin) cannot be made, the idle ones are given up and it is tried again
/// (`WasmUdf::instance`).
pub(super) struct RunnerPool {
    /// Idle instances, oldest first, by [`WasmUdf::pool_key`].
    idle: Vec<(String, Instance)>,
    cap: usize,
}

impl RunnerPool {
    pub(super) fn new(cap: usize) -> Self {
        RunnerPool { idle: Vec::new(), cap }
    }

    /// The most recently kept instance for `key`.
    fn take(&mut self, key: &str) -> Option<Instance> {
        let at = self.idle.iter().rposition(|(k, _)| k == key)?;
        Some(self.idle.remove(at).1)
    }

    /// Every idle instance (to be dropped outside the lock).
    fn drain(&mut self) -> Vec<Instance> {
        self.idle.drain(..).map(|(_, instance)| instance).collect()
    }

    /// Keep `instance`; returns the one it displaces (to be dropped outside the lock).
    fn put(&mut self, key: String, instance: Instance) -> Option<Instance> {
        if self.cap == 0 {
            return Some(instance);
        }
        let displaced = (self.idle.len() >= self.cap).then(|| self.idle.remove(0).1);
        self.idle.push((key, instance));
        displaced
    }
}

impl WasmUdf {
    /// Which pooled instances this UDF may take: the runner's bytes and the class's
    /// document (its source and keyword arguments); `None` for a plugin.
    fn pool_key(&self) -> Option<String> {
        self.class.as_ref().map(|class| format!("{}:{}", self.sha256, class.sha256))
    }

    /// A kept instance of this class ([`RunnerPool`]), made ready for a partition
    /// (`None`: the main side): its log names the partition and counts afresh, its
    /// calls answer this copy's interrupts and log budget, its statistics restart.
    pub(super) fn reusable_instance(&self, partition: Option<usize>) -> Option<Instance> {
        let key = self.pool_key()?;
        let mut instance = self.shared.runners.lock().ok()?.take(&key)?;
        let origin = LogOrigin { plugin: self.name.clone(), partition };
        instance.store.data_mut().begin_partition(origin, self.interrupts.clone(), self.run_log.clone());
        Some(instance)
    }

    /// Drop every idle runner instance of the runtime (their memory goes back to the
    /// budget, their slots to the instance pool); whether there were any.
    pub(super) fn release_idle_runners(&self) -> bool {
        let idle = self.shared.runners.lock().map(|mut pool| pool.drain()).unwrap_or_default();
        !idle.is_empty()
    }

    /// Keep a runner's instance whose partition (or main-side work) ended well for the
    /// next ([`RunnerPool`]); anything else is dropped.
    pub(super) fn keep_for_reuse(&self, instance: Instance) {
        let Some(key) = self.pool_key() else { return };
        if instance.store.data().arrays.live > 0 {
            return;
        }
        let displaced = self.shared.runners.lock().ok().and_then(|mut pool| pool.put(key, instance));
        drop(displaced);
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

/// Where the Python runner is: `$UDF_HOST_RUNNER`, beside the executable, where the
/// repository builds it (`target/polyglot/runner/`, next to `target/debug/`), or the
/// newest one the Python package built into the cache (`<cache>/runners/`, see
/// [`newest_cached_runner`]).
pub fn runner_path() -> Result<PathBuf, String> {
    let mut candidates = Vec::new();
    if let Some(path) = std::env::var_os("UDF_HOST_RUNNER") {
        candidates.push(PathBuf::from(path));
    }
    if let Some(dir) = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_owned)) {
        candidates.push(dir.join(RUNNER_FILE));
        candidates.push(dir.join("../polyglot/runner").join(RUNNER_FILE));
    }
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return Ok(found.clone());
    }
    let cached = super::ComponentCache::default_dir().map(|dir| dir.join("runners"));
    if let Some(found) = cached.as_deref().and_then(newest_cached_runner) {
        return Ok(found);
    }
    let looked: Vec<String> = candidates.iter().chain(&cached).map(|p| p.display().to_string()).collect();
    Err(format!(
        "udf-host's Python runner ({RUNNER_FILE}) is not built: build it with scripts/polyglot/runner.sh (or let the \
         Python package build it: `python -c \"import udf_host._runner.build as b; b.ensure_runner()\"`), or set \
         UDF_HOST_RUNNER to its path (looked in: {})",
        looked.join(", ")
    ))
}

/// The newest `udf-runner-*.wasm` in `folder` (where the Python package builds the
/// runner on first use, named by the hash of its sources) that is this user's own and
/// that nobody else can write (the runner's results are trusted as the class's, as the
/// package trusts them only from such a cache).
pub fn newest_cached_runner(folder: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(folder).ok()?;
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("udf-runner-") && name.ends_with(".wasm")
        })
        .filter_map(|e| Some((e.path(), e.metadata().ok()?)))
        .filter(|(_, meta)| meta.is_file() && private_to_this_user(meta))
        .max_by_key(|(_, meta)| meta.modified().ok())
        .map(|(path, _)| path)
}

#[cfg(unix)]
fn private_to_this_user(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    meta.uid() == rustix::process::geteuid().as_raw() && meta.mode() & 0o022 == 0
}

#[cfg(not(unix))]
fn private_to_this_user(_meta: &std::fs::Metadata) -> bool {
    true
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

#[cfg(test)]
mod tests {
    use super::newest_cached_runner;
    use std::time::{Duration, SystemTime};

    #[test]
    fn the_newest_runner_of_the_cache_is_found_and_others_files_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, age_s: u64| {
            let path = dir.path().join(name);
            std::fs::write(&path, b"\0asm").unwrap();
            let when = SystemTime::now() - Duration::from_secs(age_s);
            std::fs::File::options().write(true).open(&path).unwrap().set_modified(when).unwrap();
            path
        };
        assert_eq!(newest_cached_runner(dir.path()), None);
        write("udf-runner-0123.wasm", 300);
        let newest = write("udf-runner-4567.wasm", 100);
        write("udf-runner-89ab.wasm.tmp", 0);
        write("other.wasm", 0);
        assert_eq!(newest_cached_runner(dir.path()), Some(newest.clone()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            // One that others can write is never taken (anyone could have swapped it).
            let open = write("udf-runner-cdef.wasm", 10);
            std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).unwrap();
            assert_eq!(newest_cached_runner(dir.path()), Some(newest));
        }
        assert_eq!(newest_cached_runner(&dir.path().join("missing")), None);
    }
}
