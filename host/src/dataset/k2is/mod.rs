//! Gatan K2 IS raw data: eight sector files (`*_1.bin` ... `*_8.bin`) and a `.gtg`
//! metadata file (DM tags). Each sector file is a stream of blocks (see [`block`]); a
//! frame is 32 blocks per sector, 1860 x 2048 pixels of 12 bits, read as `uint16`.
//!
//! Opening synchronises the sectors like LiberTEM's `K2Syncer`: all sectors start at the
//! same block count, incomplete frames at either end are dropped, and the data starts at
//! the first frame with the shutter-active flag (one frame earlier for STEM scans, whose
//! nav shape comes from the `.gtg` file: the flag is set one frame late). Tiles are
//! decoded straight from the memory-mapped sectors, 12-bit unpacking and dtype
//! conversion in one pass; the base shape is one block, (930, 16).

pub mod block;

use super::mapped::{Access, map_file};
use super::{Dataset, DatasetError, DatasetInfo, DatasetShape, OpenOptions, SigSlice};
use crate::dtype::{DType, StoredDType, converter};
use block::{
    BLOCK_SHAPE, BLOCK_SIZE, BLOCKS_PER_FRAME, BlockHeader, FRAME_SHAPE, HEADER_SIZE, SECTOR_WIDTH, SECTORS,
    block_origin, unpack12,
};
use memmap2::Mmap;
use std::path::{Path, PathBuf};

const FRAME_BYTES: usize = BLOCK_SIZE * BLOCKS_PER_FRAME;

struct Sector {
    path: PathBuf,
    map: Mmap,
    /// Offset of the first block of frame 0 (after sync).
    start: usize,
}

/// A K2IS dataset.
pub struct K2isDataset {
    gtg: Option<PathBuf>,
    sectors: Vec<Sector>,
    shape: DatasetShape,
    details: Vec<(String, String)>,
    nav_source: String,
}

impl K2isDataset {
    /// Where the nav shape comes from, for `info`.
    pub fn nav_source(&self) -> &str {
        &self.nav_source
    }
}

/// The sector files and the `.gtg` file belonging to `path` (either kind): the sector
/// files share the name up to trailing digits (`scan_1.bin` -> `scan_*.bin`), sorted.
///
/// # Errors
/// Not a `.bin`/`.gtg` path, or not exactly eight sector files.
pub fn files_of(path: &Path) -> Result<(Vec<PathBuf>, PathBuf), DatasetError> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let prefix = match ext.as_deref() {
        Some("gtg") => stem.to_owned(),
        Some("bin") => stem.trim_end_matches(|c: char| c.is_ascii_digit()).to_owned(),
        _ => return Err(DatasetError::invalid(path, "K2IS data is opened by one of its .bin files or its .gtg file")),
    };
    let entries = std::fs::read_dir(dir).map_err(|source| DatasetError::Open { path: dir.to_owned(), source })?;
    let mut bins: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            name.starts_with(&prefix) && name.to_ascii_lowercase().ends_with(".bin")
        })
        .collect();
    bins.sort();
    if bins.len() != SECTORS {
        return Err(DatasetError::invalid(
            path,
            format!(
                "expected {SECTORS} sector files {}*.bin, found {}{}",
                dir.join(&prefix).display(),
                bins.len(),
                if bins.is_empty() {
                    String::new()
                } else {
                    format!(
                        ": {}",
                        bins.iter()
                            .map(|b| b.file_name().unwrap_or_default().to_string_lossy().into_owned())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            ),
        ));
    }
    Ok((bins, dir.join(format!("{prefix}.gtg"))))
}

impl Sector {
    fn bytes(&self) -> SectorBytes<'_> {
        SectorBytes { path: &self.path, bytes: &self.map }
    }

    fn bad(&self, offset: usize, what: &str) -> DatasetError {
        self.bytes().bad(offset, what)
    }
}

/// A sector file's bytes and its path (for messages).
pub struct SectorBytes<'a> {
    pub path: &'a Path,
    pub bytes: &'a [u8],
}

