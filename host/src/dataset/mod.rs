//! Datasets: shapes, formats, and reading tiles with the dtype conversion fused in.
//!
//! | type | role |
//! |------|------|
//! | [`Dataset`] | a stack of frames: shape, native dtype, `read_tile` |
//! | [`MappedFrames`] | frames at a fixed stride in a memory-mapped file (raw, npy, ...) |
//! | [`MemoryDataset`] | frames in memory (synthetic data, subsets of other datasets) |
//! | [`OpenOptions`], [`open`] | pick the format and open a file |
//! | [`mib`], ... | detector formats, one module each (see `docs/formats.md`) |
//! | [`reshaped`], [`corrections`] | the common options (nav/sig shape, sync offset, dark/gain/excluded pixels) as wrappers |
//! | [`Partition`], [`plan_partitions`] | contiguous nav ranges processed by one instance each |
//! | [`TilingScheme`], [`negotiate`] | the tile shape agreed by all UDFs of a run |
//!
//! A frame is addressed by its *true flat nav index*: its position in C order over the
//! nav shape, before any ROI.

mod mapped;
mod memory;
mod npy;
mod partition;
mod raw;
mod spec;
mod tiling;
// Formats, part B.
pub mod dm;
pub mod hdf5;
pub mod k2is;
pub mod raw_csr;

// Detector formats (part A) and the common option wrappers.
pub mod blo;
pub mod concat;
pub mod corrections;
pub mod empad;
pub mod framed;
pub mod mib;
pub mod mrc;
pub mod reshaped;
pub mod seq;
pub mod tvips;

pub use corrections::ExcludedPixels;
pub use mapped::MappedFrames;
pub use memory::MemoryDataset;
pub use partition::{Partition, default_partition_count, plan_partitions};
pub use reshaped::ShapeHints;
pub use spec::{DatasetSpec, OpenedDataset};
pub use tiling::{TileRequest, negotiate};
// Contract geometry, re-exported for the readers.
pub use crate::udf::{SigSlice, TilingScheme};

use crate::dtype::{DType, StoredDType};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Navigation and signal shape of a dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatasetShape {
    /// Scan shape, e.g. `[ny, nx]`.
    pub nav: Vec<usize>,
    /// Frame shape, e.g. `[sy, sx]`.
    pub sig: Vec<usize>,
}

impl DatasetShape {
    /// Number of frames.
    pub fn nav_len(&self) -> usize {
        self.nav.iter().product()
    }

    /// Pixels per frame.
    pub fn sig_len(&self) -> usize {
        self.sig.iter().product()
    }

    /// Nav and sig dimensions together.
    pub fn full(&self) -> Vec<usize> {
        self.nav.iter().chain(&self.sig).copied().collect()
    }
}

/// Descriptive facts about an opened dataset, for `results.json` and `udf-host info`.
#[derive(Debug, Clone, Serialize)]
pub struct DatasetInfo {
    /// Format name (`raw`, `npy`, ...).
    pub format: &'static str,
    /// The file(s) read.
    pub path: PathBuf,
    /// Format-specific details as key/value pairs.
    pub details: Vec<(String, String)>,
}

/// A stack of frames that can be read tile by tile.
pub trait Dataset: Send + Sync {
    /// Nav and sig shape.
    fn shape(&self) -> &DatasetShape;

    /// Native element type and byte order.
    fn stored_dtype(&self) -> StoredDType;

    /// Format, path and details.
    fn info(&self) -> DatasetInfo;

    /// The smallest natural block of a frame (LiberTEM's base shape): one row by default.
    fn base_shape(&self) -> Vec<usize> {
        let sig = &self.shape().sig;
        let mut base = vec![1; sig.len()];
        if let (Some(last), Some(&width)) = (base.last_mut(), sig.last()) {
            *last = width;
        }
        base
    }

    /// Read frames `frames` (true flat nav indices, ascending) times `sig` into `out`,
    /// converted to `dtype`, in C order `[frames, ..sig.shape]`.
    ///
    /// # Errors
    /// I/O or decoding errors, naming the file and offset.
    fn read_tile(&self, frames: &[u64], sig: &SigSlice, dtype: DType, out: &mut [u8]) -> Result<(), DatasetError>;

    /// The bytes of full frames `frames` straight from the file, when they are stored
    /// contiguously as `dtype` in native byte order and aligned (zero-copy reads).
    fn direct_frames(&self, frames: std::ops::Range<u64>, dtype: DType) -> Option<&[u8]> {
        let _ = (frames, dtype);
        None
    }
}

/// What went wrong opening or reading a dataset.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error("cannot open {path}: {source}")]
    Open { path: PathBuf, source: std::io::Error },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("{0}")]
    Options(String),
}

impl DatasetError {
    pub(crate) fn invalid(path: &Path, message: impl Into<String>) -> Self {
        DatasetError::Invalid { path: path.to_owned(), message: message.into() }
    }
}

