//! The [`Udf`] abstraction the executor runs: wasm plugins and native built-ins alike.
//!
//! These types mirror `wit/udf.wit` on the host side. A [`Udf`] describes itself,
//! plans a run, declares buffers, starts a [`PartitionRunner`] per partition, and
//! merges and finishes results as pure functions.
//!
//! | item | role |
//! |------|------|
//! | [`Udf`], [`PartitionRunner`] | the main-side functions and one partition's instance |
//! | [`Tile`], [`TileSource`] | a tile handed over, or one still to be read (into guest memory) |
//! | [`UdfOrigin`] | where a UDF comes from, so another process can load the same one |
//! | [`SigSlice`], [`TilingScheme`], [`SliceRuns`] | the contract's geometry ([`geometry`](self)) |
//! | [`Description`], [`Params`], [`BufferDecl`], [`DatasetMeta`], ... | the contract's data types |
//! | [`CallError`] | why a call into a UDF failed |
//! | [`rules`] | the names and counts a UDF may declare |
//!
//! This module is the contract layer: it imports only the element types below it
//! ([`crate::dtype`], [`crate::array`]); datasets, the executor, the wasm runtime and the
//! built-ins all build on it.

mod class_source;
mod geometry;
pub mod rules;
mod types;

pub use class_source::{ClassSource, ClassSourceError, MAX_CLASS_SOURCE_BYTES};
pub use geometry::{SigSlice, SliceRuns, TilingScheme};
pub use types::*;

use crate::dtype::DType;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// A tile handed to a UDF: `frames` consecutive selected frames times `sig`.
#[derive(Debug, Clone, Copy)]
pub struct Tile<'a> {
    /// Compressed flat nav index of the first frame.
    pub origin: u64,
    pub frames: usize,
    pub scheme_index: usize,
    pub sig: &'a SigSlice,
    /// True flat nav index of every frame.
    pub true_nav_indices: &'a [u64],
    /// The run's input dtype — or, only in runs where every UDF
    /// [converts on read](Udf::converts_on_read), possibly the stored integer dtype of
    /// the file, which the UDF converts to the input dtype itself as it reads.
    pub dtype: DType,
    /// `frames * sig.len()` elements, C order, native-endian, aligned for `dtype`.
    pub data: &'a [u8],
}

/// A tile not read yet: the executor's handle to read it into memory the runner
/// chooses (see [`PartitionRunner::process_unread`]).
pub trait TileSource: Sync {
    /// Read the tile's `frames * sig.len()` elements of the tile's dtype (C order,
    /// native-endian) into `out`, which is aligned for the dtype.
    ///
    /// # Errors
    /// The dataset could not be read; the executor recovers its own error from the
    /// [`TileReadError`].
    fn read_into(&self, out: &mut [u8]) -> Result<(), TileReadError>;
}

/// Why a [`TileSource`] could not be read: the dataset's error, boxed so that this layer
/// need not know the dataset's error type (the executor downcasts it back).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct TileReadError(pub Box<dyn std::error::Error + Send + Sync>);

/// Why [`PartitionRunner::process_unread`] failed: reading the tile, or the UDF.
#[derive(Debug, thiserror::Error)]
pub enum UnreadError {
    #[error(transparent)]
    Read(#[from] TileReadError),
    #[error(transparent)]
    Udf(#[from] CallError),
}

impl Tile<'_> {
    /// Typed elements; `None` if `T` is not the tile's dtype.
    pub fn as_slice<T: crate::dtype::Element>(&self) -> Option<&[T]> {
        (T::DTYPE == self.dtype).then(|| bytemuck::cast_slice(self.data))
    }
}

/// The kind of an error a UDF returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    BadParam,
    InvalidData,
    Internal,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::BadParam => "bad parameter",
            ErrorKind::InvalidData => "invalid data",
            ErrorKind::Internal => "internal error",
        })
    }
}

