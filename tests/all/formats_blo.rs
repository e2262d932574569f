//! NanoMegas BLO: 8- and 16-bit patterns after 6-byte frame headers, scan shape from the
//! header; bad magic and truncation.

use udf_host::dataset::{Format, OpenOptions, SigSlice};
use udf_host::dtype::DType;
use udf_host_tests::fixture_formats::blo;
use udf_host_tests::fixture_formats::mib::counts;
use udf_host_tests::fixture_formats::read::{expected_tile, open, open_error, read_all, read_tile};

#[test]
fn patterns_read_back_with_the_scan_from_the_header() {
    let dir = tempfile::tempdir().unwrap();
    for (bits, max, dtype) in [(8, 255, DType::U8), (16, 65535, DType::U16)] {
        let data = counts(&[3, 5], &[12, 12], max, u64::from(bits));
        let path = dir.path().join(format!("scan{bits}.blo"));
        blo::write_blo(&path, &data, bits);
        let ds = open(&path, &OpenOptions::default());
        assert_eq!((ds.shape().nav.clone(), ds.shape().sig.clone()), (vec![3, 5], vec![12, 12]), "{bits}");
        assert_eq!(ds.stored_dtype().dtype, dtype);
        assert_eq!(read_all(ds.as_ref()), data.values, "{bits} bits");
        let slice = SigSlice { origin: vec![5, 2], shape: vec![7, 9] };
        assert_eq!(read_tile(ds.as_ref(), &[0, 14], &slice, DType::F32), expected_tile(&data, &[0, 14], &slice));
        // Detected by content too.
        let renamed = dir.path().join(format!("noext{bits}"));
        std::fs::copy(&path, &renamed).unwrap();
        assert_eq!(Format::detect(&renamed), Format::Blo);
    }
}

#[test]
fn bad_magic_and_truncation_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let data = counts(&[2, 2], &[8, 8], 255, 1);
    let path = dir.path().join("a.blo");
    blo::write_blo(&path, &data, 8);
    let mut bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
    let msg = open_error(&path, &OpenOptions::default());
    assert!(msg.contains("a.blo") && msg.contains("truncated") && msg.contains("2 x 2"), "{msg}");
    bytes[6] = 1;
    std::fs::write(&path, &bytes).unwrap();
    let msg = open_error(&path, &OpenOptions::default());
    assert!(msg.contains("a.blo") && msg.contains("offset 6") && msg.contains("MAGIC"), "{msg}");
    std::fs::write(&path, &bytes[..100]).unwrap();
    let msg = open_error(&path, &OpenOptions::default());
    assert!(msg.contains("a.blo") && msg.contains("100 bytes"), "{msg}");
}
