//! LiberTEM's raw CSR sparse format: a TOML file naming three raw files that hold a
//! compressed-sparse-row matrix over (flat nav) x (flat sig): `indptr` (one entry per
//! frame plus one), `indices` (flat signal index of each stored value) and `data`.
//!
//! ```toml
//! [params]
//! filetype = "raw_csr"
//! nav_shape = [512, 512]
//! sig_shape = [516, 516]
//!
//! [raw_csr]
//! indptr_file = "rowind.dat"
//! indptr_dtype = "<i4"
//! indices_file = "coords.dat"
//! indices_dtype = "<i4"
//! data_file = "values.dat"
//! data_dtype = "<i4"
//! ```
//!
//! Tiles are dense: `read_tile` zero-fills the tile and adds each stored value of the
//! selected frames at its position (duplicate indices add up, as in `scipy.sparse`).
//! Sparse tiles for UDFs that could use them are not implemented yet.

use super::mapped::{Access, map_file};
use super::{Dataset, DatasetError, DatasetInfo, DatasetShape, OpenOptions, SigSlice};
use crate::dtype::{ByteOrder, DType, Kind, StoredDType, converter};
use memmap2::Mmap;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The TOML file.
#[derive(Debug, Deserialize)]
struct Toml {
    params: Params,
    #[serde(flatten)]
    sections: std::collections::BTreeMap<String, toml::Value>,
}

#[derive(Debug, Deserialize)]
struct Params {
    filetype: String,
    nav_shape: Vec<usize>,
    sig_shape: Vec<usize>,
}

#[derive(Debug, Deserialize)]
struct Files {
    indptr_file: String,
    indptr_dtype: String,
    indices_file: String,
    indices_dtype: String,
    data_file: String,
    data_dtype: String,
}

/// What the TOML file says, checked: shapes, and the three files with their dtypes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsrDescriptor {
    pub nav_shape: Vec<usize>,
    pub sig_shape: Vec<usize>,
    pub indptr: (PathBuf, StoredDType),
    pub indices: (PathBuf, StoredDType),
    pub data: (PathBuf, StoredDType),
}

/// Parse the TOML text of a raw CSR dataset; file names are taken relative to `dir`.
///
/// # Errors
/// A message naming the key that is missing or wrong.
pub fn parse_descriptor(text: &str, dir: &Path) -> Result<CsrDescriptor, String> {
    let toml: Toml = toml::from_str(text).map_err(|e| format!("not a raw CSR TOML file: {e}"))?;
    if !toml.params.filetype.eq_ignore_ascii_case("raw_csr") {
        return Err(format!("[params] filetype is '{}', expected 'raw_csr'", toml.params.filetype));
    }
    let section = toml
        .sections
        .get(&toml.params.filetype)
        .ok_or_else(|| format!("no [{}] section with the file names", toml.params.filetype))?;
    let files: Files = section.clone().try_into().map_err(|e| format!("section [{}]: {e}", toml.params.filetype))?;
    let dtype = |key: &str, text: &str, integer: bool| -> Result<StoredDType, String> {
        let d = StoredDType::from_descr(text)
            .or_else(|| StoredDType::parse(text))
            .ok_or_else(|| format!("{key} '{text}' is not a NumPy dtype"))?;
        if integer && !matches!(d.dtype.kind(), Kind::Unsigned | Kind::Signed) {
            return Err(format!("{key} '{text}' must be an integer type"));
        }
        Ok(d)
    };
    let check_shape = |key: &str, shape: &[usize]| {
        if shape.is_empty() || shape.contains(&0) {
            Err(format!("[params] {key} {shape:?} must be non-empty without zero axes"))
        } else {
            Ok(())
        }
    };
    check_shape("nav_shape", &toml.params.nav_shape)?;
    check_shape("sig_shape", &toml.params.sig_shape)?;
    Ok(CsrDescriptor {
        nav_shape: toml.params.nav_shape,
        sig_shape: toml.params.sig_shape,
        indptr: (dir.join(&files.indptr_file), dtype("indptr_dtype", &files.indptr_dtype, true)?),
        indices: (dir.join(&files.indices_file), dtype("indices_dtype", &files.indices_dtype, true)?),
        data: (dir.join(&files.data_file), dtype("data_dtype", &files.data_dtype, false)?),
    })
}

/// One of the three files, mapped.
struct Array {
    path: PathBuf,
    map: Option<Mmap>,
    stored: StoredDType,
    len: usize,
}

impl Array {
    fn open(path: &Path, stored: StoredDType, what: &str) -> Result<Self, DatasetError> {
        let file = crate::dataset::mapped::open_file(path)
            .map_err(|source| DatasetError::Open { path: path.to_owned(), source })?;
        let bytes = file.metadata().map_err(|source| DatasetError::Open { path: path.to_owned(), source })?.len();
        let size = stored.dtype.size() as u64;
        if !bytes.is_multiple_of(size) {
            return Err(DatasetError::invalid(
                path,
                format!("{what} file of {bytes} bytes is not a whole number of {stored} elements"),
            ));
        }
        let map = if bytes == 0 { None } else { Some(map_file(path, Access::Sequential)?) };
        Ok(Array { path: path.to_owned(), map, stored, len: (bytes / size) as usize })
    }

    fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// Element `k` of an integer array as `i128` (no integer type overflows it).
    fn int(&self, k: usize) -> i128 {
        let size = self.stored.dtype.size();
        let b = &self.bytes()[k * size..(k + 1) * size];
        let mut le = [0u8; 8];
        le[..size].copy_from_slice(b);
        if self.stored.order == ByteOrder::Big {
            le[..size].reverse();
        }
        let raw = u64::from_le_bytes(le);
        if self.stored.dtype.kind() == Kind::Signed {
            let shift = 64 - 8 * size as u32;
            i128::from(((raw << shift) as i64) >> shift)
        } else {
            i128::from(raw)
        }
    }
}

/// A raw CSR dataset, read into dense tiles.
pub struct RawCsrDataset {
    toml: PathBuf,
    shape: DatasetShape,
    indptr: Array,
    indices: Array,
    data: Array,
}

pub(super) fn open(path: &Path, options: &OpenOptions) -> Result<RawCsrDataset, DatasetError> {
    let text = std::fs::read(path).map_err(|source| DatasetError::Open { path: path.to_owned(), source })?;
    let text = String::from_utf8(text).map_err(|e| {
        DatasetError::invalid(
            path,
            format!("not a raw CSR TOML file: invalid UTF-8 at offset {}", e.utf8_error().valid_up_to()),
        )
    })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let desc = parse_descriptor(&text, dir).map_err(|m| DatasetError::invalid(path, m))?;
    if options.dtype.is_some_and(|d| d != desc.data.1) {
        return Err(DatasetError::invalid(
            path,
            format!("--dtype differs from the data_dtype {} of the TOML file", desc.data.1),
        ));
    }
    let sig_len: usize = desc.sig_shape.iter().product();
    let sig = match &options.sig_shape {
        Some(s) if s.iter().product::<usize>() != sig_len => {
            return Err(DatasetError::invalid(
                path,
                format!("--sig-shape {s:?} has a different size than the sig_shape {:?} of the file", desc.sig_shape),
            ));
        }
        Some(s) => s.clone(),
        None => desc.sig_shape.clone(),
    };
    let nav = options.nav_shape.clone().unwrap_or_else(|| desc.nav_shape.clone());
    let shape = DatasetShape { nav, sig };

    let indptr = Array::open(&desc.indptr.0, desc.indptr.1, "indptr")?;
    let indices = Array::open(&desc.indices.0, desc.indices.1, "indices")?;
    let data = Array::open(&desc.data.0, desc.data.1, "data")?;
    if indices.len != data.len {
        return Err(DatasetError::invalid(
            &desc.data.0,
            format!(
                "{} values, but {} holds {} indices; the two must match",
                data.len,
                desc.indices.0.display(),
                indices.len
            ),
        ));
    }
    let frames = shape.nav_len();
    if indptr.len < frames + 1 {
        return Err(DatasetError::invalid(
            &desc.indptr.0,
            format!(
                "holds {} row pointers ({} frames), but nav shape {:?} needs {} (+1)",
                indptr.len,
                indptr.len.saturating_sub(1),
                shape.nav,
                frames
            ),
        ));
    }
    // Row pointers: start at 0 (or more), never decrease, stay within the data.
    let size = indptr.stored.dtype.size();
    let mut prev = 0i128;
    for k in 0..=frames {
        let v = indptr.int(k);
        if v < prev || v > data.len as i128 {
            return Err(DatasetError::invalid(
                &desc.indptr.0,
                format!(
                    "row pointer {k} (offset {}) is {v}: expected between {prev} and the {} stored values",
                    k * size,
                    data.len
                ),
            ));
        }
        prev = v;
    }
    Ok(RawCsrDataset { toml: path.to_owned(), shape, indptr, indices, data })
}

/// Add `src` (one element of `dtype`, native order) to the element at `dst`.
fn add_into(dtype: DType, src: &[u8], dst: &mut [u8]) {
    use crate::dtype::Element;
    crate::with_dtype!(dtype, T => {
        let (a, b): (T, T) = (bytemuck::pod_read_unaligned(src), bytemuck::pod_read_unaligned(dst));
        dst.copy_from_slice(bytemuck::bytes_of(&a.numpy_add(b)));
    }, dst[0] |= src[0])
}

impl Dataset for RawCsrDataset {
    fn shape(&self) -> &DatasetShape {
        &self.shape
    }

    fn stored_dtype(&self) -> StoredDType {
        self.data.stored
    }

    fn info(&self) -> DatasetInfo {
        DatasetInfo {
            format: "raw_csr",
            path: self.toml.clone(),
            details: vec![
                ("nonzeros".into(), self.data.len.to_string()),
                ("indptr".into(), format!("{} ({})", self.indptr.path.display(), self.indptr.stored)),
                ("indices".into(), format!("{} ({})", self.indices.path.display(), self.indices.stored)),
                ("data".into(), format!("{} ({})", self.data.path.display(), self.data.stored)),
            ],
        }
    }

