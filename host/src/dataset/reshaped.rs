//! The common shape options as a dataset wrapper: `--nav-shape` (a reshape that may use
//! fewer frames than the files hold), `--sig-shape` (a reshape of the frame), and
//! `--sync-offset` (skip `k > 0` leading frames, or insert `|k|` blank frames).
//!
//! Frame `i` of the wrapper is frame `i + sync_offset` of the files; frames outside
//! the files read as zeros (LiberTEM's `sync_offset` semantics). The wrapper also
//! records where the nav shape came from (`nav_shape_from` in `info`) and the reader's
//! warnings; when it changes no frame it passes reads straight through, so plain
//! datasets keep their zero-copy path.

use super::{Dataset, DatasetError, DatasetInfo, DatasetShape, OpenOptions, SigSlice};
use crate::dtype::{DType, StoredDType};
use crate::udf::SliceRuns;
use std::path::Path;
use std::sync::Arc;

/// What a format reader knows about the shape beyond the frames it found.
#[derive(Debug, Clone, Default)]
pub struct ShapeHints {
    /// The reader already applied `--nav-shape`/`--sig-shape` itself (raw, npy).
    pub reshaped: bool,
    /// The scan shape the metadata suggests (MIB `.hdr`, EMPAD `.xml`, BLO header...).
    pub nav: Option<Vec<usize>>,
    /// Where the nav hint comes from, for messages (`"the .hdr file"`).
    pub nav_source: Option<String>,
    /// A sync offset the reader detected (TVIPS scan indices), used without `--sync-offset`.
    pub sync_offset: Option<i64>,
    /// A note about a truncated file: the last frame is incomplete. Opening fails unless
    /// an explicit nav shape uses only complete frames.
    pub incomplete: Option<String>,
    /// Things the user should know that do not stop the reading (shown by `info` and in
    /// `results.json` as `warning` details).
    pub warnings: Vec<String>,
}

impl ShapeHints {
    /// The reader consumed the shape options itself.
    pub fn reshaped() -> Self {
        ShapeHints { reshaped: true, ..ShapeHints::default() }
    }
}

/// LiberTEM's `make_2D_square`: a square scan if the frame count is a perfect square.
pub fn square_nav(frames: usize) -> Vec<usize> {
    let side = (frames as f64).sqrt().round() as usize;
    if side > 1 && side * side == frames { vec![side, side] } else { vec![frames] }
}

