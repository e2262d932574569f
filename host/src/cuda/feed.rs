//! Feeding the GPU: one [`Feed`] per partition, shared by every GPU built-in of the
//! partition, so that each tile is uploaded once for all of them.
//!
//! A tile (up to a whole partition when read in place) is cut into chunks of frames that
//! fit a lane. Chunks alternate between two lanes, each with its own stream: the CPU
//! copies chunk `c` into the lane's pinned staging buffer (waiting until the lane's
//! previous copy has left it), the stream copies it to the device and runs every
//! consumer's kernels on it. So the copy of chunk `c + 1` (the other stream) overlaps the
//! kernels of chunk `c`, and the CPU reads the next tile while the GPU works. Consumers'
//! accumulators are written by kernels on both streams; cudarc's event tracking orders
//! those kernels.
//!
//! The executor hands each tile to every runner in turn (wasm plugins of the same run
//! read it on the CPU): the first GPU runner that gets a tile feeds it to all consumers,
//! the others find it done.

use super::gpu::{Gpu, Lane};
use crate::dtype::DType;
use crate::udf::{CallError, NamedBuffer, PartitionMeta, SliceRuns, Tile, TilingScheme};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut};
use rayon::prelude::*;
use std::cell::RefCell;
use std::sync::{Arc, Mutex, Weak};

/// A chunk of a tile on the device, as a consumer's kernels see it.
pub(crate) struct Chunk<'a> {
    /// Element type of `data`.
    pub dtype: DType,
    /// `frames * slice_len` elements.
    pub data: &'a CudaSlice<u8>,
    pub frames: usize,
    pub slice_len: usize,
    /// First frame of the chunk, counted from the partition's first.
    pub row0: usize,
    pub scheme_index: usize,
    /// The slice's runs in the frame: `starts` on the device, and the run length.
    pub starts: &'a CudaSlice<u32>,
    pub run_len: usize,
    /// Which lane (0 or 1) runs it.
    pub lane: usize,
    pub stream: &'a Arc<CudaStream>,
}

