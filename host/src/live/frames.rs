//! Frames as they come off the wire, and the frames of one partition as a
//! [`Dataset`](crate::dataset::Dataset) the executor reads tiles from.
//!
//! Receivers keep each frame's payload as it arrived ([`bytes::Bytes`], no copy): Merlin
//! frames as big-endian integers or packed raw counters, DECTRIS frames compressed. The
//! decoding happens in the partitions, on the worker threads, with the decoders of the
//! file readers: [`crate::dataset::mib`] for Merlin, [`crate::dataset::hdf5::filters`]
//! for bitshuffle-LZ4.

use super::budget::Reservation;
use crate::array::AlignedBytes;
use crate::dataset::hdf5::filters;
use crate::dataset::mib::RawLayout;
use crate::dataset::{Dataset, DatasetError, DatasetInfo, DatasetShape, SigSlice};
use crate::dtype::{DType, StoredDType, converter};
use crate::udf::SliceRuns;
use bytes::Bytes;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// How a frame's payload turns into pixels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameEncoding {
    /// The pixels as they are, in the acquisition's stored dtype and byte order.
    Plain,
    /// Merlin raw (`R64`) counters.
    MerlinRaw(RawLayout),
    /// Bitshuffle + LZ4 with the HDF5 filter's framing (an 8-byte decoded size and a
    /// 4-byte block size, big-endian, then the blocks), elements of `elem_size` bytes.
    BitshuffleLz4 { elem_size: usize },
    /// LZ4 with the HDF5 filter's framing.
    Lz4,
}

impl FrameEncoding {
    /// Whether frames are decoded into a block before tiles are read.
    fn compressed(&self) -> bool {
        matches!(self, FrameEncoding::BitshuffleLz4 { .. } | FrameEncoding::Lz4)
    }

    /// The name in messages and results.json.
    pub fn name(&self) -> String {
        match self {
            FrameEncoding::Plain => "plain".into(),
            FrameEncoding::MerlinRaw(raw) => format!("raw {}-bit counters", raw.bits),
            FrameEncoding::BitshuffleLz4 { elem_size } => format!("bitshuffle-lz4 ({elem_size}-byte elements)"),
            FrameEncoding::Lz4 => "lz4".into(),
        }
    }
}

/// What a receiver learned when the acquisition started: the frames it will deliver.
#[derive(Debug, Clone)]
pub struct Acquisition {
    /// The frame shape, e.g. `[256, 256]`.
    pub sig: Vec<usize>,
    /// The pixels' type once decoded.
    pub stored: StoredDType,
    /// How each payload decodes.
    pub encoding: FrameEncoding,
    /// Bytes of an uncompressed payload (`None`: it varies, compressed).
    pub payload_bytes: Option<usize>,
    /// Frames the detector says it will send, if it says.
    pub frames: Option<u64>,
    /// Facts for `results.json` (header fields).
    pub details: Vec<(String, String)>,
}

/// The dataset's description: format, where from, details.
#[derive(Debug, Clone)]
pub(crate) struct LiveDescription {
    pub format: &'static str,
    pub source: String,
    pub details: Vec<(String, String)>,
}

impl LiveDescription {
    fn info(&self) -> DatasetInfo {
        DatasetInfo { format: self.format, path: PathBuf::from(&self.source), details: self.details.clone() }
    }

    fn error(&self, message: impl Into<String>) -> DatasetError {
        DatasetError::Invalid { path: PathBuf::from(&self.source), message: message.into() }
    }
}

/// The shape of a live acquisition, for planning: it has no frames to read (they reach
/// the partitions as [`PartitionFrames`]).
pub(crate) struct LiveShape {
    pub shape: DatasetShape,
    pub stored: StoredDType,
    pub description: Arc<LiveDescription>,
}

impl Dataset for LiveShape {
    fn shape(&self) -> &DatasetShape {
        &self.shape
    }

    fn stored_dtype(&self) -> StoredDType {
        self.stored
    }

    fn info(&self) -> DatasetInfo {
        self.description.info()
    }

    fn read_tile(&self, frames: &[u64], _sig: &SigSlice, _dtype: DType, _out: &mut [u8]) -> Result<(), DatasetError> {
        Err(self.description.error(format!(
            "internal: frame {:?} of a live acquisition was read outside its partition",
            frames.first()
        )))
    }
}

/// The frames of one partition, received: a dataset of the acquisition's full shape
/// that can read only these frames. Holds its share of the frame budget until dropped.
pub(crate) struct PartitionFrames {
    shape: DatasetShape,
    stored: StoredDType,
    encoding: Arc<FrameEncoding>,
    description: Arc<LiveDescription>,
    /// True flat nav index of `payloads[0]`.
    first: u64,
    /// One per frame of the partition's range (`None`: outside the ROI).
    payloads: Vec<Option<Bytes>>,
    /// Compressed frames decoded once, at the first read: `[frame, pixels]`, native order.
    decoded: OnceLock<Result<AlignedBytes, String>>,
    _held: Reservation,
}

impl PartitionFrames {
    pub fn new(
        shape: DatasetShape,
        stored: StoredDType,
        encoding: Arc<FrameEncoding>,
        description: Arc<LiveDescription>,
        first: u64,
        payloads: Vec<Option<Bytes>>,
        held: Reservation,
    ) -> Self {
        PartitionFrames { shape, stored, encoding, description, first, payloads, decoded: OnceLock::new(), _held: held }
    }

