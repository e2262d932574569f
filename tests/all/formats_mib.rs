//! Merlin `.mib`: every pixel type and counter depth, quad layouts, multi-file sets,
//! `.hdr` scan shapes, sync offsets and reshapes read back exactly; bad files give
//! errors naming the file and offset; a wasm plugin runs over a MIB set end to end.

use std::path::Path;
use std::sync::Arc;
use udf_host::dataset::{self, Dataset, OpenOptions, SigSlice};
use udf_host::dtype::DType;
use udf_host::exec::RunOptions;
use udf_host::udf::{Params, Udf};
use udf_host_tests::fixture_formats::mib::{self, MibKind, MibSet};
use udf_host_tests::fixture_formats::read::{expected_tile, open, open_error, read_all, read_tile};
use udf_host_tests::reference::{assert_close, sum_frames, to_f64};
use udf_host_tests::{load, run_on};

fn read_slice(ds: &dyn Dataset, frames: &[u64], slice: &SigSlice, dtype: DType) -> Vec<f64> {
    read_tile(ds, frames, slice, dtype)
}

fn expected_slice(data: &udf_host_tests::fixtures::Data, frames: &[usize], slice: &SigSlice) -> Vec<f64> {
    expected_tile(data, frames, slice)
}

fn error(path: &Path, options: &OpenOptions) -> String {
    open_error(path, options)
}

#[test]
fn every_pixel_type_and_counter_depth_reads_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    for (i, kind) in MibKind::ALL.into_iter().enumerate() {
        // 64-pixel rows: whole 64-bit words for 1-bit data.
        let data = mib::counts(&[2, 3], &[5, 64], kind.max(), 10 + i as u64);
        let paths = mib::write_mib(dir.path(), &format!("k{i}_"), &data, MibSet::new(kind));
        let ds = open(&paths[0], &OpenOptions { nav_shape: Some(vec![2, 3]), ..Default::default() });
        assert_eq!(ds.shape().sig, vec![5, 64], "{kind:?}");
        assert_eq!(ds.shape().nav, vec![2, 3], "{kind:?}");
        let native = ds.stored_dtype().dtype;
        let expected_native = match kind {
            MibKind::U8 | MibKind::R6 => DType::U8,
            MibKind::U16 | MibKind::R12 => DType::U16,
            MibKind::U32 | MibKind::R24 => DType::U32,
            MibKind::R1 => DType::U64,
        };
        assert_eq!(native, expected_native, "{kind:?}");
        assert_eq!(read_all(ds.as_ref()), data.values, "{kind:?}");
        // A slice not aligned to words or rows, in the native-width integer path.
        let slice = SigSlice { origin: vec![1, 3], shape: vec![3, 37] };
        let got = read_slice(ds.as_ref(), &[1, 4], &slice, DType::F64);
        assert_eq!(got, expected_slice(&data, &[1, 4], &slice), "{kind:?} slice");
    }
}

#[test]
fn quad_layouts_are_reassembled() {
    let dir = tempfile::tempdir().unwrap();
    for kind in [MibKind::R1, MibKind::R6, MibKind::R12, MibKind::U16] {
        // Two chips of 64 x 64 each way: a 128 x 128 frame.
        let data = mib::counts(&[3], &[128, 128], kind.max(), 7);
        let set = MibSet { quad: true, ..MibSet::new(kind) };
        let paths = mib::write_mib(dir.path(), &format!("quad_{kind:?}_"), &data, set);
        let ds = open(&paths[0], &OpenOptions { nav_shape: Some(vec![3]), ..Default::default() });
        assert_eq!(ds.shape().sig, vec![128, 128], "{kind:?}");
        assert_eq!(read_all(ds.as_ref()), data.values, "{kind:?}");
        // Slices crossing the quadrant borders, and inside each quadrant.
        for (origin, shape) in [([60, 60], [8, 8]), ([0, 0], [64, 64]), ([63, 1], [2, 126]), ([100, 70], [28, 58])] {
            let slice = SigSlice { origin: origin.to_vec(), shape: shape.to_vec() };
            let got = read_slice(ds.as_ref(), &[0, 2], &slice, DType::F32);
            assert_eq!(got, expected_slice(&data, &[0, 2], &slice), "{kind:?} {slice:?}");
        }
    }
}

