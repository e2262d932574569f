//! The executor: plans a run, processes partitions in parallel, merges, and finishes
//! results.
//!
//! | type | role |
//! |------|------|
//! | [`UdfSpec`] | a UDF and the parameters given for it |
//! | [`RunOptions`] | ROI, partition count, threads, forced tile shape |
//! | [`Run`] | a planned run: input dtype, buffers, partitions, tiling |
//! | [`RunIter`] | runs it, yielding after each merged partition (LiberTEM's `run_udf_iter`) |
//! | [`RunResults`] | final results of every UDF, with valid masks |
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use udf_host::{dataset, exec, wasm};
//! let data = dataset::open("data.npy".as_ref(), &Default::default())?;
//! let runtime = wasm::WasmRuntime::new(Default::default())?;
//! let (sum, _) = runtime.load("sum.wasm".as_ref())?;
//! let spec = exec::UdfSpec { udf: Arc::new(sum), params: Default::default() };
//! let results = exec::Run::plan(data, vec![spec], exec::RunOptions::default())?.execute()?;
//! println!("{:?}", results.udfs[0].buffers[0].data.shape());
//! # Ok(()) }
//! ```

mod merge;
mod results;
mod worker;

pub use results::{ResultBuffer, RunResults, UdfResults};
#[doc(hidden)]
pub use worker::check_exported;

use crate::array::NdArray;
use crate::dataset::{Dataset, DatasetError, Partition, TileRequest, TilingScheme, negotiate, plan_partitions};
use crate::dtype::{DType, result_type};
use crate::roi::Roi;
use crate::udf::{
    BufferDecl, BufferKind, BufferUse, CallError, DTypePreference, DatasetMeta, DeviceClass, ErrorKind, FUSED_STORED,
    InitContext, InstanceStats, Method, NamedBuffer, ParamValue, Params, RunPlan, Udf,
};
pub use merge::MergeState;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, RwLock};
use std::time::Instant;

/// A UDF and the parameters given for it (defaults are filled in by [`Run::plan`]).
#[derive(Clone)]
pub struct UdfSpec {
    pub udf: Arc<dyn Udf>,
    pub params: Params,
}

/// How to run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Process only these frames.
    pub roi: Option<Roi>,
    /// Number of partitions (default: ~512 MiB float32-equivalent, at least 2 per thread).
    pub partitions: Option<usize>,
    /// Worker threads (default: available parallelism).
    pub threads: Option<usize>,
    /// Force the tile shape `[depth, ..sig slice shape]` instead of negotiating it.
    pub tile_shape: Option<Vec<usize>>,
    /// Go on with the other partitions when one fails (the failed ones stay invalid).
    pub keep_going: bool,
    /// Refuse runs whose merged buffers would need more host memory than this
    /// (default [`DEFAULT_MAX_RESULT_BYTES`]).
    pub max_result_bytes: Option<u64>,
    /// Use this method for every UDF instead of what `plan` chose (each must implement
    /// it). For testing that results don't depend on the method.
    pub force_method: Option<Method>,
    /// Merge partitions in a random order (seeded; the same seed, the same order) instead
    /// of completion order, after all have finished. For testing that merges are
    /// order-independent, and for reproducible floating-point merges.
    pub shuffle_merges: Option<u64>,
    /// Keep every partition's exported buffers (see [`RunIter::partition_buffers`]).
    pub keep_partition_buffers: bool,
    /// Convert integer data to the input dtype in the executor (into a copied tile) even
    /// when every UDF [converts on read](crate::udf::Udf::converts_on_read). For testing
    /// that both paths agree, and for measuring what fusing the conversion gains.
    pub convert_in_executor: bool,
}

/// Default cap on the host memory of a run's merged buffers: 16 GiB.
pub const DEFAULT_MAX_RESULT_BYTES: u64 = 16 << 30;

/// A partition that failed in a run that went on (`keep_going`), or that stopped it.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionFailure {
    /// Index of the partition.
    pub partition: usize,
    /// True flat nav indices of its first and last frame.
    pub frames: Option<(u64, u64)>,
    /// The UDF that failed, if it was one.
    pub udf: Option<String>,
    /// Where it failed.
    pub at: Option<FailurePoint>,
    /// The error, with its causes.
    pub error: String,
}

