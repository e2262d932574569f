//! Conversions between the host's [`crate::udf`] types and the generated bindings.
//!
//! Host → guest conversions borrow (arrays are cast in place, never copied here); guest
//! → host conversions validate everything a plugin returns before the host trusts it.

use super::bindings::udf::plugin::types as wit;
use super::caps;
use crate::array::{NdArray, byte_len};
use crate::dtype::DType;
use crate::log::escape_control;
use crate::udf::{
    BufferDecl, BufferKind, BufferUse, CallError, DTypePreference, DataAccess, DatasetMeta, Description, DeviceClass,
    ErrorKind, Method, Param, ParamSpec, ParamType, ParamValue, PartitionMeta, RunPlan, TileDepth, TileSize,
    TilingPreferences,
};
use crate::udf::{SigSlice, TilingScheme, rules};
use std::sync::Arc;

#[cfg(not(target_pointer_width = "64"))]
compile_error!("udf-host needs a 64-bit host (shapes are passed to plugins as u64 without copying)");

/// Shapes and indices are `usize` on the host and `u64` in the contract.
pub fn u64s(values: &[usize]) -> &[u64] {
    bytemuck::cast_slice(values)
}

pub fn dtype_to_wit(d: DType) -> wit::Dtype {
    match d {
        DType::Bool => wit::Dtype::Boolean,
        DType::U8 => wit::Dtype::Uint8,
        DType::U16 => wit::Dtype::Uint16,
        DType::U32 => wit::Dtype::Uint32,
        DType::U64 => wit::Dtype::Uint64,
        DType::I8 => wit::Dtype::Int8,
        DType::I16 => wit::Dtype::Int16,
        DType::I32 => wit::Dtype::Int32,
        DType::I64 => wit::Dtype::Int64,
        DType::F32 => wit::Dtype::Float32,
        DType::F64 => wit::Dtype::Float64,
        DType::C64 => wit::Dtype::Complex64,
        DType::C128 => wit::Dtype::Complex128,
    }
}

pub fn dtype_from_wit(d: wit::Dtype) -> DType {
    match d {
        wit::Dtype::Boolean => DType::Bool,
        wit::Dtype::Uint8 => DType::U8,
        wit::Dtype::Uint16 => DType::U16,
        wit::Dtype::Uint32 => DType::U32,
        wit::Dtype::Uint64 => DType::U64,
        wit::Dtype::Int8 => DType::I8,
        wit::Dtype::Int16 => DType::I16,
        wit::Dtype::Int32 => DType::I32,
        wit::Dtype::Int64 => DType::I64,
        wit::Dtype::Float32 => DType::F32,
        wit::Dtype::Float64 => DType::F64,
        wit::Dtype::Complex64 => DType::C64,
        wit::Dtype::Complex128 => DType::C128,
    }
}

/// `$Enum::<case>($payload)`: the case of the contract's `array-data` that carries
/// `dtype` to a plugin with data access `access` — `bool` and everything for byte-access
/// plugins as `bytes`. One list for the borrowed arrays of the bindings ([`array_data`])
/// and the tiles read into the guest (`fill.rs`); `$payload` is evaluated in the chosen
/// arm and typed by it.
macro_rules! array_case {
    ($Enum:ident, $dtype:expr, $access:expr, $payload:expr) => {
        if $access == DataAccess::Bytes {
            $Enum::Bytes($payload)
        } else {
            match $dtype {
                DType::Bool => $Enum::Bytes($payload),
                DType::U8 => $Enum::Uint8($payload),
                DType::U16 => $Enum::Uint16($payload),
                DType::U32 => $Enum::Uint32($payload),
                DType::U64 => $Enum::Uint64($payload),
                DType::I8 => $Enum::Int8($payload),
                DType::I16 => $Enum::Int16($payload),
                DType::I32 => $Enum::Int32($payload),
                DType::I64 => $Enum::Int64($payload),
                DType::F32 => $Enum::Float32($payload),
                DType::F64 => $Enum::Float64($payload),
                DType::C64 => $Enum::Complex64($payload),
                DType::C128 => $Enum::Complex128($payload),
            }
        }
    };
}
pub(super) use array_case;

