//! The [`Udf`] abstraction the executor runs: wasm plugins and native built-ins alike.
//!
//! These types mirror `wit/udf.wit` on the host side. A [`Udf`] describes itself,
//! plans a run, declares buffers, starts a [`PartitionRunner`] per partition, and
//! merges and finishes results as pure functions.

use crate::array::NdArray;
use crate::dataset::{SigSlice, TilingScheme};
use crate::dtype::DType;
use serde::Serialize;
use std::fmt;
use std::sync::Arc;

/// The unit a UDF processes at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    Tile,
    Frame,
    Partition,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Tile => "tile",
            Method::Frame => "frame",
            Method::Partition => "partition",
        }
    }
}

/// Frames per tile a UDF asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TileDepth {
    Default,
    Max,
    Frames(u64),
}

/// Bytes per tile a UDF asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TileSize {
    BestFit,
    Max,
    Bytes(u64),
}

/// Tiling preferences of a tile UDF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TilingPreferences {
    pub depth: TileDepth,
    pub total_size: TileSize,
}

impl Default for TilingPreferences {
    fn default() -> Self {
        TilingPreferences { depth: TileDepth::Default, total_size: TileSize::BestFit }
    }
}

/// Input dtype preference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DTypePreference {
    /// The dataset's native dtype.
    Native,
    /// At least this dtype.
    Prefer(DType),
}

/// How a plugin wants arrays delivered (only meaningful for wasm plugins).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataAccess {
    Typed,
    Bytes,
}

/// Type of a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    Bool,
    Int,
    Float,
    Text,
    Array,
}

impl ParamType {
    pub fn name(self) -> &'static str {
        match self {
            ParamType::Bool => "bool",
            ParamType::Int => "int",
            ParamType::Float => "float",
            ParamType::Text => "text",
            ParamType::Array => "array",
        }
    }
}

/// A parameter value. Arrays are shared: they are sent to every partition.
#[derive(Debug, Clone)]
pub enum ParamValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
    Array(Arc<NdArray>),
}

impl ParamValue {
    pub fn param_type(&self) -> ParamType {
        match self {
            ParamValue::Bool(_) => ParamType::Bool,
            ParamValue::Int(_) => ParamType::Int,
            ParamValue::Float(_) => ParamType::Float,
            ParamValue::Text(_) => ParamType::Text,
            ParamValue::Array(_) => ParamType::Array,
        }
    }

    /// JSON for `results.json`: scalars as values (non-finite floats as the strings
    /// `"nan"`, `"inf"`, `"-inf"`, which JSON lacks), arrays by dtype and shape, with the
    /// values of small real arrays (up to 16 elements).
    pub fn to_json(&self) -> serde_json::Value {
        fn float(f: f64) -> serde_json::Value {
            if f.is_finite() {
                serde_json::json!(f)
            } else if f.is_nan() {
                serde_json::json!("nan")
            } else if f > 0.0 {
                serde_json::json!("inf")
            } else {
                serde_json::json!("-inf")
            }
        }
        match self {
            ParamValue::Bool(b) => serde_json::json!(b),
            ParamValue::Int(i) => serde_json::json!(i),
            ParamValue::Float(f) => float(*f),
            ParamValue::Text(s) => serde_json::json!(s),
            ParamValue::Array(a) => {
                let values = (a.len() <= 16).then(|| crate::array::real_values(a)).flatten();
                match values {
                    Some(v) => serde_json::json!({
                        "dtype": a.dtype().name(),
                        "shape": a.shape(),
                        "values": v.into_iter().map(float).collect::<Vec<_>>(),
                    }),
                    None => serde_json::json!({"dtype": a.dtype().name(), "shape": a.shape()}),
                }
            }
        }
    }
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Bool(b) => write!(f, "{b}"),
            ParamValue::Int(i) => write!(f, "{i}"),
            ParamValue::Float(x) => write!(f, "{x}"),
            ParamValue::Text(s) => write!(f, "{s:?}"),
            ParamValue::Array(a) => write!(f, "array({}, {:?})", a.dtype(), a.shape()),
        }
    }
}