/// Why a call into a UDF failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    /// The UDF returned a typed error.
    #[error("{kind}: {message}")]
    Returned { kind: ErrorKind, message: String },
    /// The instance trapped (panic, out-of-bounds access, limit); its last log lines
    /// are attached.
    #[error("{message}{}", format_log_tail(log_tail))]
    Trap { message: String, log_tail: Vec<String> },
    /// The UDF broke the contract (returned something malformed).
    #[error("broke the contract: {0}")]
    Contract(String),
}

fn format_log_tail(lines: &[String]) -> String {
    if lines.is_empty() {
        String::new()
    } else {
        format!("\n  last log lines of the plugin:\n    {}", lines.join("\n    "))
    }
}

impl CallError {
    pub fn internal(message: impl Into<String>) -> Self {
        CallError::Returned { kind: ErrorKind::Internal, message: message.into() }
    }

    pub fn bad_param(message: impl Into<String>) -> Self {
        CallError::Returned { kind: ErrorKind::BadParam, message: message.into() }
    }

    pub fn invalid_data(message: impl Into<String>) -> Self {
        CallError::Returned { kind: ErrorKind::InvalidData, message: message.into() }
    }
}

/// How the command line and plans name a built-in where a plugin path would go:
/// `builtin:sum`.
pub const BUILTIN_PREFIX: &str = "builtin:";

/// Where a UDF comes from: what a run plan records so that another process (a Dask
/// worker, a test) can load the same UDF.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum UdfOrigin {
    /// A native built-in, by its registry name (`sum`, `ring`, ...).
    Builtin { name: String },
    /// A wasm component: where it was loaded from, and the SHA-256 of its bytes (hex),
    /// which a worker checks before it runs anything.
    Wasm { path: PathBuf, sha256: String },
    /// Made in this process only (tests, the conformance kit's wrappers): a plan with
    /// such a UDF runs here but cannot be shipped.
    InProcess { source: String },
    /// A LiberTEM UDF class (`.py:Class`, `udf_host.UDF`): the Python runner component
    /// (path and SHA-256, as for `Wasm`) and the class's source as data, with its hash.
    #[serde(rename = "python-class")]
    PythonClass { runner: PathBuf, runner_sha256: String, class: ClassSource },
}

impl UdfOrigin {
    /// The SHA-256 of the wasm component this UDF runs in (a plugin's own, or the Python
    /// runner's for a class): the bytes a worker needs.
    pub fn component_sha256(&self) -> Option<&str> {
        match self {
            UdfOrigin::Wasm { sha256, .. } => Some(sha256),
            UdfOrigin::PythonClass { runner_sha256, .. } => Some(runner_sha256),
            UdfOrigin::Builtin { .. } | UdfOrigin::InProcess { .. } => None,
        }
    }
}

/// Stored dtypes a UDF that [converts on read](Udf::converts_on_read) must accept in
/// tiles (into an `f32` or `f64` input dtype).
pub const FUSED_STORED: [DType; 6] = [DType::U8, DType::U16, DType::U32, DType::I8, DType::I16, DType::I32];

/// A user-defined function the executor can run: a wasm plugin or a native built-in.
///
/// The main-side methods (`plan`, `result_buffers`, `merge`, `get_results`) may be
/// called from any thread; each partition gets its own [`PartitionRunner`].
pub trait Udf: Send + Sync {
    /// The static description.
    fn description(&self) -> &Description;

    /// Where the UDF comes from, for messages: a file path or `builtin:NAME`.
    fn source(&self) -> &str;

    /// Where the UDF comes from, for run plans: by default a built-in when
    /// [`source`](Self::source) is `builtin:NAME`, else made in this process. Wasm
    /// plugins say their path and hash.
    fn origin(&self) -> UdfOrigin {
        match self.source().strip_prefix(BUILTIN_PREFIX) {
            Some(name) => UdfOrigin::Builtin { name: name.to_owned() },
            None => UdfOrigin::InProcess { source: self.source().to_owned() },
        }
    }

    /// Stop calls into this UDF that are running now, as soon as it can (a wasm plugin
    /// traps with "interrupted"); native code stops at the next tile anyway. Used when
    /// the user interrupts a run.
    fn interrupt(&self) {}

