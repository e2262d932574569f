//! Element types of arrays, and how they sit in the contract's `array-data`.

use crate::bindings::udf::plugin::types::{ArrayData, Dtype};
use num_complex::{Complex32, Complex64};

/// A Rust type that is the element of some [`Dtype`].
///
/// Implemented for `bool`, the fixed-size integers, `f32`, `f64`, [`Complex32`] and
/// [`Complex64`]. Used to get typed views of tiles, params and result buffers:
/// `tile.data::<f32>()`, `results.view_mut::<f64>("sum")`.
pub trait Element: Copy + Default + PartialEq + std::fmt::Debug + 'static {
    /// The dtype of this element type.
    const DTYPE: Dtype;

    /// The elements of `data` if it holds this type.
    fn slice(data: &ArrayData) -> Option<&[Self]>;

    /// The elements of `data`, mutably, if it holds this type.
    fn slice_mut(data: &mut ArrayData) -> Option<&mut [Self]>;

    /// Wrap owned elements.
    fn into_data(values: Vec<Self>) -> ArrayData;
}

macro_rules! plain_element {
    ($($t:ty => $variant:ident),* $(,)?) => {$(
        impl Element for $t {
            const DTYPE: Dtype = Dtype::$variant;

            fn slice(data: &ArrayData) -> Option<&[Self]> {
                match data {
                    ArrayData::$variant(v) => Some(v),
                    _ => None,
                }
            }

            fn slice_mut(data: &mut ArrayData) -> Option<&mut [Self]> {
                match data {
                    ArrayData::$variant(v) => Some(v),
                    _ => None,
                }
            }

            fn into_data(values: Vec<Self>) -> ArrayData {
                ArrayData::$variant(values)
            }
        }
    )*};
}

plain_element! {
    bool => Boolean,
    u8 => Uint8,
    u16 => Uint16,
    u32 => Uint32,
    u64 => Uint64,
    i8 => Int8,
    i16 => Int16,
    i32 => Int32,
    i64 => Int64,
    f32 => Float32,
    f64 => Float64,
}

macro_rules! complex_element {
    ($($t:ty => $variant:ident),* $(,)?) => {$(
        impl Element for $t {
            const DTYPE: Dtype = Dtype::$variant;

            fn slice(data: &ArrayData) -> Option<&[Self]> {
                match data {
                    ArrayData::$variant(v) => bytemuck::try_cast_slice(v).ok(),
                    _ => None,
                }
            }

            fn slice_mut(data: &mut ArrayData) -> Option<&mut [Self]> {
                match data {
                    ArrayData::$variant(v) => bytemuck::try_cast_slice_mut(v).ok(),
                    _ => None,
                }
            }

            fn into_data(values: Vec<Self>) -> ArrayData {
                ArrayData::$variant(bytemuck::allocation::cast_vec(values))
            }
        }
    )*};
}

complex_element! {
    Complex32 => Complex64,
    Complex64 => Complex128,
}

/// Size in bytes of one element of `dtype`.
pub fn dtype_size(dtype: Dtype) -> usize {
    match dtype {
        Dtype::Boolean | Dtype::Uint8 | Dtype::Int8 => 1,
        Dtype::Uint16 | Dtype::Int16 => 2,
        Dtype::Uint32 | Dtype::Int32 | Dtype::Float32 => 4,
        Dtype::Uint64 | Dtype::Int64 | Dtype::Float64 | Dtype::Complex64 => 8,
        Dtype::Complex128 => 16,
    }
}

/// NumPy's name for `dtype` (`"float32"`, `"complex64"`, ...).
pub fn dtype_name(dtype: Dtype) -> &'static str {
    match dtype {
        Dtype::Boolean => "bool",
        Dtype::Uint8 => "uint8",
        Dtype::Uint16 => "uint16",
        Dtype::Uint32 => "uint32",
        Dtype::Uint64 => "uint64",
        Dtype::Int8 => "int8",
        Dtype::Int16 => "int16",
        Dtype::Int32 => "int32",
        Dtype::Int64 => "int64",
        Dtype::Float32 => "float32",
        Dtype::Float64 => "float64",
        Dtype::Complex64 => "complex64",
        Dtype::Complex128 => "complex128",
    }
}