/// Apply the nav/sig shape and sync offset options to `data` (whose nav is the frames
/// found in the files).
///
/// # Errors
/// The sync offset is outside `(-frames, frames)`, the nav shape needs more frames than
/// the files hold, or the sig shape has a different number of pixels.
pub fn apply(
    path: &Path,
    data: Arc<dyn Dataset>,
    hints: &ShapeHints,
    options: &OpenOptions,
) -> Result<Arc<dyn Dataset>, DatasetError> {
    let frames = data.shape().nav_len();
    let inner_sig = data.shape().sig.clone();
    let sync = options.sync_offset.or(hints.sync_offset).unwrap_or(0);
    if sync != 0 && sync.unsigned_abs() >= frames as u64 {
        return Err(DatasetError::invalid(
            path,
            format!("--sync-offset {sync} must be within ({}, {frames}) for {frames} frames", -(frames as i64)),
        ));
    }
    let nav_from;
    let (nav, sig) = if hints.reshaped {
        nav_from = match (&options.nav_shape, &hints.nav_source) {
            (Some(_), _) => "--nav-shape".to_owned(),
            (None, Some(source)) => source.clone(),
            (None, None) => "the file".to_owned(),
        };
        (data.shape().nav.clone(), inner_sig.clone())
    } else {
        let explicit_nav = options.nav_shape.is_some() || hints.nav.is_some();
        if let (Some(note), false) = (&hints.incomplete, explicit_nav) {
            return Err(DatasetError::invalid(
                path,
                format!("{note}; pass --nav-shape with at most {frames} frames to read the complete frames"),
            ));
        }
        let (nav, source) = match (&options.nav_shape, &hints.nav) {
            (Some(nav), _) => (nav.clone(), "--nav-shape".to_owned()),
            (None, Some(nav)) => (nav.clone(), hints.nav_source.clone().unwrap_or_else(|| "the metadata".into())),
            (None, None) => {
                let nav = square_nav(frames);
                let guess = if frames == 1 {
                    "a single frame".to_owned()
                } else if nav.len() == 2 {
                    format!("guessed: a square scan of the {frames} frames (no scan shape recorded)")
                } else {
                    format!("guessed: the {frames} frames in a line (no scan shape recorded; give --nav-shape)")
                };
                (nav, guess)
            }
        };
        nav_from = source.clone();
        let nav_len: usize = nav.iter().product();
        if nav.is_empty() || nav_len == 0 {
            return Err(DatasetError::invalid(path, format!("nav shape {nav:?} ({source}) has no frames")));
        }
        if nav_len > frames {
            let mut message = format!(
                "nav shape {nav:?} (from {source}) needs {nav_len} frames, but the file(s) hold {frames} complete frames"
            );
            if let Some(note) = &hints.incomplete {
                message.push_str(&format!("; {note}"));
            }
            return Err(DatasetError::invalid(path, message));
        }
        let sig = match &options.sig_shape {
            Some(sig) => {
                let want: usize = inner_sig.iter().product();
                if sig.is_empty() || sig.iter().product::<usize>() != want {
                    return Err(DatasetError::invalid(
                        path,
                        format!("--sig-shape {sig:?} must have {want} pixels like the frames of shape {inner_sig:?}"),
                    ));
                }
                sig.clone()
            }
            None => inner_sig.clone(),
        };
        (nav, sig)
    };
    let mut details = vec![("nav_shape_from".to_owned(), nav_from)];
    details.extend(hints.warnings.iter().map(|w| ("warning".to_owned(), w.clone())));
    Ok(Arc::new(Reshaped {
        inner: data,
        shape: DatasetShape { nav, sig },
        sync_offset: sync,
        inner_frames: frames,
        details,
    }))
}

/// The wrapper built by [`apply`].
pub struct Reshaped {
    inner: Arc<dyn Dataset>,
    shape: DatasetShape,
    sync_offset: i64,
    inner_frames: usize,
    /// `nav_shape_from` and warnings, added to the inner dataset's details.
    details: Vec<(String, String)>,
}

impl Reshaped {
    /// Whether reads pass straight through to the inner dataset.
    fn pass_through(&self) -> bool {
        self.sync_offset == 0 && !self.sig_reshaped()
    }

    /// The file frame behind frame `f`, if there is one.
    fn map(&self, f: u64) -> Option<u64> {
        let mapped = f as i128 + i128::from(self.sync_offset);
        (0..self.inner_frames as i128).contains(&mapped).then_some(mapped as u64)
    }

    fn sig_reshaped(&self) -> bool {
        self.shape.sig != self.inner.shape().sig
    }

    /// Read `frames` (file frames) × `sig` (in the reshaped sig geometry).
    fn read_inner(&self, frames: &[u64], sig: &SigSlice, dtype: DType, out: &mut [u8]) -> Result<(), DatasetError> {
        if !self.sig_reshaped() {
            return self.inner.read_tile(frames, sig, dtype, out);
        }
        let inner_sig = &self.inner.shape().sig;
        if sig.len() == self.shape.sig_len() {
            return self.inner.read_tile(frames, &SigSlice::full(inner_sig), dtype, out);
        }
        // A part of a reshaped frame: read the rows (of the file's first sig axis)
        // that hold its pixels, then gather.
        let runs = SliceRuns::new(&self.shape.sig, sig);
        let starts: Vec<usize> = runs.starts.to_vec();
        let first = starts.first().copied().unwrap_or(0);
        let last = starts.last().copied().unwrap_or(0) + runs.run_len;
        let row: usize = inner_sig[1..].iter().product::<usize>().max(1);
        let (r0, r1) = (first / row, last.div_ceil(row));
        let mut origin = vec![0; inner_sig.len()];
        let mut shape = inner_sig.clone();
        origin[0] = r0;
        shape[0] = r1 - r0;
        let rows = SigSlice { origin, shape };
        let size = dtype.size();
        let per_frame = rows.len() * size;
        let mut scratch = vec![0u8; frames.len() * per_frame];
        self.inner.read_tile(frames, &rows, dtype, &mut scratch)?;
        let run_bytes = runs.run_len * size;
        let mut dst = 0;
        for frame in scratch.chunks_exact(per_frame) {
            for &start in &starts {
                let src = (start - r0 * row) * size;
                out[dst..dst + run_bytes].copy_from_slice(&frame[src..src + run_bytes]);
                dst += run_bytes;
            }
        }
        Ok(())
    }
}

