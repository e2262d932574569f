//! `udf_host._native` host arrays: the host's array executor (`udf_host::arrays`) in
//! this process, for `udf_host.xp` (the NumPy-like namespace that plugins use inside
//! the sandbox, here with this backend) and for the tests that check the executor
//! against NumPy and the array API standard's test suite.

use pyo3::exceptions::{PyIndexError, PyMemoryError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyComplex, PyTuple};
use std::sync::{Arc, OnceLock};
use udf_host::arrays::ops::{BinaryOp, FftOp, ReduceOp, UnaryOp};
use udf_host::arrays::{
    self, ArrayError, ArrayMemory, Ctx, HostArray, IndexItem, Operand, ReduceOptions, Scalar, WriteMode,
};
use udf_host::dtype::DType;

/// Host arrays of this process may use this much memory together.
const MEMORY_LIMIT: usize = 16 << 30;

fn memory() -> &'static Arc<ArrayMemory> {
    static MEMORY: OnceLock<Arc<ArrayMemory>> = OnceLock::new();
    MEMORY.get_or_init(|| ArrayMemory::with_limit(MEMORY_LIMIT))
}

fn with_ctx<R>(f: impl FnOnce(&Ctx<'_>) -> Result<R, ArrayError>) -> PyResult<R> {
    let cx = Ctx { memory: memory(), stop: &|| None };
    f(&cx).map_err(to_py)
}

/// The Python exception of an [`ArrayError`] (the array API's choices: `IndexError` for
/// indices, `TypeError` for dtypes, `ValueError` for shapes and values).
fn to_py(e: ArrayError) -> PyErr {
    let message = e.to_string();
    match e.kind() {
        "index" | "axis" => PyIndexError::new_err(message),
        "dtype" => PyTypeError::new_err(message),
        "memory" => PyMemoryError::new_err(message),
        "interrupted" | "expired" => PyRuntimeError::new_err(message),
        _ => PyValueError::new_err(message),
    }
}

fn dtype(name: &str) -> PyResult<DType> {
    DType::parse(name).ok_or_else(|| PyTypeError::new_err(format!("unknown dtype '{name}'")))
}

/// An array of the host's executor.
#[pyclass(frozen, module = "udf_host._native", name = "HostArray")]
pub struct PyHostArray(HostArray);

fn wrap(a: HostArray) -> PyHostArray {
    PyHostArray(a)
}

/// A Python value as an operand: a host array or a Python scalar.
enum Value<'py> {
    Array(PyRef<'py, PyHostArray>),
    Scalar(Scalar),
}

impl<'py> Value<'py> {
    fn operand(&self) -> Operand<'_> {
        match self {
            Value::Array(a) => Operand::Array(&a.0),
            Value::Scalar(s) => Operand::Scalar(*s),
        }
    }
}

fn value<'py>(v: &Bound<'py, PyAny>) -> PyResult<Value<'py>> {
    if let Ok(a) = v.extract::<PyRef<'py, PyHostArray>>() {
        return Ok(Value::Array(a));
    }
    Ok(Value::Scalar(scalar(v)?))
}

fn scalar(v: &Bound<'_, PyAny>) -> PyResult<Scalar> {
    if let Ok(b) = v.extract::<bool>()
        && v.is_instance_of::<pyo3::types::PyBool>()
    {
        return Ok(Scalar::Bool(b));
    }
    if v.is_instance_of::<pyo3::types::PyInt>() {
        return v
            .extract::<i64>()
            .map(Scalar::Int)
            .map_err(|_| PyOverflowError::new_err("Python int too large for the host's arrays"));
    }
    if let Ok(f) = v.extract::<f64>()
        && v.is_instance_of::<pyo3::types::PyFloat>()
    {
        return Ok(Scalar::Float(f));
    }
    if let Ok(c) = v.cast::<PyComplex>() {
        return Ok(Scalar::Complex(c.real(), c.imag()));
    }
    Err(PyTypeError::new_err(format!("expected a host array or a Python scalar, got {}", v.get_type().name()?)))
}

use pyo3::exceptions::PyOverflowError;

