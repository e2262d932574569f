//! Glue between the generated bindings and a [`Udf`]: the per-instance state machine.

use crate::bindings::exports::udf::plugin::udf::Guest;
use crate::bindings::udf::plugin::host::{LogLevel, log};
use crate::bindings::udf::plugin::types::{
    self as wit, BufferDecl, DatasetMeta, Description, InitContext, MergeContext as WitMerge, Method, NamedArray,
    Param, ResultEntry, ResultsContext as WitResults, RunPlan, UdfError,
};
use crate::buffers::{Buffers, Unit};
use crate::element::{bytes_to_typed, data_dtype};
use crate::error::Result;
use crate::params::{Context, Params, to_usize_shape};
use crate::tile::{Tile, sig_shape_of};
use crate::udf::{MergeContext, ResultsContext, Udf};
use std::any::Any;
use std::cell::RefCell;
use std::marker::PhantomData;

/// Implements the exported interface for `T`; see [`export_udf!`](crate::export_udf).
/// `V` carries the plugin crate's version.
pub struct Adapter<T, V>(PhantomData<(T, V)>);

/// The version of the crate that exports a plugin (set by [`export_udf!`](crate::export_udf)).
pub trait CrateVersion {
    /// `CARGO_PKG_VERSION` of the plugin crate.
    const VERSION: &'static str;
}

/// The state of an instance between `init` and `export-buffers`.
struct Worker<T> {
    udf: T,
    ctx: Context,
    buffers: Buffers,
    method: Method,
}

thread_local! {
    // Wasm instances are single-threaded and the host gives each partition a fresh
    // instance, so one slot holds the only state there is.
    static WORKER: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| log(LogLevel::Error, &format!("panic: {info}"))));
    });
}

fn with_worker<T: Udf, R>(f: impl FnOnce(&mut Worker<T>) -> Result<R>) -> Result<R> {
    WORKER.with(|slot| {
        let mut slot = slot.borrow_mut();
        let worker = slot
            .as_mut()
            .and_then(|w| w.downcast_mut::<Worker<T>>())
            .ok_or_else(|| UdfError::internal("called before init"))?;
        f(worker)
    })
}

impl<T: Udf, V: CrateVersion + 'static> Guest for Adapter<T, V> {
    fn describe() -> Description {
        install_panic_hook();
        let mut description = T::describe();
        if description.version.is_empty() {
            description.version = V::VERSION.to_owned();
        }
        description
    }

    fn plan(params: Vec<Param>, dataset: DatasetMeta) -> Result<RunPlan> {
        install_panic_hook();
        T::plan(&Params::new(params), &dataset)
    }

    fn result_buffers(params: Vec<Param>, dataset: DatasetMeta) -> Result<Vec<BufferDecl>> {
        install_panic_hook();
        T::result_buffers(&Params::new(params), &dataset)
    }

    fn init(ctx: InitContext) -> Result<()> {
        install_panic_hook();
        let ctx = Context { params: Params::new(ctx.params), dataset: ctx.dataset, partition: ctx.partition };
        let decls = T::result_buffers(&ctx.params, &ctx.dataset)?;
        let frames = ctx.partition.as_ref().map_or_else(|| ctx.dataset.frames(), |p| p.frames);
        let mut buffers = Buffers::allocate(&decls, frames, &ctx.dataset.sig_shape)?;
        let declaration = T::declare();
        if declaration.is_declared() {
            declaration.initialise(&mut buffers)?;
        }
        let method = ctx.partition.as_ref().map_or(Method::Partition, |p| p.method);
        let udf = T::new(&ctx)?;
        let worker: Box<dyn Any> = Box::new(Worker { udf, ctx, buffers, method });
        WORKER.with(|slot| *slot.borrow_mut() = Some(worker));
        Ok(())
    }

    fn preprocess() -> Result<()> {
        with_worker::<T, _>(|w| {
            w.buffers.unit = Unit::Whole;
            w.udf.preprocess(&w.ctx, &mut w.buffers)
        })
    }

    fn process(mut tile: wit::Tile) -> Result<()> {
        with_worker::<T, _>(|w| {
            let dtype = w.ctx.dataset.input_dtype;
            if let wit::ArrayData::Bytes(bytes) = &tile.data {
                tile.data = bytes_to_typed(bytes, dtype);
            }
            if data_dtype(&tile.data) != Some(dtype) {
                return Err(UdfError::internal("tile data does not have the input dtype"));
            }
            let view = Tile { raw: &tile, ctx: &w.ctx, dtype, sig_shape: sig_shape_of(&tile)? };
            let offset = view.nav_offset();
            match w.method {
                Method::Tile => {
                    w.buffers.unit = Unit::Tile {
                        nav: offset..offset + view.frames(),
                        sig_origin: to_usize_shape(&tile.sig.origin)?,
                        sig_shape: view.sig_shape.clone(),
                    };
                    w.udf.process_tile(&view, &mut w.buffers)
                }
                Method::Frame => {
                    for i in 0..view.frames() {
                        w.buffers.unit = Unit::Frame { nav: offset + i };
                        w.udf.process_frame(&view.frame(i), &mut w.buffers)?;
                    }
                    Ok(())
                }
                Method::Partition => {
                    w.buffers.unit = Unit::Whole;
                    w.udf.process_partition(&view, &mut w.buffers)
                }
            }
        })
    }

    fn postprocess() -> Result<()> {
        with_worker::<T, _>(|w| {
            w.buffers.unit = Unit::Whole;
            w.udf.postprocess(&w.ctx, &mut w.buffers)
        })
    }

    fn export_buffers() -> Result<Vec<NamedArray>> {
        let worker = WORKER.with(|slot| slot.borrow_mut().take());
        let worker = worker
            .and_then(|w| w.downcast::<Worker<T>>().ok())
            .ok_or_else(|| UdfError::internal("export-buffers called before init"))?;
        Ok(worker.buffers.into_named())
    }

    fn merge(ctx: WitMerge, dest: Vec<NamedArray>, src: Vec<NamedArray>) -> Result<Vec<NamedArray>> {
        install_panic_hook();
        let ctx = MergeContext {
            params: Params::new(ctx.params),
            dataset: ctx.dataset,
            partition: ctx.partition,
            valid_nav_mask: ctx.valid_nav_mask,
        };
        let mut dest = Buffers::from_named(dest)?;
        let src = Buffers::from_named(src)?;
        T::merge(&ctx, &mut dest, &src)?;
        Ok(dest.into_named())
    }

    fn get_results(ctx: WitResults, buffers: Vec<NamedArray>) -> Result<Vec<ResultEntry>> {
        install_panic_hook();
        let ctx = ResultsContext {
            params: Params::new(ctx.params),
            dataset: ctx.dataset,
            valid_nav_mask: ctx.valid_nav_mask,
            roi: ctx.roi,
        };
        let buffers = Buffers::from_named(buffers)?;
        Ok(T::get_results(&ctx, &buffers)?.into_iter().map(|r| r.entry).collect())
    }
}
