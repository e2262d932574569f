//! Owned n-dimensional arrays: parameters, result buffers and results.

use crate::dtype::{DType, Element};
use std::fmt;

/// Bytes with 16-byte alignment, so they can be viewed as any element type.
#[derive(Clone, Default)]
pub struct AlignedBytes {
    words: Vec<u128>,
    len: usize,
}

impl AlignedBytes {
    /// `len` zero bytes.
    pub fn zeroed(len: usize) -> Self {
        AlignedBytes { words: vec![0; len.div_ceil(16)], len }
    }

    /// A copy of `bytes`.
    pub fn from_slice(bytes: &[u8]) -> Self {
        let mut out = Self::zeroed(bytes.len());
        out.as_mut_slice().copy_from_slice(bytes);
        out
    }

    /// Resize to `len` bytes, keeping the allocation when it is big enough. New bytes
    /// are unspecified (zero on first growth).
    pub fn resize(&mut self, len: usize) {
        let words = len.div_ceil(16);
        if self.words.len() < words {
            self.words.resize(words, 0);
        }
        self.len = len;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }
}

impl fmt::Debug for AlignedBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AlignedBytes({} bytes)", self.len)
    }
}

/// An owned n-d array in C order with native-endian elements.
#[derive(Clone)]
pub struct NdArray {
    dtype: DType,
    shape: Vec<usize>,
    data: AlignedBytes,
}

/// Arrays are equal when dtype, shape and bytes are (so a NaN equals the same NaN).
impl PartialEq for NdArray {
    fn eq(&self, other: &Self) -> bool {
        self.dtype == other.dtype && self.shape == other.shape && self.bytes() == other.bytes()
    }
}

/// Why an array could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeMismatch {
    /// The bytes do not hold the shape's elements.
    #[error("an array of shape {shape:?} and dtype {dtype} needs {expected} bytes, got {actual}")]
    Length { shape: Vec<usize>, dtype: DType, expected: usize, actual: usize },
    /// The shape's size does not fit in memory at all ([`byte_len`]).
    #[error("an array of shape {shape:?} and dtype {dtype} is larger than this machine can address")]
    TooLarge { shape: Vec<usize>, dtype: DType },
}

/// The bytes an array of `shape` with `item_size`-byte elements takes: `None` when that
/// does not fit in an allocation (`isize::MAX` bytes). As NumPy does ("array is too
/// big"), an axis of length 0 makes the array empty but does not excuse the others: the
/// product of the non-zero axes must fit too, so that the size of every row, plane or
/// sub-shape of an array that passed this check fits as well.
///
/// Every size that comes from outside (a file header, an option, a plugin, a plan, a
/// partition output) goes through here before anything is allocated or indexed.
pub fn byte_len(shape: &[usize], item_size: usize) -> Option<usize> {
    let nonzero = shape.iter().filter(|&&d| d != 0).try_fold(item_size, |acc, &d| acc.checked_mul(d))?;
    if nonzero > isize::MAX as usize {
        return None;
    }
    Some(if shape.contains(&0) { 0 } else { nonzero })
}

impl NdArray {
    /// A zero-filled array.
    ///
    /// # Panics
    /// If the shape's size does not fit in memory ([`byte_len`]): callers pass shapes
    /// checked when they came in (declarations, dataset shapes).
    pub fn zeros(dtype: DType, shape: &[usize]) -> Self {
        let len = byte_len(shape, dtype.size())
            .unwrap_or_else(|| panic!("NdArray::zeros: shape {shape:?} of {dtype} was not checked and overflows"));
        NdArray { dtype, shape: shape.to_vec(), data: AlignedBytes::zeroed(len) }
    }

