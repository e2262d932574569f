//! Chunked HDF5 data: the chunk grid, a cache of decoded chunks, and the copy of the
//! parts of chunks a tile covers into the tile, converting the dtype on the way.
//!
//! Unfiltered chunks are read straight from the memory-mapped file; filtered chunks are
//! decoded once into the cache (LRU, bounded in bytes) and copied from there, so a tile
//! scheme that cuts a chunk into several signal slices decodes it only once.

use super::Axes;
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
/// Decoded chunks kept at most (bytes), however many cores and however large the chunks
/// a file declares: with the chunk a reading thread holds, the decoded data in memory is
/// at most this plus one chunk per thread.
const MAX_CACHE_BYTES: usize = 1 << 30;
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
    /// The array axes of the scan, in nav order (C order over them is the frame index).
    nav_axes: Vec<usize>,
    /// The array axes of a frame, in frame order.
    sig_axes: Vec<usize>,
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
        axes: Axes,
        stored: StoredDType,
        filters: Vec<Filter>,
        entries: Vec<ChunkEntry>,
        fill: Option<Vec<u8>>,
    ) -> Result<Self, DatasetError> {
        let bad = |m: String| DatasetError::invalid(path, m);
        let elem = stored.dtype.size();
        filters::check_params(&filters, elem).map_err(bad)?;
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
        let capacity = cores.saturating_mul(4).saturating_mul(chunk_bytes).clamp(MIN_CACHE_BYTES, MAX_CACHE_BYTES);
        Ok(ChunkedData {
            path: path.to_owned(),
            map,
            dims,
            chunk,
            grid,
            nav_axes: axes.nav,
            sig_axes: axes.sig,
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

    /// The chunk shape of the frame axes, in frame order (the natural tile block).
    pub fn sig_chunk(&self) -> Vec<usize> {
        self.sig_axes.iter().map(|&a| self.chunk[a]).collect()
    }

    /// Whether grid cell `cell` is stored filtered (decoding needed).
    fn filtered(&self, cell: usize) -> bool {
        let index = self.cells[cell];
        index != u32::MAX && {
            let mask = self.entries[index as usize].filter_mask;
            !self.filters.is_empty() && (0..self.filters.len()).any(|i| i >= 32 || mask & (1 << i) == 0)
        }
    }

    /// Decode grid cell `cell` (filtered, not cached) into `scratch`.
    fn decode_into(&self, cell: usize, scratch: &mut Vec<u8>) -> Result<(), DatasetError> {
        let e = &self.entries[self.cells[cell] as usize];
        let raw = &self.map[e.address as usize..(e.address + e.size) as usize];
        filters::decode_into(&self.filters, e.filter_mask, raw, self.stored.dtype.size(), self.chunk_bytes, scratch)
            .map_err(|m| {
                DatasetError::invalid(
                    &self.path,
                    format!("chunk {:?} at offset {} ({} bytes): {m}", e.offsets, e.address, e.size),
                )
            })
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
        self.cache.lock().map_err(|_| self.poisoned())?.put(cell, decoded.clone());
        Ok(ChunkBytes::Owned(decoded))
    }

    fn poisoned(&self) -> DatasetError {
        DatasetError::invalid(&self.path, "internal: chunk cache lock poisoned by a panic")
    }

    /// See [`Dataset::read_tile`](crate::dataset::Dataset::read_tile).
    ///
    /// Frames are filled in parallel (rayon) when chunks must be decoded. A chunk that
    /// holds one frame's part and is used whole by the tile is decoded into a
    /// per-thread buffer and converted straight into the tile (no cache): the usual case
    /// of DECTRIS-style one-frame chunks. Other chunks go through the decoded-chunk cache.
    pub fn read_tile(&self, frames: &[u64], sig: &SigSlice, dtype: DType, out: &mut [u8]) -> Result<(), DatasetError> {
        let frame_out = sig.len() * dtype.size();
        if out.len() != frames.len() * frame_out {
            return Err(DatasetError::invalid(&self.path, "internal: tile buffer of the wrong size"));
        }
        let nav_len: u64 = self.nav_axes.iter().map(|&a| self.dims[a] as u64).product();
        if let Some(&bad) = frames.iter().find(|&&f| f >= nav_len) {
            return Err(DatasetError::invalid(&self.path, format!("frame {bad} is outside the dataset")));
        }
        let convert = converter(self.stored, dtype);
        let parallel = frames.len() > 1 && !self.filters.is_empty() && frame_out > 0;
        if parallel {
            use rayon::prelude::*;
            out.par_chunks_mut(frame_out)
                .zip(frames.par_iter())
                .try_for_each_init(Vec::new, |scratch, (dst, &f)| self.read_frame(f, sig, dtype, convert, dst, scratch))
        } else {
            let mut scratch = Vec::new();
            for (dst, &f) in out.chunks_exact_mut(frame_out.max(1)).zip(frames) {
                self.read_frame(f, sig, dtype, convert, dst, &mut scratch)?;
            }
            Ok(())
        }
    }

    /// One frame's part `sig` into `dst`.
    fn read_frame(
        &self,
        frame: u64,
        sig: &SigSlice,
        dtype: DType,
        convert: crate::dtype::ConvertFn,
        dst: &mut [u8],
        scratch: &mut Vec<u8>,
    ) -> Result<(), DatasetError> {
        let nd = self.dims.len();
        let src_size = self.stored.dtype.size();
        // The frame's coordinate and chunk cell along each nav axis.
        let mut grid_index = vec![0usize; nd];
        let mut local = vec![0usize; nd];
        let mut rem = frame as usize;
        for &a in self.nav_axes.iter().rev() {
            let c = rem % self.dims[a];
            rem /= self.dims[a];
            grid_index[a] = c / self.chunk[a];
            local[a] = c % self.chunk[a];
        }
        let one_frame_chunks = self.nav_axes.iter().all(|&a| self.chunk[a] == 1);
        // Element strides inside a chunk (C order over the array axes).
        let mut cstride = vec![1usize; nd];
        for a in (0..nd.saturating_sub(1)).rev() {
            cstride[a] = cstride[a + 1] * self.chunk[a + 1];
        }
        let nav_base: usize = self.nav_axes.iter().map(|&a| local[a] * cstride[a]).sum();
        let sig_strides: Vec<usize> = self.sig_axes.iter().map(|&a| cstride[a]).collect();
        // The chunks (per signal axis) the slice touches.
        let k = self.sig_axes.len();
        let sig_chunk = self.sig_chunk();
        let first: Vec<usize> = sig.origin.iter().zip(&sig_chunk).map(|(&o, &c)| o / c).collect();
        let last: Vec<usize> =
            sig.origin.iter().zip(&sig.shape).zip(&sig_chunk).map(|((&o, &s), &c)| (o + s.max(1) - 1) / c).collect();
        let counts: Vec<usize> = first.iter().zip(&last).map(|(&f, &l)| l - f + 1).collect();
        let touched: usize = counts.iter().product();
        let mut cell_sig = vec![0usize; k];
        let (mut lo, mut extent) = (vec![0usize; k], vec![0usize; k]);
        for t in 0..touched {
            let mut r = t;
            for i in (0..k).rev() {
                cell_sig[i] = first[i] + r % counts[i];
                r /= counts[i];
            }
            for (i, &a) in self.sig_axes.iter().enumerate() {
                grid_index[a] = cell_sig[i];
            }
            let cell = grid_index.iter().zip(&self.grid).fold(0usize, |acc, (&g, &n)| acc * n + g);
            // The box where chunk and slice overlap, in frame coordinates.
            let mut whole = one_frame_chunks;
            for i in 0..k {
                let c0 = cell_sig[i] * sig_chunk[i];
                let c1 = (c0 + sig_chunk[i]).min(self.dims[self.sig_axes[i]]);
                lo[i] = sig.origin[i].max(c0);
                extent[i] = (sig.origin[i] + sig.shape[i]).min(c1) - lo[i];
                whole &= lo[i] == c0 && lo[i] + extent[i] == c1;
            }
            let src_origin: Vec<usize> =
                lo.iter().zip(cell_sig.iter().zip(&sig_chunk)).map(|(&l, (&g, &c))| l - g * c).collect();
            let dst_origin: Vec<usize> = lo.iter().zip(&sig.origin).map(|(&l, &o)| l - o).collect();
            let boxed = BoxCopy {
                src_base: nav_base,
                src_strides: &sig_strides,
                src_origin: &src_origin,
                dst_shape: &sig.shape,
                dst_origin: &dst_origin,
                extent: &extent,
                src_size,
                dst_size: dtype.size(),
                convert,
            };
            if whole && self.filtered(cell) {
                // Used once, whole: decode into this thread's buffer, skip the cache.
                self.decode_into(cell, scratch)?;
                boxed.copy(scratch, dst);
            } else {
                let data = self.chunk_data(cell)?;
                boxed.copy(data.bytes(), dst);
            }
        }
        Ok(())
    }
}

/// Copy (converting) a box of `extent` elements, per signal axis, from a chunk (element
/// `src_base + Σ (src_origin + i) · src_strides`) to a C-order destination of shape
/// `dst_shape` at `dst_origin`. Runs along the last axis are converted at once when the
/// source is contiguous there, else gathered first.
struct BoxCopy<'a> {
    src_base: usize,
    src_strides: &'a [usize],
    src_origin: &'a [usize],
    dst_shape: &'a [usize],
    dst_origin: &'a [usize],
    extent: &'a [usize],
    src_size: usize,
    dst_size: usize,
    convert: crate::dtype::ConvertFn,
}

impl BoxCopy<'_> {
    fn copy(&self, src: &[u8], dst: &mut [u8]) {
        let n = self.extent.len();
        let (ss, ds) = (self.src_size, self.dst_size);
        if n == 0 {
            (self.convert)(&src[self.src_base * ss..(self.src_base + 1) * ss], &mut dst[..ds]);
            return;
        }
        let mut dstride = vec![1usize; n];
        for a in (0..n - 1).rev() {
            dstride[a] = dstride[a + 1] * self.dst_shape[a + 1];
        }
        // Merge trailing axes that are contiguous in both source and destination.
        let mut d = n - 1;
        let mut run = self.extent[d];
        let contiguous = self.src_strides[d] == 1;
        while contiguous
            && d > 0
            && self.extent[d] == self.dst_shape[d]
            && self.src_strides[d - 1] == self.src_strides[d] * self.extent[d]
        {
            d -= 1;
            run *= self.extent[d];
        }
        let src0 = self.src_base + self.src_origin.iter().zip(self.src_strides).map(|(&o, &s)| o * s).sum::<usize>();
        let dst0: usize = self.dst_origin.iter().zip(&dstride).map(|(&o, &s)| o * s).sum();
        let outer: usize = self.extent[..d].iter().product();
        let mut idx = vec![0usize; d];
        let mut gathered = Vec::new();
        for _ in 0..outer {
            let so = src0 + idx.iter().zip(self.src_strides).map(|(&i, &s)| i * s).sum::<usize>();
            let dof = dst0 + idx.iter().zip(&dstride).map(|(&i, &s)| i * s).sum::<usize>();
            let out = &mut dst[dof * ds..(dof + run) * ds];
            if contiguous {
                (self.convert)(&src[so * ss..(so + run) * ss], out);
            } else {
                let step = self.src_strides[n - 1];
                gathered.clear();
                for i in 0..run {
                    let at = (so + i * step) * ss;
                    gathered.extend_from_slice(&src[at..at + ss]);
                }
                (self.convert)(&gathered, out);
            }
            for a in (0..d).rev() {
                idx[a] += 1;
                if idx[a] < self.extent[a] {
                    break;
                }
                idx[a] = 0;
            }
        }
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

/// A least-recently-used cache of decoded chunks, bounded in bytes.
struct Lru {
    capacity: usize,
    used: usize,
    tick: u64,
    /// `(cell, decoded bytes, last use)`.
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

    fn put(&mut self, cell: usize, data: Arc<Vec<u8>>) {
        if self.entries.iter().any(|e| e.0 == cell) {
            return;
        }
        let bytes = data.len();
        while self.used + bytes > self.capacity && !self.entries.is_empty() {
            let oldest = self.entries.iter().enumerate().min_by_key(|(_, e)| e.2).map_or(0, |(i, _)| i);
            let evicted = self.entries.swap_remove(oldest);
            self.used -= evicted.1.len();
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

    fn boxed<'a>(
        strides: &'a [usize],
        origin: &'a [usize],
        shape: &'a [usize],
        at: &'a [usize],
        extent: &'a [usize],
    ) -> BoxCopy<'a> {
        let convert = converter(StoredDType::le(DType::U8), DType::U8);
        BoxCopy {
            src_base: 0,
            src_strides: strides,
            src_origin: origin,
            dst_shape: shape,
            dst_origin: at,
            extent,
            src_size: 1,
            dst_size: 1,
            convert,
        }
    }

    #[test]
    fn box_copy_merges_full_rows_cuts_partial_ones_and_gathers_strided_axes() {
        let src: Vec<u8> = (0..24).collect(); // 4 x 6 chunk of u8
        let mut dst = vec![0u8; 3 * 5];
        // Chunk rows 1..3, cols 2..5 to dst (3 x 5) at (1, 1).
        boxed(&[6, 1], &[1, 2], &[3, 5], &[1, 1], &[2, 3]).copy(&src, &mut dst);
        assert_eq!(dst, vec![0, 0, 0, 0, 0, 0, 8, 9, 10, 0, 0, 14, 15, 16, 0]);
        let mut whole = vec![0u8; 24];
        boxed(&[6, 1], &[0, 0], &[4, 6], &[0, 0], &[4, 6]).copy(&src, &mut whole);
        assert_eq!(whole, src);
        // The same chunk read transposed (frame axes = chunk axes 1, 0): a 6 x 4 frame.
        let mut t = vec![0u8; 24];
        boxed(&[1, 6], &[0, 0], &[6, 4], &[0, 0], &[6, 4]).copy(&src, &mut t);
        let want: Vec<u8> = (0..6).flat_map(|x| (0..4).map(move |y| (y * 6 + x) as u8)).collect();
        assert_eq!(t, want);
    }

    #[test]
    fn lru_evicts_the_oldest() {
        let mut lru = Lru::new(2);
        lru.put(1, Arc::new(vec![1]));
        lru.put(2, Arc::new(vec![2]));
        assert!(lru.get(1).is_some());
        lru.put(3, Arc::new(vec![3]));
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
