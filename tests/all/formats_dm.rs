//! DM3/DM4: C-ordered 3-D and 4-D images of every dtype read back exactly, the thumbnail
//! skipped, unrelated tags of every kind parsed; the transposed layout and bad files fail
//! clearly.

use udf_host::dataset::{self, OpenOptions, SigSlice};
use udf_host::dtype::{ByteOrder, DType};
use udf_host_tests::fixture_formats::dm::{self, DmOptions};
use udf_host_tests::fixtures::{self, Data, Ty};

fn read_all(path: &std::path::Path) -> (Vec<f64>, udf_host::dataset::DatasetShape, ByteOrder) {
    let ds = dataset::open(path, &OpenOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let n = ds.shape().nav_len();
    let frames: Vec<u64> = (0..n as u64).collect();
    let mut buf = vec![0u8; n * ds.shape().sig_len() * 8];
    ds.read_tile(&frames, &SigSlice::full(&ds.shape().sig), DType::F64, &mut buf).unwrap();
    (bytemuck::cast_slice::<u8, f64>(&buf).to_vec(), ds.shape().clone(), ds.stored_dtype().order)
}

#[test]
fn four_d_and_stacks_of_every_dtype_dm3_and_dm4() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[3, 5], &[6, 7], 4);
    let stack = fixtures::mk_random(&[4], &[5, 3], 5);
    for version in [3, 4] {
        for ty in [Ty::U8, Ty::U16, Ty::U32, Ty::I16, Ty::I32, Ty::F32, Ty::F64] {
            for (data, big, thumbnail) in [(&data, false, true), (&stack, true, false)] {
                let options = DmOptions { version, big_endian: big, order_swapped: Some(true), thumbnail };
                let path = dir.path().join(format!("d{version}-{ty:?}-{}.dm{version}", data.nav.len()));
                dm::write(&path, data, ty, &options);
                let (values, shape, order) = read_all(&path);
                let what = format!("DM{version} {ty:?} nav {:?}", data.nav);
                assert_eq!((shape.nav, shape.sig), (data.nav.clone(), data.sig.clone()), "{what}");
                assert_eq!(order == ByteOrder::Big, big && ty != Ty::U8, "{what}");
                assert_eq!(values, data.rounded(ty).values, "{what}");
            }
        }
    }
}

#[test]
fn three_d_stacks_need_no_order_tag_but_four_d_data_does() {
    let dir = tempfile::tempdir().unwrap();
    let stack = fixtures::mk_random(&[4], &[5, 3], 6);
    let path = dir.path().join("stack.dm4");
    dm::write(
        &path,
        &stack,
        Ty::U16,
        &DmOptions { version: 4, big_endian: false, order_swapped: None, thumbnail: false },
    );
    assert_eq!(read_all(&path).0, stack.values);
    let data = fixtures::mk_random(&[2, 3], &[4, 4], 7);
    for swapped in [None, Some(false)] {
        let path = dir.path().join("transposed.dm4");
        let options = DmOptions { version: 4, big_endian: false, order_swapped: swapped, thumbnail: true };
        dm::write(&path, &data, Ty::U16, &options);
        let msg = dataset::open(&path, &OpenOptions::default()).err().expect("transposed file opened").to_string();
        assert!(msg.contains("transposed.dm4") && msg.contains("transposed (sig, nav)"), "{msg}");
    }
}

#[test]
fn direct_frames_and_nav_reshape() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[2, 3], &[4, 4], 8);
    let path = dir.path().join("a.dm4");
    dm::write(
        &path,
        &data,
        Ty::F32,
        &DmOptions { version: 4, big_endian: false, order_swapped: Some(true), thumbnail: true },
    );
    let ds = dataset::open(&path, &OpenOptions { nav_shape: Some(vec![6]), ..OpenOptions::default() }).unwrap();
    assert_eq!(ds.shape().nav, vec![6]);
    // Mapped straight through where the data offset is aligned for float32.
    let offset: usize = ds.info().details.iter().find(|(k, _)| k == "data_offset").unwrap().1.parse().unwrap();
    let direct = ds.direct_frames(1..3, DType::F32);
    assert_eq!(direct.is_some(), offset.is_multiple_of(4), "data offset {offset}");
    if let Some(direct) = direct {
        let want: Vec<f32> = data.values[16..48].iter().map(|&v| v as f32).collect();
        assert_eq!(bytemuck::pod_collect_to_vec::<u8, f32>(direct), want);
    }
    let msg = dataset::open(&path, &OpenOptions { nav_shape: Some(vec![7]), ..OpenOptions::default() })
        .err()
        .expect("too many frames")
        .to_string();
    assert!(msg.contains("needs more frames"), "{msg}");
}

