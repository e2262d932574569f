//! [`Array`]: an array that lives in the host (the contract's `arrays` interface).
//!
//! Per-tile work becomes a few host calls that run at the host's speed instead of a
//! loop over pixels in the plugin; the tile itself is never copied into the plugin when
//! `describe` calls [`use_host_tiles`]:
//!
//! ```ignore
//! fn describe() -> Description {
//!     udf_sdk::array::use_host_tiles();
//!     Description::new("sum", "0.1.0", "Sum of all frames").custom_merge()
//! }
//! fn process_tile(&mut self, _tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
//!     let sum = Array::tile()?.sum(Some(&[0]))?;           // in the host
//!     let sum = sum.to_vec::<f32>()?;                       // one small copy
//!     results.view_mut::<f32>("intensity")?.iter_mut().zip(sum).for_each(|(o, v)| *o += v);
//!     Ok(())
//! }
//! ```

use crate::bindings::udf::plugin::arrays as host;
use crate::{DType, Element, Result, UdfError};

pub use host::{BinaryOp, FftOp, IndexItem, ReduceOp, Scalar, Slice, UnaryOp};

/// The most bytes one call hands the host: the host takes at most 1 MiB of data from a
/// plugin per call during `init` and `process`, so larger arrays go in pieces.
pub const CHUNK_BYTES: usize = 1 << 19;

/// From now on `process` gets tiles without data: [`Array::tile`] is the tile. Call it
/// in `describe`.
pub fn use_host_tiles() {
    host::use_host_tiles();
}

/// An n-dimensional array in the host.
pub struct Array(host::Array);

fn err(e: host::ArrayError) -> UdfError {
    UdfError::invalid_data(e.message)
}

impl std::fmt::Debug for Array {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Array({:?}, {:?})", self.0.dtype(), self.0.shape())
    }
}

/// An operand: an array or a scalar.
pub enum Value<'a> {
    Array(&'a Array),
    Scalar(Scalar),
}

impl<'a> From<&'a Array> for Value<'a> {
    fn from(a: &'a Array) -> Self {
        Value::Array(a)
    }
}

impl From<f64> for Value<'_> {
    fn from(v: f64) -> Self {
        Value::Scalar(Scalar::Float(v))
    }
}

impl From<i64> for Value<'_> {
    fn from(v: i64) -> Self {
        Value::Scalar(Scalar::Int(v))
    }
}

impl Value<'_> {
    fn operand(&self) -> host::Operand<'_> {
        match self {
            Value::Array(a) => host::Operand::Array(&a.0),
            Value::Scalar(s) => host::Operand::Scalar(*s),
        }
    }
}

impl Array {
    /// The tile of the current `process` call (after [`use_host_tiles`]).
    pub fn tile() -> Result<Array> {
        host::tile().map(Array).map_err(err)
    }

    /// `zeros(shape, dtype)`.
    pub fn zeros(shape: &[u64], dtype: DType) -> Result<Array> {
        host::zeros(shape, dtype).map(Array).map_err(err)
    }

    /// An array from the plugin's values (C order). Large ones go to the host in pieces
    /// of [`CHUNK_BYTES`].
    pub fn from_slice<T: Element + bytemuck::NoUninit>(shape: &[u64], values: &[T]) -> Result<Array> {
        let bytes: &[u8] = bytemuck::cast_slice(values);
        if bytes.len() <= CHUNK_BYTES {
            return host::from_bytes(T::DTYPE, shape, bytes).map(Array).map_err(err);
        }
        // A flat array filled a piece at a time, then given its shape.
        let flat = host::zeros(&[values.len() as u64], T::DTYPE).map_err(err)?;
        let step = (CHUNK_BYTES / std::mem::size_of::<T>()).max(1);
        for (i, piece) in values.chunks(step).enumerate() {
            let start = (i * step) as i64;
            let part = host::from_bytes(T::DTYPE, &[piece.len() as u64], bytemuck::cast_slice(piece)).map_err(err)?;
            let at = IndexItem::Slice(Slice { start: Some(start), stop: Some(start + piece.len() as i64), step: None });
            flat.set(&[at], &host::Operand::Array(&part)).map_err(err)?;
        }
        let shape: Vec<i64> = shape.iter().map(|&n| n as i64).collect();
        flat.reshape(&shape).map(Array).map_err(err)
    }