/// Borrow native-endian bytes of `dtype` as the contract's array data, typed or raw.
///
/// `bool` arrays always go as raw bytes: the host cannot promise every byte is 0 or 1,
/// which a typed `list<bool>` would require.
pub fn array_data(dtype: DType, bytes: &[u8], access: DataAccess) -> wit::ArrayDataParam<'_> {
    use wit::ArrayDataParam as A;
    array_case!(A, dtype, access, bytemuck::cast_slice(bytes))
}

pub fn ndarray_param(array: &NdArray, access: DataAccess) -> wit::NdarrayParam<'_> {
    wit::NdarrayParam {
        dtype: dtype_to_wit(array.dtype()),
        shape: u64s(array.shape()),
        data: array_data(array.dtype(), array.bytes(), access),
    }
}

pub fn params_to_wit(params: &[Param], access: DataAccess) -> Vec<wit::Param<'_>> {
    params
        .iter()
        .map(|p| wit::Param {
            name: &p.name,
            value: match &p.value {
                ParamValue::Bool(b) => wit::ParamValueParam::Boolean(*b),
                ParamValue::Int(i) => wit::ParamValueParam::Int(*i),
                ParamValue::Float(f) => wit::ParamValueParam::Float(*f),
                ParamValue::Text(s) => wit::ParamValueParam::Text(s),
                ParamValue::Array(a) => wit::ParamValueParam::Array(ndarray_param(a, access)),
            },
        })
        .collect()
}

pub fn dataset_to_wit(meta: &DatasetMeta) -> wit::DatasetMeta<'_> {
    wit::DatasetMeta {
        nav_shape: u64s(&meta.nav_shape),
        sig_shape: u64s(&meta.sig_shape),
        dataset_dtype: dtype_to_wit(meta.dataset_dtype),
        input_dtype: dtype_to_wit(meta.input_dtype),
        roi_count: meta.roi_count.map(|n| n as u64),
        device_class: match meta.device_class {
            DeviceClass::Cpu => wit::DeviceClass::Cpu,
            DeviceClass::Cuda => wit::DeviceClass::Cuda,
        },
        threads_per_worker: meta.threads_per_worker,
    }
}

pub fn method_to_wit(m: Method) -> wit::Method {
    match m {
        Method::Tile => wit::Method::Tile,
        Method::Frame => wit::Method::Frame,
        Method::Partition => wit::Method::Partition,
    }
}

fn method_from_wit(m: wit::Method) -> Method {
    match m {
        wit::Method::Tile => Method::Tile,
        wit::Method::Frame => Method::Frame,
        wit::Method::Partition => Method::Partition,
    }
}

pub fn sig_slice_to_wit(s: &SigSlice) -> wit::SigSlice<'_> {
    wit::SigSlice { origin: u64s(&s.origin), shape: u64s(&s.shape) }
}

/// The scheme's slices in contract form (kept alive by the caller while the partition
/// meta borrows them).
pub fn scheme_to_wit(scheme: &TilingScheme) -> Vec<wit::SigSlice<'_>> {
    scheme.slices.iter().map(sig_slice_to_wit).collect()
}

