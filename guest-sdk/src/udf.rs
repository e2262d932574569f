//! The trait a plugin implements.

use crate::bindings::udf::plugin::types::{BufferDecl, DatasetMeta, Description, PartitionMeta, RunPlan};
use crate::buffers::{Buffers, ResultOut};
use crate::error::{Result, UdfError};
use crate::params::{Context, Params};
use crate::tile::{Frame, Tile};

/// A user-defined function, LiberTEM style.
///
/// Implement [`describe`](Udf::describe), [`result_buffers`](Udf::result_buffers),
/// [`new`](Udf::new) and one of the `process_*` methods; export it with
/// [`export_udf!`](crate::export_udf). A fresh value is created with `new` for every
/// partition, so fields are per-partition state (LiberTEM's task data).
///
/// `merge` and `get_results` take no `self`: they run on the main side as pure
/// functions of the buffers they are given.
pub trait Udf: Sized + 'static {
    /// Name, version, summary, params, methods and preferences. Must be constant.
    fn describe() -> Description;

    /// Run-time choice of method, input dtype and tiling (LiberTEM's `get_method`,
    /// `get_preferred_input_dtype`, `get_tiling_preferences`). Defaults to the
    /// description's preferences and the first implemented method in the order
    /// tile > frame > partition.
    fn plan(params: &Params, dataset: &DatasetMeta) -> Result<RunPlan> {
        let _ = (params, dataset);
        Ok(RunPlan::from_description(&Self::describe()))
    }

    /// Declare the result buffers (LiberTEM's `get_result_buffers`). Must be deterministic.
    fn result_buffers(params: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>>;

    /// Create the per-partition state from the params (LiberTEM's `__init__` plus
    /// `get_task_data`). On the main side (`main_preprocess`) `ctx.partition()` is `None`.
    fn new(ctx: &Context) -> Result<Self>;

    /// Initialise the buffers before processing (LiberTEM's `preprocess`); buffers are
    /// zeroed before.
    fn preprocess(&mut self, ctx: &Context, results: &mut Buffers) -> Result<()> {
        let _ = (ctx, results);
        Ok(())
    }

    /// Process a tile. `results` views are restricted to the tile.
    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        let _ = (tile, results);
        Err(UdfError::internal("process_tile is not implemented"))
    }

    /// Process a frame. `results` views are restricted to the frame.
    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        let _ = (frame, results);
        Err(UdfError::internal("process_frame is not implemented"))
    }

    /// Process the whole partition at once.
    fn process_partition(&mut self, partition: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        let _ = (partition, results);
        Err(UdfError::internal("process_partition is not implemented"))
    }

    /// Finish the partition's buffers after the last tile (LiberTEM's `postprocess`).
    fn postprocess(&mut self, ctx: &Context, results: &mut Buffers) -> Result<()> {
        let _ = (ctx, results);
        Ok(())
    }

    /// Merge a partition's buffers `src` into the merged state `dest` (declare with
    /// `Description::custom_merge`). Nav buffers of both cover only that partition.
    fn merge(ctx: &MergeContext, dest: &mut Buffers, src: &Buffers) -> Result<()> {
        let _ = (ctx, dest, src);
        Err(UdfError::internal("merge is not implemented"))
    }

    /// Compute the final results from the merged buffers (declare with
    /// `Description::custom_results`). Buffers not returned are passed through unless
    /// they are private.
    fn get_results(ctx: &ResultsContext, buffers: &Buffers) -> Result<Vec<ResultOut>> {
        let _ = (ctx, buffers);
        Err(UdfError::internal("get_results is not implemented"))
    }
}

/// What `merge` can see besides the buffers.
#[derive(Debug, Clone)]
pub struct MergeContext {
    /// The run's parameters.
    pub params: Params,
    /// Dataset-level meta.
    pub dataset: DatasetMeta,
    /// The partition being merged.
    pub partition: PartitionMeta,
    /// Compressed nav positions merged before this partition.
    pub valid_nav_mask: Vec<bool>,
}

/// What `get_results` can see besides the buffers.
#[derive(Debug, Clone)]
pub struct ResultsContext {
    /// The run's parameters.
    pub params: Params,
    /// Dataset-level meta.
    pub dataset: DatasetMeta,
    /// Compressed nav positions merged so far.
    pub valid_nav_mask: Vec<bool>,
    /// The ROI over the flat, uncompressed nav axis, if any.
    pub roi: Option<Vec<bool>>,
}
