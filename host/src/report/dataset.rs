//! The dataset summary: what `udf-host info` prints and `DataSet.info()` returns.

use crate::dataset::{self, Dataset, DatasetError, OpenOptions, TileRequest, default_partition_count, negotiate};
use crate::dtype::{DType, result_type};
use crate::udf::{Method, TileDepth, TileSize};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

/// What a dataset holds and how a run would split it: its format, shape, dtype and
/// details, the default partitioning for `threads`, and the tile shape negotiated for a
/// tile UDF with default preferences (float32 input, ~1 MiB tiles).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetSummary {
    /// The file read (for multi-file formats: as the format names it).
    pub path: String,
    /// The format's name (`npy`, `mib`, ...).
    pub format: String,
    pub nav_shape: Vec<usize>,
    pub sig_shape: Vec<usize>,
    pub frames: usize,
    /// Bytes per frame as stored.
    pub frame_bytes: usize,
    /// Bytes of all frames as stored.
    pub bytes: usize,
    /// The stored dtype as a NumPy `descr` (`<u2`, `>f4`).
    pub dtype: String,
    /// The stored dtype in words (`uint16 (big-endian)`).
    pub dtype_name: String,
    /// Format-specific details.
    pub details: BTreeMap<String, String>,
    /// The worker threads the partitioning is planned for.
    pub threads: usize,
    pub partitions: PartitionSizes,
    pub tile_udf: TileForDefaultUdf,
}

/// The default partitioning: how many, and their sizes in frames.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionSizes {
    pub count: usize,
    pub min_frames: usize,
    pub max_frames: usize,
}

/// The tiling a tile UDF with default preferences gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TileForDefaultUdf {
    /// NumPy's name of the input dtype (`float32`).
    pub input_dtype: String,
    /// `[depth, ..signal slice shape]`.
    pub tile_shape: Vec<usize>,
    pub signal_slices: usize,
}

impl DatasetSummary {
    /// Open `path` with `options` and summarise it for `threads` worker threads.
    ///
    /// # Errors
    /// The dataset cannot be opened.
    pub fn open(path: &Path, options: &OpenOptions, threads: usize) -> Result<Self, DatasetError> {
        Ok(Self::of(dataset::open(path, options)?.as_ref(), threads))
    }

    /// The summary of a dataset that is open already.
    pub fn of(data: &dyn Dataset, threads: usize) -> Self {
        let shape = data.shape();
        let stored = data.stored_dtype();
        let info = data.info();
        let count = default_partition_count(shape.nav_len(), shape.sig_len(), threads);
        let partitions = dataset::plan_partitions(shape.nav_len(), count, None);
        let input = result_type(DType::F32, stored.dtype);
        let request = TileRequest { method: Method::Tile, depth: TileDepth::Default, size: TileSize::BestFit };
        let first_len = partitions.first().map_or(1, |p| p.len());
        let tiling =
            negotiate(&[request], shape, &data.base_shape(), first_len, input.size(), stored.dtype.size(), true);
        let frame_bytes = shape.sig_len() * stored.dtype.size();
        let sizes = partitions.iter().map(|p| p.len());
        DatasetSummary {
            path: info.path.display().to_string(),
            format: info.format.to_owned(),
            nav_shape: shape.nav.clone(),
            sig_shape: shape.sig.clone(),
            frames: shape.nav_len(),
            frame_bytes,
            bytes: shape.nav_len() * frame_bytes,
            dtype: stored.descr(),
            dtype_name: stored.to_string(),
            details: info.details.into_iter().collect(),
            threads,
            partitions: PartitionSizes {
                count: partitions.len(),
                min_frames: sizes.clone().min().unwrap_or(0),
                max_frames: sizes.max().unwrap_or(0),
            },
            tile_udf: TileForDefaultUdf {
                input_dtype: input.name().to_owned(),
                tile_shape: tiling.tile_shape(),
                signal_slices: tiling.slices.len(),
            },
        }
    }

    /// The text `udf-host info` prints.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{} ({})", self.path, self.format);
        let _ = writeln!(out, "  nav shape     {} ({} frames)", list(&self.nav_shape), self.frames);
        let _ = writeln!(out, "  sig shape     {} ({} bytes per frame)", list(&self.sig_shape), self.frame_bytes);
        let _ = writeln!(out, "  dtype         {}", self.dtype_name);
        let _ = writeln!(out, "  size          {:.1} MB", self.bytes as f64 / 1e6);
        for (key, value) in &self.details {
            let _ = writeln!(out, "  {key:<13} {value}");
        }
        let p = &self.partitions;
        let _ = writeln!(
            out,
            "  partitions    {} ({}..{} frames each, planned for {} threads)",
            p.count, p.min_frames, p.max_frames, self.threads
        );
        let t = &self.tile_udf;
        let _ = writeln!(
            out,
            "  tile shape    {} for a tile UDF with default preferences ({} input, {} signal slices)",
            list(&t.tile_shape),
            t.input_dtype,
            t.signal_slices
        );
        out
    }
}

/// A shape as compact JSON: `[32,64]`.
fn list(values: &[usize]) -> String {
    format!("[{}]", values.iter().map(usize::to_string).collect::<Vec<_>>().join(","))
}