/// Where in the run something failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailurePoint {
    /// The lifecycle call: plan, result_buffers, init, preprocess, process, ...
    pub method: &'static str,
    /// The partition, if a worker call.
    pub partition: Option<usize>,
    /// True flat nav indices of the frames involved (first, last).
    pub frames: Option<(u64, u64)>,
}

impl std::fmt::Display for FailurePoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.method)?;
        if let Some(p) = self.partition {
            write!(f, ", partition {p}")?;
        }
        if let Some((a, b)) = self.frames {
            if a == b { write!(f, ", frame {a}")? } else { write!(f, ", frames {a}..={b}")? }
        }
        Ok(())
    }
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The run as specified cannot work (ROI shape, params, declarations...).
    #[error("{0}")]
    Invalid(String),
    /// A UDF failed or broke the contract.
    #[error("'{udf}' ({source_path}) failed in {at}: {error}")]
    Udf { udf: String, source_path: String, at: FailurePoint, error: CallError },
    /// The dataset could not be read.
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    /// The run was stopped.
    #[error("the run was cancelled")]
    Cancelled,
}

impl RunError {
    /// Whether the user can fix it (bad input, bad params) rather than the plugin.
    pub fn is_user_error(&self) -> bool {
        match self {
            RunError::Invalid(_) | RunError::Dataset(_) => true,
            RunError::Udf { error: CallError::Returned { kind, .. }, .. } => *kind == ErrorKind::BadParam,
            _ => false,
        }
    }
}

/// A UDF of a planned run.
pub(crate) struct PlannedUdf {
    pub udf: Arc<dyn Udf>,
    /// Unique name in this run (output directory).
    pub name: String,
    pub plan: RunPlan,
    pub decls: Vec<BufferDecl>,
}

/// Everything workers share.
pub(crate) struct RunShared {
    pub dataset: Arc<dyn Dataset>,
    pub udfs: Vec<PlannedUdf>,
    pub meta: DatasetMeta,
    pub partitions: Vec<Partition>,
    pub tiling: Arc<TilingScheme>,
    /// The dtype of tiles mapped straight from the file: the input dtype, or the stored
    /// integer dtype when every UDF converts on read.
    pub direct_dtype: DType,
    pub threads: usize,
    pub roi: Option<Roi>,
    /// Current parameters per UDF (nav aux arrays flattened to `(nav_len, ..)`).
    pub params: RwLock<Vec<Params>>,
    pub cancel: AtomicBool,
    /// Set when the user interrupted the run (as opposed to a failure stopping it).
    pub interrupted: AtomicBool,
    pub keep_going: bool,
    pub shuffle_merges: Option<u64>,
    pub keep_partition_buffers: bool,
    pub frames_done: AtomicU64,
    pub bytes_read: AtomicU64,
}

impl RunShared {
    pub(crate) fn udf_error(&self, u: usize, at: FailurePoint, error: CallError) -> RunError {
        let planned = &self.udfs[u];
        RunError::Udf { udf: planned.name.clone(), source_path: planned.udf.source().to_owned(), at, error }
    }
}

/// A planned run: call [`Run::execute`] or iterate with [`Run::iter`].
pub struct Run {
    shared: Arc<RunShared>,
    merged: Vec<MergeState>,
}

/// The statistics of a run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunStats {
    pub partitions: usize,
    pub partitions_merged: usize,
    /// Partitions that failed (only with `keep_going`; otherwise the run stops).
    pub partitions_failed: usize,
    pub frames: u64,
    /// Bytes of stored (native) data read.
    pub bytes_read: u64,
    pub threads: usize,
    /// Seconds from the start of processing to the last merge.
    pub process_seconds: f64,
    /// Seconds spent in merges (main thread).
    pub merge_seconds: f64,
    /// Seconds spent in `get_results` and assembling results.
    pub results_seconds: f64,
}

impl RunStats {
    /// Stored data read per second of processing, in GB/s (10^9 bytes).
    pub fn throughput_gbps(&self) -> f64 {
        if self.process_seconds > 0.0 { self.bytes_read as f64 / self.process_seconds / 1e9 } else { 0.0 }
    }
}

fn call<T>(shared_udf: &PlannedUdfRef<'_>, method: &'static str, r: Result<T, CallError>) -> Result<T, RunError> {
    r.map_err(|error| RunError::Udf {
        udf: shared_udf.name.to_owned(),
        source_path: shared_udf.udf.source().to_owned(),
        at: FailurePoint { method, partition: None, frames: None },
        error,
    })
}

