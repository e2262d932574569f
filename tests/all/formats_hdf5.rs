//! HDF5 reader against files written by h5py/libhdf5 (tests/data/hdf5/generate.py): every
//! dtype and byte order, contiguous and chunked, gzip, shuffle, bitshuffle(-LZ4), unwritten
//! chunks, every chunk index of the newest file format; tiles of every shape; a wasm plugin
//! end to end; and bad files.

use std::path::Path;
use std::sync::Arc;
use udf_host::dataset::{self, Dataset, OpenOptions, SigSlice};
use udf_host::dtype::{ByteOrder, DType};
use udf_host::exec::RunOptions;
use udf_host::udf::Params;
use udf_host_tests::fixture_formats::hdf5::{self as fx, Kind};
use udf_host_tests::fixtures::Data;
use udf_host_tests::reference::{assert_close, sum_frames, to_f64};
use udf_host_tests::{load, run_on};

fn open_path(path: &Path, dataset: &str) -> Arc<dyn Dataset> {
    let options = OpenOptions { dataset_path: Some(dataset.into()), ..OpenOptions::default() };
    dataset::open(path, &options).unwrap_or_else(|e| panic!("{dataset}: {e}"))
}

fn decode(bytes: &[u8], dtype: DType) -> Vec<f64> {
    let array = udf_host::array::NdArray::from_bytes(dtype, &[bytes.len() / dtype.size()], bytes).expect("array");
    to_f64(&array)
}

/// Read `frames` x the whole frame, cut into slices of `slice` (clipped at the borders),
/// and reassemble the frames in C order, as f64.
fn read_frames(ds: &dyn Dataset, frames: &[u64], slice: &[usize], dtype: DType) -> Vec<f64> {
    let sig = ds.shape().sig.clone();
    let sig_len: usize = sig.iter().product();
    let mut out = vec![f64::NAN; frames.len() * sig_len];
    let counts: Vec<usize> = sig.iter().zip(slice).map(|(&s, &c)| s.div_ceil(c)).collect();
    let total: usize = counts.iter().product();
    for k in 0..total {
        let mut rem = k;
        let mut origin = vec![0; sig.len()];
        for a in (0..sig.len()).rev() {
            origin[a] = (rem % counts[a]) * slice[a];
            rem /= counts[a];
        }
        let shape: Vec<usize> = origin.iter().zip(slice).zip(&sig).map(|((&o, &c), &s)| c.min(s - o)).collect();
        let part = SigSlice { origin: origin.clone(), shape: shape.clone() };
        let mut buf = vec![0u8; frames.len() * part.len() * dtype.size()];
        ds.read_tile(frames, &part, dtype, &mut buf).unwrap_or_else(|e| panic!("read_tile: {e}"));
        let values = decode(&buf, dtype);
        // Scatter the slice into the frames (2-D signal).
        let (h, w) = (shape[0], shape[1]);
        for (fi, chunk) in values.chunks(part.len()).enumerate() {
            for y in 0..h {
                for x in 0..w {
                    out[fi * sig_len + (origin[0] + y) * sig[1] + origin[1] + x] = chunk[y * w + x];
                }
            }
        }
    }
    out
}

/// The expected frames of a fixture dataset.
fn expected(frames: &[u64], sig_len: usize, seed: u64, kind: Kind) -> Vec<f64> {
    frames
        .iter()
        .flat_map(|&f| (0..sig_len as u64).map(move |p| fx::value(f * sig_len as u64 + p, seed, kind)))
        .collect()
}

fn check_dataset(path: &Path, name: &str, seed: u64, kind: Kind) {
    let ds = open_path(path, name);
    let sig_len = ds.shape().sig_len();
    let n = ds.shape().nav_len() as u64;
    let all: Vec<u64> = (0..n).collect();
    let some: Vec<u64> = (0..n).filter(|f| f % 3 != 1).collect();
    let native = ds.stored_dtype().dtype;
    let sig = ds.shape().sig.clone();
    for (frames, slice) in [
        (&all, sig.clone()),
        (&all, vec![1, sig[1]]),
        (&some, vec![3, 5]),
        (&some, vec![sig[0], 4]),
        (&vec![n - 1], vec![2, 2]),
    ] {
        for dtype in [native, DType::F64] {
            let got = read_frames(ds.as_ref(), frames, &slice, dtype);
            let want = expected(frames, sig_len, seed, kind);
            assert_eq!(got, want, "{name}: frames {frames:?} slice {slice:?} as {dtype}");
        }
    }
}