/// Index items: `("slice", start, stop, step)`, `("at", i)`, `("newaxis",)`, `("ellipsis",)`.
fn index(items: &Bound<'_, PyAny>) -> PyResult<Vec<IndexItem>> {
    let mut out = Vec::new();
    for item in items.try_iter()? {
        let item = item?;
        let t = item.cast::<PyTuple>()?;
        let kind: String = t.get_item(0)?.extract()?;
        out.push(match kind.as_str() {
            "slice" => IndexItem::Slice {
                start: t.get_item(1)?.extract()?,
                stop: t.get_item(2)?.extract()?,
                step: t.get_item(3)?.extract()?,
            },
            "at" => IndexItem::At(t.get_item(1)?.extract()?),
            "newaxis" => IndexItem::NewAxis,
            "ellipsis" => IndexItem::Ellipsis,
            other => return Err(PyValueError::new_err(format!("unknown index item '{other}'"))),
        });
    }
    Ok(out)
}

#[pymethods]
impl PyHostArray {
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.0.shape().to_vec()
    }

    #[getter]
    fn dtype(&self) -> &'static str {
        self.0.dtype().name()
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.0.to_bytes(memory(), "to_bytes").map_err(to_py)?;
        Ok(PyBytes::new(py, &bytes))
    }

    fn getitem(&self, items: &Bound<'_, PyAny>) -> PyResult<PyHostArray> {
        self.0.get(&index(items)?).map(wrap).map_err(to_py)
    }

    fn select(&self, mask: PyRef<'_, PyHostArray>) -> PyResult<PyHostArray> {
        with_ctx(|cx| arrays::construct::select(cx, &self.0, &mask.0)).map(wrap)
    }

    #[pyo3(signature = (indices, axis=None))]
    fn take(&self, indices: Vec<i64>, axis: Option<i64>) -> PyResult<PyHostArray> {
        with_ctx(|cx| arrays::construct::take(cx, &self.0, &indices, axis)).map(wrap)
    }

    fn reshape(&self, shape: Vec<i64>) -> PyResult<PyHostArray> {
        self.0.reshape(memory(), &shape).map(wrap).map_err(to_py)
    }

    #[pyo3(signature = (axes=None))]
    fn permute_dims(&self, axes: Option<Vec<i64>>) -> PyResult<PyHostArray> {
        self.0.permute_dims(axes.as_deref()).map(wrap).map_err(to_py)
    }

    fn broadcast_to(&self, shape: Vec<usize>) -> PyResult<PyHostArray> {
        self.0.broadcast_to(&shape).map(wrap).map_err(to_py)
    }

    fn expand_dims(&self, axis: i64) -> PyResult<PyHostArray> {
        self.0.expand_dims(axis).map(wrap).map_err(to_py)
    }

    #[pyo3(signature = (axes=None))]
    fn squeeze(&self, axes: Option<Vec<i64>>) -> PyResult<PyHostArray> {
        self.0.squeeze(axes.as_deref()).map(wrap).map_err(to_py)
    }

    fn astype(&self, dtype_name: &str) -> PyResult<PyHostArray> {
        let d = dtype(dtype_name)?;
        with_ctx(|cx| arrays::astype(cx, &self.0, d)).map(wrap)
    }

    fn set(&self, items: &Bound<'_, PyAny>, v: &Bound<'_, PyAny>) -> PyResult<()> {
        let items = index(items)?;
        let v = value(v)?;
        with_ctx(|cx| arrays::write(cx, &self.0, &items, v.operand(), WriteMode::Assign))
    }

    fn add_at(&self, items: &Bound<'_, PyAny>, v: &Bound<'_, PyAny>) -> PyResult<()> {
        let items = index(items)?;
        let v = value(v)?;
        with_ctx(|cx| arrays::write(cx, &self.0, &items, v.operand(), WriteMode::Add))
    }
}

#[pyfunction]
fn from_bytes(dtype_name: &str, shape: Vec<usize>, data: &[u8]) -> PyResult<PyHostArray> {
    HostArray::from_bytes(memory(), dtype(dtype_name)?, &shape, data).map(wrap).map_err(to_py)
}

#[pyfunction]
fn zeros(shape: Vec<usize>, dtype_name: &str) -> PyResult<PyHostArray> {
    HostArray::zeros(memory(), dtype(dtype_name)?, &shape).map(wrap).map_err(to_py)
}

#[pyfunction]
#[pyo3(signature = (shape, fill, dtype_name=None))]
fn full(shape: Vec<usize>, fill: &Bound<'_, PyAny>, dtype_name: Option<&str>) -> PyResult<PyHostArray> {
    let s = scalar(fill)?;
    let d = dtype_name.map(dtype).transpose()?;
    with_ctx(|cx| arrays::construct::full(cx, &shape, s, d)).map(wrap)
}