struct PlannedUdfRef<'a> {
    udf: &'a dyn Udf,
    name: &'a str,
}

impl Run {
    /// Plan a run: check params, agree on the input dtype, declare buffers, split into
    /// partitions and negotiate the tiling.
    ///
    /// # Errors
    /// [`RunError::Invalid`] for a bad ROI, params or declarations; [`RunError::Udf`] if a
    /// UDF fails while planning.
    pub fn plan(dataset: Arc<dyn Dataset>, udfs: Vec<UdfSpec>, options: RunOptions) -> Result<Run, RunError> {
        if udfs.is_empty() {
            return Err(RunError::Invalid("no UDF to run".into()));
        }
        let shape = dataset.shape().clone();
        let nav_len = shape.nav_len();
        let stored = dataset.stored_dtype();
        if let Some(roi) = &options.roi
            && roi.len() != nav_len
        {
            return Err(RunError::Invalid(format!(
                "the ROI has {} positions, but the dataset's nav shape {:?} has {nav_len}",
                roi.len(),
                shape.nav
            )));
        }
        let threads =
            options.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
        let mut meta = DatasetMeta {
            nav_shape: shape.nav.clone(),
            sig_shape: shape.sig.clone(),
            dataset_dtype: stored.dtype,
            input_dtype: stored.dtype,
            roi_count: options.roi.as_ref().map(Roi::count),
            device_class: DeviceClass::Cpu,
            threads_per_worker: 1,
        };

        // Names, params and plans.
        let mut names: Vec<String> = Vec::new();
        let mut params = Vec::new();
        let mut plans = Vec::new();
        for spec in &udfs {
            let desc = spec.udf.description();
            let mut name = desc.name.clone();
            let mut k = 2;
            while names.contains(&name) {
                name = format!("{}-{k}", desc.name);
                k += 1;
            }
            let resolved = crate::params::resolve(&name, &desc.params, &spec.params).map_err(RunError::Invalid)?;
            let resolved = flatten_aux(&name, &desc.params, resolved, &shape.nav)?;
            let udf_ref = PlannedUdfRef { udf: spec.udf.as_ref(), name: &name };
            let mut plan = call(&udf_ref, "plan", spec.udf.plan(&resolved, &meta))?;
            if let Some(method) = options.force_method {
                plan.method = method;
            }
            if !desc.methods.contains(&plan.method) {
                return Err(RunError::Invalid(format!(
                    "'{name}' chose the {} method, but it only implements {}",
                    plan.method.name(),
                    desc.methods.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ")
                )));
            }
            names.push(name);
            params.push(resolved);
            plans.push(plan);
        }

        // One input dtype for all (API.md §6).
        meta.input_dtype = plans.iter().fold(stored.dtype, |acc, p| match p.input_dtype {
            DTypePreference::Native => acc,
            DTypePreference::Prefer(d) => result_type(d, acc),
        });

        // Buffers.
        let mut planned = Vec::new();
        for ((spec, name), plan) in udfs.iter().zip(names).zip(plans) {
            let udf_ref = PlannedUdfRef { udf: spec.udf.as_ref(), name: &name };
            let decls = call(&udf_ref, "result_buffers", spec.udf.result_buffers(&params[planned.len()], &meta))?;
            check_declarations(&name, spec.udf.description(), &decls, meta.frames(), &shape.sig)?;
            planned.push(PlannedUdf { udf: spec.udf.clone(), name, plan, decls });
        }

        // Integer files read by UDFs that all convert on read are mapped in unconverted.
        let fuses = !options.convert_in_executor
            && options.roi.is_none()
            && matches!(meta.input_dtype, DType::F32 | DType::F64)
            && FUSED_STORED.contains(&stored.dtype)
            && !stored.needs_conversion_to(stored.dtype)
            && planned.iter().all(|p| p.udf.reads_in_place() && p.udf.converts_on_read())
            && nav_len > 0
            && dataset.direct_frames(0..1, stored.dtype).is_some();
        let direct_dtype = if fuses { stored.dtype } else { meta.input_dtype };

        // Partitions and tiling.
        let count = options
            .partitions
            .unwrap_or_else(|| crate::dataset::default_partition_count(nav_len, shape.sig_len(), threads));
        let partitions = plan_partitions(nav_len, count, options.roi.as_ref());
        let intent_partition = planned.iter().any(|p| p.plan.method == Method::Partition);
        let tiling = match &options.tile_shape {
            Some(forced) => forced_tiling(forced, &shape.sig, &planned)?,
            None => {
                let requests: Vec<TileRequest> = planned
                    .iter()
                    .map(|p| TileRequest {
                        method: p.plan.method,
                        depth: p.plan.tiling.depth,
                        size: p.plan.tiling.total_size,
                    })
                    .collect();
                let first_len = partitions.first().map_or(1, Partition::len);
                // A copy is needed unless every UDF is native and the data can be mapped
                // straight in; wasm plugins always need one (into guest memory).
                let needs_copy = (stored.needs_conversion_to(meta.input_dtype) && direct_dtype == meta.input_dtype)
                    || options.roi.is_some()
                    || planned.iter().any(|p| !p.udf.reads_in_place());
                negotiate(
                    &requests,
                    &shape,
                    &dataset.base_shape(),
                    first_len,
                    meta.input_dtype.size(),
                    stored.dtype.size(),
                    needs_copy,
                )
            }
        };
        debug_assert!(!intent_partition || tiling.intent == Method::Partition || options.tile_shape.is_some());

        let frames = meta.frames();
        let result_bytes: u64 = planned
            .iter()
            .flat_map(|p| p.decls.iter().filter(|d| d.usage != BufferUse::ResultOnly).map(move |d| (p, d)))
            .map(|(_, d)| d.storage_shape(frames, &shape.sig).iter().product::<usize>() as u64 * d.dtype.size() as u64)
            .fold(0u64, u64::saturating_add);
        let cap = options.max_result_bytes.unwrap_or(DEFAULT_MAX_RESULT_BYTES);
        if result_bytes > cap {
            let largest = planned
                .iter()
                .flat_map(|p| p.decls.iter().map(move |d| (p, d)))
                .max_by_key(|(_, d)| d.storage_shape(frames, &shape.sig).iter().product::<usize>() * d.dtype.size())
                .map(|(p, d)| format!("'{}' of '{}'", d.name, p.name))
                .unwrap_or_default();
            return Err(RunError::Invalid(format!(
                "the merged results would need {:.1} GiB of memory, more than the limit of {:.1} GiB \
                 (largest buffer: {largest}); process fewer frames (a ROI) or raise --max-result-memory",
                result_bytes as f64 / (1u64 << 30) as f64,
                cap as f64 / (1u64 << 30) as f64
            )));
        }
        let shared = Arc::new(RunShared {
            dataset,
            udfs: planned,
            meta,
            partitions,
            tiling: Arc::new(tiling),
            direct_dtype,
            threads,
            roi: options.roi,
            params: RwLock::new(params),
            cancel: AtomicBool::new(false),
            interrupted: AtomicBool::new(false),
            keep_going: options.keep_going,
            shuffle_merges: options.shuffle_merges,
            keep_partition_buffers: options.keep_partition_buffers,
            frames_done: AtomicU64::new(0),
            bytes_read: AtomicU64::new(0),
        });
        let merged = (0..shared.udfs.len()).map(|u| MergeState::new(&shared, u)).collect::<Result<Vec<_>, _>>()?;
        Ok(Run { shared, merged })
    }

