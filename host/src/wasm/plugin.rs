//! A loaded plugin as a [`Udf`]: one `InstancePre`, a fresh instance per partition, and
//! a main-side instance for the pure functions (plan, buffers, merge, results).
//!
//! What a run leaves behind — the main-side instance (its linear memory), the log
//! budget, the interrupt counter — belongs to a copy made for that run
//! ([`Udf::for_run`]) and goes with it: a long-lived process (a notebook's `Context`, a
//! Dask worker, `serve`) that keeps the loaded plugin keeps only the compiled code.

use super::bindings::{UdfPlugin, UdfPluginPre, udf::plugin::types as wit};
use super::budget::{Budgeted, CallKind, Capped, LiftOutcome, TooMany, lift_counted};
use super::convert::*;
use super::fill::{GuestArrayData, GuestTile, ProcessParams, ProcessResults};
use super::state::{BudgetExceeded, HostState, Interrupted, LogOrigin, MemoryLimitExceeded, RunLog};
use super::{LoadError, LoadErrorKind, Shared, WIT_PACKAGE, WIT_VERSION};
use crate::dtype::DType;
use crate::log::escape_control;
use crate::udf::{
    BufferDecl, BufferViewMut, CallError, ClassSource, DataAccess, DatasetMeta, Description, InitContext,
    InstanceStats, MergeContext, NamedBuffer, Params, PartitionRunner, ResultEntry, ResultsContext, RunPlan, Tile,
    TileReadError, TileSource, Udf, UdfOrigin, UnreadError,
};
use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use wasmtime::component::{Component, ComponentExportIndex, Func, TypedFunc};
use wasmtime::{Store, UpdateDeadline};

/// The empty data of a tile lent as a host array. Empty, but aligned for every dtype:
/// `array_data` casts it to the dtype's elements, and a `&[]` of bytes is not aligned
/// for `f32` (bytemuck panics on that even for an empty slice).
fn no_tile_data() -> &'static [u8] {
    bytemuck::cast_slice::<u64, u8>(&[])
}

/// A wasm plugin.
pub struct WasmUdf {
    pub(super) shared: Arc<Shared>,
    pub(super) source: String,
    pub(super) path: std::path::PathBuf,
    /// SHA-256 of the component's bytes (hex).
    pub(super) sha256: String,
    pub(super) name: Arc<str>,
    pub(super) description: Description,
    pub(super) pre: UdfPluginPre<HostState>,
    /// The exports called directly: `process` (tiles read into the guest) and the data
    /// calls (results lifted within the memory budget).
    pub(super) exports: Exports<ComponentExportIndex>,
    /// Instance for the main-side calls, created on first use, dropped after a trap (and
    /// with this copy: one per run).
    pub(super) main: Mutex<Option<Instance>>,
    /// Bumped by [`Udf::interrupt`]: running calls of this copy's instances trap.
    pub(super) interrupts: Arc<std::sync::atomic::AtomicU64>,
    /// The plugin takes tiles as host arrays (it called `arrays.use-host-tiles` in
    /// `describe`): `process` gets them without data, through `arrays.tile`.
    pub(super) host_tiles: bool,
    /// The log budget of this copy's instances (one per run).
    pub(super) run_log: Arc<RunLog>,
    /// Whether this is a run's copy (which is not copied again).
    pub(super) run_copy: bool,
    /// `runner.load`, when the component is the Python runner (`wit/udf.wit`'s
    /// `udf-runner` world).
    pub(super) load_export: Option<ComponentExportIndex>,
    /// The class every instance loads first (`runner.load`), for a runner given one.
    pub(super) class: Option<Arc<ClassSource>>,
}

/// The exports of `udf` called without the bindings.
#[derive(Clone, Copy)]
pub(super) struct Exports<F> {
    /// Type-checked against [`ProcessParams`] and [`ProcessResults`].
    process: F,
    /// Type-checked against [`ExportResults`].
    export_buffers: F,
    /// Type-checked against [`MergeParams`] and [`MergeResults`].
    merge: F,
    /// Type-checked against [`ResultsParams`] and [`ResultsResults`].
    get_results: F,
}

type ExportResults = (Budgeted<Result<Capped<wit::NamedArrayResult>, wit::UdfError>>,);
type MergeParams<'a> = (wit::MergeContext<'a>, &'a [wit::NamedArrayParam<'a>], &'a [wit::NamedArrayParam<'a>]);
type MergeResults = ExportResults;
type ResultsParams<'a> = (wit::ResultsContext<'a>, &'a [wit::NamedArrayParam<'a>]);
type ResultsResults = (Budgeted<Result<Capped<wit::ResultEntry>, wit::UdfError>>,);