#[pyfunction]
fn arange(start: f64, stop: f64, step: f64, dtype_name: &str) -> PyResult<PyHostArray> {
    let d = dtype(dtype_name)?;
    with_ctx(|cx| arrays::construct::arange(cx, start, stop, step, d)).map(wrap)
}

#[pyfunction]
fn linspace(start: f64, stop: f64, num: usize, endpoint: bool, dtype_name: &str) -> PyResult<PyHostArray> {
    let d = dtype(dtype_name)?;
    with_ctx(|cx| arrays::construct::linspace(cx, start, stop, num, endpoint, d)).map(wrap)
}

#[pyfunction]
fn eye(rows: usize, cols: usize, k: i64, dtype_name: &str) -> PyResult<PyHostArray> {
    let d = dtype(dtype_name)?;
    with_ctx(|cx| arrays::construct::eye(cx, rows, cols, k, d)).map(wrap)
}

fn op<T: Copy>(name: &str, from: fn(&str) -> Option<T>) -> PyResult<T> {
    from(name).ok_or_else(|| PyValueError::new_err(format!("unknown operation '{name}'")))
}

#[pyfunction]
fn unary(name: &str, x: PyRef<'_, PyHostArray>) -> PyResult<PyHostArray> {
    let o = op(name, UnaryOp::from_name)?;
    with_ctx(|cx| arrays::unary(cx, o, &x.0)).map(wrap)
}

#[pyfunction]
fn binary(name: &str, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<PyHostArray> {
    let o = op(name, BinaryOp::from_name)?;
    let (a, b) = (value(a)?, value(b)?);
    with_ctx(|cx| arrays::binary(cx, o, a.operand(), b.operand())).map(wrap)
}

/// `(sum, var)` over the same axes in one pass (`arrays::sum_var`).
#[pyfunction]
#[pyo3(signature = (x, axes=None, keepdims=false, dtype_name=None, correction=0.0))]
fn sum_var(
    x: PyRef<'_, PyHostArray>,
    axes: Option<Vec<i64>>,
    keepdims: bool,
    dtype_name: Option<&str>,
    correction: f64,
) -> PyResult<(PyHostArray, PyHostArray)> {
    let d = dtype_name.map(dtype).transpose()?;
    let options = ReduceOptions { axes: axes.as_deref(), keepdims, dtype: d, correction };
    with_ctx(|cx| arrays::sum_var(cx, &x.0, options)).map(|(s, v)| (wrap(s), wrap(v)))
}

#[pyfunction]
#[pyo3(signature = (name, x, axes=None, keepdims=false, dtype_name=None, correction=0.0))]
fn reduce(
    name: &str,
    x: PyRef<'_, PyHostArray>,
    axes: Option<Vec<i64>>,
    keepdims: bool,
    dtype_name: Option<&str>,
    correction: f64,
) -> PyResult<PyHostArray> {
    let o = op(name, ReduceOp::from_name)?;
    let d = dtype_name.map(dtype).transpose()?;
    let options = ReduceOptions { axes: axes.as_deref(), keepdims, dtype: d, correction };
    with_ctx(|cx| arrays::reduce(cx, o, &x.0, options)).map(wrap)
}

#[pyfunction]
#[pyo3(name = "where_")]
fn where_(cond: PyRef<'_, PyHostArray>, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<PyHostArray> {
    let (a, b) = (value(a)?, value(b)?);
    with_ctx(|cx| arrays::where_(cx, &cond.0, a.operand(), b.operand())).map(wrap)
}

#[pyfunction]
#[pyo3(signature = (x, lo=None, hi=None))]
fn clip(
    x: PyRef<'_, PyHostArray>,
    lo: Option<&Bound<'_, PyAny>>,
    hi: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyHostArray> {
    let lo = lo.map(value).transpose()?;
    let hi = hi.map(value).transpose()?;
    with_ctx(|cx| arrays::clip(cx, &x.0, lo.as_ref().map(Value::operand), hi.as_ref().map(Value::operand))).map(wrap)
}

#[pyfunction]
fn matmul(a: PyRef<'_, PyHostArray>, b: PyRef<'_, PyHostArray>) -> PyResult<PyHostArray> {
    with_ctx(|cx| arrays::linalg::matmul(cx, &a.0, &b.0)).map(wrap)
}

#[pyfunction]
fn tensordot(
    a: PyRef<'_, PyHostArray>,
    b: PyRef<'_, PyHostArray>,
    axes_a: Vec<i64>,
    axes_b: Vec<i64>,
) -> PyResult<PyHostArray> {
    with_ctx(|cx| arrays::linalg::tensordot(cx, &a.0, &b.0, &axes_a, &axes_b)).map(wrap)
}

#[pyfunction]
#[pyo3(signature = (a, b, axis, dtype_name=None))]
fn vecdot(
    a: PyRef<'_, PyHostArray>,
    b: PyRef<'_, PyHostArray>,
    axis: i64,
    dtype_name: Option<&str>,
) -> PyResult<PyHostArray> {
    let d = dtype_name.map(dtype).transpose()?;
    with_ctx(|cx| arrays::linalg::vecdot(cx, &a.0, &b.0, axis, d)).map(wrap)
}

#[pyfunction]
#[pyo3(signature = (name, x, axes=None))]
fn fft(name: &str, x: PyRef<'_, PyHostArray>, axes: Option<Vec<i64>>) -> PyResult<PyHostArray> {
    let o = op(name, FftOp::from_name)?;
    with_ctx(|cx| arrays::fft::fft(cx, o, &x.0, axes.as_deref())).map(wrap)
}

#[pyfunction]
#[pyo3(signature = (xs, axis=Some(0)))]
fn concat(xs: Vec<PyRef<'_, PyHostArray>>, axis: Option<i64>) -> PyResult<PyHostArray> {
    let refs: Vec<&HostArray> = xs.iter().map(|x| &x.0).collect();
    with_ctx(|cx| arrays::construct::concat(cx, &refs, axis)).map(wrap)
}

#[pyfunction]
fn stack(xs: Vec<PyRef<'_, PyHostArray>>, axis: i64) -> PyResult<PyHostArray> {
    let refs: Vec<&HostArray> = xs.iter().map(|x| &x.0).collect();
    with_ctx(|cx| arrays::construct::stack(cx, &refs, axis)).map(wrap)
}

/// The operation table (`udf_host::arrays::ops`): `{"unary": [...], "binary": [...], ...}`.
#[pyfunction]
fn operations() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        ("unary", UnaryOp::ALL.iter().map(|o| o.name()).collect()),
        ("binary", BinaryOp::ALL.iter().map(|o| o.name()).collect()),
        ("reduce", ReduceOp::ALL.iter().map(|o| o.name()).collect()),
        ("fft", FftOp::ALL.iter().map(|o| o.name()).collect()),
        ("functions", arrays::ops::FUNCTIONS.to_vec()),
    ]
}