/// The dtype that `data` holds, or `None` for raw bytes.
pub(crate) fn data_dtype(data: &ArrayData) -> Option<Dtype> {
    Some(match data {
        ArrayData::Boolean(_) => Dtype::Boolean,
        ArrayData::Uint8(_) => Dtype::Uint8,
        ArrayData::Uint16(_) => Dtype::Uint16,
        ArrayData::Uint32(_) => Dtype::Uint32,
        ArrayData::Uint64(_) => Dtype::Uint64,
        ArrayData::Int8(_) => Dtype::Int8,
        ArrayData::Int16(_) => Dtype::Int16,
        ArrayData::Int32(_) => Dtype::Int32,
        ArrayData::Int64(_) => Dtype::Int64,
        ArrayData::Float32(_) => Dtype::Float32,
        ArrayData::Float64(_) => Dtype::Float64,
        ArrayData::Complex64(_) => Dtype::Complex64,
        ArrayData::Complex128(_) => Dtype::Complex128,
        ArrayData::Bytes(_) => return None,
    })
}

/// Zero-filled typed data of `len` elements.
pub(crate) fn zeros(dtype: Dtype, len: usize) -> ArrayData {
    match dtype {
        Dtype::Boolean => ArrayData::Boolean(vec![false; len]),
        Dtype::Uint8 => ArrayData::Uint8(vec![0; len]),
        Dtype::Uint16 => ArrayData::Uint16(vec![0; len]),
        Dtype::Uint32 => ArrayData::Uint32(vec![0; len]),
        Dtype::Uint64 => ArrayData::Uint64(vec![0; len]),
        Dtype::Int8 => ArrayData::Int8(vec![0; len]),
        Dtype::Int16 => ArrayData::Int16(vec![0; len]),
        Dtype::Int32 => ArrayData::Int32(vec![0; len]),
        Dtype::Int64 => ArrayData::Int64(vec![0; len]),
        Dtype::Float32 => ArrayData::Float32(vec![0.0; len]),
        Dtype::Float64 => ArrayData::Float64(vec![0.0; len]),
        Dtype::Complex64 => ArrayData::Complex64(vec![0.0; 2 * len]),
        Dtype::Complex128 => ArrayData::Complex128(vec![0.0; 2 * len]),
    }
}

/// Number of elements `data` holds when it is of `dtype`.
pub(crate) fn element_count(data: &ArrayData, dtype: Dtype) -> usize {
    match data {
        ArrayData::Boolean(v) => v.len(),
        ArrayData::Uint8(v) => v.len(),
        ArrayData::Uint16(v) => v.len(),
        ArrayData::Uint32(v) => v.len(),
        ArrayData::Uint64(v) => v.len(),
        ArrayData::Int8(v) => v.len(),
        ArrayData::Int16(v) => v.len(),
        ArrayData::Int32(v) => v.len(),
        ArrayData::Int64(v) => v.len(),
        ArrayData::Float32(v) => v.len(),
        ArrayData::Float64(v) => v.len(),
        ArrayData::Complex64(v) => v.len() / 2,
        ArrayData::Complex128(v) => v.len() / 2,
        ArrayData::Bytes(v) => v.len() / dtype_size(dtype),
    }
}

/// Turn raw little-endian bytes into the typed form (the host only sends bytes to
/// plugins that ask for them, but a plugin must cope with either).
pub(crate) fn bytes_to_typed(bytes: &[u8], dtype: Dtype) -> ArrayData {
    fn read<T: bytemuck::Pod>(bytes: &[u8]) -> Vec<T> {
        bytes.chunks_exact(std::mem::size_of::<T>()).map(bytemuck::pod_read_unaligned).collect()
    }
    match dtype {
        Dtype::Boolean => ArrayData::Boolean(bytes.iter().map(|&b| b != 0).collect()),
        Dtype::Uint8 => ArrayData::Uint8(bytes.to_vec()),
        Dtype::Uint16 => ArrayData::Uint16(read(bytes)),
        Dtype::Uint32 => ArrayData::Uint32(read(bytes)),
        Dtype::Uint64 => ArrayData::Uint64(read(bytes)),
        Dtype::Int8 => ArrayData::Int8(read(bytes)),
        Dtype::Int16 => ArrayData::Int16(read(bytes)),
        Dtype::Int32 => ArrayData::Int32(read(bytes)),
        Dtype::Int64 => ArrayData::Int64(read(bytes)),
        Dtype::Float32 => ArrayData::Float32(read(bytes)),
        Dtype::Float64 => ArrayData::Float64(read(bytes)),
        Dtype::Complex64 => ArrayData::Complex64(read(bytes)),
        Dtype::Complex128 => ArrayData::Complex128(read(bytes)),
    }
}

