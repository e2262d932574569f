//! Tiling negotiation: one tile shape for all UDFs of a run (LiberTEM's `Negotiator`).
//!
//! A tile is `depth` consecutive (ROI-selected) frames times one signal slice. The
//! scheme lists the signal slices a frame is cut into (row-major, border slices
//! smaller). The rules follow LiberTEM 0.16 (`reference/libertem/API.md` §7):
//! frame UDFs force full frames, partition UDFs whole partitions, tile UDFs get about
//! 1 MiB (or their preferences), and the shape grows from the dataset's base shape.

use super::DatasetShape;
use crate::udf::{Method, TileDepth, TileSize, TilingScheme};

/// Default tile size for tile UDFs and the I/O limit when data must be copied.
const ONE_MIB: usize = 1 << 20;
/// LiberTEM's `TILE_DEPTH_DEFAULT`.
const DEFAULT_DEPTH: usize = 32;

/// One UDF's wishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileRequest {
    pub method: Method,
    pub depth: TileDepth,
    pub size: TileSize,
}

/// Negotiate the tiling for `requests` (one per UDF).
///
/// - `base_shape`: the format's smallest natural block of a frame;
/// - `partition_len`: frames in the (first) partition;
/// - `input_size` / `native_size`: bytes per element of the input and stored dtype;
/// - `needs_copy`: the data cannot be handed over straight from the file (a dtype
///   conversion, a ROI gather, or delivery into a wasm guest), so I/O is limited to
///   ~1 MiB pieces.
pub fn negotiate(
    requests: &[TileRequest],
    shape: &DatasetShape,
    base_shape: &[usize],
    partition_len: usize,
    input_size: usize,
    native_size: usize,
    needs_copy: bool,
) -> TilingScheme {
    let sig = &shape.sig;
    let partition_len = partition_len.max(1);
    let frame_px = shape.sig_len().max(1);
    let intent = if requests.iter().any(|r| r.method == Method::Partition) {
        Method::Partition
    } else if requests.iter().any(|r| r.method == Method::Frame) {
        Method::Frame
    } else {
        Method::Tile
    };
    if intent == Method::Partition {
        return TilingScheme::from_tile_shape(partition_len, sig, sig, intent);
    }

    let io_max = if needs_copy { ONE_MIB } else { input_size * partition_len * frame_px };
    let mut depth = 1;
    let mut size: Option<usize> = None;
    for r in requests {
        let (d, s) = match r.method {
            Method::Frame => (1, ONE_MIB.max(frame_px * input_size)),
            Method::Partition => unreachable!("handled above"),
            Method::Tile => {
                let d = match r.depth {
                    TileDepth::Default => DEFAULT_DEPTH,
                    TileDepth::Max => partition_len,
                    TileDepth::Frames(n) => usize::try_from(n).unwrap_or(usize::MAX).max(1),
                };
                let pref = match r.size {
                    TileSize::BestFit => ONE_MIB,
                    TileSize::Max => usize::MAX,
                    TileSize::Bytes(n) => usize::try_from(n).unwrap_or(usize::MAX),
                };
                (d.min(partition_len), pref.min(io_max))
            }
        };
        depth = depth.max(d);
        size = Some(size.map_or(s, |old: usize| old.min(s)));
    }
    let size_px = (size.unwrap_or(ONE_MIB) / input_size.max(1)).max(1);

    // Base shape: full frames if any UDF works on frames, else the format's.
    let mut base: Vec<usize> = if intent == Method::Frame { sig.clone() } else { base_shape.to_vec() };
    let base_px: usize = base.iter().product();
    // At least one base shape per tile, and at least 16 KiB of native data per slice.
    let size_px = size_px.max(base_px);
    let min_sig_px = (4 * 4096 / native_size.max(1)).min(frame_px);
    let factors = scale_factors(&base, sig, min_sig_px);
    for (b, f) in base.iter_mut().zip(factors) {
        *b *= f;
    }
    let slice_px: usize = base.iter().product::<usize>().max(1);
    let max_depth = (size_px / slice_px).max(1);
    depth = depth.min(max_depth).max(1);

    // Grow depth first, then the signal axes, within the partition and the size.
    let mut tile = vec![depth];
    tile.extend_from_slice(&base);
    let mut container = vec![partition_len];
    container.extend_from_slice(sig);
    let factors = scale_factors(&tile, &container, size_px);
    for (t, f) in tile.iter_mut().zip(factors) {
        *t *= f;
    }
    TilingScheme::from_tile_shape(tile[0], &tile[1..], sig, intent)
}