#[test]
fn a_multi_file_set_is_ordered_by_sequence_number() {
    let dir = tempfile::tempdir().unwrap();
    let data = mib::counts(&[4, 5], &[6, 64], 4095, 3);
    let set = MibSet { files: 3, first_sequence: 1, ..MibSet::new(MibKind::R12) };
    let paths = mib::write_mib(dir.path(), "scan", &data, set);
    // Opening any member opens the whole set; the .hdr gives the scan.
    mib::write_hdr(&dir.path().join("scan.hdr"), &[4, 5], true);
    for path in paths.iter().chain([&dir.path().join("scan.hdr")]) {
        let ds = open(path, &OpenOptions::default());
        assert_eq!(ds.shape().nav, vec![4, 5], "{}", path.display());
        assert_eq!(read_all(ds.as_ref()), data.values, "{}", path.display());
    }
    // Frames per trigger instead of ScanX/ScanY.
    mib::write_hdr(&dir.path().join("scan.hdr"), &[4, 5], false);
    assert_eq!(open(&paths[1], &OpenOptions::default()).shape().nav, vec![4, 5]);
    // Partial tiles across file borders.
    let ds = open(&paths[0], &OpenOptions::default());
    let slice = SigSlice { origin: vec![2, 10], shape: vec![3, 20] };
    let frames = [5u64, 6, 7, 13, 14, 19];
    let idx: Vec<usize> = frames.iter().map(|&f| f as usize).collect();
    assert_eq!(read_slice(ds.as_ref(), &frames, &slice, DType::U32), expected_slice(&data, &idx, &slice));
}

#[test]
fn sync_offset_and_nav_reshape_shift_frames() {
    let dir = tempfile::tempdir().unwrap();
    let data = mib::counts(&[12], &[4, 8], 255, 5);
    let path = &mib::write_mib(dir.path(), "sync", &data, MibSet::new(MibKind::U8))[0];
    let frame = 32;
    for sync in [-3i64, 0, 2, 11] {
        for nav in [vec![12], vec![3, 4], vec![2, 5]] {
            let options = OpenOptions { nav_shape: Some(nav.clone()), sync_offset: Some(sync), ..Default::default() };
            let ds = open(path, &options);
            assert_eq!(ds.shape().nav, nav);
            let got = read_all(ds.as_ref());
            let n: usize = nav.iter().product();
            for i in 0..n {
                let src = i as i64 + sync;
                let expected: Vec<f64> =
                    if (0..12).contains(&src) { data.frame(src as usize).to_vec() } else { vec![0.0; frame] };
                assert_eq!(&got[i * frame..(i + 1) * frame], &expected[..], "sync {sync} nav {nav:?} frame {i}");
            }
        }
    }
    // A sig reshape keeps the pixels in order.
    let ds = open(path, &OpenOptions { nav_shape: Some(vec![12]), sig_shape: Some(vec![32]), ..Default::default() });
    assert_eq!(ds.shape().sig, vec![32]);
    assert_eq!(read_all(ds.as_ref()), data.values);
    let part = read_slice(ds.as_ref(), &[3], &SigSlice { origin: vec![5], shape: vec![13] }, DType::F64);
    assert_eq!(part, data.frame(3)[5..18].to_vec());
    // Out-of-range options.
    let msg = error(path, &OpenOptions { sync_offset: Some(12), ..Default::default() });
    assert!(msg.contains("sync-offset 12") && msg.contains("sync.mib"), "{msg}");
    let msg = error(path, &OpenOptions { nav_shape: Some(vec![13]), ..Default::default() });
    assert!(msg.contains("needs 13 frames") && msg.contains("12 complete frames"), "{msg}");
    let msg = error(path, &OpenOptions { sig_shape: Some(vec![5, 5]), ..Default::default() });
    assert!(msg.contains("32 pixels"), "{msg}");
}

