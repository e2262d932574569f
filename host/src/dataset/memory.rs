//! An in-memory dataset: frames held in one aligned array, for synthetic data, subsets
//! of other datasets (the conformance kit's ROI checks) and tests.

use super::{Dataset, DatasetError, DatasetInfo, DatasetShape, SigSlice};
use crate::array::NdArray;
use crate::dtype::{DType, StoredDType, converter};
use std::path::PathBuf;
use std::sync::Arc;

/// Frames in memory: an [`NdArray`] of `nav × sig` elements (C order, native byte order),
/// shared: opening the same frames again (a run plan's in-memory spec) copies nothing.
#[derive(Debug, Clone)]
pub struct MemoryDataset {
    name: String,
    shape: DatasetShape,
    data: Arc<NdArray>,
}

impl MemoryDataset {
    /// A dataset from `data`, whose elements are read as `nav` × `sig` frames in C order
    /// (the array's own shape does not matter, only its length). `name` appears in
    /// messages and [`Dataset::info`].
    ///
    /// # Errors
    /// [`DatasetError::Options`] if the array does not hold `nav × sig` elements.
    pub fn new(name: &str, data: NdArray, nav: &[usize], sig: &[usize]) -> Result<Self, DatasetError> {
        let shape = DatasetShape { nav: nav.to_vec(), sig: sig.to_vec() };
        let expected = shape.nav_len() * shape.sig_len();
        if data.len() != expected {
            return Err(DatasetError::Options(format!(
                "in-memory dataset '{name}': nav {nav:?} × sig {sig:?} needs {expected} elements, the array has {} (shape {:?})",
                data.len(),
                data.shape()
            )));
        }
        let full = shape.full();
        let data = data.reshape(&full).map_err(|e| DatasetError::Options(e.to_string()))?;
        Ok(MemoryDataset { name: name.to_owned(), shape, data: Arc::new(data) })
    }

    /// [`MemoryDataset::new`] without a copy: the frames stay in `data` (of any shape with
    /// `nav × sig` elements).
    ///
    /// # Errors
    /// [`DatasetError::Options`] if the array does not hold `nav × sig` elements.
    pub fn shared(name: &str, data: Arc<NdArray>, nav: &[usize], sig: &[usize]) -> Result<Self, DatasetError> {
        let shape = DatasetShape { nav: nav.to_vec(), sig: sig.to_vec() };
        let expected = shape.nav_len() * shape.sig_len();
        if data.len() != expected {
            return Err(DatasetError::Options(format!(
                "in-memory dataset '{name}': nav {nav:?} × sig {sig:?} needs {expected} elements, the array has {} (shape {:?})",
                data.len(),
                data.shape()
            )));
        }
        Ok(MemoryDataset { name: name.to_owned(), shape, data })
    }

    /// The frames `frames` (true flat nav indices, any order, repeats allowed) of
    /// `source`, in its stored dtype, as a dataset of nav shape `nav`.
    ///
    /// # Errors
    /// The source cannot be read, or `nav` does not hold `frames.len()` positions.
    pub fn gather(name: &str, source: &dyn Dataset, frames: &[u64], nav: &[usize]) -> Result<Self, DatasetError> {
        let sig = source.shape().sig.clone();
        let dtype = source.stored_dtype().dtype;
        let frame_bytes = source.shape().sig_len() * dtype.size();
        let mut data = NdArray::zeros(dtype, &[frames.len(), source.shape().sig_len()]);
        let full = SigSlice::full(&sig);
        for (i, &frame) in frames.iter().enumerate() {
            let out = &mut data.bytes_mut()[i * frame_bytes..(i + 1) * frame_bytes];
            source.read_tile(&[frame], &full, dtype, out)?;
        }
        MemoryDataset::new(name, data, nav, &sig)
    }

    /// The frames (`nav × sig` elements).
    pub fn array(&self) -> &NdArray {
        &self.data
    }

    fn frame_bytes(&self) -> usize {
        self.shape.sig_len() * self.data.dtype().size()
    }
}

impl Dataset for MemoryDataset {
    fn shape(&self) -> &DatasetShape {
        &self.shape
    }

    fn stored_dtype(&self) -> StoredDType {
        StoredDType::le(self.data.dtype())
    }

    fn info(&self) -> DatasetInfo {
        DatasetInfo {
            format: "memory",
            path: PathBuf::from(format!("<memory:{}>", self.name)),
            details: vec![("bytes".into(), self.data.bytes().len().to_string())],
        }
    }

