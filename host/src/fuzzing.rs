//! Entry points for the fuzz targets in `fuzz/` (not a stable API).
//!
//! Each takes raw bytes, drives one parser or validator of untrusted input, and must
//! return (with an error or not) but never panic.

use crate::udf::{BufferDecl, BufferKind, BufferUse, NamedBuffer};
use crate::wasm::bindings::udf::plugin::types as wit;

/// The `.npy` header parser and whole-array reader.
pub fn npy(data: &[u8]) {
    let _ = crate::npy::NpyHeader::parse(data);
    let _ = crate::npy::parse_array(data);
}

/// Command-line parameter values of every type, and ROI rectangles and masks.
pub fn params_and_roi(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for ty in [
        crate::udf::ParamType::Bool,
        crate::udf::ParamType::Int,
        crate::udf::ParamType::Float,
        crate::udf::ParamType::Text,
        crate::udf::ParamType::Array,
    ] {
        let spec = crate::udf::ParamSpec { name: "p".into(), ty, doc: String::new(), default: None, nav_aux: false };
        // `@file` would read files; the fuzzer only exercises the in-memory forms.
        if !text.starts_with('@') {
            let _ = crate::params::parse_value(&spec, text);
        }
    }
    let nav: Vec<usize> = data.iter().take(3).map(|&b| usize::from(b % 17) + 1).collect();
    let _ = crate::roi::Roi::from_rect(text, &nav);
    if let Ok(array) = crate::npy::parse_array(data) {
        let frames = array.len();
        let _ = crate::roi::Roi::from_array(&array, &[frames]);
        let _ = crate::roi::Roi::from_array(&array, &nav);
    }
}

/// Validation of arrays a plugin returns: a declared buffer against what was exported.
pub fn plugin_array(data: &[u8]) {
    if data.len() < 4 {
        return;
    }
    let dtypes = [
        wit::Dtype::Boolean,
        wit::Dtype::Uint8,
        wit::Dtype::Uint16,
        wit::Dtype::Uint32,
        wit::Dtype::Uint64,
        wit::Dtype::Int8,
        wit::Dtype::Int16,
        wit::Dtype::Int32,
        wit::Dtype::Int64,
        wit::Dtype::Float32,
        wit::Dtype::Float64,
        wit::Dtype::Complex64,
        wit::Dtype::Complex128,
    ];
    let dtype = dtypes[usize::from(data[0]) % dtypes.len()];
    let dims = usize::from(data[1] % 4);
    let shape: Vec<u64> = data[2..].iter().take(dims).map(|&b| u64::from(b) * u64::from(b % 7)).collect();
    let payload = &data[(2 + dims).min(data.len())..];
    let values = payload.len() / 8;
    let floats: Vec<f32> = payload.iter().map(|&b| f32::from(b)).collect();
    let array_data = match data[1] >> 4 {
        0 => wit::ArrayDataResult::Bytes(payload.to_vec()),
        1 => wit::ArrayDataResult::Float32(floats),
        2 => wit::ArrayDataResult::Complex64(floats),
        3 => wit::ArrayDataResult::Boolean(payload.iter().map(|&b| b & 1 == 1).collect()),
        4 => wit::ArrayDataResult::Uint64(vec![7; values]),
        _ => wit::ArrayDataResult::Uint8(payload.to_vec()),
    };
    let array = wit::NdarrayResult { dtype, shape: shape.clone(), data: array_data };
    let Ok(array) = crate::wasm::validate_array(array, "fuzzed buffer") else { return };
    let decl = BufferDecl {
        name: "b".into(),
        kind: [BufferKind::Nav, BufferKind::Sig, BufferKind::Single][usize::from(data[2] % 3)],
        dtype: array.dtype(),
        extra_shape: shape.iter().skip(1).map(|&d| d as usize).collect(),
        usage: BufferUse::Normal,
    };
    let frames = shape.first().map_or(1, |&f| f as usize);
    let sig = [usize::from(data[3] % 5)];
    let _ = crate::exec::check_exported(&[decl], vec![NamedBuffer { name: "b".into(), array }], frames, &sig);
}
