//! TVIPS camera recordings: `<name>_000.tvips`, `<name>_001.tvips`, ...
//!
//! The first file starts with a 256-byte little-endian series header (`ISize` = 256,
//! `IVersion` 1 or 2, `IXDim`, `IYDim`, `IBPP` 8 or 16, binning, `IImgHeaderBytes` at
//! offset 48); then, in every file, images of `IImgHeaderBytes` (version 1: 12) bytes of
//! header plus `IXDim × IYDim` pixels. Version-2 image headers hold an image counter
//! (offset 0, continuing through the files) and the scan position (`Scan_x`, `Scan_y`
//! as float32 at offsets 68 and 72), from which the scan shape and the sync offset are
//! detected like LiberTEM's `detect_shape`: the scan starts one frame before the first
//! `(0, 0) → (0, 1)` step, and its width is where `Scan_x` first falls back.

use super::concat::Concat;
use super::framed::FramedFile;
use super::reshaped::ShapeHints;
use super::{Dataset, DatasetError, DatasetShape, MappedFrames, OpenOptions};
use crate::dtype::{DType, StoredDType};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bytes of the series header.
pub const SERIES_HEADER_BYTES: usize = 256;
/// Frames searched for the start of the scan (LiberTEM's `MAX_SCAN_IDX`).
const MAX_SCAN_INDEX: usize = 4096;

/// A parsed series header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TvipsHeader {
    pub version: i32,
    pub xdim: u32,
    pub ydim: u32,
    pub bpp: u32,
    pub xbin: i32,
    pub ybin: i32,
    pub pixel_size_nm: i32,
    pub high_tension_kv: i32,
    pub mag_total: i32,
    /// Bytes of header before each image.
    pub image_header_bytes: u32,
}

/// What is wrong with a series header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TvipsError {
    #[error("the file has {0} bytes, less than the {SERIES_HEADER_BYTES}-byte TVIPS series header")]
    Short(usize),
    #[error("offset {offset}: {message}")]
    Field { offset: usize, message: String },
}

impl TvipsHeader {
    /// Parse the series header at the start of `bytes`.
    ///
    /// # Errors
    /// [`TvipsError`] naming the offset of a bad field.
    pub fn parse(bytes: &[u8]) -> Result<Self, TvipsError> {
        if bytes.len() < SERIES_HEADER_BYTES {
            return Err(TvipsError::Short(bytes.len()));
        }
        let i32_at = |o: usize| i32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]);
        let field = |offset: usize, message: String| TvipsError::Field { offset, message };
        let size = i32_at(0);
        if size != SERIES_HEADER_BYTES as i32 {
            return Err(field(0, format!("ISize is {size}, expected 256 (not a TVIPS file?)")));
        }
        let version = i32_at(4);
        if version != 1 && version != 2 {
            return Err(field(4, format!("IVersion {version} is not 1 or 2")));
        }
        let dim = |o: usize, name: &str| -> Result<u32, TvipsError> {
            let v = i32_at(o);
            u32::try_from(v).ok().filter(|&v| v > 0).ok_or_else(|| field(o, format!("{name} is {v}")))
        };
        let (xdim, ydim) = (dim(8, "IXDim")?, dim(12, "IYDim")?);
        let bpp = i32_at(16);
        if bpp != 8 && bpp != 16 {
            return Err(field(16, format!("IBPP is {bpp}, expected 8 or 16")));
        }
        let image_header_bytes = if version == 1 {
            12
        } else {
            let v = i32_at(48);
            u32::try_from(v).map_err(|_| field(48, format!("IImgHeaderBytes is {v}")))?
        };
        Ok(TvipsHeader {
            version,
            xdim,
            ydim,
            bpp: bpp as u32,
            xbin: i32_at(28),
            ybin: i32_at(32),
            pixel_size_nm: i32_at(36),
            high_tension_kv: i32_at(40),
            mag_total: i32_at(44),
            image_header_bytes,
        })
    }

    /// Bytes of one image's pixels.
    pub fn frame_bytes(&self) -> u64 {
        (u64::from(self.xdim) * u64::from(self.ydim)).saturating_mul(u64::from(self.bpp / 8))
    }

    /// Header plus pixels.
    pub fn stride(&self) -> u64 {
        u64::from(self.image_header_bytes).saturating_add(self.frame_bytes())
    }

    fn dtype(&self) -> DType {
        if self.bpp == 8 { DType::U8 } else { DType::U16 }
    }
}

