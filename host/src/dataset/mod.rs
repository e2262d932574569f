//! Datasets: shapes, formats, and reading tiles with the dtype conversion fused in.
//!
//! | type | role |
//! |------|------|
//! | [`Dataset`] | a stack of frames: shape, native dtype, `read_tile` |
//! | [`MappedFrames`] | frames at a fixed stride in a memory-mapped file (raw, npy, ...) |
//! | [`MemoryDataset`] | frames in memory (synthetic data, subsets of other datasets) |
//! | [`OpenOptions`], [`open`] | pick the format and open a file |
//! | [`Format`], [`FORMATS`] | the format registry: names, extensions, detection, openers |
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
mod registry;
mod spec;
mod tiling;

// Formats (one module each) and the common option wrappers.
pub mod blo;
pub mod concat;
pub mod corrections;
pub mod dm;
pub mod empad;
pub mod framed;
pub mod hdf5;
pub mod k2is;
pub mod mib;
pub mod mrc;
pub mod raw_csr;
pub mod reshaped;
pub mod seq;
pub mod tvips;

pub use corrections::ExcludedPixels;
pub use mapped::MappedFrames;
pub use memory::MemoryDataset;
pub use partition::{Partition, default_partition_count, plan_partitions};
pub use registry::{FORMATS, FileHead, Format, FormatNames, FormatSpec, Opened};
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
    /// The dataset inside an HDF5 file, e.g. `/entry/data/data`, or the group of a
    /// DECTRIS master file's data links, `/entry/data` (default: the only frame stack).
    pub dataset_path: Option<String>,
    /// HDF5: the array axes that form a frame, in frame order (default: what the file's
    /// layout says — Velox and EMD stacks — else the last two).
    pub sig_axes: Option<Vec<usize>>,
}

impl OpenOptions {
    /// The options by name, as keyword arguments and JSON keys give them
    /// (`Context.load(path, **options)`); the format is chosen apart.
    pub const NAMES: [&str; 10] = [
        "dtype",
        "nav_shape",
        "sig_shape",
        "offset",
        "sync_offset",
        "dark",
        "gain",
        "excluded_pixels",
        "dataset_path",
        "sig_axes",
    ];

    /// Options from a JSON object keyed by [`OpenOptions::NAMES`] (values as the
    /// options' serde forms: `"<u2"`, `[64, 64]`, `{"coordinates": [[1, 2]]}`).
    ///
    /// # Errors
    /// A name that is not an option (naming those that are), or a value of the wrong form.
    pub fn from_named(options: serde_json::Value) -> Result<OpenOptions, String> {
        let object = options.as_object().ok_or("dataset options must be given by name")?;
        if let Some(unknown) = object.keys().find(|k| !Self::NAMES.contains(&k.as_str())) {
            return Err(format!("unknown dataset option '{unknown}' (options: {})", Self::NAMES.join(", ")));
        }
        serde_json::from_value(options).map_err(|e| format!("dataset options: {e}"))
    }
}

/// Open a dataset file: the format's reader (from `options.format`, else detected),
/// then the common shape options and corrections as wrappers.
///
/// # Errors
/// [`DatasetError`] naming the file: unreadable, too short or long for the shape,
/// malformed header, missing options.
pub fn open(path: &Path, options: &OpenOptions) -> Result<Arc<dyn Dataset>, DatasetError> {
    let format = options.format.unwrap_or_else(|| Format::detect(path));
    let (data, hints) = (format.spec().open)(path, options)?;
    let data = reshaped::apply(path, data, &hints, options)?;
    corrections::apply(path, data, options)
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
        // One rule for every format: the last two axes are the frame, so 2-D data is a
        // single frame (nav `[1]`).
        None if total_shape.len() >= 2 => total_shape[total_shape.len() - 2..].to_vec(),
        None => {
            return Err(DatasetError::invalid(
                path,
                format!("shape {total_shape:?} has fewer than 2 axes, no frame; give --sig-shape"),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_given_by_name_are_read_and_unknown_names_refused() {
        let options = OpenOptions::from_named(serde_json::json!({"nav_shape": [4, 8], "sync_offset": -2})).unwrap();
        assert_eq!(options.nav_shape, Some(vec![4, 8]));
        assert_eq!(options.sync_offset, Some(-2));
        assert_eq!(options.format, None);
        let e = OpenOptions::from_named(serde_json::json!({"nav_shap": [4]})).unwrap_err();
        assert!(e.contains("unknown dataset option 'nav_shap'") && e.contains("nav_shape"), "{e}");
        assert!(OpenOptions::from_named(serde_json::json!({"format": "raw"})).is_err(), "the format is chosen apart");
    }
}
