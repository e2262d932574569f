//! MRC files (CCP-EM MRC2014; image stacks from cryo-EM/TEM software).
//!
//! A 1024-byte header of 4-byte words, then `NSYMBT` bytes of extended header, then
//! `NZ` images of `NY × NX` pixels (x fastest):
//!
//! | offset | field |
//! |---|---|
//! | 0, 4, 8 | `NX`, `NY`, `NZ` i32 |
//! | 12 | `MODE` i32: 0 int8, 1 int16, 2 float32, 4 complex64, 6 uint16 |
//! | 92 | `NSYMBT` i32: extended header bytes |
//! | 208 | `MAP` = `"MAP "` |
//! | 212 | `MACHST`: `0x44 0x44` little-endian, `0x11 0x11` big-endian |
//!
//! Each image is a frame (`sig = [NY, NX]`, LiberTEM reads it through ncempy's memmap
//! of shape `(NZ, NY, NX)`). The header has no scan shape; Direct Electron's
//! `<prefix>_info.txt` next to a movie records it ([`de_scan_shape`]).

use super::framed::FramedFile;
use super::reshaped::ShapeHints;
use super::{Dataset, DatasetError, DatasetShape, MappedFrames, OpenOptions};
use crate::dtype::{ByteOrder, DType, StoredDType};
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

/// Bytes of the main header.
pub const HEADER_BYTES: usize = 1024;

/// A parsed MRC header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MrcHeader {
    pub nx: u32,
    pub ny: u32,
    pub nz: u32,
    pub mode: i32,
    pub extended_bytes: u32,
    pub stored: StoredDType,
    /// Whether the `MAP ` marker is present (MRC2014; older files lack it).
    pub map_marker: bool,
}

/// What is wrong with an MRC header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MrcError {
    #[error("the file has {0} bytes, less than the {HEADER_BYTES}-byte MRC header")]
    Short(usize),
    #[error("offset {offset}: {message}")]
    Field { offset: usize, message: String },
}

impl MrcHeader {
    /// Parse the header at the start of `bytes`.
    ///
    /// # Errors
    /// [`MrcError`] naming the offset of a bad or unsupported field.
    pub fn parse(bytes: &[u8]) -> Result<Self, MrcError> {
        if bytes.len() < HEADER_BYTES {
            return Err(MrcError::Short(bytes.len()));
        }
        let order = match bytes[212] {
            0x11 => ByteOrder::Big,
            _ => ByteOrder::Little,
        };
        let i32_at = |o: usize| {
            let b = [bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]];
            match order {
                ByteOrder::Little => i32::from_le_bytes(b),
                ByteOrder::Big => i32::from_be_bytes(b),
            }
        };
        let positive = |o: usize, name: &str| -> Result<u32, MrcError> {
            let v = i32_at(o);
            u32::try_from(v).ok().filter(|&v| v > 0).ok_or_else(|| MrcError::Field {
                offset: o,
                message: format!("{name} is {v}, expected a positive number (not an MRC file?)"),
            })
        };
        let (nx, ny, nz) = (positive(0, "NX")?, positive(4, "NY")?, positive(8, "NZ")?);
        let mode = i32_at(12);
        let dtype = match mode {
            0 => DType::I8,
            1 => DType::I16,
            2 => DType::F32,
            4 => DType::C64,
            6 => DType::U16,
            _ => {
                return Err(MrcError::Field {
                    offset: 12,
                    message: format!(
                        "MODE {mode} is not supported (0 int8, 1 int16, 2 float32, 4 complex64, 6 uint16)"
                    ),
                });
            }
        };
        let extended = i32_at(92);
        let extended_bytes = u32::try_from(extended).map_err(|_| MrcError::Field {
            offset: 92,
            message: format!("NSYMBT (extended header bytes) is {extended}"),
        })?;
        Ok(MrcHeader {
            nx,
            ny,
            nz,
            mode,
            extended_bytes,
            stored: StoredDType { dtype, order },
            map_marker: &bytes[208..212] == b"MAP ",
        })
    }

    /// Offset of the first image.
    pub fn data_offset(&self) -> u64 {
        HEADER_BYTES as u64 + u64::from(self.extended_bytes)
    }

    /// Bytes of one image.
    pub fn frame_bytes(&self) -> u64 {
        (u64::from(self.nx) * u64::from(self.ny)).saturating_mul(self.stored.dtype.size() as u64)
    }
}

