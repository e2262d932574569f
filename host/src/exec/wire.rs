//! What crosses process boundaries: the [`Plan`] (JSON; partitions as ranges, checked
//! when read back) and [`PartitionOutput`] as bytes (Dask tasks return them): a magic, a
//! little JSON header (names, dtypes, shapes, stats), then every buffer's raw
//! little-endian bytes back to back. A 1 GiB sig buffer costs 1 GiB on the wire, not
//! the ~3 GiB of a JSON list of numbers.

use super::Limits;
use super::partition::{PartitionOutput, UdfOutput};
use super::plan::{PLAN_VERSION, Plan, PlannedUdf};
use crate::array::NdArray;
use crate::dataset::{DatasetShape, DatasetSpec, Partition, TilingScheme};
use crate::dtype::{DType, StoredDType};
use crate::roi::Roi;
use crate::udf::{DatasetMeta, InstanceStats, NamedBuffer};
use serde::{Deserialize, Serialize};

/// Version 2: the header names the plan ([`Plan::hash`]).
const MAGIC: &[u8; 8] = b"UDFPART2";

/// Why bytes are not a partition output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a udf-host partition output: {0}")]
pub struct WireError(String);

#[derive(Serialize, Deserialize)]
struct Header {
    plan: String,
    index: usize,
    frames: u64,
    bytes_read: u64,
    udfs: Vec<UdfHeader>,
}

#[derive(Serialize, Deserialize)]
struct UdfHeader {
    stats: Option<InstanceStats>,
    buffers: Vec<BufferHeader>,
}

#[derive(Serialize, Deserialize)]
struct BufferHeader {
    name: String,
    dtype: DType,
    shape: Vec<usize>,
}

impl PartitionOutput {
    /// The output as bytes ([`from_bytes`](Self::from_bytes) reads them back).
    pub fn to_bytes(&self) -> Vec<u8> {
        let header = Header {
            plan: self.plan.clone(),
            index: self.index,
            frames: self.frames,
            bytes_read: self.bytes_read,
            udfs: self
                .udfs
                .iter()
                .map(|u| UdfHeader {
                    stats: u.stats,
                    buffers: u
                        .buffers
                        .iter()
                        .map(|b| BufferHeader {
                            name: b.name.clone(),
                            dtype: b.array.dtype(),
                            shape: b.array.shape().to_vec(),
                        })
                        .collect(),
                })
                .collect(),
        };
        let header = serde_json::to_vec(&header).unwrap_or_else(|e| unreachable!("the header serialises: {e}"));
        let data: usize = self.udfs.iter().flat_map(|u| &u.buffers).map(|b| b.array.bytes().len()).sum();
        let mut out = Vec::with_capacity(MAGIC.len() + 4 + header.len() + data);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
        out.extend_from_slice(&header);
        for buffer in self.udfs.iter().flat_map(|u| &u.buffers) {
            out.extend_from_slice(buffer.array.bytes());
        }
        out
    }

    /// Read an output written by [`to_bytes`](Self::to_bytes).
    ///
    /// # Errors
    /// [`WireError`] for anything else: a wrong magic, a malformed header, sizes that do
    /// not add up. Nothing is allocated beyond what the bytes hold.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, WireError> {
        let err = |m: &str| WireError(m.to_owned());
        if bytes.starts_with(b"UDFPART1") {
            return Err(err(
                "an output of an older udf-host (UDFPART1, without its plan's hash); run the partition again",
            ));
        }
        let rest = bytes.strip_prefix(MAGIC.as_slice()).ok_or_else(|| err("wrong magic"))?;
        let (len, rest) = rest.split_first_chunk::<4>().ok_or_else(|| err("truncated header length"))?;
        let len = u32::from_le_bytes(*len) as usize;
        let (header, mut data) = rest.split_at_checked(len).ok_or_else(|| err("truncated header"))?;
        let header: Header = serde_json::from_slice(header).map_err(|e| WireError(format!("bad header: {e}")))?;
        let mut udfs = Vec::with_capacity(header.udfs.len());
        for u in header.udfs {
            let mut buffers = Vec::with_capacity(u.buffers.len());
            for b in u.buffers {
                let size = b
                    .shape
                    .iter()
                    .try_fold(b.dtype.size(), |acc, &n| acc.checked_mul(n))
                    .ok_or_else(|| WireError(format!("buffer '{}' of shape {:?} is too large", b.name, b.shape)))?;
                let (bytes, after) = data.split_at_checked(size).ok_or_else(|| {
                    WireError(format!("buffer '{}' needs {size} bytes, only {} are left", b.name, data.len()))
                })?;
                data = after;
                let array = NdArray::from_bytes(b.dtype, &b.shape, bytes).map_err(|e| WireError(e.to_string()))?;
                buffers.push(NamedBuffer { name: b.name, array });
            }
            udfs.push(UdfOutput { buffers, stats: u.stats });
        }
        if !data.is_empty() {
            return Err(WireError(format!("{} bytes after the last buffer", data.len())));
        }
        Ok(PartitionOutput {
            plan: header.plan,
            index: header.index,
            frames: header.frames,
            bytes_read: header.bytes_read,
            udfs,
        })
    }
}

