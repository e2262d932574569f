//! A single file of fixed-stride frames ([`MappedFrames`]) as a dataset, with a format
//! name and details: what EMPAD, BLO, SEQ, MRC and each TVIPS file are once their
//! headers are parsed.

use super::{Dataset, DatasetError, DatasetInfo, DatasetShape, MappedFrames, SigSlice};
use crate::dtype::{DType, StoredDType};

/// Frames at a fixed stride in one file.
pub struct FramedFile {
    frames: MappedFrames,
    format: &'static str,
    details: Vec<(String, String)>,
}

impl FramedFile {
    /// Wrap `frames` of format `format`, described by `details`.
    pub fn new(frames: MappedFrames, format: &'static str, details: Vec<(String, String)>) -> Self {
        FramedFile { frames, format, details }
    }
}

impl Dataset for FramedFile {
    fn shape(&self) -> &DatasetShape {
        self.frames.shape()
    }

    fn stored_dtype(&self) -> StoredDType {
        self.frames.stored()
    }

    fn info(&self) -> DatasetInfo {
        DatasetInfo { format: self.format, path: self.frames.path().to_owned(), details: self.details.clone() }
    }

    fn read_tile(&self, frames: &[u64], sig: &SigSlice, dtype: DType, out: &mut [u8]) -> Result<(), DatasetError> {
        self.frames.read_tile(frames, sig, dtype, out)
    }

    fn direct_frames(&self, frames: std::ops::Range<u64>, dtype: DType) -> Option<&[u8]> {
        self.frames.direct_frames(frames, dtype)
    }
}

/// Frames that fit in a file of `len` bytes: whole frames from `offset` at `stride`
/// (the last one needs only `frame_bytes`), and a note if a partial frame follows.
pub(crate) fn count_frames(
    path: &std::path::Path,
    len: u64,
    offset: u64,
    stride: u64,
    frame_bytes: u64,
) -> (usize, Option<String>) {
    if len < offset.saturating_add(frame_bytes) || stride == 0 {
        let note = format!(
            "{} is truncated: the first frame at offset {offset} needs {frame_bytes} bytes, the file has {len}",
            path.display()
        );
        return (0, Some(note));
    }
    let whole = (len - offset - frame_bytes) / stride + 1;
    let end = offset + (whole - 1) * stride + frame_bytes;
    let rest = len - end;
    // Trailing bytes shorter than a frame's footer are no frame; more than that is a cut-off frame.
    let note = (rest > stride - frame_bytes).then(|| {
        format!(
            "{} is truncated: frame {whole} at offset {} has {} of {stride} bytes",
            path.display(),
            offset + whole * stride,
            len - (offset + whole * stride).min(len)
        )
    });
    (whole as usize, note)
}
