//! Running one partition: every UDF of the plan on fresh instances, every tile read
//! (and converted) once and handed to each. The phases are LiberTEM's `UDFPartRunner`'s:
//! [start](PartitionJob::start) (init + preprocess), [process tiles](PartitionJob::process_tiles),
//! [finish](PartitionJob::finish) (postprocess + export, checked against the
//! declarations).

use super::plan::{Plan, UdfLoader};
use super::{FailurePoint, RunError};
use crate::array::{AlignedBytes, NdArray};
use crate::dataset::{Dataset, DatasetError, Partition};
use crate::log::escape_control;
use crate::udf::{
    BufferDecl, BufferUse, CallError, DatasetMeta, InitContext, InstanceStats, Method, NamedBuffer, Params,
    PartitionMeta, PartitionRunner, SigSlice, Tile, TileReadError, TileSource, Udf, UnreadError,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// What one partition produced: every UDF's exported buffers, checked against its
/// declarations. Send it to a [`super::Merger`]; across processes as
/// [`to_bytes`](Self::to_bytes) (raw little-endian arrays behind a small JSON header).
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionOutput {
    /// The SHA-256 of the plan it was run from ([`Plan::hash`]): a merger takes only
    /// outputs of its own plan.
    pub plan: String,
    /// The partition's index in the plan.
    pub index: usize,
    /// Frames processed (the partition's selected frames).
    pub frames: u64,
    /// Bytes of stored data read.
    pub bytes_read: u64,
    /// Per UDF of the plan, in order.
    pub udfs: Vec<UdfOutput>,
}

/// One UDF's output for a partition.
#[derive(Debug, Clone, PartialEq)]
pub struct UdfOutput {
    /// In declaration order, result-only buffers left out.
    pub buffers: Vec<NamedBuffer>,
    /// The instance's resource use, where the UDF reports it (wasm plugins).
    pub stats: Option<InstanceStats>,
}

/// Live controls of a partition run in this process: stop early, count progress.
#[derive(Debug, Default)]
pub struct Control {
    /// Set to stop at the next tile ([`RunError::Cancelled`]).
    pub cancel: AtomicBool,
    /// Frames processed so far, updated per tile.
    pub frames_done: AtomicU64,
}

/// A plan with its dataset opened and its UDFs loaded: runs any of its partitions, as
/// often as asked, from any thread.
pub struct Worker {
    plan: Arc<Plan>,
    /// [`Plan::hash`], written into every output.
    plan_hash: String,
    dataset: Arc<dyn Dataset>,
    udfs: Vec<Arc<dyn Udf>>,
}

impl Worker {
    /// A worker for a plan made in this process, with the dataset and UDFs it was made
    /// from.
    ///
    /// # Errors
    /// [`RunError::Internal`] if they do not match the plan.
    pub fn new(plan: Arc<Plan>, dataset: Arc<dyn Dataset>, udfs: Vec<Arc<dyn Udf>>) -> Result<Self, RunError> {
        if udfs.len() != plan.udfs.len() {
            return Err(RunError::Internal(format!("{} UDFs for a plan of {}", udfs.len(), plan.udfs.len())));
        }
        Ok(Worker { plan_hash: plan.hash(), plan, dataset, udfs })
    }

    /// A worker for a plan sent as JSON ([`Plan::to_json`]): the dataset the plan names
    /// is opened and checked against the plan's shape and dtype *before* anything the
    /// plan's sizes would make is built (a small plan may claim a huge scan), then the
    /// UDFs are loaded as in [`Worker::load`]. What a worker should use for plans that
    /// come from elsewhere.
    ///
    /// # Errors
    /// As [`Plan::from_json`] and [`Worker::load`].
    pub fn from_json(json: &str, loader: &dyn UdfLoader) -> Result<Self, RunError> {
        let (plan, dataset) = Self::open_json(json)?;
        Self::with_dataset(plan, dataset, loader)
    }

    /// [`Worker::from_json`] with the loader chosen for the plan (its limits, its
    /// plugins) by `loader_for`, once the data is checked and the plan built.
    ///
    /// # Errors
    /// As [`Worker::from_json`], and what `loader_for` returns.
    pub fn from_json_with<L: UdfLoader>(
        json: &str,
        loader_for: impl FnOnce(&Plan) -> Result<Arc<L>, RunError>,
    ) -> Result<Self, RunError> {
        let (plan, dataset) = Self::open_json(json)?;
        let loader = loader_for(&plan)?;
        Self::with_dataset(plan, dataset, loader.as_ref())
    }

    /// The plan of `json` and the dataset it names, opened and checked against the
    /// plan's shape and dtype before the plan is built.
    fn open_json(json: &str) -> Result<(Arc<Plan>, Arc<dyn Dataset>), RunError> {
        let repr = super::wire::PlanRepr::parse(json)?;
        let spec = repr.dataset().cloned().ok_or_else(no_spec)?;
        let what = spec.describe();
        let dataset = spec.open()?.dataset;
        check_dataset(&what, dataset.as_ref(), repr.shape(), repr.stored_dtype())?;
        let plan = Plan::try_from(repr).map_err(|e| RunError::Invalid(format!("not a valid run plan: {e}")))?;
        Ok((Arc::new(plan), dataset))
    }

    /// A worker for a plan made elsewhere: opens the dataset from the plan's spec and
    /// loads each UDF with `loader`, checking both are what the plan was made with.
    ///
    /// # Errors
    /// [`RunError::Invalid`] if the plan has no dataset spec, a UDF cannot be loaded, or
    /// the data or a UDF differs from what was planned; [`RunError::Dataset`] if the
    /// dataset cannot be opened (the path must be readable here).
    pub fn load(plan: Arc<Plan>, loader: &dyn UdfLoader) -> Result<Self, RunError> {
        let spec = plan.dataset.clone().ok_or_else(no_spec)?;
        let what = spec.describe();
        let dataset = spec.open()?.dataset;
        check_dataset(&what, dataset.as_ref(), &plan.shape, plan.stored_dtype)?;
        Self::with_dataset(plan, dataset, loader)
    }

    /// [`Worker::load`] with the dataset opened and checked.
    fn with_dataset(plan: Arc<Plan>, dataset: Arc<dyn Dataset>, loader: &dyn UdfLoader) -> Result<Self, RunError> {
        let mut udfs = Vec::with_capacity(plan.udfs.len());
        for planned in &plan.udfs {
            let udf = loader
                .load(&planned.origin)
                .map_err(|e| RunError::Invalid(format!("cannot load '{}' for this plan: {e}", planned.name)))?;
            let udf = super::for_run(udf);
            let desc = udf.description();
            if desc.version != planned.version {
                return Err(RunError::Invalid(format!(
                    "'{}' loads here as version {}, but the plan was made with version {}",
                    planned.name, desc.version, planned.version
                )));
            }
            udfs.push(udf);
        }
        Ok(Worker { plan_hash: plan.hash(), plan, dataset, udfs })
    }

    pub fn plan(&self) -> &Arc<Plan> {
        &self.plan
    }

    /// The plan's [`Plan::hash`] (computed once, when the worker was made).
    pub fn plan_hash(&self) -> &str {
        &self.plan_hash
    }

    pub fn udfs(&self) -> &[Arc<dyn Udf>] {
        &self.udfs
    }

    pub fn dataset(&self) -> &Arc<dyn Dataset> {
        &self.dataset
    }

    /// Run partition `index` with the plan's parameters.
    ///
    /// # Errors
    /// The first failure of a UDF or of reading the dataset; [`RunError::Invalid`] for
    /// an index the plan does not have.
    pub fn run_partition(&self, index: usize) -> Result<PartitionOutput, RunError> {
        let params: Vec<Params> = self.plan.udfs.iter().map(|u| u.params.clone()).collect();
        self.run_partition_with(index, &params, &Control::default())
    }

    /// Run partition `index` with `params` (one per UDF, resolved: the plan's, or as
    /// updated between partitions), stopping when `control.cancel` is set.
    ///
    /// # Errors
    /// As [`run_partition`](Self::run_partition), and [`RunError::Cancelled`].
    ///
    /// A panic while the partition runs (a bug in a format reader, a built-in or the
    /// executor) is caught and becomes this partition's [`RunError::Internal`]: the other
    /// partitions, and every engine that drives them, go on knowing it failed.
    pub fn run_partition_with(
        &self,
        index: usize,
        params: &[Params],
        control: &Control,
    ) -> Result<PartitionOutput, RunError> {
        let partition = self.plan.partition(index)?;
        // Unwind safety: everything the closure touches is either dropped with it (the
        // job, its runners and buffers) or shared state that stays consistent under a
        // panic (atomic counters, locks that recover from poisoning).
        let run = std::panic::AssertUnwindSafe(|| {
            let mut job = PartitionJob::start(self, partition, params)?;
            job.process_tiles(control)?;
            job.finish()
        });
        std::panic::catch_unwind(run).unwrap_or_else(|panic| {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_owned());
            Err(RunError::Internal(format!(
                "partition {index} (frames {}) panicked: {message}",
                super::first_last(&partition.frames).map_or_else(|| "none".to_owned(), |(a, b)| format!("{a}..={b}"))
            )))
        })
    }

    pub(crate) fn udf_error(&self, u: usize, at: FailurePoint, error: CallError) -> RunError {
        RunError::Udf { udf: self.plan.udfs[u].name.clone(), source_path: self.udfs[u].source().to_owned(), at, error }
    }
}

