//! Declaring a built-in (its [`Description`] and parameters) and reading its resolved
//! parameters with errors that name the parameter.

use crate::array::NdArray;
use crate::dtype::DType;
use crate::udf::{
    BufferDecl, BufferKind, BufferUse, CallError, DTypePreference, DataAccess, Description, Method, ParamSpec,
    ParamType, ParamValue, Params, RunPlan, TileDepth, TileSize, TilingPreferences,
};
use std::sync::Arc;

/// A description with the built-ins' defaults: tile method, float32 preferred, and
/// tiles as large as the data path allows (whole partitions when read in place), which
/// the kernels walk in cache-sized chunks.
pub fn describe(name: &str, summary: &str) -> Description {
    Description {
        name: name.to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        summary: summary.to_owned(),
        params: Vec::new(),
        methods: vec![Method::Tile],
        input_dtype: DTypePreference::Prefer(DType::F32),
        tiling: TilingPreferences { depth: TileDepth::Default, total_size: TileSize::Max },
        custom_merge: false,
        custom_results: false,
        main_preprocess: false,
        data_access: DataAccess::Typed,
    }
}

/// The plan a description implies: its first method, dtype and tiling preferences.
pub fn plan_of(d: &Description) -> RunPlan {
    RunPlan { method: d.methods[0], input_dtype: d.input_dtype, tiling: d.tiling }
}

fn spec(name: &str, ty: ParamType, doc: &str, default: Option<ParamValue>) -> ParamSpec {
    ParamSpec { name: name.to_owned(), ty, doc: doc.to_owned(), default, nav_aux: false }
}

/// A float parameter (`None`: required).
pub fn float(name: &str, doc: &str, default: Option<f64>) -> ParamSpec {
    spec(name, ParamType::Float, doc, default.map(ParamValue::Float))
}

/// An integer parameter (`None`: required).
pub fn int(name: &str, doc: &str, default: Option<i64>) -> ParamSpec {
    spec(name, ParamType::Int, doc, default.map(ParamValue::Int))
}

/// A boolean parameter with a default.
pub fn boolean(name: &str, doc: &str, default: bool) -> ParamSpec {
    spec(name, ParamType::Bool, doc, Some(ParamValue::Bool(default)))
}

/// A text parameter (`None`: required).
pub fn text(name: &str, doc: &str, default: Option<&str>) -> ParamSpec {
    spec(name, ParamType::Text, doc, default.map(|s| ParamValue::Text(s.to_owned())))
}

/// An array parameter; `default` is a float64 array of these values (`None`: required).
pub fn array(name: &str, doc: &str, default: Option<&[f64]>) -> ParamSpec {
    let default = default.map(|v| {
        let array = NdArray::from_vec(&[v.len()], v.to_vec()).unwrap_or_else(|_| unreachable!("1-d of its length"));
        ParamValue::Array(Arc::new(array))
    });
    spec(name, ParamType::Array, doc, default)
}

fn missing(name: &str, ty: &str) -> CallError {
    CallError::bad_param(format!("parameter '{name}' ({ty}) is missing"))
}

/// A float parameter (integers are accepted).
///
/// # Errors
/// Missing or of another type.
pub fn get_float(params: &Params, name: &str) -> Result<f64, CallError> {
    match params.get(name) {
        Some(ParamValue::Float(f)) => Ok(*f),
        Some(ParamValue::Int(i)) => Ok(*i as f64),
        Some(other) => Err(CallError::bad_param(format!("parameter '{name}' must be a number, got {other}"))),
        None => Err(missing(name, "float")),
    }
}

/// An integer parameter.
///
/// # Errors
/// Missing or of another type.
pub fn get_int(params: &Params, name: &str) -> Result<i64, CallError> {
    match params.get(name) {
        Some(ParamValue::Int(i)) => Ok(*i),
        Some(other) => Err(CallError::bad_param(format!("parameter '{name}' must be an integer, got {other}"))),
        None => Err(missing(name, "int")),
    }
}

/// A boolean parameter.
///
/// # Errors
/// Missing or of another type.
pub fn get_bool(params: &Params, name: &str) -> Result<bool, CallError> {
    match params.get(name) {
        Some(ParamValue::Bool(b)) => Ok(*b),
        Some(other) => Err(CallError::bad_param(format!("parameter '{name}' must be true or false, got {other}"))),
        None => Err(missing(name, "bool")),
    }
}

/// A text parameter.
///
/// # Errors
/// Missing or of another type.
pub fn get_text<'a>(params: &'a Params, name: &str) -> Result<&'a str, CallError> {
    match params.get(name) {
        Some(ParamValue::Text(s)) => Ok(s),
        Some(other) => Err(CallError::bad_param(format!("parameter '{name}' must be text, got {other}"))),
        None => Err(missing(name, "text")),
    }
}

/// An array parameter.
///
/// # Errors
/// Missing or of another type.
pub fn get_array<'a>(params: &'a Params, name: &str) -> Result<&'a NdArray, CallError> {
    get_shared_array(params, name).map(|a| &**a)
}

/// Array parameter `name` itself (shared with the params, no copy).
///
/// # Errors
/// Missing, or not an array.
pub fn get_shared_array<'a>(params: &'a Params, name: &str) -> Result<&'a std::sync::Arc<NdArray>, CallError> {
    match params.get(name) {
        Some(ParamValue::Array(a)) => Ok(a),
        Some(other) => Err(CallError::bad_param(format!("parameter '{name}' must be an array, got {other}"))),
        None => Err(missing(name, "array")),
    }
}

/// A dtype given by NumPy name in text parameter `name` (`""` gives `None`).
///
/// # Errors
/// Not a dtype name.
pub fn get_dtype(params: &Params, name: &str) -> Result<Option<DType>, CallError> {
    let text = get_text(params, name)?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    DType::parse(text).map(Some).ok_or_else(|| {
        CallError::bad_param(format!("parameter '{name}' must be a NumPy dtype name like float32, got '{text}'"))
    })
}

/// The elements of a real or integer array as `f64`, or an error naming `name`.
///
/// # Errors
/// A complex or bool array where numbers are expected.
pub fn array_f64(array: &NdArray, name: &str) -> Result<Vec<f64>, CallError> {
    crate::array::real_values(array)
        .ok_or_else(|| CallError::bad_param(format!("parameter '{name}' must be a real array, got {}", array.dtype())))
}

/// Check a 2-D signal shape (`name` says who needs it).
///
/// # Errors
/// Bad data if the frames are not 2-D.
pub fn sig_2d(sig: &[usize], name: &str) -> Result<(usize, usize), CallError> {
    match sig {
        [y, x] => Ok((*y, *x)),
        _ => Err(CallError::invalid_data(format!("{name} needs 2-D frames, but the frames have shape {sig:?}"))),
    }
}

/// A normal nav buffer.
pub(crate) fn nav_buffer(name: &str, dtype: crate::dtype::DType, extra_shape: &[usize]) -> BufferDecl {
    BufferDecl {
        name: name.to_owned(),
        kind: BufferKind::Nav,
        dtype,
        extra_shape: extra_shape.to_vec(),
        usage: BufferUse::Normal,
    }
}

/// A normal sig buffer.
pub(crate) fn sig_buffer(name: &str, dtype: crate::dtype::DType) -> BufferDecl {
    BufferDecl {
        name: name.to_owned(),
        kind: BufferKind::Sig,
        dtype,
        extra_shape: Vec::new(),
        usage: BufferUse::Normal,
    }
}
