//! The common options on any format: corrections (dark, gain, excluded pixels) against
//! a plain reference, sync offsets on formats that shape themselves, and `info`.

use std::sync::Arc;
use udf_host::cli::{execute, exit};
use udf_host::dataset::{ExcludedPixels, OpenOptions, SigSlice};
use udf_host::dtype::DType;
use udf_host::exec::RunOptions;
use udf_host::report::DatasetSummary;
use udf_host::udf::{Params, Udf};
use udf_host_tests::fixture_formats::mib::{self, MibKind, MibSet, counts};
use udf_host_tests::fixture_formats::read::{open, open_error, read_all, read_tile};
use udf_host_tests::fixtures::{Data, Ty, mk_uniform, write_npy};
use udf_host_tests::reference::{assert_close, to_f64};
use udf_host_tests::{load, run_on};

/// LiberTEM's `correct`, written out: `(x - dark) * gain`, then each excluded pixel is
/// the mean of its in-frame, not-excluded 8-neighbours.
fn corrected(data: &Data, dark: &[f64], gain: &[f64], excluded: &[(usize, usize)]) -> Vec<f64> {
    let (h, w) = (data.sig[0], data.sig[1]);
    let mut out = Vec::with_capacity(data.values.len());
    for i in 0..data.frames() {
        let mut frame: Vec<f64> = data.frame(i).iter().enumerate().map(|(p, &v)| (v - dark[p]) * gain[p]).collect();
        let fixed = frame.clone();
        for &(y, x) in excluded {
            let mut sum = 0.0;
            let mut n = 0;
            for dy in -1i64..=1 {
                for dx in -1i64..=1 {
                    let (ny, nx) = (y as i64 + dy, x as i64 + dx);
                    if (dy, dx) == (0, 0) || ny < 0 || nx < 0 || ny >= h as i64 || nx >= w as i64 {
                        continue;
                    }
                    if excluded.contains(&(ny as usize, nx as usize)) {
                        continue;
                    }
                    sum += fixed[ny as usize * w + nx as usize];
                    n += 1;
                }
            }
            frame[y * w + x] = sum / f64::from(n);
        }
        out.extend(frame);
    }
    out
}

fn tile_of(values: &[f64], sig: &[usize], frames: &[usize], slice: &SigSlice) -> Vec<f64> {
    let data = Data { nav: vec![values.len() / (sig[0] * sig[1])], sig: sig.to_vec(), values: values.to_vec() };
    udf_host_tests::fixture_formats::read::expected_tile(&data, frames, slice)
}

