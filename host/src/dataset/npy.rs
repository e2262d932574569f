//! NumPy `.npy` files: the header gives dtype and shape; the data is memory-mapped.

use super::{Dataset, DatasetError, DatasetInfo, DatasetShape, MappedFrames, OpenOptions, SigSlice, reshape};
use crate::dtype::{DType, StoredDType};
use crate::npy::NpyHeader;
use std::io::Read;
use std::path::Path;

/// A `.npy` dataset (C order).
pub struct NpyDataset {
    frames: MappedFrames,
    header: NpyHeader,
}

pub(super) fn open(path: &Path, options: &OpenOptions) -> Result<NpyDataset, DatasetError> {
    let mut file = std::fs::File::open(path).map_err(|source| DatasetError::Open { path: path.to_owned(), source })?;
    // Headers are small; read enough for any realistic one, then parse.
    let mut head = Vec::new();
    (&mut file)
        .take(1 << 20)
        .read_to_end(&mut head)
        .map_err(|source| DatasetError::Open { path: path.to_owned(), source })?;
    let header = NpyHeader::parse(&head).map_err(|e| DatasetError::invalid(path, e.to_string()))?;
    if header.fortran_order {
        return Err(DatasetError::invalid(
            path,
            "the array is in Fortran order; only C order is supported (save it with np.ascontiguousarray)",
        ));
    }
    if options.dtype.is_some_and(|d| d != header.dtype) {
        return Err(DatasetError::invalid(
            path,
            format!(
                "--dtype says {}, but the .npy header says {}",
                options.dtype.unwrap_or(header.dtype),
                header.dtype
            ),
        ));
    }
    let shape = reshape(path, &header.shape, options.nav_shape.as_deref(), options.sig_shape.as_deref())?;
    let stride = shape.sig_len() * header.dtype.dtype.size();
    let frames = MappedFrames::open(path, header.data_offset, stride, header.dtype, shape)?;
    Ok(NpyDataset { frames, header })
}

impl Dataset for NpyDataset {
    fn shape(&self) -> &DatasetShape {
        self.frames.shape()
    }

    fn stored_dtype(&self) -> StoredDType {
        self.frames.stored()
    }

    fn info(&self) -> DatasetInfo {
        DatasetInfo {
            format: "npy",
            path: self.frames.path().to_owned(),
            details: vec![
                ("header_shape".into(), format!("{:?}", self.header.shape)),
                ("descr".into(), self.header.dtype.descr()),
                ("data_offset".into(), self.header.data_offset.to_string()),
            ],
        }
    }

    fn read_tile(&self, frames: &[u64], sig: &SigSlice, dtype: DType, out: &mut [u8]) -> Result<(), DatasetError> {
        self.frames.read_tile(frames, sig, dtype, out)
    }

    fn direct_frames(&self, frames: std::ops::Range<u64>, dtype: DType) -> Option<&[u8]> {
        self.frames.direct_frames(frames, dtype)
    }
}