/// Dataset formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Headerless binary, C order; needs dtype and shapes.
    Raw,
    /// NumPy `.npy`.
    Npy,
    // Detector formats (part A).
    /// Quantum Detectors Merlin `.mib` (+ `.hdr`).
    Mib,
    /// EMPAD `.xml` + `.raw`.
    Empad,
    /// NanoMegas `.blo`.
    Blo,
    /// NorPix `.seq`.
    Seq,
    /// MRC `.mrc`.
    Mrc,
    /// TVIPS `_NNN.tvips` series.
    Tvips,
    // Formats, part B.
    /// HDF5 (`.h5`, `.hdf5`, `.nxs`, `.emd`, `.hspy`).
    Hdf5,
    /// LiberTEM's raw CSR sparse format (`.toml` + three raw files).
    RawCsr,
    /// Gatan DigitalMicrograph `.dm3` / `.dm4`, one C-ordered 3-D/4-D image.
    Dm,
    /// Gatan K2 IS raw data: 8 sector `.bin` files and a `.gtg` file.
    K2is,
}

/// Formats, part B: names and file extensions.
fn parse_b(name: &str) -> Option<Format> {
    match name {
        "hdf5" | "h5" => Some(Format::Hdf5),
        "raw_csr" | "csr" => Some(Format::RawCsr),
        "dm" | "dm3" | "dm4" => Some(Format::Dm),
        "k2is" | "k2" => Some(Format::K2is),
        _ => None,
    }
}

/// Formats, part B: detection by extension, then by magic bytes.
fn detect_b(path: &Path, ext: Option<&str>) -> Option<Format> {
    match ext {
        Some("h5" | "hdf5" | "nxs" | "emd" | "hspy") => return Some(Format::Hdf5),
        Some("toml") => return Some(Format::RawCsr),
        Some("dm3" | "dm4") => return Some(Format::Dm),
        Some("gtg") => return Some(Format::K2is),
        _ => {}
    }
    let mut head = [0u8; 8];
    let mut file = std::fs::File::open(path).ok()?;
    use std::io::Read;
    file.read_exact(&mut head).ok()?;
    if &head == b"\x89HDF\r\n\x1a\n" {
        return Some(Format::Hdf5);
    }
    if ext == Some("bin") && head[..4] == k2is::block::SYNC.to_be_bytes() {
        return Some(Format::K2is);
    }
    None
}

impl Format {
    /// Parse a `--format` value.
    pub fn parse(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "raw" | "bin" => Some(Format::Raw),
            "npy" => Some(Format::Npy),
            // Detector formats (part A).
            "mib" | "merlin" => Some(Format::Mib),
            "empad" => Some(Format::Empad),
            "blo" => Some(Format::Blo),
            "seq" => Some(Format::Seq),
            "mrc" => Some(Format::Mrc),
            "tvips" => Some(Format::Tvips),
            other => parse_b(other),
        }
    }

    /// The `--format` names, for messages.
    pub const NAMES: &'static str = "raw, npy, mib, empad, blo, seq, mrc, tvips, hdf5, raw_csr, dm, k2is";

    /// The name used by `--format` and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Format::Raw => "raw",
            Format::Npy => "npy",
            // Detector formats (part A).
            Format::Mib => "mib",
            Format::Empad => "empad",
            Format::Blo => "blo",
            Format::Seq => "seq",
            Format::Mrc => "mrc",
            Format::Tvips => "tvips",
            // Formats, part B.
            Format::Hdf5 => "hdf5",
            Format::RawCsr => "raw_csr",
            Format::Dm => "dm",
            Format::K2is => "k2is",
        }
    }

    /// Guess from the file name, then the first bytes.
    pub fn detect(path: &Path) -> Self {
        let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
        if ext.as_deref() == Some("npy") {
            return Format::Npy;
        }
        if let Some(format) = detect_detector_format(path, ext.as_deref()).or_else(|| detect_b(path, ext.as_deref())) {
            return format;
        }
        let mut magic = [0u8; 6];
        if let Ok(mut file) = std::fs::File::open(path) {
            use std::io::Read;
            if file.read_exact(&mut magic).is_ok() && &magic == b"\x93NUMPY" {
                return Format::Npy;
            }
        }
        Format::Raw
    }
}

/// How to open a dataset; everything is optional where the format says it.
/// Serialisable, as part of a [`DatasetSpec`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OpenOptions {
    /// Force a format instead of detecting it.
    pub format: Option<Format>,
    /// Element type and byte order (raw: required).
    pub dtype: Option<StoredDType>,
    /// Nav shape (raw: inferred from the file size if absent; npy: a reshape).
    pub nav_shape: Option<Vec<usize>>,
    /// Sig shape (raw: required; npy: a reshape; default the last two axes).
    pub sig_shape: Option<Vec<usize>>,
    /// Bytes to skip at the start of the file (raw).
    pub offset: u64,
    /// Skip `k > 0` leading frames or insert `|k|` blank frames (`k < 0`); `None`: the
    /// format's default (0, or what the format detects, e.g. TVIPS).
    pub sync_offset: Option<i64>,
    /// Dark frame to subtract (`.npy`, sig-shaped).
    pub dark: Option<PathBuf>,
    /// Gain map to multiply with after the dark subtraction (`.npy`, sig-shaped).
    pub gain: Option<PathBuf>,
    /// Pixels to replace by the mean of their valid neighbours.
    pub excluded_pixels: Option<ExcludedPixels>,
    // Formats, part B.
    /// The dataset inside an HDF5 file, e.g. `/entry/data/data` (default: the only
    /// 3-D or 4-D numeric dataset).
    pub dataset_path: Option<String>,
}

