//! The contract's geometry: signal slices, the tiling scheme every UDF of a run shares,
//! and where a slice's pixels lie in a frame.
//!
//! These are contract types (`wit/udf.wit`'s `sig-slice`, `tiling-scheme`): datasets
//! read tiles of them, the executor negotiates them (`dataset::negotiate`), plugins and
//! built-ins receive them. They live here, next to the other contract types, so that
//! every layer above can import them without reaching into `dataset/`.

use super::Method;
use serde::{Deserialize, Serialize};

/// A rectangular part of the frame: `origin` and `shape` per signal axis.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SigSlice {
    pub origin: Vec<usize>,
    pub shape: Vec<usize>,
}

impl SigSlice {
    /// The whole frame of shape `sig`.
    pub fn full(sig: &[usize]) -> Self {
        SigSlice { origin: vec![0; sig.len()], shape: sig.to_vec() }
    }

    /// Pixels in the slice.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The negotiated tiling of a run: every tile is `depth` frames times one of `slices`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TilingScheme {
    /// Frames per tile (tiles at the end of a partition may be shallower). For
    /// `intent == Partition` every tile is a whole partition whatever this says.
    pub depth: usize,
    /// The signal slices of a frame, row-major.
    pub slices: Vec<SigSlice>,
    /// The strongest method among the UDFs.
    pub intent: Method,
}

impl TilingScheme {
    /// A scheme cutting frames of shape `sig` into slices of shape `slice` (clipped at
    /// the borders), `depth` frames deep.
    pub fn from_tile_shape(depth: usize, slice: &[usize], sig: &[usize], intent: Method) -> Self {
        let slice: Vec<usize> = slice.iter().zip(sig).map(|(&s, &f)| s.clamp(1, f.max(1))).collect();
        let counts: Vec<usize> = sig.iter().zip(&slice).map(|(&f, &s)| f.div_ceil(s)).collect();
        let total: usize = counts.iter().product();
        let mut slices = Vec::with_capacity(total);
        for k in 0..total {
            let mut rem = k;
            let mut index = vec![0; sig.len()];
            for d in (0..sig.len()).rev() {
                index[d] = rem % counts[d];
                rem /= counts[d];
            }
            let origin: Vec<usize> = index.iter().zip(&slice).map(|(&i, &s)| i * s).collect();
            let shape = origin.iter().zip(&slice).zip(sig).map(|((&o, &s), &f)| s.min(f - o)).collect();
            slices.push(SigSlice { origin, shape });
        }
        TilingScheme { depth: depth.max(1), slices, intent }
    }

    /// The nominal tile shape `(depth, ..slice shape)`.
    pub fn tile_shape(&self) -> Vec<usize> {
        let mut shape = vec![self.depth];
        if let Some(first) = self.slices.first() {
            shape.extend_from_slice(&first.shape);
        }
        shape
    }
}

/// A signal slice as runs of consecutive pixels of the frame: the slice's elements
/// `k * run_len .. (k + 1) * run_len` are the frame's `starts[k] .. starts[k] + run_len`.
/// Trailing axes the slice spans completely are merged into one run.
///
/// Readers use it to gather a slice from a frame, built-ins to scatter a tile into
/// frame-sized accumulators.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SliceRuns {
    pub run_len: usize,
    pub starts: Vec<usize>,
    /// Pixels in the slice (`run_len * starts.len()`).
    pub slice_len: usize,
}

impl SliceRuns {
    /// The runs of `slice` in frames of shape `sig`.
    pub fn new(sig: &[usize], slice: &SigSlice) -> Self {
        let dims = sig.len();
        if dims == 0 {
            return SliceRuns { run_len: 1, starts: vec![0], slice_len: 1 };
        }
        let mut strides = vec![1; dims];
        for d in (0..dims - 1).rev() {
            strides[d] = strides[d + 1] * sig[d + 1];
        }
        let mut d = dims - 1;
        let mut run_len = slice.shape[d];
        while d > 0 && slice.shape[d] == sig[d] && slice.origin[d] == 0 {
            d -= 1;
            run_len *= slice.shape[d];
        }
        let first = slice.origin[d] * strides[d];
        let outer: Vec<(usize, usize, usize)> = (0..d).map(|a| (slice.origin[a], slice.shape[a], strides[a])).collect();
        let count: usize = outer.iter().map(|&(_, n, _)| n).product();
        let starts = (0..count)
            .map(|mut k| {
                let mut offset = first;
                for &(origin, n, stride) in outer.iter().rev() {
                    offset += (origin + k % n) * stride;
                    k /= n;
                }
                offset
            })
            .collect();
        SliceRuns { run_len, starts, slice_len: slice.len() }
    }

    /// The runs of every slice of a tiling scheme, indexed like the scheme.
    pub fn for_scheme(sig: &[usize], slices: &[SigSlice]) -> Vec<SliceRuns> {
        slices.iter().map(|s| Self::new(sig, s)).collect()
    }

    /// Whether the slice is the whole frame.
    pub fn is_full(&self, frame_len: usize) -> bool {
        self.slice_len == frame_len
    }

    /// Each run as `(offset in the slice, offset in the frame, length)`, cut into pieces of
    /// at most `chunk` elements.
    pub fn blocks_of(&self, chunk: usize) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        self.starts.iter().enumerate().flat_map(move |(k, &start)| {
            (0..self.run_len)
                .step_by(chunk.max(1))
                .map(move |c| (k * self.run_len + c, start + c, chunk.min(self.run_len - c)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(frame: &[usize], origin: &[usize], shape: &[usize]) -> (usize, Vec<usize>) {
        let r = SliceRuns::new(frame, &SigSlice { origin: origin.to_vec(), shape: shape.to_vec() });
        (r.run_len, r.starts)
    }

    #[test]
    fn full_rows_merge_into_one_run() {
        assert_eq!(runs(&[4, 5], &[1, 0], &[2, 5]), (10, vec![5]));
        assert_eq!(runs(&[4, 5], &[0, 0], &[4, 5]), (20, vec![0]));
        assert_eq!(runs(&[2, 3, 4], &[1, 1, 0], &[1, 2, 4]), (8, vec![16]));
    }

    #[test]
    fn partial_rows_split_into_runs() {
        assert_eq!(runs(&[4, 5], &[1, 2], &[2, 3]), (3, vec![7, 12]));
        assert_eq!(runs(&[2, 3, 4], &[0, 1, 1], &[2, 2, 2]), (2, vec![5, 9, 17, 21]));
    }

    #[test]
    fn blocks_cut_runs_into_pieces() {
        let r = SliceRuns::new(&[2, 10], &SigSlice { origin: vec![0, 1], shape: vec![2, 7] });
        let blocks: Vec<_> = r.blocks_of(4).collect();
        assert_eq!(blocks, vec![(0, 1, 4), (4, 5, 3), (7, 11, 4), (11, 15, 3)]);
    }

    #[test]
    fn border_slices_are_clipped() {
        let scheme = TilingScheme::from_tile_shape(7, &[7, 7], &[24, 24], Method::Tile);
        assert_eq!(scheme.slices.len(), 16);
        assert_eq!(scheme.slices[3], SigSlice { origin: vec![0, 21], shape: vec![7, 3] });
        assert_eq!(scheme.slices[15].shape, vec![3, 3]);
        assert_eq!(scheme.tile_shape(), vec![7, 7, 7]);
    }
}