    /// An array from native-endian bytes.
    ///
    /// # Errors
    /// If `bytes` is not `product(shape) * dtype.size()` long.
    pub fn from_bytes(dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Self, ShapeMismatch> {
        Self::check(dtype, shape, bytes.len())?;
        Ok(NdArray { dtype, shape: shape.to_vec(), data: AlignedBytes::from_slice(bytes) })
    }

    /// An array from typed values.
    ///
    /// # Errors
    /// If `values` does not hold `product(shape)` elements.
    pub fn from_vec<T: Element>(shape: &[usize], values: Vec<T>) -> Result<Self, ShapeMismatch> {
        Self::from_bytes(T::DTYPE, shape, bytemuck::cast_slice(&values))
    }

    /// A boolean array.
    ///
    /// # Errors
    /// If `values` does not hold `product(shape)` elements.
    pub fn from_bools(shape: &[usize], values: &[bool]) -> Result<Self, ShapeMismatch> {
        let bytes: Vec<u8> = values.iter().map(|&b| u8::from(b)).collect();
        Self::from_bytes(DType::Bool, shape, &bytes)
    }

    fn check(dtype: DType, shape: &[usize], actual: usize) -> Result<(), ShapeMismatch> {
        let expected =
            byte_len(shape, dtype.size()).ok_or_else(|| ShapeMismatch::TooLarge { shape: shape.to_vec(), dtype })?;
        if expected == actual {
            Ok(())
        } else {
            Err(ShapeMismatch::Length { shape: shape.to_vec(), dtype, expected, actual })
        }
    }

    /// Bytes per row (per index of the first axis); fits, since the array's shape passed
    /// [`byte_len`].
    fn row_bytes(&self) -> usize {
        self.shape[1..].iter().product::<usize>() * self.dtype.size()
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements as native-endian bytes.
    pub fn bytes(&self) -> &[u8] {
        self.data.as_slice()
    }

    /// The elements as mutable native-endian bytes.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.data.as_mut_slice()
    }

    /// Typed elements; `None` if `T` is not the array's dtype.
    pub fn as_slice<T: Element>(&self) -> Option<&[T]> {
        (T::DTYPE == self.dtype).then(|| bytemuck::cast_slice(self.bytes()))
    }

    /// Typed mutable elements; `None` if `T` is not the array's dtype.
    pub fn as_mut_slice<T: Element>(&mut self) -> Option<&mut [T]> {
        (T::DTYPE == self.dtype).then(|| bytemuck::cast_slice_mut(self.bytes_mut()))
    }

    /// Boolean elements (for `bool` arrays).
    pub fn to_bools(&self) -> Option<Vec<bool>> {
        (self.dtype == DType::Bool).then(|| self.bytes().iter().map(|&b| b != 0).collect())
    }

    /// Same data, new shape with the same number of elements.
    ///
    /// # Errors
    /// If the element counts differ.
    pub fn reshape(mut self, shape: &[usize]) -> Result<Self, ShapeMismatch> {
        Self::check(self.dtype, shape, self.data.len())?;
        self.shape = shape.to_vec();
        Ok(self)
    }

    /// Rows `rows` along the first axis (a copy).
    pub fn slice_rows(&self, rows: std::ops::Range<usize>) -> NdArray {
        let row_bytes = self.row_bytes();
        let mut shape = self.shape.clone();
        shape[0] = rows.len();
        let bytes = &self.bytes()[rows.start * row_bytes..rows.end * row_bytes];
        NdArray { dtype: self.dtype, shape, data: AlignedBytes::from_slice(bytes) }
    }

    /// The given rows (indices along the first axis), in order (a copy).
    pub fn select_rows(&self, rows: impl IntoIterator<Item = usize>) -> NdArray {
        let row_bytes = self.row_bytes();
        let mut out = Vec::new();
        let mut count = 0;
        for row in rows {
            out.extend_from_slice(&self.bytes()[row * row_bytes..(row + 1) * row_bytes]);
            count += 1;
        }
        let mut shape = self.shape.clone();
        shape[0] = count;
        NdArray { dtype: self.dtype, shape, data: AlignedBytes::from_slice(&out) }
    }
}

impl fmt::Debug for NdArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NdArray({}, {:?})", self.dtype, self.shape)
    }
}

/// The elements of a real (not complex) array as `f64`; `None` for complex arrays.
pub fn real_values(array: &NdArray) -> Option<Vec<f64>> {
    use crate::dtype::{CastFrom, Kind};
    if array.dtype().kind() == Kind::Complex {
        return None;
    }
    let bytes = array.bytes();
    Some(crate::with_dtype!(array.dtype(), T => {
        bytemuck::cast_slice::<u8, T>(bytes).iter().map(|&x| f64::cast_from(x)).collect()
    }, bytes.iter().map(|&x| f64::from(x)).collect()))
}