/// Open an `.mrc` file.
///
/// # Errors
/// [`DatasetError`] for a bad header or a file shorter than the header says.
pub(crate) fn open(path: &Path, options: &OpenOptions) -> Result<(Arc<dyn Dataset>, ShapeHints), DatasetError> {
    let _ = options;
    let open_err = |source| DatasetError::Open { path: path.to_owned(), source };
    let file = crate::dataset::mapped::open_file(path).map_err(open_err)?;
    let len = file.metadata().map_err(open_err)?.len();
    let mut head = Vec::new();
    file.take(HEADER_BYTES as u64).read_to_end(&mut head).map_err(open_err)?;
    let header = MrcHeader::parse(&head).map_err(|e| DatasetError::invalid(path, e.to_string()))?;
    let needed = u64::from(header.nz).saturating_mul(header.frame_bytes()).saturating_add(header.data_offset());
    if len < needed {
        return Err(DatasetError::invalid(
            path,
            format!(
                "truncated: {} images of {} x {} {} from offset {} need {needed} bytes, the file has {len}",
                header.nz,
                header.ny,
                header.nx,
                header.stored,
                header.data_offset()
            ),
        ));
    }
    let shape = DatasetShape { nav: vec![header.nz as usize], sig: vec![header.ny as usize, header.nx as usize] };
    let stride = header.frame_bytes() as usize;
    let mapped = MappedFrames::open(path, header.data_offset() as usize, stride, header.stored, shape)?;
    let details = vec![
        ("mode".into(), header.mode.to_string()),
        ("extended_header_bytes".into(), header.extended_bytes.to_string()),
        ("data_offset".into(), header.data_offset().to_string()),
    ];
    let mut hints = ShapeHints::default();
    if let Some(info) = de_info_file(path) {
        let text = std::fs::read(&info).map_err(|source| DatasetError::Open { path: info.clone(), source })?;
        match de_scan_shape(&String::from_utf8_lossy(&text)) {
            Ok(Some((nav, keys))) if nav.iter().product::<usize>() == header.nz as usize => {
                hints.nav = Some(nav);
                hints.nav_source = Some(format!("{} ({keys})", info.display()));
            }
            Ok(Some((nav, keys))) => hints.warnings.push(format!(
                "{} describes a scan of {nav:?} ({keys}), but the file holds {} frames; not used",
                info.display(),
                header.nz
            )),
            Ok(None) => {}
            Err(reason) => hints.warnings.push(format!("{}: {reason}; its scan shape is not used", info.display())),
        }
    }
    Ok((Arc::new(FramedFile::new(mapped, "mrc", details)), hints))
}

/// Direct Electron's acquisition record next to a movie: `<prefix>_info.txt`, where the
/// prefix is the movie's name without one or more `_suffix` parts
/// (`20241021_00405_movie.mrc` → `20241021_00405_info.txt`).
fn de_info_file(path: &Path) -> Option<std::path::PathBuf> {
    let mut stem = path.file_stem()?.to_str()?;
    loop {
        let candidate = path.with_file_name(format!("{stem}_info.txt"));
        if candidate.is_file() {
            return Some(candidate);
        }
        stem = stem.rsplit_once('_')?.0;
    }
}

/// The raster scan a DE `_info.txt` records (`Key = value` lines): `[Scan - Size Y,
/// Scan - Size X]`, or the ROI size when `Scan - ROI Enable`, with `Scan - Repeats` in
/// front when above 1. `None` when the record has no enabled scan.
///
/// # Errors
/// A non-raster scan (positions in a CSV file) or a size that is not a number.
pub fn de_scan_shape(text: &str) -> Result<Option<(Vec<usize>, &'static str)>, String> {
    let get = |key: &str| {
        text.lines().find_map(|l| l.split_once('=').filter(|(k, _)| k.trim() == key).map(|(_, v)| v.trim()))
    };
    if get("Scan - Enable") != Some("Enable") {
        return Ok(None);
    }
    if let Some(kind) = get("Scan - Type").filter(|t| *t != "Raster") {
        return Err(format!("the scan is of type '{kind}', not a raster"));
    }
    let num = |key: &str| -> Result<Option<usize>, String> {
        get(key).map(|v| v.parse::<usize>().map_err(|_| format!("'{key}' is '{v}', not a number"))).transpose()
    };
    let roi = get("Scan - ROI Enable") == Some("Enable");
    let (ky, kx, keys) = if roi {
        ("Scan - ROI Size Y", "Scan - ROI Size X", "Scan - ROI Size Y/X")
    } else {
        ("Scan - Size Y", "Scan - Size X", "Scan - Size Y/X")
    };
    let (Some(y), Some(x)) = (num(ky)?, num(kx)?) else { return Ok(None) };
    let mut nav = vec![y, x];
    if let Some(repeats) = num("Scan - Repeats")?.filter(|&r| r > 1) {
        nav.insert(0, repeats);
    }
    Ok(Some((nav, keys)))
}

/// Whether `bytes` (the start of a file) look like an MRC2014 header.
pub fn sniff(bytes: &[u8]) -> bool {
    bytes.len() >= 212 && &bytes[208..212] == b"MAP "
}
