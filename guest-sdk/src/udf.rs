//! The trait a plugin implements.

use crate::bindings::udf::plugin::types::{BufferDecl, DatasetMeta, Description, PartitionMeta, RunPlan};
use crate::buffers::{Buffers, ResultOut};
use crate::declaration::Declaration;
use crate::error::{Result, UdfError};
use crate::params::{Context, Params};
use crate::tile::{Frame, Tile};

/// A user-defined function, LiberTEM style.
///
/// Implement [`declare`](Udf::declare) (or, the long way, [`describe`](Udf::describe)
/// and [`result_buffers`](Udf::result_buffers)), [`new`](Udf::new) and one of the
/// `process_*` methods; export it with [`export_udf!`](crate::export_udf). A fresh value
/// is created with `new` for every partition, so fields are per-partition state
/// (LiberTEM's task data).
///
/// `merge` and `get_results` take no `self`: they run on the main side as pure
/// functions of the buffers they are given.
pub trait Udf: Sized + 'static {
    /// The plugin in one place: name, summary, params, method, input dtype and buffers
    /// with their merge rules ([`Declaration`]). The default implementations of
    /// `describe`, `result_buffers` and `merge` use it; a plugin that implements those
    /// itself need not declare.
    fn declare() -> Declaration {
        Declaration::undeclared()
    }

    /// Name, version, summary, params, methods and preferences. Must be constant.
    /// Defaults to the [`declare`](Udf::declare)d description.
    ///
    /// # Panics
    /// If the plugin implements neither `describe` nor `declare`.
    fn describe() -> Description {
        let declaration = Self::declare();
        assert!(declaration.is_declared(), "the plugin implements neither Udf::declare nor Udf::describe");
        declaration.description()
    }

    /// Run-time choice of method, input dtype and tiling (LiberTEM's `get_method`,
    /// `get_preferred_input_dtype`, `get_tiling_preferences`). Defaults to the
    /// description's preferences and the first implemented method in the order
    /// tile > frame > partition.
    fn plan(params: &Params, dataset: &DatasetMeta) -> Result<RunPlan> {
        let _ = (params, dataset);
        Ok(RunPlan::from_description(&Self::describe()))
    }

    /// Declare the result buffers (LiberTEM's `get_result_buffers`). Must be deterministic.
    /// Defaults to the [`declare`](Udf::declare)d buffers.
    fn result_buffers(params: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        let declaration = Self::declare();
        if !declaration.is_declared() {
            return Err(UdfError::internal("the plugin implements neither Udf::declare nor Udf::result_buffers"));
        }
        declaration.buffers(params, dataset)
    }

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
    /// Defaults to the [`declare`](Udf::declare)d merge rules ([`Declaration::merge`]).
    fn merge(ctx: &MergeContext, dest: &mut Buffers, src: &Buffers) -> Result<()> {
        let _ = ctx;
        let declaration = Self::declare();
        if !declaration.is_declared() {
            return Err(UdfError::internal("merge is not implemented"));
        }
        declaration.merge_buffers(dest, src)
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

impl ResultsContext {
    /// True flat nav index of every selected frame, in compressed order (all frames
    /// without a ROI).
    pub fn selected_positions(&self) -> Vec<usize> {
        match &self.roi {
            Some(roi) => roi.iter().enumerate().filter(|(_, s)| **s).map(|(i, _)| i).collect(),
            None => (0..self.dataset.nav_len() as usize).collect(),
        }
    }

    /// Spread a compressed nav result `(N, *extra)` over the full nav grid
    /// `(*nav_shape, *extra)`, with `fill` at positions outside the ROI — for results that
    /// need the grid (gradients, fits).
    pub fn expand_nav<T: crate::Element>(
        &self,
        compressed: &ndarray::ArrayViewD<'_, T>,
        fill: T,
    ) -> Result<ndarray::ArrayD<T>> {
        let extra = &compressed.shape()[1..];
        let mut shape: Vec<usize> = self.dataset.nav_shape.iter().map(|&d| d as usize).collect();
        let nav_dims = shape.len();
        shape.extend_from_slice(extra);
        let nav_len: usize = shape[..nav_dims].iter().product();
        let per: usize = extra.iter().product();
        let positions = self.selected_positions();
        if compressed.shape()[0] != positions.len() {
            return Err(UdfError::internal(format!(
                "{} compressed rows for {} selected positions",
                compressed.shape()[0],
                positions.len()
            )));
        }
        let mut full = vec![fill; nav_len * per];
        let rows: Vec<T> = compressed.iter().copied().collect();
        for (row, &position) in rows.chunks(per.max(1)).zip(&positions) {
            full[position * per..(position + 1) * per].copy_from_slice(&row[..per]);
        }
        Ok(ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&shape), full)?)
    }

    /// The inverse of [`expand_nav`](Self::expand_nav): the selected positions of a full
    /// nav grid `(*nav_shape, *extra)` as `(N, *extra)`.
    pub fn compress_nav<T: crate::Element>(&self, full: &ndarray::ArrayViewD<'_, T>) -> Result<ndarray::ArrayD<T>> {
        let nav_dims = self.dataset.nav_shape.len();
        let extra = &full.shape()[nav_dims.min(full.ndim())..];
        let per: usize = extra.iter().product();
        let values: Vec<T> = full.iter().copied().collect();
        let positions = self.selected_positions();
        let mut out = Vec::with_capacity(positions.len() * per);
        for &p in &positions {
            out.extend_from_slice(
                values.get(p * per..(p + 1) * per).ok_or_else(|| UdfError::internal("position outside the grid"))?,
            );
        }
        let mut shape = vec![positions.len()];
        shape.extend_from_slice(extra);
        Ok(ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&shape), out)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::udf::plugin::types::{DeviceClass, Dtype};

    fn ctx(roi: Option<Vec<bool>>) -> ResultsContext {
        ResultsContext {
            params: Params::default(),
            dataset: DatasetMeta {
                nav_shape: vec![2, 3],
                sig_shape: vec![4],
                dataset_dtype: Dtype::Float32,
                input_dtype: Dtype::Float32,
                roi_count: roi.as_ref().map(|r| r.iter().filter(|&&s| s).count() as u64),
                device_class: DeviceClass::Cpu,
                threads_per_worker: 1,
            },
            valid_nav_mask: Vec::new(),
            roi,
        }
    }

    #[test]
    fn nav_grid_expansion_round_trips_with_a_roi() {
        let c = ctx(Some(vec![false, true, false, true, true, false]));
        let compressed = ndarray::array![[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]].into_dyn();
        let full = c.expand_nav(&compressed.view(), f64::NAN).unwrap();
        assert_eq!(full.shape(), &[2, 3, 2]);
        assert_eq!(full[[0, 1, 1]], 2.0);
        assert_eq!(full[[1, 1, 0]], 5.0);
        assert!(full[[0, 0, 0]].is_nan());
        assert_eq!(c.compress_nav(&full.view()).unwrap(), compressed);
        let all = ctx(None);
        let flat = ndarray::Array::from_vec((0..6).map(f64::from).collect()).into_dyn();
        assert_eq!(all.expand_nav(&flat.view(), 0.0).unwrap().shape(), &[2, 3]);
    }

    /// A plugin that declares nothing.
    struct Bare;

    impl Udf for Bare {
        fn new(_: &Context) -> Result<Self> {
            Ok(Bare)
        }
    }

    #[test]
    fn a_plugin_without_declaration_or_description_fails_clearly() {
        let meta = ctx(None).dataset;
        let err = Bare::result_buffers(&Params::default(), &meta).unwrap_err();
        assert!(err.message.contains("neither Udf::declare nor Udf::result_buffers"), "{}", err.message);
        let panic = std::panic::catch_unwind(Bare::describe).unwrap_err();
        let message =
            panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
        assert!(message.unwrap_or_default().contains("neither Udf::declare nor Udf::describe"));
    }
}
