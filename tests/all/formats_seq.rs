//! NorPix SEQ: 8/16-bit images at `true_image_size` steps, old and new header versions;
//! bad magic, compression, truncation.

use udf_host::dataset::{OpenOptions, SigSlice};
use udf_host::dtype::DType;
use udf_host_tests::fixture_formats::mib::counts;
use udf_host_tests::fixture_formats::read::{expected_tile, open, open_error, read_all, read_tile};
use udf_host_tests::fixture_formats::seq;

#[test]
fn images_read_back_for_each_version_and_depth() {
    let dir = tempfile::tempdir().unwrap();
    for (bits, version, footer) in [(8, 4, 8), (16, 5, 16), (16, 3, 0)] {
        let data = counts(&[9], &[6, 10], if bits == 8 { 255 } else { 65535 }, u64::from(bits) + version as u64);
        let path = dir.path().join(format!("s{bits}v{version}.seq"));
        seq::write_seq(&path, &data, bits, version, footer);
        let ds = open(&path, &OpenOptions::default());
        // Nine frames: a 3 x 3 scan by default.
        assert_eq!(ds.shape().nav, vec![3, 3]);
        assert_eq!(ds.stored_dtype().dtype, if bits == 8 { DType::U8 } else { DType::U16 });
        assert_eq!(read_all(ds.as_ref()), data.values, "{bits} bits, version {version}");
        let slice = SigSlice { origin: vec![1, 7], shape: vec![5, 3] };
        assert_eq!(read_tile(ds.as_ref(), &[4, 8], &slice, DType::U32), expected_tile(&data, &[4, 8], &slice));
        let ds = open(&path, &OpenOptions { nav_shape: Some(vec![2, 4]), sync_offset: Some(1), ..Default::default() });
        assert_eq!(read_all(ds.as_ref()), data.values[60..9 * 60].to_vec());
    }
}

#[test]
fn bad_headers_and_truncation_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let data = counts(&[4], &[4, 4], 255, 3);
    let path = dir.path().join("a.seq");
    seq::write_seq(&path, &data, 8, 4, 8);
    let bytes = std::fs::read(&path).unwrap();
    let truncated = dir.path().join("t.seq");
    std::fs::write(&truncated, &bytes[..bytes.len() - 20]).unwrap();
    let msg = open_error(&truncated, &OpenOptions::default());
    assert!(msg.contains("t.seq") && msg.contains("truncated") && msg.contains("offset 1096"), "{msg}");
    let mut b = bytes.clone();
    b[620] = 1;
    std::fs::write(&path, &b).unwrap();
    let msg = open_error(&path, &OpenOptions::default());
    assert!(msg.contains("a.seq") && msg.contains("offset 620") && msg.contains("uncompressed"), "{msg}");
    let mut b = bytes.clone();
    b[0] = 0;
    std::fs::write(&path, &b).unwrap();
    let msg = open_error(&path, &OpenOptions::default());
    assert!(msg.contains("a.seq") && msg.contains("magic"), "{msg}");
    let mut b = bytes;
    b[580..584].copy_from_slice(&3u32.to_le_bytes());
    std::fs::write(&path, &b).unwrap();
    let msg = open_error(&path, &OpenOptions::default());
    assert!(msg.contains("offset 580") && msg.contains("true_image_size 3"), "{msg}");
}
