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
//! | `dataset_path` | the dataset (`/entry/data/data`); default: the largest numeric stack of 3 or more axes (never a dimension scale or an RGB preview), else the largest 2-D one |
//! | `sig_shape` | the trailing axes that form a frame (default: the last two) |
//! | `nav_shape` | a reshape of the leading axes |

mod chunked;
pub mod filters;
mod lz4;
mod select;

use super::concat::Concat;
use super::mapped::{Access, map_file};
use super::registry::Opened;
use super::reshaped::ShapeHints;
use super::{Dataset, DatasetError, DatasetInfo, DatasetShape, MappedFrames, OpenOptions, SigSlice, reshape};
use crate::dtype::{ByteOrder, DType, StoredDType, converter};
use chunked::{ChunkEntry, ChunkedData};
use filters::Filter;
use hdf5_reader::messages::HdfMessage;
use hdf5_reader::messages::layout::{ChunkIndexing, DataLayout};
use hdf5_reader::{Datatype, Hdf5File};
pub use select::{Axes, Candidate, Located, link_candidates};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The most groups visited when looking for the dataset (cycles are skipped too).
const MAX_GROUPS: usize = 10_000;

/// One array of an HDF5 file as frames.
pub struct Hdf5Dataset {
    path: PathBuf,
    dataset_path: String,
    shape: DatasetShape,
    stored: StoredDType,
    storage: Storage,
    details: Vec<(String, String)>,
}

enum Storage {
    /// One block in the file with whole frames back to back, read like raw data.
    Contiguous(MappedFrames),
    /// One block in the file with the frame axes elsewhere (Velox, EMD, --sig-axes).
    Strided(Strided),
    /// Chunks, possibly filtered.
    Chunked(ChunkedData),
}

fn h5_err(path: &Path, what: &str, e: impl std::fmt::Display) -> DatasetError {
    DatasetError::invalid(path, format!("{what}: {e}"))
}

/// Open the HDF5 file at `path` (the dataset's, a linked data file, a sidecar): a
/// regular file ([`map_file`]: a FIFO is refused, not waited on), mapped read-only.
fn open_hdf5(path: &Path) -> Result<Hdf5File, DatasetError> {
    let map = map_file(path, Access::Random)?;
    Hdf5File::from_mmap_with_options(map, hdf5_reader::OpenOptions::default())
        .map_err(|e| h5_err(path, "not a readable HDF5 file", e))
}