/// One partition in progress: a started runner per UDF.
struct PartitionJob<'w> {
    worker: &'w Worker,
    partition: &'w Partition,
    runners: Vec<Box<dyn PartitionRunner + 'w>>,
    bytes_read: u64,
}

impl<'w> PartitionJob<'w> {
    /// Phase 1: a fresh instance per UDF (`init` with the partition's params and meta),
    /// then `preprocess`.
    fn start(worker: &'w Worker, partition: &'w Partition, params: &[Params]) -> Result<Self, RunError> {
        let plan = &worker.plan;
        let mut runners: Vec<Box<dyn PartitionRunner + 'w>> = Vec::with_capacity(worker.udfs.len());
        let tiling = Arc::new(plan.tiling.clone());
        for (u, udf) in worker.udfs.iter().enumerate() {
            let at = |method| FailurePoint::worker(method, partition.index, &partition.frames);
            let own = plan.instance_params(&params[u], udf.description(), Some(partition));
            let meta = PartitionMeta {
                index: partition.index,
                origin: partition.origin,
                frames: partition.len(),
                method: plan.udfs[u].plan.method,
                tiling: tiling.clone(),
            };
            // Each UDF sees the device the plan chose for it (a GPU built-in's `start`
            // makes its GPU runner).
            let dataset = DatasetMeta { device_class: plan.udfs[u].device, ..plan.meta.clone() };
            let ctx = InitContext { params: &own, dataset: &dataset, partition: Some(&meta) };
            let mut runner = udf.start(ctx).map_err(|e| worker.udf_error(u, at("init"), e))?;
            runner.preprocess().map_err(|e| worker.udf_error(u, at("preprocess"), e))?;
            runners.push(runner);
        }
        Ok(PartitionJob { worker, partition, runners, bytes_read: 0 })
    }