    /// The agreed input dtype.
    pub fn input_dtype(&self) -> DType {
        self.shared.meta.input_dtype
    }

    /// The negotiated tiling.
    pub fn tiling(&self) -> &TilingScheme {
        &self.shared.tiling
    }

    /// The partitions that will be processed (those with selected frames).
    pub fn partitions(&self) -> &[Partition] {
        &self.shared.partitions
    }

    /// Per UDF: its unique name in this run, its plan and its buffer declarations.
    pub fn udfs(&self) -> impl Iterator<Item = (&str, &RunPlan, &[BufferDecl])> {
        self.shared.udfs.iter().map(|u| (u.name.as_str(), &u.plan, u.decls.as_slice()))
    }

    /// The resolved parameters of each UDF.
    pub fn params(&self) -> Vec<Params> {
        self.shared.params.read().map(|p| p.clone()).unwrap_or_default()
    }

    /// Run to the end.
    ///
    /// # Errors
    /// The first failure of a UDF or the dataset.
    pub fn execute(self) -> Result<RunResults, RunError> {
        let mut iter = self.iter();
        for step in iter.by_ref() {
            step?;
        }
        iter.results()
    }

    /// Start the run; the iterator yields after each merged partition.
    pub fn iter(self) -> RunIter {
        RunIter::start(self)
    }
}

