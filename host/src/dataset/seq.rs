//! NorPix StreamPix `.seq` files (e.g. Direct Electron cameras).
//!
//! A little-endian header (LiberTEM's `HEADER_FIELDS`, from PIMS):
//!
//! | offset | field |
//! |---|---|
//! | 0 | `magic` u32 = `0xFEED` |
//! | 28 | `version` i32 (images start at 8192 from version 5 on, else 1024) |
//! | 548, 552 | `width`, `height` u32 |
//! | 556 | `bit_depth` u32 (8, 16 or 32: unsigned pixels) |
//! | 568 | `image_format` u32 (100 = monochrome) |
//! | 580 | `true_image_size` u32 (bytes from one image to the next: pixels + timestamp padding) |
//! | 620 | `compression_format` u32 (0 = uncompressed) |
//!
//! Image `i` starts at `offset + i · true_image_size`. The scan shape is not stored:
//! give `--nav-shape` (default: a square scan if the frame count is a square).

use super::framed::{FramedFile, count_frames};
use super::reshaped::ShapeHints;
use super::{Dataset, DatasetError, DatasetShape, MappedFrames, OpenOptions};
use crate::dtype::{DType, StoredDType};
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

/// Bytes of the header fields read.
pub const HEADER_BYTES: usize = 1024;
/// The magic number.
pub const MAGIC: u32 = 0xFEED;

/// A parsed SEQ header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeqHeader {
    pub version: i32,
    pub width: u32,
    pub height: u32,
    pub bit_depth: u32,
    pub image_format: u32,
    pub true_image_size: u32,
    pub compression_format: u32,
    pub allocated_frames: u32,
}

/// What is wrong with a SEQ header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SeqError {
    #[error("the file has {0} bytes, less than the {HEADER_BYTES}-byte SEQ header")]
    Short(usize),
    #[error("offset 0: magic is {0:#x}, expected 0xfeed (not a NorPix .seq file?)")]
    Magic(u32),
    #[error("offset {offset}: {message}")]
    Field { offset: usize, message: String },
}

impl SeqHeader {
    /// Parse the header at the start of `bytes`.
    ///
    /// # Errors
    /// [`SeqError`] naming the offset of a bad or unsupported field.
    pub fn parse(bytes: &[u8]) -> Result<Self, SeqError> {
        if bytes.len() < HEADER_BYTES {
            return Err(SeqError::Short(bytes.len()));
        }
        let u32_at = |o: usize| u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]);
        let magic = u32_at(0);
        if magic != MAGIC {
            return Err(SeqError::Magic(magic));
        }
        let h = SeqHeader {
            version: u32_at(28) as i32,
            width: u32_at(548),
            height: u32_at(552),
            bit_depth: u32_at(556),
            image_format: u32_at(568),
            allocated_frames: u32_at(572),
            true_image_size: u32_at(580),
            compression_format: u32_at(620),
        };
        let field = |offset: usize, message: String| Err(SeqError::Field { offset, message });
        if h.compression_format != 0 {
            return field(
                620,
                format!("compression format {}: only uncompressed images are supported", h.compression_format),
            );
        }
        if h.image_format != 100 {
            return field(568, format!("image format {}: only monochrome images (100) are supported", h.image_format));
        }
        if !matches!(h.bit_depth, 8 | 16 | 32) {
            return field(556, format!("bit depth {} (supported: 8, 16, 32)", h.bit_depth));
        }
        if h.width == 0 || h.height == 0 {
            return field(548, format!("images of {} x {} pixels", h.width, h.height));
        }
        if u64::from(h.true_image_size) < h.frame_bytes() {
            return field(
                580,
                format!(
                    "true_image_size {} is smaller than an image of {} x {} x {} bits",
                    h.true_image_size, h.width, h.height, h.bit_depth
                ),
            );
        }
        Ok(h)
    }

    /// The pixel type.
    pub fn dtype(&self) -> DType {
        match self.bit_depth {
            8 => DType::U8,
            16 => DType::U16,
            _ => DType::U32,
        }
    }

    /// Bytes of an image's pixels.
    pub fn frame_bytes(&self) -> u64 {
        (u64::from(self.width) * u64::from(self.height)).saturating_mul(u64::from(self.bit_depth / 8))
    }

    /// Offset of the first image.
    pub fn image_offset(&self) -> u64 {
        if self.version >= 5 { 8192 } else { 1024 }
    }
}

/// Open a `.seq` file.
///
/// # Errors
/// [`DatasetError`] for a bad header or a file without a complete image.
pub(crate) fn open(path: &Path, options: &OpenOptions) -> Result<(Arc<dyn Dataset>, ShapeHints), DatasetError> {
    let _ = options;
    let open_err = |source| DatasetError::Open { path: path.to_owned(), source };
    let file = crate::dataset::mapped::open_file(path).map_err(open_err)?;
    let len = file.metadata().map_err(open_err)?.len();
    let mut head = Vec::new();
    file.take(HEADER_BYTES as u64).read_to_end(&mut head).map_err(open_err)?;
    let header = SeqHeader::parse(&head).map_err(|e| DatasetError::invalid(path, e.to_string()))?;
    let offset = header.image_offset();
    let stride = u64::from(header.true_image_size);
    let (frames, incomplete) = count_frames(path, len, offset, stride, header.frame_bytes());
    if frames == 0 {
        return Err(DatasetError::invalid(path, incomplete.unwrap_or_else(|| "no images".into())));
    }
    let shape = DatasetShape { nav: vec![frames], sig: vec![header.height as usize, header.width as usize] };
    let mapped = MappedFrames::open(path, offset as usize, stride as usize, StoredDType::le(header.dtype()), shape)?;
    let details = vec![
        ("version".into(), header.version.to_string()),
        ("image_offset".into(), offset.to_string()),
        ("true_image_size".into(), header.true_image_size.to_string()),
        ("footer_bytes".into(), (stride - header.frame_bytes()).to_string()),
        ("allocated_frames".into(), header.allocated_frames.to_string()),
    ];
    let hints = ShapeHints { incomplete, ..ShapeHints::default() };
    Ok((Arc::new(FramedFile::new(mapped, "seq", details)), hints))
}

/// Whether `bytes` (the start of a file) look like a SEQ header.
pub fn sniff(bytes: &[u8]) -> bool {
    bytes.len() >= 4 && u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) == MAGIC
}