/// Open the dataset of an HDF5 file that `options.dataset_path` names (a dataset, or the
/// group of a DECTRIS master file's numbered data files), or the only one there is.
///
/// # Errors
/// Not HDF5, no such dataset, several candidates (all numeric datasets are listed), an
/// external link that cannot be followed, an unsupported type, layout or filter.
pub(super) fn open(path: &Path, options: &OpenOptions) -> Result<Opened, DatasetError> {
    let file = open_hdf5(path)?;
    let wanted = options.dataset_path.as_deref().map(|p| format!("/{}", p.trim_matches('/')));
    let direct = wanted.as_deref().and_then(|p| select::direct(path, &file, p));
    let walk = match direct {
        Some(candidate) => select::Walk { candidates: vec![candidate], broken: Vec::new() },
        None => select::walk(path, &file).map_err(|e| h5_err(path, "reading the group tree", e))?,
    };
    let broken = if walk.broken.is_empty() {
        String::new()
    } else {
        format!("; external links that cannot be followed: {}", walk.broken.join(", "))
    };
    let (candidate, how) = match options.dataset_path.as_deref() {
        Some(p) => {
            let wanted = wanted.as_deref().unwrap_or("/");
            let found = walk.candidates.iter().find(|c| c.name == wanted);
            let candidate = found.cloned().ok_or_else(|| {
                h5_err(path, &format!("no dataset '{p}'"), format!("{}{broken}", select::listing(&walk.candidates)))
            })?;
            (candidate, "given by --dataset-path".to_owned())
        }
        None => pick(path, &walk, &broken)?,
    };
    // A series with a data file that cannot be read would be a dataset with frames
    // missing: refuse it rather than read the rest as if it were all.
    let group = format!("{}/", candidate.name.trim_end_matches('/'));
    if let Some(link) = walk.broken.iter().find(|b| candidate.series && b.starts_with(&group)) {
        return Err(DatasetError::invalid(
            path,
            format!("dataset '{}': a data file of the series cannot be read: {link}", candidate.name),
        ));
    }
    let stored = candidate
        .stored
        .clone()
        .map_err(|e| DatasetError::invalid(path, format!("dataset '{}': {e}", candidate.name)))?;
    if options.dtype.is_some_and(|d| d != stored) {
        return Err(DatasetError::invalid(
            path,
            format!(
                "dataset '{}': --dtype says {}, but the dataset holds {stored}",
                candidate.name,
                options.dtype.map_or_else(String::new, |d| d.to_string())
            ),
        ));
    }
    let ndim = candidate.shape.len();
    let (axes, axes_from) = match (&options.sig_axes, &candidate.layout) {
        (Some(sig), _) => (
            Axes::with_sig(ndim, sig)
                .map_err(|e| DatasetError::invalid(path, format!("dataset '{}': {e}", candidate.name)))?,
            "--sig-axes".to_owned(),
        ),
        (None, Some((axes, why))) if options.sig_shape.is_none() => (axes.clone(), why.clone()),
        (None, _) => (Axes::trailing(ndim), "the last two axes".to_owned()),
    };
    let mut details = vec![
        ("dataset".to_owned(), candidate.name.clone()),
        ("dataset_choice".into(), how),
        ("shape".into(), format!("{:?}", candidate.shape)),
        ("frame_axes".into(), format!("{:?} ({axes_from})", axes.sig)),
    ];
    if !candidate.series {
        let part = &candidate.parts[0];
        if part.file_path != path {
            details.push(("data_file".into(), format!("{}:{}", part.file_path.display(), part.path)));
        }
        let data = open_part(part, &candidate.name, stored, &axes, options, true, details)?;
        let nav_source = if options.nav_shape.is_some() {
            "--nav-shape".to_owned()
        } else {
            format!("the shape of dataset '{}'", candidate.name)
        };
        let hints = ShapeHints { nav_source: Some(nav_source), ..ShapeHints::reshaped() };
        return Ok((Arc::new(data), hints));
    }
    // A series of data files: frames joined in file order; the scan shape from the
    // acquisition's metadata.
    details.push((
        "data_files".into(),
        candidate.parts.iter().map(|p| p.file_path.display().to_string()).collect::<Vec<_>>().join(", "),
    ));
    let mut parts: Vec<Arc<dyn Dataset>> = Vec::new();
    for part in &candidate.parts {
        let flat = OpenOptions { nav_shape: None, sig_shape: None, ..options.clone() };
        let name = format!("{}:{}", part.file_path.display(), part.path);
        parts.push(Arc::new(open_part(part, &name, stored, &axes, &flat, false, Vec::new())?));
    }
    let info = DatasetInfo { format: "hdf5", path: path.to_owned(), details };
    let data: Arc<dyn Dataset> = Arc::new(Concat::new(parts, info)?);
    let mut hints = ShapeHints::default();
    if let Some((nav, source)) = select::dectris_scan(path, &file, data.shape().nav_len() as u64) {
        hints.nav = Some(nav);
        hints.nav_source = Some(source);
    }
    Ok((data, hints))
}

/// The only frame stack of the file: numeric, 3-D or more (else the only 2-D array),
/// not an RGB preview, not a member of a series that is offered whole.
/// The dataset to read when none is named: never a dimension scale, an RGB preview or
/// one file of a series; the largest stack of 3 or more axes, else the largest 2-D
/// dataset (a single frame). Two of the same largest size are ambiguous (an error that
/// lists them). Returns the choice and how it was made (with the others one could name).
fn pick(path: &Path, walk: &select::Walk, broken: &str) -> Result<(Candidate, String), DatasetError> {
    let series_groups: Vec<&str> = walk.candidates.iter().filter(|c| c.series).map(|c| c.name.as_str()).collect();
    let member = |c: &Candidate| {
        !c.series
            && c.name.rsplit_once('/').is_some_and(|(parent, n)| {
                n.starts_with("data_") && series_groups.iter().any(|g| *g == parent || (parent.is_empty() && *g == "/"))
            })
    };
    let usable = |c: &&Candidate, rank: usize| {
        c.stored.is_ok()
            && c.shape.len() >= rank
            && (rank > 2 || c.shape.len() == 2)
            && !c.is_preview()
            && !c.dimension_scale
            && !member(c)
    };
    let stacks: Vec<&Candidate> = walk.candidates.iter().filter(|c| usable(c, 3)).collect();
    let mut found = if stacks.is_empty() { walk.candidates.iter().filter(|c| usable(c, 2)).collect() } else { stacks };
    found.sort_by_key(|c| std::cmp::Reverse(c.elements()));
    match found.as_slice() {
        [] => Err(DatasetError::invalid(
            path,
            format!(
                "the file holds no frame stack (a numeric dataset of 2 or more axes that is not an RGB preview \
                 or a dimension scale); give --dataset-path{}{broken}",
                select::listing(&walk.candidates)
            ),
        )),
        [first, second, ..] if first.elements() == second.elements() => {
            let tied: Vec<&str> =
                found.iter().filter(|c| c.elements() == first.elements()).map(|c| c.name.as_str()).collect();
            Err(DatasetError::invalid(
                path,
                format!(
                    "{} candidate datasets of the same size ({}); choose one with --dataset-path{}{broken}",
                    tied.len(),
                    tied.join(", "),
                    select::listing(&walk.candidates)
                ),
            ))
        }
        [one] => Ok(((*one).clone(), "chosen automatically (the only frame stack in the file)".into())),
        [largest, others @ ..] => {
            let others: Vec<String> = others.iter().map(|c| c.summary()).collect();
            let how = format!(
                "chosen automatically (the largest of {} frame stacks; the others: {}; choose with --dataset-path)",
                others.len() + 1,
                others.join(", ")
            );
            Ok(((*largest).clone(), how))
        }
    }
}

