//! NanoMegas `.blo` files (ASTAR precession electron diffraction).
//!
//! A little-endian header (layout from HyperSpy, as LiberTEM reads it):
//!
//! | offset | field | |
//! |---|---|---|
//! | 0 | `ID` (6 bytes) | `IMGBLO` |
//! | 6 | `MAGIC` u16 | 258 or 259 |
//! | 8 | `Data_offset_1` u32 | virtual bright field image |
//! | 12 | `Data_offset_2` u32 | first diffraction pattern |
//! | 20 | `DP_SZ` u16 | patterns are `DP_SZ × DP_SZ` |
//! | 24, 26 | `NX`, `NY` u16 | the scan |
//!
//! then (`MAGIC` 259) text lines from byte 240 up to `Data_offset_1`, one of which may
//! say `Blo Bit Depth: 16 bits` (else 8 bits). The `NX · NY` patterns follow
//! `Data_offset_2`, each after a 6-byte frame header.

use super::framed::{FramedFile, count_frames};
use super::reshaped::ShapeHints;
use super::{Dataset, DatasetError, DatasetShape, MappedFrames, OpenOptions};
use crate::dtype::{DType, StoredDType};
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

/// Bytes of the fixed header.
pub const HEADER_BYTES: usize = 240;
/// Bytes before each pattern.
pub const FRAME_HEADER_BYTES: u64 = 6;

/// A parsed BLO header and the frame layout it gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BloHeader {
    pub magic: u16,
    pub data_offset_1: u32,
    pub data_offset_2: u32,
    pub dp_size: u16,
    pub nx: u16,
    pub ny: u16,
    /// From the metadata text (`MAGIC` 259), else `uint8`.
    pub dtype: DType,
}

/// What is wrong with a BLO header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BloError {
    #[error("the file has {0} bytes, less than the {HEADER_BYTES}-byte BLO header")]
    Short(usize),
    #[error("offset 6: MAGIC is {0}, expected 258 or 259 (not a BLO file?)")]
    Magic(u16),
    #[error("offset {offset}: {message}")]
    Field { offset: usize, message: String },
}

impl BloHeader {
    /// Parse the header at the start of `bytes` (the first `Data_offset_1` bytes give
    /// the metadata text; fewer are fine).
    ///
    /// # Errors
    /// [`BloError`] naming the offset of the bad field.
    pub fn parse(bytes: &[u8]) -> Result<Self, BloError> {
        if bytes.len() < HEADER_BYTES {
            return Err(BloError::Short(bytes.len()));
        }
        let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]);
        let magic = u16_at(6);
        if magic != 258 && magic != 259 {
            return Err(BloError::Magic(magic));
        }
        let (data_offset_1, data_offset_2) = (u32_at(8), u32_at(12));
        let (dp_size, nx, ny) = (u16_at(20), u16_at(24), u16_at(26));
        if dp_size == 0 {
            return Err(BloError::Field { offset: 20, message: "DP_SZ is 0".into() });
        }
        if nx == 0 || ny == 0 {
            return Err(BloError::Field { offset: 24, message: format!("the scan is {nx} x {ny} (NX x NY)") });
        }
        if (data_offset_2 as usize) < HEADER_BYTES {
            return Err(BloError::Field {
                offset: 12,
                message: format!("Data_offset_2 is {data_offset_2}, inside the {HEADER_BYTES}-byte header"),
            });
        }
        let mut dtype = DType::U8;
        if magic == 259 {
            let end = (data_offset_1 as usize).clamp(HEADER_BYTES, bytes.len());
            let text = String::from_utf8_lossy(&bytes[HEADER_BYTES..end]);
            for line in text.lines().map(|l| l.trim_matches(|c: char| c == '\0' || c.is_whitespace())) {
                let lower = line.to_ascii_lowercase();
                let Some(rest) = lower.strip_prefix("blo bit depth:") else { continue };
                let bits = rest.trim().trim_end_matches("bits").trim();
                dtype = match bits {
                    "8" => DType::U8,
                    "16" => DType::U16,
                    "32" => DType::U32,
                    _ => {
                        return Err(BloError::Field {
                            offset: HEADER_BYTES,
                            message: format!("unsupported metadata line '{line}' (8, 16 or 32 bits)"),
                        });
                    }
                };
            }
        }
        Ok(BloHeader { magic, data_offset_1, data_offset_2, dp_size, nx, ny, dtype })
    }

    /// Bytes of one pattern.
    pub fn frame_bytes(&self) -> u64 {
        u64::from(self.dp_size) * u64::from(self.dp_size) * self.dtype.size() as u64
    }

    /// Patterns in the scan.
    pub fn frames(&self) -> u64 {
        u64::from(self.nx) * u64::from(self.ny)
    }
}