/// LiberTEM's `_get_scale_factors`: per axis, how many times `base` can be repeated
/// (without exceeding `container`) so the product stays within `size`, greedily from
/// the first axis.
fn scale_factors(base: &[usize], container: &[usize], size: usize) -> Vec<usize> {
    let mut current: usize = base.iter().product::<usize>().max(1);
    base.iter()
        .zip(container)
        .map(|(&b, &c)| {
            let b = b.max(1);
            let room = (c / b).max(1);
            let fits = (size / current).max(1);
            let f = room.min(fits);
            current *= f;
            f
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_raw() -> DatasetShape {
        DatasetShape { nav: vec![16, 16], sig: vec![128, 128] }
    }

    fn request(method: Method) -> TileRequest {
        TileRequest { method, depth: TileDepth::Default, size: TileSize::BestFit }
    }

    #[test]
    fn golden_shapes_of_libertem_tests() {
        // tests/io/test_tiling_negotiation.py: default_raw, float32, 2 partitions, mmap.
        let shape = default_raw();
        let base = [1, 128];
        let tile = negotiate(&[request(Method::Tile)], &shape, &base, 128, 4, 4, false);
        assert_eq!(tile.tile_shape(), vec![64, 32, 128]);
        let frame = negotiate(&[request(Method::Frame)], &shape, &base, 128, 4, 4, false);
        assert_eq!(frame.tile_shape(), vec![16, 128, 128]);
        let part = negotiate(&[request(Method::Partition)], &shape, &base, 128, 4, 4, false);
        assert_eq!(part.tile_shape(), vec![128, 128, 128]);
    }

    #[test]
    fn golden_shapes_of_the_benchmark_files() {
        // BENCH.md: uint16 raw decoded to float32 -> (32, 32, 256), 8 sig slices;
        // float32 raw with TILE_SIZE_MAX -> whole partitions; frame UDFs -> (4, 256, 256).
        let shape = DatasetShape { nav: vec![128, 128], sig: vec![256, 256] };
        let base = [1, 256];
        let u16 = negotiate(&[request(Method::Tile)], &shape, &base, 2048, 4, 2, true);
        assert_eq!(u16.tile_shape(), vec![32, 32, 256]);
        assert_eq!(u16.slices.len(), 8);
        let max = TileRequest { method: Method::Tile, depth: TileDepth::Default, size: TileSize::Max };
        let f32 = negotiate(&[max], &shape, &base, 2048, 4, 4, false);
        assert_eq!(f32.tile_shape(), vec![2048, 256, 256]);
        let frame = negotiate(&[request(Method::Frame)], &shape, &base, 2048, 4, 4, false);
        assert_eq!(frame.tile_shape(), vec![4, 256, 256]);
    }

    #[test]
    fn strongest_method_wins() {
        let shape = DatasetShape { nav: vec![64], sig: vec![1860, 2048] };
        let base = [930, 16];
        let mixed = negotiate(&[request(Method::Tile), request(Method::Frame)], &shape, &base, 32, 4, 2, true);
        assert_eq!(mixed.tile_shape(), vec![1, 1860, 2048]);
        let with_part = negotiate(
            &[request(Method::Tile), request(Method::Frame), request(Method::Partition)],
            &shape,
            &base,
            32,
            4,
            2,
            true,
        );
        assert_eq!(with_part.tile_shape(), vec![32, 1860, 2048]);
    }

    #[test]
    fn scale_factors_match_libertem() {
        let size = |n: usize| scale_factors(&[930, 16], &[1860, 2048], n);
        assert_eq!(size(1024), vec![1, 1]);
        assert_eq!(size(930 * 16 * 16), vec![2, 8]);
        assert_eq!(size(930 * 16 * 128), vec![2, 64]);
        assert_eq!(size(930 * 16 * 129), vec![2, 64]);
        assert_eq!(size(930 * 16 * 10_000), vec![2, 128]);
    }
}