/// One array as frames: its storage, the frame axes `axes`, the shape options applied
/// when `reshape_options` (a single array), else flat frames (a part of a series).
fn open_part(
    part: &Located,
    name: &str,
    stored: StoredDType,
    axes: &Axes,
    options: &OpenOptions,
    reshape_options: bool,
    mut details: Vec<(String, String)>,
) -> Result<Hdf5Dataset, DatasetError> {
    let path = part.file_path.as_path();
    let file = &part.file;
    let ds = &part.dataset;
    let at = |msg: String| DatasetError::invalid(path, format!("dataset '{name}': {msg}"));
    let file_len =
        std::fs::metadata(path).map_err(|source| DatasetError::Open { path: path.to_owned(), source })?.len();
    let array_shape = ds.shape().to_vec();
    let dims: Vec<usize> = array_shape
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| at(format!("axis of {d} elements is too large"))))
        .collect::<Result<_, _>>()?;
    // The logical array: scan axes then frame axes.
    let logical: Vec<usize> = axes.nav.iter().chain(&axes.sig).map(|&a| dims[a]).collect();
    let trailing = axes.is_trailing();
    let sig_shape = if trailing { options.sig_shape.as_deref() } else { None };
    let (nav_opt, sig_opt) = if reshape_options { (options.nav_shape.as_deref(), sig_shape) } else { (None, None) };
    let logical_sig: Vec<usize> = axes.sig.iter().map(|&a| dims[a]).collect();
    let shape = if trailing {
        reshape(path, &logical, nav_opt, sig_opt.or(Some(&logical_sig)))
    } else {
        if reshape_options && options.sig_shape.as_ref().is_some_and(|s| *s != logical_sig) {
            return Err(at(format!("--sig-shape cannot reshape frames whose axes are {:?} of the array", axes.sig)));
        }
        reshape(path, &logical, nav_opt, Some(&logical_sig))
    }
    .map_err(|e| at(strip_path(path, &e.to_string())))?;

    let (layout, filters) = layout_and_filters(file, ds).map_err(at)?;
    let elem = stored.dtype.size();
    let sb = file.superblock();
    let undefined =
        |a: u64| a == u64::MAX || (sb.offset_size < 8 && a == (1u64 << (8 * u32::from(sb.offset_size))) - 1);
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
            if trailing {
                let frame_bytes = shape.sig_len() * elem;
                let frames = MappedFrames::open(path, address, frame_bytes, stored, shape.clone()).map_err(|e| {
                    at(format!("contiguous data at offset {address}: {}", strip_path(path, &e.to_string())))
                })?;
                Storage::Contiguous(frames)
            } else {
                Storage::Strided(Strided::open(path, address, &dims, axes.clone(), stored).map_err(at)?)
            }
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
            if trailing && (dims.len() < sig_dims || dims[dims.len() - sig_dims..] != shape.sig[..]) {
                return Err(at(format!(
                    "for chunked data the frame must be the last axes of the dataset {dims:?}; --sig-shape {:?} is not",
                    shape.sig
                )));
            }
            let chunk_axes = if trailing {
                Axes { nav: (0..dims.len() - sig_dims).collect(), sig: (dims.len() - sig_dims..dims.len()).collect() }
            } else {
                axes.clone()
            };
            for f in &filters {
                f.supported().map_err(at)?;
            }
            let entries = if undefined(address) {
                Vec::new()
            } else {
                chunk_entries(file, address, chunk_indexing.as_ref(), &array_shape, ds.max_dims(), &chunk_dims, elem)
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
            Storage::Chunked(ChunkedData::new(
                path, file_len, dims, chunks, chunk_axes, stored, filters, entries, fill,
            )?)
        }
    };
    Ok(Hdf5Dataset { path: path.to_owned(), dataset_path: name.to_owned(), shape, stored, storage, details })
}