#[test]
fn corrections_match_the_plain_reference_for_every_tile() {
    let dir = tempfile::tempdir().unwrap();
    let sig = [9usize, 11];
    let data = counts(&[4, 5], &sig, 1000, 31);
    let path = dir.path().join("data.npy");
    write_npy(&path, &data, Ty::U16);
    let dark = mk_uniform(&[1], &sig, 32);
    let gain = Data { values: mk_uniform(&[1], &sig, 33).values.iter().map(|v| 0.5 + v).collect(), ..dark.clone() };
    let (dark, gain) = (dark.rounded(Ty::F32), gain.rounded(Ty::F32));
    let (dark_path, gain_path) = (dir.path().join("dark.npy"), dir.path().join("gain.npy"));
    write_npy(&dark_path, &Data { nav: vec![], ..dark.clone() }, Ty::F32);
    write_npy(&gain_path, &Data { nav: vec![], ..gain.clone() }, Ty::F32);
    // A corner, a border pixel, two neighbours of each other, one next to a tile edge.
    let excluded = [(0, 0), (8, 5), (4, 4), (4, 5), (2, 10), (6, 3)];
    let coords = ExcludedPixels::Coordinates(excluded.iter().map(|&(y, x)| vec![y, x]).collect());
    let mask_path = dir.path().join("mask.npy");
    let mask = Data {
        nav: vec![],
        sig: sig.to_vec(),
        values: (0..99).map(|p| f64::from(u8::from(excluded.contains(&(p / 11, p % 11))))).collect(),
    };
    write_npy(&mask_path, &mask, Ty::U8);
    let expected = corrected(&data, &dark.values, &gain.values, &excluded);
    for excluded_pixels in [coords, ExcludedPixels::Mask(mask_path)] {
        let options = OpenOptions {
            dark: Some(dark_path.clone()),
            gain: Some(gain_path.clone()),
            excluded_pixels: Some(excluded_pixels.clone()),
            ..Default::default()
        };
        let ds = open(&path, &options);
        assert_eq!(ds.stored_dtype().dtype, DType::F32, "result_type(float32, uint16)");
        assert_close(&read_all(ds.as_ref()), &expected, 1e-5, "whole frames");
        for (origin, shape) in
            [([0, 0], [3, 4]), ([3, 5], [3, 3]), ([7, 9], [2, 2]), ([4, 0], [1, 11]), ([0, 4], [9, 1])]
        {
            let slice = SigSlice { origin: origin.to_vec(), shape: shape.to_vec() };
            for dtype in [DType::F32, DType::F64] {
                let got = read_tile(ds.as_ref(), &[1, 2, 17], &slice, dtype);
                let want = tile_of(&expected, &sig, &[1, 2, 17], &slice);
                assert_close(&got, &want, 1e-5, &format!("{excluded_pixels:?} {slice:?} {dtype}"));
            }
        }
    }
    // Through a wasm plugin with odd tiles: the sum of the corrected frames.
    let options = OpenOptions {
        dark: Some(dark_path.clone()),
        excluded_pixels: Some(ExcludedPixels::Coordinates(vec![vec![4, 4], vec![0, 10]])),
        ..Default::default()
    };
    let only_dark = corrected(&data, &dark.values, &[1.0; 99], &[(4, 4), (0, 10)]);
    let mut sum = vec![0.0; 99];
    for (i, v) in only_dark.iter().enumerate() {
        sum[i % 99] += v;
    }
    for tile in [None, Some(vec![3, 4, 5]), Some(vec![7, 9, 1])] {
        let run = RunOptions { partitions: Some(3), tile_shape: tile.clone(), ..Default::default() };
        let udfs: Vec<(Arc<dyn Udf>, Params)> = vec![(load("sum"), Params::default())];
        let results = run_on(&path, &options, udfs, run).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(results.input_dtype, DType::F32);
        let s = results.udfs[0].buffer("intensity").expect("intensity");
        assert_close(&to_f64(&s.data), &sum, 1e-5, &format!("sum tile={tile:?}"));
    }
}

#[test]
fn corrections_on_wide_integers_compute_in_float64() {
    let dir = tempfile::tempdir().unwrap();
    let data = counts(&[3], &[2, 64], 1 << 30, 5);
    let path = &mib::write_mib(dir.path(), "wide", &data, MibSet::new(MibKind::U32))[0];
    let options =
        OpenOptions { excluded_pixels: Some(ExcludedPixels::Coordinates(vec![vec![1, 63]])), ..Default::default() };
    let ds = open(path, &options);
    assert_eq!(ds.stored_dtype().dtype, DType::F64, "result_type(float32, uint32)");
    let expected = corrected(&data, &[0.0; 128], &[1.0; 128], &[(1, 63)]);
    assert_eq!(read_all(ds.as_ref()), expected);
}

