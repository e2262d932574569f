//! A loaded plugin as a [`Udf`]: one `InstancePre`, a fresh instance per partition, and
//! a main-side instance for the pure functions (plan, buffers, merge, results).

use super::bindings::{UdfPlugin, UdfPluginPre, udf::plugin::types as wit};
use super::convert::*;
use super::fill::{GuestArrayData, GuestTile, ProcessParams, ProcessResults};
use super::state::{HostState, LogOrigin};
use super::{LoadError, LoadErrorKind, Shared, WIT_PACKAGE, WIT_VERSION};
use crate::udf::{
    BufferDecl, BufferViewMut, CallError, DataAccess, DatasetMeta, Description, InitContext, InstanceStats,
    MergeContext, NamedBuffer, Params, PartitionRunner, ResultEntry, ResultsContext, RunPlan, Tile, TileReadError,
    TileSource, Udf, UdfOrigin, UnreadError,
};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use wasmtime::component::{Component, ComponentExportIndex, Func, TypedFunc};
use wasmtime::{Store, UpdateDeadline};

/// A wasm plugin.
pub struct WasmUdf {
    shared: Arc<Shared>,
    source: String,
    path: std::path::PathBuf,
    /// SHA-256 of the component's bytes (hex).
    sha256: String,
    name: Arc<str>,
    description: Description,
    pre: UdfPluginPre<HostState>,
    /// The export `udf.process`, called directly for tiles read into the guest.
    process: ComponentExportIndex,
    /// Instance for the main-side calls, created on first use, dropped after a trap.
    main: Mutex<Option<Instance>>,
}

/// A store and the plugin instantiated in it.
struct Instance {
    store: Store<HostState>,
    plugin: UdfPlugin,
    /// `udf.process`, type-checked against [`ProcessParams`] and [`ProcessResults`].
    process: Func,
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
        let process = component
            .get_export_index(None, interface.as_str())
            .and_then(|udf| component.get_export_index(Some(&udf), "process"))
            .ok_or_else(|| err(LoadErrorKind::Interface, "exports no udf.process".into()))?;
        let mut udf = WasmUdf {
            shared,
            source: source.clone(),
            path: path.to_owned(),
            sha256,
            name: Arc::from(source.as_str()),
            description: placeholder_description(),
            pre,
            process,
            main: Mutex::new(None),
        };
        let description = udf
            .with_main(|plugin, store| plugin.udf_plugin_udf().call_describe(store).map(Ok))
            .and_then(description_from_wit)
            .map_err(|e| err(LoadErrorKind::Describe, format!("describe failed: {e}")))?;
        udf.name = Arc::from(description.name.as_str());
        udf.description = description;
        Ok(udf)
    }

    fn instantiate(&self, partition: Option<usize>) -> Result<Instance, CallError> {
        let origin = LogOrigin { plugin: self.name.clone(), partition };
        let state = HostState::new(self.shared.options.max_memory, origin, self.shared.options.logger.clone());
        let mut store = Store::new(&self.shared.engine, state);
        store.limiter(|s| &mut s.limits);
        // What one call may hand back is bounded by the instance's memory anyway; wasmtime's
        // default (128 MiB) would refuse legitimate results such as large sig buffers.
        store.set_hostcall_fuel(self.shared.options.max_memory);
        if self.shared.epochs {
            // Every tick, check the call's deadline and whether the runtime was interrupted.
            let interrupts = self.shared.interrupts.clone();
            store.epoch_deadline_callback(move |ctx| {
                let state = ctx.data();
                if interrupts.load(Ordering::Relaxed) != state.interrupt_generation {
                    return Err(Interrupted.into());
                }
                if Instant::now() >= state.call_deadline {
                    return Ok(UpdateDeadline::Interrupt);
                }
                Ok(UpdateDeadline::Continue(1))
            });
            arm(&self.shared, &mut store);
        }
        let instantiated = self.pre.instance_pre().instantiate(&mut store).and_then(|instance| {
            let plugin = UdfPlugin::new(&mut store, &instance)?;
            let process = instance
                .get_func(&mut store, self.process)
                .ok_or_else(|| wasmtime::format_err!("udf.process is not a function"))?;
            process.typed::<ProcessParams<'_>, ProcessResults>(&store)?;
            Ok((plugin, process))
        });
        let (plugin, process) = instantiated.map_err(|e| trap(&self.shared, e, Vec::new()))?;
        Ok(Instance { store, plugin, process })
    }

    /// Call into the main-side instance; a trap discards it so the next call starts fresh.
    fn with_main<R>(
        &self,
        f: impl FnOnce(&UdfPlugin, &mut Store<HostState>) -> wasmtime::Result<Result<R, wit::UdfError>>,
    ) -> Result<R, CallError> {
        let mut main = self.main.lock().map_err(|_| CallError::internal("main instance lock poisoned"))?;
        if main.is_none() {
            *main = Some(self.instantiate(None)?);
        }
        let instance = main.as_mut().ok_or_else(|| CallError::internal("no main instance"))?;
        let result = instance.call(&self.shared, f);
        if matches!(result, Err(CallError::Trap { .. })) {
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
        f: impl FnOnce(&UdfPlugin, &mut Store<HostState>) -> wasmtime::Result<Result<R, wit::UdfError>>,
    ) -> Result<R, CallError> {
        self.call_raw(shared, f).map_err(|e| trap(shared, e, self.store.data().log_tail()))?.map_err(error_from_wit)
    }

    /// A call, counted in the statistics, with wasmtime's error as it is (the caller
    /// may look inside it before it becomes a [`CallError`]).
    fn call_raw<R>(
        &mut self,
        shared: &Shared,
        f: impl FnOnce(&UdfPlugin, &mut Store<HostState>) -> wasmtime::Result<Result<R, wit::UdfError>>,
    ) -> wasmtime::Result<Result<R, wit::UdfError>> {
        if shared.epochs {
            arm(shared, &mut self.store);
        }
        let started = Instant::now();
        let outcome = f(&self.plugin, &mut self.store);
        let state = self.store.data_mut();
        state.stats.calls += 1;
        state.stats.call_seconds += started.elapsed().as_secs_f64();
        outcome
    }
}