fn open_err(path: &std::path::Path) -> String {
    match dataset::open(path, &OpenOptions::default()) {
        Ok(_) => panic!("{} opened", path.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_files_fail_with_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let data = Data { nav: vec![2, 2], sig: vec![3, 3], values: (0..36).map(f64::from).collect() };
    let options = DmOptions { version: 3, big_endian: false, order_swapped: Some(true), thumbnail: true };
    let good = dm::file_bytes(&dm::tree(&data, Ty::U16, &options), 3, false);
    let path = dir.path().join("bad.dm3");

    // Wrong magic.
    let mut wrong = good.clone();
    wrong[3] = 9;
    std::fs::write(&path, &wrong).unwrap();
    let msg = open_err(&path);
    assert!(msg.contains("bad.dm3") && msg.contains("at offset 0") && msg.contains("not a DM3/DM4"), "{msg}");

    // Truncated anywhere before the end marker: an error naming the file, never a panic.
    for cut in (0..good.len() - 8).step_by(7) {
        std::fs::write(&path, &good[..cut]).unwrap();
        let msg = open_err(&path);
        assert!(msg.contains("bad.dm3"), "cut {cut}: {msg}");
    }

    // The image's Data array claims more values than Dimensions say.
    let mut lying = dm::tree(&data, Ty::U16, &options);
    if let dm::Tag::Group(root) = &mut lying {
        let list = root.iter_mut().find(|(n, _)| n == "ImageList").unwrap();
        if let dm::Tag::Group(images) = &mut list.1
            && let dm::Tag::Group(image) = &mut images[1].1
            && let dm::Tag::Group(fields) = &mut image[0].1
        {
            let d = fields.iter_mut().find(|(n, _)| n == "Data").unwrap();
            d.1 = dm::Tag::Data(vec![20, 4, 40], vec![0; 80]);
        }
    }
    std::fs::write(&path, dm::file_bytes(&lying, 3, false)).unwrap();
    let msg = open_err(&path);
    assert!(msg.contains("holds 80 bytes") && msg.contains("need 72") && msg.contains("at offset"), "{msg}");

    // An unsupported data type.
    let mut bytes = good.clone();
    let at = bytes.windows(8).rposition(|w| w == b"DataType").unwrap();
    // The image's (not the thumbnail's) DataType: skip the label, "%%%%", info length and info (one u32) to the value.
    let value = at + 8 + 4 + 4 + 4;
    bytes[value..value + 4].copy_from_slice(&23i32.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    assert!(open_err(&path).contains("DM data type 23 is not supported"));
}

#[test]
fn complex_images_stored_as_arrays_of_structs_read_back() {
    // Regression (issue 22, item 2): complex64/complex128 images (DataType 3 and 13,
    // `Data` an array of {real, imaginary} structs, as GMS writes them and as
    // rosettasciio's test-3/test-13 files hold them) were refused.
    let dir = tempfile::tempdir().unwrap();
    for (dims, frames) in [(vec![3usize, 4], 1usize), (vec![2, 3, 4], 2)] {
        let n: usize = dims.iter().product();
        let re: Vec<f64> = (0..n).map(|k| k as f64 * 0.5 - 3.0).collect();
        let im: Vec<f64> = (0..n).map(|k| 100.0 - k as f64 * 0.25).collect();
        for version in [3, 4] {
            for (double, big) in [(false, false), (true, true), (false, true)] {
                let options = DmOptions { version, big_endian: big, order_swapped: None, thumbnail: version == 4 };
                let path = dir.path().join(format!("c{}-{double}-{big}.dm{version}", dims.len()));
                std::fs::write(&path, dm::complex_file(&dims, &re, &im, double, &options)).unwrap();
                let ds = dataset::open(&path, &OpenOptions::default()).unwrap_or_else(|e| panic!("{e}"));
                let what = format!("{dims:?} DM{version} double={double} big={big}");
                assert_eq!(ds.stored_dtype().dtype, if double { DType::C128 } else { DType::C64 }, "{what}");
                assert_eq!(ds.shape().nav, vec![frames], "{what}: 2-D is one frame");
                assert_eq!(ds.shape().sig, dims[dims.len() - 2..].to_vec(), "{what}");
                let all: Vec<u64> = (0..frames as u64).collect();
                let mut buf = vec![0u8; n * 16];
                ds.read_tile(&all, &SigSlice::full(&ds.shape().sig), DType::C128, &mut buf).unwrap();
                let pairs: &[f64] = bytemuck::cast_slice(&buf);
                let want: Vec<f64> = re.iter().zip(&im).flat_map(|(&r, &i)| [r, i]).collect();
                assert_eq!(pairs, want.as_slice(), "{what}");
            }
        }
    }
}