pub fn partition_to_wit<'a>(p: &PartitionMeta, slices: &'a [wit::SigSlice<'a>]) -> wit::PartitionMeta<'a> {
    wit::PartitionMeta {
        index: p.index as u32,
        origin: p.origin,
        frames: p.frames as u64,
        method: method_to_wit(p.method),
        tiling_scheme: slices,
        tile_depth: p.tiling.depth as u64,
    }
}

pub fn error_from_wit(e: wit::UdfError) -> CallError {
    let kind = match e.kind {
        wit::ErrorKind::BadParam => ErrorKind::BadParam,
        wit::ErrorKind::InvalidData => ErrorKind::InvalidData,
        wit::ErrorKind::Internal => ErrorKind::Internal,
    };
    CallError::Returned { kind, message: super::state::truncate_message(&e.message) }
}

fn usize_of(v: u64, what: &str) -> Result<usize, CallError> {
    usize::try_from(v).map_err(|_| CallError::Contract(format!("{what} {v} is too large")))
}

/// A shape from a plugin whose size, with `item_size`-byte elements, fits in memory
/// ([`byte_len`]), and that size in bytes.
fn shape_from_wit(shape: &[u64], item_size: usize, what: &str) -> Result<(Vec<usize>, usize), CallError> {
    let shape = shape.iter().map(|&d| usize_of(d, what)).collect::<Result<Vec<_>, _>>()?;
    let bytes =
        byte_len(&shape, item_size).ok_or_else(|| CallError::Contract(format!("{what} {shape:?} is too large")))?;
    Ok((shape, bytes))
}

/// An array returned by a plugin, checked: the data holds exactly `product(shape)`
/// elements of `dtype`, and at most `max_bytes` bytes.
fn ndarray_from_wit_capped(array: wit::NdarrayResult, what: &str, max_bytes: usize) -> Result<NdArray, CallError> {
    let dtype = dtype_from_wit(array.dtype);
    let (shape, bytes) = shape_from_wit(&array.shape, dtype.size(), &format!("shape of {what}"))?;
    if bytes > max_bytes {
        return Err(CallError::Contract(format!(
            "{what}: {dtype} of shape {shape:?} is {bytes} bytes; at most {max_bytes}"
        )));
    }
    let expected = bytes / dtype.size();
    let mismatch =
        |found: &str| CallError::Contract(format!("{what}: declared {dtype} of shape {shape:?} but sent {found}"));
    // One copy, from the lifted list into the array (dropped right after).
    let array_of = |bytes: &[u8]| {
        NdArray::from_bytes(dtype, &shape, bytes).map_err(|e| CallError::Contract(format!("{what}: {e}")))
    };
    macro_rules! typed {
        ($v:expr, $want:expr, $per:expr) => {{
            if dtype != $want {
                return Err(mismatch(&format!("{} data", $want)));
            }
            if $v.len() != expected * $per {
                return Err(mismatch(&format!("{} values", $v.len())));
            }
            array_of(bytemuck::cast_slice(&$v))
        }};
    }
    match array.data {
        wit::ArrayDataResult::Boolean(v) => {
            if dtype != DType::Bool || v.len() != expected {
                return Err(mismatch(&format!("{} booleans", v.len())));
            }
            array_of(&v.iter().map(|&b| u8::from(b)).collect::<Vec<u8>>())
        }
        wit::ArrayDataResult::Uint8(v) => typed!(v, DType::U8, 1),
        wit::ArrayDataResult::Uint16(v) => typed!(v, DType::U16, 1),
        wit::ArrayDataResult::Uint32(v) => typed!(v, DType::U32, 1),
        wit::ArrayDataResult::Uint64(v) => typed!(v, DType::U64, 1),
        wit::ArrayDataResult::Int8(v) => typed!(v, DType::I8, 1),
        wit::ArrayDataResult::Int16(v) => typed!(v, DType::I16, 1),
        wit::ArrayDataResult::Int32(v) => typed!(v, DType::I32, 1),
        wit::ArrayDataResult::Int64(v) => typed!(v, DType::I64, 1),
        wit::ArrayDataResult::Float32(v) => typed!(v, DType::F32, 1),
        wit::ArrayDataResult::Float64(v) => typed!(v, DType::F64, 1),
        wit::ArrayDataResult::Complex64(v) => typed!(v, DType::C64, 2),
        wit::ArrayDataResult::Complex128(v) => typed!(v, DType::C128, 2),
        wit::ArrayDataResult::Bytes(v) => {
            if v.len() != bytes {
                return Err(mismatch(&format!("{} bytes", v.len())));
            }
            if dtype == DType::Bool {
                array_of(&v.iter().map(|&b| u8::from(b != 0)).collect::<Vec<u8>>())
            } else {
                array_of(&v)
            }
        }
    }
}

/// An array returned by a plugin, checked: the data holds exactly `product(shape)`
/// elements of `dtype` (the size was checked against the call's budget when lifted).
pub fn ndarray_from_wit(array: wit::NdarrayResult, what: &str) -> Result<NdArray, CallError> {
    ndarray_from_wit_capped(array, what, usize::MAX)
}

/// A parameter default from `describe`; an array default is at most
/// [`caps::MAX_ARRAY_DEFAULT`] bytes.
fn param_value_from_wit(v: wit::ParamValueResult, what: &str) -> Result<ParamValue, CallError> {
    Ok(match v {
        wit::ParamValueResult::Boolean(b) => ParamValue::Bool(b),
        wit::ParamValueResult::Int(i) => ParamValue::Int(i),
        wit::ParamValueResult::Float(f) => ParamValue::Float(f),
        wit::ParamValueResult::Text(s) => ParamValue::Text(s),
        wit::ParamValueResult::Array(a) => {
            ParamValue::Array(Arc::new(ndarray_from_wit_capped(a, what, caps::MAX_ARRAY_DEFAULT)?))
        }
    })
}

/// The type of a parameter value, for messages.
fn value_type(v: &ParamValue) -> &'static str {
    match v {
        ParamValue::Bool(_) => "bool",
        ParamValue::Int(_) => "int",
        ParamValue::Float(_) => "float",
        ParamValue::Text(_) => "text",
        ParamValue::Array(_) => "array",
    }
}