/// The three-digit number before `.tvips`.
fn suffix(path: &Path) -> Option<u32> {
    let stem = path.file_stem()?.to_str()?;
    let digits = stem.get(stem.len().checked_sub(3)?..)?;
    digits.chars().all(|c| c.is_ascii_digit()).then(|| digits.parse().ok()).flatten()
}

/// The files of the set `path` belongs to, ordered by suffix.
fn find_set(path: &Path) -> Result<Vec<PathBuf>, DatasetError> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
    let prefix = stem.trim_end_matches(|c: char| c.is_ascii_digit());
    // Exactly `<prefix>NNN.tvips`: `x_000.tvips` must not take `x_split_000.tvips` along.
    let in_series = |n: &str| {
        n.len() == prefix.len() + 9
            && n.starts_with(prefix)
            && n[prefix.len()..prefix.len() + 3].chars().all(|c| c.is_ascii_digit())
            && n[n.len() - 6..].eq_ignore_ascii_case(".tvips")
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let entries = std::fs::read_dir(&dir).map_err(|source| DatasetError::Open { path: dir.clone(), source })?;
    let mut files: Vec<(u32, PathBuf)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(in_series))
        .filter_map(|p| suffix(&p).map(|s| (s, p)))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(DatasetError::invalid(
            path,
            format!("no TVIPS files named {prefix}NNN.tvips (three-digit numbers) in {}", dir.display()),
        ));
    }
    for (k, (s, p)) in files.iter().enumerate() {
        if *s != k as u32 {
            return Err(DatasetError::invalid(
                p,
                format!(
                    "inconsistent set: the file is number {s:03}, expected {k:03} (a file of the series is missing)"
                ),
            ));
        }
    }
    Ok(files.into_iter().map(|(_, p)| p).collect())
}

