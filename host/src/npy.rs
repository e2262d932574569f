//! The `.npy` format: header parsing (versions 1–3) and writing.
//!
//! A file is the magic `\x93NUMPY`, a version, a header length, an ASCII Python dict
//! literal `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }` padded so the
//! data starts at a multiple of 64 bytes, then the elements.

use crate::array::NdArray;
use crate::dtype::{ByteOrder, StoredDType};
use std::io::Write;

const MAGIC: &[u8] = b"\x93NUMPY";

/// The parsed header of a `.npy` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyHeader {
    /// Element type and byte order.
    pub dtype: StoredDType,
    /// Whether the data is in Fortran (column-major) order.
    pub fortran_order: bool,
    /// Array shape.
    pub shape: Vec<usize>,
    /// Byte offset of the first element.
    pub data_offset: usize,
}

/// What is wrong with a `.npy` header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NpyError {
    #[error("not a .npy file (the magic bytes \\x93NUMPY are missing)")]
    BadMagic,
    #[error("the header is truncated: the file has {available} bytes, the header needs {needed}")]
    Truncated { needed: usize, available: usize },
    #[error(".npy format version {0}.{1} is not supported (only 1.0, 2.0, 3.0)")]
    Version(u8, u8),
    #[error("the header is not valid text")]
    NotText,
    #[error("malformed header at byte {offset}: {message}")]
    Syntax { offset: usize, message: String },
    #[error("the header has no '{0}' entry")]
    Missing(&'static str),
    #[error("dtype '{0}' is not supported (structured, object, string or unknown dtypes cannot be processed)")]
    UnsupportedDtype(String),
    #[error("the shape {shape:?} is too large")]
    TooLarge { shape: Vec<usize> },
}

impl NpyHeader {
    /// Parse the header at the start of `bytes` (which may hold more than the header).
    ///
    /// # Errors
    /// [`NpyError`] for a bad magic, version, truncation, syntax, or unsupported dtype.
    pub fn parse(bytes: &[u8]) -> Result<Self, NpyError> {
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err(NpyError::BadMagic);
        }
        let need = |needed: usize| {
            if bytes.len() < needed { Err(NpyError::Truncated { needed, available: bytes.len() }) } else { Ok(()) }
        };
        need(8)?;
        let (major, minor) = (bytes[6], bytes[7]);
        let (len_bytes, header_start) = match major {
            1 => (2, 10),
            2 | 3 => (4, 12),
            _ => return Err(NpyError::Version(major, minor)),
        };
        need(header_start)?;
        let header_len = if len_bytes == 2 {
            usize::from(u16::from_le_bytes([bytes[8], bytes[9]]))
        } else {
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize
        };
        let data_offset = header_start + header_len;
        need(data_offset)?;
        let text = std::str::from_utf8(&bytes[header_start..data_offset]).map_err(|_| NpyError::NotText)?;
        let dict = DictParser { text, pos: 0, base: header_start }.parse()?;
        let descr = dict.descr.ok_or(NpyError::Missing("descr"))?;
        let dtype = StoredDType::from_descr(&descr).ok_or(NpyError::UnsupportedDtype(descr))?;
        let shape = dict.shape.ok_or(NpyError::Missing("shape"))?;
        let fortran_order = dict.fortran_order.ok_or(NpyError::Missing("fortran_order"))?;
        shape
            .iter()
            .try_fold(dtype.dtype.size(), |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| NpyError::TooLarge { shape: shape.clone() })?;
        Ok(NpyHeader { dtype, fortran_order, shape, data_offset })
    }

    /// Bytes of element data the header promises.
    pub fn data_len(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.dtype.size()
    }
}

#[derive(Default)]
struct Dict {
    descr: Option<String>,
    fortran_order: Option<bool>,
    shape: Option<Vec<usize>>,
}

/// A parser for the small Python literal subset numpy writes.
struct DictParser<'a> {
    text: &'a str,
    pos: usize,
    base: usize,
}