/// How a plan is written: partitions as their ranges (their frames follow from the ROI),
/// a version, and a consistency check when read back.
#[derive(Serialize, Deserialize)]
pub(super) struct PlanRepr {
    version: u32,
    dataset: Option<DatasetSpec>,
    shape: DatasetShape,
    stored_dtype: StoredDType,
    meta: DatasetMeta,
    udfs: Vec<PlannedUdf>,
    roi: Option<Roi>,
    /// `(index, start, end)`: the true flat nav range of each partition.
    partitions: Vec<(usize, u64, u64)>,
    tiling: TilingScheme,
    direct_dtype: DType,
    threads: usize,
    limits: Limits,
}

impl PlanRepr {
    /// Parse a plan's JSON without building anything its sizes claim (that is
    /// [`Plan::try_from`]): what is allocated is bounded by the JSON's own size.
    pub(super) fn parse(json: &str) -> Result<Self, super::RunError> {
        serde_json::from_str(json).map_err(|e| super::RunError::Invalid(format!("not a valid run plan: {e}")))
    }

    pub(super) fn dataset(&self) -> Option<&DatasetSpec> {
        self.dataset.as_ref()
    }

    pub(super) fn shape(&self) -> &DatasetShape {
        &self.shape
    }

    pub(super) fn stored_dtype(&self) -> StoredDType {
        self.stored_dtype
    }
}

impl From<Plan> for PlanRepr {
    fn from(p: Plan) -> Self {
        PlanRepr {
            version: PLAN_VERSION,
            partitions: p.partitions.iter().map(|q| (q.index, q.range.start, q.range.end)).collect(),
            dataset: p.dataset,
            shape: p.shape,
            stored_dtype: p.stored_dtype,
            meta: p.meta,
            udfs: p.udfs,
            roi: p.roi,
            tiling: p.tiling,
            direct_dtype: p.direct_dtype,
            threads: p.threads,
            limits: p.limits,
        }
    }
}

impl TryFrom<PlanRepr> for Plan {
    type Error = String;