#[test]
fn every_dtype_and_byte_order_contiguous() {
    let path = fx::file("dtypes.h5");
    let codes = ["u1", "<u2", "<u4", "<u8", "i1", "<i2", "<i4", "<i8", "<f4", "<f8", ">u2", ">i4", ">f4", ">f8", "<c8"];
    for (k, code) in codes.iter().enumerate() {
        let name = format!("/d_{}", code.replace('<', "le_").replace('>', "be_"));
        let ds = open_path(&path, &name);
        assert_eq!(ds.shape().nav, vec![3, 4], "{name}");
        assert_eq!(ds.shape().sig, vec![5, 6], "{name}");
        let big = code.starts_with('>');
        assert_eq!(ds.stored_dtype().order == ByteOrder::Big, big && !code.ends_with('1'), "{name}");
        let kind = Kind::from_code(code.trim_start_matches(['<', '>']));
        if kind == Kind::C {
            assert_eq!(ds.stored_dtype().dtype, DType::C64);
            let mut buf = vec![0u8; 12 * 30 * 8];
            let frames: Vec<u64> = (0..12).collect();
            ds.read_tile(&frames, &SigSlice::full(&[5, 6]), DType::C64, &mut buf).unwrap();
            let pairs: &[f32] = bytemuck::cast_slice(&buf);
            for i in 0..360u64 {
                let (re, im) = (pairs[2 * i as usize], pairs[2 * i as usize + 1]);
                assert_eq!(f64::from(re), fx::value(i, k as u64, kind), "{name} re {i}");
                assert_eq!(f64::from(im), fx::imag(i, k as u64), "{name} im {i}");
            }
            continue;
        }
        check_dataset(&path, &name, k as u64, kind);
        // Contiguous data in native byte order is handed out without a copy.
        let direct = ds.direct_frames(0..12, ds.stored_dtype().dtype);
        assert_eq!(direct.is_some(), !big || code.ends_with('1'), "{name}: direct frames");
    }
}

#[test]
fn chunked_and_filtered_datasets() {
    let path = fx::file("chunked.h5");
    for (name, seed, code) in [
        ("/entry/data/plain", 1, "u2"),
        ("/entry/data/frame_chunks", 2, "f4"),
        ("/entry/data/gzip", 3, "u2"),
        ("/entry/data/shuffle_gzip", 4, "i4"),
        ("/entry/data/bslz4", 5, "u2"),
        ("/entry/data/bslz4_small_blocks", 6, "u4"),
        ("/entry/data/bitshuffle_only", 7, "f8"),
        ("/entry/data/gzip_be", 8, "f4"),
    ] {
        let ds = open_path(&path, name);
        assert_eq!((ds.shape().nav.clone(), ds.shape().sig.clone()), (vec![3, 5], vec![11, 13]), "{name}");
        assert!(ds.direct_frames(0..2, ds.stored_dtype().dtype).is_none(), "{name}: chunked data is never direct");
        check_dataset(&path, name, seed, Kind::from_code(code));
    }
}

#[test]
fn unwritten_chunks_read_as_the_fill_value() {
    let path = fx::file("chunked.h5");
    let ds = open_path(&path, "/entry/data/sparse");
    let sig_len = 11 * 13;
    let frames: Vec<u64> = (0..15).collect();
    let got = read_frames(ds.as_ref(), &frames, &[4, 4], DType::F32);
    for f in 0..15u64 {
        for p in 0..sig_len as u64 {
            let want = if f / 5 == 1 { fx::value(f * sig_len as u64 + p, 9, Kind::I(2)) } else { -7.0 };
            assert_eq!(got[(f * sig_len as u64 + p) as usize], want, "frame {f} pixel {p}");
        }
    }
}

