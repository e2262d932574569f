//! The contract's data types: descriptions, parameters, buffer declarations, meta and
//! the contexts of each lifecycle call. They mirror `wit/udf.wit`; the ones a run plan
//! carries are serialisable (`serde`), so a plan can be shipped to another process.

use super::TilingScheme;
use crate::array::NdArray;
use crate::dtype::DType;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// The unit a UDF processes at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TileDepth {
    Default,
    Max,
    Frames(u64),
}

/// Bytes per tile a UDF asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TileSize {
    BestFit,
    Max,
    Bytes(u64),
}

/// Tiling preferences of a tile UDF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(into = "repr::ParamValueRepr", from = "repr::ParamValueRepr")]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Param {
    pub name: String,
    pub value: ParamValue,
}

/// The parameters of one UDF in a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunPlan {
    pub method: Method,
    pub input_dtype: DTypePreference,
    pub tiling: TilingPreferences,
}

/// What a result buffer is indexed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BufferKind {
    Nav,
    Sig,
    Single,
}

/// The role of a result buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BufferUse {
    Normal,
    Private,
    ResultOnly,
}

impl BufferKind {
    /// `nav`, `sig` or `single` (as the contract and `results.json` name it).
    pub fn name(self) -> &'static str {
        match self {
            BufferKind::Nav => "nav",
            BufferKind::Sig => "sig",
            BufferKind::Single => "single",
        }
    }
}

impl BufferUse {
    /// `normal`, `private` or `result-only` (as the contract names it).
    pub fn name(self) -> &'static str {
        match self {
            BufferUse::Normal => "normal",
            BufferUse::Private => "private",
            BufferUse::ResultOnly => "result-only",
        }
    }
}

/// Declaration of a result buffer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceClass {
    Cpu,
    Cuda,
}

/// Dataset-level meta, the same for every call of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// A named array: a result buffer's contents.
#[derive(Debug, Clone, PartialEq)]
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

/// How [`ParamValue`] is written: tagged by type; non-finite floats as the strings `"nan"`,
/// `"inf"`, `"-inf"` (JSON has no such numbers); arrays as dtype, shape and raw bytes.
mod repr {
    use super::ParamValue;
    use crate::array::NdArray;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::sync::Arc;

    #[derive(Serialize, Deserialize)]
    #[serde(tag = "type", content = "value", rename_all = "lowercase")]
    pub(super) enum ParamValueRepr {
        Bool(bool),
        Int(i64),
        Float(Float),
        Text(String),
        Array(NdArray),
    }

    /// An `f64` that survives JSON.
    pub(super) struct Float(f64);

    impl Serialize for Float {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            match self.0 {
                f if f.is_finite() || !s.is_human_readable() => s.serialize_f64(f),
                f if f.is_nan() => s.serialize_str("nan"),
                f if f > 0.0 => s.serialize_str("inf"),
                _ => s.serialize_str("-inf"),
            }
        }
    }

    impl<'de> Deserialize<'de> for Float {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            #[derive(Deserialize)]
            #[serde(untagged)]
            enum Either {
                Number(f64),
                Text(String),
            }
            match Either::deserialize(d)? {
                Either::Number(f) => Ok(Float(f)),
                Either::Text(t) => match t.as_str() {
                    "nan" => Ok(Float(f64::NAN)),
                    "inf" => Ok(Float(f64::INFINITY)),
                    "-inf" => Ok(Float(f64::NEG_INFINITY)),
                    other => Err(serde::de::Error::custom(format!("'{other}' is not a number"))),
                },
            }
        }
    }

    impl From<ParamValue> for ParamValueRepr {
        fn from(v: ParamValue) -> Self {
            match v {
                ParamValue::Bool(b) => ParamValueRepr::Bool(b),
                ParamValue::Int(i) => ParamValueRepr::Int(i),
                ParamValue::Float(f) => ParamValueRepr::Float(Float(f)),
                ParamValue::Text(t) => ParamValueRepr::Text(t),
                ParamValue::Array(a) => ParamValueRepr::Array(Arc::unwrap_or_clone(a)),
            }
        }
    }

    impl From<ParamValueRepr> for ParamValue {
        fn from(r: ParamValueRepr) -> Self {
            match r {
                ParamValueRepr::Bool(b) => ParamValue::Bool(b),
                ParamValueRepr::Int(i) => ParamValue::Int(i),
                ParamValueRepr::Float(Float(f)) => ParamValue::Float(f),
                ParamValueRepr::Text(t) => ParamValue::Text(t),
                ParamValueRepr::Array(a) => ParamValue::Array(Arc::new(a)),
            }
        }
    }
}