/// One built-in's device state for a partition.
pub(crate) trait Consumer: Send {
    /// Queue this consumer's kernels for a chunk on `chunk.stream`.
    fn launch(&mut self, gpu: &Gpu, chunk: &Chunk<'_>) -> Result<(), String>;
    /// After the last tile (the feed's work may still be running).
    fn postprocess(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// The partition's buffers, downloaded (the feed has finished all work).
    fn export(&mut self, stream: &Arc<CudaStream>) -> Result<Vec<NamedBuffer>, String>;
}

/// Frames per chunk when a frame of the slice has `frame_bytes`: as many as fit a lane,
/// a multiple of 32 when at least 32 fit (stddev's blocks of 32 frames then fall where
/// the CPU's do).
pub(crate) fn chunk_frames(capacity: usize, frame_bytes: usize) -> usize {
    let n = (capacity / frame_bytes.max(1)).max(1);
    if n >= 32 { n / 32 * 32 } else { n }
}

/// Lane capacity for frames of up to `frame_bytes`: 16 MiB, or 32 frames, at most 256
/// MiB, at least one frame.
pub(crate) fn lane_capacity(frame_bytes: usize) -> usize {
    (32 * frame_bytes).clamp(16 << 20, 256 << 20).max(frame_bytes).max(1)
}

/// The shared feed of one partition.
pub(crate) struct Feed {
    gpu: &'static Gpu,
    /// Keeps the partition's tiling alive, so that its address identifies the partition.
    _tiling: Arc<TilingScheme>,
    partition_origin: u64,
    lanes: Option<[Lane; 2]>,
    next_lane: usize,
    runs: Vec<SliceRuns>,
    starts: Vec<CudaSlice<u32>>,
    consumers: Vec<Box<dyn Consumer>>,
    /// A consumer's first error, reported by its runner's next call.
    errors: Vec<Option<String>>,
    /// The tile fed last: (origin, scheme index, frames).
    last_tile: Option<(u64, usize, usize)>,
}

/// A feed of a partition being started: (tiling address, partition index, the feed).
type OpenFeed = (usize, usize, Weak<Mutex<Feed>>);

/// Sets up a consumer's device state on the feed's stream.
pub(crate) type MakeConsumer<'a> = &'a dyn Fn(&Arc<CudaStream>) -> Result<Box<dyn Consumer>, String>;

thread_local! {
    /// Feeds of partitions being started on this thread: the runners a partition starts
    /// one after the other join the same feed.
    static OPEN: RefCell<Vec<OpenFeed>> = const { RefCell::new(Vec::new()) };
}

/// Join the feed of `partition` (a new one if this is its first GPU runner, or if its
/// feed has already started feeding tiles) with the consumer `make` sets up on the
/// feed's stream; returns the feed and the consumer's index.
///
/// # Errors
/// CUDA errors setting up the feed.
pub(crate) fn join(
    gpu: &'static Gpu,
    partition: &PartitionMeta,
    sig: &[usize],
    max_elem: usize,
    make: MakeConsumer<'_>,
) -> Result<(Arc<Mutex<Feed>>, usize), String> {
    let key = (Arc::as_ptr(&partition.tiling) as usize, partition.index);
    let open = OPEN.with(|open| {
        let mut open = open.borrow_mut();
        open.retain(|(_, _, w)| w.strong_count() > 0);
        open.iter()
            .filter(|(t, p, _)| (*t, *p) == key)
            .filter_map(|(_, _, w)| w.upgrade())
            .find(|f| f.lock().is_ok_and(|f| f.last_tile.is_none()))
    });
    let feed = match open {
        Some(feed) => feed,
        None => {
            let feed = Arc::new(Mutex::new(Feed::new(gpu, partition, sig, max_elem)?));
            OPEN.with(|open| open.borrow_mut().push((key.0, key.1, Arc::downgrade(&feed))));
            feed
        }
    };
    let id = {
        let mut f = feed.lock().map_err(|_| "the partition's GPU feed is poisoned".to_owned())?;
        // Allocated (and zeroed) on lane 0's stream, finished before the first kernel.
        let stream = f.lanes.as_ref().map(|l| l[0].stream.clone()).ok_or("the feed was closed")?;
        let consumer = make(&stream)?;
        stream.synchronize().map_err(|e| format!("setting up: {e:?}"))?;
        f.consumers.push(consumer);
        f.errors.push(None);
        f.consumers.len() - 1
    };
    Ok((feed, id))
}

impl Feed {
    fn new(gpu: &'static Gpu, partition: &PartitionMeta, sig: &[usize], max_elem: usize) -> Result<Feed, String> {
        let runs = SliceRuns::for_scheme(sig, &partition.tiling.slices);
        let widest = runs.iter().map(|r| r.slice_len).max().unwrap_or(0);
        let lanes = gpu.take_lanes(lane_capacity(widest * max_elem))?;
        let mut starts = Vec::with_capacity(runs.len());
        for r in &runs {
            let values: Vec<u32> = r
                .starts
                .iter()
                .map(|&s| u32::try_from(s).map_err(|_| "frames of more than 2^32 pixels are not supported on the GPU"))
                .collect::<Result<_, _>>()?;
            let values = if values.is_empty() { vec![0] } else { values };
            starts.push(lanes[0].stream.clone_htod(&values).map_err(|e| format!("uploading slice runs: {e:?}"))?);
        }
        Ok(Feed {
            gpu,
            _tiling: partition.tiling.clone(),
            partition_origin: partition.origin,
            lanes: Some(lanes),
            next_lane: 0,
            runs,
            starts,
            consumers: Vec::new(),
            errors: Vec::new(),
            last_tile: None,
        })
    }

    /// Feed `tile` to every consumer unless that was done (for another runner of this
    /// partition); report consumer `me`'s error if it has one.
    ///
    /// # Errors
    /// The consumer's (or the feeding's) CUDA error, or a tile of an unsupported dtype.
    pub fn process(&mut self, tile: &Tile<'_>, me: usize) -> Result<(), CallError> {
        let key = (tile.origin, tile.scheme_index, tile.frames);
        if self.last_tile != Some(key) {
            self.last_tile = Some(key);
            if let Err(e) = self.feed(tile) {
                for slot in &mut self.errors {
                    slot.get_or_insert_with(|| e.clone());
                }
            }
        }
        self.take_error(me)
    }

    fn take_error(&mut self, me: usize) -> Result<(), CallError> {
        match self.errors.get(me) {
            Some(Some(e)) => Err(CallError::internal(format!("CUDA: {e}"))),
            Some(None) => Ok(()),
            None => Err(CallError::internal("unknown GPU consumer")),
        }
    }

    fn feed(&mut self, tile: &Tile<'_>) -> Result<(), String> {
        if super::type_name(tile.dtype).is_none() {
            return Err(format!("tiles of {} have no kernels", tile.dtype));
        }
        let runs = self.runs.get(tile.scheme_index).ok_or("unknown signal slice")?;
        let (slice_len, run_len) = (runs.slice_len, runs.run_len);
        let frame_bytes = slice_len * tile.dtype.size();
        if frame_bytes == 0 || tile.frames == 0 {
            return Ok(());
        }
        if tile.data.len() < tile.frames * frame_bytes {
            return Err(format!(
                "a tile of {} bytes for {} frames of {frame_bytes} bytes",
                tile.data.len(),
                tile.frames
            ));
        }
        // The raw copies below need the context current on this (worker) thread.
        self.gpu.ctx.bind_to_thread().map_err(|e| format!("binding the CUDA context: {e:?}"))?;
        let lanes = self.lanes.as_mut().ok_or("the feed was closed")?;
        let per_chunk = chunk_frames(lanes[0].capacity(), frame_bytes);
        let first_row = tile.origin.checked_sub(self.partition_origin).ok_or("a tile before the partition")? as usize;
        for start in (0..tile.frames).step_by(per_chunk) {
            let frames = per_chunk.min(tile.frames - start);
            let bytes = &tile.data[start * frame_bytes..(start + frames) * frame_bytes];
            let lane_index = self.next_lane;
            self.next_lane ^= 1;
            let lane = &mut lanes[lane_index];
            upload(lane, bytes)?;
            let chunk = Chunk {
                dtype: tile.dtype,
                data: &lane.input,
                frames,
                slice_len,
                row0: first_row + start,
                scheme_index: tile.scheme_index,
                starts: &self.starts[tile.scheme_index],
                run_len,
                lane: lane_index,
                stream: &lane.stream,
            };
            for (consumer, error) in self.consumers.iter_mut().zip(&mut self.errors) {
                if error.is_none()
                    && let Err(e) = consumer.launch(self.gpu, &chunk)
                {
                    *error = Some(e);
                }
            }
        }
        Ok(())
    }

    /// After the last tile: consumer `me`'s checks.
    ///
    /// # Errors
    /// Its error, if it had one.
    pub fn postprocess(&mut self, me: usize) -> Result<(), CallError> {
        self.take_error(me)?;
        let consumer = self.consumers.get_mut(me).ok_or_else(|| CallError::internal("unknown GPU consumer"))?;
        consumer.postprocess().map_err(CallError::internal)
    }

    /// Consumer `me`'s buffers, once all queued work has finished.
    ///
    /// # Errors
    /// Its error, or a CUDA error finishing or downloading.
    pub fn export(&mut self, me: usize) -> Result<Vec<NamedBuffer>, CallError> {
        self.take_error(me)?;
        let lanes = self.lanes.as_ref().ok_or_else(|| CallError::internal("the feed was closed"))?;
        for lane in lanes {
            lane.stream
                .synchronize()
                .map_err(|e| CallError::internal(format!("CUDA: finishing the kernels: {e:?}")))?;
        }
        let stream = lanes[0].stream.clone();
        let consumer = self.consumers.get_mut(me).ok_or_else(|| CallError::internal("unknown GPU consumer"))?;
        let buffers = consumer.export(&stream).map_err(|e| CallError::internal(format!("CUDA: {e}")))?;
        stream.synchronize().map_err(|e| CallError::internal(format!("CUDA: downloading: {e:?}")))?;
        Ok(buffers)
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        if let Some(lanes) = self.lanes.take() {
            self.gpu.give_back(lanes);
        }
    }
}

/// Copy `bytes` into the lane's staging buffer (once its previous copy has left it) and
/// queue the copy to the lane's device buffer.
fn upload(lane: &mut Lane, bytes: &[u8]) -> Result<(), String> {
    lane.copied.synchronize().map_err(|e| format!("waiting for a copy: {e:?}"))?;
    let staging = lane.staging.as_mut_slice().map_err(|e| format!("staging buffer: {e:?}"))?;
    let staging = staging.get_mut(..bytes.len()).ok_or("a chunk larger than its lane")?;
    const PIECE: usize = 1 << 20;
    if bytes.len() >= 8 * PIECE {
        staging.par_chunks_mut(PIECE).zip(bytes.par_chunks(PIECE)).for_each(|(to, from)| to.copy_from_slice(from));
    } else {
        staging.copy_from_slice(bytes);
    }
    let (device, written) = lane.input.device_ptr_mut(&lane.stream);
    // SAFETY: `device` is the lane's device buffer, at least as large as the staging buffer
    // (same capacity), so `bytes.len()` bytes fit; the pinned source stays untouched until
    // `copied` (recorded just below on the same stream) has completed.
    unsafe { cudarc::driver::result::memcpy_htod_async(device, &*staging, lane.stream.cu_stream()) }
        .map_err(|e| format!("copy to the device: {e:?}"))?;
    drop(written);
    lane.copied.record(&lane.stream).map_err(|e| format!("recording a copy: {e:?}"))?;
    Ok(())
}
