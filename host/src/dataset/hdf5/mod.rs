//! HDF5 files (`.h5`, `.hdf5`, `.nxs`, `.emd`): one numeric dataset of a file, contiguous
//! (memory-mapped, zero-copy where the dtype allows) or chunked (gzip, shuffle,
//! bitshuffle-LZ4, LZ4, fletcher32; decoded chunks cached, then copied into tiles with
//! the dtype conversion fused in).
//!
//! The file's metadata (superblock, object headers, groups, datatypes, layouts and the
//! chunk indexes: B-tree v1/v2, fixed and extensible arrays, single and implicit chunks) is
//! parsed by the pure-Rust `hdf5-reader` crate; the data path (mapping, filters, caching,
//! conversion) is ours, in [`chunked`] and [`filters`].
//!
//! | option | meaning |
//! |--------|---------|
//! | `dataset_path` | the dataset (`/entry/data/data`); default: the only 3-D/4-D numeric dataset |
//! | `sig_shape` | the trailing axes that form a frame (default: the last two) |
//! | `nav_shape` | a reshape of the leading axes |

mod chunked;
pub mod filters;

use super::{Dataset, DatasetError, DatasetInfo, DatasetShape, MappedFrames, OpenOptions, SigSlice, reshape};
use crate::dtype::{ByteOrder, DType, StoredDType};
use chunked::{ChunkEntry, ChunkedData};
use filters::Filter;
use hdf5_reader::messages::HdfMessage;
use hdf5_reader::messages::layout::{ChunkIndexing, DataLayout};
use hdf5_reader::{Datatype, Hdf5File};
use std::path::{Path, PathBuf};

/// The most groups visited when looking for the dataset (cycles are skipped too).
const MAX_GROUPS: usize = 10_000;

/// A dataset in an HDF5 file.
pub struct Hdf5Dataset {
    path: PathBuf,
    dataset_path: String,
    shape: DatasetShape,
    array_shape: Vec<u64>,
    stored: StoredDType,
    storage: Storage,
    details: Vec<(String, String)>,
    nav_source: String,
}

enum Storage {
    /// One block in the file, read like raw data.
    Contiguous(MappedFrames),
    /// Chunks, possibly filtered.
    Chunked(ChunkedData),
}

fn h5_err(path: &Path, what: &str, e: impl std::fmt::Display) -> DatasetError {
    DatasetError::invalid(path, format!("{what}: {e}"))
}

