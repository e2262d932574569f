//! The Gatan DigitalMicrograph tag tree (DM3 and DM4): a header, then nested groups of
//! named tags whose data carry a type description ("info" array) and values.
//!
//! | | DM3 | DM4 |
//! |-|-----|-----|
//! | header | version `u32` = 3, length `u32`, byte order `u32` | version `u32` = 4, length `u64`, byte order `u32` |
//! | group | sorted `u8`, open `u8`, count `u32` | same, count `u64` |
//! | tag | kind `u8` (20 group, 21 data, 0 end), label length `u16`, label | same, then the tag's size `u64` |
//! | data | `%%%%`, info length `u32`, info `u32`s, values | `%%%%`, info length `u64`, info `u64`s, values |
//!
//! Structure numbers are big-endian; values use the byte order of the header (1 =
//! little-endian). The parser records where each data tag's values are and how long
//! they are; it never reads the (possibly huge) image arrays.

use std::fmt;

/// Deepest group nesting accepted.
const MAX_DEPTH: usize = 64;
/// Most tags accepted in one file.
const MAX_TAGS: usize = 1_000_000;
/// Longest info array accepted.
const MAX_INFO: u64 = 4096;

/// A parse error with the byte offset where it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagError {
    pub offset: u64,
    pub message: String,
}

impl fmt::Display for TagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at offset {}: {}", self.offset, self.message)
    }
}

/// The element types of tag values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    I16,
    I32,
    U16,
    U32,
    F32,
    F64,
    Bool,
    I8,
    U8,
    I64,
    U64,
}

impl Scalar {
    fn from_code(code: u64) -> Option<Scalar> {
        Some(match code {
            2 => Scalar::I16,
            3 => Scalar::I32,
            4 => Scalar::U16,
            5 => Scalar::U32,
            6 => Scalar::F32,
            7 => Scalar::F64,
            8 => Scalar::Bool,
            9 => Scalar::I8,
            10 => Scalar::U8,
            11 => Scalar::I64,
            12 => Scalar::U64,
            _ => return None,
        })
    }

    /// Bytes per value.
    pub fn size(self) -> u64 {
        match self {
            Scalar::Bool | Scalar::I8 | Scalar::U8 => 1,
            Scalar::I16 | Scalar::U16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
            Scalar::F64 | Scalar::I64 | Scalar::U64 => 8,
        }
    }
}

/// What a data tag holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// One number.
    Scalar(Scalar),
    /// A string of bytes.
    String,
    /// A struct of numbers (field types in order).
    Struct(Vec<Scalar>),
    /// `count` numbers of one type.
    Array(Scalar, u64),
    /// `count` structs.
    StructArray(Vec<Scalar>, u64),
}

/// A node of the tag tree.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Group(Vec<(String, Node)>),
    Data {
        value: Value,
        /// File offset of the first value byte.
        offset: u64,
        /// Bytes of values.
        size: u64,
    },
}

impl Node {
    /// The child named `name` of a group (`"[i]"` for the i-th child, whatever its label).
    pub fn get(&self, name: &str) -> Option<&Node> {
        let Node::Group(children) = self else { return None };
        if let Some(i) = name.strip_prefix('[').and_then(|s| s.strip_suffix(']')).and_then(|s| s.parse::<usize>().ok())
        {
            return children.get(i).map(|(_, n)| n);
        }
        children.iter().find(|(label, _)| label == name).map(|(_, n)| n)
    }

    /// Follow a path of names separated by `/`.
    pub fn path(&self, path: &str) -> Option<&Node> {
        path.split('/').filter(|p| !p.is_empty()).try_fold(self, |node, name| node.get(name))
    }

    /// The children of a group.
    pub fn children(&self) -> &[(String, Node)] {
        match self {
            Node::Group(c) => c,
            Node::Data { .. } => &[],
        }
    }
}

/// A parsed file: version, byte order of values and the root group.
#[derive(Debug, Clone, PartialEq)]
pub struct TagFile {
    pub version: u32,
    pub little_endian: bool,
    pub root: Node,
}

