//! TVIPS: multi-file series with version-2 image headers (scan shape and sync offset
//! detected from scan positions), version 1, 8/16 bits; broken series.

use udf_host::dataset::{OpenOptions, SigSlice};
use udf_host::dtype::DType;
use udf_host_tests::fixture_formats::mib::counts;
use udf_host_tests::fixture_formats::read::{expected_tile, open, open_error, read_all, read_tile};
use udf_host_tests::fixture_formats::tvips::{self, TvipsSeries};

fn series(bits: u32, version: i32) -> TvipsSeries {
    TvipsSeries { bits, version, image_header_bytes: 128, frames_per_file: 7, lead_in: 3, scan_width: 4 }
}

#[test]
fn scan_shape_and_sync_offset_come_from_the_image_headers() {
    let dir = tempfile::tempdir().unwrap();
    for bits in [8, 16] {
        // 3 frames before the scan, a 5 x 4 scan, 2 frames after: 25 frames in 4 files.
        let data = counts(&[25], &[6, 8], if bits == 8 { 255 } else { 65535 }, u64::from(bits));
        let paths = tvips::write_tvips(dir.path(), &format!("rec{bits}"), &data, series(bits, 2));
        assert_eq!(paths.len(), 4);
        let ds = open(&paths[2], &OpenOptions::default());
        assert_eq!(ds.shape().nav, vec![5, 4], "{bits}");
        assert_eq!(read_all(ds.as_ref()), data.values[3 * 48..23 * 48].to_vec(), "{bits}");
        let slice = SigSlice { origin: vec![1, 1], shape: vec![4, 6] };
        // Frames 3..5 and 10 of the scan: files 0, 1 and 1.
        assert_eq!(
            read_tile(ds.as_ref(), &[3, 4, 10], &slice, DType::F32),
            expected_tile(&data, &[6, 7, 13], &slice),
            "{bits}"
        );
        // An explicit sync offset and nav shape win.
        let ds =
            open(&paths[0], &OpenOptions { sync_offset: Some(0), nav_shape: Some(vec![25]), ..Default::default() });
        assert_eq!(read_all(ds.as_ref()), data.values);
    }
    // Version 1: 12-byte image headers, no scan positions.
    let data = counts(&[6], &[4, 4], 255, 3);
    let paths = tvips::write_tvips(dir.path(), "old", &data, TvipsSeries { frames_per_file: 10, ..series(8, 1) });
    let ds = open(&paths[0], &OpenOptions::default());
    assert_eq!(ds.shape().nav, vec![6]);
    assert_eq!(read_all(ds.as_ref()), data.values);
}

#[test]
fn broken_series_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let data = counts(&[25], &[6, 8], 255, 9);
    let paths = tvips::write_tvips(dir.path(), "gap", &data, series(8, 2));
    std::fs::remove_file(&paths[1]).unwrap();
    let msg = open_error(&paths[0], &OpenOptions::default());
    assert!(msg.contains("gap_002.tvips") && msg.contains("expected 001"), "{msg}");

    let dir = tempfile::tempdir().unwrap();
    let paths = tvips::write_tvips(dir.path(), "cut", &data, series(8, 2));
    let bytes = std::fs::read(&paths[1]).unwrap();
    std::fs::write(&paths[1], &bytes[..bytes.len() - 5]).unwrap();
    let msg = open_error(&paths[0], &OpenOptions::default());
    assert!(msg.contains("cut_001.tvips") && msg.contains("truncated") && msg.contains("offset 1056"), "{msg}");

    // A file from another recording: its image counter does not continue.
    let dir = tempfile::tempdir().unwrap();
    let paths = tvips::write_tvips(dir.path(), "mix", &data, series(8, 2));
    let mut bytes = std::fs::read(&paths[2]).unwrap();
    bytes[..4].copy_from_slice(&999u32.to_le_bytes());
    std::fs::write(&paths[2], &bytes).unwrap();
    let msg = open_error(&paths[0], &OpenOptions::default());
    assert!(msg.contains("mix_002.tvips") && msg.contains("counter") && msg.contains("999"), "{msg}");

    // A bad series header.
    let mut bytes = std::fs::read(&paths[0]).unwrap();
    bytes[16] = 12;
    std::fs::write(&paths[0], &bytes).unwrap();
    let msg = open_error(&paths[0], &OpenOptions::default());
    assert!(msg.contains("mix_000.tvips") && msg.contains("offset 16") && msg.contains("IBPP"), "{msg}");
}

#[test]
fn a_series_is_exactly_name_nnn_and_constant_counters_only_warn() {
    // Regression (issue 22, item 5), the layout of rosettasciio's TVIPS test files:
    // `x_000.tvips` next to a split series `x_split_000..002.tvips` whose image counters
    // (60-byte version-2 headers) are all 0.
    let dir = tempfile::tempdir().unwrap();
    let single = counts(&[6], &[4, 5], 65535, 31);
    let s = TvipsSeries { bits: 16, version: 2, image_header_bytes: 60, frames_per_file: 6, lead_in: 0, scan_width: 3 };
    let x = tvips::write_tvips(dir.path(), "x", &single, s).remove(0);
    let split = counts(&[5], &[4, 5], 65535, 32);
    let parts = tvips::write_tvips(dir.path(), "x_split", &split, TvipsSeries { frames_per_file: 2, ..s });
    assert_eq!(parts.len(), 3);
    let stride = 60 + 4 * 5 * 2;
    for (k, p) in parts.iter().enumerate() {
        let mut bytes = std::fs::read(p).unwrap();
        let start = if k == 0 { 256 } else { 0 };
        for at in (start..bytes.len()).step_by(stride) {
            bytes[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
        }
        std::fs::write(p, bytes).unwrap();
    }
    let ds = open(&x, &OpenOptions::default());
    assert_eq!(ds.shape().nav_len(), 6, "only x_000.tvips, not the x_split series");
    assert_eq!(read_all(ds.as_ref()), single.values);
    let ds = open(&parts[1], &OpenOptions::default());
    assert_eq!(ds.shape().nav_len(), 5);
    assert_eq!(read_all(ds.as_ref()), split.values);
    let info = ds.info();
    let warning = info.details.iter().find(|(k, _)| k == "warning").map(|(_, v)| v.clone()).unwrap_or_default();
    assert!(warning.contains("counters are all 0"), "{:?}", info.details);
}