/// The multi-index of flat element `flat` of an array of `shape` (C order).
pub fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut index = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        let n = shape[d].max(1);
        index[d] = flat % n;
        flat /= n;
    }
    index
}

/// Arrays serialise as `{dtype, shape, data}`: in human-readable formats (JSON) `data` is
/// the base64 of the raw native-endian (little-endian) bytes, in binary formats the bytes
/// themselves — exact, and a third of the size of a list of numbers.
mod serialize {
    use super::NdArray;
    use crate::dtype::DType;
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde::de::{self, Visitor};
    use serde::ser::SerializeStruct;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::fmt;

    struct Bytes<'a>(&'a [u8]);

    impl Serialize for Bytes<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            if s.is_human_readable() { s.serialize_str(&STANDARD.encode(self.0)) } else { s.serialize_bytes(self.0) }
        }
    }

    impl Serialize for NdArray {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut st = s.serialize_struct("NdArray", 3)?;
            st.serialize_field("dtype", &self.dtype)?;
            st.serialize_field("shape", &self.shape)?;
            st.serialize_field("data", &Bytes(self.bytes()))?;
            st.end()
        }
    }

    struct ByteBuf(Vec<u8>);

    impl<'de> Deserialize<'de> for ByteBuf {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = ByteBuf;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("array bytes (base64 text or raw bytes)")
                }
                fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteBuf, E> {
                    STANDARD.decode(v).map(ByteBuf).map_err(|e| E::custom(format!("array data is not base64: {e}")))
                }
                fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<ByteBuf, E> {
                    Ok(ByteBuf(v.to_vec()))
                }
                fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<ByteBuf, E> {
                    Ok(ByteBuf(v))
                }
                fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<ByteBuf, A::Error> {
                    let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
                    while let Some(b) = seq.next_element::<u8>()? {
                        out.push(b);
                    }
                    Ok(ByteBuf(out))
                }
            }
            d.deserialize_any(V)
        }
    }

    #[derive(Deserialize)]
    struct Repr {
        dtype: DType,
        shape: Vec<usize>,
        data: ByteBuf,
    }

    impl<'de> Deserialize<'de> for NdArray {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let r = Repr::deserialize(d)?;
            NdArray::from_bytes(r.dtype, &r.shape, &r.data.0).map_err(de::Error::custom)
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn arrays_round_trip_through_json_bit_for_bit() {
            let values = [1.5f64, f64::NAN, -0.0, f64::INFINITY, 1e-310];
            let a = NdArray::from_vec(&[5], values.to_vec()).unwrap();
            let json = serde_json::to_string(&a).unwrap();
            assert!(json.contains("\"dtype\":\"float64\""), "{json}");
            let b: NdArray = serde_json::from_str(&json).unwrap();
            assert_eq!(b.shape(), &[5]);
            assert_eq!(b.bytes(), a.bytes());
        }

        #[test]
        fn a_shape_whose_size_wraps_is_refused_not_taken_for_an_empty_array() {
            // 2^61 float64 elements are 2^64 bytes: 0 after wrapping.
            let e = NdArray::from_bytes(DType::F64, &[1 << 61], &[]).unwrap_err();
            assert!(matches!(e, super::super::ShapeMismatch::TooLarge { .. }), "{e}");
            // A zero-length axis does not excuse the others (rows of the array would wrap).
            assert!(NdArray::from_bytes(DType::U8, &[0, 1 << 62, 8], &[]).is_err());
            assert_eq!(super::super::byte_len(&[0, 3, 5], 8), Some(0));
            assert_eq!(super::super::byte_len(&[3, 5], 8), Some(120));
            let json = r#"{"dtype":"float64","shape":[2305843009213693952],"data":""}"#;
            assert!(serde_json::from_str::<NdArray>(json).is_err(), "a plan cannot carry 2^61 elements in 0 bytes");
        }

        #[test]
        fn array_data_of_the_wrong_length_is_refused() {
            let json = r#"{"dtype":"uint16","shape":[3],"data":"AAAA"}"#;
            let e = serde_json::from_str::<NdArray>(json).unwrap_err().to_string();
            assert!(e.contains("needs 6 bytes, got 3"), "{e}");
        }
    }
}