impl TagFile {
    /// Read a scalar tag's value as `f64` (integers exactly up to 2^53).
    pub fn number(&self, bytes: &[u8], node: &Node) -> Option<f64> {
        let Node::Data { value: Value::Scalar(s), offset, size } = node else { return None };
        let b = bytes.get(usize::try_from(*offset).ok()?..usize::try_from(offset + size).ok()?)?;
        let mut buf = [0u8; 8];
        let n = s.size() as usize;
        buf[..n].copy_from_slice(b.get(..n)?);
        if !self.little_endian {
            buf[..n].reverse();
        }
        let le = u64::from_le_bytes(buf);
        Some(match s {
            Scalar::I8 => f64::from(le as u8 as i8),
            Scalar::U8 | Scalar::Bool => f64::from(le as u8),
            Scalar::I16 => f64::from(le as u16 as i16),
            Scalar::U16 => f64::from(le as u16),
            Scalar::I32 => f64::from(le as u32 as i32),
            Scalar::U32 => f64::from(le as u32),
            Scalar::I64 => le as i64 as f64,
            Scalar::U64 => le as f64,
            Scalar::F32 => f64::from(f32::from_bits(le as u32)),
            Scalar::F64 => f64::from_bits(le),
        })
    }

    /// A string tag, or an array of `u16` (how DM stores most text) as UTF-16.
    pub fn text(&self, bytes: &[u8], node: &Node) -> Option<String> {
        let Node::Data { value, offset, size } = node else { return None };
        let b = bytes.get(usize::try_from(*offset).ok()?..usize::try_from(offset + size).ok()?)?;
        match value {
            Value::String => Some(String::from_utf8_lossy(b).into_owned()),
            Value::Array(Scalar::U16, _) => {
                let units: Vec<u16> = b
                    .chunks_exact(2)
                    .map(|c| {
                        if self.little_endian {
                            u16::from_le_bytes([c[0], c[1]])
                        } else {
                            u16::from_be_bytes([c[0], c[1]])
                        }
                    })
                    .collect();
                Some(String::from_utf16_lossy(&units))
            }
            _ => None,
        }
    }
}

struct Parser<'a> {
    bytes: &'a [u8],
    pos: u64,
    dm4: bool,
    tags: usize,
}

