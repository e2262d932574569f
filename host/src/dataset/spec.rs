//! How to open a dataset again, in another process: the part of a run plan that names
//! the data (never its mapping).

use super::{Dataset, DatasetError, Format, MemoryDataset, OpenOptions};
use crate::array::NdArray;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::path::PathBuf;
use std::sync::Arc;

/// Everything needed to open a dataset: a file and its open options, or frames held in
/// memory (shipped with the plan, as LiberTEM ships a `MemoryDataset` to its workers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum DatasetSpec {
    /// A file (or file set) read with [`super::open`].
    File { path: PathBuf, options: OpenOptions },
    /// Frames in memory: an array of `nav × sig` elements in C order.
    Memory { name: String, nav: Vec<usize>, sig: Vec<usize>, data: Arc<NdArray> },
}

impl DatasetSpec {
    /// A file with its open options.
    pub fn file(path: impl Into<PathBuf>, options: OpenOptions) -> Self {
        DatasetSpec::File { path: path.into(), options }
    }

    /// Open it.
    ///
    /// # Errors
    /// [`DatasetError`] naming the file (or the in-memory dataset) and the problem.
    pub fn open(self) -> Result<OpenedDataset, DatasetError> {
        let dataset: Arc<dyn Dataset> = match &self {
            DatasetSpec::File { path, options } => super::open(path, options)?,
            DatasetSpec::Memory { name, nav, sig, data } => {
                Arc::new(MemoryDataset::shared(name, data.clone(), nav, sig)?)
            }
        };
        Ok(OpenedDataset { dataset, spec: Some(self) })
    }

    /// What to call it in messages: the path, or the in-memory dataset's name.
    pub fn describe(&self) -> String {
        match self {
            DatasetSpec::File { path, .. } => path.display().to_string(),
            DatasetSpec::Memory { name, .. } => format!("in-memory dataset '{name}'"),
        }
    }
}

/// An open dataset, and — where it was opened from one — the spec that opens it again.
/// What [`crate::exec::Run::plan`] takes: a plan can be shipped to other processes only
/// when its dataset has a spec.
#[derive(Clone)]
pub struct OpenedDataset {
    pub dataset: Arc<dyn Dataset>,
    pub spec: Option<DatasetSpec>,
}

impl From<Arc<dyn Dataset>> for OpenedDataset {
    fn from(dataset: Arc<dyn Dataset>) -> Self {
        OpenedDataset { dataset, spec: None }
    }
}

impl<D: Dataset + 'static> From<Arc<D>> for OpenedDataset {
    fn from(dataset: Arc<D>) -> Self {
        OpenedDataset { dataset, spec: None }
    }
}

impl Serialize for Format {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Format {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Format::parse(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown format '{name}' ({})", Format::NAMES)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::{DType, StoredDType};

    #[test]
    fn file_specs_round_trip_through_json() {
        let options = OpenOptions {
            format: Some(Format::Raw),
            dtype: StoredDType::parse(">u2"),
            nav_shape: Some(vec![4, 4]),
            sig_shape: Some(vec![8, 8]),
            offset: 16,
            sync_offset: Some(-2),
            excluded_pixels: Some(super::super::ExcludedPixels::Coordinates(vec![vec![1, 2]])),
            ..OpenOptions::default()
        };
        let spec = DatasetSpec::file("/data/scan.raw", options);
        let json = serde_json::to_string(&spec).unwrap();
        assert!(json.contains(r#""format":"raw""#) && json.contains(r#""dtype":">u2""#), "{json}");
        let back: DatasetSpec = serde_json::from_str(&json).unwrap();
        assert_eq!(back, spec);
    }

    #[test]
    fn memory_specs_carry_their_frames() {
        let data = NdArray::from_vec(&[2, 3], vec![1u16, 2, 3, 4, 5, 6]).unwrap();
        let spec = DatasetSpec::Memory { name: "m".into(), nav: vec![2], sig: vec![3], data: Arc::new(data) };
        let back: DatasetSpec = serde_json::from_str(&serde_json::to_string(&spec).unwrap()).unwrap();
        assert_eq!(back, spec);
        let opened = back.open().unwrap();
        assert_eq!(opened.dataset.shape().sig, vec![3]);
        assert_eq!(opened.dataset.stored_dtype().dtype, DType::U16);
    }
}