    /// A copy of this UDF for one run, or `None` when it keeps no state between calls
    /// (most built-ins) or is a run's copy already. The executor makes one when a run is
    /// planned or a worker is loaded and uses only it: what the run leaves behind (a wasm
    /// plugin's main-side instance and its memory, its log budget, its interrupt counter;
    /// a mask built-in's masks, made once for all its partitions) is the copy's and goes
    /// when the run is dropped, while whoever loaded the UDF (a notebook's `Context`, a
    /// Dask worker) keeps it for the next run. Runs planned with
    /// the same copy share it (the conformance kit's determinism check does, to see state
    /// a plugin keeps between runs).
    fn for_run(&self) -> Option<Arc<dyn Udf>> {
        None
    }

    /// Whether the UDF can take tiles straight from the file mapping, without a copy
    /// (native built-ins). Wasm plugins always need one: into guest memory.
    fn reads_in_place(&self) -> bool {
        false
    }

    /// Whether `process` also accepts tiles in the dataset's stored dtype when the run's
    /// input dtype is a float and the file holds integers ([`FUSED_STORED`]), converting
    /// each element itself, as an `as` cast (the values the executor's conversion would
    /// give). When every UDF of a run says yes, reads in place and there is no ROI, the
    /// executor hands over the file mapping unconverted: the conversion then happens in
    /// registers instead of through a copied tile. Tiles of the input dtype must still be
    /// accepted (the executor falls back to them where it cannot map frames directly).
    fn converts_on_read(&self) -> bool {
        false
    }

    /// Run-time choices for a run.
    fn plan(&self, params: &Params, dataset: &DatasetMeta) -> Result<RunPlan, CallError>;