#[test]
fn newest_file_format_and_every_chunk_index() {
    let path = fx::file("latest.h5");
    for (name, seed, code) in [
        ("/fixed_array", 10, "u2"),
        ("/extensible_array", 11, "u2"),
        ("/btree_v2", 12, "f4"),
        ("/single_chunk", 13, "i2"),
        ("/contiguous", 14, "f8"),
        ("/implicit", 15, "u2"),
    ] {
        check_dataset(&path, name, seed, Kind::from_code(code));
    }
}

#[test]
fn a_single_stack_is_picked_and_nav_can_be_reshaped() {
    let path = fx::file("stack3d.h5");
    let ds = dataset::open(&path, &OpenOptions::default()).unwrap();
    assert_eq!(ds.info().format, "hdf5");
    assert_eq!((ds.shape().nav.clone(), ds.shape().sig.clone()), (vec![6], vec![16, 12]));
    let frames: Vec<u64> = (0..6).collect();
    assert_eq!(read_frames(ds.as_ref(), &frames, &[5, 5], DType::U16), expected(&frames, 192, 16, Kind::U(2)));
    let reshaped = OpenOptions { nav_shape: Some(vec![2, 3]), ..OpenOptions::default() };
    let ds = dataset::open(&path, &reshaped).unwrap();
    assert_eq!(ds.shape().nav, vec![2, 3]);
    assert_eq!(read_frames(ds.as_ref(), &[4, 5], &[16, 12], DType::F32), expected(&[4, 5], 192, 16, Kind::U(2)));
    // The base shape of chunked data is the chunk's frame part.
    assert_eq!(ds.base_shape(), vec![16, 12]);
}

