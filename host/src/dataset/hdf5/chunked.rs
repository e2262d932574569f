//! Chunked HDF5 data: the chunk grid, a cache of decoded chunks, and the copy of the
//! parts of chunks a tile covers into the tile, converting the dtype on the way.
//!
//! Unfiltered chunks are read straight from the memory-mapped file; filtered chunks are
//! decoded once into the cache (LRU, bounded in bytes) and copied from there, so a tile
//! scheme that cuts a chunk into several signal slices decodes it only once.

use super::filters::{self, Filter};
use crate::dataset::mapped::{Access, map_file};
use crate::dataset::{DatasetError, SigSlice};
use crate::dtype::{DType, StoredDType, converter};
use memmap2::Mmap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Chunk-grid cells beyond which the dense index would be wasteful.
const MAX_GRID_CELLS: usize = 1 << 28;
/// Decoded chunks kept at least (bytes).
const MIN_CACHE_BYTES: usize = 256 << 20;
/// The largest chunk accepted (bytes, decoded).
const MAX_CHUNK_BYTES: usize = 1 << 30;

/// One stored chunk, as the chunk index lists it.
#[derive(Debug, Clone)]
pub struct ChunkEntry {
    pub address: u64,
    /// Bytes on disk (0: unfiltered, the full chunk size).
    pub size: u64,
    pub filter_mask: u32,
    /// Element coordinates of the chunk's first element.
    pub offsets: Vec<u64>,
}

/// A chunked dataset: the grid and where each chunk is.
pub struct ChunkedData {
    path: PathBuf,
    map: Mmap,
    /// Dataset shape (all axes).
    dims: Vec<usize>,
    /// Chunk shape (all axes).
    chunk: Vec<usize>,
    /// Chunks per axis.
    grid: Vec<usize>,
    /// Trailing axes that form a frame.
    sig_dims: usize,
    stored: StoredDType,
    filters: Vec<Filter>,
    /// Per grid cell (C order): index into `entries`, or `u32::MAX` when not stored.
    cells: Vec<u32>,
    entries: Vec<ChunkEntry>,
    /// One element of the fill value.
    fill: Vec<u8>,
    /// A whole chunk of the fill value, for chunks never written (made when needed).
    fill_chunk: std::sync::OnceLock<Arc<Vec<u8>>>,
    chunk_bytes: usize,
    cache: Mutex<Lru>,
}