    /// Result buffer declarations for a run (`dataset.input_dtype` is final).
    fn result_buffers(&self, params: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>, CallError>;

    /// Start a partition (or, with `partition: None`, the main-side preprocess): a new
    /// instance with zeroed buffers.
    fn start(&self, ctx: InitContext<'_>) -> Result<Box<dyn PartitionRunner + '_>, CallError>;

    /// Merge a partition's buffers into the merged state. Only called with
    /// `custom_merge`; without it the executor copies nav rows itself (this default
    /// says so if it is called anyway).
    fn merge(
        &self,
        ctx: MergeContext<'_>,
        dest: &mut [BufferViewMut<'_>],
        src: &[NamedBuffer],
    ) -> Result<(), CallError> {
        let _ = (ctx, dest, src);
        Err(CallError::Contract("merge was called, but the UDF has no custom merge".into()))
    }

    /// Final results from the merged buffers. Only called with `custom_results`;
    /// without it the merged buffers are the results (this default returns none, which
    /// means the same).
    fn get_results(&self, ctx: ResultsContext<'_>, buffers: &[NamedBuffer]) -> Result<Vec<ResultEntry>, CallError> {
        let _ = (ctx, buffers);
        Ok(Vec::new())
    }
}

/// Resource use of one partition's instance, for reports (not limits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct InstanceStats {
    /// Largest linear memory the instance had, in bytes.
    pub peak_memory: usize,
    /// Calls into the instance (init, preprocess, every process, postprocess, export).
    pub calls: u64,
    /// Seconds spent in those calls.
    pub call_seconds: f64,
    /// Of which in `process`.
    pub process_calls: u64,
    pub process_seconds: f64,
    /// Timers the plugin waited on (`sleep`, a poll with a timeout): under the frozen
    /// clock they are due at once, so waiting cannot pace a plugin (the conformance kit
    /// flags it).
    #[serde(default)]
    pub timer_waits: u64,
    /// The most host arrays (the contract's `arrays` interface) alive at once.
    #[serde(default)]
    pub peak_arrays: usize,
    /// Host arrays still alive when the stats were taken (after the partition's export:
    /// result buffers and parameters a plugin keeps as host arrays, and any it leaked).
    #[serde(default)]
    pub live_arrays: usize,
    /// The most bytes its host arrays held at once (with freed buffers kept for reuse).
    #[serde(default)]
    pub peak_array_bytes: usize,
    /// Instances made for this partition: 1, or 0 where it took over an earlier
    /// partition's (the Python runner of LiberTEM UDF classes does, within a run).
    #[serde(default)]
    pub instances: u64,
}

/// One partition's instance of a UDF.
pub trait PartitionRunner: Send {
    /// Resource use so far, if the implementation tracks it (wasm plugins do).
    fn stats(&self) -> Option<InstanceStats> {
        None
    }

    /// Before the first tile (LiberTEM's `preprocess`, optional there too).
    fn preprocess(&mut self) -> Result<(), CallError> {
        Ok(())
    }

    fn process(&mut self, tile: &Tile<'_>) -> Result<(), CallError>;

    /// Whether the runner copies every tile into memory of its own (a wasm instance's
    /// linear memory). The executor then lets it read a tile that needs gathering or
    /// converting straight into that memory ([`process_unread`](Self::process_unread))
    /// instead of reading it into a buffer that is copied again.
    fn reads_tiles(&self) -> bool {
        false
    }

    /// [`process`](Self::process) for a tile not read yet: `tile.data` is empty, and
    /// `source` reads the tile into memory the runner chooses. The executor calls it
    /// only where [`reads_tiles`](Self::reads_tiles) says so; this default reads into a
    /// buffer and calls `process`.
    ///
    /// # Errors
    /// [`UnreadError::Read`] with the source's error if reading failed (not a UDF
    /// failure), [`UnreadError::Udf`] if the UDF failed.
    fn process_unread(&mut self, tile: &Tile<'_>, source: &dyn TileSource) -> Result<(), UnreadError> {
        let mut buffer = crate::array::AlignedBytes::default();
        buffer.resize(tile.frames * tile.sig.len() * tile.dtype.size());
        source.read_into(buffer.as_mut_slice())?;
        Ok(self.process(&Tile { data: buffer.as_slice(), ..*tile })?)
    }

    /// After the last tile (LiberTEM's `postprocess`, optional there too).
    fn postprocess(&mut self) -> Result<(), CallError> {
        Ok(())
    }

    /// The partition's buffers (every declared buffer but result-only ones).
    fn export(&mut self) -> Result<Vec<NamedBuffer>, CallError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keeps the elements of the tiles it is given.
    struct Keeper(Vec<f64>);

    impl PartitionRunner for Keeper {
        fn process(&mut self, tile: &Tile<'_>) -> Result<(), CallError> {
            let data = tile.as_slice::<f64>().ok_or_else(|| CallError::internal("not float64"))?;
            self.0.extend_from_slice(data);
            Ok(())
        }
        fn export(&mut self) -> Result<Vec<NamedBuffer>, CallError> {
            Ok(Vec::new())
        }
    }

    #[test]
    fn the_default_process_unread_reads_into_an_aligned_buffer_and_processes_it() {
        let sig = SigSlice { origin: vec![0, 1], shape: vec![1, 3] };
        let tile = Tile {
            origin: 4,
            frames: 2,
            scheme_index: 0,
            sig: &sig,
            true_nav_indices: &[4, 5],
            dtype: DType::F64,
            data: &[],
        };
        struct Values(&'static [f64]);
        impl TileSource for Values {
            fn read_into(&self, out: &mut [u8]) -> Result<(), TileReadError> {
                assert_eq!(out.len(), self.0.len() * 8, "the tile's size");
                out.copy_from_slice(bytemuck::cast_slice(self.0));
                Ok(())
            }
        }
        struct OnFire;
        impl TileSource for OnFire {
            fn read_into(&self, _: &mut [u8]) -> Result<(), TileReadError> {
                Err(TileReadError("disk on fire".into()))
            }
        }
        const VALUES: &[f64] = &[1.5, -2.0, 3.25, 4.0, 5.5, -6.75];
        let mut keeper = Keeper(Vec::new());
        keeper.process_unread(&tile, &Values(VALUES)).unwrap();
        assert_eq!(keeper.0, VALUES);
        let e = keeper.process_unread(&tile, &OnFire).unwrap_err();
        assert!(matches!(&e, UnreadError::Read(r) if r.to_string() == "disk on fire"), "{e}");
    }
}