/// Run `$body` with the type alias `$T` bound to the Rust element type of a float or
/// complex `$dtype` (`f32`, `f64`, [`Complex32`], [`Complex64`]); evaluates `$other` for
/// any other dtype.
///
/// Plugins that follow LiberTEM's "result dtype = input dtype" rule use it to write the
/// processing once:
///
/// ```
/// # use udf_sdk::prelude::*;
/// fn total(tile: &Tile<'_>) -> Result<f64> {
///     udf_sdk::with_float_type!(tile.dtype(), T => {
///         let data = tile.flat::<T>()?;
///         Ok(data.iter().map(|v| v.to_f64()).sum())
///     }, Err(UdfError::invalid_data("expected float input")))
/// }
/// ```
#[macro_export]
macro_rules! with_float_type {
    ($dtype:expr, $T:ident => $body:expr, $other:expr) => {
        match $dtype {
            $crate::DType::Float32 => {
                type $T = f32;
                $body
            }
            $crate::DType::Float64 => {
                type $T = f64;
                $body
            }
            $crate::DType::Complex64 => {
                type $T = $crate::Complex32;
                $body
            }
            $crate::DType::Complex128 => {
                type $T = $crate::Complex64;
                $body
            }
            #[allow(unreachable_patterns)]
            _ => $other,
        }
    };
}

/// Arithmetic shared by `f32`, `f64`, [`Complex32`] and [`Complex64`], for code written
/// once with [`with_float_type!`].
pub trait Float: Numeric + std::ops::Div<Output = Self> {
    /// Convert from `f64` (imaginary part 0).
    fn from_f64(value: f64) -> Self;
    /// The value as `f64`: the real part for complex numbers.
    fn to_f64(self) -> f64;
    /// Squared magnitude, `|x|²`.
    fn norm_sqr(self) -> f64;
}

