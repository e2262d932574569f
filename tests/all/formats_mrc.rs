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