impl Parser<'_> {
    fn err<T>(&self, message: impl Into<String>) -> Result<T, TagError> {
        Err(TagError { offset: self.pos, message: message.into() })
    }

    fn take(&mut self, n: u64) -> Result<&[u8], TagError> {
        let start = self.pos;
        let end = start.checked_add(n).filter(|&e| e <= self.bytes.len() as u64);
        match end {
            Some(end) => {
                self.pos = end;
                Ok(&self.bytes[start as usize..end as usize])
            }
            None => self.err(format!("file ends after {} bytes; {n} more expected", self.bytes.len())),
        }
    }

    fn u8(&mut self) -> Result<u8, TagError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, TagError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, TagError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, TagError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }

    /// A count or info entry: `u32` in DM3, `u64` in DM4.
    fn word(&mut self) -> Result<u64, TagError> {
        if self.dm4 { self.u64() } else { self.u32().map(u64::from) }
    }

    fn group(&mut self, depth: usize) -> Result<Node, TagError> {
        if depth > MAX_DEPTH {
            return self.err(format!("tag groups nested deeper than {MAX_DEPTH}"));
        }
        let _sorted = self.u8()?;
        let _open = self.u8()?;
        let count = self.word()?;
        let mut children = Vec::new();
        for _ in 0..count {
            self.tags += 1;
            if self.tags > MAX_TAGS {
                return self.err(format!("more than {MAX_TAGS} tags"));
            }
            let at = self.pos;
            let kind = self.u8()?;
            if kind == 0 {
                break;
            }
            let len = self.u16()?;
            let label = String::from_utf8_lossy(self.take(u64::from(len))?).into_owned();
            let end = if self.dm4 {
                let size = self.u64()?;
                Some(self.pos.checked_add(size).filter(|&e| e <= self.bytes.len() as u64).ok_or_else(|| TagError {
                    offset: self.pos - 8,
                    message: format!("tag '{label}' of {size} bytes runs past the end of the file"),
                })?)
            } else {
                None
            };
            let node = match kind {
                20 => self.group(depth + 1)?,
                21 => self.data(&label)?,
                other => {
                    return Err(TagError {
                        offset: at,
                        message: format!("tag kind {other} (expected 20 = group or 21 = data)"),
                    });
                }
            };
            if let Some(end) = end {
                // DM4 gives each tag's size: trust the structure, but stay consistent.
                if self.pos > end {
                    return Err(TagError {
                        offset: at,
                        message: format!("tag '{label}' is longer than its recorded size"),
                    });
                }
                self.pos = end;
            }
            children.push((label, node));
        }
        Ok(Node::Group(children))
    }

    fn data(&mut self, label: &str) -> Result<Node, TagError> {
        if self.take(4)? != b"%%%%" {
            self.pos -= 4;
            return self.err(format!("data tag '{label}' does not start with %%%%"));
        }
        let n = self.word()?;
        if n == 0 || n > MAX_INFO {
            return self.err(format!("data tag '{label}' has a type description of {n} entries"));
        }
        let info_at = self.pos;
        let info: Vec<u64> = (0..n).map(|_| self.word()).collect::<Result<_, _>>()?;
        let bad = |m: String| TagError { offset: info_at, message: format!("data tag '{label}': {m}") };
        let scalar = |code: u64| Scalar::from_code(code).ok_or_else(|| bad(format!("unknown element type {code}")));
        let fields = |at: usize| -> Result<(Vec<Scalar>, usize), TagError> {
            // [name length, field count, (name length, type) per field]
            let count = *info.get(at + 1).ok_or_else(|| bad("struct description cut short".into()))?;
            let count = usize::try_from(count).ok().filter(|&c| at + 2 + 2 * c <= info.len());
            let count = count.ok_or_else(|| bad("struct field count exceeds its description".into()))?;
            let types = (0..count).map(|i| scalar(info[at + 3 + 2 * i])).collect::<Result<Vec<_>, _>>()?;
            Ok((types, at + 2 + 2 * count))
        };
        let struct_size = |types: &[Scalar]| types.iter().map(|t| t.size()).sum::<u64>();
        let (value, size) = match info[0] {
            15 => {
                let (types, _) = fields(1)?;
                let size = struct_size(&types);
                (Value::Struct(types), size)
            }
            18 => {
                let len = *info.get(1).ok_or_else(|| bad("string without a length".into()))?;
                (Value::String, len)
            }
            20 => {
                let elem = *info.get(1).ok_or_else(|| bad("array without an element type".into()))?;
                if elem == 15 {
                    let (types, next) = fields(2)?;
                    let count = *info.get(next).ok_or_else(|| bad("struct array without a count".into()))?;
                    let size = count.checked_mul(struct_size(&types)).ok_or_else(|| bad("array too large".into()))?;
                    (Value::StructArray(types, count), size)
                } else {
                    let s = scalar(elem)?;
                    let count = *info.get(2).ok_or_else(|| bad("array without a count".into()))?;
                    let size = count.checked_mul(s.size()).ok_or_else(|| bad("array too large".into()))?;
                    (Value::Array(s, count), size)
                }
            }
            code => {
                let s = scalar(code)?;
                (Value::Scalar(s), s.size())
            }
        };
        let offset = self.pos;
        let file_len = self.bytes.len();
        self.take(size).map_err(|_| TagError {
            offset,
            message: format!("data tag '{label}' holds {size} bytes, but the file ends after {file_len} bytes"),
        })?;
        Ok(Node::Data { value, offset, size })
    }
}