    fn try_from(r: PlanRepr) -> Result<Self, String> {
        if r.version != PLAN_VERSION {
            return Err(format!("plan version {} (this udf-host reads version {PLAN_VERSION})", r.version));
        }
        // Sizes that do not fit in memory are refused before anything is built from them.
        if crate::array::byte_len(&r.shape.full(), DType::C128.size()).is_none() {
            return Err(format!("nav {:?} x sig {:?} is more than this machine can address", r.shape.nav, r.shape.sig));
        }
        let nav_len = r.shape.nav_len() as u64;
        if r.meta.nav_shape != r.shape.nav || r.meta.sig_shape != r.shape.sig {
            return Err("the meta's shapes differ from the dataset's".into());
        }
        if let Some(roi) = &r.roi
            && roi.len() as u64 != nav_len
        {
            return Err(format!("the ROI has {} positions for {nav_len} frames", roi.len()));
        }
        if r.meta.roi_count != r.roi.as_ref().map(Roi::count) {
            return Err("the meta's ROI count differs from the ROI".into());
        }
        if r.udfs.is_empty() {
            return Err("no UDF".into());
        }
        let mut partitions = Vec::with_capacity(r.partitions.len());
        // Frames before `cursor` are accounted for; `selected` of them are selected.
        let (mut cursor, mut selected) = (0u64, 0u64);
        for (index, start, end) in r.partitions {
            if start < cursor || end <= start || end > nav_len {
                return Err(format!(
                    "partition {index} ({start}..{end}) is not an ascending range within {nav_len} frames"
                ));
            }
            let is_selected = |f: &u64| r.roi.as_ref().is_none_or(|roi| roi.contains(*f as usize));
            selected += (cursor..start).filter(is_selected).count() as u64;
            let frames: Vec<u64> = (start..end).filter(is_selected).collect();
            if frames.is_empty() {
                return Err(format!("partition {index} has no selected frame"));
            }
            let origin = selected;
            selected += frames.len() as u64;
            cursor = end;
            partitions.push(Partition { index, range: start..end, frames, origin });
        }
        Ok(Plan {
            dataset: r.dataset,
            shape: r.shape,
            stored_dtype: r.stored_dtype,
            meta: r.meta,
            udfs: r.udfs,
            roi: r.roi,
            partitions,
            tiling: r.tiling,
            direct_dtype: r.direct_dtype,
            threads: r.threads,
            limits: r.limits,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output() -> PartitionOutput {
        let a = NdArray::from_vec(&[2, 3], vec![1.5f32, f32::NAN, -0.0, 4.0, 5.0, 6.0]).unwrap();
        let b = NdArray::from_vec(&[1], vec![u64::MAX]).unwrap();
        let c = NdArray::from_bools(&[2], &[true, false]).unwrap();
        PartitionOutput {
            plan: "ab".repeat(32),
            index: 7,
            frames: 2,
            bytes_read: 1234,
            udfs: vec![
                UdfOutput {
                    buffers: vec![
                        NamedBuffer { name: "a".into(), array: a },
                        NamedBuffer { name: "b".into(), array: b },
                    ],
                    stats: Some(InstanceStats { peak_memory: 65536, calls: 5, ..Default::default() }),
                },
                UdfOutput { buffers: vec![NamedBuffer { name: "c".into(), array: c }], stats: None },
            ],
        }
    }

    #[test]
    fn outputs_round_trip_bit_for_bit_with_raw_bytes_after_a_small_header() {
        let out = output();
        let bytes = out.to_bytes();
        // Raw data: 6 f32 + 1 u64 + 2 bools = 34 bytes, at the end, as they are in memory.
        let data: Vec<u8> = out.udfs.iter().flat_map(|u| &u.buffers).flat_map(|b| b.array.bytes().to_vec()).collect();
        assert!(bytes.ends_with(&data));
        assert_eq!(PartitionOutput::from_bytes(&bytes).unwrap(), out);
    }

    #[test]
    fn damaged_bytes_are_refused_without_panicking() {
        let bytes = output().to_bytes();
        assert!(PartitionOutput::from_bytes(&bytes[..bytes.len() - 1]).unwrap_err().to_string().contains("only"));
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(PartitionOutput::from_bytes(&extra).unwrap_err().to_string().contains("after the last buffer"));
        assert!(PartitionOutput::from_bytes(b"UDFPART0").unwrap_err().to_string().contains("magic"));
        assert!(PartitionOutput::from_bytes(b"UDFPART1").unwrap_err().to_string().contains("older udf-host"));
        for cut in 0..bytes.len() {
            let _ = PartitionOutput::from_bytes(&bytes[..cut]);
        }
        let huge = br#"{"plan":"","index":0,"frames":0,"bytes_read":0,"udfs":[{"stats":null,"buffers":[{"name":"x","dtype":"float64","shape":[4294967296,4294967296]}]}]}"#;
        let mut forged = MAGIC.to_vec();
        forged.extend_from_slice(&(huge.len() as u32).to_le_bytes());
        forged.extend_from_slice(huge);
        assert!(PartitionOutput::from_bytes(&forged).is_err());
    }
}
