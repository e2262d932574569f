//! Frames at a fixed stride in a memory-mapped file: the reader behind raw and `.npy`
//! (and any format that is "header + frames with optional per-frame header/footer").

use super::{Dataset, DatasetError, DatasetInfo, DatasetShape, SigSlice};
use crate::dtype::{DType, StoredDType, converter};
use crate::udf::SliceRuns;
use memmap2::Mmap;
use std::path::{Path, PathBuf};

/// How a mapped file will be read, for the kernel's read-ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Front to back (frames at a stride): `madvise(MADV_SEQUENTIAL)`.
    Sequential,
    /// Jumping around (chunk indexes, sector files read in parallel): the default advice.
    Random,
}

/// Open `path` for reading if it is a regular file (symbolic links followed): the one
/// place the dataset readers open files. A FIFO, socket, device or directory is refused
/// without blocking (it is opened with `O_NONBLOCK` and checked on the open descriptor),
/// so a name that is not a data file — a crafted external link, say — cannot hang the
/// host or stream endless bytes into it.
///
/// # Errors
/// The OS error, or `InvalidInput` "not a regular file".
pub(crate) fn open_file(path: &Path) -> std::io::Result<std::fs::File> {
    #[cfg(unix)]
    let file = {
        use rustix::fs::{Mode, OFlags};
        let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC, Mode::empty())?;
        std::fs::File::from(fd)
    };
    #[cfg(not(unix))]
    let file = std::fs::File::open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        let what = if kind.is_dir() { "a directory" } else { "not a regular file (a FIFO, socket or device)" };
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("it is {what}")));
    }
    Ok(file)
}

/// Map `path` read-only: the one place the dataset readers map files.
///
/// # Errors
/// [`DatasetError::Open`] naming the file when it cannot be opened ([`open_file`]) or
/// mapped.
pub(crate) fn map_file(path: &Path, access: Access) -> Result<Mmap, DatasetError> {
    let open_err = |source| DatasetError::Open { path: path.to_owned(), source };
    let file = open_file(path).map_err(open_err)?;
    // SAFETY: the mapping is read-only and lives as long as the reader that owns it. If
    // another process truncates or rewrites the file while it is mapped, reads may fault
    // or see new bytes; that is the documented risk of reading a dataset that is being
    // modified (docs/security.md).
    let map = unsafe { Mmap::map(&file) }.map_err(open_err)?;
    #[cfg(unix)]
    if access == Access::Sequential {
        // Advice only: a kernel that ignores it reads the same bytes.
        let _ = map.advise(memmap2::Advice::Sequential);
    }
    #[cfg(not(unix))]
    let _ = access;
    Ok(map)
}

/// A memory-mapped file holding frames of one stored dtype at a fixed stride.
pub struct MappedFrames {
    path: PathBuf,
    map: Mmap,
    /// Byte offset of frame 0.
    offset: usize,
    /// Bytes from one frame's first pixel to the next frame's.
    stride: usize,
    stored: StoredDType,
    shape: DatasetShape,
    /// Format name and details for [`Dataset::info`].
    format: &'static str,
    details: Vec<(String, String)>,
}

impl MappedFrames {
    /// Map `path` and check that `shape.nav_len()` frames of `shape.sig` pixels, the
    /// first at `offset` and each `stride` bytes after the previous, fit in the file.
    ///
    /// # Errors
    /// The file cannot be opened or mapped, or is too short.
    pub fn open(
        path: &Path,
        offset: usize,
        stride: usize,
        stored: StoredDType,
        shape: DatasetShape,
    ) -> Result<Self, DatasetError> {
        let map = map_file(path, Access::Sequential)?;
        let frame_bytes = shape.sig_len() * stored.dtype.size();
        let frames = shape.nav_len();
        let needed = if frames == 0 {
            offset
        } else {
            (frames - 1)
                .checked_mul(stride)
                .and_then(|n| n.checked_add(offset + frame_bytes))
                .ok_or_else(|| DatasetError::invalid(path, "the dataset shape is too large"))?
        };
        if map.len() < needed {
            return Err(DatasetError::invalid(
                path,
                format!(
                    "truncated: {frames} frames of shape {:?} ({}) need {needed} bytes, the file has {}",
                    shape.sig,
                    stored,
                    map.len()
                ),
            ));
        }
        Ok(MappedFrames {
            path: path.to_owned(),
            map,
            offset,
            stride,
            stored,
            shape,
            format: "raw",
            details: Vec::new(),
        })
    }