#[test]
fn several_candidates_are_listed() {
    // The larger of two stacks is chosen; the other is named with how to choose it.
    let path = fx::file("two_candidates.h5");
    let ds = dataset::open(&path, &OpenOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(detail(ds.as_ref(), "dataset"), "/a/data");
    let choice = detail(ds.as_ref(), "dataset_choice");
    assert!(choice.contains("/b/data [3, 4, 4]") && choice.contains("--dataset-path"), "{choice}");
    // Two of the same size: no choice, both listed.
    let tied = fx::file("layouts/tied.h5");
    let err = dataset::open(&tied, &OpenOptions::default()).err().expect("ambiguous file opened").to_string();
    assert!(err.contains("tied.h5") && err.contains("/depth0/data") && err.contains("/depth1/data"), "{err}");
    assert!(err.contains("same size") && err.contains("--dataset-path"), "{err}");
    let err = dataset::open(&path, &OpenOptions { dataset_path: Some("/c".into()), ..OpenOptions::default() })
        .err()
        .expect("missing dataset opened")
        .to_string();
    assert!(err.contains("no dataset '/c'") && err.contains("/a/data"), "{err}");
}

#[test]
fn sum_plugin_over_bitshuffle_lz4_end_to_end() {
    let path = fx::file("chunked.h5");
    let open = OpenOptions { dataset_path: Some("/entry/data/bslz4".into()), ..OpenOptions::default() };
    let n = 3 * 5 * 11 * 13;
    let data = Data { nav: vec![3, 5], sig: vec![11, 13], values: fx::values(n, 5, Kind::U(2)) };
    let expected = sum_frames(&data, None);
    for partitions in [1, 4] {
        for tile in [None, Some(vec![2, 3, 4])] {
            let options = RunOptions { partitions: Some(partitions), tile_shape: tile.clone(), ..Default::default() };
            let results = run_on(&path, &open, vec![(load("sum"), Params::default())], options)
                .unwrap_or_else(|e| panic!("partitions {partitions} tile {tile:?}: {e}"));
            let s = results.udfs[0].buffer("intensity").expect("intensity");
            assert_eq!(s.data.shape(), &[11, 13]);
            assert_close(&to_f64(&s.data), &expected, 1e-6, &format!("sum, partitions {partitions} tile {tile:?}"));
        }
    }
}

// --- Bad files -------------------------------------------------------------------------

fn open_err(path: &Path, dataset: Option<&str>) -> String {
    let options = OpenOptions { dataset_path: dataset.map(str::to_owned), ..OpenOptions::default() };
    match dataset::open(path, &options) {
        Ok(_) => panic!("{} opened", path.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn wrong_magic_and_empty_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("not.h5");
    std::fs::write(&path, vec![0x42u8; 4096]).unwrap();
    let msg = open_err(&path, None);
    assert!(msg.contains("not.h5") && msg.contains("not a readable HDF5 file"), "{msg}");
    std::fs::write(&path, b"").unwrap();
    let msg = open_err(&path, None);
    assert!(msg.contains("not.h5"), "{msg}");
}

#[test]
fn truncated_files_fail_clearly_at_every_cut() {
    let dir = tempfile::tempdir().unwrap();
    let src = std::fs::read(fx::file("chunked.h5")).unwrap();
    let path = dir.path().join("cut.h5");
    // Cut anywhere: opening or reading fails with the file named, never panics.
    for cut in (0..src.len()).step_by(997).chain([src.len() - 1, src.len() / 2]) {
        std::fs::write(&path, &src[..cut]).unwrap();
        for name in ["/entry/data/gzip", "/entry/data/plain", "/entry/data/bslz4"] {
            let options = OpenOptions { dataset_path: Some(name.into()), ..OpenOptions::default() };
            match dataset::open(&path, &options) {
                Err(e) => assert!(e.to_string().contains("cut.h5"), "cut {cut}: {e}"),
                Ok(ds) => {
                    // Chunks past the cut are found at open; reading the rest must work.
                    let frames: Vec<u64> = (0..15).collect();
                    let mut buf = vec![0u8; 15 * 143 * 4];
                    ds.read_tile(&frames, &SigSlice::full(&[11, 13]), DType::F32, &mut buf)
                        .unwrap_or_else(|e| panic!("cut {cut} {name}: opened but read failed: {e}"));
                }
            }
        }
    }
    // Cut through the contiguous data: the message says how much is missing and where.
    let src = std::fs::read(fx::file("dtypes.h5")).unwrap();
    let good = open_path(&fx::file("dtypes.h5"), "/d_le_f8");
    let layout = good.info().details.iter().find(|(k, _)| k == "layout").unwrap().1.clone();
    let at: usize = layout.trim_start_matches("contiguous at offset ").parse().unwrap();
    std::fs::write(&path, &src[..at + 100]).unwrap();
    let msg = open_err(&path, Some("/d_le_f8"));
    assert!(msg.contains("cut.h5") && msg.contains("truncated") && msg.contains(&format!("offset {at}")), "{msg}");
}

/// Replace every occurrence of `from` with `to` (same length).
fn patch(bytes: &mut [u8], from: &[u8], to: &[u8]) {
    let mut found = 0;
    for at in 0..bytes.len() - from.len() {
        if &bytes[at..at + from.len()] == from {
            bytes[at..at + to.len()].copy_from_slice(to);
            found += 1;
        }
    }
    assert!(found > 0, "pattern not in the fixture");
}

fn dims_bytes(dims: &[u64]) -> Vec<u8> {
    dims.iter().flat_map(|d| d.to_le_bytes()).collect()
}

#[test]
fn headers_lying_about_sizes() {
    let dir = tempfile::tempdir().unwrap();
    // The dataspace of the contiguous dataset claims 100x more frames than stored.
    let path = dir.path().join("lies.h5");
    let mut contiguous = std::fs::read(fx::file("dtypes.h5")).unwrap();
    patch(&mut contiguous, &dims_bytes(&[3, 4, 5, 6]), &dims_bytes(&[300, 4, 5, 6]));
    std::fs::write(&path, &contiguous).unwrap();
    let msg = open_err(&path, Some("/d_le_u2"));
    assert!(msg.contains("lies.h5") && msg.contains("truncated"), "{msg}");
    // A chunked dataset claiming a larger frame than its chunks cover: chunks still fit
    // the grid, the missing ones read as fill; a shape off the grid is an error.
    let mut chunked = std::fs::read(fx::file("chunked.h5")).unwrap();
    patch(&mut chunked, &dims_bytes(&[3, 5, 11, 13]), &dims_bytes(&[1, 5, 11, 13]));
    std::fs::write(&path, &chunked).unwrap();
    let msg = open_err(&path, Some("/entry/data/plain"));
    assert!(msg.contains("lies.h5") && msg.contains("offset"), "{msg}");
}

#[test]
fn corrupt_compressed_chunks_fail_on_read_naming_the_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(fx::file("stack3d.h5")).unwrap();
    // zlib streams of the gzip chunks start with 0x78; spoil the second byte of each so
    // the header check fails.
    let mut spoiled = 0;
    for i in 0..bytes.len() - 1 {
        if bytes[i] == 0x78 && matches!(bytes[i + 1], 0x01 | 0x5e | 0x9c | 0xda) {
            bytes[i + 1] = 0x00;
            spoiled += 1;
        }
    }
    assert!(spoiled >= 3, "gzip chunks found: {spoiled}");
    let path = dir.path().join("spoiled.h5");
    std::fs::write(&path, &bytes).unwrap();
    let ds = dataset::open(&path, &OpenOptions { dataset_path: Some("/frames".into()), ..OpenOptions::default() })
        .expect("the metadata is intact");
    let mut buf = vec![0u8; 6 * 192 * 4];
    let err = ds.read_tile(&[0, 1, 2, 3, 4, 5], &SigSlice::full(&[16, 12]), DType::F32, &mut buf).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("spoiled.h5") && msg.contains("at offset") && msg.contains("deflate"), "{msg}");
    // A plugin alone in a run has its tiles read straight into its memory: the read
    // fails the run with the dataset's error, not as a failure of the plugin.
    let open = OpenOptions { dataset_path: Some("/frames".into()), ..OpenOptions::default() };
    let err = run_on(&path, &open, vec![(load("probe_contract"), Params::default())], RunOptions::default())
        .expect_err("a run over corrupt chunks fails");
    assert!(matches!(err, udf_host::exec::RunError::Dataset(_)), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("spoiled.h5") && msg.contains("deflate") && !msg.contains("failed in"), "{msg}");
}

#[test]
fn unsupported_filters_and_types_are_named() {
    let path = fx::file("chunked.h5");
    let msg = open_err(&path, Some("/entry/data/lzf"));
    assert!(msg.contains("lzf") && msg.contains("32000") && msg.contains("not supported"), "{msg}");
    // A 2-D dataset is one frame, as in every format (issue 22, item 9).
    let options = OpenOptions { dataset_path: Some("/entry/scan_positions".into()), ..OpenOptions::default() };
    let ds = dataset::open(&path, &options).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((ds.shape().nav.clone(), ds.shape().sig.clone()), (vec![1], vec![15, 2]));
    let msg = open_err(&fx::file("dtypes.h5"), Some("/d_le_u2x"));
    assert!(msg.contains("no dataset"), "{msg}");
}

#[test]
fn cli_run_with_dataset_path() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let cache = udf_host_tests::test_cache_dir();
    let args: Vec<String> = [
        "udf-host",
        "run",
        &udf_host_tests::plugin("sum").display().to_string(),
        &fx::file("chunked.h5").display().to_string(),
        "--dataset-path",
        "/entry/data/gzip",
        "--out",
        &out.display().to_string(),
        "--cache-dir",
        &cache.display().to_string(),
        "-q",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    udf_host::cli::execute(args).map_err(|f| format!("{:#}", f.error)).unwrap();
    let sum = udf_host::npy::read_array(&out.join("sum/intensity.npy")).unwrap();
    let data = Data { nav: vec![3, 5], sig: vec![11, 13], values: fx::values(3 * 5 * 11 * 13, 3, Kind::U(2)) };
    assert_eq!(to_f64(&sum), sum_frames(&data, None));
    // Without the path the file is ambiguous: the error lists the datasets.
    let args: Vec<String> = ["udf-host", "run", &udf_host_tests::plugin("sum").display().to_string()]
        .iter()
        .map(|s| (*s).to_owned())
        .chain([
            fx::file("chunked.h5").display().to_string(),
            "--out".into(),
            dir.path().join("o2").display().to_string(),
        ])
        .collect();
    let err = udf_host::cli::execute(args).expect_err("ambiguous file ran");
    let msg = format!("{:#}", err.error);
    assert!(msg.contains("--dataset-path") && msg.contains("/entry/data/bslz4"), "{msg}");
}

// --- Layouts of real acquisition software (tests/data/hdf5/generate_layouts.py) ---------

fn detail(ds: &dyn Dataset, key: &str) -> String {
    ds.info().details.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()).unwrap_or_default()
}