impl DictParser<'_> {
    fn err<T>(&self, message: impl Into<String>) -> Result<T, NpyError> {
        Err(NpyError::Syntax { offset: self.base + self.pos, message: message.into() })
    }

    /// Python's whitespace between tokens is ASCII (a non-ASCII space such as U+00A0,
    /// two bytes long, is a syntax error there; stepping one byte over it cut a char).
    fn skip_ws(&mut self) {
        while self.rest().starts_with(|c: char| c.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }

    fn rest(&self) -> &str {
        &self.text[self.pos..]
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip_ws();
        if self.rest().starts_with(token) {
            self.pos += token.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, token: &str) -> Result<(), NpyError> {
        if self.eat(token) { Ok(()) } else { self.err(format!("expected '{token}'")) }
    }

    fn string(&mut self) -> Result<String, NpyError> {
        self.skip_ws();
        let quote = match self.rest().chars().next() {
            Some(q @ ('\'' | '"')) => q,
            _ => return self.err("expected a quoted string"),
        };
        self.pos += 1;
        match self.rest().find(quote) {
            Some(end) => {
                let s = self.rest()[..end].to_owned();
                self.pos += end + 1;
                Ok(s)
            }
            None => self.err("unterminated string"),
        }
    }

    fn parse(mut self) -> Result<Dict, NpyError> {
        let mut dict = Dict::default();
        self.expect("{")?;
        loop {
            if self.eat("}") {
                break;
            }
            let key = self.string()?;
            self.expect(":")?;
            match key.as_str() {
                "descr" => {
                    self.skip_ws();
                    if self.rest().starts_with('[') {
                        return Err(NpyError::UnsupportedDtype("a structured dtype".into()));
                    }
                    dict.descr = Some(self.string()?);
                }
                "fortran_order" => {
                    dict.fortran_order = Some(if self.eat("True") {
                        true
                    } else if self.eat("False") {
                        false
                    } else {
                        return self.err("fortran_order must be True or False");
                    });
                }
                "shape" => dict.shape = Some(self.shape()?),
                other => return self.err(format!("unexpected key '{other}'")),
            }
            if !self.eat(",") {
                self.expect("}")?;
                break;
            }
        }
        Ok(dict)
    }

    fn shape(&mut self) -> Result<Vec<usize>, NpyError> {
        self.expect("(")?;
        let mut shape = Vec::new();
        loop {
            if self.eat(")") {
                return Ok(shape);
            }
            self.skip_ws();
            let digits = self.rest().find(|c: char| !c.is_ascii_digit()).unwrap_or(self.rest().len());
            if digits == 0 {
                return self.err("expected a dimension");
            }
            let value = self.rest()[..digits].trim_end_matches('L').parse::<usize>();
            let Ok(value) = value else {
                return self.err("dimension out of range");
            };
            self.pos += digits;
            self.eat("L");
            shape.push(value);
            if !self.eat(",") {
                self.expect(")")?;
                return Ok(shape);
            }
        }
    }
}

/// Serialise a header for `shape` and `dtype` (version 1.0, or 2.0 if it does not fit).
pub fn header_bytes(dtype: StoredDType, shape: &[usize]) -> Vec<u8> {
    let shape_text = match shape {
        [single] => format!("({single},)"),
        dims => format!("({})", dims.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    };
    let dict = format!("{{'descr': '{}', 'fortran_order': False, 'shape': {shape_text}, }}", dtype.descr());
    for (major, prefix) in [(1u8, 10usize), (2, 12)] {
        let total = (prefix + dict.len() + 1).div_ceil(64) * 64;
        let header_len = total - prefix;
        if major == 1 && header_len > usize::from(u16::MAX) {
            continue;
        }
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&[major, 0]);
        if major == 1 {
            out.extend_from_slice(&(header_len as u16).to_le_bytes());
        } else {
            out.extend_from_slice(&(header_len as u32).to_le_bytes());
        }
        out.extend_from_slice(dict.as_bytes());
        out.resize(total - 1, b' ');
        out.push(b'\n');
        return out;
    }
    unreachable!("a version 2.0 header length always fits in u32")
}

/// Write `array` as a `.npy` file to `out` (little-endian).
///
/// # Errors
/// I/O errors of `out`.
pub fn write_array(out: &mut impl Write, array: &NdArray) -> std::io::Result<()> {
    let stored = StoredDType { dtype: array.dtype(), order: ByteOrder::Little };
    out.write_all(&header_bytes(stored, array.shape()))?;
    out.write_all(array.bytes())
}

/// Read a whole `.npy` file into memory (for parameters, ROIs and tests).
///
/// # Errors
/// A message naming the file: unreadable, malformed, Fortran order, truncated data.
pub fn read_array(path: &std::path::Path) -> Result<NdArray, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse_array(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parse a whole `.npy` file held in memory.
///
/// # Errors
/// A malformed header, Fortran order, or truncated data.
pub fn parse_array(bytes: &[u8]) -> Result<NdArray, String> {
    let header = NpyHeader::parse(bytes).map_err(|e| e.to_string())?;
    if header.fortran_order {
        return Err("the array is in Fortran order; save it in C order (np.ascontiguousarray)".into());
    }
    let data = &bytes[header.data_offset..];
    if data.len() < header.data_len() {
        return Err(format!(
            "truncated: the header promises {} bytes of data, the file has {}",
            header.data_len(),
            data.len()
        ));
    }
    let data = &data[..header.data_len()];
    let converted;
    let native = if header.dtype.needs_conversion_to(header.dtype.dtype) {
        // Aligned for the element type (a `Vec<u8>` is not; an empty one is at address 1).
        let mut out = crate::array::AlignedBytes::zeroed(data.len());
        crate::dtype::converter(header.dtype, header.dtype.dtype)(data, out.as_mut_slice());
        converted = out;
        converted.as_slice()
    } else {
        data
    };
    NdArray::from_bytes(header.dtype.dtype, &header.shape, native).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `npy_header` fuzz target: an empty big-endian array converted into
    /// an unaligned (empty `Vec<u8>`) buffer panicked.
    #[test]
    fn empty_big_endian_arrays_parse() {
        let dict = "{'descr': '>f8', 'fortran_order': False, 'shape': (0, 3), }";
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        let total = (10 + dict.len() + 1).div_ceil(64) * 64;
        bytes.extend_from_slice(&((total - 10) as u16).to_le_bytes());
        bytes.extend_from_slice(dict.as_bytes());
        bytes.resize(total - 1, b' ');
        bytes.push(b'\n');
        let array = parse_array(&bytes).unwrap();
        assert_eq!(array.shape(), &[0, 3]);
        assert_eq!(array.dtype(), DType::F64);
    }
    use crate::dtype::DType;

    #[test]
    fn round_trips_headers() {
        for shape in [vec![], vec![7], vec![2, 3, 4, 5]] {
            let stored = StoredDType { dtype: DType::U16, order: ByteOrder::Big };
            let bytes = header_bytes(stored, &shape);
            assert_eq!(bytes.len() % 64, 0);
            let header = NpyHeader::parse(&bytes).unwrap();
            assert_eq!(header.shape, shape);
            assert_eq!(header.dtype, stored);
            assert!(!header.fortran_order);
            assert_eq!(header.data_offset, bytes.len());
        }
    }

    #[test]
    fn parses_what_numpy_writes() {
        let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (16, 16, 128, 128), }";
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        let len = 118u16;
        bytes.extend_from_slice(&len.to_le_bytes());
        bytes.extend_from_slice(dict.as_bytes());
        bytes.resize(10 + usize::from(len) - 1, b' ');
        bytes.push(b'\n');
        let header = NpyHeader::parse(&bytes).unwrap();
        assert_eq!(header.shape, vec![16, 16, 128, 128]);
        assert_eq!(header.dtype, StoredDType::le(DType::F32));
    }

    #[test]
    fn rejects_bad_headers() {
        assert_eq!(NpyHeader::parse(b"PK\x03\x04"), Err(NpyError::BadMagic));
        assert!(matches!(NpyHeader::parse(b"\x93NUMPY\x01\x00\xff\x00{"), Err(NpyError::Truncated { .. })));
        assert_eq!(NpyHeader::parse(b"\x93NUMPY\x09\x00\x00\x00"), Err(NpyError::Version(9, 0)));
        let good = header_bytes(StoredDType::le(DType::F32), &[2]);
        let replace = |from: &str, to: &str| {
            let at = good.windows(from.len()).position(|w| w == from.as_bytes()).unwrap();
            let mut out = good.clone();
            out[at..at + from.len()].copy_from_slice(to.as_bytes());
            out
        };
        assert!(matches!(NpyHeader::parse(&replace("'<f4'", "'<U8'")), Err(NpyError::UnsupportedDtype(_))));
        assert!(matches!(NpyHeader::parse(&replace("False", "Maybe")), Err(NpyError::Syntax { .. })));
    }
}
