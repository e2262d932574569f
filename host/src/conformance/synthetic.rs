//! The suite's data: synthetic datasets (LiberTEM-style 0/1 values with outliers, and
//! uniform floats) or a real one, and the datasets derived from them (subsets, repeated
//! frames, NaN/inf, extreme values, other frame shapes).

use super::report::DataInfo;
use super::{ConformanceError, DataSource};
use crate::array::NdArray;
use crate::dataset::{Dataset, DatasetError, MemoryDataset};
use crate::dtype::{DType, Kind};
use crate::sample::{Generator, Pattern, encode};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// Shape, dtype and seed of the synthetic datasets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synthetic {
    pub nav: Vec<usize>,
    pub sig: Vec<usize>,
    /// Stored dtype of the data.
    pub dtype: DType,
    pub seed: u64,
}

impl Default for Synthetic {
    /// 4 × 6 scan positions (24 frames: 7 partitions split it unevenly), 16 × 16
    /// float32 frames.
    fn default() -> Self {
        Synthetic { nav: vec![4, 6], sig: vec![16, 16], dtype: DType::F32, seed: 1 }
    }
}

/// A dataset of the suite with its description.
#[derive(Clone)]
pub(crate) struct Named {
    pub info: DataInfo,
    pub data: Arc<dyn Dataset>,
}

/// Encode `values` as `dtype` into an in-memory dataset.
pub(crate) fn memory(
    name: &str,
    values: &[f64],
    dtype: DType,
    nav: &[usize],
    sig: &[usize],
) -> Result<MemoryDataset, DatasetError> {
    let mut bytes = Vec::with_capacity(values.len() * dtype.size());
    for &v in values {
        encode(v, dtype, false, &mut bytes);
    }
    let array =
        NdArray::from_bytes(dtype, &[values.len()], &bytes).map_err(|e| DatasetError::Options(e.to_string()))?;
    MemoryDataset::new(name, array, nav, sig)
}

/// LiberTEM's `_mk_random` pattern: 0/1 with two outliers.
pub(crate) fn binary_values(nav: &[usize], sig: &[usize], seed: u64) -> Vec<f64> {
    let frames: usize = nav.iter().product();
    let sig_len: usize = sig.iter().product();
    let mut generator = Generator::new(Pattern::Random, nav, sig, seed);
    let mut values = vec![0.0; frames * sig_len];
    for (i, frame) in values.chunks_mut(sig_len.max(1)).enumerate() {
        generator.frame(i, frame);
    }
    values
}

/// Uniform values: floats in [0, 1) for float dtypes, integers in [0, 1000) otherwise.
pub(crate) fn float_values(n: usize, dtype: DType, seed: u64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5EED_F10A7);
    match dtype.kind() {
        Kind::Float | Kind::Complex => (0..n).map(|_| rng.random_range(0.0..1.0)).collect(),
        Kind::Bool => (0..n).map(|_| f64::from(u8::from(rng.random_bool(0.5)))).collect(),
        _ => (0..n).map(|_| f64::from(rng.random_range(0u32..1000))).collect(),
    }
}

fn info(name: &str, data: &dyn Dataset, source: String) -> DataInfo {
    DataInfo {
        name: name.to_owned(),
        nav_shape: data.shape().nav.clone(),
        sig_shape: data.shape().sig.clone(),
        dtype: data.stored_dtype().dtype.name().to_owned(),
        source,
    }
}

/// The datasets of the suite; the first is the primary one.
pub(crate) fn datasets(source: &DataSource) -> Result<Vec<Named>, ConformanceError> {
    match source {
        DataSource::Synthetic(s) => {
            let frames: usize = s.nav.iter().product();
            let sig_len: usize = s.sig.iter().product();
            if frames == 0 || sig_len == 0 || s.sig.is_empty() || s.nav.is_empty() {
                return Err(ConformanceError::Options(format!(
                    "synthetic nav {:?} and sig {:?} must be non-empty with no zero extent",
                    s.nav, s.sig
                )));
            }
            if frames * sig_len > 1 << 24 {
                return Err(ConformanceError::Options(format!(
                    "synthetic data of nav {:?} × sig {:?} is too large for the suite (at most 16 Mi elements); \
                     the checks run dozens of times over it",
                    s.nav, s.sig
                )));
            }
            let binary = memory("binary", &binary_values(&s.nav, &s.sig, s.seed), s.dtype, &s.nav, &s.sig)?;
            let float = memory("float", &float_values(frames * sig_len, s.dtype, s.seed), s.dtype, &s.nav, &s.sig)?;
            Ok(vec![
                Named {
                    info: info("binary", &binary, format!("synthetic 0/1 with outliers (seed {})", s.seed)),
                    data: Arc::new(binary),
                },
                Named {
                    info: info("float", &float, format!("synthetic uniform (seed {})", s.seed)),
                    data: Arc::new(float),
                },
            ])
        }
        DataSource::Dataset { name, dataset } => {
            if dataset.shape().nav_len() == 0 || dataset.shape().sig_len() == 0 {
                return Err(ConformanceError::Options(format!("dataset {name} has no frames or empty frames")));
            }
            Ok(vec![Named { info: info("file", dataset.as_ref(), name.clone()), data: dataset.clone() }])
        }
    }
}

/// Frames `frames` of `source` (true flat indices, repeats allowed) as a dataset of
/// nav shape `nav`.
pub(crate) fn gather(name: &str, source: &dyn Dataset, frames: &[usize], nav: &[usize]) -> Result<Named, DatasetError> {
    let frames: Vec<u64> = frames.iter().map(|&f| f as u64).collect();
    let data = MemoryDataset::gather(name, source, &frames, nav)?;
    Ok(Named { info: info(name, &data, format!("frames of {}", source.info().path.display())), data: Arc::new(data) })
}

/// Float32 frames of `nav` × `sig`: uniform values with `planted` values written over
/// the first pixels of every third frame (NaN, infinities, extremes).
pub(crate) fn planted(
    name: &str,
    nav: &[usize],
    sig: &[usize],
    planted: &[f64],
    seed: u64,
) -> Result<Named, DatasetError> {
    planted_as(name, nav, sig, planted, seed, DType::F32)
}

/// Like [`planted`] in `dtype` (values saturate when encoded).
pub(crate) fn planted_as(
    name: &str,
    nav: &[usize],
    sig: &[usize],
    planted: &[f64],
    seed: u64,
    dtype: DType,
) -> Result<Named, DatasetError> {
    let frames: usize = nav.iter().product();
    let sig_len: usize = sig.iter().product();
    let mut values = float_values(frames * sig_len, dtype, seed);
    for frame in (0..frames).step_by(3) {
        for (k, &v) in planted.iter().enumerate() {
            // Spread the planted values over the frame (wrapping on tiny frames).
            let pixel = (k * 7 + frame) % sig_len.max(1);
            values[frame * sig_len + pixel] = v;
        }
    }
    let data = memory(name, &values, dtype, nav, sig)?;
    Ok(Named { info: info(name, &data, format!("synthetic (seed {seed})")), data: Arc::new(data) })
}

/// Uniform data of the primary dtype in another frame shape.
pub(crate) fn shaped(name: &str, nav: &[usize], sig: &[usize], dtype: DType, seed: u64) -> Result<Named, DatasetError> {
    let n = nav.iter().product::<usize>() * sig.iter().product::<usize>();
    let data = memory(name, &float_values(n, dtype, seed), dtype, nav, sig)?;
    Ok(Named { info: info(name, &data, format!("synthetic (seed {seed})")), data: Arc::new(data) })
}