/// Every frame in full, as f64.
fn all_frames(ds: &dyn Dataset) -> Vec<f64> {
    let frames: Vec<u64> = (0..ds.shape().nav_len() as u64).collect();
    let sig = ds.shape().sig.clone();
    read_frames(ds, &frames, &sig, DType::F64)
}

#[test]
fn dectris_master_files_follow_external_links() {
    // Regression (issue 22, item 3): the master file users open links its data files
    // (`/entry/data/data_00000N` -> `..._data_00000N.h5:/entry/data/data`); the links
    // were not followed. Several data files form one dataset; the scan shape comes from
    // the ARINA sidecar (`scan.h5`, STEM Metadata) or ntrigger x nimages.
    let path = fx::file("layouts/dectris/scan_master.h5");
    let ds = dataset::open(&path, &OpenOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((ds.shape().nav.clone(), ds.shape().sig.clone()), (vec![3, 4], vec![6, 5]));
    assert_eq!(ds.stored_dtype().dtype, DType::U32);
    assert_eq!(all_frames(ds.as_ref()), fx::values(12 * 30, 30, Kind::U(4)));
    // Tiles across the border of the two data files, odd slices.
    let frames = [5u64, 6, 7, 11];
    assert_eq!(read_frames(ds.as_ref(), &frames, &[4, 3], DType::F32), expected(&frames, 30, 30, Kind::U(4)));
    assert!(detail(ds.as_ref(), "nav_shape_from").contains("STEM Metadata"), "{:?}", ds.info().details);
    assert!(detail(ds.as_ref(), "dataset_choice").contains("automatically"));
    // The group by name, one data file by its link, and --nav-shape over the series.
    let by_group =
        OpenOptions { dataset_path: Some("/entry/data".into()), nav_shape: Some(vec![2, 6]), ..OpenOptions::default() };
    let ds = dataset::open(&path, &by_group).unwrap();
    assert_eq!(ds.shape().nav, vec![2, 6]);
    let one = open_path(&path, "/entry/data/data_000002");
    assert_eq!(one.shape().nav, vec![5]);
    assert_eq!(all_frames(one.as_ref()), fx::values(12 * 30, 30, Kind::U(4))[7 * 30..].to_vec());
    // Ten data files (dense link storage in the master), ntrigger x nimages.
    let many = dataset::open(&fx::file("layouts/dectris/many_master.h5"), &OpenOptions::default()).unwrap();
    assert_eq!(many.shape().nav, vec![4, 5]);
    assert_eq!(all_frames(many.as_ref()), fx::values(20 * 64, 31, Kind::U(2)));
    // A link to a missing file: the error names the link and the file.
    let msg = open_err(&fx::file("layouts/dectris/broken_master.h5"), None);
    assert!(
        msg.contains("broken_master.h5") && msg.contains("data_000001") && msg.contains("gone_data_000001.h5"),
        "{msg}"
    );
}

#[test]
fn velox_and_emd_stacks_take_their_frame_axes_from_the_layout() {
    // Regression (issue 22, item 7): Velox stores (height, width, frames), EMD 0.2
    // (HyperSpy, Prismatic) the transpose of the array; the trailing axes gave wrong frames.
    for (name, seed, kind) in [("layouts/velox.emd", 32, Kind::I(2)), ("layouts/emd_hyperspy.emd", 33, Kind::F(4))] {
        let ds = dataset::open(&fx::file(name), &OpenOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!((ds.shape().nav.clone(), ds.shape().sig.clone()), (vec![3], vec![4, 6]), "{name}");
        assert_eq!(all_frames(ds.as_ref()), fx::values(72, seed, kind), "{name}");
        assert_eq!(read_frames(ds.as_ref(), &[0, 2], &[3, 4], DType::F32), expected(&[0, 2], 24, seed, kind), "{name}");
        assert!(detail(ds.as_ref(), "frame_axes").contains(if name.contains("velox") { "Velox" } else { "EMD" }));
    }
    // No metadata: --sig-axes, on contiguous, frame-chunked and tile-chunked storage.
    let path = fx::file("layouts/frames_last.h5");
    for name in ["/contiguous", "/chunked", "/chunked_tiles"] {
        let options =
            OpenOptions { dataset_path: Some(name.into()), sig_axes: Some(vec![0, 1]), ..OpenOptions::default() };
        let ds = dataset::open(&path, &options).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!((ds.shape().nav.clone(), ds.shape().sig.clone()), (vec![4], vec![5, 6]), "{name}");
        assert_eq!(all_frames(ds.as_ref()), fx::values(120, 36, Kind::U(2)), "{name}");
        assert_eq!(
            read_frames(ds.as_ref(), &[1, 3], &[2, 4], DType::U16),
            expected(&[1, 3], 30, 36, Kind::U(2)),
            "{name}"
        );
    }
    let bad =
        OpenOptions { dataset_path: Some("/contiguous".into()), sig_axes: Some(vec![0, 3]), ..OpenOptions::default() };
    let msg = open_err_with(&path, &bad);
    assert!(msg.contains("--sig-axes") && msg.contains("/contiguous"), "{msg}");
}

fn open_err_with(path: &Path, options: &OpenOptions) -> String {
    match dataset::open(path, options) {
        Ok(_) => panic!("{} opened", path.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn previews_are_never_chosen_and_the_error_lists_every_numeric_dataset() {
    // Regression (issue 22, item 8): an RGB /Preview/Image (uint8, last axis 3) was
    // picked over the data.
    let ds = dataset::open(&fx::file("layouts/preview.h5"), &OpenOptions::default()).unwrap();
    assert_eq!(detail(ds.as_ref(), "dataset"), "/entry/data/data");
    assert!(detail(ds.as_ref(), "dataset_choice").contains("automatically"));
    assert_eq!(all_frames(ds.as_ref()), fx::values(4 * 64, 34, Kind::U(2)));
    // Asked for by name, the preview opens like any array.
    let rgb = open_path(&fx::file("layouts/preview.h5"), "/Preview/Image");
    assert_eq!(rgb.shape().sig, vec![16, 3]);
    // Ambiguous: every numeric dataset of any rank is listed with shape and dtype.
    let msg = open_err(&fx::file("layouts/frames_last.h5"), None);
    assert!(msg.contains("/chunked [5, 6, 4] uint16") && msg.contains("/contiguous [5, 6, 4] uint16"), "{msg}");
    let msg = open_err(&fx::file("layouts/preview.h5"), Some("/nope"));
    assert!(msg.contains("/Preview/Image [16, 16, 3] uint8") && msg.contains("/entry/mask [8, 8] uint8"), "{msg}");
}

#[test]
fn a_two_dimensional_dataset_is_one_frame() {
    // Issue 22, item 9, for HDF5.
    let ds = dataset::open(&fx::file("layouts/image2d.h5"), &OpenOptions::default()).unwrap();
    assert_eq!((ds.shape().nav.clone(), ds.shape().sig.clone()), (vec![1], vec![7, 9]));
    assert_eq!(all_frames(ds.as_ref()), fx::values(63, 35, Kind::F(4)));
}

/// Issue 33, finding 4: a 5 KiB file that gives bitshuffle-LZ4 an element size of
/// 2^32 - 1 made the decoder ask for a 512 GiB scratch buffer, and the process aborted.
/// Filter parameters are checked against the dataset's elements when it is opened.
#[test]
fn filter_parameters_from_a_crafted_file_are_checked_before_any_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(fx::file("chunked.h5")).unwrap();
    // The bslz4 dataset (uint16): client data (0, 4, element size 2, block 0, lz4 2).
    let params: Vec<u8> = [0u32, 4, 2, 0, 2].iter().flat_map(|v| v.to_le_bytes()).collect();
    let crafted: Vec<u8> = [0u32, 4, u32::MAX, 0, 2].iter().flat_map(|v| v.to_le_bytes()).collect();
    patch(&mut bytes, &params, &crafted);
    let path = dir.path().join("crafted.h5");
    std::fs::write(&path, &bytes).unwrap();
    let msg = open_err(&path, Some("/entry/data/bslz4"));
    assert!(
        msg.contains("crafted.h5") && msg.contains("bitshuffle") && msg.contains("element size of 4294967295"),
        "{msg}"
    );
}

/// Issue 33, finding 4: an external link to a FIFO hung the open (reading a FIFO waits
/// for a writer). Links are followed to regular files only.
#[cfg(unix)]
#[test]
fn an_external_link_to_a_fifo_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let src = fx::file("layouts/dectris");
    for name in ["scan_master.h5", "scan_data_000002.h5"] {
        std::fs::copy(src.join(name), dir.path().join(name)).unwrap();
    }
    let fifo = dir.path().join("scan_data_000001.h5");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success());
    let master = dir.path().join("scan_master.h5");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(open_err(&master, None));
    });
    // A guard against the hang this test is about, not a measure of speed.
    let msg = rx.recv_timeout(std::time::Duration::from_secs(120)).expect("opening the master file hung on a FIFO");
    assert!(msg.contains("scan_data_000001.h5") && msg.contains("not a regular file"), "{msg}");
}

