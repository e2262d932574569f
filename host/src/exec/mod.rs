//! The executor: plans a run once, runs its partitions, merges what they return, and
//! finishes the results.
//!
//! A run is three pieces that any engine can drive — this process's thread pool, a
//! Dask cluster, LiberTEM:
//!
//! | type | role |
//! |------|------|
//! | [`Plan`] | made once ([`Run::plan`]): dataset spec, UDF origins with hashes, resolved params, ROI, partitions, tiling, input dtype, limits; serde, so it can be shipped |
//! | [`Worker`] | the plan with its dataset opened and UDFs loaded; [`Worker::run_partition`] gives a [`PartitionOutput`] (raw little-endian bytes on the wire: [`PartitionOutput::to_bytes`]) |
//! | [`Merger`] | takes `PartitionOutput`s in any order and offers results (valid masks, damage) at any point |
//! | [`Run`], [`RunIter`] | the in-process engine: a rayon pool of workers feeding one merger (LiberTEM's `run_udf_iter`) |
//! | [`RunResults`] | final results of every UDF, with valid masks |
//!
//! In one process:
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use udf_host::{dataset, exec, wasm};
//! let data = dataset::DatasetSpec::file("data.npy", Default::default()).open()?;
//! let runtime = wasm::WasmRuntime::new(Default::default())?;
//! let (sum, _) = runtime.load("sum.wasm".as_ref())?;
//! let spec = exec::UdfSpec { udf: Arc::new(sum), params: Default::default() };
//! let results = exec::Run::plan(data, vec![spec], exec::RunOptions::default())?.execute()?;
//! println!("{:?}", results.udfs[0].buffers[0].data.shape());
//! # Ok(()) }
//! ```
//!
//! By hand, as another engine does it: plan here, run partitions anywhere that has the
//! data and the plugins (each from the JSON plan), merge here in completion order.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let (data, specs): (udf_host::dataset::OpenedDataset, Vec<udf_host::exec::UdfSpec>) = todo!();
//! use std::sync::Arc;
//! use udf_host::{exec, loader::Loader};
//! let run = exec::Run::plan(data, specs, exec::RunOptions::default())?;
//! let json = run.as_plan().to_json();                      // ship this
//! let plan = Arc::new(exec::Plan::from_json(&json)?);     // on a worker:
//! let worker = exec::Worker::load(plan.clone(), &Loader::for_plan(&plan)?)?;
//! let outputs: Vec<Vec<u8>> =
//!     plan.partition_indices().map(|i| worker.run_partition(i).map(|o| o.to_bytes())).collect::<Result<_, _>>()?;
//! let mut merger = run.merger()?;                          // back on the client:
//! for bytes in outputs { merger.merge(exec::PartitionOutput::from_bytes(&bytes)?)?; }
//! let results = merger.results()?;
//! # Ok(()) }
//! ```

mod iter;
mod limits;
mod merge;
mod partition;
mod plan;
mod result_memory;
mod results;
mod wire;

pub use iter::{MergeStep, Progress, RunIter};
pub use limits::Limits;
pub use merge::{MergeState, Merger};
pub use partition::{Control, PartitionOutput, UdfOutput, Worker, check_exported};
pub use plan::{PLAN_VERSION, Plan, PlannedUdf, UdfLoader};
pub use result_memory::{ExtraBytes, ResultExtra};
pub use results::{ResultBuffer, RunResults, UdfResults, check_results};
pub use wire::WireError;

use crate::dataset::{DatasetError, OpenedDataset, Partition, TilingScheme};
use crate::dtype::DType;
use crate::roi::Roi;
use crate::udf::{BufferDecl, CallError, DTypePreference, ErrorKind, Method, Params, RunPlan, Udf};
use serde::Serialize;
use std::sync::Arc;

/// A UDF and the parameters given for it (defaults are filled in by [`Run::plan`]).
#[derive(Clone)]
pub struct UdfSpec {
    pub udf: Arc<dyn Udf>,
    pub params: Params,
}

