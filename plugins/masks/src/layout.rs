//! The masks of one partition, prepared once for every signal slice of the tiling scheme:
//! dense (runs of consecutive pixels, so each dot product runs over contiguous memory) or
//! sparse (CSR: per mask the non-zero pixels of the slice).

use crate::values::{Value, Widen};
use udf_sdk::{Result, UdfError};

/// A run of consecutive pixels of a signal slice: `len` pixels starting at `tile` in the
/// tile's frame and at `frame` in the full frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    tile: usize,
    frame: usize,
    len: usize,
}

/// Runs covering a rectangular signal slice, in the slice's C order, merged where they are
/// contiguous in the frame too (a full-width slice is a single run).
fn runs(origin: &[usize], shape: &[usize], frame: &[usize]) -> Result<Vec<Run>> {
    let fits = origin.len() == frame.len()
        && shape.len() == frame.len()
        && origin.iter().zip(shape).zip(frame).all(|((&o, &s), &f)| o.checked_add(s).is_some_and(|end| end <= f));
    if !fits {
        return Err(UdfError::invalid_data(format!(
            "masks: signal slice at {origin:?} of shape {shape:?} does not fit the frame {frame:?}"
        )));
    }
    let Some((&len, outer)) = shape.split_last() else {
        return Ok(vec![Run { tile: 0, frame: 0, len: 1 }]);
    };
    let count: usize = outer.iter().product();
    let mut strides = vec![1; frame.len()];
    for d in (0..frame.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * frame[d + 1];
    }
    let mut out: Vec<Run> = Vec::new();
    for k in 0..count {
        let (mut rem, mut offset) = (k, origin[frame.len() - 1]);
        for d in (0..outer.len()).rev() {
            offset += (origin[d] + rem % outer[d]) * strides[d];
            rem /= outer[d];
        }
        let run = Run { tile: k * len, frame: offset, len };
        match out.last_mut() {
            Some(last) if last.frame + last.len == run.frame => last.len += len,
            _ => out.push(run),
        }
    }
    Ok(out)
}

enum SliceMasks<D: Value> {
    /// The runs of the slice, each with its masks as the dtype's dense product reads
    /// them (packed for the SDK's SIMD kernel for float32).
    Dense { px: usize, runs: Vec<(Run, D::Run)> },
    /// Per mask the non-zero pixels of the slice (tile-relative index) and their values.
    Sparse { px: usize, indptr: Vec<usize>, indices: Vec<usize>, values: Vec<D> },
}

/// The masks, dense or sparse, ready for each slice of the tiling scheme.
pub struct Masks<D: Value> {
    count: usize,
    slices: Vec<SliceMasks<D>>,
}

impl<D: Value> Masks<D> {
    /// Prepare `values` (`count` masks of `frame` shape, C order) for the signal slices
    /// `slices` (`(origin, shape)` each), as CSR if `sparse`.
    pub fn new(
        values: Vec<D>,
        count: usize,
        frame: &[usize],
        slices: &[(Vec<usize>, Vec<usize>)],
        sparse: bool,
    ) -> Result<Self> {
        let frame_px: usize = frame.iter().product();
        if values.len() != count * frame_px {
            return Err(UdfError::internal(format!(
                "masks: {} values for {count} masks of {frame_px} pixels",
                values.len()
            )));
        }
        let mut prepared = Vec::with_capacity(slices.len());
        for (origin, shape) in slices {
            let runs = runs(origin, shape, frame)?;
            let px = shape.iter().product();
            if !sparse {
                let runs = runs.into_iter().map(|run| (run, D::run(&values[run.frame..], frame_px, count, run.len)));
                prepared.push(SliceMasks::Dense { px, runs: runs.collect() });
                continue;
            }
            let (mut indptr, mut indices, mut nonzero) = (vec![0], Vec::new(), Vec::new());
            for mask in values.chunks_exact(frame_px.max(1)).take(count) {
                for run in &runs {
                    for (i, &v) in mask[run.frame..run.frame + run.len].iter().enumerate() {
                        if !v.is_zero() {
                            indices.push(run.tile + i);
                            nonzero.push(v);
                        }
                    }
                }
                indptr.push(indices.len());
            }
            // Zero-pixel frames: `chunks_exact(1)` above yields nothing, so pad the rows.
            indptr.resize(count + 1, indices.len());
            prepared.push(SliceMasks::Sparse { px, indptr, indices, values: nonzero });
        }
        Ok(Masks { count, slices: prepared })
    }

    /// `out[f, m] += Σ_p tile[f, p] · mask_m[p]` over the pixels `p` of signal slice
    /// `index`; `tile` is `[frames, px]`, `out` is `[frames, count]`.
    pub fn apply<I: Widen<D>>(&self, index: usize, tile: &[I], out: &mut [D]) -> Result<()> {
        let count = self.count;
        let slice = self.slices.get(index).ok_or_else(|| {
            UdfError::internal(format!(
                "masks: tile of signal slice {index}, but the tiling scheme has {}",
                self.slices.len()
            ))
        })?;
        let px = match slice {
            SliceMasks::Dense { px, .. } | SliceMasks::Sparse { px, .. } => *px,
        };
        let frames = tile.len().checked_div(px).unwrap_or(0);
        if tile.len() != frames * px || out.len() != frames * count {
            return Err(UdfError::internal(format!(
                "masks: tile of {} values and {} results do not fit {px} pixels x {count} masks",
                tile.len(),
                out.len()
            )));
        }
        if count == 0 || px == 0 {
            return Ok(());
        }
        match slice {
            SliceMasks::Dense { runs, .. } => {
                for (run, masks) in runs {
                    I::dot_products(&tile[run.tile..], px, masks, out);
                }
            }
            SliceMasks::Sparse { indptr, indices, values, .. } => {
                for (row, acc) in tile.chunks_exact(px).zip(out.chunks_exact_mut(count)) {
                    for (m, a) in acc.iter_mut().enumerate() {
                        let (start, end) = (indptr[m], indptr[m + 1]);
                        let mut total = D::default();
                        for (&p, &v) in indices[start..end].iter().zip(&values[start..end]) {
                            total += row[p].widen() * v;
                        }
                        *a += total;
                    }
                }
            }
        }
        Ok(())
    }
}