impl SectorBytes<'_> {
    fn header(&self, offset: usize) -> Option<BlockHeader> {
        self.bytes.get(offset..offset.checked_add(BLOCK_SIZE)?).and_then(BlockHeader::parse)
    }

    fn bad(&self, offset: usize, what: &str) -> DatasetError {
        DatasetError::invalid(self.path, format!("block at offset {offset}: {what}"))
    }

    fn valid_header(&self, offset: usize) -> Result<BlockHeader, DatasetError> {
        let h = self.header(offset).ok_or_else(|| self.bad(offset, "the file ends inside the block (truncated?)"))?;
        if !h.is_valid() {
            return Err(self.bad(
                offset,
                &format!(
                    "not a K2IS block (sync word {:#010x}, sector {}x{}; expected 0xffff0055, 256x1860)",
                    h.sync, h.width, h.height
                ),
            ));
        }
        Ok(h)
    }

    /// The first block at or after `from` (stepping whole blocks, up to `until`) for
    /// which `pred` holds.
    fn find(&self, from: usize, until: usize, pred: impl Fn(&BlockHeader) -> bool) -> Option<usize> {
        (from..=until).step_by(BLOCK_SIZE).find(|&o| self.header(o).is_some_and(|h| pred(&h)))
    }

    /// The last block at or before `from` (down to `down_to`) for which `pred` holds.
    fn find_back(&self, from: usize, down_to: usize, pred: impl Fn(&BlockHeader) -> bool) -> Option<usize> {
        let mut o = from;
        loop {
            if self.header(o).is_some_and(|h| pred(&h)) {
                return Some(o);
            }
            if o < down_to + BLOCK_SIZE {
                return None;
            }
            o -= BLOCK_SIZE;
        }
    }

    /// Whether the `BLOCKS_PER_FRAME` blocks from `offset` (forward or backward) share one frame id.
    fn whole_frame(&self, offset: usize, forward: bool) -> bool {
        let ids: Vec<Option<u32>> = (0..BLOCKS_PER_FRAME)
            .map(|i| {
                let o = if forward { offset.checked_add(i * BLOCK_SIZE) } else { offset.checked_sub(i * BLOCK_SIZE) };
                o.and_then(|o| self.header(o)).map(|h| h.frame_id)
            })
            .collect();
        ids.iter().all(|id| id.is_some() && *id == ids[0])
    }
}