/// A store and the plugin instantiated in it.
pub(super) struct Instance {
    pub(super) store: Store<HostState>,
    plugin: UdfPlugin,
    exports: Exports<Func>,
}

impl WasmUdf {
    pub(super) fn new(
        shared: Arc<Shared>,
        path: &Path,
        sha256: String,
        component: &Component,
    ) -> Result<Self, LoadError> {
        let source = path.display().to_string();
        let err = |kind, message: String| LoadError { path: path.to_owned(), kind, message };
        let pre = shared
            .linker
            .instantiate_pre(component)
            .and_then(UdfPluginPre::new)
            .map_err(|e| err(LoadErrorKind::Interface, format!("cannot be linked: {e:#}")))?;
        let (major, minor, patch) = WIT_VERSION;
        let interface = format!("{WIT_PACKAGE}/udf@{major}.{minor}.{patch}");
        let udf_export = component.get_export_index(None, interface.as_str());
        let export = |name: &str| {
            udf_export
                .as_ref()
                .and_then(|udf| component.get_export_index(Some(udf), name))
                .ok_or_else(|| err(LoadErrorKind::Interface, format!("exports no udf.{name}")))
        };
        let exports = Exports {
            process: export("process")?,
            export_buffers: export("export-buffers")?,
            merge: export("merge")?,
            get_results: export("get-results")?,
        };
        let load_export = super::runner::load_export(component);
        let udf = WasmUdf {
            shared,
            source: source.clone(),
            path: path.to_owned(),
            sha256,
            name: Arc::from(source.as_str()),
            description: placeholder_description(),
            pre,
            exports,
            main: Mutex::new(None),
            interrupts: Arc::default(),
            host_tiles: false,
            run_log: Arc::default(),
            run_copy: false,
            load_export,
            class: None,
        };
        udf.described().map_err(|e| err(LoadErrorKind::Describe, format!("describe failed: {e}")))
    }

    /// This plugin with the description its `describe` returns (after `runner.load` for
    /// a runner given a class).
    pub(super) fn described(mut self) -> Result<Self, CallError> {
        let udf = &mut self;
        let description = udf
            .with_main(CallKind::Declaration, |plugin, store| plugin.udf_plugin_udf().call_describe(store).map(Ok))
            .and_then(description_from_wit)?;
        udf.name = Arc::from(description.name.as_str());
        udf.description = description;
        udf.host_tiles = udf
            .main
            .lock()
            .ok()
            .and_then(|main| main.as_ref().map(|i| i.store.data().arrays.host_tiles))
            .unwrap_or(false);
        // The loaded plugin keeps no instance: runs make their own (`for_run`).
        udf.release_main();
        Ok(self)
    }

    /// A copy for one run: the same compiled plugin, with its own main-side instance, log
    /// budget and interrupt counter.
    fn copy_for_run(&self) -> WasmUdf {
        WasmUdf {
            shared: self.shared.clone(),
            source: self.source.clone(),
            path: self.path.clone(),
            sha256: self.sha256.clone(),
            name: self.name.clone(),
            description: self.description.clone(),
            pre: self.pre.clone(),
            exports: self.exports,
            main: Mutex::new(None),
            interrupts: Arc::default(),
            host_tiles: self.host_tiles,
            run_log: Arc::default(),
            run_copy: true,
            load_export: self.load_export,
            class: self.class.clone(),
        }
    }

    /// Give up the main-side instance: a runner's is kept for reuse
    /// ([`Self::keep_for_reuse`]), any other dropped (its memory goes back to the
    /// runtime's budget).
    fn release_main(&self) {
        let main = self.main.lock().ok().and_then(|mut main| main.take());
        if let Some(instance) = main {
            self.keep_for_reuse(instance);
        }
    }

    /// An instance for a partition (`None`: the main side): a runner's kept instance of
    /// this class when there is one ([`Self::reusable_instance`]), else a new one. If
    /// making it fails while other runner instances wait idle, they are given up (their
    /// memory and pool slots) and it is tried once more.
    fn instance(&self, partition: Option<usize>) -> Result<Instance, CallError> {
        if let Some(instance) = self.reusable_instance(partition) {
            return Ok(instance);
        }
        match self.instantiate(partition) {
            Err(_) if self.release_idle_runners() => self.instantiate(partition),
            made => made,
        }
    }

