//! Conversions between Python and the host library: NumPy arrays and [`NdArray`]s (results
//! leave without a copy), Python values and parameters, host errors and exceptions.

use crate::{DatasetError, UDFError};
use numpy::ndarray::{ArrayViewD, IxDyn};
use numpy::{PyArray, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString};
use std::sync::Arc;
use udf_host::array::NdArray;
use udf_host::dtype::DType;
use udf_host::exec::RunError;
use udf_host::udf::{CallError, Param, ParamValue, Params};

/// The dtype of a NumPy dtype, if the contract has it (native byte order only: the Python
/// layer makes arrays native and C-contiguous before they get here).
fn dtype_of(array: &Bound<'_, PyUntypedArray>) -> PyResult<DType> {
    let descr = array.dtype();
    let (kind, size, order) = (descr.kind(), descr.itemsize(), descr.byteorder());
    if order == b'>' {
        return Err(PyValueError::new_err("big-endian arrays must be converted to native byte order first"));
    }
    let dtype = match (kind, size) {
        (b'b', 1) => DType::Bool,
        (b'u', 1) => DType::U8,
        (b'u', 2) => DType::U16,
        (b'u', 4) => DType::U32,
        (b'u', 8) => DType::U64,
        (b'i', 1) => DType::I8,
        (b'i', 2) => DType::I16,
        (b'i', 4) => DType::I32,
        (b'i', 8) => DType::I64,
        (b'f', 4) => DType::F32,
        (b'f', 8) => DType::F64,
        (b'c', 8) => DType::C64,
        (b'c', 16) => DType::C128,
        _ => {
            return Err(PyTypeError::new_err(format!(
                "arrays of dtype {} are not supported (bool, (u)int8..64, float32/64, complex64/128 are)",
                descr.str()?
            )));
        }
    };
    Ok(dtype)
}

/// A copy of a C-contiguous, native-endian NumPy array.
pub fn ndarray_from_numpy(array: &Bound<'_, PyUntypedArray>) -> PyResult<NdArray> {
    let dtype = dtype_of(array)?;
    if !array.is_c_contiguous() {
        return Err(PyValueError::new_err("the array must be C-contiguous (use numpy.ascontiguousarray)"));
    }
    let shape = array.shape().to_vec();
    let len = shape.iter().product::<usize>() * dtype.size();
    let bytes = if len == 0 {
        &[][..]
    } else {
        // SAFETY: a C-contiguous array of `len` bytes starts at its data pointer; the GIL
        // is held, so the array cannot be freed or resized while it is copied.
        unsafe { std::slice::from_raw_parts((*array.as_array_ptr()).fields.data as *const u8, len) }
    };
    NdArray::from_bytes(dtype, &shape, bytes).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// A read-only NumPy array over `array`'s memory, kept alive by `owner` (the Python
/// object that holds `array`, which never changes it while Python may look).
///
/// Read-only, because Rust holds the memory as immutable: a write through the view
/// would change data Rust reads as `&[T]` (NumPy still lets a caller turn the flag
/// back on; docs/security.md). Bool arrays are handed out as their bytes
/// (`uint8`) viewed as `bool` by NumPy: Rust never reinterprets bytes as `bool`, so no
/// byte NumPy might hold (2, say) is ever a Rust `bool`.
pub fn numpy_view<'py>(array: &NdArray, owner: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let shape = IxDyn(array.shape());
    let bytes = array.bytes();
    macro_rules! view {
        ($t:ty, $slice:expr) => {{
            let view =
                ArrayViewD::<$t>::from_shape(shape, $slice).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
            // SAFETY: `owner` owns `array` and keeps it (and its heap storage) unchanged
            // for as long as the NumPy array, which holds a reference to `owner`, lives;
            // the array is made read-only below before Python sees it.
            unsafe { PyArray::borrow_from_array(&view, owner) }.into_any()
        }};
    }
    let out = if array.dtype() == DType::Bool {
        view!(u8, bytes).call_method1("view", ("bool",))?
    } else {
        udf_host::with_dtype!(array.dtype(), T => view!(T, bytemuck::cast_slice::<u8, T>(bytes)),
            return Err(PyRuntimeError::new_err("unreachable: bool handled above")))
    };
    out.call_method1("setflags", (false,))?;
    Ok(out)
}

/// Bool arrays with exactly 0 and 1 in every byte (a plugin may return other nonzero
/// bytes for `true`).
pub fn normalise_bools(array: &mut NdArray) {
    if array.dtype() == DType::Bool {
        for b in array.bytes_mut() {
            *b = u8::from(*b != 0);
        }
    }
}

/// A parameter value from Python: bool, int, float, str or a NumPy array (the Python layer
/// turns lists and NumPy scalars into these).
pub fn param_value(value: &Bound<'_, PyAny>) -> PyResult<ParamValue> {
    if value.is_instance_of::<PyBool>() {
        Ok(ParamValue::Bool(value.extract()?))
    } else if value.is_instance_of::<PyInt>() {
        Ok(ParamValue::Int(value.extract()?))
    } else if value.is_instance_of::<PyFloat>() {
        Ok(ParamValue::Float(value.extract()?))
    } else if value.is_instance_of::<PyString>() {
        Ok(ParamValue::Text(value.extract()?))
    } else if let Ok(array) = value.cast::<PyUntypedArray>() {
        Ok(ParamValue::Array(Arc::new(ndarray_from_numpy(array)?)))
    } else {
        Err(PyTypeError::new_err(format!(
            "a parameter must be a bool, int, float, str or numpy array, not {}",
            value.get_type().name()?
        )))
    }
}

/// Parameters from a dict of name -> value.
pub fn params_from_dict(params: &Bound<'_, PyDict>) -> PyResult<Params> {
    let mut out = Vec::with_capacity(params.len());
    for (name, value) in params.iter() {
        let name: String = name.extract()?;
        let value = param_value(&value).map_err(|e| {
            PyErr::from_type(e.get_type(value.py()), format!("parameter '{name}': {}", e.value(value.py())))
        })?;
        out.push(Param { name, value });
    }
    Ok(Params(out))
}

/// A run error as the Python exception users catch: `ValueError` for bad input,
/// `DatasetError`, `UDFError` (with the plugin, call, partition, frames and log lines as
/// attributes), `RuntimeError` for the rest.
pub fn run_error(py: Python<'_>, error: RunError) -> PyErr {
    let message = error.to_string();
    match error {
        RunError::Invalid(_) => PyValueError::new_err(message),
        RunError::Dataset(_) => DatasetError::new_err(message),
        RunError::Udf { udf, source_path, at, error } => {
            let err = UDFError::new_err(message);
            let (kind, log) = match &error {
                CallError::Returned { kind, .. } => (kind.to_string(), Vec::new()),
                CallError::Trap { log_tail, .. } => ("trap".to_owned(), log_tail.clone()),
                CallError::Contract(_) => ("contract".to_owned(), Vec::new()),
            };
            let value = err.value(py);
            // Setting attributes on a fresh exception instance cannot fail in practice;
            // if one did, the exception would still carry its message.
            let _ = value.setattr("plugin", udf);
            let _ = value.setattr("source", source_path);
            let _ = value.setattr("call", at.method);
            let _ = value.setattr("partition", at.partition);
            let _ = value.setattr("frames", at.frames);
            let _ = value.setattr("log", log);
            let _ = value.setattr("kind", kind);
            let _ = value.setattr("error", error.to_string());
            err
        }
        RunError::Cancelled => PyRuntimeError::new_err(message),
        RunError::Internal(_) => PyRuntimeError::new_err(message),
    }
}