/// Check declarations against the rules of API.md §5.
fn check_declarations(
    name: &str,
    desc: &crate::udf::Description,
    decls: &[BufferDecl],
    frames: usize,
    sig: &[usize],
) -> Result<(), RunError> {
    for (i, d) in decls.iter().enumerate() {
        let shape = d.storage_shape(frames, sig);
        if shape.iter().try_fold(d.dtype.size(), |acc, &n| acc.checked_mul(n)).is_none_or(|b| b > isize::MAX as usize) {
            return Err(RunError::Invalid(format!(
                "'{name}' declares buffer '{}' of shape {shape:?} ({}), which is too large to allocate",
                d.name, d.dtype
            )));
        }
        if d.name.is_empty() || d.name.contains(['/', '\\']) || d.name.starts_with('.') {
            return Err(RunError::Invalid(format!(
                "'{name}' declares a buffer named {:?}, which is not a usable file name",
                d.name
            )));
        }
        if decls[..i].iter().any(|e| e.name == d.name) {
            return Err(RunError::Invalid(format!("'{name}' declares buffer '{}' twice", d.name)));
        }
        if d.usage == BufferUse::ResultOnly && !desc.custom_results {
            return Err(RunError::Invalid(format!(
                "'{name}' declares result-only buffer '{}' but has no get_results to produce it",
                d.name
            )));
        }
        if d.usage != BufferUse::ResultOnly && d.kind != BufferKind::Nav && !desc.custom_merge {
            return Err(RunError::Invalid(format!(
                "'{name}' declares {} buffer '{}' but has no custom merge; only nav buffers can be merged by default",
                match d.kind {
                    BufferKind::Sig => "sig",
                    _ => "single",
                },
                d.name
            )));
        }
    }
    Ok(())
}

/// Nav aux arrays: check the leading axes are the nav shape (or flat) and flatten them to
/// `(nav_len, ..extra)`.
fn flatten_aux(
    name: &str,
    specs: &[crate::udf::ParamSpec],
    mut params: Params,
    nav: &[usize],
) -> Result<Params, RunError> {
    let nav_len: usize = nav.iter().product();
    for spec in specs.iter().filter(|s| s.nav_aux) {
        let Some(ParamValue::Array(array)) = params.get(&spec.name) else { continue };
        let shape = array.shape();
        let extra = if shape.len() >= nav.len() && shape[..nav.len()] == *nav {
            shape[nav.len()..].to_vec()
        } else if shape.first() == Some(&nav_len) {
            shape[1..].to_vec()
        } else {
            return Err(RunError::Invalid(format!(
                "aux parameter '{}' of '{name}' has shape {shape:?}; its leading axes must be the nav shape {nav:?} (or {nav_len})",
                spec.name
            )));
        };
        let mut flat = vec![nav_len];
        flat.extend(extra);
        let reshaped = (**array).clone().reshape(&flat).map_err(|e| RunError::Invalid(e.to_string()))?;
        params.set(&spec.name, ParamValue::Array(Arc::new(reshaped)));
    }
    Ok(params)
}

/// A tiling from a forced `[depth, ..slice]` shape, with the method rules still applied.
fn forced_tiling(forced: &[usize], sig: &[usize], udfs: &[PlannedUdf]) -> Result<TilingScheme, RunError> {
    if forced.len() != sig.len() + 1 || forced.contains(&0) {
        return Err(RunError::Invalid(format!(
            "tile shape {forced:?} must be [depth, ..{} positive signal extents]",
            sig.len()
        )));
    }
    let intent = if udfs.iter().any(|u| u.plan.method == Method::Partition) {
        Method::Partition
    } else if udfs.iter().any(|u| u.plan.method == Method::Frame) {
        Method::Frame
    } else {
        Method::Tile
    };
    let slice = if intent == Method::Tile { &forced[1..] } else { sig };
    Ok(TilingScheme::from_tile_shape(forced[0], slice, sig, intent))
}

/// Progress of a running run, readable (and cancellable) from any thread.
#[derive(Clone)]
pub struct Progress {
    shared: Arc<RunShared>,
}