    /// Phase 2: every tile, read once: straight from the file mapping where possible,
    /// else into one reused buffer — or, for a lone runner with memory of its own (a wasm
    /// plugin), straight into that memory.
    fn process_tiles(&mut self, control: &Control) -> Result<(), RunError> {
        let worker = self.worker;
        let plan = &worker.plan;
        let partition = self.partition;
        let depth = if plan.tiling.intent == Method::Partition { partition.len() } else { plan.tiling.depth };
        let input = plan.meta.input_dtype;
        let stored_size = plan.stored_dtype.dtype.size();
        let full_frame = plan.tiling.slices.len() == 1;
        let reads_tiles = self.runners.len() == 1 && self.runners[0].reads_tiles();
        let mut buffer = AlignedBytes::default();
        let mut offset = 0usize;
        for chunk in partition.frames.chunks(depth.max(1)) {
            if control.cancel.load(Ordering::Relaxed) {
                return Err(RunError::Cancelled);
            }
            for (scheme_index, slice) in plan.tiling.slices.iter().enumerate() {
                let contiguous = chunk.last().is_some_and(|&l| l - chunk[0] + 1 == chunk.len() as u64);
                let direct = (full_frame && contiguous)
                    .then(|| worker.dataset.direct_frames(chunk[0]..chunk[0] + chunk.len() as u64, plan.direct_dtype))
                    .flatten();
                let mut tile = Tile {
                    origin: partition.origin + offset as u64,
                    frames: chunk.len(),
                    scheme_index,
                    sig: slice,
                    true_nav_indices: chunk,
                    dtype: input,
                    data: &[],
                };
                let at = || FailurePoint::worker("process", partition.index, chunk);
                if let Some(bytes) = direct {
                    tile.dtype = plan.direct_dtype;
                    tile.data = bytes;
                    self.process_each(&tile, &at)?;
                } else if reads_tiles {
                    let source =
                        DatasetTile { dataset: worker.dataset.as_ref(), frames: chunk, sig: slice, tile: &tile };
                    match self.runners[0].process_unread(&tile, &source) {
                        Ok(()) => {}
                        Err(UnreadError::Read(e)) => return Err(dataset_error(e)),
                        Err(UnreadError::Udf(e)) => return Err(worker.udf_error(0, at(), e)),
                    }
                } else {
                    buffer.resize(chunk.len() * slice.len() * input.size());
                    worker.dataset.read_tile(chunk, slice, input, buffer.as_mut_slice())?;
                    tile.data = buffer.as_slice();
                    self.process_each(&tile, &at)?;
                }
                self.bytes_read += (chunk.len() * slice.len() * stored_size) as u64;
            }
            offset += chunk.len();
            control.frames_done.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        }
        Ok(())
    }