impl ChunkedData {
    /// Check the chunk index against the file and build the grid.
    ///
    /// # Errors
    /// A chunk outside the dataset or the file, or off the chunk grid; a grid too large.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        path: &Path,
        file_len: u64,
        dims: Vec<usize>,
        chunk: Vec<usize>,
        sig_dims: usize,
        stored: StoredDType,
        filters: Vec<Filter>,
        entries: Vec<ChunkEntry>,
        fill: Option<Vec<u8>>,
    ) -> Result<Self, DatasetError> {
        let bad = |m: String| DatasetError::invalid(path, m);
        let elem = stored.dtype.size();
        let grid: Vec<usize> = dims.iter().zip(&chunk).map(|(&d, &c)| d.div_ceil(c)).collect();
        let cells_n = grid.iter().try_fold(1usize, |a, &g| a.checked_mul(g)).filter(|&n| n <= MAX_GRID_CELLS);
        let cells_n = cells_n.ok_or_else(|| bad(format!("a grid of {grid:?} chunks is too large")))?;
        let chunk_bytes = chunk
            .iter()
            .try_fold(elem, |a, &c| a.checked_mul(c))
            .filter(|&n| n <= MAX_CHUNK_BYTES)
            .ok_or_else(|| bad(format!("chunk shape {chunk:?} is larger than {MAX_CHUNK_BYTES} bytes")))?;
        let mut cells = vec![u32::MAX; cells_n];
        let mut kept = Vec::with_capacity(entries.len());
        for mut e in entries {
            let cell = cell_of(&e.offsets, &dims, &chunk, &grid).ok_or_else(|| {
                bad(format!(
                    "chunk at offset {} has coordinates {:?}, which are not on the chunk grid {chunk:?} of shape {dims:?}",
                    e.address, e.offsets
                ))
            })?;
            let unfiltered = filters.is_empty() || (0..filters.len()).all(|i| i < 32 && e.filter_mask & (1 << i) != 0);
            if unfiltered && e.size == 0 {
                e.size = chunk_bytes as u64;
            }
            if unfiltered && e.size < chunk_bytes as u64 {
                return Err(bad(format!(
                    "chunk at offset {} holds {} bytes, but an unfiltered chunk of {chunk:?} needs {chunk_bytes}",
                    e.address, e.size
                )));
            }
            let end = e.address.checked_add(e.size);
            if end.is_none_or(|end| end > file_len) {
                return Err(bad(format!(
                    "chunk at offset {} of {} bytes runs past the end of the file ({file_len} bytes); truncated?",
                    e.address, e.size
                )));
            }
            if cells[cell] != u32::MAX {
                return Err(bad(format!("two chunks at coordinates {:?} (offset {})", e.offsets, e.address)));
            }
            cells[cell] = kept.len() as u32;
            kept.push(e);
        }
        let map = map_file(path, Access::Random)?;
        let fill = fill.unwrap_or_else(|| vec![0; elem]);
        let cores = std::thread::available_parallelism().map_or(4, |n| n.get());
        let capacity = MIN_CACHE_BYTES.max(4 * cores * chunk_bytes);
        Ok(ChunkedData {
            path: path.to_owned(),
            map,
            dims,
            chunk,
            grid,
            sig_dims,
            stored,
            filters,
            cells,
            entries: kept,
            fill,
            fill_chunk: std::sync::OnceLock::new(),
            chunk_bytes,
            cache: Mutex::new(Lru::new(capacity)),
        })
    }

    /// The chunk shape of the frame axes (the natural tile block).
    pub fn sig_chunk(&self) -> &[usize] {
        &self.chunk[self.chunk.len() - self.sig_dims..]
    }

    /// The bytes of grid cell `cell`: mapped, decoded (cached) or fill.
    fn chunk_data(&self, cell: usize) -> Result<ChunkBytes<'_>, DatasetError> {
        let index = self.cells[cell];
        if index == u32::MAX {
            let chunk = self
                .fill_chunk
                .get_or_init(|| Arc::new(self.fill.iter().copied().cycle().take(self.chunk_bytes).collect()));
            return Ok(ChunkBytes::Owned(chunk.clone()));
        }
        let e = &self.entries[index as usize];
        let start = e.address as usize;
        let raw = &self.map[start..start + e.size as usize];
        let unfiltered =
            self.filters.is_empty() || (0..self.filters.len()).all(|i| i < 32 && e.filter_mask & (1 << i) != 0);
        if unfiltered {
            return Ok(ChunkBytes::Mapped(&raw[..self.chunk_bytes]));
        }
        if let Some(hit) = self.cache.lock().map_err(|_| self.poisoned())?.get(cell) {
            return Ok(ChunkBytes::Owned(hit));
        }
        let decoded = filters::decode(&self.filters, e.filter_mask, raw, self.stored.dtype.size(), self.chunk_bytes)
            .map_err(|m| {
                DatasetError::invalid(
                    &self.path,
                    format!("chunk {:?} at offset {} ({} bytes): {m}", e.offsets, e.address, e.size),
                )
            })?;
        let decoded = Arc::new(decoded);
        self.cache.lock().map_err(|_| self.poisoned())?.put(cell, decoded.clone(), self.chunk_bytes);
        Ok(ChunkBytes::Owned(decoded))
    }

    fn poisoned(&self) -> DatasetError {
        DatasetError::invalid(&self.path, "internal: chunk cache lock poisoned by a panic")
    }

    /// See [`Dataset::read_tile`](crate::dataset::Dataset::read_tile).
    pub fn read_tile(&self, frames: &[u64], sig: &SigSlice, dtype: DType, out: &mut [u8]) -> Result<(), DatasetError> {
        let dst_size = dtype.size();
        let src_size = self.stored.dtype.size();
        let slice_len = sig.len();
        if out.len() != frames.len() * slice_len * dst_size {
            return Err(DatasetError::invalid(&self.path, "internal: tile buffer of the wrong size"));
        }
        let nd = self.dims.len();
        let nav_axes = nd - self.sig_dims;
        let nav_len: u64 = self.dims[..nav_axes].iter().map(|&d| d as u64).product();
        if let Some(&bad) = frames.iter().find(|&&f| f >= nav_len) {
            return Err(DatasetError::invalid(&self.path, format!("frame {bad} is outside the dataset")));
        }
        let convert = converter(self.stored, dtype);
        let sig_chunk = self.sig_chunk();
        let sig_grid = &self.grid[nav_axes..];
        // The chunks (per signal axis) the slice touches.
        let first: Vec<usize> = sig.origin.iter().zip(sig_chunk).map(|(&o, &c)| o / c).collect();
        let last: Vec<usize> =
            sig.origin.iter().zip(&sig.shape).zip(sig_chunk).map(|((&o, &s), &c)| (o + s.max(1) - 1) / c).collect();
        let counts: Vec<usize> = first.iter().zip(&last).map(|(&f, &l)| l - f + 1).collect();
        let touched: usize = counts.iter().product();
        let chunk_sig_len: usize = sig_chunk.iter().product();

        let mut nav = vec![0usize; nav_axes];
        let mut sig_cell = vec![0usize; self.sig_dims];
        for (fi, &frame) in frames.iter().enumerate() {
            // Nav coordinates of the frame, its chunk cell and position inside the chunk.
            let mut rem = frame as usize;
            for a in (0..nav_axes).rev() {
                nav[a] = rem % self.dims[a];
                rem /= self.dims[a];
            }
            let mut nav_cell = 0usize;
            let mut local_nav = 0usize;
            for (a, &n) in nav.iter().enumerate() {
                nav_cell = nav_cell * self.grid[a] + n / self.chunk[a];
                local_nav = local_nav * self.chunk[a] + n % self.chunk[a];
            }
            let frame_out = &mut out[fi * slice_len * dst_size..(fi + 1) * slice_len * dst_size];
            for k in 0..touched {
                let mut r = k;
                for a in (0..self.sig_dims).rev() {
                    sig_cell[a] = first[a] + r % counts[a];
                    r /= counts[a];
                }
                let mut cell = nav_cell;
                for a in 0..self.sig_dims {
                    cell = cell * sig_grid[a] + sig_cell[a];
                }
                let data = self.chunk_data(cell)?;
                let bytes = data.bytes();
                // The box where chunk and slice overlap, in frame coordinates.
                let mut lo = vec![0usize; self.sig_dims];
                let mut extent = vec![0usize; self.sig_dims];
                for a in 0..self.sig_dims {
                    let c0 = sig_cell[a] * sig_chunk[a];
                    let c1 = c0 + sig_chunk[a];
                    lo[a] = sig.origin[a].max(c0);
                    extent[a] = (sig.origin[a] + sig.shape[a]).min(c1) - lo[a];
                }
                let src_origin: Vec<usize> =
                    lo.iter().zip(sig_cell.iter().zip(sig_chunk)).map(|(&l, (&g, &c))| l - g * c).collect();
                let dst_origin: Vec<usize> = lo.iter().zip(&sig.origin).map(|(&l, &o)| l - o).collect();
                let src_base = local_nav * chunk_sig_len;
                copy_box(
                    &bytes[src_base * src_size..(src_base + chunk_sig_len) * src_size],
                    sig_chunk,
                    &src_origin,
                    frame_out,
                    &sig.shape,
                    &dst_origin,
                    &extent,
                    src_size,
                    dst_size,
                    convert,
                );
            }
        }
        Ok(())
    }
}