impl UdfSpec {
    /// The same spec with the UDF's copy for one run.
    pub(crate) fn for_run(self) -> UdfSpec {
        UdfSpec { udf: for_run(self.udf), params: self.params }
    }
}

/// The copy of `udf` a run uses ([`Udf::for_run`]; the UDF itself where it keeps no
/// state): what the run leaves in it goes when the run is dropped.
pub(crate) fn for_run(udf: Arc<dyn Udf>) -> Arc<dyn Udf> {
    udf.for_run().unwrap_or(udf)
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
    /// Refuse runs whose results would need more host memory than this (default
    /// [`default_max_result_bytes`]: half the machine's memory).
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
    /// The limits the wasm plugins run under, recorded in the plan so that workers in
    /// other processes apply the same (default: the runtime's defaults).
    pub limits: Limits,
    /// Where built-ins with a CUDA kernel compute (docs/gpu.md): the plan records each
    /// UDF's device ([`PlannedUdf::device`]).
    pub device: crate::cuda::Device,
    /// What the front end makes of the results beyond them (previews it draws, also of
    /// snapshots), counted with them against `max_result_bytes`.
    pub result_extra: Option<ResultExtra>,
}

/// Default cap on the host memory of a run's results (merged buffers, results, valid
/// masks, expansion to the scan): half the machine's memory, as the plugins' total
/// budget ([`crate::wasm::default_memory_total`]).
pub fn default_max_result_bytes() -> u64 {
    crate::wasm::default_memory_total() as u64
}

/// A failure of a run: a partition that failed (in a run that went on with
/// `keep_going`, or that stopped it), a UDF's merge of a partition, or a UDF's
/// `get_results` (no partition).
#[derive(Debug, Clone, Serialize)]
pub struct PartitionFailure {
    /// Index of the partition (`None`: a main-side call after all merges, such as
    /// `get_results`).
    pub partition: Option<usize>,
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

impl FailurePoint {
    /// A main-side call (no partition, no frames).
    pub fn main(method: &'static str) -> Self {
        FailurePoint { method, partition: None, frames: None }
    }

    /// A call on the frames of `partition` (`frames`: the frames involved, a subset).
    pub(crate) fn worker(method: &'static str, partition: usize, frames: &[u64]) -> Self {
        FailurePoint { method, partition: Some(partition), frames: first_last(frames) }
    }
}

pub(crate) fn first_last(frames: &[u64]) -> Option<(u64, u64)> {
    Some((*frames.first()?, *frames.last()?))
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
    /// A bug in udf-host itself (a broken invariant), not in the input or a plugin.
    #[error("internal error in udf-host (please report it): {0}")]
    Internal(String),
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

    /// When a UDF failed in a run whose input dtype another UDF of `plan` raised above
    /// its own preference, a note saying so: its error ("the tile holds float64, not
    /// float32") is about a dtype it never asked for.
    pub fn dtype_note(&self, plan: &Plan) -> Option<String> {
        let RunError::Udf { udf, .. } = self else { return None };
        let (stored, input) = (plan.stored_dtype.dtype, plan.meta.input_dtype);
        let wanted = |preference: DTypePreference| match preference {
            DTypePreference::Native => stored,
            DTypePreference::Prefer(d) => crate::dtype::result_type(d, stored),
        };
        let own = wanted(plan.udfs.iter().find(|u| u.name == *udf)?.plan.input_dtype);
        let raisers: Vec<String> = plan
            .udfs
            .iter()
            .filter(|u| u.name != *udf && matches!(u.plan.input_dtype, DTypePreference::Prefer(_)))
            .filter(|u| wanted(u.plan.input_dtype) == input)
            .map(|u| format!("'{}'", u.name))
            .collect();
        (own != input && !raisers.is_empty()).then(|| {
            format!(
                "'{udf}' asks for {own} input, but {} raised the run's input dtype to {input}; run '{udf}' in a run \
                 of its own if it cannot take {input}",
                raisers.join(", ")
            )
        })
    }
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

/// A planned run in this process: call [`Run::execute`] or iterate with [`Run::iter`];
/// or take its [`Plan`] to run partitions elsewhere.
pub struct Run {
    worker: Arc<Worker>,
    merger: Merger,
    policy: Policy,
}

/// How the in-process engine drives a run (not part of the plan: another engine has
/// its own).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Policy {
    pub keep_going: bool,
    pub shuffle_merges: Option<u64>,
}

impl Run {
    /// Plan a run: check params, agree on the input dtype, declare buffers, split into
    /// partitions and negotiate the tiling (the steps of [`Plan`]), then set up the
    /// merged buffers (calling a main-side `preprocess` where a UDF has one).
    ///
    /// `dataset` is an [`OpenedDataset`] (from a [`DatasetSpec`](crate::dataset::DatasetSpec):
    /// the plan can be shipped) or any `Arc` of a dataset (it runs here only).
    ///
    /// # Errors
    /// [`RunError::Invalid`] for a bad ROI, params or declarations; [`RunError::Udf`] if a
    /// UDF fails while planning.
    pub fn plan(dataset: impl Into<OpenedDataset>, udfs: Vec<UdfSpec>, options: RunOptions) -> Result<Run, RunError> {
        let opened = dataset.into();
        let udfs: Vec<UdfSpec> = udfs.into_iter().map(UdfSpec::for_run).collect();
        let plan = Arc::new(Plan::make(&opened, &udfs, &options)?);
        let worker = Arc::new(Worker::new(plan, opened.dataset, udfs.into_iter().map(|s| s.udf).collect())?);
        let mut merger =
            Merger::with_plan_hash(worker.plan().clone(), worker.plan_hash().to_owned(), worker.udfs().to_vec())?;
        merger.keep_partition_buffers(options.keep_partition_buffers);
        let policy = Policy { keep_going: options.keep_going, shuffle_merges: options.shuffle_merges };
        Ok(Run { worker, merger, policy })
    }