    /// Name the format and its details, as [`Dataset::info`] reports them.
    pub fn with_info(mut self, format: &'static str, details: Vec<(String, String)>) -> Self {
        self.format = format;
        self.details = details;
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn shape(&self) -> &DatasetShape {
        &self.shape
    }

    pub fn stored(&self) -> StoredDType {
        self.stored
    }

    pub fn file_len(&self) -> usize {
        self.map.len()
    }

    /// The whole mapped file.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Byte offset of the first pixel of `frame` (which must be inside the dataset).
    pub fn frame_offset(&self, frame: usize) -> usize {
        self.offset + frame * self.stride
    }

    /// The stored bytes of `frame` (which must be inside the dataset): the payload a
    /// decoder turns into pixels when the format packs them (e.g. raw Merlin data).
    pub fn frame_bytes(&self, frame: usize) -> &[u8] {
        let start = self.frame_offset(frame);
        &self.map[start..start + self.shape.sig_len() * self.stored.dtype.size()]
    }

    /// See [`Dataset::read_tile`](super::Dataset::read_tile).
    pub fn read_tile(&self, frames: &[u64], sig: &SigSlice, dtype: DType, out: &mut [u8]) -> Result<(), DatasetError> {
        let src_size = self.stored.dtype.size();
        let dst_size = dtype.size();
        let expected = frames.len() * sig.len() * dst_size;
        if out.len() != expected {
            return Err(DatasetError::invalid(
                &self.path,
                format!("internal: tile buffer of {} bytes for {expected}", out.len()),
            ));
        }
        let nav_len = self.shape.nav_len() as u64;
        if let Some(&bad) = frames.iter().find(|&&f| f >= nav_len) {
            return Err(DatasetError::invalid(
                &self.path,
                format!("frame {bad} is outside the dataset ({nav_len} frames)"),
            ));
        }
        let convert = converter(self.stored, dtype);
        let runs = SliceRuns::new(&self.shape.sig, sig);
        let frame_bytes = self.shape.sig_len() * src_size;

        // Whole frames stored back to back: convert runs of consecutive frames at once.
        if runs.run_len == self.shape.sig_len() && self.stride == frame_bytes {
            let mut dst = 0;
            let mut i = 0;
            while i < frames.len() {
                let mut j = i + 1;
                while j < frames.len() && frames[j] == frames[j - 1] + 1 {
                    j += 1;
                }
                let start = self.offset + frames[i] as usize * self.stride;
                let n = (j - i) * frame_bytes;
                let out_n = (j - i) * runs.run_len * dst_size;
                convert(&self.map[start..start + n], &mut out[dst..dst + out_n]);
                dst += out_n;
                i = j;
            }
            return Ok(());
        }

        let run_src = runs.run_len * src_size;
        let run_dst = runs.run_len * dst_size;
        let mut dst = 0;
        for &frame in frames {
            let base = self.offset + frame as usize * self.stride;
            for start in runs.starts.iter().copied() {
                let src = base + start * src_size;
                convert(&self.map[src..src + run_src], &mut out[dst..dst + run_dst]);
                dst += run_dst;
            }
        }
        Ok(())
    }

    /// See [`Dataset::direct_frames`](super::Dataset::direct_frames).
    pub fn direct_frames(&self, frames: std::ops::Range<u64>, dtype: DType) -> Option<&[u8]> {
        let frame_bytes = self.shape.sig_len() * dtype.size();
        if self.stored.needs_conversion_to(dtype)
            || self.stride != frame_bytes
            || frames.end > self.shape.nav_len() as u64
        {
            return None;
        }
        let start = self.offset + frames.start as usize * frame_bytes;
        let bytes = &self.map[start..start + (frames.end - frames.start) as usize * frame_bytes];
        (bytes.as_ptr() as usize).is_multiple_of(dtype.size().min(16)).then_some(bytes)
    }
}

impl Dataset for MappedFrames {
    fn shape(&self) -> &DatasetShape {
        &self.shape
    }

    fn stored_dtype(&self) -> StoredDType {
        self.stored
    }

    fn info(&self) -> DatasetInfo {
        DatasetInfo { format: self.format, path: self.path.clone(), details: self.details.clone() }
    }

    fn read_tile(&self, frames: &[u64], sig: &SigSlice, dtype: DType, out: &mut [u8]) -> Result<(), DatasetError> {
        MappedFrames::read_tile(self, frames, sig, dtype, out)
    }

    fn direct_frames(&self, frames: std::ops::Range<u64>, dtype: DType) -> Option<&[u8]> {
        MappedFrames::direct_frames(self, frames, dtype)
    }
}