/// Grid cell of a chunk whose first element is at `offsets`, if it is on the grid.
fn cell_of(offsets: &[u64], dims: &[usize], chunk: &[usize], grid: &[usize]) -> Option<usize> {
    if offsets.len() != dims.len() {
        return None;
    }
    let mut cell = 0usize;
    for a in 0..dims.len() {
        let o = usize::try_from(offsets[a]).ok()?;
        if o >= dims[a] || !o.is_multiple_of(chunk[a]) {
            return None;
        }
        cell = cell * grid[a] + o / chunk[a];
    }
    Some(cell)
}

enum ChunkBytes<'a> {
    Mapped(&'a [u8]),
    Owned(Arc<Vec<u8>>),
}

impl ChunkBytes<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            ChunkBytes::Mapped(b) => b,
            ChunkBytes::Owned(v) => v,
        }
    }
}

/// Copy (converting) the box `extent` at `src_origin` of a C-order array of shape
/// `src_shape` to `dst_origin` of one of shape `dst_shape`; trailing axes that both
/// cover fully are merged into one run.
#[allow(clippy::too_many_arguments)]
fn copy_box(
    src: &[u8],
    src_shape: &[usize],
    src_origin: &[usize],
    dst: &mut [u8],
    dst_shape: &[usize],
    dst_origin: &[usize],
    extent: &[usize],
    src_size: usize,
    dst_size: usize,
    convert: crate::dtype::ConvertFn,
) {
    let n = extent.len();
    if n == 0 {
        convert(&src[..src_size], &mut dst[..dst_size]);
        return;
    }
    let strides = |shape: &[usize]| {
        let mut s = vec![1usize; n];
        for a in (0..n - 1).rev() {
            s[a] = s[a + 1] * shape[a + 1];
        }
        s
    };
    let ss = strides(src_shape);
    let ds = strides(dst_shape);
    let mut d = n - 1;
    let mut run = extent[d];
    while d > 0 && extent[d] == src_shape[d] && extent[d] == dst_shape[d] {
        d -= 1;
        run *= extent[d];
    }
    let src0: usize = src_origin.iter().zip(&ss).map(|(&o, &s)| o * s).sum();
    let dst0: usize = dst_origin.iter().zip(&ds).map(|(&o, &s)| o * s).sum();
    let outer: usize = extent[..d].iter().product();
    let mut idx = vec![0usize; d];
    for _ in 0..outer {
        let so = src0 + idx.iter().zip(&ss).map(|(&i, &s)| i * s).sum::<usize>();
        let dof = dst0 + idx.iter().zip(&ds).map(|(&i, &s)| i * s).sum::<usize>();
        convert(&src[so * src_size..(so + run) * src_size], &mut dst[dof * dst_size..(dof + run) * dst_size]);
        for a in (0..d).rev() {
            idx[a] += 1;
            if idx[a] < extent[a] {
                break;
            }
            idx[a] = 0;
        }
    }
}