/// The error a call traps with when the runtime is interrupted.
#[derive(Debug)]
struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// Start the clock of a call: its deadline, the interrupt generation, the next check.
fn arm(shared: &Shared, store: &mut Store<HostState>) {
    let state = store.data_mut();
    state.call_deadline = Instant::now() + shared.options.timeout;
    state.interrupt_generation = shared.interrupts.load(Ordering::Relaxed);
    store.set_epoch_deadline(1);
}

/// Describe a trap for a human: the reason first, then where.
fn trap(shared: &Shared, error: wasmtime::Error, log_tail: Vec<String>) -> CallError {
    let chain = format!("{error:#}");
    let message = if error.downcast_ref::<Interrupted>().is_some() {
        "interrupted".to_owned()
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
    } else {
        format!("trapped: {}", chain.lines().next().unwrap_or("unknown error"))
    };
    let backtrace = error
        .downcast_ref::<wasmtime::WasmBacktrace>()
        .map(|bt| {
            bt.frames()
                .iter()
                .take(4)
                .map(|f| f.func_name().unwrap_or("<unnamed>").to_owned())
                .collect::<Vec<_>>()
                .join(" <- ")
        })
        .filter(|s| !s.is_empty());
    let message = match backtrace {
        Some(bt) => format!("{message} (in {bt})"),
        None => message,
    };
    CallError::Trap { message, log_tail }
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

impl Udf for WasmUdf {
    fn description(&self) -> &Description {
        &self.description
    }

    fn source(&self) -> &str {
        &self.source
    }

    fn origin(&self) -> UdfOrigin {
        UdfOrigin::Wasm { path: self.path.clone(), sha256: self.sha256.clone() }
    }

    fn interrupt(&self) {
        self.shared.interrupts.fetch_add(1, Ordering::SeqCst);
    }

    fn plan(&self, params: &Params, dataset: &DatasetMeta) -> Result<RunPlan, CallError> {
        let params = params_to_wit(&params.0, self.access());
        let meta = dataset_to_wit(dataset);
        self.with_main(|p, s| p.udf_plugin_udf().call_plan(s, &params, meta)).map(plan_from_wit)
    }

    fn result_buffers(&self, params: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>, CallError> {
        let params = params_to_wit(&params.0, self.access());
        let meta = dataset_to_wit(dataset);
        let decls = self.with_main(|p, s| p.udf_plugin_udf().call_result_buffers(s, &params, meta))?;
        decls.into_iter().map(buffer_decl_from_wit).collect()
    }

    fn start(&self, ctx: InitContext<'_>) -> Result<Box<dyn PartitionRunner + '_>, CallError> {
        let mut instance = self.instantiate(ctx.partition.map(|p| p.index))?;
        let params = params_to_wit(&ctx.params.0, self.access());
        let slices = ctx.partition.map(|p| scheme_to_wit(&p.tiling)).unwrap_or_default();
        let init = wit::InitContext {
            params: &params,
            dataset: dataset_to_wit(ctx.dataset),
            partition: ctx.partition.map(|p| partition_to_wit(p, &slices)),
        };
        instance.call(&self.shared, |p, s| p.udf_plugin_udf().call_init(s, init))?;
        Ok(Box::new(WasmPartition { udf: self, instance }))
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
        let merged = self.with_main(|p, s| p.udf_plugin_udf().call_merge(s, merge_ctx, &dest_wit, &src_wit))?;
        drop(dest_wit);
        if merged.len() != dest.len() {
            return Err(CallError::Contract(format!(
                "merge returned {} buffers for {} given",
                merged.len(),
                dest.len()
            )));
        }
        for out in merged {
            let slot = dest.iter_mut().find(|d| d.name == out.name).ok_or_else(|| {
                CallError::Contract(format!("merge returned a buffer '{}' it was not given", out.name))
            })?;
            let array = ndarray_from_wit(out.data, &format!("merged buffer '{}'", out.name))?;
            if array.dtype() != slot.dtype || array.shape() != slot.shape.as_slice() {
                return Err(CallError::Contract(format!(
                    "merge returned buffer '{}' as {} {:?}, expected {} {:?}",
                    out.name,
                    array.dtype(),
                    array.shape(),
                    slot.dtype,
                    slot.shape
                )));
            }
            slot.bytes.copy_from_slice(array.bytes());
        }
        Ok(())
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
        let entries = self.with_main(|p, s| p.udf_plugin_udf().call_get_results(s, results_ctx, &bufs))?;
        entries
            .into_iter()
            .map(|e| {
                let array = ndarray_from_wit(e.data, &format!("result '{}'", e.name))?;
                Ok(ResultEntry { name: e.name, array, valid: e.valid })
            })
            .collect()
    }
}

/// One partition's instance.
struct WasmPartition<'a> {
    udf: &'a WasmUdf,
    instance: Instance,
}

impl WasmPartition<'_> {
    /// A `process` call, counted in the instance's statistics.
    fn timed_process(
        &mut self,
        f: impl FnOnce(&UdfPlugin, &mut Store<HostState>) -> wasmtime::Result<Result<(), wit::UdfError>>,
    ) -> wasmtime::Result<Result<(), wit::UdfError>> {
        let started = Instant::now();
        let result = self.instance.call_raw(&self.udf.shared, f);
        let stats = &mut self.instance.store.data_mut().stats;
        stats.process_calls += 1;
        stats.process_seconds += started.elapsed().as_secs_f64();
        result
    }

    /// A trap or typed error of a `process` call as a [`CallError`].
    fn call_error(&self, outcome: wasmtime::Result<Result<(), wit::UdfError>>) -> Result<(), CallError> {
        outcome.map_err(|e| trap(&self.udf.shared, e, self.instance.store.data().log_tail()))?.map_err(error_from_wit)
    }
}

impl PartitionRunner for WasmPartition<'_> {
    fn preprocess(&mut self) -> Result<(), CallError> {
        self.instance.call(&self.udf.shared, |p, s| p.udf_plugin_udf().call_preprocess(s))
    }

    fn process(&mut self, tile: &Tile<'_>) -> Result<(), CallError> {
        let wit_tile = wit::Tile {
            origin: tile.origin,
            frames: tile.frames as u64,
            scheme_index: tile.scheme_index as u32,
            sig: sig_slice_to_wit(tile.sig),
            true_nav_indices: tile.true_nav_indices,
            data: array_data(tile.dtype, tile.data, self.udf.access()),
        };
        let outcome = self.timed_process(|p, s| p.udf_plugin_udf().call_process(s, wit_tile));
        self.call_error(outcome)
    }

    fn reads_tiles(&self) -> bool {
        true
    }

    fn process_unread(&mut self, tile: &Tile<'_>, source: &dyn TileSource) -> Result<(), UnreadError> {
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
        let process = unsafe { TypedFunc::<ProcessParams<'_>, ProcessResults>::new_unchecked(self.instance.process) };
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
        Some(InstanceStats { peak_memory: state.limits.peak_memory, ..state.stats })
    }

    fn postprocess(&mut self) -> Result<(), CallError> {
        self.instance.call(&self.udf.shared, |p, s| p.udf_plugin_udf().call_postprocess(s))
    }

    fn export(&mut self) -> Result<Vec<NamedBuffer>, CallError> {
        let arrays = self.instance.call(&self.udf.shared, |p, s| p.udf_plugin_udf().call_export_buffers(s))?;
        arrays
            .into_iter()
            .map(|a| {
                let array = ndarray_from_wit(a.data, &format!("buffer '{}'", a.name))?;
                Ok(NamedBuffer { name: a.name, array })
            })
            .collect()
    }
}
