//! K2IS: eight sector files with out-of-step starts, leading shutter-closed frames and a
//! trailing partial frame are synchronised like LiberTEM does, and the 12-bit pixels of
//! every block land where they belong; missing and inconsistent sector files fail clearly.

use udf_host::dataset::{self, Dataset, OpenOptions, SigSlice};
use udf_host::dtype::DType;
use udf_host_tests::fixture_formats::k2is::{self, FRAME_H, FRAME_W, K2Options, pixel};

fn options(scan: Option<(usize, usize)>) -> K2Options {
    K2Options { frames: 5, inactive: 2, skew: [0, 3, 0, 31, 1, 0, 5, 0], trailing: 7, scan, seed: 3 }
}

/// Read `frames` x `slice` as f32 and compare with the writer's formula, `first` being
/// the written frame that dataset frame 0 is.
fn check(ds: &dyn Dataset, frames: &[u64], slice: &SigSlice, first: usize, seed: u64) {
    let mut buf = vec![0u8; frames.len() * slice.len() * 4];
    ds.read_tile(frames, slice, DType::F32, &mut buf).unwrap_or_else(|e| panic!("{e}"));
    let got: &[f32] = bytemuck::cast_slice(&buf);
    let mut k = 0;
    for &f in frames {
        for y in slice.origin[0]..slice.origin[0] + slice.shape[0] {
            for x in slice.origin[1]..slice.origin[1] + slice.shape[1] {
                let want = pixel(first + f as usize, y, x, seed);
                assert_eq!(got[k], f32::from(want), "frame {f} pixel ({y}, {x}) of slice {slice:?}");
                k += 1;
            }
        }
    }
}

#[test]
fn scan_with_gtg_syncs_to_one_frame_before_the_shutter_flag() {
    let dir = tempfile::tempdir().unwrap();
    let gtg = k2is::write(dir.path(), "scan", &options(Some((2, 2))));
    // Open by the .gtg file or by any sector file.
    for path in [gtg.clone(), k2is::sector_path(dir.path(), "scan", 4)] {
        let ds = dataset::open(&path, &OpenOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ds.info().format, "k2is");
        assert_eq!((ds.shape().nav.clone(), ds.shape().sig.clone()), (vec![2, 2], vec![FRAME_H, FRAME_W]));
        assert_eq!(ds.base_shape(), vec![930, 16]);
        assert_eq!(ds.stored_dtype().dtype, DType::U16);
        // Written frames 0, 1 have the shutter flag clear: data starts at frame 1.
        check(ds.as_ref(), &[0, 3], &SigSlice::full(&[FRAME_H, FRAME_W]), 1, 3);
    }
    let ds = dataset::open(&gtg, &OpenOptions::default()).unwrap();
    // Slices across block and sector borders, and the native dtype.
    check(ds.as_ref(), &[1, 2], &SigSlice { origin: vec![900, 250], shape: vec![61, 300] }, 1, 3);
    check(ds.as_ref(), &[2], &SigSlice { origin: vec![1859, 2047], shape: vec![1, 1] }, 1, 3);
    let mut buf = vec![0u8; 930 * 16 * 2];
    ds.read_tile(&[0], &SigSlice { origin: vec![930, 16], shape: vec![930, 16] }, DType::U16, &mut buf).unwrap();
    let native: &[u16] = bytemuck::cast_slice(&buf);
    assert_eq!(native[17], pixel(1, 931, 17, 3));
}

#[test]
fn time_series_without_scan_shape_starts_at_the_shutter_flag() {
    let dir = tempfile::tempdir().unwrap();
    let gtg = k2is::write(dir.path(), "series", &options(None));
    let ds = dataset::open(&gtg, &OpenOptions::default()).unwrap();
    // 5 whole frames written, 2 with the shutter closed: 3 frames, from written frame 2.
    assert_eq!(ds.shape().nav, vec![3]);
    check(ds.as_ref(), &[0, 2], &SigSlice { origin: vec![0, 0], shape: vec![1860, 64] }, 2, 3);
    // Without the .gtg file the nav shape must be given.
    std::fs::remove_file(&gtg).unwrap();
    let sector = k2is::sector_path(dir.path(), "series", 0);
    let msg = dataset::open(&sector, &OpenOptions::default()).err().expect("opened").to_string();
    assert!(msg.contains("series_.gtg") && msg.contains("missing") && msg.contains("--nav-shape"), "{msg}");
    let ds = dataset::open(&sector, &OpenOptions { nav_shape: Some(vec![3]), ..OpenOptions::default() }).unwrap();
    check(ds.as_ref(), &[1], &SigSlice { origin: vec![100, 1000], shape: vec![3, 50] }, 2, 3);
}