/// The storage layout and the filter pipeline from a dataset's object header.
///
/// # Errors
/// The header cannot be read or has no layout message.
fn layout_and_filters(file: &Hdf5File, ds: &hdf5_reader::Dataset) -> Result<(DataLayout, Vec<Filter>), String> {
    let header = file.get_or_parse_header(ds.address()).map_err(|e| format!("object header: {e}"))?;
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
    let layout = layout.ok_or("the object header has no data layout message")?;
    Ok((layout, filters))
}

/// A contiguous array whose frame axes are not its last axes in order: every tile
/// element is gathered at its stride (Velox stacks, transposed EMD arrays, --sig-axes).
struct Strided {
    path: PathBuf,
    map: memmap2::Mmap,
    offset: usize,
    /// Element strides of the array axes.
    strides: Vec<usize>,
    dims: Vec<usize>,
    axes: Axes,
    stored: StoredDType,
}

impl Strided {
    fn open(path: &Path, offset: usize, dims: &[usize], axes: Axes, stored: StoredDType) -> Result<Self, String> {
        let map = map_file(path, Access::Random).map_err(|e| e.to_string())?;
        let n = dims.len();
        let mut strides = vec![1usize; n];
        for a in (0..n.saturating_sub(1)).rev() {
            strides[a] = strides[a + 1].checked_mul(dims[a + 1]).ok_or("the array is too large")?;
        }
        let elems = dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)).ok_or("the array is too large")?;
        let needed = elems
            .checked_mul(stored.dtype.size())
            .and_then(|b| b.checked_add(offset))
            .ok_or("the array is too large")?;
        if map.len() < needed {
            return Err(format!(
                "truncated: the array of {dims:?} at offset {offset} needs {needed} bytes, the file has {}",
                map.len()
            ));
        }
        Ok(Strided { path: path.to_owned(), map, offset, strides, dims: dims.to_vec(), axes, stored })
    }

    fn read_tile(&self, frames: &[u64], sig: &SigSlice, dtype: DType, out: &mut [u8]) -> Result<(), DatasetError> {
        let frame_out = sig.len() * dtype.size();
        if out.len() != frames.len() * frame_out {
            return Err(DatasetError::invalid(&self.path, "internal: tile buffer of the wrong size"));
        }
        let nav_len: u64 = self.axes.nav.iter().map(|&a| self.dims[a] as u64).product();
        if let Some(&bad) = frames.iter().find(|&&f| f >= nav_len) {
            return Err(DatasetError::invalid(&self.path, format!("frame {bad} is outside the dataset")));
        }
        let convert = converter(self.stored, dtype);
        let size = self.stored.dtype.size();
        let sig_strides: Vec<usize> = self.axes.sig.iter().map(|&a| self.strides[a]).collect();
        let mut gathered = Vec::with_capacity(sig.len() * size);
        for (dst, &f) in out.chunks_exact_mut(frame_out.max(1)).zip(frames) {
            let mut rem = f as usize;
            let mut base = 0usize;
            for &a in self.axes.nav.iter().rev() {
                base += (rem % self.dims[a]) * self.strides[a];
                rem /= self.dims[a];
            }
            gathered.clear();
            let k = sig.shape.len();
            let total: usize = sig.len();
            let mut idx = vec![0usize; k];
            for _ in 0..total {
                let e = base + (0..k).map(|i| (sig.origin[i] + idx[i]) * sig_strides[i]).sum::<usize>();
                let at = self.offset + e * size;
                gathered.extend_from_slice(&self.map[at..at + size]);
                for i in (0..k).rev() {
                    idx[i] += 1;
                    if idx[i] < sig.shape[i] {
                        break;
                    }
                    idx[i] = 0;
                }
            }
            convert(&gathered, dst);
        }
        Ok(())
    }
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
        DatasetInfo { format: "hdf5", path: self.path.clone(), details: self.details.clone() }
    }

    fn base_shape(&self) -> Vec<usize> {
        match &self.storage {
            Storage::Chunked(c) => c.sig_chunk(),
            Storage::Contiguous(_) | Storage::Strided(_) => {
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
            Storage::Strided(m) => m.read_tile(frames, sig, dtype, out),
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
            Storage::Strided(_) | Storage::Chunked(_) => None,
        }
    }
}
