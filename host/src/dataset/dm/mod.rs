//! Gatan DigitalMicrograph files (`.dm3`, `.dm4`) holding a 3-D or 4-D dataset in one
//! file, stored in C order (the image data is read straight from the file, memory-mapped).
//!
//! The image is the first entry of `ImageList` with at least two dimensions, skipping
//! the thumbnail (entry 0 when there are several). `ImageData/Dimensions` lists the axes
//! fastest first, so the C shape is its reverse: `(ny, nx, sy, sx)` for 4D-STEM.
//!
//! Like LiberTEM's `SingleDMDataSet`, 2-D and 3-D data are taken as C-ordered; 4-D data
//! only when `ImageTags/Meta Data/Data Order Swapped` says so. Older 4-D files store
//! the transposed "(sig, nav)" F/C-hybrid layout, which is refused with a clear error.

pub mod tags;

use super::mapped::{Access, map_file};
use super::{Dataset, DatasetError, DatasetInfo, DatasetShape, MappedFrames, OpenOptions, SigSlice};
use crate::dtype::{ByteOrder, DType, StoredDType};
use std::path::Path;
use tags::{Node, Scalar, TagFile, Value};

/// A DM3/DM4 dataset.
pub struct DmDataset {
    frames: MappedFrames,
    details: Vec<(String, String)>,
}

/// What the tag tree says about the image to read.
#[derive(Debug, Clone, PartialEq)]
pub struct DmImage {
    /// Index in `ImageList`.
    pub index: usize,
    /// C-order shape (reversed `Dimensions`).
    pub shape: Vec<usize>,
    pub stored: StoredDType,
    /// File offset of the first pixel.
    pub offset: u64,
    /// Whether the pixels are in C order.
    pub c_order: bool,
    /// `Meta Data/Format`, if present.
    pub format: Option<String>,
}

/// The DM data type code as our dtype.
fn dm_dtype(code: f64) -> Result<DType, String> {
    Ok(match code as i64 {
        1 => DType::I16,
        2 => DType::F32,
        3 => DType::C64,
        6 => DType::U8,
        7 => DType::I32,
        9 => DType::I8,
        10 => DType::U16,
        11 => DType::U32,
        12 => DType::F64,
        13 => DType::C128,
        14 => DType::Bool,
        39 => DType::I64,
        40 => DType::U64,
        5 | 27 | 28 => return Err(format!("DM data type {} (packed complex FFT data) is not supported", code as i64)),
        other => return Err(format!("DM data type {other} is not supported (RGB images are not)")),
    })
}

/// Find the image in a parsed tag tree (`bytes`: the whole file).
///
/// # Errors
/// A message naming the tag that is missing or wrong.
pub fn find_image(file: &TagFile, bytes: &[u8]) -> Result<DmImage, String> {
    let list = file.root.get("ImageList").ok_or("no ImageList tag group")?;
    let entries = list.children();
    let skip = usize::from(entries.len() > 1);
    let mut problems = Vec::new();
    for (index, (_, entry)) in entries.iter().enumerate().skip(skip) {
        match image_of(file, bytes, entry, index) {
            Ok(Some(image)) => return Ok(image),
            Ok(None) => {}
            Err(e) => problems.push(format!("ImageList entry {index}: {e}")),
        }
    }
    if problems.is_empty() {
        Err(format!("no image of at least two dimensions among the {} ImageList entries", entries.len()))
    } else {
        Err(problems.join("; "))
    }
}

fn image_of(file: &TagFile, bytes: &[u8], entry: &Node, index: usize) -> Result<Option<DmImage>, String> {
    let Some(data) = entry.get("ImageData") else { return Ok(None) };
    let dims: Vec<usize> = data
        .get("Dimensions")
        .ok_or("ImageData has no Dimensions")?
        .children()
        .iter()
        .map(|(_, d)| file.number(bytes, d).filter(|v| *v >= 1.0 && *v < 1e12).map(|v| v as usize))
        .collect::<Option<_>>()
        .ok_or("Dimensions holds a value that is not a positive size")?;
    if dims.len() < 2 {
        return Ok(None);
    }
    let code = data.get("DataType").and_then(|t| file.number(bytes, t)).ok_or("ImageData has no DataType")?;
    let dtype = dm_dtype(code)?;
    let (offset, size) = match data.get("Data") {
        Some(Node::Data { value: Value::Array(_, _), offset, size }) => (offset, size),
        // Complex images are arrays of (real, imaginary) structs of two floats.
        Some(Node::Data { value: Value::StructArray(fields, _), offset, size })
            if matches!(
                (dtype, fields.as_slice()),
                (DType::C64, [Scalar::F32, Scalar::F32]) | (DType::C128, [Scalar::F64, Scalar::F64])
            ) =>
        {
            (offset, size)
        }
        Some(Node::Data { value: Value::StructArray(fields, _), .. }) => {
            return Err(format!(
                "ImageData/Data is an array of structs of {fields:?}, which DataType {} ({dtype}) does not describe",
                code as i64
            ));
        }
        _ => return Err("ImageData/Data is not an array".into()),
    };
    let pixels = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d as u64)).ok_or("image too large")?;
    let expected = pixels.checked_mul(dtype.size() as u64).ok_or("image too large")?;
    if *size != expected {
        return Err(format!(
            "ImageData/Data at offset {offset} holds {size} bytes, but Dimensions {dims:?} of {dtype} need {expected}"
        ));
    }
    let meta = entry.path("ImageTags/Meta Data");
    let format = meta.and_then(|m| m.get("Format")).and_then(|f| file.text(bytes, f)).map(|s| s.trim().to_owned());
    let swapped = meta.and_then(|m| m.get("Data Order Swapped")).and_then(|t| file.number(bytes, t));
    let c_order = match swapped {
        Some(v) => v != 0.0,
        None => dims.len() <= 3,
    };
    let order = if file.little_endian || dtype.size() == 1 { ByteOrder::Little } else { ByteOrder::Big };
    Ok(Some(DmImage {
        index,
        shape: dims.iter().rev().copied().collect(),
        stored: StoredDType { dtype, order },
        offset: *offset,
        c_order,
        format,
    }))
}