/// Open a dataset file.
///
/// # Errors
/// [`DatasetError`] naming the file: unreadable, too short or long for the shape,
/// malformed header, missing options.
pub fn open(path: &Path, options: &OpenOptions) -> Result<Arc<dyn Dataset>, DatasetError> {
    let (data, hints): (Arc<dyn Dataset>, ShapeHints) = match options.format.unwrap_or_else(|| Format::detect(path)) {
        Format::Raw => (Arc::new(raw::open(path, options)?), ShapeHints::reshaped()),
        Format::Npy => (Arc::new(npy::open(path, options)?), ShapeHints::reshaped()),
        // Detector formats (part A): the common shape options are applied below.
        Format::Mib => mib::open(path, options)?,
        Format::Empad => empad::open(path, options)?,
        Format::Blo => blo::open(path, options)?,
        Format::Seq => seq::open(path, options)?,
        Format::Mrc => mrc::open(path, options)?,
        Format::Tvips => tvips::open(path, options)?,
        // Formats, part B: the readers apply the shape options themselves.
        Format::Hdf5 => (Arc::new(hdf5::open(path, options)?), ShapeHints::reshaped()),
        Format::RawCsr => (Arc::new(raw_csr::open(path, options)?), ShapeHints::reshaped()),
        Format::Dm => (Arc::new(dm::open(path, options)?), ShapeHints::reshaped()),
        Format::K2is => (Arc::new(k2is::open(path, options)?), ShapeHints::reshaped()),
    };
    let data = reshaped::apply(path, data, &hints, options)?;
    corrections::apply(path, data, options)
}

/// Detection of the detector formats (part A): by extension, then by content.
fn detect_detector_format(path: &Path, ext: Option<&str>) -> Option<Format> {
    match ext {
        Some("mib" | "hdr") => return Some(Format::Mib),
        Some("blo") => return Some(Format::Blo),
        Some("seq") => return Some(Format::Seq),
        Some("mrc" | "mrcs") => return Some(Format::Mrc),
        Some("tvips") => return Some(Format::Tvips),
        _ => {}
    }
    let mut head = [0u8; 1024];
    let n = std::fs::File::open(path).and_then(|mut f| {
        use std::io::Read;
        f.read(&mut head)
    });
    let head = &head[..n.unwrap_or(0)];
    if ext == Some("xml") {
        return empad::sniff_xml(head).then_some(Format::Empad);
    }
    if mib::sniff(head) {
        Some(Format::Mib)
    } else if blo::sniff(head) {
        Some(Format::Blo)
    } else if seq::sniff(head) {
        Some(Format::Seq)
    } else if mrc::sniff(head) {
        Some(Format::Mrc)
    } else if tvips::sniff(head) {
        Some(Format::Tvips)
    } else {
        None
    }
}

/// Check that `nav` × `sig` covers `total` elements, for reshaping options.
pub(crate) fn reshape(
    path: &Path,
    total_shape: &[usize],
    nav: Option<&[usize]>,
    sig: Option<&[usize]>,
) -> Result<DatasetShape, DatasetError> {
    // Checked products: shapes come from file headers and options, and may be absurd.
    let count = |shape: &[usize]| shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    let too_large = |shape: &[usize]| {
        DatasetError::invalid(path, format!("shape {shape:?} has more elements than this machine can address"))
    };
    let total = count(total_shape).ok_or_else(|| too_large(total_shape))?;
    let sig = match sig {
        Some(sig) => sig.to_vec(),
        None if total_shape.len() >= 3 => total_shape[total_shape.len() - 2..].to_vec(),
        None => {
            return Err(DatasetError::invalid(
                path,
                format!("shape {total_shape:?} has fewer than 3 axes; give --sig-shape"),
            ));
        }
    };
    let sig_len = count(&sig).ok_or_else(|| too_large(&sig))?;
    if sig_len == 0 || !total.is_multiple_of(sig_len) {
        return Err(DatasetError::invalid(
            path,
            format!("the data ({total} elements, shape {total_shape:?}) cannot be split into frames of shape {sig:?}"),
        ));
    }
    let frames = total / sig_len;
    let nav = match nav {
        Some(nav) => nav.to_vec(),
        None if sig.len() < total_shape.len() && total_shape[total_shape.len() - sig.len()..] == sig[..] => {
            total_shape[..total_shape.len() - sig.len()].to_vec()
        }
        None => vec![frames],
    };
    let nav_len = count(&nav).ok_or_else(|| too_large(&nav))?;
    if nav_len != frames {
        return Err(DatasetError::invalid(
            path,
            format!("nav shape {nav:?} has {nav_len} frames, but the data holds {frames} frames of shape {sig:?}"),
        ));
    }
    Ok(DatasetShape { nav, sig })
}