#[test]
fn detection_by_extension_and_magic() {
    let dir = tempfile::tempdir().unwrap();
    let data = mib::counts(&[4], &[2, 64], 1, 9);
    let path = &mib::write_mib(dir.path(), "magic", &data, MibSet::new(MibKind::R1))[0];
    let renamed = dir.path().join("frames.bin");
    std::fs::copy(path, &renamed).unwrap();
    assert_eq!(dataset::Format::detect(path), dataset::Format::Mib);
    assert_eq!(dataset::Format::detect(&renamed), dataset::Format::Mib);
    assert_eq!(read_all(open(&renamed, &OpenOptions::default()).as_ref()), data.values);
}

#[test]
fn bad_files_name_the_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let data = mib::counts(&[6], &[4, 8], 255, 2);
    let path = mib::write_mib(dir.path(), "good", &data, MibSet::new(MibKind::U16)).remove(0);
    let bytes = std::fs::read(&path).unwrap();
    let stride = 384 + 4 * 8 * 2;

    // Truncated: the last frame is incomplete.
    let truncated = dir.path().join("trunc.mib");
    std::fs::write(&truncated, &bytes[..5 * stride + 100]).unwrap();
    let msg = error(&truncated, &OpenOptions::default());
    assert!(
        msg.contains("trunc.mib") && msg.contains("truncated") && msg.contains(&format!("offset {}", 5 * stride)),
        "{msg}"
    );
    // ... unless the nav shape uses only complete frames.
    let ds = open(&truncated, &OpenOptions { nav_shape: Some(vec![5]), ..Default::default() });
    assert_eq!(read_all(ds.as_ref()), data.values[..5 * 32].to_vec());
    let msg = error(&truncated, &OpenOptions { nav_shape: Some(vec![6]), ..Default::default() });
    assert!(msg.contains("needs 6 frames") && msg.contains("truncated"), "{msg}");

    // Wrong magic.
    let wrong = dir.path().join("wrong.mib");
    let mut w = bytes.clone();
    w[..4].copy_from_slice(b"MQ9,");
    std::fs::write(&wrong, &w).unwrap();
    let msg = error(&wrong, &OpenOptions::default());
    assert!(msg.contains("wrong.mib") && msg.contains("offset 0") && msg.contains("MQ1"), "{msg}");

    // Header lying about the header size: frames are not where it says.
    let lying = dir.path().join("lying.mib");
    let mut l = bytes.clone();
    l[11..16].copy_from_slice(b"00380");
    std::fs::write(&lying, &l).unwrap();
    let msg = error(&lying, &OpenOptions { nav_shape: Some(vec![6]), ..Default::default() });
    assert!(msg.contains("lying.mib") && msg.contains("MQ1,") && msg.contains("offset"), "{msg}");
    // ... or about the frame size.
    let mut l = bytes.clone();
    l[20..24].copy_from_slice(b"0009");
    std::fs::write(&lying, &l).unwrap();
    let msg = error(&lying, &OpenOptions { nav_shape: Some(vec![4]), ..Default::default() });
    assert!(msg.contains("lying.mib") && msg.contains("offset"), "{msg}");

    // A garbled field.
    let garbled = dir.path().join("garbled.mib");
    let mut g = bytes.clone();
    g[30..33].copy_from_slice(b"F32");
    std::fs::write(&garbled, &g).unwrap();
    let msg = error(&garbled, &OpenOptions::default());
    assert!(msg.contains("garbled.mib") && msg.contains("pixel type") && msg.contains("byte 30"), "{msg}");

    // Missing sidecar: a .hdr without .mib files, and a .hdr without a scan shape.
    let lonely = dir.path().join("lonely.hdr");
    mib::write_hdr(&lonely, &[2, 3], true);
    let msg = error(&lonely, &OpenOptions::default());
    assert!(msg.contains("no .mib files") && msg.contains("lonely"), "{msg}");
    let sub = tempfile::tempdir().unwrap();
    let paths = mib::write_mib(sub.path(), "nohdr", &data, MibSet::new(MibKind::U8));
    std::fs::write(sub.path().join("nohdr.hdr"), "HDR,\r\nChip ID:\tW530\r\nEnd\t").unwrap();
    // A .hdr without a scan shape: the frames open (square guess), with a warning.
    let ds = open(&paths[0], &OpenOptions::default());
    let details = ds.info().details;
    let warning = details.iter().find(|(k, _)| k == "warning").map(|(_, v)| v.as_str()).unwrap_or_default();
    assert!(warning.contains("nohdr.hdr") && warning.contains("no scan shape"), "{details:?}");
}