/// Open the TVIPS series `path` belongs to.
///
/// # Errors
/// [`DatasetError`] naming the file and offset: a bad series header, a missing or
/// truncated file in the series, image counters that do not continue across files.
pub(crate) fn open(path: &Path, options: &OpenOptions) -> Result<(Arc<dyn Dataset>, ShapeHints), DatasetError> {
    let _ = options;
    let paths = find_set(path)?;
    let first = &paths[0];
    let open_err = |p: &Path| {
        let p = p.to_owned();
        move |source| DatasetError::Open { path: p, source }
    };
    let mut head = Vec::new();
    crate::dataset::mapped::open_file(first)
        .map_err(open_err(first))?
        .take(SERIES_HEADER_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(open_err(first))?;
    let header = TvipsHeader::parse(&head).map_err(|e| DatasetError::invalid(first, e.to_string()))?;
    let stride = header.stride();
    let mut files = Vec::with_capacity(paths.len());
    let mut hints = ShapeHints::default();
    let count = paths.len();
    for (k, p) in paths.iter().enumerate() {
        let len = std::fs::metadata(p).map_err(open_err(p))?.len();
        let file_header = if k == 0 { SERIES_HEADER_BYTES as u64 } else { 0 };
        let body = len.saturating_sub(file_header);
        let (frames, rest) = (body / stride, body % stride);
        if rest != 0 || frames == 0 {
            let note = format!(
                "{} is truncated: image {frames} at offset {} has {rest} of {stride} bytes",
                p.display(),
                file_header + frames * stride
            );
            if k + 1 < count || frames == 0 {
                return Err(DatasetError::invalid(p, note));
            }
            hints.incomplete = Some(note);
        }
        let shape = DatasetShape { nav: vec![frames as usize], sig: vec![header.ydim as usize, header.xdim as usize] };
        let offset = file_header + u64::from(header.image_header_bytes);
        let stored = StoredDType::le(header.dtype());
        files.push(MappedFrames::open(p, offset as usize, stride as usize, stored, shape)?);
    }

    // Version 2: image counters must continue across files; scan positions give the shape.
    if header.version == 2 && header.image_header_bytes >= 4 {
        let counter = |f: &MappedFrames, i: usize| -> u32 {
            let at = f.frame_offset(i) - header.image_header_bytes as usize;
            let b = &f.bytes()[at..at + 4];
            u32::from_le_bytes([b[0], b[1], b[2], b[3]])
        };
        let start = counter(&files[0], 0);
        let constant = files.iter().all(|f| (0..f.shape().nav_len()).all(|i| counter(f, i) == start));
        let mut seen = 0u64;
        if constant && files.len() > 1 {
            // Some recorders leave the counter at one value; the file numbers still give
            // the order, so read the series and say so.
            hints.warnings.push(format!(
                "the image counters are all {start} (not counting up), so they cannot show a missing or \
                 reordered file; the files are taken in the order of their numbers"
            ));
        }
        for f in files.iter().filter(|_| !constant) {
            let c = counter(f, 0);
            if u64::from(c) != u64::from(start) + seen {
                return Err(DatasetError::invalid(
                    f.path(),
                    format!(
                        "inconsistent set: the first image counter (offset {}) is {c}, expected {} after {seen} images",
                        f.frame_offset(0) - header.image_header_bytes as usize,
                        u64::from(start) + seen
                    ),
                ));
            }
            seen += f.shape().nav_len() as u64;
        }
    }
    if header.version == 2 && header.image_header_bytes >= 76 {
        let positions = ScanPositions { files: &files, header_bytes: header.image_header_bytes as usize };
        if let Some((sync, nav)) = positions.detect() {
            hints.sync_offset = Some(sync);
            hints.nav = Some(nav);
            hints.nav_source = Some("the scan positions in the image headers".into());
        }
    }

    let details = vec![
        ("version".into(), header.version.to_string()),
        ("image_header_bytes".into(), header.image_header_bytes.to_string()),
        ("binning".into(), format!("{} x {}", header.xbin, header.ybin)),
        ("high_tension_kv".into(), header.high_tension_kv.to_string()),
    ];
    let mut parts: Vec<Arc<dyn Dataset>> =
        files.into_iter().map(|f| Arc::new(FramedFile::new(f, "tvips", details.clone())) as Arc<dyn Dataset>).collect();
    let data: Arc<dyn Dataset> = if parts.len() == 1 {
        parts.pop().ok_or_else(|| DatasetError::invalid(path, "no files"))?
    } else {
        let mut info = parts[0].info();
        info.path = path.to_owned();
        info.details.insert(0, ("files".into(), parts.len().to_string()));
        Arc::new(Concat::new(parts, info)?)
    };
    Ok((data, hints))
}

/// Scan positions from version-2 image headers across the files of a set.
struct ScanPositions<'a> {
    files: &'a [MappedFrames],
    header_bytes: usize,
}

impl ScanPositions<'_> {
    fn total(&self) -> usize {
        self.files.iter().map(|f| f.shape().nav_len()).sum()
    }

    /// `(Scan_y, Scan_x)` of image `index`, truncated to integers like LiberTEM.
    fn at(&self, mut index: usize) -> (i64, i64) {
        for f in self.files {
            let n = f.shape().nav_len();
            if index < n {
                let at = f.frame_offset(index) - self.header_bytes;
                let b = &f.bytes()[at..at + 76];
                let float = |o: usize| f32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
                return (float(72) as i64, float(68) as i64);
            }
            index -= n;
        }
        (-1, -1)
    }

    /// LiberTEM's `detect_shape`: `(sync_offset, nav_shape)`.
    fn detect(&self) -> Option<(i64, Vec<usize>)> {
        let count = self.total();
        let limit = count.min(MAX_SCAN_INDEX);
        let mut index = 0;
        let mut last_was_zero = false;
        let mut sync = None;
        while index < limit {
            let scan = self.at(index);
            if last_was_zero && scan == (0, 1) {
                sync = Some(index - 1);
                break;
            }
            if scan == (0, 0) {
                last_was_zero = true;
            }
            index += 1;
        }
        let sync = sync?;
        let mut max_x = 0;
        while index < limit {
            let (_, x) = self.at(index);
            max_x = max_x.max(x);
            if x < max_x {
                let width = max_x as usize + 1;
                let rows = (count - sync) / width;
                return Some((sync as i64, if rows > 0 { vec![rows, width] } else { vec![count] }));
            }
            index += 1;
        }
        Some((sync as i64, vec![count]))
    }
}

/// Whether `bytes` (the start of a file) look like a TVIPS series header.
pub fn sniff(bytes: &[u8]) -> bool {
    TvipsHeader::parse(bytes).is_ok()
}