    pub fn shape(&self) -> Vec<u64> {
        self.0.shape()
    }

    pub fn dtype(&self) -> DType {
        self.0.dtype()
    }

    /// The elements, copied into the plugin (C order).
    pub fn to_vec<T: Element + bytemuck::Pod>(&self) -> Result<Vec<T>> {
        if self.dtype() != T::DTYPE {
            return Err(UdfError::internal(format!("to_vec: the array is {:?}", self.dtype())));
        }
        let bytes = self.0.to_bytes().map_err(err)?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// `x[index]`: a view.
    pub fn get(&self, index: &[IndexItem]) -> Result<Array> {
        self.0.get(index).map(Array).map_err(err)
    }

    pub fn reshape(&self, shape: &[i64]) -> Result<Array> {
        self.0.reshape(shape).map(Array).map_err(err)
    }

    /// `x.T`, or the axes in the given order.
    pub fn permute_dims(&self, axes: Option<&[i64]>) -> Result<Array> {
        self.0.permute_dims(axes).map(Array).map_err(err)
    }

    pub fn astype(&self, dtype: DType) -> Result<Array> {
        self.0.astype(dtype).map(Array).map_err(err)
    }

    /// A reduction over `axes` (`None`: all) with the options of the array API.
    pub fn reduce(
        &self,
        op: ReduceOp,
        axes: Option<&[i64]>,
        keepdims: bool,
        dtype: Option<DType>,
        correction: f64,
    ) -> Result<Array> {
        let options = host::ReduceOptions { axes: axes.map(<[i64]>::to_vec), keepdims, dtype, correction };
        host::reduce(op, &self.0, &options).map(Array).map_err(err)
    }

    /// `(sum, var)` over `axes` (`None`: all), reading the array once where
    /// [`reduce`](Self::reduce) with `Sum` and then `Var` reads it twice: a tile's
    /// per-pixel sum and variance are `tile.sum_var(Some(&[0]), false, None, 0.0)`.
    /// `dtype` (a floating dtype; default `var`'s) is both results' (the sums accumulated
    /// in float64); `correction` is the variance's.
    pub fn sum_var(
        &self,
        axes: Option<&[i64]>,
        keepdims: bool,
        dtype: Option<DType>,
        correction: f64,
    ) -> Result<(Array, Array)> {
        let options = host::ReduceOptions { axes: axes.map(<[i64]>::to_vec), keepdims, dtype, correction };
        host::sum_var(&self.0, &options).map(|(s, v)| (Array(s), Array(v))).map_err(err)
    }

    /// `sum(x, axis=axes)`.
    pub fn sum(&self, axes: Option<&[i64]>) -> Result<Array> {
        self.reduce(ReduceOp::Sum, axes, false, None, 0.0)
    }

    /// An elementwise function.
    pub fn unary(&self, op: UnaryOp) -> Result<Array> {
        host::unary(op, &self.0).map(Array).map_err(err)
    }

    /// `op(self, other)` with broadcasting.
    pub fn binary<'a>(&self, op: BinaryOp, other: impl Into<Value<'a>>) -> Result<Array> {
        let other = other.into();
        host::binary(op, &host::Operand::Array(&self.0), &other.operand()).map(Array).map_err(err)
    }

    /// `self @ other`.
    pub fn matmul(&self, other: &Array) -> Result<Array> {
        host::matmul(&self.0, &other.0).map(Array).map_err(err)
    }

    /// `self[index] += value`, in place.
    pub fn add_at<'a>(&self, index: &[IndexItem], value: impl Into<Value<'a>>) -> Result<()> {
        self.0.add_at(index, &value.into().operand()).map_err(err)
    }

    /// `self[index] = value`.
    pub fn set<'a>(&self, index: &[IndexItem], value: impl Into<Value<'a>>) -> Result<()> {
        self.0.set(index, &value.into().operand()).map_err(err)
    }
}