/// Bytes charged to host arrays now and at most.
#[pyfunction]
fn memory_in_use() -> (usize, usize) {
    (memory().charged(), memory().peak())
}

/// Register the `arrays` submodule of `_native`.
pub fn register(parent: &Bound<'_, PyModule>) -> PyResult<()> {
    let m = PyModule::new(parent.py(), "arrays")?;
    m.add_class::<PyHostArray>()?;
    m.add_function(wrap_pyfunction!(from_bytes, &m)?)?;
    m.add_function(wrap_pyfunction!(zeros, &m)?)?;
    m.add_function(wrap_pyfunction!(full, &m)?)?;
    m.add_function(wrap_pyfunction!(arange, &m)?)?;
    m.add_function(wrap_pyfunction!(linspace, &m)?)?;
    m.add_function(wrap_pyfunction!(eye, &m)?)?;
    m.add_function(wrap_pyfunction!(unary, &m)?)?;
    m.add_function(wrap_pyfunction!(binary, &m)?)?;
    m.add_function(wrap_pyfunction!(reduce, &m)?)?;
    m.add_function(wrap_pyfunction!(sum_var, &m)?)?;
    m.add_function(wrap_pyfunction!(where_, &m)?)?;
    m.add_function(wrap_pyfunction!(clip, &m)?)?;
    m.add_function(wrap_pyfunction!(matmul, &m)?)?;
    m.add_function(wrap_pyfunction!(tensordot, &m)?)?;
    m.add_function(wrap_pyfunction!(vecdot, &m)?)?;
    m.add_function(wrap_pyfunction!(fft, &m)?)?;
    m.add_function(wrap_pyfunction!(concat, &m)?)?;
    m.add_function(wrap_pyfunction!(stack, &m)?)?;
    m.add_function(wrap_pyfunction!(operations, &m)?)?;
    m.add_function(wrap_pyfunction!(memory_in_use, &m)?)?;
    parent.add_submodule(&m)?;
    Ok(())
}
