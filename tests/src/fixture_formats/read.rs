//! Reading datasets back in tests: every frame or a tile through `Dataset::read_tile`,
//! and the same selection taken from the fixture's values the plain way.

use crate::fixtures::Data;
use std::path::Path;
use std::sync::Arc;
use udf_host::dataset::{self, Dataset, OpenOptions, SigSlice};
use udf_host::dtype::DType;

/// Open `path`, panicking with the error.
pub fn open(path: &Path, options: &OpenOptions) -> Arc<dyn Dataset> {
    dataset::open(path, options).unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
}

/// The error opening `path` gives (panics if it opens).
pub fn open_error(path: &Path, options: &OpenOptions) -> String {
    match dataset::open(path, options) {
        Ok(_) => panic!("{} opened, expected an error", path.display()),
        Err(e) => e.to_string(),
    }
}

/// Every frame as f64, with the full frame as the slice.
pub fn read_all(ds: &dyn Dataset) -> Vec<f64> {
    let frames: Vec<u64> = (0..ds.shape().nav_len() as u64).collect();
    read_tile(ds, &frames, &SigSlice::full(&ds.shape().sig), DType::F64)
}

/// `frames` × `slice` read as `dtype`, returned as f64.
pub fn read_tile(ds: &dyn Dataset, frames: &[u64], slice: &SigSlice, dtype: DType) -> Vec<f64> {
    let mut out = vec![0u8; frames.len() * slice.len() * dtype.size()];
    ds.read_tile(frames, slice, dtype, &mut out).unwrap_or_else(|e| panic!("read {slice:?} as {dtype}: {e}"));
    macro_rules! conv {
        ($t:ty) => {
            bytemuck::pod_collect_to_vec::<u8, $t>(&out).into_iter().map(|x| x as f64).collect()
        };
    }
    match dtype {
        DType::F64 => conv!(f64),
        DType::F32 => conv!(f32),
        DType::U8 => conv!(u8),
        DType::U16 => conv!(u16),
        DType::U32 => conv!(u32),
        DType::U64 => conv!(u64),
        DType::I16 => conv!(i16),
        DType::I32 => conv!(i32),
        DType::I64 => conv!(i64),
        other => panic!("read_tile helper: {other}"),
    }
}

/// Frames `frames` × a 2-D `slice` of `data`, the plain way.
pub fn expected_tile(data: &Data, frames: &[usize], slice: &SigSlice) -> Vec<f64> {
    let w = data.sig[1];
    let mut out = Vec::new();
    for &f in frames {
        let frame = data.frame(f);
        for y in slice.origin[0]..slice.origin[0] + slice.shape[0] {
            for x in slice.origin[1]..slice.origin[1] + slice.shape[1] {
                out.push(frame[y * w + x]);
            }
        }
    }
    out
}