/// A least-recently-used cache of decoded chunks, bounded in bytes.
struct Lru {
    capacity: usize,
    used: usize,
    tick: u64,
    entries: Vec<(usize, Arc<Vec<u8>>, u64)>,
}

impl Lru {
    fn new(capacity: usize) -> Self {
        Lru { capacity, used: 0, tick: 0, entries: Vec::new() }
    }

    fn get(&mut self, cell: usize) -> Option<Arc<Vec<u8>>> {
        self.tick += 1;
        let tick = self.tick;
        self.entries.iter_mut().find(|e| e.0 == cell).map(|e| {
            e.2 = tick;
            e.1.clone()
        })
    }

    fn put(&mut self, cell: usize, data: Arc<Vec<u8>>, bytes: usize) {
        if self.entries.iter().any(|e| e.0 == cell) {
            return;
        }
        while self.used + bytes > self.capacity && !self.entries.is_empty() {
            let oldest = self.entries.iter().enumerate().min_by_key(|(_, e)| e.2).map_or(0, |(i, _)| i);
            self.entries.swap_remove(oldest);
            self.used -= bytes;
        }
        self.tick += 1;
        self.entries.push((cell, data, self.tick));
        self.used += bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;

    #[test]
    fn copy_box_merges_full_rows_and_cuts_partial_ones() {
        let src: Vec<u8> = (0..24).collect(); // 4 x 6 chunk of u8
        let mut dst = vec![0u8; 3 * 5];
        let convert = converter(StoredDType::le(DType::U8), DType::U8);
        // Chunk rows 1..3, cols 2..5 to dst (3 x 5) at (1, 1).
        copy_box(&src, &[4, 6], &[1, 2], &mut dst, &[3, 5], &[1, 1], &[2, 3], 1, 1, convert);
        assert_eq!(dst, vec![0, 0, 0, 0, 0, 0, 8, 9, 10, 0, 0, 14, 15, 16, 0]);
        let mut whole = vec![0u8; 24];
        copy_box(&src, &[4, 6], &[0, 0], &mut whole, &[4, 6], &[0, 0], &[4, 6], 1, 1, convert);
        assert_eq!(whole, src);
    }

    #[test]
    fn lru_evicts_the_oldest() {
        let mut lru = Lru::new(2);
        lru.put(1, Arc::new(vec![1]), 1);
        lru.put(2, Arc::new(vec![2]), 1);
        assert!(lru.get(1).is_some());
        lru.put(3, Arc::new(vec![3]), 1);
        assert!(lru.get(2).is_none() && lru.get(1).is_some() && lru.get(3).is_some());
    }

    #[test]
    fn off_grid_chunks_are_rejected() {
        assert_eq!(cell_of(&[2, 4], &[5, 8], &[2, 4], &[3, 2]), Some(3));
        assert_eq!(cell_of(&[1, 4], &[5, 8], &[2, 4], &[3, 2]), None);
        assert_eq!(cell_of(&[6, 0], &[5, 8], &[2, 4], &[3, 2]), None);
        assert_eq!(cell_of(&[0], &[5, 8], &[2, 4], &[3, 2]), None);
    }
}