    fn read_tile(&self, frames: &[u64], sig: &SigSlice, dtype: DType, out: &mut [u8]) -> Result<(), DatasetError> {
        let path = PathBuf::from(format!("<memory:{}>", self.name));
        let src_size = self.data.dtype().size();
        let dst_size = dtype.size();
        let expected = frames.len() * sig.len() * dst_size;
        if out.len() != expected {
            return Err(DatasetError::Invalid {
                path,
                message: format!("internal: tile buffer of {} bytes for {expected}", out.len()),
            });
        }
        let frame_shape = &self.shape.sig;
        if sig.origin.len() != frame_shape.len()
            || sig.shape.len() != frame_shape.len()
            || sig.origin.iter().zip(&sig.shape).zip(frame_shape).any(|((&o, &s), &f)| o + s > f)
        {
            return Err(DatasetError::Invalid {
                path,
                message: format!("signal slice {sig:?} is outside the frame {frame_shape:?}"),
            });
        }
        let nav_len = self.shape.nav_len() as u64;
        if let Some(&bad) = frames.iter().find(|&&f| f >= nav_len) {
            return Err(DatasetError::Invalid {
                path,
                message: format!("frame {bad} is outside the dataset ({nav_len} frames)"),
            });
        }
        let convert = converter(self.stored_dtype(), dtype);
        if sig.is_empty() {
            return Ok(());
        }
        // Row-major strides of a frame, in elements.
        let dims = frame_shape.len();
        let mut strides = vec![1usize; dims];
        for d in (0..dims.saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * frame_shape[d + 1];
        }
        // Contiguous runs along the last axis; iterate over the other axes of the slice.
        let run = sig.shape.last().copied().unwrap_or(1);
        let outer: usize = sig.shape[..dims.saturating_sub(1)].iter().product();
        let bytes = self.data.bytes();
        let mut dst = 0;
        for &frame in frames {
            let base = frame as usize * self.frame_bytes();
            for k in 0..outer {
                let mut rest = k;
                let mut offset = 0;
                for d in (0..dims.saturating_sub(1)).rev() {
                    offset += (sig.origin[d] + rest % sig.shape[d]) * strides[d];
                    rest /= sig.shape[d];
                }
                if let Some(&last) = sig.origin.last() {
                    offset += last;
                }
                let src = base + offset * src_size;
                convert(&bytes[src..src + run * src_size], &mut out[dst..dst + run * dst_size]);
                dst += run * dst_size;
            }
        }
        Ok(())
    }

    fn direct_frames(&self, frames: std::ops::Range<u64>, dtype: DType) -> Option<&[u8]> {
        if self.stored_dtype().needs_conversion_to(dtype) || frames.end > self.shape.nav_len() as u64 {
            return None;
        }
        let n = self.frame_bytes();
        Some(&self.data.bytes()[frames.start as usize * n..frames.end as usize * n])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dataset() -> MemoryDataset {
        // 2 frames of 3 x 4, value = 100 * frame + 10 * y + x.
        let values: Vec<u16> = (0..2).flat_map(|f| (0..12).map(move |i| 100 * f + 10 * (i / 4) + i % 4)).collect();
        MemoryDataset::new("t", NdArray::from_vec(&[24], values).unwrap(), &[2], &[3, 4]).unwrap()
    }

    #[test]
    fn reads_slices_with_conversion() {
        let ds = dataset();
        let slice = SigSlice { origin: vec![1, 1], shape: vec![2, 2] };
        let mut out = vec![0u8; 2 * 4 * 4];
        ds.read_tile(&[1, 0], &slice, DType::F32, &mut out).unwrap();
        let values: &[f32] = bytemuck::cast_slice(&out);
        assert_eq!(values, &[111.0, 112.0, 121.0, 122.0, 11.0, 12.0, 21.0, 22.0]);
    }

    #[test]
    fn direct_frames_only_without_conversion() {
        let ds = dataset();
        assert_eq!(ds.direct_frames(1..2, DType::U16).map(<[u8]>::len), Some(24));
        assert!(ds.direct_frames(0..1, DType::F32).is_none());
        assert!(ds.direct_frames(0..3, DType::U16).is_none());
    }

    #[test]
    fn rejects_wrong_sizes_and_frames() {
        let a = NdArray::zeros(DType::F32, &[5]);
        assert!(MemoryDataset::new("x", a, &[2], &[3]).unwrap_err().to_string().contains("needs 6 elements"));
        let ds = dataset();
        let mut out = vec![0u8; 12 * 2];
        let err = ds.read_tile(&[2], &SigSlice::full(&[3, 4]), DType::U16, &mut out).unwrap_err();
        assert!(err.to_string().contains("frame 2 is outside"));
    }

    #[test]
    fn gathers_frames_of_another_dataset() {
        let ds = dataset();
        let sub = MemoryDataset::gather("sub", &ds, &[1, 1, 0], &[3]).unwrap();
        let values = sub.array().as_slice::<u16>().unwrap();
        assert_eq!(&values[..2], &[100, 101]);
        assert_eq!(&values[24..26], &[0, 1]);
        assert_eq!(sub.shape().nav, vec![3]);
    }
}