/// Parse the tag tree of a DM3 or DM4 file.
///
/// # Errors
/// Not a DM3/DM4 file, or a tag structure that is cut short or inconsistent; the error
/// carries the offset.
pub fn parse(bytes: &[u8]) -> Result<TagFile, TagError> {
    let mut p = Parser { bytes, pos: 0, dm4: false, tags: 0 };
    let version = p.u32()?;
    match version {
        3 => {
            p.u32()?;
        }
        4 => {
            p.dm4 = true;
            p.u64()?;
        }
        other => {
            return Err(TagError {
                offset: 0,
                message: format!("not a DM3/DM4 file: version field is {other:#x}, expected 3 or 4"),
            });
        }
    }
    let order = p.u32()?;
    if order > 1 {
        return Err(TagError { offset: p.pos - 4, message: format!("byte order flag {order}, expected 0 or 1") });
    }
    let root = p.group(0)?;
    Ok(TagFile { version, little_endian: order == 1, root })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dm3(body: &[u8], count: u32) -> Vec<u8> {
        let mut b = 3u32.to_be_bytes().to_vec();
        b.extend(0u32.to_be_bytes());
        b.extend(1u32.to_be_bytes());
        b.extend([0, 1]);
        b.extend(count.to_be_bytes());
        b.extend(body);
        b
    }

    fn data_tag(label: &str, info: &[u32], values: &[u8]) -> Vec<u8> {
        let mut b = vec![21];
        b.extend((label.len() as u16).to_be_bytes());
        b.extend(label.as_bytes());
        b.extend(b"%%%%");
        b.extend((info.len() as u32).to_be_bytes());
        for i in info {
            b.extend(i.to_be_bytes());
        }
        b.extend(values);
        b
    }

    #[test]
    fn parses_scalars_structs_and_arrays() {
        let mut body = data_tag("n", &[3], &7i32.to_le_bytes());
        body.extend(data_tag("s", &[15, 0, 2, 0, 6, 0, 7], &[0; 12]));
        body.extend(data_tag("a", &[20, 4, 3], &[0; 6]));
        body.extend(data_tag("sa", &[20, 15, 0, 2, 0, 2, 0, 10, 5], &[0; 15]));
        let bytes = dm3(&body, 4);
        let file = parse(&bytes).unwrap();
        assert_eq!(file.number(&bytes, file.root.get("n").unwrap()), Some(7.0));
        // Header 12 + group 6 + tag "n" 20 + tag "s" up to its values 4 + 4 + 4 + 28.
        assert_eq!(
            file.root.get("s"),
            Some(&Node::Data { value: Value::Struct(vec![Scalar::F32, Scalar::F64]), offset: 78, size: 12 })
        );
        assert!(matches!(file.root.get("[2]"), Some(Node::Data { value: Value::Array(Scalar::U16, 3), size: 6, .. })));
        assert!(matches!(file.root.get("sa"), Some(Node::Data { size: 15, .. })));
    }

    #[test]
    fn bad_structures_are_errors_with_offsets() {
        assert!(parse(&[0, 0, 0, 9]).unwrap_err().message.contains("not a DM3/DM4"));
        let bytes = dm3(&data_tag("n", &[3], &[1, 2]), 1);
        let e = parse(&bytes).unwrap_err();
        assert!(e.message.contains("holds 4 bytes"), "{e}");
        let e = parse(&dm3(&data_tag("x", &[99], &[]), 1)).unwrap_err();
        assert!(e.message.contains("unknown element type 99"), "{e}");
        let e = parse(&dm3(&data_tag("a", &[20, 2, u32::MAX], &[]), 1)).unwrap_err();
        assert!(e.message.contains("holds"), "{e}");
        let e = parse(&dm3(&data_tag("s", &[15, 0, 1000], &[]), 1)).unwrap_err();
        assert!(e.message.contains("field count"), "{e}");
        // A group nested too deeply.
        let mut deep = Vec::new();
        for _ in 0..100 {
            deep.extend([20, 0, 1, b'g', 0, 1]);
            deep.extend(1u32.to_be_bytes());
        }
        assert!(parse(&dm3(&deep, 1)).unwrap_err().message.contains("nested"));
    }
}