impl Progress {
    /// Frames processed so far (updated per tile).
    pub fn frames_done(&self) -> u64 {
        self.shared.frames_done.load(Ordering::Relaxed)
    }

    /// Frames the run processes.
    pub fn frames_total(&self) -> u64 {
        self.shared.meta.frames() as u64
    }

    /// Ask the run to stop (e.g. on Ctrl-C): no new partitions start, running ones stop
    /// at the next tile; what is merged stays available.
    pub fn interrupt(&self) {
        self.shared.interrupted.store(true, Ordering::Relaxed);
        self.shared.cancel.store(true, Ordering::Relaxed);
    }
}

/// One merged partition, as yielded by [`RunIter`].
#[derive(Debug, Clone)]
pub struct MergeStep {
    /// Index of the merged partition.
    pub partition: usize,
    /// Partitions merged so far.
    pub merged: usize,
    /// Partitions in the run.
    pub total: usize,
}

/// One UDF's output for a partition: its exported buffers and instance stats.
pub(crate) type UdfOutput = (Vec<NamedBuffer>, Option<InstanceStats>);

/// Outcome of one partition on a worker: per UDF its output.
pub(crate) struct PartitionOutcome {
    pub index: usize,
    pub result: Result<Vec<UdfOutput>, RunError>,
}

/// A running run. Iterate to drive it; call [`RunIter::results`] at any point for the
/// results merged so far.
///
/// Each item is a merged partition or an error. After an error the iterator ends —
/// unless the run has `keep_going`, in which case a failed partition is reported and the
/// others go on; either way [`RunIter::results`] still gives what was merged (the failed
/// partitions' positions are invalid) and [`RunIter::failures`] says what failed.
pub struct RunIter {
    shared: Arc<RunShared>,
    merged: Vec<MergeState>,
    /// Merged nav positions (compressed).
    damage: Vec<bool>,
    receiver: Option<mpsc::Receiver<PartitionOutcome>>,
    /// Outcomes received but not merged yet (all of them when merges are shuffled).
    pending: std::collections::VecDeque<PartitionOutcome>,
    driver: Option<std::thread::JoinHandle<()>>,
    /// Per UDF: instance stats of each merged partition.
    instances: Vec<Vec<(usize, InstanceStats)>>,
    /// Per UDF: each partition's exported buffers (with `keep_partition_buffers`).
    kept: Vec<Vec<(usize, Vec<NamedBuffer>)>>,
    started: Instant,
    stats: RunStats,
    failures: Vec<PartitionFailure>,
    failed: bool,
}

impl RunIter {
    fn start(run: Run) -> RunIter {
        let Run { shared, merged } = run;
        let udfs = merged.len();
        let (tx, rx) = mpsc::sync_channel::<PartitionOutcome>(shared.threads * 2);
        let worker_shared = shared.clone();
        let driver = std::thread::Builder::new()
            .name("udf-host-driver".into())
            .spawn(move || worker::drive(worker_shared, tx))
            .ok();
        let frames = shared.meta.frames();
        let stats = RunStats { partitions: shared.partitions.len(), threads: shared.threads, ..RunStats::default() };
        RunIter {
            shared,
            merged,
            damage: vec![false; frames],
            receiver: Some(rx),
            pending: std::collections::VecDeque::new(),
            driver,
            instances: vec![Vec::new(); udfs],
            kept: vec![Vec::new(); udfs],
            started: Instant::now(),
            stats,
            failures: Vec::new(),
            failed: false,
        }
    }

    /// A handle for progress displays and cancellation from other threads.
    pub fn progress(&self) -> Progress {
        Progress { shared: self.shared.clone() }
    }

    /// Partitions that failed so far (with `keep_going`, or the one that stopped the run).
    pub fn failures(&self) -> &[PartitionFailure] {
        &self.failures
    }

    /// Whether the run was interrupted with [`Progress::interrupt`].
    pub fn interrupted(&self) -> bool {
        self.shared.interrupted.load(Ordering::Relaxed)
    }

    /// Merged nav positions so far (compressed; LiberTEM's `damage`).
    pub fn damage(&self) -> &[bool] {
        &self.damage
    }