fn dtype_pref_from_wit(p: wit::DtypePreference) -> DTypePreference {
    match p {
        wit::DtypePreference::Native => DTypePreference::Native,
        wit::DtypePreference::Prefer(d) => DTypePreference::Prefer(dtype_from_wit(d)),
    }
}

fn tiling_from_wit(t: wit::TilingPreferences) -> TilingPreferences {
    TilingPreferences {
        depth: match t.depth {
            wit::TileDepth::Default => TileDepth::Default,
            wit::TileDepth::Max => TileDepth::Max,
            wit::TileDepth::Frames(n) => TileDepth::Frames(n),
        },
        total_size: match t.total_size {
            wit::TileSize::BestFit => TileSize::BestFit,
            wit::TileSize::Max => TileSize::Max,
            wit::TileSize::Bytes(n) => TileSize::Bytes(n),
        },
    }
}

/// A plugin's description, checked (`describe` errors name what is wrong): a usable
/// name ([`rules::check_udf_name`]), at most [`rules::MAX_PARAMS`] parameters with
/// usable, unique names and defaults of their type, at least one method, text within
/// [`caps`](super::caps) (control characters escaped).
///
/// # Errors
/// [`CallError::Contract`] for the first problem.
pub fn description_from_wit(d: wit::Description) -> Result<Description, CallError> {
    let contract = |m: String| CallError::Contract(m);
    rules::check_udf_name(&d.name).map_err(|e| contract(format!("name {:?} is not usable: {e}", d.name)))?;
    caps::check_len("the version", &d.version, caps::MAX_VERSION).map_err(contract)?;
    caps::check_len("the summary", &d.summary, caps::MAX_SUMMARY).map_err(contract)?;
    if d.params.len() > rules::MAX_PARAMS {
        return Err(contract(format!("it declares {} parameters; at most {}", d.params.len(), rules::MAX_PARAMS)));
    }
    if let Some(name) = rules::first_duplicate(d.params.iter().map(|p| p.name.as_str())) {
        return Err(contract(format!("it declares parameter '{name}' twice")));
    }
    let params = d.params.into_iter().map(param_spec_from_wit).collect::<Result<Vec<_>, CallError>>()?;
    if d.methods.is_empty() {
        return Err(contract("it implements no method (tile, frame or partition)".into()));
    }
    let mut methods: Vec<Method> = Vec::with_capacity(3);
    for m in d.methods.into_iter().map(method_from_wit) {
        if !methods.contains(&m) {
            methods.push(m);
        }
    }
    Ok(Description {
        name: d.name,
        version: escape_control(&d.version).into_owned(),
        summary: escape_control(&d.summary).into_owned(),
        params,
        methods,
        input_dtype: dtype_pref_from_wit(d.input_dtype),
        tiling: tiling_from_wit(d.tiling),
        custom_merge: d.custom_merge,
        custom_results: d.custom_results,
        main_preprocess: d.main_preprocess,
        data_access: match d.data_access {
            wit::DataAccess::Typed => DataAccess::Typed,
            wit::DataAccess::Bytes => DataAccess::Bytes,
        },
    })
}