    fn instantiate(&self, partition: Option<usize>) -> Result<Instance, CallError> {
        let origin = LogOrigin { plugin: self.name.clone(), partition };
        let state = HostState::new(&self.shared, origin, self.interrupts.clone(), self.run_log.clone());
        let mut store = Store::new(&self.shared.engine, state);
        store.limiter(|s| s);
        if self.shared.epochs {
            // Every tick, check the call's deadline and whether the runtime or the plugin
            // was interrupted.
            let interrupts = self.shared.interrupts.clone();
            store.epoch_deadline_callback(move |ctx| {
                let state = ctx.data();
                if state.interrupts(&interrupts) != state.interrupt_generation {
                    return Err(Interrupted.into());
                }
                if Instant::now() >= state.call_deadline {
                    return Ok(UpdateDeadline::Interrupt);
                }
                Ok(UpdateDeadline::Continue(1))
            });
        }
        arm(&self.shared, &mut store);
        let instantiated = self.pre.instance_pre().instantiate(&mut store).and_then(|instance| {
            let plugin = UdfPlugin::new(&mut store, &instance)?;
            let func = |store: &mut Store<HostState>, index| {
                instance
                    .get_func(&mut *store, index)
                    .ok_or_else(|| wasmtime::format_err!("a udf export is not a function"))
            };
            let exports = Exports {
                process: func(&mut store, self.exports.process)?,
                export_buffers: func(&mut store, self.exports.export_buffers)?,
                merge: func(&mut store, self.exports.merge)?,
                get_results: func(&mut store, self.exports.get_results)?,
            };
            exports.process.typed::<ProcessParams<'_>, ProcessResults>(&store)?;
            exports.export_buffers.typed::<(), ExportResults>(&store)?;
            exports.merge.typed::<MergeParams<'_>, MergeResults>(&store)?;
            exports.get_results.typed::<ResultsParams<'_>, ResultsResults>(&store)?;
            let load = match (&self.class, self.load_export) {
                (Some(_), Some(index)) => Some(func(&mut store, index)?),
                _ => None,
            };
            Ok((plugin, exports, load))
        });
        let (plugin, exports, load) = instantiated.map_err(|e| trap(&self.shared, e, Vec::new(), CallKind::Control))?;
        let mut instance = Instance { store, plugin, exports };
        instance.store.data_mut().stats.instances = 1;
        if let Some(class) = &self.class {
            super::runner::load_class(&self.shared, &mut instance, load, class)?;
        }
        Ok(instance)
    }

    /// Call into the main-side instance; a trap discards it so the next call starts fresh.
    fn with_main<R>(
        &self,
        kind: CallKind,
        f: impl FnOnce(&UdfPlugin, &mut Store<HostState>) -> wasmtime::Result<Result<R, wit::UdfError>>,
    ) -> Result<R, CallError> {
        self.with_main_instance(|shared, instance| instance.call(shared, kind, f))
    }

    /// Run `f` on the main-side instance (made on first use); a trap discards it.
    fn with_main_instance<R>(
        &self,
        f: impl FnOnce(&Shared, &mut Instance) -> Result<R, CallError>,
    ) -> Result<R, CallError> {
        let mut main = self.main.lock().map_err(|_| CallError::internal("main instance lock poisoned"))?;
        if main.is_none() {
            *main = Some(self.instance(None)?);
        }
        let instance = main.as_mut().ok_or_else(|| CallError::internal("no main instance"))?;
        let result = f(&self.shared, instance);
        // A trap leaves the instance broken; host arrays left behind by a pure main-side
        // call must not leak into the next one: start afresh in both cases.
        if matches!(result, Err(CallError::Trap { .. })) || instance.store.data().arrays.live > 0 {
            *main = None;
        }
        result
    }

    fn access(&self) -> DataAccess {
        self.description.data_access
    }
}

impl Instance {
    fn call<R>(
        &mut self,
        shared: &Shared,
        kind: CallKind,
        f: impl FnOnce(&UdfPlugin, &mut Store<HostState>) -> wasmtime::Result<Result<R, wit::UdfError>>,
    ) -> Result<R, CallError> {
        self.call_raw(shared, kind, f).map_err(|e| self.trap(shared, e))?.map_err(error_from_wit)
    }

    /// A call, counted in the statistics, with wasmtime's error as it is (the caller
    /// may look inside it before it becomes a [`CallError`]). `kind` sets what the call
    /// may return (its hostcall fuel).
    pub(super) fn call_raw<R>(
        &mut self,
        shared: &Shared,
        kind: CallKind,
        f: impl FnOnce(&UdfPlugin, &mut Store<HostState>) -> wasmtime::Result<Result<R, wit::UdfError>>,
    ) -> wasmtime::Result<Result<R, wit::UdfError>> {
        arm(shared, &mut self.store);
        self.store.data_mut().call_kind = kind;
        self.store.set_hostcall_fuel(kind.fuel(shared.options.max_memory));
        let started = Instant::now();
        let outcome = f(&self.plugin, &mut self.store);
        let state = self.store.data_mut();
        state.stats.calls += 1;
        state.stats.call_seconds += started.elapsed().as_secs_f64();
        outcome
    }