fn open_err(path: &std::path::Path) -> String {
    match dataset::open(path, &OpenOptions::default()) {
        Ok(_) => panic!("{} opened", path.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn missing_truncated_and_inconsistent_sectors() {
    let dir = tempfile::tempdir().unwrap();
    let o = K2Options { frames: 3, inactive: 1, skew: [0; 8], trailing: 0, scan: Some((1, 2)), seed: 1 };
    let gtg = k2is::write(dir.path(), "bad", &o);
    let s3 = k2is::sector_path(dir.path(), "bad", 2);
    let good = std::fs::read(&s3).unwrap();

    // A missing sector file.
    std::fs::remove_file(&s3).unwrap();
    let msg = open_err(&gtg);
    assert!(msg.contains("expected 8 sector files") && msg.contains("found 7"), "{msg}");

    // Not a K2IS block at the start (wrong sync word).
    let mut wrong = good.clone();
    wrong[0] = 0;
    std::fs::write(&s3, &wrong).unwrap();
    let msg = open_err(&gtg);
    assert!(msg.contains("bad_3.bin") && msg.contains("block at offset 0") && msg.contains("sync word"), "{msg}");

    // One sector shorter than the others: all sectors end with it (one frame less).
    std::fs::write(&s3, &good[..good.len() - 32 * k2is::BLOCK_SIZE]).unwrap();
    let ds = dataset::open(&gtg, &OpenOptions::default()).unwrap();
    assert!(ds.info().details.iter().any(|(k, v)| k == "frames_after_sync" && v == "2"), "{:?}", ds.info());
    check(ds.as_ref(), &[0, 1], &SigSlice { origin: vec![0, 500], shape: vec![1860, 40] }, 0, 1);

    // Truncated inside a block, and to less than a frame.
    std::fs::write(&s3, &good[..good.len() - 100]).unwrap();
    let ds = dataset::open(&gtg, &OpenOptions::default());
    if let Ok(ds) = ds {
        // The partial block was dropped at sync; whatever opened must read cleanly.
        let mut buf = vec![0u8; FRAME_H * FRAME_W * 4];
        ds.read_tile(&[0], &SigSlice::full(&[FRAME_H, FRAME_W]), DType::F32, &mut buf).unwrap();
    }
    std::fs::write(&s3, &good[..10 * k2is::BLOCK_SIZE]).unwrap();
    let msg = open_err(&gtg);
    assert!(msg.contains("bad_3.bin") && msg.contains("less than one frame"), "{msg}");

    // Frame ids that disagree between sectors.
    let mut other = good.clone();
    for b in 0..other.len() / k2is::BLOCK_SIZE {
        let at = b * k2is::BLOCK_SIZE + 24;
        let id = u32::from_be_bytes(other[at..at + 4].try_into().unwrap()) + 50;
        other[at..at + 4].copy_from_slice(&id.to_be_bytes());
    }
    std::fs::write(&s3, &other).unwrap();
    let msg = open_err(&gtg);
    assert!(msg.contains("bad_3.bin") && msg.contains("inconsistent sectors"), "{msg}");

    // A scan shape larger than the data.
    std::fs::write(&s3, &good).unwrap();
    std::fs::write(&gtg, k2is::gtg_bytes(Some((4, 4)))).unwrap();
    let msg = open_err(&gtg);
    assert!(msg.contains("needs 16 frames") && msg.contains("hold 3"), "{msg}");

    // A block corrupted after opening: reading it names the file and offset.
    std::fs::write(&gtg, k2is::gtg_bytes(Some((1, 2)))).unwrap();
    let ds = dataset::open(&gtg, &OpenOptions::default()).unwrap();
    let mut spoiled = good.clone();
    spoiled[32 * k2is::BLOCK_SIZE] = 0; // sync word of frame 1's first block
    std::fs::write(&s3, &spoiled).unwrap();
    let mut buf = vec![0u8; FRAME_H * FRAME_W * 4];
    let msg = ds.read_tile(&[1], &SigSlice::full(&[FRAME_H, FRAME_W]), DType::F32, &mut buf);
    // The file was rewritten under the mapping; either the old or the new bytes are seen.
    if let Err(e) = msg {
        let msg = e.to_string();
        assert!(msg.contains("bad_3.bin") && msg.contains("offset"), "{msg}");
    }
}