/// One parameter of a description: a usable name, documentation within
/// [`caps::MAX_DOC`], a default of the declared type (an int is a float too).
fn param_spec_from_wit(p: wit::ParamSpec) -> Result<ParamSpec, CallError> {
    let contract = |m: String| CallError::Contract(m);
    rules::check_param_name(&p.name)
        .map_err(|e| contract(format!("parameter name {:?} is not usable: {e}", escape_control(&p.name))))?;
    caps::check_len(&format!("the documentation of parameter '{}'", p.name), &p.doc, caps::MAX_DOC)
        .map_err(contract)?;
    let ty = match p.ty {
        wit::ParamType::Boolean => ParamType::Bool,
        wit::ParamType::Int => ParamType::Int,
        wit::ParamType::Float => ParamType::Float,
        wit::ParamType::Text => ParamType::Text,
        wit::ParamType::Array => ParamType::Array,
    };
    let default =
        p.default.map(|v| param_value_from_wit(v, &format!("default of parameter '{}'", p.name))).transpose()?;
    if let Some(value) = &default {
        let fits = matches!(
            (ty, value),
            (ParamType::Bool, ParamValue::Bool(_))
                | (ParamType::Int, ParamValue::Int(_))
                | (ParamType::Float, ParamValue::Float(_) | ParamValue::Int(_))
                | (ParamType::Text, ParamValue::Text(_))
                | (ParamType::Array, ParamValue::Array(_))
        );
        if !fits {
            return Err(contract(format!(
                "parameter '{}' is declared {} but its default is {}",
                p.name,
                ty.name(),
                value_type(value)
            )));
        }
        if let ParamValue::Text(t) = value {
            caps::check_len(&format!("the default of parameter '{}'", p.name), t, caps::MAX_TEXT_DEFAULT)
                .map_err(contract)?;
        }
    }
    if p.nav_aux && ty != ParamType::Array {
        return Err(contract(format!("parameter '{}' is nav aux data but not an array", p.name)));
    }
    Ok(ParamSpec { name: p.name, ty, doc: escape_control(&p.doc).into_owned(), default, nav_aux: p.nav_aux })
}

pub fn plan_from_wit(p: wit::RunPlan) -> RunPlan {
    RunPlan {
        method: method_from_wit(p.method),
        input_dtype: dtype_pref_from_wit(p.input_dtype),
        tiling: tiling_from_wit(p.tiling),
    }
}