    /// A data call (`export-buffers`, `merge`, `get-results`): its results are lifted
    /// within the run's memory budget, and `convert` runs while the reservation is held.
    fn call_data<R, T>(
        &mut self,
        shared: &Shared,
        f: impl FnOnce(&Exports<Func>, &mut Store<HostState>) -> wasmtime::Result<Budgeted<Result<R, wit::UdfError>>>,
        convert: impl FnOnce(R) -> Result<T, CallError>,
    ) -> Result<T, CallError> {
        let exports = self.exports;
        let fuel = CallKind::Data.fuel(shared.options.max_memory);
        let (outcome, lift) = lift_counted(&shared.budget, fuel, shared.options.max_memory, || {
            self.call_raw(shared, CallKind::Data, |_, store| f(&exports, store).map(|Budgeted(r)| r))
        });
        let returned = outcome.map_err(|e| self.trap_lifting(shared, e, &lift))?.map_err(error_from_wit)?;
        let converted = convert(returned);
        drop(lift);
        converted
    }

    /// A trap of this instance as a [`CallError`], with its last log lines.
    pub(super) fn trap(&self, shared: &Shared, error: wasmtime::Error) -> CallError {
        trap(shared, error, self.store.data().log_tail(), self.store.data().call_kind)
    }

    /// A trap of a data call: when lifting its results ran out of fuel, say which limit.
    fn trap_lifting(&self, shared: &Shared, error: wasmtime::Error, lift: &LiftOutcome) -> CallError {
        if !is_fuel_exhausted(&error) {
            return self.trap(shared, error);
        }
        let why = if lift.limited_by_budget {
            format!(
                "the run's total memory budget had room for {} MiB (--max-memory-total {} MiB)",
                lift.allowed >> 20,
                shared.budget.limit() >> 20
            )
        } else {
            format!("a call returns at most what the plugin's memory holds ({} MiB)", lift.allowed >> 20)
        };
        CallError::Trap {
            message: format!("returned more data than the host accepts: {why}"),
            log_tail: self.store.data().log_tail(),
        }
    }
}

/// Whether wasmtime refused to lift more of a call's values (its hostcall fuel ran out).
fn is_fuel_exhausted(error: &wasmtime::Error) -> bool {
    format!("{error:#}").contains("fuel allocated for hostcalls has been exhausted")
}

/// Start the clock of a call: its deadline, the interrupt generation, the next check.
fn arm(shared: &Shared, store: &mut Store<HostState>) {
    let state = store.data_mut();
    state.call_deadline = Instant::now() + shared.options.timeout;
    state.interrupt_generation = state.interrupts(&shared.interrupts);
    if shared.epochs {
        store.set_epoch_deadline(1);
    }
}

/// Describe a trap for a human: the reason first, then where (the plugin's function
/// names demangled, control characters escaped).
fn trap(shared: &Shared, error: wasmtime::Error, log_tail: Vec<String>, kind: CallKind) -> CallError {
    let chain = format!("{error:#}");
    let message = if error.downcast_ref::<Interrupted>().is_some() {
        "interrupted".to_owned()
    } else if let Some(budget) = error.downcast_ref::<BudgetExceeded>() {
        budget.to_string()
    } else if let Some(limit) = error.downcast_ref::<MemoryLimitExceeded>() {
        limit.to_string()
    } else if let Some(too_many) = error.downcast_ref::<TooMany>() {
        too_many.to_string()
    } else if let Some(code) = error.downcast_ref::<wasmtime::Trap>() {
        match code {
            wasmtime::Trap::Interrupt => {
                format!("timed out: the call ran longer than --timeout {:.1} s", shared.options.timeout.as_secs_f64())
            }
            wasmtime::Trap::StackOverflow => "stack overflow".to_owned(),
            wasmtime::Trap::MemoryOutOfBounds => {
                "trapped: out-of-bounds memory access (a bug in the plugin, often its stack overflowing)".to_owned()
            }
            wasmtime::Trap::UnreachableCodeReached => "trapped: unreachable code (a panic or abort)".to_owned(),
            other => format!("trapped: {other}"),
        }
    } else if chain.contains("forcing trap when growing memory") || chain.contains("growing memory") {
        format!("exceeded the memory limit of {} MiB (--max-memory)", shared.options.max_memory >> 20)
    } else if is_fuel_exhausted(&error) {
        format!(
            "returned more data than the host accepts from {} ({} MiB at most)",
            kind.returns(),
            kind.fuel(shared.options.max_memory) >> 20
        )
    } else {
        // The innermost cause says what went wrong (e.g. a full resource table); the outer
        // layers are wasmtime's "error while executing at wasm backtrace" wrapping.
        let cause = error.root_cause().to_string();
        format!("trapped: {}", escape_control(cause.lines().next().unwrap_or("unknown error")))
    };
    let backtrace = error.downcast_ref::<wasmtime::WasmBacktrace>().map(|bt| {
        let names: Vec<String> =
            bt.frames().iter().map(|f| f.func_name().map_or_else(|| "<unnamed>".to_owned(), function_name)).collect();
        // The plugin's own frames, not the panic and abort machinery of its runtime.
        let own: Vec<&String> = names.iter().filter(|n| !is_runtime_frame(n)).take(3).collect();
        if own.is_empty() {
            names.iter().take(4).cloned().collect::<Vec<_>>()
        } else {
            own.into_iter().cloned().collect()
        }
        .join(" <- ")
    });
    let backtrace = backtrace.filter(|s| !s.is_empty());
    let message = match backtrace {
        Some(bt) => format!("{message} (in {bt})"),
        None => message,
    };
    CallError::Trap { message, log_tail }
}