    fn process_each(&mut self, tile: &Tile<'_>, at: &dyn Fn() -> FailurePoint) -> Result<(), RunError> {
        for (u, runner) in self.runners.iter_mut().enumerate() {
            runner.process(tile).map_err(|e| self.worker.udf_error(u, at(), e))?;
        }
        Ok(())
    }

    /// Phase 3: `postprocess` and export, each UDF's buffers checked against its
    /// declarations.
    fn finish(mut self) -> Result<PartitionOutput, RunError> {
        let worker = self.worker;
        let partition = self.partition;
        let at = |method| FailurePoint::worker(method, partition.index, &partition.frames);
        let mut udfs = Vec::with_capacity(self.runners.len());
        for (u, runner) in self.runners.iter_mut().enumerate() {
            runner.postprocess().map_err(|e| worker.udf_error(u, at("postprocess"), e))?;
            let decls = &worker.plan.udfs[u].decls;
            let exported = runner.export().map_err(|e| worker.udf_error(u, at("export_buffers"), e))?;
            let checked = check_exported(decls, exported, partition.len(), &worker.plan.meta.sig_shape)
                .map_err(|e| worker.udf_error(u, at("export_buffers"), e))?;
            let buffers = named(decls, checked);
            udfs.push(UdfOutput { buffers, stats: runner.stats() });
        }
        Ok(PartitionOutput {
            plan: worker.plan_hash.clone(),
            index: partition.index,
            frames: partition.len() as u64,
            bytes_read: self.bytes_read,
            udfs,
        })
    }
}

fn no_spec() -> RunError {
    RunError::Invalid(
        "the plan's dataset was opened without a spec (in memory, in another process), so it cannot be opened \
         here; plan with a DatasetSpec"
            .into(),
    )
}