#[test]
fn bad_corrections_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let data = counts(&[2], &[5, 5], 10, 1);
    let path = dir.path().join("d.npy");
    write_npy(&path, &data, Ty::U8);
    // The centre of a fully excluded 3 x 3 block has no valid neighbour.
    let block: Vec<Vec<usize>> = (1..4).flat_map(|y| (1..4).map(move |x| vec![y, x])).collect();
    let msg = open_error(
        &path,
        &OpenOptions { excluded_pixels: Some(ExcludedPixels::Coordinates(block)), ..Default::default() },
    );
    assert!(msg.contains("[2, 2]") && msg.contains("no valid neighbour"), "{msg}");
    let msg = open_error(
        &path,
        &OpenOptions { excluded_pixels: Some(ExcludedPixels::Coordinates(vec![vec![5, 0]])), ..Default::default() },
    );
    assert!(msg.contains("[5, 0]") && msg.contains("[5, 5]"), "{msg}");
    let dark = dir.path().join("dark.npy");
    write_npy(&dark, &counts(&[], &[4, 5], 1, 1), Ty::F32);
    let msg = open_error(&path, &OpenOptions { dark: Some(dark), ..Default::default() });
    assert!(msg.contains("dark.npy") && msg.contains("[4, 5]"), "{msg}");
    let msg = open_error(&path, &OpenOptions { gain: Some(dir.path().join("nope.npy")), ..Default::default() });
    assert!(msg.contains("nope.npy"), "{msg}");
    assert_eq!(ExcludedPixels::parse("3,4; 10,12"), Ok(ExcludedPixels::Coordinates(vec![vec![3, 4], vec![10, 12]])));
    assert_eq!(ExcludedPixels::parse("mask.npy"), Ok(ExcludedPixels::Mask("mask.npy".into())));
}

#[test]
fn sync_offset_applies_to_formats_that_shape_themselves() {
    let dir = tempfile::tempdir().unwrap();
    let data = counts(&[2, 3], &[2, 2], 100, 8);
    let path = dir.path().join("s.npy");
    write_npy(&path, &data, Ty::U16);
    let ds = open(&path, &OpenOptions { sync_offset: Some(-2), ..Default::default() });
    assert_eq!(ds.shape().nav, vec![2, 3]);
    let mut expected = vec![0.0; 8];
    expected.extend_from_slice(&data.values[..16]);
    assert_eq!(read_all(ds.as_ref()), expected);
    let ds = open(&path, &OpenOptions { sync_offset: Some(5), ..Default::default() });
    let mut expected = data.values[20..].to_vec();
    expected.extend(vec![0.0; 20]);
    assert_eq!(read_all(ds.as_ref()), expected);
}

#[test]
fn info_reports_format_shape_and_tiling() {
    let dir = tempfile::tempdir().unwrap();
    let data = counts(&[8, 8], &[32, 64], 4095, 2);
    let paths = mib::write_mib(dir.path(), "info", &data, MibSet { files: 2, ..MibSet::new(MibKind::U16) });
    mib::write_hdr(&dir.path().join("info.hdr"), &[8, 8], true);
    let summary = DatasetSummary::open(&paths[0], &OpenOptions::default(), 2).unwrap();
    assert_eq!(summary.format, "mib");
    assert_eq!(summary.nav_shape, [8, 8]);
    assert_eq!(summary.sig_shape, [32, 64]);
    assert_eq!(summary.dtype, ">u2");
    assert_eq!(summary.details["files"], "2");
    assert_eq!(summary.partitions.count, 4);
    assert_eq!(summary.tile_udf.input_dtype, "float32");
    // 16 frames per partition; 16 KiB of native data per slice at least, ~1 MiB tiles.
    let tile = &summary.tile_udf.tile_shape;
    assert_eq!(tile.len(), 3);
    assert!(tile[0] <= 16 && tile[2] == 64, "{tile:?}");
    // The JSON the front ends print reads back as the same summary.
    let json = udf_host::report::json_text(&summary).unwrap();
    assert_eq!(serde_json::from_str::<DatasetSummary>(&json).unwrap(), summary);
    // Through the command line, with --format overriding detection.
    let cli = |args: &[&str]| execute(std::iter::once("udf-host").chain(args.iter().copied()));
    let hdr = dir.path().join("info.hdr").display().to_string();
    assert!(cli(&["info", &hdr]).is_ok());
    assert!(cli(&["info", &hdr, "--json", "--sync-offset", "-3", "--nav-shape", "4,16"]).is_ok());
    let npy = dir.path().join("x.npy");
    write_npy(&npy, &data, Ty::U16);
    let err = cli(&["info", &npy.display().to_string(), "--format", "mib"]).unwrap_err();
    assert_eq!(err.code, exit::USER_ERROR);
    assert!(format!("{:#}", err.error).contains("x.npy"), "{:#}", err.error);
    let err = cli(&["info", &hdr, "--format", "nope"]).unwrap_err();
    assert!(format!("{:#}", err.error).contains("mib, empad"), "{:#}", err.error);
}