/// Whether a (demangled) function is the language runtime's, not the plugin's: Rust's
/// standard library and panic machinery, the bindings' glue, wasi-libc's abort.
fn is_runtime_frame(name: &str) -> bool {
    let name = name.trim_start_matches('<');
    const RUNTIME: [&str; 10] = [
        "std::",
        "core::",
        "alloc::",
        "__rust",
        "__rustc::",
        "rust_panic",
        "rust_begin_unwind",
        "abort",
        "wit_bindgen",
        "panic_abort::",
    ];
    RUNTIME.iter().any(|p| name.starts_with(p))
        || name.contains("::_export_")
        || name.starts_with("cabi_")
        || name == "unnamed>"
}

/// A function name of a plugin's name section, for a message: demangled (Rust's legacy
/// and v0 schemes, without the hash) and escaped (the section is the plugin's text).
fn function_name(raw: &str) -> String {
    let name = format!("{:#}", rustc_demangle::demangle(raw));
    escape_control(&name).into_owned()
}

fn placeholder_description() -> Description {
    Description {
        name: String::new(),
        version: String::new(),
        summary: String::new(),
        params: Vec::new(),
        methods: Vec::new(),
        input_dtype: crate::udf::DTypePreference::Native,
        tiling: Default::default(),
        custom_merge: false,
        custom_results: false,
        main_preprocess: false,
        data_access: DataAccess::Typed,
    }
}

impl Drop for WasmUdf {
    /// A run's copy ends with its run: a runner's main-side instance is kept for the next.
    fn drop(&mut self) {
        self.release_main();
    }
}

impl Udf for WasmUdf {
    fn description(&self) -> &Description {
        &self.description
    }

    /// A plugin that takes its tiles as host arrays (`use-host-tiles`) gets them lent
    /// from the file mapping, as a native built-in does: its tiles need not fit the
    /// ~1 MiB pieces of a copy into guest memory.
    fn reads_in_place(&self) -> bool {
        self.host_tiles
    }

    /// Host tiles of a file's integers are lent unconverted, as a view the plugin sees
    /// in the input dtype ([`crate::arrays::Converting`]): reductions convert in
    /// registers instead of through a converted copy of the tile.
    fn converts_on_read(&self) -> bool {
        self.host_tiles
    }

    fn source(&self) -> &str {
        &self.source
    }

    fn origin(&self) -> UdfOrigin {
        if let Some(class) = &self.class {
            return UdfOrigin::PythonClass {
                runner: self.path.clone(),
                runner_sha256: self.sha256.clone(),
                class: ClassSource::clone(class),
            };
        }
        UdfOrigin::Wasm { path: self.path.clone(), sha256: self.sha256.clone() }
    }

    /// Stop the calls of this copy's instances running now (not those of other plugins
    /// of the runtime, nor of this plugin's copies for other runs).
    fn interrupt(&self) {
        self.interrupts.fetch_add(1, Ordering::SeqCst);
    }

    fn for_run(&self) -> Option<Arc<dyn Udf>> {
        (!self.run_copy).then(|| Arc::new(self.copy_for_run()) as Arc<dyn Udf>)
    }