/// Declaration of a parameter.
#[derive(Debug, Clone)]
pub struct ParamSpec {
    pub name: String,
    pub ty: ParamType,
    pub doc: String,
    /// `None`: required.
    pub default: Option<ParamValue>,
    /// Per-frame aux data sliced by nav index.
    pub nav_aux: bool,
}

/// A named parameter value.
#[derive(Debug, Clone)]
pub struct Param {
    pub name: String,
    pub value: ParamValue,
}

/// The parameters of one UDF in a run.
#[derive(Debug, Clone, Default)]
pub struct Params(pub Vec<Param>);

impl Params {
    pub fn get(&self, name: &str) -> Option<&ParamValue> {
        self.0.iter().find(|p| p.name == name).map(|p| &p.value)
    }

    /// Set (or replace) a value.
    pub fn set(&mut self, name: &str, value: ParamValue) {
        match self.0.iter_mut().find(|p| p.name == name) {
            Some(p) => p.value = value,
            None => self.0.push(Param { name: name.to_owned(), value }),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Param> {
        self.0.iter()
    }
}

/// Static self-description of a UDF.
#[derive(Debug, Clone)]
pub struct Description {
    pub name: String,
    pub version: String,
    pub summary: String,
    pub params: Vec<ParamSpec>,
    pub methods: Vec<Method>,
    pub input_dtype: DTypePreference,
    pub tiling: TilingPreferences,
    pub custom_merge: bool,
    pub custom_results: bool,
    pub main_preprocess: bool,
    pub data_access: DataAccess,
}

/// A UDF's run-time choices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunPlan {
    pub method: Method,
    pub input_dtype: DTypePreference,
    pub tiling: TilingPreferences,
}

/// What a result buffer is indexed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BufferKind {
    Nav,
    Sig,
    Single,
}

/// The role of a result buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BufferUse {
    Normal,
    Private,
    ResultOnly,
}

/// Declaration of a result buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferDecl {
    pub name: String,
    pub kind: BufferKind,
    pub dtype: DType,
    pub extra_shape: Vec<usize>,
    pub usage: BufferUse,
}

impl BufferDecl {
    /// Storage shape with `frames` nav entries: nav `(frames, *E)`, sig `(*S, *E)`,
    /// single `E` or `(1,)`.
    pub fn storage_shape(&self, frames: usize, sig: &[usize]) -> Vec<usize> {
        let mut shape = match self.kind {
            BufferKind::Nav => vec![frames],
            BufferKind::Sig => sig.to_vec(),
            BufferKind::Single => Vec::new(),
        };
        shape.extend_from_slice(&self.extra_shape);
        if shape.is_empty() {
            shape.push(1);
        }
        shape
    }
}

/// Where the computation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceClass {
    Cpu,
    Cuda,
}

/// Dataset-level meta, the same for every call of a run.
#[derive(Debug, Clone)]
pub struct DatasetMeta {
    pub nav_shape: Vec<usize>,
    pub sig_shape: Vec<usize>,
    pub dataset_dtype: DType,
    pub input_dtype: DType,
    pub roi_count: Option<usize>,
    pub device_class: DeviceClass,
    pub threads_per_worker: u32,
}

impl DatasetMeta {
    /// Frames processed: the ROI count or every frame.
    pub fn frames(&self) -> usize {
        self.roi_count.unwrap_or_else(|| self.nav_shape.iter().product())
    }
}

/// The partition an instance works on.
#[derive(Debug, Clone)]
pub struct PartitionMeta {
    pub index: usize,
    /// Compressed flat nav index of the first frame.
    pub origin: u64,
    /// Selected frames.
    pub frames: usize,
    pub method: Method,
    pub tiling: Arc<TilingScheme>,
}

/// What `start` receives.
#[derive(Debug, Clone, Copy)]
pub struct InitContext<'a> {
    pub params: &'a Params,
    pub dataset: &'a DatasetMeta,
    /// `None` on the main side (main preprocess).
    pub partition: Option<&'a PartitionMeta>,
}

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

/// Reads a tile into the bytes it is given (see [`PartitionRunner::process_unread`]); on
/// failure, a message (the executor keeps the error itself).
pub type ReadTile<'a> = dyn Fn(&mut [u8]) -> Result<(), String> + Sync + 'a;