/// The dataset opened here (`what`) must have the planned shape and stored dtype.
fn check_dataset(
    what: &str,
    dataset: &dyn Dataset,
    shape: &crate::dataset::DatasetShape,
    stored: crate::dtype::StoredDType,
) -> Result<(), RunError> {
    if dataset.shape() == shape && dataset.stored_dtype() == stored {
        return Ok(());
    }
    Err(RunError::Invalid(format!(
        "{what} opens here as nav {:?} sig {:?} {}, but the plan was made for nav {:?} sig {:?} {stored}; is it \
         the same file?",
        dataset.shape().nav,
        dataset.shape().sig,
        dataset.stored_dtype(),
        shape.nav,
        shape.sig,
    )))
}

/// Arrays in declaration order (result-only declarations skipped) named after them.
pub(crate) fn named(decls: &[BufferDecl], arrays: Vec<NdArray>) -> Vec<NamedBuffer> {
    decls
        .iter()
        .filter(|d| d.usage != BufferUse::ResultOnly)
        .zip(arrays)
        .map(|(d, array)| NamedBuffer { name: d.name.clone(), array })
        .collect()
}

/// A tile of a dataset, read when (and where) the runner asks.
struct DatasetTile<'a> {
    dataset: &'a dyn Dataset,
    frames: &'a [u64],
    sig: &'a SigSlice,
    tile: &'a Tile<'a>,
}

impl TileSource for DatasetTile<'_> {
    fn read_into(&self, out: &mut [u8]) -> Result<(), TileReadError> {
        self.dataset.read_tile(self.frames, self.sig, self.tile.dtype, out).map_err(|e| TileReadError(Box::new(e)))
    }
}

/// The dataset's error back from a [`TileReadError`].
fn dataset_error(e: TileReadError) -> RunError {
    match e.0.downcast::<DatasetError>() {
        Ok(e) => RunError::Dataset(*e),
        Err(other) => RunError::Internal(format!("reading a tile failed with an unexpected error: {other}")),
    }
}

/// Match exported buffers to the declarations: every declared (non-result-only)
/// buffer exactly once, with the declared dtype and the storage shape for `frames`
/// nav entries. Returns the arrays in declaration order. One pass (names are looked up,
/// not searched: a plugin may return many).
///
/// # Errors
/// [`CallError::Contract`] naming the buffer that is missing, extra, repeated or
/// malformed.
pub fn check_exported(
    decls: &[BufferDecl],
    exported: Vec<NamedBuffer>,
    frames: usize,
    sig: &[usize],
) -> Result<Vec<NdArray>, CallError> {
    let declared: Vec<&BufferDecl> = decls.iter().filter(|d| d.usage != BufferUse::ResultOnly).collect();
    let slots: HashMap<&str, usize> = declared.iter().enumerate().map(|(i, d)| (d.name.as_str(), i)).collect();
    let mut arrays: Vec<Option<NdArray>> = vec![None; declared.len()];
    for buffer in exported {
        let shown = || escape_control(&buffer.name).into_owned();
        let Some(&i) = slots.get(buffer.name.as_str()) else {
            return Err(CallError::Contract(format!("exported buffer '{}' was never declared", shown())));
        };
        if arrays[i].is_some() {
            return Err(CallError::Contract(format!("buffer '{}' was exported twice", shown())));
        }
        let decl = declared[i];
        let expected = decl.storage_shape(frames, sig);
        if buffer.array.dtype() != decl.dtype || buffer.array.shape() != expected.as_slice() {
            return Err(CallError::Contract(format!(
                "buffer '{}' was exported as {} {:?}, but is declared as {} {:?}",
                decl.name,
                buffer.array.dtype(),
                buffer.array.shape(),
                decl.dtype,
                expected
            )));
        }
        arrays[i] = Some(buffer.array);
    }
    declared
        .iter()
        .zip(arrays)
        .map(|(decl, array)| {
            array.ok_or_else(|| CallError::Contract(format!("buffer '{}' was declared but not exported", decl.name)))
        })
        .collect()
}
