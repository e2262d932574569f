//! Worker side: partitions processed in parallel on a rayon pool, each by fresh UDF
//! instances, every tile read and converted once for all UDFs.

use super::{FailurePoint, PartitionOutcome, RunError, RunShared, UdfOutput};
use crate::array::{AlignedBytes, NdArray};
use crate::dataset::Partition;
use crate::udf::{
    BufferDecl, BufferUse, CallError, Description, InitContext, NamedBuffer, ParamValue, Params, PartitionMeta,
    PartitionRunner, Tile,
};
use std::sync::atomic::Ordering;
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};

/// Process every partition on a pool of `shared.threads` threads, in order of index as
/// far as the pool allows, sending each outcome to the main side. Stops starting new
/// partitions once `shared.cancel` is set.
pub(crate) fn drive(shared: Arc<RunShared>, tx: SyncSender<PartitionOutcome>) {
    let pool = match rayon::ThreadPoolBuilder::new()
        .num_threads(shared.threads)
        .thread_name(|i| format!("udf-host-worker-{i}"))
        .build()
    {
        Ok(pool) => pool,
        Err(e) => {
            let _ = tx.send(PartitionOutcome {
                index: 0,
                result: Err(RunError::Invalid(format!("cannot start {} worker threads: {e}", shared.threads))),
            });
            return;
        }
    };
    pool.scope_fifo(|scope| {
        for partition in &shared.partitions {
            let tx = tx.clone();
            let shared = &shared;
            scope.spawn_fifo(move |_| {
                if shared.cancel.load(Ordering::Relaxed) {
                    return;
                }
                let result = run_partition(shared, partition);
                if result.is_err() && !shared.keep_going {
                    shared.cancel.store(true, Ordering::Relaxed);
                }
                // The main side may have stopped listening; then the result is moot.
                let _ = tx.send(PartitionOutcome { index: partition.index, result });
            });
        }
    });
}

/// The params one instance sees: nav aux arrays cut to the partition's selected frames
/// (or, on the main side, to all selected frames).
pub(crate) fn partition_params(
    params: &Params,
    desc: &Description,
    shared: &RunShared,
    partition: Option<&Partition>,
) -> Params {
    let mut out = params.clone();
    for spec in desc.params.iter().filter(|s| s.nav_aux) {
        let Some(ParamValue::Array(array)) = params.get(&spec.name) else { continue };
        let sliced = match (partition, &shared.roi) {
            (Some(p), _) => array.select_rows(p.frames.iter().map(|&f| f as usize)),
            (None, Some(roi)) => array.select_rows(roi.selected()),
            (None, None) => continue,
        };
        out.set(&spec.name, ParamValue::Array(Arc::new(sliced)));
    }
    out
}

fn frames_of(frames: &[u64]) -> Option<(u64, u64)> {
    Some((*frames.first()?, *frames.last()?))
}

