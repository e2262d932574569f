//! A dataset made of several files read one after another (multi-file MIB and TVIPS
//! sets): frame `i` of the whole is frame `i - first` of the part that holds it.

use super::{Dataset, DatasetError, DatasetInfo, DatasetShape, SigSlice};
use crate::dtype::{DType, StoredDType};
use std::path::PathBuf;
use std::sync::Arc;

/// Parts concatenated along the flat nav axis. All parts have the same sig shape and
/// stored dtype; their nav shapes are flat (`[frames]`).
pub struct Concat {
    parts: Vec<Arc<dyn Dataset>>,
    /// First frame of each part, plus the total at the end.
    starts: Vec<u64>,
    shape: DatasetShape,
    stored: StoredDType,
    info: DatasetInfo,
}

impl Concat {
    /// Concatenate `parts` (at least one). `info` describes the whole set.
    ///
    /// # Errors
    /// The parts disagree on sig shape or dtype (a reader bug: readers check their
    /// sets before concatenating, with messages naming the files).
    pub fn new(parts: Vec<Arc<dyn Dataset>>, info: DatasetInfo) -> Result<Self, DatasetError> {
        let first = parts.first().ok_or_else(|| DatasetError::invalid(&info.path, "no files in the set"))?;
        let sig = first.shape().sig.clone();
        let stored = first.stored_dtype();
        let mut starts = Vec::with_capacity(parts.len() + 1);
        let mut total = 0u64;
        for part in &parts {
            if part.shape().sig != sig || part.stored_dtype() != stored {
                return Err(DatasetError::invalid(
                    &part.info().path,
                    format!(
                        "frames of shape {:?} ({}) in a set of frames of shape {sig:?} ({stored})",
                        part.shape().sig,
                        part.stored_dtype()
                    ),
                ));
            }
            starts.push(total);
            total += part.shape().nav_len() as u64;
        }
        starts.push(total);
        let shape = DatasetShape { nav: vec![total as usize], sig };
        Ok(Concat { parts, starts, shape, stored, info })
    }

    /// The part holding `frame` (which must be inside the set).
    fn part_of(&self, frame: u64) -> usize {
        self.starts.partition_point(|&s| s <= frame).saturating_sub(1)
    }

    /// The files of the set, in order.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.parts.iter().map(|p| p.info().path).collect()
    }
}

impl Dataset for Concat {
    fn shape(&self) -> &DatasetShape {
        &self.shape
    }

    fn stored_dtype(&self) -> StoredDType {
        self.stored
    }

    fn info(&self) -> DatasetInfo {
        self.info.clone()
    }

    fn base_shape(&self) -> Vec<usize> {
        self.parts[0].base_shape()
    }

    fn read_tile(&self, frames: &[u64], sig: &SigSlice, dtype: DType, out: &mut [u8]) -> Result<(), DatasetError> {
        let total = *self.starts.last().unwrap_or(&0);
        if let Some(&bad) = frames.iter().find(|&&f| f >= total) {
            return Err(DatasetError::invalid(
                &self.info.path,
                format!("frame {bad} is outside the dataset ({total} frames)"),
            ));
        }
        let frame_out = sig.len() * dtype.size();
        if out.len() != frames.len() * frame_out {
            return Err(DatasetError::invalid(
                &self.info.path,
                format!("internal: tile buffer of {} bytes for {} bytes", out.len(), frames.len() * frame_out),
            ));
        }
        let mut i = 0;
        let mut local = Vec::new();
        while i < frames.len() {
            let part = self.part_of(frames[i]);
            let end = self.starts[part + 1];
            let j = i + frames[i..].partition_point(|&f| f < end);
            local.clear();
            local.extend(frames[i..j].iter().map(|&f| f - self.starts[part]));
            self.parts[part].read_tile(&local, sig, dtype, &mut out[i * frame_out..j * frame_out])?;
            i = j;
        }
        Ok(())
    }

    fn direct_frames(&self, frames: std::ops::Range<u64>, dtype: DType) -> Option<&[u8]> {
        if frames.is_empty() {
            return None;
        }
        let part = self.part_of(frames.start);
        let start = self.starts[part];
        if frames.end > self.starts[part + 1] {
            return None;
        }
        self.parts[part].direct_frames(frames.start - start..frames.end - start, dtype)
    }
}