pub(super) fn open(path: &Path, options: &OpenOptions) -> Result<Hdf5Dataset, DatasetError> {
    let file_len =
        std::fs::metadata(path).map_err(|source| DatasetError::Open { path: path.to_owned(), source })?.len();
    let file = Hdf5File::open(path).map_err(|e| h5_err(path, "not a readable HDF5 file", e))?;
    let (dataset_path, ds) = match options.dataset_path.as_deref() {
        Some(p) => {
            let ds = file.dataset(p).map_err(|e| {
                let candidates = candidates(&file).map(|c| list(&c)).unwrap_or_default();
                h5_err(path, &format!("no dataset '{p}'"), format!("{e}{candidates}"))
            })?;
            (p.to_owned(), ds)
        }
        None => pick_dataset(path, &file)?,
    };
    let at = |msg: String| DatasetError::invalid(path, format!("dataset '{dataset_path}': {msg}"));

    let stored = stored_dtype(ds.dtype()).map_err(at)?;
    if options.dtype.is_some_and(|d| d != stored) {
        return Err(at(format!(
            "--dtype says {}, but the dataset holds {stored}",
            options.dtype.map_or_else(String::new, |d| d.to_string())
        )));
    }
    let array_shape = ds.shape().to_vec();
    let dims: Vec<usize> = array_shape
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| at(format!("axis of {d} elements is too large"))))
        .collect::<Result<_, _>>()?;
    let shape = reshape(path, &dims, options.nav_shape.as_deref(), options.sig_shape.as_deref())
        .map_err(|e| at(e.to_string().trim_start_matches(&format!("{}: ", path.display())).to_owned()))?;

    // Layout and filters from the dataset's object header.
    let header = file.get_or_parse_header(ds.address()).map_err(|e| at(format!("object header: {e}")))?;
    let mut layout = None;
    let mut filters = Vec::new();
    for message in &header.messages {
        match message {
            HdfMessage::DataLayout(l) => layout = Some(l.layout.clone()),
            HdfMessage::FilterPipeline(p) => {
                filters = p
                    .filters
                    .iter()
                    .map(|f| Filter { id: f.id, name: f.name.clone(), client_data: f.client_data.clone() })
                    .collect();
            }
            _ => {}
        }
    }
    let layout = layout.ok_or_else(|| at("the object header has no data layout message".into()))?;
    let elem = stored.dtype.size();
    let frame_bytes = shape.sig_len() * elem;
    let sb = file.superblock();
    let undefined =
        |a: u64| a == u64::MAX || (sb.offset_size < 8 && a == (1u64 << (8 * u32::from(sb.offset_size))) - 1);
    let mut details = vec![("dataset".to_owned(), dataset_path.clone()), ("shape".into(), format!("{array_shape:?}"))];
    let storage = match layout {
        DataLayout::Contiguous { address, .. } => {
            if undefined(address) {
                return Err(at("no data was ever written (contiguous storage not allocated)".into()));
            }
            let address = usize::try_from(address).map_err(|_| at(format!("data address {address} is too large")))?;
            if !filters.is_empty() {
                return Err(at("contiguous storage with a filter pipeline is not valid HDF5".into()));
            }
            details.push(("layout".into(), format!("contiguous at offset {address}")));
            let frames = MappedFrames::open(path, address, frame_bytes, stored, shape.clone()).map_err(|e| {
                at(format!("contiguous data at offset {address}: {}", strip_path(path, &e.to_string())))
            })?;
            Storage::Contiguous(frames)
        }
        DataLayout::Compact { .. } => {
            return Err(at("compact storage (data inside the object header) is not supported".into()));
        }
        DataLayout::Chunked { address, chunk_indexing, .. } => {
            let chunk_dims = ds.chunks().ok_or_else(|| at("chunked layout without chunk dimensions".into()))?;
            if chunk_dims.len() != array_shape.len() || chunk_dims.contains(&0) {
                return Err(at(format!("chunk shape {chunk_dims:?} does not fit the dataset shape {array_shape:?}")));
            }
            let sig_dims = shape.sig.len();
            if dims.len() < sig_dims || dims[dims.len() - sig_dims..] != shape.sig[..] {
                return Err(at(format!(
                    "for chunked data the frame must be the last axes of the dataset {dims:?}; --sig-shape {:?} is not",
                    shape.sig
                )));
            }
            for f in &filters {
                f.supported().map_err(at)?;
            }
            let entries = if undefined(address) {
                Vec::new()
            } else {
                chunk_entries(&file, address, chunk_indexing.as_ref(), &array_shape, ds.max_dims(), &chunk_dims, elem)
                    .map_err(|e| at(format!("chunk index at offset {address}: {e}")))?
            };
            let fill = ds.fill_value().and_then(|f| f.value.clone()).filter(|v| v.len() == elem);
            details.push(("layout".into(), format!("chunked {chunk_dims:?}, {} chunks stored", entries.len())));
            details.push((
                "filters".into(),
                if filters.is_empty() {
                    "none".into()
                } else {
                    filters.iter().map(Filter::describe).collect::<Vec<_>>().join(", ")
                },
            ));
            let chunks = chunk_dims.iter().map(|&c| c as usize).collect();
            Storage::Chunked(ChunkedData::new(path, file_len, dims, chunks, sig_dims, stored, filters, entries, fill)?)
        }
    };
    let nav_source = if options.nav_shape.is_some() {
        "--nav-shape".to_owned()
    } else {
        format!("the shape of dataset '{dataset_path}'")
    };
    Ok(Hdf5Dataset { path: path.to_owned(), dataset_path, shape, array_shape, stored, storage, details, nav_source })
}

fn strip_path(path: &Path, message: &str) -> String {
    message.trim_start_matches(&format!("{}: ", path.display())).to_owned()
}