/// External links resolve as HDF5 resolves them: an absolute name that does not exist
/// is looked for by its last component next to the linking file; a relative name keeps
/// its directories.
#[test]
fn external_link_names_resolve_as_hdf5_resolves_them() {
    use udf_host::dataset::hdf5::link_candidates;
    let from = Path::new("/data/run1/master.h5");
    let found = link_candidates(from, "/elsewhere/x_data_1.h5");
    assert_eq!(found.first().map(|p| p.as_path()), Some(Path::new("/elsewhere/x_data_1.h5")));
    assert!(found.contains(&Path::new("/data/run1/x_data_1.h5").to_path_buf()), "{found:?}");
    let found = link_candidates(from, "sub/x.h5");
    assert!(found.contains(&Path::new("/data/run1/sub/x.h5").to_path_buf()), "{found:?}");
    assert_eq!(found.last().map(|p| p.as_path()), Some(Path::new("sub/x.h5")));
}

/// Issue 33, finding 11: with several datasets in a file, the automatic choice could be
/// a dimension scale (the only stack of 3 axes next to a 2-D image) or no choice at all
/// (Delmic SPARC files: acquisitions of several sizes). A dimension scale is never
/// chosen; the largest stack is; `info` names the others and how to choose.
#[test]
fn the_largest_stack_is_chosen_never_a_dimension_scale() {
    let ds = dataset::open(&fx::file("layouts/scales.h5"), &OpenOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((ds.shape().nav.clone(), ds.shape().sig.clone()), (vec![1, 3, 4], vec![8, 6]));
    assert_eq!(all_frames(ds.as_ref()), fx::values(12 * 48, 37, Kind::U(2)));
    let choice = detail(ds.as_ref(), "dataset_choice");
    assert!(
        choice.contains("largest")
            && choice.contains("/Acquisition1/ImageData/Image")
            && choice.contains("--dataset-path"),
        "{choice}"
    );
    assert!(!choice.contains("ScaleCube"), "a dimension scale is no candidate: {choice}");
    let ds = dataset::open(&fx::file("layouts/image_and_scale.h5"), &OpenOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(detail(ds.as_ref(), "dataset"), "/image");
    assert_eq!((ds.shape().nav.clone(), ds.shape().sig.clone()), (vec![1], vec![7, 9]));
    // Named, a dimension scale still opens.
    let cube = open_path(&fx::file("layouts/scales.h5"), "/Acquisition0/ImageData/ScaleCube");
    assert_eq!(cube.shape().nav, vec![10]);
}