/// Open a `.blo` file.
///
/// # Errors
/// [`DatasetError`] for a bad header or a file too short for its scan.
pub(crate) fn open(path: &Path, options: &OpenOptions) -> Result<(Arc<dyn Dataset>, ShapeHints), DatasetError> {
    let _ = options;
    let open_err = |source| DatasetError::Open { path: path.to_owned(), source };
    let file = crate::dataset::mapped::open_file(path).map_err(open_err)?;
    let len = file.metadata().map_err(open_err)?.len();
    let mut head = Vec::new();
    file.take(1 << 16).read_to_end(&mut head).map_err(open_err)?;
    let header = BloHeader::parse(&head).map_err(|e| DatasetError::invalid(path, e.to_string()))?;
    let stride = FRAME_HEADER_BYTES + header.frame_bytes();
    // (u16 sizes: no overflow in u64.)
    let offset = u64::from(header.data_offset_2) + FRAME_HEADER_BYTES;
    let (found, note) = count_frames(path, len, offset, stride, header.frame_bytes());
    let frames = header.frames();
    if (found as u64) < frames {
        return Err(DatasetError::invalid(
            path,
            format!(
                "truncated: the header promises {} x {} patterns of {} bytes from offset {offset}, the file holds {found}{}",
                header.ny,
                header.nx,
                header.frame_bytes(),
                note.map(|n| format!(" ({n})")).unwrap_or_default()
            ),
        ));
    }
    let side = usize::from(header.dp_size);
    let shape = DatasetShape { nav: vec![frames as usize], sig: vec![side, side] };
    let mapped = MappedFrames::open(path, offset as usize, stride as usize, StoredDType::le(header.dtype), shape)?;
    let details = vec![
        ("magic".into(), header.magic.to_string()),
        ("scan".into(), format!("{} x {} (NY x NX)", header.ny, header.nx)),
        ("data_offset".into(), header.data_offset_2.to_string()),
    ];
    let hints = ShapeHints {
        nav: Some(vec![usize::from(header.ny), usize::from(header.nx)]),
        nav_source: Some("the BLO header".into()),
        ..ShapeHints::default()
    };
    Ok((Arc::new(FramedFile::new(mapped, "blo", details)), hints))
}

/// Whether `bytes` (the start of a file) look like a BLO header.
pub fn sniff(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && &bytes[..6] == b"IMGBLO" && matches!(u16::from_le_bytes([bytes[6], bytes[7]]), 258 | 259)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_bit_depth_from_the_metadata() {
        let mut h = vec![0u8; 400];
        h[..6].copy_from_slice(b"IMGBLO");
        h[6..8].copy_from_slice(&259u16.to_le_bytes());
        h[8..12].copy_from_slice(&300u32.to_le_bytes());
        h[12..16].copy_from_slice(&400u32.to_le_bytes());
        h[20..22].copy_from_slice(&4u16.to_le_bytes());
        h[24..26].copy_from_slice(&3u16.to_le_bytes());
        h[26..28].copy_from_slice(&2u16.to_le_bytes());
        let text = b"Version: 1\r\nBlo Bit Depth: 16 bits\r\n";
        h[240..240 + text.len()].copy_from_slice(text);
        let header = BloHeader::parse(&h).unwrap();
        assert_eq!((header.dtype, header.frames(), header.frame_bytes()), (DType::U16, 6, 32));
        assert!(sniff(&h));
        h[6] = 7;
        assert_eq!(BloHeader::parse(&h), Err(BloError::Magic(263)));
    }
}
