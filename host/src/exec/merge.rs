//! Main side: the merged buffers of one UDF, and merging partitions into them.

use super::{FailurePoint, RunError, RunShared, initial_buffers};
use crate::array::NdArray;
use crate::dataset::Partition;
use crate::udf::{BufferKind, BufferUse, BufferViewMut, MergeContext, NamedBuffer, Params, PartitionMeta};

/// The dataset-sized buffers of one UDF (nav buffers flat and ROI-compressed).
pub(crate) struct MergedState {
    pub buffers: Vec<NamedBuffer>,
    kinds: Vec<BufferKind>,
}

impl MergedState {
    pub fn new(shared: &RunShared, u: usize) -> Result<Self, RunError> {
        let arrays = initial_buffers(shared, u)?;
        let decls = shared.udfs[u].decls.iter().filter(|d| d.usage != BufferUse::ResultOnly);
        let (buffers, kinds) =
            decls.zip(arrays).map(|(d, array)| (NamedBuffer { name: d.name.clone(), array }, d.kind)).unzip();
        Ok(MergedState { buffers, kinds })
    }

    /// Merge a partition's buffers (in declaration order): natively for UDFs without a
    /// custom merge (nav buffers only: copy the partition's rows), else through the UDF
    /// with `dest` restricted to the partition's rows for nav buffers.
    pub fn merge(
        &mut self,
        shared: &RunShared,
        u: usize,
        params: &Params,
        partition: &Partition,
        src: Vec<NamedBuffer>,
        damage: &[bool],
    ) -> Result<(), RunError> {
        let planned = &shared.udfs[u];
        let rows = partition.origin as usize..partition.origin as usize + partition.len();
        if !planned.udf.description().custom_merge {
            for ((dest, kind), src) in self.buffers.iter_mut().zip(&self.kinds).zip(&src) {
                debug_assert_eq!(*kind, BufferKind::Nav, "checked when planning");
                copy_rows(&mut dest.array, rows.clone(), &src.array);
            }
            return Ok(());
        }
        let meta = PartitionMeta {
            index: partition.index,
            origin: partition.origin,
            frames: partition.len(),
            method: planned.plan.method,
            tiling: shared.tiling.clone(),
        };
        let ctx = MergeContext { params, dataset: &shared.meta, partition: &meta, valid_nav_mask: damage };
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
        planned.udf.merge(ctx, &mut views, &src).map_err(|e| {
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