impl Tile<'_> {
    /// Typed elements; `None` if `T` is not the tile's dtype.
    pub fn as_slice<T: crate::dtype::Element>(&self) -> Option<&[T]> {
        (T::DTYPE == self.dtype).then(|| bytemuck::cast_slice(self.data))
    }
}

/// A named array: a result buffer's contents.
#[derive(Debug, Clone)]
pub struct NamedBuffer {
    pub name: String,
    pub array: NdArray,
}

/// A mutable view of (part of) a merged buffer, for `merge`.
#[derive(Debug)]
pub struct BufferViewMut<'a> {
    pub name: &'a str,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bytes: &'a mut [u8],
}

/// What `merge` sees besides the buffers.
#[derive(Debug, Clone, Copy)]
pub struct MergeContext<'a> {
    pub params: &'a Params,
    pub dataset: &'a DatasetMeta,
    pub partition: &'a PartitionMeta,
    /// Compressed positions merged before this partition.
    pub valid_nav_mask: &'a [bool],
}

/// What `get_results` sees besides the buffers.
#[derive(Debug, Clone, Copy)]
pub struct ResultsContext<'a> {
    pub params: &'a Params,
    pub dataset: &'a DatasetMeta,
    /// Compressed positions merged so far.
    pub valid_nav_mask: &'a [bool],
    /// The ROI over the flat nav axis.
    pub roi: Option<&'a [bool]>,
}

/// One result from `get_results`.
#[derive(Debug, Clone)]
pub struct ResultEntry {
    pub name: String,
    pub array: NdArray,
    /// Custom valid mask: one value, one per nav position, or one per element.
    pub valid: Option<Vec<bool>>,
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

    /// Merge a partition's buffers into the merged state.
    fn merge(
        &self,
        ctx: MergeContext<'_>,
        dest: &mut [BufferViewMut<'_>],
        src: &[NamedBuffer],
    ) -> Result<(), CallError>;

    /// Final results from the merged buffers (only called with `custom_results`).
    fn get_results(&self, ctx: ResultsContext<'_>, buffers: &[NamedBuffer]) -> Result<Vec<ResultEntry>, CallError>;
}

/// Resource use of one partition's instance, for reports (not limits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
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
    /// `read` writes the tile's `frames * sig.len()` elements of `tile.dtype` (C order,
    /// native-endian) into the bytes it is given, which must be aligned for the dtype.
    /// The executor calls it only where [`reads_tiles`](Self::reads_tiles) says so; this
    /// default reads into a buffer and calls `process`.
    fn process_unread(&mut self, tile: &Tile<'_>, read: &ReadTile<'_>) -> Result<(), CallError> {
        let mut buffer = crate::array::AlignedBytes::default();
        buffer.resize(tile.frames * tile.sig.len() * tile.dtype.size());
        read(buffer.as_mut_slice()).map_err(CallError::internal)?;
        self.process(&Tile { data: buffer.as_slice(), ..*tile })
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
        fn preprocess(&mut self) -> Result<(), CallError> {
            Ok(())
        }
        fn process(&mut self, tile: &Tile<'_>) -> Result<(), CallError> {
            let data = tile.as_slice::<f64>().ok_or_else(|| CallError::internal("not float64"))?;
            self.0.extend_from_slice(data);
            Ok(())
        }
        fn postprocess(&mut self) -> Result<(), CallError> {
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
        let values = [1.5, -2.0, 3.25, 4.0, 5.5, -6.75];
        let read = |dst: &mut [u8]| {
            assert_eq!(dst.len(), values.len() * 8, "the tile's size");
            dst.copy_from_slice(bytemuck::cast_slice(&values));
            Ok(())
        };
        let mut keeper = Keeper(Vec::new());
        keeper.process_unread(&tile, &read).unwrap();
        assert_eq!(keeper.0, values);
        let failing = |_: &mut [u8]| Err("disk on fire".to_owned());
        let e = keeper.process_unread(&tile, &failing).unwrap_err();
        assert!(e.to_string().contains("disk on fire"), "{e}");
    }
}