/// A buffer declaration, its extra shape checked (at most [`rules::MAX_DIMS`] axes, a
/// product that fits). The name and the set of declarations are checked by the
/// executor (`exec`'s planning: [`rules`]).
pub fn buffer_decl_from_wit(b: wit::BufferDecl) -> Result<BufferDecl, CallError> {
    if b.extra_shape.len() > rules::MAX_DIMS {
        return Err(CallError::Contract(format!(
            "buffer {:?} has an extra shape of {} axes; at most {}",
            escape_control(&b.name),
            b.extra_shape.len(),
            rules::MAX_DIMS
        )));
    }
    Ok(BufferDecl {
        extra_shape: shape_from_wit(
            &b.extra_shape,
            1,
            &format!("extra shape of buffer {:?}", escape_control(&b.name)),
        )?
        .0,
        name: b.name,
        kind: match b.kind {
            wit::BufferKind::Nav => BufferKind::Nav,
            wit::BufferKind::Sig => BufferKind::Sig,
            wit::BufferKind::Single => BufferKind::Single,
        },
        dtype: dtype_from_wit(b.dtype),
        usage: match b.usage {
            wit::BufferUse::Normal => BufferUse::Normal,
            wit::BufferUse::Private => BufferUse::Private,
            wit::BufferUse::ResultOnly => BufferUse::ResultOnly,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, ty: wit::ParamType, default: Option<wit::ParamValueResult>) -> wit::ParamSpec {
        wit::ParamSpec { name: name.into(), ty, doc: String::new(), default, nav_aux: false }
    }

    fn description(params: Vec<wit::ParamSpec>) -> wit::Description {
        wit::Description {
            name: "p".into(),
            version: "1.0".into(),
            summary: "s".into(),
            params,
            methods: vec![wit::Method::Tile],
            input_dtype: wit::DtypePreference::Native,
            tiling: wit::TilingPreferences { depth: wit::TileDepth::Default, total_size: wit::TileSize::BestFit },
            custom_merge: false,
            custom_results: false,
            main_preprocess: false,
            data_access: wit::DataAccess::Typed,
        }
    }

    fn refused(d: wit::Description) -> String {
        match description_from_wit(d) {
            Err(CallError::Contract(m)) => m,
            other => panic!("expected a contract error, got {other:?}"),
        }
    }

    #[test]
    fn a_million_parameters_are_refused_at_once() {
        let params = (0..1_000_000).map(|i| spec(&format!("p{i}"), wit::ParamType::Int, None)).collect();
        let started = std::time::Instant::now();
        assert!(refused(description(params)).contains("1000000 parameters; at most 256"));
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }

    #[test]
    fn text_is_capped_and_escaped() {
        let mut d = description(Vec::new());
        d.version = "9".repeat(32 << 20);
        assert!(refused(d).contains("the version is 33554432 bytes long; at most 64"));
        let mut d = description(Vec::new());
        d.summary = "sum\x1b[31m of\nall".into();
        assert_eq!(description_from_wit(d).unwrap().summary, "sum\\u{1b}[31m of\\nall");
    }

    #[test]
    fn parameters_must_be_unique_usable_and_of_their_declared_type() {
        let int = |name: &str| spec(name, wit::ParamType::Int, None);
        assert!(refused(description(vec![int("a"), int("b"), int("a")])).contains("parameter 'a' twice"));
        assert!(refused(description(vec![int("x.y")])).contains("\"x.y\" is not usable"));
        let text_default = spec("n", wit::ParamType::Int, Some(wit::ParamValueResult::Text("3".into())));
        assert!(
            refused(description(vec![text_default])).contains("parameter 'n' is declared int but its default is text")
        );
        // An integer is a float, as on the command line.
        let float = spec("r", wit::ParamType::Float, Some(wit::ParamValueResult::Int(3)));
        assert!(description_from_wit(description(vec![float])).is_ok());
    }

    /// Issue 33, finding 3: an array default claiming 2^61 float64 elements over no data
    /// passed (2^61 × 8 wraps to 0 bytes) and every partition then panicked on it.
    #[test]
    fn an_array_default_whose_size_wraps_or_is_huge_is_refused() {
        let array = |shape: Vec<u64>, data: Vec<u8>| {
            Some(wit::ParamValueResult::Array(wit::NdarrayResult {
                dtype: wit::Dtype::Float64,
                shape,
                data: wit::ArrayDataResult::Bytes(data),
            }))
        };
        let wrapping = spec("m", wit::ParamType::Array, array(vec![1 << 61], Vec::new()));
        assert!(refused(description(vec![wrapping])).contains("too large"));
        let huge = spec("m", wit::ParamType::Array, array(vec![3 << 20], Vec::new()));
        let msg = refused(description(vec![huge]));
        assert!(msg.contains("at most 16777216"), "{msg}");
        let fine = spec("m", wit::ParamType::Array, array(vec![2], vec![0; 16]));
        assert!(description_from_wit(description(vec![fine])).is_ok());
    }

    #[test]
    fn names_and_methods_are_checked() {
        let mut d = description(Vec::new());
        d.name = "results.json".into();
        assert!(refused(d).contains("is not usable"));
        let mut d = description(Vec::new());
        d.methods.clear();
        assert!(refused(d).contains("implements no method"));
        let mut d = description(Vec::new());
        d.methods = vec![wit::Method::Frame, wit::Method::Frame];
        assert_eq!(description_from_wit(d).unwrap().methods, vec![Method::Frame]);
    }
}