impl Dataset for Reshaped {
    fn shape(&self) -> &DatasetShape {
        &self.shape
    }

    fn stored_dtype(&self) -> StoredDType {
        self.inner.stored_dtype()
    }

    fn info(&self) -> DatasetInfo {
        let mut info = self.inner.info();
        if self.sync_offset != 0 {
            info.details.push(("sync_offset".into(), self.sync_offset.to_string()));
        }
        if self.sync_offset != 0 || self.shape.nav_len() != self.inner_frames {
            info.details.push(("frames_in_files".into(), self.inner_frames.to_string()));
        }
        info.details.extend(self.details.iter().cloned());
        info
    }

    fn base_shape(&self) -> Vec<usize> {
        if self.sig_reshaped() {
            let mut base = vec![1; self.shape.sig.len()];
            if let (Some(last), Some(&w)) = (base.last_mut(), self.shape.sig.last()) {
                *last = w;
            }
            base
        } else {
            self.inner.base_shape()
        }
    }

    fn read_tile(&self, frames: &[u64], sig: &SigSlice, dtype: DType, out: &mut [u8]) -> Result<(), DatasetError> {
        let frame_out = sig.len() * dtype.size();
        if out.len() != frames.len() * frame_out {
            return Err(DatasetError::invalid(
                &self.inner.info().path,
                format!("internal: tile buffer of {} bytes for {} bytes", out.len(), frames.len() * frame_out),
            ));
        }
        let nav_len = self.shape.nav_len() as u64;
        if let Some(&bad) = frames.iter().find(|&&f| f >= nav_len) {
            return Err(DatasetError::invalid(
                &self.inner.info().path,
                format!("frame {bad} is outside the dataset ({nav_len} frames)"),
            ));
        }
        if self.pass_through() {
            return self.inner.read_tile(frames, sig, dtype, out);
        }
        // Frames are ascending, so the ones in the files form one run in the middle.
        let shifted = |f: u64| f as i128 + i128::from(self.sync_offset);
        let a = frames.partition_point(|&f| shifted(f) < 0);
        let b = frames.partition_point(|&f| shifted(f) < self.inner_frames as i128);
        out[..a * frame_out].fill(0);
        out[b * frame_out..].fill(0);
        if a < b {
            let mapped: Vec<u64> = frames[a..b].iter().filter_map(|&f| self.map(f)).collect();
            self.read_inner(&mapped, sig, dtype, &mut out[a * frame_out..b * frame_out])?;
        }
        Ok(())
    }

    fn direct_frames(&self, frames: std::ops::Range<u64>, dtype: DType) -> Option<&[u8]> {
        if frames.is_empty() {
            return None;
        }
        let start = self.map(frames.start)?;
        let last = self.map(frames.end - 1)?;
        self.inner.direct_frames(start..last + 1, dtype)
    }
}

#[cfg(test)]
mod tests {
    use super::square_nav;

    #[test]
    fn square_when_possible() {
        assert_eq!(square_nav(16), vec![4, 4]);
        assert_eq!(square_nav(15), vec![15]);
        assert_eq!(square_nav(1), vec![1]);
    }
}