/// The details entry `key` of `ds`'s info.
fn detail(ds: &dyn Dataset, key: &str) -> String {
    ds.info().details.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()).unwrap_or_default()
}

#[test]
fn a_file_next_to_its_raw_twin_opens_alone() {
    // Regression (issue 22, item 6), the layout of rosettasciio's Merlin test files:
    // `Quad_1_..._Rows_256.mib` next to `Quad_1_..._Rows_256RAW.mib` (another
    // acquisition): both matched the set glob `<prefix>*.mib`.
    let dir = tempfile::tempdir().unwrap();
    let data = mib::counts(&[3], &[16, 64], 255, 41);
    let plain = mib::write_mib(dir.path(), "Rows_256", &data, MibSet::new(MibKind::U8)).remove(0);
    let raw_data = mib::counts(&[2], &[16, 64], 1, 42);
    mib::write_mib(dir.path(), "Rows_256RAW", &raw_data, MibSet::new(MibKind::R1));
    mib::write_hdr(&dir.path().join("Rows_256.hdr"), &[1, 3], true);
    for path in [plain.clone(), dir.path().join("Rows_256.hdr")] {
        let ds = open(&path, &OpenOptions::default());
        assert_eq!(read_all(ds.as_ref()), data.values, "{}", path.display());
        assert_eq!(ds.shape().nav, vec![1, 3]);
        assert!(detail(ds.as_ref(), "nav_shape_from").contains("ScanY, ScanX"), "{:?}", ds.info().details);
    }
    let ds = open(&dir.path().join("Rows_256RAW.mib"), &OpenOptions::default());
    assert_eq!(read_all(ds.as_ref()), raw_data.values);
    // Numbered files of two acquisitions with one prefix (`scan_1.mib`, `scan_2.mib`
    // both starting at sequence 1): the file asked for is read alone, with a warning.
    let a = mib::counts(&[2], &[16, 64], 255, 43);
    let b = mib::counts(&[4], &[16, 64], 255, 44);
    let pa = mib::write_mib(dir.path(), "scan_1", &a, MibSet::new(MibKind::U8)).remove(0);
    mib::write_mib(dir.path(), "scan_2", &b, MibSet::new(MibKind::U8));
    let ds = open(&pa, &OpenOptions::default());
    assert_eq!(read_all(ds.as_ref()), a.values);
    assert!(detail(ds.as_ref(), "warning").contains("scan_2.mib"), "{:?}", ds.info().details);
}

#[test]
fn the_scan_width_comes_from_the_frame_timestamps() {
    // Item 10: no ScanX/ScanY and one frame per trigger in the .hdr; the frames' MQ1A
    // timestamps show a longer gap (the flyback) after every 4th frame, like
    // rosettasciio's 001_4x2_6bit.mib.
    let dir = tempfile::tempdir().unwrap();
    let data = mib::counts(&[8], &[16, 64], 255, 45);
    let path = mib::write_mib(dir.path(), "lines", &data, MibSet::new(MibKind::U8)).remove(0);
    let mut bytes = std::fs::read(&path).unwrap();
    let stride = bytes.len() / 8;
    for f in 0..8usize {
        // 102 ms per frame, 21 us more at each line end: seconds.nanoseconds since 48 s.
        let ns = 48_000_000_000u64 + f as u64 * 102_000_000 + (f as u64 / 4) * 21_000;
        let stamp = format!("2021-10-04T16:57:{:02}.{:09}Z", ns / 1_000_000_000, ns % 1_000_000_000);
        let at = f * stride + String::from_utf8_lossy(&bytes[f * stride..f * stride + 384]).find("MQ1A,").unwrap() + 5;
        bytes[at..at + stamp.len()].copy_from_slice(stamp.as_bytes());
    }
    std::fs::write(&path, &bytes).unwrap();
    let hdr = dir.path().join("lines.hdr");
    std::fs::write(&hdr, "HDR,\r\nFrames in Acquisition (Number):\t8\r\nFrames per Trigger (Number):\t1\r\nEnd\t")
        .unwrap();
    let ds = open(&path, &OpenOptions::default());
    assert_eq!(ds.shape().nav, vec![2, 4]);
    assert!(detail(ds.as_ref(), "nav_shape_from").contains("timestamps"), "{:?}", ds.info().details);
    assert_eq!(read_all(ds.as_ref()), data.values);
    // Without the flyback (all gaps equal) the frame count is the only clue: 8 in a line.
    let flat = mib::write_mib(dir.path(), "flat", &data, MibSet::new(MibKind::U8)).remove(0);
    let ds = open(&flat, &OpenOptions::default());
    assert_eq!(ds.shape().nav, vec![8]);
    assert!(detail(ds.as_ref(), "nav_shape_from").starts_with("guessed"), "{:?}", ds.info().details);
}

