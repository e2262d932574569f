//! Main side: the merged buffers of one UDF, and merging partitions into them.

use super::{FailurePoint, RunError, RunShared, initial_buffers};
use crate::array::NdArray;
use crate::dataset::Partition;
use crate::udf::{
    BufferDecl, BufferKind, BufferUse, BufferViewMut, CallError, DatasetMeta, MergeContext, NamedBuffer, Params,
    PartitionMeta, Udf,
};

/// The dataset-sized buffers of one UDF (nav buffers flat and ROI-compressed), in
/// declaration order, without result-only buffers.
///
/// Public so that tools (the conformance kit) can merge partition results in orders and
/// trees of their own.
#[derive(Debug, Clone)]
pub struct MergeState {
    pub buffers: Vec<NamedBuffer>,
    kinds: Vec<BufferKind>,
}

impl MergeState {
    /// Zeroed buffers for `decls` with `frames` nav entries.
    pub fn zeros(decls: &[BufferDecl], frames: usize, sig: &[usize]) -> Self {
        let arrays = decls
            .iter()
            .filter(|d| d.usage != BufferUse::ResultOnly)
            .map(|d| NdArray::zeros(d.dtype, &d.storage_shape(frames, sig)))
            .collect();
        Self::from_arrays(decls, arrays)
    }

    /// Buffers from arrays in declaration order (result-only declarations skipped).
    pub fn from_arrays(decls: &[BufferDecl], arrays: Vec<NdArray>) -> Self {
        let decls = decls.iter().filter(|d| d.usage != BufferUse::ResultOnly);
        let (buffers, kinds) =
            decls.zip(arrays).map(|(d, array)| (NamedBuffer { name: d.name.clone(), array }, d.kind)).unzip();
        MergeState { buffers, kinds }
    }

    pub(crate) fn new(shared: &RunShared, u: usize) -> Result<Self, RunError> {
        Ok(Self::from_arrays(&shared.udfs[u].decls, initial_buffers(shared, u)?))
    }

    /// Merge `src` — the buffers of the frames `partition.origin..+partition.frames`, in
    /// declaration order — into this state: natively for UDFs without a custom merge
    /// (nav buffers only: copy the rows), else through the UDF with `dest` restricted to
    /// those rows for nav buffers. `valid` is the compressed mask of rows merged before.
    ///
    /// # Errors
    /// The UDF's merge fails or returns malformed buffers.
    pub fn merge(
        &mut self,
        udf: &dyn Udf,
        params: &Params,
        dataset: &DatasetMeta,
        partition: &PartitionMeta,
        src: &[NamedBuffer],
        valid: &[bool],
    ) -> Result<(), CallError> {
        let rows = partition.origin as usize..partition.origin as usize + partition.frames;
        if !udf.description().custom_merge {
            for ((dest, kind), src) in self.buffers.iter_mut().zip(&self.kinds).zip(src) {
                if *kind != BufferKind::Nav {
                    return Err(CallError::Contract(format!(
                        "buffer '{}' is not nav and there is no custom merge",
                        dest.name
                    )));
                }
                copy_rows(&mut dest.array, rows.clone(), &src.array);
            }
            return Ok(());
        }
        let ctx = MergeContext { params, dataset, partition, valid_nav_mask: valid };
        let mut views: Vec<BufferViewMut<'_>> = self
            .buffers
            .iter_mut()
            .zip(&self.kinds)
            .map(|(b, kind)| {
                let dtype = b.array.dtype();
                let mut shape = b.array.shape().to_vec();
                let bytes = if *kind == BufferKind::Nav {
                    let row = row_bytes(&b.array);
                    shape[0] = rows.len();
                    &mut b.array.bytes_mut()[rows.start * row..rows.end * row]
                } else {
                    b.array.bytes_mut()
                };
                BufferViewMut { name: &b.name, dtype, shape, bytes }
            })
            .collect();
        udf.merge(ctx, &mut views, src)
    }

    /// Merge one partition of a run (wrapping errors with the run's context).
    pub(crate) fn merge_partition(
        &mut self,
        shared: &RunShared,
        u: usize,
        params: &Params,
        partition: &Partition,
        src: &[NamedBuffer],
        damage: &[bool],
    ) -> Result<(), RunError> {
        let planned = &shared.udfs[u];
        let meta = PartitionMeta {
            index: partition.index,
            origin: partition.origin,
            frames: partition.len(),
            method: planned.plan.method,
            tiling: shared.tiling.clone(),
        };
        self.merge(planned.udf.as_ref(), params, &shared.meta, &meta, src, damage).map_err(|e| {
            let at = FailurePoint {
                method: "merge",
                partition: Some(partition.index),
                frames: partition.frames.first().zip(partition.frames.last()).map(|(a, b)| (*a, *b)),
            };
            shared.udf_error(u, at, e)
        })
    }
}

fn row_bytes(array: &NdArray) -> usize {
    array.shape()[1..].iter().product::<usize>() * array.dtype().size()
}

/// Copy all of `src` into rows `rows` of `dest` (same row layout, checked on export).
fn copy_rows(dest: &mut NdArray, rows: std::ops::Range<usize>, src: &NdArray) {
    let row = row_bytes(dest);
    dest.bytes_mut()[rows.start * row..rows.end * row].copy_from_slice(src.bytes());
}