/// The chunk index, by its kind.
fn chunk_entries(
    file: &Hdf5File,
    address: u64,
    indexing: Option<&ChunkIndexing>,
    shape: &[u64],
    max_dims: Option<&[u64]>,
    chunk_dims: &[u32],
    elem: usize,
) -> Result<Vec<ChunkEntry>, String> {
    use hdf5_reader::{btree_v1, chunk_index, extensible_array, fixed_array};
    let sb = file.superblock();
    let (os, ls) = (sb.offset_size, sb.length_size);
    let storage = file.storage();
    let ndim = shape.len();
    let entries = match indexing {
        None => {
            let leaves = btree_v1::collect_btree_v1_leaves_storage(
                storage,
                address,
                os,
                ls,
                Some(ndim as u32),
                chunk_dims,
                None,
            )
            .map_err(|e| e.to_string())?;
            let mut entries = Vec::with_capacity(leaves.len());
            for (key, chunk_address) in leaves {
                match key {
                    btree_v1::BTreeV1Key::RawData { chunk_size, filter_mask, offsets } if offsets.len() >= ndim => {
                        entries.push(chunk_index::ChunkEntry {
                            address: chunk_address,
                            size: u64::from(chunk_size),
                            filter_mask,
                            offsets: offsets[..ndim].to_vec(),
                        });
                    }
                    _ => return Err(format!("B-tree node entry for chunk at {chunk_address} is not a chunk key")),
                }
            }
            entries
        }
        Some(ChunkIndexing::SingleChunk { filtered_size, filters }) => {
            vec![chunk_index::single_chunk_entry(address, *filtered_size, *filters, ndim)]
        }
        Some(ChunkIndexing::Implicit) => {
            chunk_index::collect_implicit_chunk_entries(address, shape, chunk_dims, elem, None, storage.len())
                .map_err(|e| e.to_string())?
        }
        Some(ChunkIndexing::FixedArray { .. }) => {
            fixed_array::collect_fixed_array_chunk_entries_storage(storage, address, os, ls, shape, chunk_dims, None)
                .map_err(|e| e.to_string())?
        }
        Some(ChunkIndexing::ExtensibleArray { .. }) => {
            extensible_array::collect_extensible_array_chunk_entries_storage(
                storage, address, os, ls, shape, max_dims, chunk_dims, None,
            )
            .map_err(|e| e.to_string())?
        }
        Some(ChunkIndexing::BTreeV2) => {
            chunk_index::collect_v2_chunk_entries_storage(storage, address, os, ls, ndim as u32, chunk_dims, None)
                .map_err(|e| e.to_string())?
        }
    };
    Ok(entries
        .into_iter()
        .map(|e| ChunkEntry { address: e.address, size: e.size, filter_mask: e.filter_mask, offsets: e.offsets })
        .collect())
}

/// Map an HDF5 datatype to ours: integers, floats, h5py's complex compounds
/// (`r`, `i`) and booleans (an `i1` enum of FALSE/TRUE).
fn stored_dtype(datatype: &Datatype) -> Result<StoredDType, String> {
    let order = |o: &hdf5_reader::ByteOrder| match o {
        hdf5_reader::ByteOrder::LittleEndian => ByteOrder::Little,
        hdf5_reader::ByteOrder::BigEndian => ByteOrder::Big,
    };
    match datatype {
        Datatype::FixedPoint { size, signed, byte_order } => {
            let dtype = match (size, signed) {
                (1, false) => DType::U8,
                (2, false) => DType::U16,
                (4, false) => DType::U32,
                (8, false) => DType::U64,
                (1, true) => DType::I8,
                (2, true) => DType::I16,
                (4, true) => DType::I32,
                (8, true) => DType::I64,
                _ => return Err(format!("{}-byte integers are not supported", size)),
            };
            Ok(StoredDType { dtype, order: order(byte_order) })
        }
        Datatype::FloatingPoint { size, byte_order } => {
            let dtype = match size {
                4 => DType::F32,
                8 => DType::F64,
                _ => return Err(format!("{size}-byte floats are not supported (only float32 and float64)")),
            };
            Ok(StoredDType { dtype, order: order(byte_order) })
        }
        Datatype::Compound { size, fields } if fields.len() == 2 => {
            let (re, im) = (&fields[0], &fields[1]);
            match (&re.datatype, &im.datatype) {
                (
                    Datatype::FloatingPoint { size: a, byte_order: oa },
                    Datatype::FloatingPoint { size: b, byte_order: ob },
                ) if a == b
                    && oa == ob
                    && re.byte_offset == 0
                    && im.byte_offset == u32::from(*a)
                    && *size == 2 * u32::from(*a) =>
                {
                    let dtype = if *a == 4 {
                        DType::C64
                    } else if *a == 8 {
                        DType::C128
                    } else {
                        DType::Bool
                    };
                    if dtype == DType::Bool {
                        return Err(format!("complex numbers of {a}-byte floats are not supported"));
                    }
                    Ok(StoredDType { dtype, order: order(oa) })
                }
                _ => Err("compound types other than complex (two floats) are not supported".into()),
            }
        }
        Datatype::Enum { base, members }
            if matches!(**base, Datatype::FixedPoint { size: 1, .. })
                && members.len() == 2
                && members.iter().all(|m| m.name == "FALSE" || m.name == "TRUE") =>
        {
            Ok(StoredDType::le(DType::Bool))
        }
        other => Err(format!("element type {other:?} is not numeric")),
    }
}