#[test]
fn numpy_type_codes_give_64_bit_raw_data() {
    // Regression (issue 22, item 1): `i8`, `<i8`, `u8`, `>u8` were read as 8-bit; a file
    // whose size fits both silently gave wrong frames.
    use udf_host::dtype::StoredDType;
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<i64> = (0..32).map(|i| (i - 7) * 1_000_000_007).collect();
    for (text, big) in [("i8", false), ("<i8", false), (">i8", true), ("u8", false), (">u8", true)] {
        let path = dir.path().join(format!("d{}.raw", text.replace(['<', '>'], "_")));
        let bytes: Vec<u8> = values.iter().flat_map(|v| if big { v.to_be_bytes() } else { v.to_le_bytes() }).collect();
        std::fs::write(&path, bytes).unwrap();
        let dtype = StoredDType::parse(text).unwrap_or_else(|| panic!("{text}"));
        assert_eq!(dtype.dtype.size(), 8, "{text}");
        let options = OpenOptions {
            format: Some(udf_host::dataset::Format::Raw),
            dtype: Some(dtype),
            sig_shape: Some(vec![2, 2]),
            ..Default::default()
        };
        let ds = open(&path, &options);
        assert_eq!(ds.shape().nav, vec![8], "{text}: 256 bytes are 8 frames of 2 x 2 64-bit values");
        let want: Vec<f64> = if text.contains('u') {
            values.iter().map(|&v| v as u64 as f64).collect()
        } else {
            values.iter().map(|&v| v as f64).collect()
        };
        assert_eq!(read_all(ds.as_ref()), want, "{text}");
    }
}

#[test]
fn two_dimensional_data_is_one_frame_in_every_format() {
    // Regression (issue 22, item 9): DM and MRC opened a single image as nav [1], .npy
    // and HDF5 refused it. One rule now: the last two axes are the frame. (DM: in
    // formats_dm; HDF5: in formats_hdf5.)
    use udf_host_tests::fixture_formats::mrc;
    let dir = tempfile::tempdir().unwrap();
    let image = Data { nav: vec![], ..counts(&[1], &[5, 7], 1000, 9) };
    let npy = dir.path().join("image.npy");
    write_npy(&npy, &image, Ty::U16);
    let mrc_path = dir.path().join("image.mrc");
    mrc::write_mrc(&mrc_path, &Data { nav: vec![1], ..image.clone() }, Ty::U16, 0, false);
    for path in [npy, mrc_path] {
        let ds = open(&path, &OpenOptions::default());
        assert_eq!((ds.shape().nav.clone(), ds.shape().sig.clone()), (vec![1], vec![5, 7]), "{}", path.display());
        assert_eq!(read_all(ds.as_ref()), image.values, "{}", path.display());
    }
    // 1-D data has no frame: an error that says so.
    let line = dir.path().join("line.npy");
    write_npy(&line, &Data { nav: vec![], sig: vec![35], values: image.values.clone() }, Ty::U16);
    let msg = open_error(&line, &OpenOptions::default());
    assert!(msg.contains("line.npy") && msg.contains("fewer than 2 axes"), "{msg}");
}