    fn plan(&self, params: &Params, dataset: &DatasetMeta) -> Result<RunPlan, CallError> {
        let params = params_to_wit(&params.0, self.access());
        let meta = dataset_to_wit(dataset);
        self.with_main(CallKind::Declaration, |p, s| p.udf_plugin_udf().call_plan(s, &params, meta)).map(plan_from_wit)
    }

    fn result_buffers(&self, params: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>, CallError> {
        let params = params_to_wit(&params.0, self.access());
        let meta = dataset_to_wit(dataset);
        let decls =
            self.with_main(CallKind::Declaration, |p, s| p.udf_plugin_udf().call_result_buffers(s, &params, meta))?;
        decls.into_iter().map(buffer_decl_from_wit).collect()
    }

    fn start(&self, ctx: InitContext<'_>) -> Result<Box<dyn PartitionRunner + '_>, CallError> {
        let partition = ctx.partition.map(|p| p.index);
        let mut instance = self.instance(partition)?;
        let params = params_to_wit(&ctx.params.0, self.access());
        let slices = ctx.partition.map(|p| scheme_to_wit(&p.tiling)).unwrap_or_default();
        let init = wit::InitContext {
            params: &params,
            dataset: dataset_to_wit(ctx.dataset),
            partition: ctx.partition.map(|p| partition_to_wit(p, &slices)),
        };
        instance.call(&self.shared, CallKind::Control, |p, s| p.udf_plugin_udf().call_init(s, init))?;
        Ok(Box::new(WasmPartition {
            udf: self,
            instance: ManuallyDrop::new(instance),
            input_dtype: ctx.dataset.input_dtype,
            exported: false,
        }))
    }

    fn merge(
        &self,
        ctx: MergeContext<'_>,
        dest: &mut [BufferViewMut<'_>],
        src: &[NamedBuffer],
    ) -> Result<(), CallError> {
        let access = self.access();
        let params = params_to_wit(&ctx.params.0, access);
        let slices = scheme_to_wit(&ctx.partition.tiling);
        let merge_ctx = wit::MergeContext {
            params: &params,
            dataset: dataset_to_wit(ctx.dataset),
            partition: partition_to_wit(ctx.partition, &slices),
            valid_nav_mask: ctx.valid_nav_mask,
        };
        let dest_wit: Vec<wit::NamedArrayParam<'_>> = dest
            .iter()
            .map(|d| wit::NamedArrayParam {
                name: d.name,
                data: wit::NdarrayParam {
                    dtype: dtype_to_wit(d.dtype),
                    shape: u64s(&d.shape),
                    data: array_data(d.dtype, d.bytes, access),
                },
            })
            .collect();
        let src_wit: Vec<wit::NamedArrayParam<'_>> =
            src.iter().map(|b| wit::NamedArrayParam { name: &b.name, data: ndarray_param(&b.array, access) }).collect();
        let merge = |exports: &Exports<Func>, store: &mut Store<HostState>| {
            // SAFETY: `instantiate` type-checked `merge` against exactly these types.
            let merge = unsafe { TypedFunc::<MergeParams<'_>, MergeResults>::new_unchecked(exports.merge) };
            merge.call(store, (merge_ctx, &dest_wit, &src_wit)).map(|(r,)| r)
        };
        self.with_main_instance(|shared, instance| {
            instance.call_data(shared, merge, |Capped(merged)| {
                if merged.len() != dest.len() {
                    return Err(CallError::Contract(format!(
                        "merge returned {} buffers for {} given",
                        merged.len(),
                        dest.len()
                    )));
                }
                let slots: HashMap<&str, usize> = dest.iter().enumerate().map(|(i, d)| (d.name, i)).collect();
                let mut filled = vec![false; dest.len()];
                let mut arrays = Vec::with_capacity(dest.len());
                for out in merged {
                    let shown = escape_control(&out.name).into_owned();
                    let Some(&i) = slots.get(out.name.as_str()) else {
                        return Err(CallError::Contract(format!("merge returned a buffer '{shown}' it was not given")));
                    };
                    if std::mem::replace(&mut filled[i], true) {
                        return Err(CallError::Contract(format!("merge returned buffer '{shown}' twice")));
                    }
                    let array = ndarray_from_wit(out.data, &format!("merged buffer '{shown}'"))?;
                    let slot = &dest[i];
                    if array.dtype() != slot.dtype || array.shape() != slot.shape.as_slice() {
                        return Err(CallError::Contract(format!(
                            "merge returned buffer '{shown}' as {} {:?}, expected {} {:?}",
                            array.dtype(),
                            array.shape(),
                            slot.dtype,
                            slot.shape
                        )));
                    }
                    arrays.push((i, array));
                }
                Ok(arrays)
            })
        })
        .map(|arrays| {
            // Only a merge that returned every buffer well changes the merged state.
            for (i, array) in arrays {
                dest[i].bytes.copy_from_slice(array.bytes());
            }
        })
    }

    fn get_results(&self, ctx: ResultsContext<'_>, buffers: &[NamedBuffer]) -> Result<Vec<ResultEntry>, CallError> {
        let access = self.access();
        let params = params_to_wit(&ctx.params.0, access);
        let results_ctx = wit::ResultsContext {
            params: &params,
            dataset: dataset_to_wit(ctx.dataset),
            valid_nav_mask: ctx.valid_nav_mask,
            roi: ctx.roi,
        };
        let bufs: Vec<wit::NamedArrayParam<'_>> = buffers
            .iter()
            .map(|b| wit::NamedArrayParam { name: &b.name, data: ndarray_param(&b.array, access) })
            .collect();
        let get_results = |exports: &Exports<Func>, store: &mut Store<HostState>| {
            // SAFETY: `instantiate` type-checked `get-results` against exactly these types.
            let get_results =
                unsafe { TypedFunc::<ResultsParams<'_>, ResultsResults>::new_unchecked(exports.get_results) };
            get_results.call(store, (results_ctx, &bufs)).map(|(r,)| r)
        };
        self.with_main_instance(|shared, instance| {
            instance.call_data(shared, get_results, |Capped(entries)| {
                entries
                    .into_iter()
                    .map(|e| {
                        let name = escape_control(&e.name).into_owned();
                        let array = ndarray_from_wit(e.data, &format!("result '{name}'"))?;
                        Ok(ResultEntry { name: e.name, array, valid: e.valid })
                    })
                    .collect()
            })
        })
    }
}

/// A tile's array shape: `[frames, ..sig]`.
fn tile_shape(tile: &Tile<'_>) -> Vec<usize> {
    std::iter::once(tile.frames).chain(tile.sig.shape.iter().copied()).collect()
}

/// One partition's instance.
struct WasmPartition<'a> {
    udf: &'a WasmUdf,
    /// Taken out once, in `drop`: kept for the next partition or dropped.
    instance: ManuallyDrop<Instance>,
    /// `export-buffers` returned the partition's buffers: the instance ended well.
    exported: bool,
    /// The run's input dtype: what tiles of stored integers are seen as (host tiles
    /// only, which [convert on read](Udf::converts_on_read)).
    input_dtype: DType,
}

impl WasmPartition<'_> {
    /// A `process` call, counted in the instance's statistics.
    fn timed_process(
        &mut self,
        f: impl FnOnce(&UdfPlugin, &mut Store<HostState>) -> wasmtime::Result<Result<(), wit::UdfError>>,
    ) -> wasmtime::Result<Result<(), wit::UdfError>> {
        let started = Instant::now();
        let result = self.instance.call_raw(&self.udf.shared, CallKind::Control, f);
        let stats = &mut self.instance.store.data_mut().stats;
        stats.process_calls += 1;
        stats.process_seconds += started.elapsed().as_secs_f64();
        result
    }

    /// A trap or typed error of a `process` call as a [`CallError`].
    fn call_error(&self, outcome: wasmtime::Result<Result<(), wit::UdfError>>) -> Result<(), CallError> {
        outcome.map_err(|e| self.instance.trap(&self.udf.shared, e))?.map_err(error_from_wit)
    }
}

impl Drop for WasmPartition<'_> {
    fn drop(&mut self) {
        // SAFETY: `instance` is not used after this line; `drop` runs once.
        let instance = unsafe { ManuallyDrop::take(&mut self.instance) };
        if self.exported {
            self.udf.keep_for_reuse(instance);
        }
    }
}

impl PartitionRunner for WasmPartition<'_> {
    fn preprocess(&mut self) -> Result<(), CallError> {
        self.instance.call(&self.udf.shared, CallKind::Control, |p, s| p.udf_plugin_udf().call_preprocess(s))
    }

    fn process(&mut self, tile: &Tile<'_>) -> Result<(), CallError> {
        let host_tiles = self.udf.host_tiles;
        // Host tiles may come as the file's integers (`converts_on_read`): the plugin
        // sees them as the input dtype.
        let seen_dtype = if host_tiles { self.input_dtype } else { tile.dtype };
        if host_tiles {
            let shape = tile_shape(tile);
            // SAFETY: `tile.data` outlives this call, and `end_call` below revokes the
            // lease before we return.
            unsafe { self.instance.store.data_mut().arrays.lend_tile(tile.dtype, seen_dtype, &shape, tile.data) }
                .map_err(|e| CallError::internal(e.to_string()))?;
        }
        let data: &[u8] = if host_tiles { no_tile_data() } else { tile.data };
        let wit_tile = wit::Tile {
            origin: tile.origin,
            frames: tile.frames as u64,
            scheme_index: tile.scheme_index as u32,
            sig: sig_slice_to_wit(tile.sig),
            true_nav_indices: tile.true_nav_indices,
            data: array_data(seen_dtype, data, self.udf.access()),
        };
        let outcome = self.timed_process(|p, s| p.udf_plugin_udf().call_process(s, wit_tile));
        self.instance.store.data_mut().arrays.end_call();
        self.call_error(outcome)
    }

    fn reads_tiles(&self) -> bool {
        true
    }

    fn process_unread(&mut self, tile: &Tile<'_>, source: &dyn TileSource) -> Result<(), UnreadError> {
        if self.udf.host_tiles {
            // Read the tile into an array of the instance (the one copy), then pass it
            // as a host array.
            let arrays = &mut self.instance.store.data_mut().arrays;
            let array =
                arrays.tile_buffer(tile.dtype, &tile_shape(tile)).map_err(|e| CallError::internal(e.to_string()))?;
            {
                let dense = array.dense("tile").map_err(|e| CallError::internal(e.to_string()))?;
                let mut bytes = dense.storage.write("tile").map_err(|e| CallError::internal(e.to_string()))?;
                source.read_into(&mut bytes).map_err(UnreadError::Read)?;
            }
            arrays.own_tile(array);
            let wit_tile = wit::Tile {
                origin: tile.origin,
                frames: tile.frames as u64,
                scheme_index: tile.scheme_index as u32,
                sig: sig_slice_to_wit(tile.sig),
                true_nav_indices: tile.true_nav_indices,
                data: array_data(tile.dtype, no_tile_data(), self.udf.access()),
            };
            let outcome = self.timed_process(|p, s| p.udf_plugin_udf().call_process(s, wit_tile));
            self.instance.store.data_mut().arrays.end_call();
            return Ok(self.call_error(outcome)?);
        }
        let bytes = tile.frames * tile.sig.len() * tile.dtype.size();
        let guest_tile = GuestTile {
            origin: tile.origin,
            frames: tile.frames as u64,
            scheme_index: tile.scheme_index as u32,
            sig: sig_slice_to_wit(tile.sig),
            true_nav_indices: tile.true_nav_indices,
            data: GuestArrayData::new(tile.dtype, self.udf.access(), bytes, source),
        };
        // SAFETY: `instantiate` type-checked `process` against exactly these types.
        let process =
            unsafe { TypedFunc::<ProcessParams<'_>, ProcessResults>::new_unchecked(self.instance.exports.process) };
        let outcome = self.timed_process(|_, s| process.call(s, (guest_tile,)).map(|(result,)| result));
        // A read that failed inside the lowering is the dataset's failure, not the plugin's.
        let outcome = match outcome {
            Err(e) => match e.downcast::<TileReadError>() {
                Ok(read) => return Err(UnreadError::Read(read)),
                Err(e) => Err(e),
            },
            other => other,
        };
        Ok(self.call_error(outcome)?)
    }

    fn stats(&self) -> Option<InstanceStats> {
        let state = self.instance.store.data();
        Some(InstanceStats {
            peak_memory: state.limits.peak_memory,
            peak_arrays: state.arrays.peak_live,
            live_arrays: state.arrays.live,
            peak_array_bytes: state.arrays.peak_bytes(),
            ..state.stats
        })
    }

    fn postprocess(&mut self) -> Result<(), CallError> {
        self.instance.call(&self.udf.shared, CallKind::Control, |p, s| p.udf_plugin_udf().call_postprocess(s))
    }

    fn export(&mut self) -> Result<Vec<NamedBuffer>, CallError> {
        let export = |exports: &Exports<Func>, store: &mut Store<HostState>| {
            // SAFETY: `instantiate` type-checked `export-buffers` against exactly these types.
            let export = unsafe { TypedFunc::<(), ExportResults>::new_unchecked(exports.export_buffers) };
            export.call(store, ()).map(|(r,)| r)
        };
        let buffers = self.instance.call_data(&self.udf.shared, export, |Capped(arrays)| {
            arrays
                .into_iter()
                .map(|a| {
                    let array = ndarray_from_wit(a.data, &format!("buffer '{}'", escape_control(&a.name)))?;
                    Ok(NamedBuffer { name: a.name, array })
                })
                .collect()
        })?;
        self.exported = true;
        Ok(buffers)
    }
}