    /// Whole frames: every signal slice scans all values of a frame.
    fn base_shape(&self) -> Vec<usize> {
        self.shape.sig.clone()
    }

    fn read_tile(&self, frames: &[u64], sig: &SigSlice, dtype: DType, out: &mut [u8]) -> Result<(), DatasetError> {
        let dst_size = dtype.size();
        let slice_len = sig.len();
        if out.len() != frames.len() * slice_len * dst_size {
            return Err(DatasetError::invalid(&self.toml, "internal: tile buffer of the wrong size"));
        }
        let nav_len = self.shape.nav_len() as u64;
        if let Some(&bad) = frames.iter().find(|&&f| f >= nav_len) {
            return Err(DatasetError::invalid(&self.toml, format!("frame {bad} is outside the dataset")));
        }
        out.fill(0);
        let convert = converter(self.data.stored, dtype);
        let src_size = self.data.stored.dtype.size();
        let full = sig.shape == self.shape.sig;
        let sig_len = self.shape.sig_len() as i128;
        let dims = &self.shape.sig;
        let mut value = [0u8; 16];
        let mut coords = vec![0usize; dims.len()];
        let data = self.data.bytes();
        for (fi, &frame) in frames.iter().enumerate() {
            let start = self.indptr.int(frame as usize) as usize;
            let end = self.indptr.int(frame as usize + 1) as usize;
            let frame_out = &mut out[fi * slice_len * dst_size..(fi + 1) * slice_len * dst_size];
            for k in start..end {
                let index = self.indices.int(k);
                if index < 0 || index >= sig_len {
                    return Err(DatasetError::invalid(
                        &self.indices.path,
                        format!(
                            "index {k} (offset {}) is {index}, outside the frame of {sig_len} pixels",
                            k * self.indices.stored.dtype.size()
                        ),
                    ));
                }
                let index = index as usize;
                let at = if full {
                    index
                } else {
                    let mut rem = index;
                    for a in (0..dims.len()).rev() {
                        coords[a] = rem % dims[a];
                        rem /= dims[a];
                    }
                    let mut at = 0;
                    let mut inside = true;
                    for ((&c, &origin), &len) in coords.iter().zip(&sig.origin).zip(&sig.shape) {
                        match c.checked_sub(origin).filter(|&c| c < len) {
                            Some(c) => at = at * len + c,
                            None => inside = false,
                        }
                    }
                    if !inside {
                        continue;
                    }
                    at
                };
                convert(&data[k * src_size..(k + 1) * src_size], &mut value[..dst_size]);
                add_into(dtype, &value[..dst_size], &mut frame_out[at * dst_size..(at + 1) * dst_size]);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOML: &str = r#"
[params]
filetype = "raw_csr"
nav_shape = [4, 5]
sig_shape = [6, 7]

[raw_csr]
indptr_file = "rowind.dat"
indptr_dtype = "<i8"
indices_file = "coords.dat"
indices_dtype = "<u4"
data_file = "values.dat"
data_dtype = ">f4"
"#;

    #[test]
    fn parses_libertem_toml() {
        let d = parse_descriptor(TOML, Path::new("/x")).unwrap();
        assert_eq!(d.nav_shape, vec![4, 5]);
        assert_eq!(d.indptr.0, Path::new("/x/rowind.dat"));
        assert_eq!(d.data.1, StoredDType { dtype: DType::F32, order: ByteOrder::Big });
        // NumPy codes without a byte-order character are NumPy codes too: 64-bit.
        let d =
            parse_descriptor(&TOML.replace("\"<i8\"", "\"i8\"").replace("\">f4\"", "\"u8\""), Path::new(".")).unwrap();
        assert_eq!((d.indptr.1.dtype, d.data.1.dtype), (DType::I64, DType::U64));
    }

    #[test]
    fn rejects_what_is_not_raw_csr() {
        let e = parse_descriptor(&TOML.replace("\"raw_csr\"\n", "\"raw\"\n"), Path::new(".")).unwrap_err();
        assert!(e.contains("expected 'raw_csr'"), "{e}");
        let e = parse_descriptor(&TOML.replace("<u4", "<f4"), Path::new(".")).unwrap_err();
        assert!(e.contains("indices_dtype") && e.contains("integer"), "{e}");
        let e = parse_descriptor(&TOML.replace("data_file", "dta_file"), Path::new(".")).unwrap_err();
        assert!(e.contains("data_file"), "{e}");
        let e = parse_descriptor(&TOML.replace("[4, 5]", "[4, 0]"), Path::new(".")).unwrap_err();
        assert!(e.contains("nav_shape"), "{e}");
        assert!(parse_descriptor("[params", Path::new(".")).is_err());
    }

    #[test]
    fn adds_in_the_target_type() {
        let mut dst = 1.5f32.to_ne_bytes();
        add_into(DType::F32, &2.0f32.to_ne_bytes(), &mut dst);
        assert_eq!(f32::from_ne_bytes(dst), 3.5);
        let mut dst = [250u8];
        add_into(DType::U8, &[10], &mut dst);
        assert_eq!(dst, [4]);
    }
}
