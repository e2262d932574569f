//! `pick`: the raw frames of a (small) ROI (LiberTEM's `PickUDF`, BUILTINS.md §9).
//!
//! Input dtype: native (no conversion). Buffer `intensity`: kind single, extra shape
//! `(N, ..sig)` with `N` the frames processed (the ROI count), dtype = input dtype;
//! `intensity[k]` is the `k`-th selected frame. Like LiberTEM every partition holds the
//! whole `(N, ..sig)` buffer, so use a ROI of a few frames; the merge copies each
//! partition's own frames (LiberTEM adds into zeros, which is the same).

use super::kernels::SliceRuns;
use super::spec;
use crate::array::NdArray;
use crate::udf::{
    BufferDecl, BufferKind, BufferUse, BufferViewMut, CallError, DTypePreference, DatasetMeta, Description,
    InitContext, MergeContext, NamedBuffer, Params, PartitionRunner, RunPlan, Tile, Udf,
};

/// LiberTEM's `PickUDF`.
pub struct Pick {
    description: Description,
}

impl Default for Pick {
    fn default() -> Self {
        let mut d = spec::describe("pick", "Copy the raw frames of a (small) ROI (LiberTEM PickUDF)");
        d.input_dtype = DTypePreference::Native;
        d.custom_merge = true;
        Pick { description: d }
    }
}

impl Udf for Pick {
    fn description(&self) -> &Description {
        &self.description
    }

    fn source(&self) -> &str {
        "builtin:pick"
    }

    fn reads_in_place(&self) -> bool {
        true
    }

    fn plan(&self, _: &Params, _: &DatasetMeta) -> Result<RunPlan, CallError> {
        Ok(spec::plan_of(&self.description))
    }

    fn result_buffers(&self, _: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>, CallError> {
        let mut extra = vec![dataset.frames()];
        extra.extend_from_slice(&dataset.sig_shape);
        Ok(vec![BufferDecl {
            name: "intensity".into(),
            kind: BufferKind::Single,
            dtype: dataset.input_dtype,
            extra_shape: extra,
            usage: BufferUse::Normal,
        }])
    }

    fn start(&self, ctx: InitContext<'_>) -> Result<Box<dyn PartitionRunner + '_>, CallError> {
        let sig = &ctx.dataset.sig_shape;
        let mut shape = vec![ctx.dataset.frames()];
        shape.extend_from_slice(sig);
        let runs = ctx.partition.map(|p| SliceRuns::for_scheme(sig, &p.tiling.slices)).unwrap_or_default();
        Ok(Box::new(PickPartition {
            intensity: Some(NdArray::zeros(ctx.dataset.input_dtype, &shape)),
            runs,
            frame_len: sig.iter().product(),
        }))
    }

    fn merge(
        &self,
        ctx: MergeContext<'_>,
        dest: &mut [BufferViewMut<'_>],
        src: &[NamedBuffer],
    ) -> Result<(), CallError> {
        let d =
            dest.iter_mut().find(|b| b.name == "intensity").ok_or_else(|| CallError::internal("merge: intensity"))?;
        let s = src.iter().find(|b| b.name == "intensity").ok_or_else(|| CallError::internal("merge: intensity"))?;
        let row = ctx.dataset.sig_shape.iter().product::<usize>() * d.dtype.size();
        let start = ctx.partition.origin as usize * row;
        let end = start + ctx.partition.frames * row;
        let (to, from) = (d.bytes.get_mut(start..end), s.array.bytes().get(start..end));
        match (to, from) {
            (Some(to), Some(from)) => to.copy_from_slice(from),
            _ => return Err(CallError::internal("merge: partition outside the picked frames")),
        }
        Ok(())
    }
}

struct PickPartition {
    intensity: Option<NdArray>,
    runs: Vec<SliceRuns>,
    frame_len: usize,
}

impl PartitionRunner for PickPartition {
    fn process(&mut self, tile: &Tile<'_>) -> Result<(), CallError> {
        let intensity = self.intensity.as_mut().ok_or_else(|| CallError::internal("process after export"))?;
        let runs = self.runs.get(tile.scheme_index).ok_or_else(|| CallError::internal("unknown signal slice"))?;
        let size = tile.dtype.size();
        if intensity.dtype() != tile.dtype {
            return Err(CallError::internal("tile dtype is not the input dtype"));
        }
        let frame_bytes = self.frame_len * size;
        let (run, slice) = (runs.run_len * size, runs.slice_len * size);
        let out = intensity.bytes_mut();
        for (f, frame) in tile.data.chunks_exact(slice.max(1)).take(tile.frames).enumerate() {
            let base = (tile.origin as usize + f) * frame_bytes;
            for (k, &start) in runs.starts.iter().enumerate() {
                let to = out
                    .get_mut(base + start * size..base + start * size + run)
                    .ok_or_else(|| CallError::internal("tile beyond the picked frames"))?;
                to.copy_from_slice(&frame[k * run..(k + 1) * run]);
            }
        }
        Ok(())
    }

    fn export(&mut self) -> Result<Vec<NamedBuffer>, CallError> {
        let array = self.intensity.take().ok_or_else(|| CallError::internal("exported twice"))?;
        Ok(vec![NamedBuffer { name: "intensity".into(), array }])
    }
}