/// Every file below `dir`, recursively.
fn files_below(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_below(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn every_fixture_through_every_format_is_an_error_or_frames_never_a_panic() {
    // Issue 22 acceptance: no panic on any real file pushed through any reader. Every
    // committed file (tests/data: h5py-written HDF5 and its re-created acquisition
    // layouts) and a file of every format written by the fixture writers, opened with
    // every --format, with and without raw-style options; what opens reads its first
    // and last frame.
    use udf_host::dataset::{FORMATS, Format};
    use udf_host::dtype::StoredDType;
    use udf_host_tests::fixture_formats::{blo, dm, empad, k2is, mrc, raw_csr, seq, tvips};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = counts(&[2, 2], &[8, 16], 200, 77);
    let mut files = Vec::new();
    files_below(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data"), &mut files);
    files.extend(mib::write_mib(d, "m", &data, MibSet { files: 2, ..MibSet::new(MibKind::R6) }));
    write_npy(&d.join("n.npy"), &data, Ty::U16);
    files.push(d.join("n.npy"));
    let big = counts(&[2], &[128, 128], 100, 78).rounded(Ty::F32);
    files.push(empad::write_raw(d, "e", &big, 0.0));
    empad::write_series_xml(&d.join("e.xml"), "e.raw", 2);
    files.push(d.join("e.xml"));
    blo::write_blo(&d.join("b.blo"), &counts(&[2, 2], &[8, 8], 200, 79), 8);
    seq::write_seq(&d.join("s.seq"), &Data { nav: vec![4], ..data.clone() }, 16, 5, 8);
    mrc::write_mrc(&d.join("r.mrc"), &Data { nav: vec![4], ..data.clone() }, Ty::U16, 0, false);
    files.extend([d.join("b.blo"), d.join("s.seq"), d.join("r.mrc")]);
    let series = tvips::TvipsSeries {
        bits: 16,
        version: 2,
        image_header_bytes: 128,
        frames_per_file: 2,
        lead_in: 1,
        scan_width: 2,
    };
    files.extend(tvips::write_tvips(d, "t", &Data { nav: vec![4], ..data.clone() }, series));
    let dm_options = dm::DmOptions { version: 4, big_endian: false, order_swapped: Some(true), thumbnail: true };
    dm::write(&d.join("g.dm4"), &data, Ty::U16, &dm_options);
    files.push(d.join("g.dm4"));
    let k2 = k2is::K2Options { frames: 2, inactive: 0, skew: [0; 8], trailing: 0, scan: Some((1, 2)), seed: 3 };
    files.push(k2is::write(d, "k", &k2));
    let layout = raw_csr::CsrLayout {
        indptr: raw_csr::Index::I64,
        indices: raw_csr::Index::I32,
        data: Ty::U16,
        big_endian_data: false,
    };
    files.push(raw_csr::write(d, "c", &data, &layout, &[]));
    files.push(d.join("empty.raw"));
    std::fs::write(d.join("empty.raw"), b"").unwrap();
    assert!(files.len() > 40, "{} files", files.len());
    let raw_like = OpenOptions {
        dtype: Some(StoredDType::parse("<u2").unwrap()),
        sig_shape: Some(vec![4, 4]),
        ..Default::default()
    };
    let mut opened = 0;
    for path in &files {
        for format in FORMATS.iter().map(|s| s.format).chain([Format::detect(path)]) {
            for base in [OpenOptions::default(), raw_like.clone()] {
                let options = OpenOptions { format: Some(format), ..base };
                let outcome = std::panic::catch_unwind(|| {
                    let Ok(ds) = udf_host::dataset::open(path, &options) else { return false };
                    let n = ds.shape().nav_len() as u64;
                    let full = SigSlice::full(&ds.shape().sig);
                    if n > 0 && full.len() < 1 << 24 {
                        let mut out = vec![0u8; full.len() * 8];
                        for frame in [0, n - 1] {
                            let _ = ds.read_tile(&[frame], &full, DType::F64, &mut out);
                        }
                    }
                    true
                });
                match outcome {
                    Ok(true) => opened += 1,
                    Ok(false) => {}
                    Err(_) => panic!("{} as {} panicked", path.display(), format.name()),
                }
            }
        }
    }
    assert!(opened > 40, "only {opened} openings succeeded");
}