/// Run all UDFs over one partition and return their exported buffers.
fn run_partition(shared: &RunShared, partition: &Partition) -> Result<Vec<UdfOutput>, RunError> {
    let params = shared.params.read().map_err(|_| RunError::Invalid("parameter lock poisoned".into()))?.clone();
    let at = |method: &'static str, frames: &[u64]| FailurePoint {
        method,
        partition: Some(partition.index),
        frames: frames_of(frames),
    };
    let all = &partition.frames;

    let mut part_params = Vec::with_capacity(shared.udfs.len());
    let mut metas = Vec::with_capacity(shared.udfs.len());
    for (u, planned) in shared.udfs.iter().enumerate() {
        part_params.push(partition_params(&params[u], planned.udf.description(), shared, Some(partition)));
        metas.push(PartitionMeta {
            index: partition.index,
            origin: partition.origin,
            frames: partition.len(),
            method: planned.plan.method,
            tiling: shared.tiling.clone(),
        });
    }
    let mut runners: Vec<Box<dyn PartitionRunner + '_>> = Vec::with_capacity(shared.udfs.len());
    for (u, planned) in shared.udfs.iter().enumerate() {
        let ctx = InitContext { params: &part_params[u], dataset: &shared.meta, partition: Some(&metas[u]) };
        let mut runner = planned.udf.start(ctx).map_err(|e| shared.udf_error(u, at("init", all), e))?;
        runner.preprocess().map_err(|e| shared.udf_error(u, at("preprocess", all), e))?;
        runners.push(runner);
    }

    let depth =
        if shared.tiling.intent == crate::udf::Method::Partition { partition.len() } else { shared.tiling.depth };
    let input = shared.meta.input_dtype;
    let stored_size = shared.dataset.stored_dtype().dtype.size();
    let full_frame = shared.tiling.slices.len() == 1;
    let reads_tiles = runners.len() == 1 && runners[0].reads_tiles();
    let mut buffer = AlignedBytes::default();
    let mut offset = 0usize;
    for chunk in partition.frames.chunks(depth.max(1)) {
        if shared.cancel.load(Ordering::Relaxed) {
            return Err(RunError::Cancelled);
        }
        for (scheme_index, slice) in shared.tiling.slices.iter().enumerate() {
            let contiguous = chunk.last().is_some_and(|&l| l - chunk[0] + 1 == chunk.len() as u64);
            let direct = if full_frame && contiguous {
                shared.dataset.direct_frames(chunk[0]..chunk[0] + chunk.len() as u64, shared.direct_dtype)
            } else {
                None
            };
            let mut tile = Tile {
                origin: partition.origin + offset as u64,
                frames: chunk.len(),
                scheme_index,
                sig: slice,
                true_nav_indices: chunk,
                dtype: input,
                data: &[],
            };
            // A single runner with memory of its own reads the tile there: one pass.
            let unread = direct.is_none() && reads_tiles;
            if let Some(bytes) = direct {
                tile.dtype = shared.direct_dtype;
                tile.data = bytes;
            } else if !unread {
                buffer.resize(chunk.len() * slice.len() * input.size());
                shared.dataset.read_tile(chunk, slice, input, buffer.as_mut_slice())?;
                tile.data = buffer.as_slice();
            }
            if unread {
                let failure = Mutex::new(None);
                let read = |dst: &mut [u8]| {
                    shared.dataset.read_tile(chunk, slice, input, dst).map_err(|e| {
                        let message = e.to_string();
                        *failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                        message
                    })
                };
                let outcome = runners[0].process_unread(&tile, &read);
                if let Some(e) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
                    return Err(e.into());
                }
                outcome.map_err(|e| shared.udf_error(0, at("process", chunk), e))?;
            } else {
                for (u, runner) in runners.iter_mut().enumerate() {
                    runner.process(&tile).map_err(|e| shared.udf_error(u, at("process", chunk), e))?;
                }
            }
            shared.bytes_read.fetch_add((chunk.len() * slice.len() * stored_size) as u64, Ordering::Relaxed);
        }
        offset += chunk.len();
        shared.frames_done.fetch_add(chunk.len() as u64, Ordering::Relaxed);
    }

    let mut out = Vec::with_capacity(runners.len());
    for (u, runner) in runners.iter_mut().enumerate() {
        runner.postprocess().map_err(|e| shared.udf_error(u, at("postprocess", all), e))?;
        let exported = runner.export().map_err(|e| shared.udf_error(u, at("export_buffers", all), e))?;
        let checked = check_exported(&shared.udfs[u].decls, exported, partition.len(), &shared.meta.sig_shape)
            .map_err(|e| shared.udf_error(u, at("export_buffers", all), e))?;
        let buffers = shared.udfs[u]
            .decls
            .iter()
            .filter(|d| d.usage != BufferUse::ResultOnly)
            .zip(checked)
            .map(|(d, array)| NamedBuffer { name: d.name.clone(), array })
            .collect();
        out.push((buffers, runner.stats()));
    }
    Ok(out)
}

/// Match exported buffers to the declarations: every declared (non-result-only)
/// buffer exactly once, with the declared dtype and the storage shape for `frames`
/// nav entries. Returns the arrays in declaration order.
pub fn check_exported(
    decls: &[BufferDecl],
    mut exported: Vec<NamedBuffer>,
    frames: usize,
    sig: &[usize],
) -> Result<Vec<NdArray>, CallError> {
    let mut out = Vec::new();
    for decl in decls.iter().filter(|d| d.usage != BufferUse::ResultOnly) {
        let position = exported
            .iter()
            .position(|b| b.name == decl.name)
            .ok_or_else(|| CallError::Contract(format!("buffer '{}' was declared but not exported", decl.name)))?;
        let buffer = exported.swap_remove(position);
        let expected = decl.storage_shape(frames, sig);
        if buffer.array.dtype() != decl.dtype || buffer.array.shape() != expected.as_slice() {
            return Err(CallError::Contract(format!(
                "buffer '{}' was exported as {} {:?}, but is declared as {} {:?}",
                decl.name,
                buffer.array.dtype(),
                buffer.array.shape(),
                decl.dtype,
                expected
            )));
        }
        out.push(buffer.array);
    }
    if let Some(extra) = exported.first() {
        return Err(CallError::Contract(format!("exported buffer '{}' was never declared", extra.name)));
    }
    Ok(out)
}
