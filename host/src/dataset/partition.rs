//! Partitions: contiguous ranges of the flat nav axis, one plugin instance each.

use crate::roi::Roi;
use std::ops::Range;

/// LiberTEM's `MAX_PARTITION_SIZE`: 512 MiB of float32-equivalent pixels.
const PARTITION_PIXELS: usize = 512 * 1024 * 1024 / 4;

/// A partition of the dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    /// Index among all partitions of the run (including skipped empty ones).
    pub index: usize,
    /// True flat nav range the partition spans.
    pub range: Range<u64>,
    /// True flat nav indices of the selected (ROI) frames, ascending.
    pub frames: Vec<u64>,
    /// Compressed index of the first selected frame: selected frames before it.
    pub origin: u64,
}

impl Partition {
    /// Number of selected frames.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
}

/// LiberTEM's default partition count, raised to at least two per thread (so rayon can
/// balance the load), and capped at one frame per partition.
pub fn default_partition_count(nav_len: usize, sig_len: usize, threads: usize) -> usize {
    let threads = threads.max(1);
    let num = nav_len.saturating_mul(sig_len) / PARTITION_PIXELS;
    let per_core = num / threads + usize::from(!num.is_multiple_of(threads));
    let libertem = per_core.max(1) * threads;
    libertem.max(2 * threads).min(nav_len).max(1)
}

/// Split `nav_len` frames into `count` partitions with NumPy's
/// `linspace(0, nav_len, count + 1, dtype=int)` boundaries; partitions without a
/// selected frame are dropped.
pub fn plan_partitions(nav_len: usize, count: usize, roi: Option<&Roi>) -> Vec<Partition> {
    let count = count.clamp(1, nav_len.max(1));
    let mut partitions = Vec::with_capacity(count);
    let mut origin = 0u64;
    for index in 0..count {
        let start = (index as u128 * nav_len as u128 / count as u128) as u64;
        let end = ((index + 1) as u128 * nav_len as u128 / count as u128) as u64;
        let frames: Vec<u64> = match roi {
            None => (start..end).collect(),
            Some(roi) => (start..end).filter(|&f| roi.contains(f as usize)).collect(),
        };
        let selected = frames.len() as u64;
        if selected > 0 {
            partitions.push(Partition { index, range: start..end, frames, origin });
        }
        origin += selected;
    }
    partitions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_follow_linspace() {
        let parts = plan_partitions(10, 3, None);
        let ranges: Vec<_> = parts.iter().map(|p| p.range.clone()).collect();
        assert_eq!(ranges, vec![0..3, 3..6, 6..10]);
        assert_eq!(parts[2].origin, 6);
    }

    #[test]
    fn roi_compresses_and_skips_empty_partitions() {
        let mask: Vec<bool> = (0..10).map(|i| i == 1 || i == 8 || i == 9).collect();
        let roi = Roi::from_mask(mask);
        let parts = plan_partitions(10, 3, Some(&roi));
        assert_eq!(parts.len(), 2);
        assert_eq!((parts[0].index, parts[0].origin, parts[0].frames.clone()), (0, 0, vec![1]));
        assert_eq!((parts[1].index, parts[1].origin, parts[1].frames.clone()), (2, 1, vec![8, 9]));
    }

    #[test]
    fn default_count_has_two_per_thread() {
        assert_eq!(default_partition_count(256, 128 * 128, 2), 4);
        assert_eq!(default_partition_count(3, 16, 2), 3);
        // 4 GiB of float32 on 2 threads: 8 partitions of 512 MiB.
        assert_eq!(default_partition_count(1 << 16, 1 << 14, 2), 8);
    }
}
