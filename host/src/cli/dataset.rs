//! The options that say how to open a dataset, shared by `run`, `info` and `conformance`.

use super::Shape;
use crate::dataset::{ExcludedPixels, Format, OpenOptions};
use crate::dtype::StoredDType;
use anyhow::anyhow;
use clap::Args;
use std::path::PathBuf;

/// How to open the dataset: format, shapes, sync offset, corrections.
#[derive(Args, Debug, Clone)]
pub struct DatasetArgs {
    /// Dataset format (default: detected from the extension and content).
    #[arg(long, value_name = "raw|npy|mib|...")]
    pub format: Option<String>,
    /// Element type of raw data, NumPy style: float32, uint16, '>u2' (big-endian)...
    #[arg(long)]
    pub dtype: Option<String>,
    /// Nav (scan) shape, e.g. 64,64 (may use fewer frames than the files hold).
    #[arg(long)]
    pub nav_shape: Option<Shape>,
    /// Sig (frame) shape, e.g. 256,256 (the same number of pixels as the frames).
    #[arg(long)]
    pub sig_shape: Option<Shape>,
    /// Bytes to skip at the start of a raw file.
    #[arg(long, default_value_t = 0)]
    pub offset: u64,
    /// Skip K leading frames (K > 0) or insert |K| blank frames (K < 0).
    #[arg(long, value_name = "K", allow_negative_numbers = true)]
    pub sync_offset: Option<i64>,
    /// Dark frame to subtract (.npy of the frame shape).
    #[arg(long, value_name = "DARK.npy")]
    pub dark: Option<PathBuf>,
    /// Gain map to multiply with after the dark subtraction (.npy of the frame shape).
    #[arg(long, value_name = "GAIN.npy")]
    pub gain: Option<PathBuf>,
    /// Pixels to repair from their neighbours: a boolean .npy mask of the frame shape,
    /// or coordinates 'y,x;y,x;...'.
    #[arg(long, value_name = "MASK.npy|Y,X;...")]
    pub excluded_pixels: Option<String>,
    /// HDF5: the dataset to read, e.g. /entry/data/data [default: the only 3-D/4-D one].
    #[arg(long, value_name = "PATH")]
    pub dataset_path: Option<String>,
    /// HDF5: the array axes that form a frame, e.g. 0,1 for (height, width, frames)
    /// [default: what the file's layout says, else the last two].
    #[arg(long, value_name = "A,B")]
    pub sig_axes: Option<Shape>,
}

impl DatasetArgs {
    /// The library's open options.
    pub fn open_options(&self) -> anyhow::Result<OpenOptions> {
        Ok(OpenOptions {
            format: self
                .format
                .as_deref()
                .map(|f| Format::parse(f).ok_or_else(|| anyhow!("unknown --format '{f}' ({})", Format::NAMES)))
                .transpose()?,
            dtype: self
                .dtype
                .as_deref()
                .map(|d| {
                    StoredDType::parse(d)
                        .ok_or_else(|| anyhow!("--dtype '{d}' is not a dtype (try float32, uint16, '>u2')"))
                })
                .transpose()?,
            nav_shape: self.nav_shape.clone().map(|s| s.0),
            sig_shape: self.sig_shape.clone().map(|s| s.0),
            offset: self.offset,
            sync_offset: self.sync_offset,
            dark: self.dark.clone(),
            gain: self.gain.clone(),
            excluded_pixels: self
                .excluded_pixels
                .as_deref()
                .map(|e| ExcludedPixels::parse(e).map_err(|m| anyhow!("--excluded-pixels: {m}")))
                .transpose()?,
            dataset_path: self.dataset_path.clone(),
            sig_axes: self.sig_axes.clone().map(|s| s.0),
        })
    }

    /// Whether any option that only a file can take is given (the conformance kit's
    /// synthetic data takes only dtype and shapes).
    pub fn names_a_file_option(&self) -> Option<&'static str> {
        [
            (self.format.is_some(), "--format"),
            (self.offset != 0, "--offset"),
            (self.sync_offset.is_some(), "--sync-offset"),
            (self.dark.is_some(), "--dark"),
            (self.gain.is_some(), "--gain"),
            (self.excluded_pixels.is_some(), "--excluded-pixels"),
            (self.dataset_path.is_some(), "--dataset-path"),
            (self.sig_axes.is_some(), "--sig-axes"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }
}