    fn payload(&self, frame: u64) -> Result<&Bytes, DatasetError> {
        frame
            .checked_sub(self.first)
            .and_then(|i| self.payloads.get(i as usize))
            .and_then(Option::as_ref)
            .ok_or_else(|| self.description.error(format!("internal: frame {frame} is not in this partition")))
    }

    fn frame_bytes(&self) -> usize {
        self.shape.sig_len() * self.stored.dtype.size()
    }

    /// Every frame of the partition decoded into one block (compressed encodings).
    fn decoded(&self) -> Result<&AlignedBytes, DatasetError> {
        let block = self.decoded.get_or_init(|| {
            let frame_bytes = self.frame_bytes();
            let mut block = AlignedBytes::zeroed(frame_bytes * self.payloads.len());
            let mut scratch = Vec::new();
            for (i, payload) in self.payloads.iter().enumerate() {
                let Some(payload) = payload else { continue };
                let out = &mut block.as_mut_slice()[i * frame_bytes..(i + 1) * frame_bytes];
                decode_compressed(&self.encoding, payload, out, &mut scratch)
                    .map_err(|e| format!("frame {}: {e}", self.first + i as u64))?;
            }
            Ok(block)
        });
        block.as_ref().map_err(|e| self.description.error(e.clone()))
    }
}

/// Decode one compressed payload into `out` (exactly one frame).
///
/// # Errors
/// What the decoder found wrong, or a frame of another size.
pub(crate) fn decode_compressed(
    encoding: &FrameEncoding,
    payload: &[u8],
    out: &mut [u8],
    scratch: &mut Vec<u8>,
) -> Result<(), String> {
    let (filter, elem_size) = match encoding {
        FrameEncoding::BitshuffleLz4 { elem_size } => {
            // client_data: [version, 0, element size, block size, compression (2: LZ4)]
            let filter = filters::Filter {
                id: filters::BITSHUFFLE,
                name: None,
                client_data: vec![0, 0, *elem_size as u32, 0, 2],
            };
            (filter, *elem_size)
        }
        FrameEncoding::Lz4 => (filters::Filter { id: filters::LZ4, name: None, client_data: Vec::new() }, 1),
        _ => return Err(format!("internal: {} frames are not compressed", encoding.name())),
    };
    // LiberTEM-rs's mock frames leave the 12-byte header zero: the size is the frame's,
    // the block size bitshuffle's default.
    let patched;
    let payload = if payload.len() >= 12 && payload[..12].iter().all(|&b| b == 0) {
        let mut with_header = payload.to_vec();
        with_header[..8].copy_from_slice(&(out.len() as u64).to_be_bytes());
        patched = with_header;
        &patched[..]
    } else {
        payload
    };
    filters::decode_into(std::slice::from_ref(&filter), 0, payload, elem_size, out.len(), scratch)?;
    if scratch.len() != out.len() {
        return Err(format!("decoded to {} bytes, expected a frame of {}", scratch.len(), out.len()));
    }
    out.copy_from_slice(scratch);
    Ok(())
}

impl Dataset for PartitionFrames {
    fn shape(&self) -> &DatasetShape {
        &self.shape
    }

    fn stored_dtype(&self) -> StoredDType {
        self.stored
    }

    fn info(&self) -> DatasetInfo {
        self.description.info()
    }

    fn read_tile(&self, frames: &[u64], sig: &SigSlice, dtype: DType, out: &mut [u8]) -> Result<(), DatasetError> {
        let frame_out = sig.len() * dtype.size();
        if out.len() != frames.len() * frame_out {
            return Err(self.description.error(format!(
                "internal: tile buffer of {} bytes for {}",
                out.len(),
                frames.len() * frame_out
            )));
        }
        let runs = SliceRuns::new(&self.shape.sig, sig);
        let src_size = self.stored.dtype.size();
        let run_dst = runs.run_len * dtype.size();
        match self.encoding.as_ref() {
            FrameEncoding::MerlinRaw(raw) => {
                let convert = converter(StoredDType::le(DType::U32), dtype);
                let mut values = vec![0u32; sig.len()];
                for (&f, dst) in frames.iter().zip(out.chunks_exact_mut(frame_out)) {
                    raw.decode(self.payload(f)?, sig, &mut values);
                    convert(bytemuck::cast_slice(&values), dst);
                }
            }
            encoding => {
                let (stored, block) = if encoding.compressed() {
                    (StoredDType::le(self.stored.dtype), Some(self.decoded()?))
                } else {
                    (self.stored, None)
                };
                let convert = converter(stored, dtype);
                let frame_bytes = self.frame_bytes();
                let mut dst = 0;
                for &f in frames {
                    let src: &[u8] = match block {
                        Some(block) => {
                            let i = (f - self.first) as usize;
                            &block.as_slice()[i * frame_bytes..(i + 1) * frame_bytes]
                        }
                        None => self.payload(f)?,
                    };
                    for &start in &runs.starts {
                        let at = start * src_size;
                        convert(&src[at..at + runs.run_len * src_size], &mut out[dst..dst + run_dst]);
                        dst += run_dst;
                    }
                }
            }
        }
        Ok(())
    }
}