    /// The plan: serialise it ([`Plan::to_json`]) to run partitions in other processes.
    pub fn as_plan(&self) -> &Plan {
        self.worker.plan()
    }

    /// The worker of this process (for running single partitions by hand).
    pub fn worker(&self) -> &Arc<Worker> {
        &self.worker
    }

    /// A fresh merger for this run's plan and UDFs, for merging partitions run
    /// elsewhere.
    ///
    /// # Errors
    /// A UDF's main-side `preprocess` fails.
    pub fn merger(&self) -> Result<Merger, RunError> {
        Merger::with_plan_hash(
            self.worker.plan().clone(),
            self.worker.plan_hash().to_owned(),
            self.worker.udfs().to_vec(),
        )
    }

    /// The agreed input dtype.
    pub fn input_dtype(&self) -> DType {
        self.as_plan().meta.input_dtype
    }

    /// The negotiated tiling.
    pub fn tiling(&self) -> &TilingScheme {
        &self.as_plan().tiling
    }

    /// The partitions that will be processed (those with selected frames).
    pub fn partitions(&self) -> &[Partition] {
        &self.as_plan().partitions
    }

    /// Per UDF: its unique name in this run, its plan and its buffer declarations.
    pub fn udfs(&self) -> impl Iterator<Item = (&str, &RunPlan, &[BufferDecl])> {
        self.as_plan().udfs.iter().map(|u| (u.name.as_str(), &u.plan, u.decls.as_slice()))
    }

    /// The resolved parameters of each UDF.
    pub fn params(&self) -> Vec<Params> {
        self.as_plan().udfs.iter().map(|u| u.params.clone()).collect()
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
        RunIter::start(self.worker, self.merger, self.policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_point_reads_well() {
        let at = FailurePoint { method: "process", partition: Some(3), frames: Some((96, 127)) };
        assert_eq!(at.to_string(), "process, partition 3, frames 96..=127");
        assert_eq!(FailurePoint::worker("init", 2, &[7]).to_string(), "init, partition 2, frame 7");
    }

    #[test]
    fn run_stats_throughput() {
        let s = RunStats { bytes_read: 2_000_000_000, process_seconds: 0.5, ..Default::default() };
        assert!((s.throughput_gbps() - 4.0).abs() < 1e-12);
    }
}