pub(super) fn open(path: &Path, options: &OpenOptions) -> Result<DmDataset, DatasetError> {
    let map = map_file(path, Access::Sequential)?;
    let tags = tags::parse(&map).map_err(|e| DatasetError::invalid(path, format!("DM tag tree {e}")))?;
    let image = find_image(&tags, &map).map_err(|m| DatasetError::invalid(path, m))?;
    if image.format.as_deref().is_some_and(|f| f.eq_ignore_ascii_case("spectrum image")) {
        return Err(DatasetError::invalid(path, "spectrum images (1-D signal) are not supported"));
    }
    if !image.c_order {
        return Err(DatasetError::invalid(
            path,
            format!(
                "the {}-D data of ImageList entry {} is stored in the transposed (sig, nav) layout of older \
                 Gatan software (no 'Data Order Swapped' tag); only C-ordered files are supported: save it \
                 in C order from DigitalMicrograph, or convert it (LiberTEM's convert_dm4_transposed)",
                image.shape.len(),
                image.index
            ),
        ));
    }
    if options.dtype.is_some_and(|d| d != image.stored) {
        return Err(DatasetError::invalid(path, format!("--dtype differs from the file's {}", image.stored)));
    }
    let total = &image.shape;
    let (nav, sig) = if total.len() == 2 {
        (vec![1], total.clone())
    } else {
        (total[..total.len() - 2].to_vec(), total[total.len() - 2..].to_vec())
    };
    let frames_in_file: usize = nav.iter().product();
    let sig_len: usize = sig.iter().product();
    let sig = match &options.sig_shape {
        Some(s) if s.iter().product::<usize>() != sig_len => {
            return Err(DatasetError::invalid(
                path,
                format!("--sig-shape {s:?} has a different size than the file's frames {sig:?}"),
            ));
        }
        Some(s) => s.clone(),
        None => sig,
    };
    let nav = match &options.nav_shape {
        Some(n) if n.iter().product::<usize>() > frames_in_file => {
            return Err(DatasetError::invalid(
                path,
                format!("--nav-shape {n:?} needs more frames than the {frames_in_file} in the file"),
            ));
        }
        Some(n) => n.clone(),
        None => nav,
    };
    let shape = DatasetShape { nav, sig };
    let offset = usize::try_from(image.offset).map_err(|_| DatasetError::invalid(path, "data offset too large"))?;
    let stride = sig_len * image.stored.dtype.size();
    let frames = MappedFrames::open(path, offset, stride, image.stored, shape)?;
    let details = vec![
        ("version".into(), format!("DM{}", tags.version)),
        ("image_index".into(), image.index.to_string()),
        ("data_offset".into(), image.offset.to_string()),
        ("file_shape".into(), format!("{:?}", image.shape)),
        ("image_format".into(), image.format.unwrap_or_default()),
    ];
    Ok(DmDataset { frames, details })
}

impl Dataset for DmDataset {
    fn shape(&self) -> &DatasetShape {
        self.frames.shape()
    }

    fn stored_dtype(&self) -> StoredDType {
        self.frames.stored()
    }

    fn info(&self) -> DatasetInfo {
        DatasetInfo { format: "dm", path: self.frames.path().to_owned(), details: self.details.clone() }
    }

    fn read_tile(&self, frames: &[u64], sig: &SigSlice, dtype: DType, out: &mut [u8]) -> Result<(), DatasetError> {
        self.frames.read_tile(frames, sig, dtype, out)
    }

    fn direct_frames(&self, frames: std::ops::Range<u64>, dtype: DType) -> Option<&[u8]> {
        self.frames.direct_frames(frames, dtype)
    }
}