    /// Replace parameters of UDF `udf` for partitions started from now on
    /// (LiberTEM's `update_parameters_experimental`). Only given names change.
    ///
    /// # Errors
    /// Unknown parameter or wrong type.
    pub fn update_params(&self, udf: usize, updates: &Params) -> Result<(), RunError> {
        let planned = self.shared.udfs.get(udf).ok_or_else(|| RunError::Invalid(format!("no UDF {udf}")))?;
        let desc = planned.udf.description();
        let mut all = self.shared.params.write().map_err(|_| RunError::Invalid("parameter lock poisoned".into()))?;
        let mut merged = all[udf].clone();
        for p in updates.iter() {
            merged.set(&p.name, p.value.clone());
        }
        let resolved = crate::params::resolve(&planned.name, &desc.params, &merged).map_err(RunError::Invalid)?;
        all[udf] = flatten_aux(&planned.name, &desc.params, resolved, &self.shared.meta.nav_shape)?;
        Ok(())
    }

    /// The results of what has been merged so far (calls `get_results`; LiberTEM's
    /// `UDFResultsLazy.buffers`).
    ///
    /// # Errors
    /// A UDF's `get_results` fails or returns something that breaks the rules.
    pub fn results(&self) -> Result<RunResults, RunError> {
        let started = Instant::now();
        let params =
            self.shared.params.read().map_err(|_| RunError::Invalid("parameter lock poisoned".into()))?.clone();
        let udfs = self
            .merged
            .iter()
            .enumerate()
            .map(|(u, state)| {
                let mut r = results::finish(&self.shared, u, &params[u], state, &self.damage)?;
                r.instances = self.instances[u].clone();
                Ok(r)
            })
            .collect::<Result<Vec<_>, RunError>>()?;
        let mut stats = self.stats.clone();
        stats.bytes_read = self.shared.bytes_read.load(Ordering::Relaxed);
        stats.results_seconds = started.elapsed().as_secs_f64();
        Ok(RunResults { udfs, stats, damage: self.damage.clone(), input_dtype: self.shared.meta.input_dtype })
    }

    /// The next partition outcome to merge: in completion order, or — with shuffled
    /// merges — all outcomes first, then in a seeded random order.
    fn next_outcome(&mut self) -> Option<PartitionOutcome> {
        if let Some(seed) = self.shared.shuffle_merges {
            if let Some(rx) = self.receiver.take() {
                self.pending.extend(rx.iter());
                let mut all: Vec<PartitionOutcome> = self.pending.drain(..).collect();
                // From partition order, not completion order: the same seed gives the same
                // merge order in every run.
                all.sort_by_key(|o| o.index);
                // A seeded Fisher-Yates shuffle (splitmix64 as the generator).
                let mut state = seed;
                for i in (1..all.len()).rev() {
                    state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                    let mut z = state;
                    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                    z ^= z >> 31;
                    all.swap(i, (z % (i as u64 + 1)) as usize);
                }
                self.pending.extend(all);
            }
            return self.pending.pop_front();
        }
        self.receiver.as_ref()?.recv().ok()
    }

    /// Each partition's exported buffers for UDF `udf`, in merge order (only with
    /// `RunOptions::keep_partition_buffers`).
    pub fn partition_buffers(&self, udf: usize) -> &[(usize, Vec<NamedBuffer>)] {
        self.kept.get(udf).map_or(&[], Vec::as_slice)
    }

    fn failure_record(&self, index: usize, error: &RunError) -> PartitionFailure {
        let frames = self
            .shared
            .partitions
            .iter()
            .find(|p| p.index == index)
            .and_then(|p| Some((*p.frames.first()?, *p.frames.last()?)));
        let (udf, at) = match error {
            RunError::Udf { udf, at, .. } => (Some(udf.clone()), Some(at.clone())),
            _ => (None, None),
        };
        PartitionFailure { partition: index, frames, udf, at, error: error.to_string() }
    }

    fn stop(&mut self) {
        self.shared.cancel.store(true, Ordering::Relaxed);
        self.receiver = None;
        if let Some(driver) = self.driver.take() {
            let _ = driver.join();
        }
    }
}