#[test]
fn inconsistent_sets_are_rejected() {
    // A gap in the sequence numbers.
    let dir = tempfile::tempdir().unwrap();
    let data = mib::counts(&[6], &[4, 64], 63, 4);
    let paths = mib::write_mib(dir.path(), "gap", &data, MibSet { files: 3, ..MibSet::new(MibKind::R6) });
    std::fs::remove_file(&paths[1]).unwrap();
    let msg = error(&paths[0], &OpenOptions::default());
    assert!(msg.contains("gap3.mib") && msg.contains("sequence number 5") && msg.contains("expected 3"), "{msg}");
    // A file of another frame format.
    let dir = tempfile::tempdir().unwrap();
    let paths = mib::write_mib(dir.path(), "mix", &data, MibSet { files: 2, ..MibSet::new(MibKind::R6) });
    let other = mib::counts(&[3], &[4, 64], 63, 4);
    let stray = mib::write_mib(dir.path(), "x", &other, MibSet { first_sequence: 4, ..MibSet::new(MibKind::U8) });
    std::fs::rename(&stray[0], &paths[1]).unwrap();
    let msg = error(&paths[0], &OpenOptions::default());
    assert!(msg.contains("mix2.mib") && msg.contains("inconsistent") && msg.contains("U08"), "{msg}");
    // A truncated file in the middle of a set.
    let dir = tempfile::tempdir().unwrap();
    let paths = mib::write_mib(dir.path(), "mid", &data, MibSet { files: 2, ..MibSet::new(MibKind::U8) });
    let bytes = std::fs::read(&paths[0]).unwrap();
    std::fs::write(&paths[0], &bytes[..bytes.len() - 10]).unwrap();
    let msg = error(&paths[1], &OpenOptions::default());
    assert!(msg.contains("mid1.mib") && msg.contains("truncated"), "{msg}");
}

#[test]
fn sum_plugin_runs_over_a_quad_raw_set() {
    let dir = tempfile::tempdir().unwrap();
    let data = mib::counts(&[4, 6], &[128, 128], 4095, 11);
    let paths = mib::write_mib(dir.path(), "run", &data, MibSet { quad: true, files: 2, ..MibSet::new(MibKind::R12) });
    mib::write_hdr(&dir.path().join("run.hdr"), &[4, 6], false);
    let expected = sum_frames(&data, None);
    for (partitions, tile) in [(1, None), (3, Some(vec![5, 17, 33])), (4, Some(vec![2, 128, 128]))] {
        let options = RunOptions { partitions: Some(partitions), tile_shape: tile.clone(), ..Default::default() };
        let udfs: Vec<(Arc<dyn Udf>, Params)> = vec![(load("sum"), Params::default())];
        let results = run_on(&paths[0], &OpenOptions::default(), udfs, options).unwrap_or_else(|e| panic!("{e}"));
        let s = results.udfs[0].buffer("intensity").expect("intensity");
        assert_eq!(s.data.shape(), &[128, 128]);
        assert_close(&to_f64(&s.data), &expected, 1e-6, &format!("sum partitions={partitions} tile={tile:?}"));
    }
}