/// Numeric datasets of 3 or 4 axes, with their shapes, in the whole file.
fn candidates(file: &Hdf5File) -> Result<Vec<(String, Vec<u64>)>, hdf5_reader::error::Error> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![("".to_owned(), file.root_group()?)];
    while let Some((prefix, group)) = stack.pop() {
        if !seen.insert(group.address()) || seen.len() > MAX_GROUPS {
            continue;
        }
        let (groups, datasets) = group.members()?;
        for ds in datasets {
            let name = format!("{prefix}/{}", ds.name().rsplit('/').next().unwrap_or(ds.name()));
            if (3..=4).contains(&ds.shape().len()) && stored_dtype(ds.dtype()).is_ok() {
                out.push((name, ds.shape().to_vec()));
            }
        }
        for g in groups {
            let name = format!("{prefix}/{}", g.name().rsplit('/').next().unwrap_or(g.name()));
            stack.push((name, g));
        }
    }
    out.sort();
    Ok(out)
}

fn list(candidates: &[(String, Vec<u64>)]) -> String {
    if candidates.is_empty() {
        return "; the file holds no 3-D or 4-D numeric dataset".into();
    }
    let names: Vec<String> = candidates.iter().map(|(n, s)| format!("{n} {s:?}")).collect();
    format!("; 3-D/4-D datasets in the file: {}", names.join(", "))
}

fn pick_dataset(path: &Path, file: &Hdf5File) -> Result<(String, hdf5_reader::Dataset), DatasetError> {
    let found = candidates(file).map_err(|e| h5_err(path, "reading the group tree", e))?;
    match found.as_slice() {
        [(name, _)] => {
            let ds = file.dataset(name).map_err(|e| h5_err(path, &format!("dataset '{name}'"), e))?;
            Ok((name.clone(), ds))
        }
        [] => Err(DatasetError::invalid(path, "the file holds no 3-D or 4-D numeric dataset; give --dataset-path")),
        many => Err(DatasetError::invalid(
            path,
            format!("{} candidate datasets; choose one with --dataset-path{}", many.len(), list(many)),
        )),
    }
}

impl Hdf5Dataset {
    /// Where the nav shape comes from, for `info`.
    pub fn nav_source(&self) -> &str {
        &self.nav_source
    }
}

/// Whether `bytes` (the start of a file) hold the HDF5 signature, at offset 0 or after a
/// user block (512, 1024, 2048, ... bytes).
pub fn sniff(bytes: &[u8]) -> bool {
    const SIGNATURE: &[u8] = b"\x89HDF\r\n\x1a\n";
    std::iter::once(0).chain((9..16).map(|k| 1usize << k)).any(|at| bytes.get(at..at + 8) == Some(SIGNATURE))
}

impl Dataset for Hdf5Dataset {
    fn shape(&self) -> &DatasetShape {
        &self.shape
    }

    fn stored_dtype(&self) -> StoredDType {
        self.stored
    }

    fn info(&self) -> DatasetInfo {
        let _ = &self.array_shape;
        DatasetInfo { format: "hdf5", path: self.path.clone(), details: self.details.clone() }
    }

    fn base_shape(&self) -> Vec<usize> {
        match &self.storage {
            Storage::Chunked(c) => c.sig_chunk().to_vec(),
            Storage::Contiguous(_) => {
                let mut base = vec![1; self.shape.sig.len()];
                if let (Some(last), Some(&w)) = (base.last_mut(), self.shape.sig.last()) {
                    *last = w;
                }
                base
            }
        }
    }

    fn read_tile(&self, frames: &[u64], sig: &SigSlice, dtype: DType, out: &mut [u8]) -> Result<(), DatasetError> {
        match &self.storage {
            Storage::Contiguous(m) => m.read_tile(frames, sig, dtype, out),
            Storage::Chunked(c) => c.read_tile(frames, sig, dtype, out).map_err(|e| match e {
                DatasetError::Invalid { path, message } => {
                    DatasetError::Invalid { path, message: format!("dataset '{}': {message}", self.dataset_path) }
                }
                other => other,
            }),
        }
    }

    fn direct_frames(&self, frames: std::ops::Range<u64>, dtype: DType) -> Option<&[u8]> {
        match &self.storage {
            Storage::Contiguous(m) => m.direct_frames(frames, dtype),
            Storage::Chunked(_) => None,
        }
    }
}
