//! MRC: int16, float32 and uint16 stacks in either byte order, with an extended header;
//! bad mode and truncation.

use udf_host::dataset::{Format, OpenOptions, SigSlice};
use udf_host::dtype::{ByteOrder, DType};
use udf_host_tests::fixture_formats::mrc;
use udf_host_tests::fixture_formats::read::{expected_tile, open, open_error, read_all, read_tile};
use udf_host_tests::fixtures::{Ty, mk_random};

#[test]
fn stacks_read_back_in_both_byte_orders() {
    let dir = tempfile::tempdir().unwrap();
    for (ty, dtype) in [(Ty::I16, DType::I16), (Ty::F32, DType::F32), (Ty::U16, DType::U16)] {
        for big in [false, true] {
            let data = mk_random(&[6], &[5, 7], 4).rounded(ty);
            let path = dir.path().join(format!("{ty:?}{big}.mrc"));
            mrc::write_mrc(&path, &data, ty, 96, big);
            let ds = open(&path, &OpenOptions { nav_shape: Some(vec![2, 3]), ..Default::default() });
            assert_eq!(ds.shape().sig, vec![5, 7]);
            assert_eq!(ds.stored_dtype().dtype, dtype);
            assert_eq!(ds.stored_dtype().order == ByteOrder::Big, big);
            assert_eq!(read_all(ds.as_ref()), data.values, "{ty:?} big={big}");
            let slice = SigSlice { origin: vec![2, 2], shape: vec![3, 4] };
            assert_eq!(read_tile(ds.as_ref(), &[1, 5], &slice, DType::F64), expected_tile(&data, &[1, 5], &slice));
        }
    }
    // Detected by the MAP marker without the extension.
    let renamed = dir.path().join("stack.bin");
    std::fs::copy(dir.path().join("F32false.mrc"), &renamed).unwrap();
    assert_eq!(Format::detect(&renamed), Format::Mrc);
}

#[test]
fn bad_mode_and_truncation_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let data = mk_random(&[3], &[4, 4], 5);
    let path = dir.path().join("a.mrc");
    mrc::write_mrc(&path, &data, Ty::F32, 0, false);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
    let msg = open_error(&path, &OpenOptions::default());
    assert!(msg.contains("a.mrc") && msg.contains("truncated") && msg.contains("1216 bytes"), "{msg}");
    let mut b = bytes.clone();
    b[12] = 3;
    std::fs::write(&path, &b).unwrap();
    let msg = open_error(&path, &OpenOptions::default());
    assert!(msg.contains("a.mrc") && msg.contains("offset 12") && msg.contains("MODE 3"), "{msg}");
    let mut b = bytes;
    b[8..12].copy_from_slice(&(-2i32).to_le_bytes());
    std::fs::write(&path, &b).unwrap();
    let msg = open_error(&path, &OpenOptions::default());
    assert!(msg.contains("offset 8") && msg.contains("NZ is -2"), "{msg}");
}

/// A DE `_info.txt` as DE-Server 2.7 writes it (`Key = value`, padded keys), with the
/// scan keys that matter among others.
fn de_info(size: [usize; 2], roi: Option<[usize; 2]>, kind: &str) -> String {
    let mut lines = vec![
        ("Server Software Version", "2.7.4.10190 (Debug Build)".to_owned()),
        ("Frame Count", (size[0] * size[1]).to_string()),
        ("Scan - Enable", "Enable".into()),
        ("Scan - ROI Enable", if roi.is_some() { "Enable" } else { "Disable" }.into()),
        ("Scan - ROI Size X", roi.map_or(8, |r| r[1]).to_string()),
        ("Scan - ROI Size Y", roi.map_or(4, |r| r[0]).to_string()),
        ("Scan - Repeats", "1".into()),
        ("Scan - Size X", size[1].to_string()),
        ("Scan - Size Y", size[0].to_string()),
        ("Scan - Type", kind.into()),
    ];
    lines.push(("Specimen Pixel Size X (nanometers)", "0.1".into()));
    lines.iter().map(|(k, v)| format!("{k:<64}= {v}\n")).collect()
}

#[test]
fn the_scan_shape_comes_from_the_de_info_file() {
    // Issue 22, item 10: DE's `<acquisition>_info.txt` next to `<acquisition>_movie.mrc`
    // records the scan (the layout of rosettasciio's 20241021_00405 files).
    let dir = tempfile::tempdir().unwrap();
    let data = mk_random(&[32], &[4, 8], 5).rounded(Ty::U16);
    let movie = dir.path().join("20241021_00405_movie.mrc");
    mrc::write_mrc(&movie, &data, Ty::U16, 0, false);
    let info = dir.path().join("20241021_00405_info.txt");
    std::fs::write(&info, de_info([4, 8], None, "Raster")).unwrap();
    let ds = open(&movie, &OpenOptions::default());
    assert_eq!(ds.shape().nav, vec![4, 8]);
    assert_eq!(read_all(ds.as_ref()), data.values);
    let from = ds.info().details.iter().find(|(k, _)| k == "nav_shape_from").map(|(_, v)| v.clone());
    assert!(from.as_deref().is_some_and(|f| f.contains("_info.txt") && f.contains("Scan - Size")), "{from:?}");
    // A scan ROI: its size is the scan.
    std::fs::write(&info, de_info([16, 16], Some([2, 16]), "Raster")).unwrap();
    assert_eq!(open(&movie, &OpenOptions::default()).shape().nav, vec![2, 16]);
    // A record that does not fit the movie, or a non-raster scan: not used, with a warning.
    for (text, says) in [(de_info([5, 5], None, "Raster"), "[5, 5]"), (de_info([4, 8], None, "Random"), "Random")] {
        std::fs::write(&info, text).unwrap();
        let ds = open(&movie, &OpenOptions::default());
        assert_eq!(ds.shape().nav, vec![32]);
        let warning = ds.info().details.iter().find(|(k, _)| k == "warning").map(|(_, v)| v.clone());
        assert!(warning.as_deref().is_some_and(|w| w.contains(says)), "{warning:?}");
    }
}