/// Synchronise the sectors; returns (first block offsets, number of frames, whether the
/// shutter flag was found). `stem_scan`: the nav shape comes from the `.gtg` file, so the
/// data starts one frame before the shutter flag.
///
/// # Errors
/// Sectors that are too short, hold no valid blocks, or do not line up; the error names
/// the sector file and the block offset.
pub fn sync(sectors: &[SectorBytes<'_>], stem_scan: bool) -> Result<(Vec<usize>, usize, bool), DatasetError> {
    let mut first = vec![0usize; SECTORS];
    let mut last = Vec::with_capacity(SECTORS);
    for s in sectors {
        let blocks = s.bytes.len() / BLOCK_SIZE;
        if blocks < BLOCKS_PER_FRAME {
            return Err(DatasetError::invalid(
                s.path,
                format!("{} bytes hold {blocks} blocks, less than one frame ({BLOCKS_PER_FRAME})", s.bytes.len()),
            ));
        }
        last.push((blocks - 1) * BLOCK_SIZE);
    }
    // 1. Start all sectors at the same block count.
    let counts = sectors.iter().map(|s| s.valid_header(0).map(|h| h.block_count)).collect::<Result<Vec<_>, _>>()?;
    let max = counts.iter().copied().max().unwrap_or(0);
    for (i, s) in sectors.iter().enumerate() {
        first[i] = s.find(0, last[i], |h| h.block_count == max).ok_or_else(|| {
            s.bad(0, &format!("no block with block count {max} (where another sector starts): sectors out of step"))
        })?;
    }
    // 2. Skip an incomplete first frame.
    if sectors.iter().zip(&first).any(|(s, &o)| !s.whole_frame(o, true)) {
        let id = sectors[0].valid_header(first[0])?.frame_id;
        for (i, s) in sectors.iter().enumerate() {
            first[i] = s
                .find(first[i], last[i], |h| h.frame_id != id)
                .ok_or_else(|| s.bad(first[i], "no complete frame after the first (incomplete) one"))?;
        }
    }
    // 3. End all sectors at the same block count, dropping an incomplete last frame.
    for (i, s) in sectors.iter().enumerate() {
        s.valid_header(first[i])?;
        last[i] = first[i] + (last[i] - first[i]) / BLOCK_SIZE * BLOCK_SIZE;
        s.valid_header(last[i])?;
    }
    let min = sectors
        .iter()
        .zip(&last)
        .map(|(s, &o)| s.valid_header(o).map(|h| h.block_count))
        .collect::<Result<Vec<_>, _>>()?;
    let min = min.into_iter().min().unwrap_or(0);
    for (i, s) in sectors.iter().enumerate() {
        last[i] = s.find_back(last[i], first[i], |h| h.block_count == min).ok_or_else(|| {
            s.bad(last[i], &format!("no block with block count {min} (where another sector ends): sectors out of step"))
        })?;
    }
    if sectors.iter().zip(&last).any(|(s, &o)| !s.whole_frame(o, false)) {
        let id = sectors[0].valid_header(last[0])?.frame_id;
        for (i, s) in sectors.iter().enumerate() {
            last[i] = s
                .find_back(last[i], first[i], |h| h.frame_id != id)
                .ok_or_else(|| s.bad(last[i], "no complete frame before the last (incomplete) one"))?;
        }
    }
    // 4. Start at the first frame taken with the shutter open (one earlier for scans).
    let mut shutter = true;
    let mut start = first.clone();
    for (i, s) in sectors.iter().enumerate() {
        match s.find(first[i], last[i], BlockHeader::shutter_active) {
            Some(o) => start[i] = o,
            None => shutter = false,
        }
    }
    if !shutter {
        start.clone_from(&first);
    } else if stem_scan {
        for (i, st) in start.iter_mut().enumerate() {
            if *st >= first[i] + FRAME_BYTES {
                *st -= FRAME_BYTES;
            }
        }
    }
    // 5. Validate: whole frames with matching ids, the same frame count everywhere.
    let id = sectors[0].valid_header(start[0])?.frame_id;
    let mut frames = None;
    for (i, s) in sectors.iter().enumerate() {
        let h = s.valid_header(start[i])?;
        if h.frame_id != id || !s.whole_frame(start[i], true) {
            return Err(s.bad(
                start[i],
                &format!(
                    "sector {} does not start a whole frame {id} here (frame id {}): inconsistent sectors",
                    i + 1,
                    h.frame_id
                ),
            ));
        }
        if last[i] < start[i] {
            return Err(s.bad(start[i], "no complete frame in the file"));
        }
        let n = (last[i] - start[i] + BLOCK_SIZE) / FRAME_BYTES;
        if *frames.get_or_insert(n) != n {
            return Err(s.bad(
                start[i],
                &format!(
                    "holds {n} frames after sync, but sector 1 holds {}: inconsistent sectors",
                    frames.unwrap_or(0)
                ),
            ));
        }
    }
    Ok((start, frames.unwrap_or(0), shutter))
}

/// The scan shape from the `.gtg` file (`SI Dimensions/Size Y`, `Size X`), if any.
fn gtg_nav_shape(gtg: &Path) -> Result<Option<Vec<usize>>, DatasetError> {
    let bytes = std::fs::read(gtg).map_err(|source| DatasetError::Open { path: gtg.to_owned(), source })?;
    let tags = super::dm::tags::parse(&bytes).map_err(|e| DatasetError::invalid(gtg, format!("DM tag tree {e}")))?;
    let size = |name: &str| {
        tags.root
            .path(&format!("SI Dimensions/{name}"))
            .and_then(|n| tags.number(&bytes, n))
            .filter(|v| *v >= 1.0 && *v < 1e9)
    };
    Ok(match (size("Size Y"), size("Size X")) {
        (Some(y), Some(x)) => Some(vec![y as usize, x as usize]),
        _ => None,
    })
}

pub(super) fn open(path: &Path, options: &OpenOptions) -> Result<K2isDataset, DatasetError> {
    let (bins, gtg) = files_of(path)?;
    let mut sectors = Vec::with_capacity(SECTORS);
    for bin in &bins {
        let map = map_file(bin, Access::Sequential)?;
        sectors.push(Sector { path: bin.clone(), map, start: 0 });
    }
    let gtg_shape = if gtg.exists() {
        gtg_nav_shape(&gtg)?
    } else if options.nav_shape.is_none() {
        return Err(DatasetError::invalid(
            path,
            format!("the metadata file {} is missing; give --nav-shape", gtg.display()),
        ));
    } else {
        None
    };
    let views: Vec<SectorBytes<'_>> = sectors.iter().map(Sector::bytes).collect();
    let (start, available, shutter) = sync(&views, gtg_shape.is_some())?;
    drop(views);
    for (s, o) in sectors.iter_mut().zip(&start) {
        s.start = *o;
    }
    let nav_source = match (&options.nav_shape, &gtg_shape) {
        (Some(_), _) => "--nav-shape".to_owned(),
        (None, Some(_)) => format!("{} (SI Dimensions/Size Y, Size X)", gtg.display()),
        (None, None) => "the frames after the shutter flag (no scan shape recorded)".to_owned(),
    };
    let nav = options.nav_shape.clone().or(gtg_shape).unwrap_or_else(|| vec![available]);
    let sig = vec![FRAME_SHAPE.0, FRAME_SHAPE.1];
    if options.sig_shape.as_ref().is_some_and(|s| *s != sig) {
        return Err(DatasetError::invalid(path, format!("K2IS frames are {sig:?}; --sig-shape cannot change that")));
    }
    if options.dtype.is_some_and(|d| d.dtype != DType::U16) {
        return Err(DatasetError::invalid(path, "K2IS data is 12-bit, read as uint16; --dtype cannot change that"));
    }
    let shape = DatasetShape { nav, sig };
    if shape.nav_len() > available {
        return Err(DatasetError::invalid(
            path,
            format!(
                "nav shape {:?} needs {} frames, the sectors hold {available} complete frames after sync",
                shape.nav,
                shape.nav_len()
            ),
        ));
    }
    let details = vec![
        ("sector_files".into(), bins.iter().map(|b| b.display().to_string()).collect::<Vec<_>>().join(", ")),
        ("first_block_offsets".into(), format!("{start:?}")),
        ("frames_after_sync".into(), available.to_string()),
        ("shutter_flag_found".into(), shutter.to_string()),
    ];
    Ok(K2isDataset { gtg: gtg.exists().then_some(gtg), sectors, shape, details, nav_source })
}

impl Dataset for K2isDataset {
    fn shape(&self) -> &DatasetShape {
        &self.shape
    }

    fn stored_dtype(&self) -> StoredDType {
        StoredDType::le(DType::U16)
    }

    fn info(&self) -> DatasetInfo {
        let mut details = self.details.clone();
        if let Some(g) = &self.gtg {
            details.push(("gtg".into(), g.display().to_string()));
        }
        DatasetInfo { format: "k2is", path: self.sectors[0].path.clone(), details }
    }

    fn base_shape(&self) -> Vec<usize> {
        vec![BLOCK_SHAPE.0, BLOCK_SHAPE.1]
    }

    fn read_tile(&self, frames: &[u64], sig: &SigSlice, dtype: DType, out: &mut [u8]) -> Result<(), DatasetError> {
        let dst_size = dtype.size();
        let slice_len = sig.len();
        let path = &self.sectors[0].path;
        if out.len() != frames.len() * slice_len * dst_size || sig.origin.len() != 2 {
            return Err(DatasetError::invalid(path, "internal: tile buffer or slice of the wrong size"));
        }
        let nav_len = self.shape.nav_len() as u64;
        if let Some(&bad) = frames.iter().find(|&&f| f >= nav_len) {
            return Err(DatasetError::invalid(path, format!("frame {bad} is outside the dataset")));
        }
        let convert = converter(StoredDType::le(DType::U16), dtype);
        let (y0, x0) = (sig.origin[0], sig.origin[1]);
        let (h, w) = (sig.shape[0], sig.shape[1]);
        let (bh, bw) = BLOCK_SHAPE;
        let mut row = [0u16; 16];
        for (fi, &frame) in frames.iter().enumerate() {
            let tile = &mut out[fi * slice_len * dst_size..(fi + 1) * slice_len * dst_size];
            for by in y0 / bh..(y0 + h).div_ceil(bh) {
                for bx in x0 / bw..(x0 + w).div_ceil(bw) {
                    let sector = &self.sectors[bx / (SECTOR_WIDTH / bw)];
                    let index = (15 - bx % (SECTOR_WIDTH / bw)) + by * 16;
                    debug_assert_eq!(block_origin(index), (by * bh, (bx % 16) * bw));
                    let offset = sector.start + frame as usize * FRAME_BYTES + index * BLOCK_SIZE;
                    let block = sector.map.get(offset..offset + BLOCK_SIZE).ok_or_else(|| {
                        sector.bad(offset, "the file ends inside the block (was it truncated after opening?)")
                    })?;
                    if block[..4] != block::SYNC.to_be_bytes() {
                        return Err(sector.bad(offset, "the sync word is missing (corrupt block)"));
                    }
                    let pixels = &block[HEADER_SIZE..];
                    // Rows and columns of this block inside the slice.
                    let (r0, r1) = (y0.max(by * bh), (y0 + h).min((by + 1) * bh));
                    let (c0, c1) = (x0.max(bx * bw), (x0 + w).min((bx + 1) * bw));
                    let (lc0, lc1) = (c0 - bx * bw, c1 - bx * bw);
                    for r in r0..r1 {
                        let lr = r - by * bh;
                        unpack12(&pixels[lr * 24..lr * 24 + 24], &mut row);
                        let at = ((r - y0) * w + (c0 - x0)) * dst_size;
                        convert(bytemuck::cast_slice(&row[lc0..lc1]), &mut tile[at..at + (lc1 - lc0) * dst_size]);
                    }
                }
            }
        }
        Ok(())
    }
}