impl Float for f32 {
    fn from_f64(value: f64) -> Self {
        value as f32
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn norm_sqr(self) -> f64 {
        f64::from(self * self)
    }
}

impl Float for f64 {
    fn from_f64(value: f64) -> Self {
        value
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn norm_sqr(self) -> f64 {
        self * self
    }
}

impl Float for Complex32 {
    fn from_f64(value: f64) -> Self {
        Complex32::new(value as f32, 0.0)
    }
    fn to_f64(self) -> f64 {
        f64::from(self.re)
    }
    fn norm_sqr(self) -> f64 {
        f64::from(Complex32::norm_sqr(&self))
    }
}

impl Float for Complex64 {
    fn from_f64(value: f64) -> Self {
        Complex64::new(value, 0.0)
    }
    fn to_f64(self) -> f64 {
        self.re
    }
    fn norm_sqr(self) -> f64 {
        Complex64::norm_sqr(&self)
    }
}

/// Arithmetic shared by every numeric element type (all but `bool`), for code written
/// once with [`with_numeric_type!`].
pub trait Numeric:
    Element
    + std::ops::Add<Output = Self>
    + std::ops::AddAssign
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::iter::Sum
{
    /// Zero.
    const ZERO: Self;
}

macro_rules! numeric {
    ($($t:ty => $zero:expr),* $(,)?) => {$(
        impl Numeric for $t {
            const ZERO: Self = $zero;
        }
    )*};
}

numeric! {
    u8 => 0, u16 => 0, u32 => 0, u64 => 0, i8 => 0, i16 => 0, i32 => 0, i64 => 0,
    f32 => 0.0, f64 => 0.0,
    Complex32 => Complex32::new(0.0, 0.0), Complex64 => Complex64::new(0.0, 0.0),
}

/// Like [`with_float_type!`], for every numeric dtype (integers too); `$other` is
/// evaluated for `bool`.
#[macro_export]
macro_rules! with_numeric_type {
    ($dtype:expr, $T:ident => $body:expr, $other:expr) => {
        match $dtype {
            $crate::DType::Uint8 => {
                type $T = u8;
                $body
            }
            $crate::DType::Uint16 => {
                type $T = u16;
                $body
            }
            $crate::DType::Uint32 => {
                type $T = u32;
                $body
            }
            $crate::DType::Uint64 => {
                type $T = u64;
                $body
            }
            $crate::DType::Int8 => {
                type $T = i8;
                $body
            }
            $crate::DType::Int16 => {
                type $T = i16;
                $body
            }
            $crate::DType::Int32 => {
                type $T = i32;
                $body
            }
            $crate::DType::Int64 => {
                type $T = i64;
                $body
            }
            other => $crate::with_float_type!(other, $T => $body, $other),
        }
    };
}

/// The dtype with NumPy's name `name` (`"float32"`, `"uint16"`, `"complex64"`, `"bool"`).
pub fn dtype_from_name(name: &str) -> Option<Dtype> {
    const ALL: [Dtype; 13] = [
        Dtype::Boolean,
        Dtype::Uint8,
        Dtype::Uint16,
        Dtype::Uint32,
        Dtype::Uint64,
        Dtype::Int8,
        Dtype::Int16,
        Dtype::Int32,
        Dtype::Int64,
        Dtype::Float32,
        Dtype::Float64,
        Dtype::Complex64,
        Dtype::Complex128,
    ];
    ALL.into_iter().find(|&d| dtype_name(d) == name)
}

/// NumPy's `result_type` of two dtypes: the smallest dtype both convert to safely
/// (`bool` is neutral; `uint64` with a signed integer is `float64`; integers of up to
/// 16 bits fit `float32`, wider ones need `float64`).
pub fn result_type(a: Dtype, b: Dtype) -> Dtype {
    use Dtype::*;
    // (kind, bits): 0 bool, 1 unsigned, 2 signed, 3 float, 4 complex (bits of one part).
    fn class(d: Dtype) -> (u8, u32) {
        match d {
            Boolean => (0, 8),
            Uint8 => (1, 8),
            Uint16 => (1, 16),
            Uint32 => (1, 32),
            Uint64 => (1, 64),
            Int8 => (2, 8),
            Int16 => (2, 16),
            Int32 => (2, 32),
            Int64 => (2, 64),
            Float32 => (3, 32),
            Float64 => (3, 64),
            Complex64 => (4, 32),
            Complex128 => (4, 64),
        }
    }
    fn int(signed: bool, bits: u32) -> Dtype {
        match (signed, bits) {
            (false, 8) => Uint8,
            (false, 16) => Uint16,
            (false, 32) => Uint32,
            (false, _) => Uint64,
            (true, 8) => Int8,
            (true, 16) => Int16,
            (true, 32) => Int32,
            (true, _) => Int64,
        }
    }
    let ((ka, ba), (kb, bb)) = (class(a), class(b));
    match (ka, kb) {
        (0, _) => b,
        (_, 0) => a,
        (1, 1) | (2, 2) => int(ka == 2, ba.max(bb)),
        (1, 2) | (2, 1) => {
            let (unsigned, signed) = if ka == 1 { (ba, bb) } else { (bb, ba) };
            if signed > unsigned {
                int(true, signed)
            } else if unsigned < 64 {
                int(true, unsigned * 2)
            } else {
                Float64
            }
        }
        _ => {
            // At least one float or complex: the precision every operand needs.
            let need = |kind: u8, bits: u32| if kind <= 2 { if bits <= 16 { 32 } else { 64 } } else { bits };
            let bits = need(ka, ba).max(need(kb, bb));
            match (ka == 4 || kb == 4, bits) {
                (true, 32) => Complex64,
                (true, _) => Complex128,
                (false, 32) => Float32,
                (false, _) => Float64,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_type_follows_numpy() {
        use Dtype::*;
        // np.result_type for each pair (checked against NumPy 1.26).
        let cases = [
            (Boolean, Uint16, Uint16),
            (Uint16, Float32, Float32),
            (Int16, Float32, Float32),
            (Int32, Float32, Float64),
            (Uint64, Float32, Float64),
            (Uint8, Int8, Int16),
            (Uint16, Int32, Int32),
            (Uint32, Int32, Int64),
            (Uint64, Int64, Float64),
            (Int64, Uint8, Int64),
            (Float32, Float64, Float64),
            (Complex64, Float64, Complex128),
            (Complex64, Uint16, Complex64),
            (Complex64, Int32, Complex128),
            (Float32, Float32, Float32),
            (Boolean, Boolean, Boolean),
        ];
        for (a, b, expected) in cases {
            assert_eq!(result_type(a, b), expected, "{a:?} {b:?}");
            assert_eq!(result_type(b, a), expected, "{b:?} {a:?}");
        }
    }
}