impl Iterator for RunIter {
    type Item = Result<MergeStep, RunError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let Some(outcome) = self.next_outcome() else {
            // All workers done.
            self.receiver = None;
            if let Some(driver) = self.driver.take() {
                let _ = driver.join();
            }
            self.stats.process_seconds = self.started.elapsed().as_secs_f64();
            if self.shared.cancel.load(Ordering::Relaxed) && self.stats.partitions_merged < self.stats.partitions {
                self.failed = true;
                return Some(Err(RunError::Cancelled));
            }
            return None;
        };
        let buffers = match outcome.result {
            Ok(buffers) => buffers,
            Err(_) if self.interrupted() => {
                // Everything failing after an interrupt is its consequence, not a failure.
                self.failed = true;
                self.stop();
                return Some(Err(RunError::Cancelled));
            }
            Err(RunError::Cancelled) if self.shared.keep_going => return self.next(),
            Err(e) => {
                let failure = self.failure_record(outcome.index, &e);
                if !matches!(e, RunError::Cancelled) {
                    self.failures.push(failure);
                }
                if self.shared.keep_going && !matches!(e, RunError::Cancelled) {
                    self.stats.partitions_failed += 1;
                } else {
                    self.failed = true;
                    self.stop();
                }
                return Some(Err(e));
            }
        };
        let merge_started = Instant::now();
        let Some(position) = self.shared.partitions.iter().position(|p| p.index == outcome.index) else {
            self.failed = true;
            self.stop();
            return Some(Err(RunError::Invalid(format!("internal: unknown partition {}", outcome.index))));
        };
        let params = match self.shared.params.read() {
            Ok(p) => p.clone(),
            Err(_) => return Some(Err(RunError::Invalid("parameter lock poisoned".into()))),
        };
        for (u, (src, stats)) in buffers.into_iter().enumerate() {
            let partition = &self.shared.partitions[position];
            if let Err(e) = self.merged[u].merge_partition(&self.shared, u, &params[u], partition, &src, &self.damage) {
                self.failed = true;
                self.stop();
                return Some(Err(e));
            }
            if let Some(stats) = stats {
                self.instances[u].push((partition.index, stats));
            }
            if self.shared.keep_partition_buffers {
                self.kept[u].push((partition.index, src));
            }
        }
        let partition = &self.shared.partitions[position];
        let start = partition.origin as usize;
        self.damage[start..start + partition.len()].fill(true);
        self.stats.partitions_merged += 1;
        self.stats.frames += partition.len() as u64;
        self.stats.merge_seconds += merge_started.elapsed().as_secs_f64();
        self.stats.process_seconds = self.started.elapsed().as_secs_f64();
        Some(Ok(MergeStep {
            partition: partition.index,
            merged: self.stats.partitions_merged,
            total: self.stats.partitions,
        }))
    }
}

impl Drop for RunIter {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Initial merged buffers: zeros, or what the UDF's main-side preprocess makes.
pub(crate) fn initial_buffers(shared: &RunShared, u: usize) -> Result<Vec<NdArray>, RunError> {
    let planned = &shared.udfs[u];
    let frames = shared.meta.frames();
    let decls: Vec<&BufferDecl> = planned.decls.iter().filter(|d| d.usage != BufferUse::ResultOnly).collect();
    if !planned.udf.description().main_preprocess {
        return Ok(decls
            .iter()
            .map(|d| NdArray::zeros(d.dtype, &d.storage_shape(frames, &shared.meta.sig_shape)))
            .collect());
    }
    let params = shared.params.read().map_err(|_| RunError::Invalid("parameter lock poisoned".into()))?;
    let main_params = worker::partition_params(&params[u], planned.udf.description(), shared, None);
    let at = |method| FailurePoint { method, partition: None, frames: None };
    let ctx = InitContext { params: &main_params, dataset: &shared.meta, partition: None };
    let mut runner = planned.udf.start(ctx).map_err(|e| shared.udf_error(u, at("init (main)"), e))?;
    runner.preprocess().map_err(|e| shared.udf_error(u, at("preprocess (main)"), e))?;
    let exported = runner.export().map_err(|e| shared.udf_error(u, at("export_buffers (main)"), e))?;
    let checked = worker::check_exported(&planned.decls, exported, frames, &shared.meta.sig_shape)
        .map_err(|e| shared.udf_error(u, at("export_buffers (main)"), e))?;
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_point_reads_well() {
        let at = FailurePoint { method: "process", partition: Some(3), frames: Some((96, 127)) };
        assert_eq!(at.to_string(), "process, partition 3, frames 96..=127");
    }

    #[test]
    fn run_stats_throughput() {
        let s = RunStats { bytes_read: 2_000_000_000, process_seconds: 0.5, ..Default::default() };
        assert!((s.throughput_gbps() - 4.0).abs() < 1e-12);
    }
}
