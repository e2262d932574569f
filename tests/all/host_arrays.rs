//! A plugin that computes with host arrays (`tests/probes/host_arrays`) against plain
//! loops over the frames, for every partitioning, tiling and ROI; old plugins of
//! contract 0.1.0 still load; a plugin that keeps every array hits the cap with a
//! clear error.

use crate::plugin_matrix::{cases, run_one, scaled, values, write};
use udf_host::array::NdArray;
use udf_host::udf::{ParamValue, Params};
use udf_host_tests::fixtures::{self, Ty};
use udf_host_tests::load;
use udf_host_tests::reference::assert_close;

#[test]
fn host_array_sums_match_plain_loops_for_every_partitioning_tiling_and_roi() {
    let dir = tempfile::tempdir().unwrap();
    let (nav, sig) = ([4, 6], [9, 11]);
    let data = scaled(fixtures::mk_uniform(&nav, &sig, 5), 100.0);
    let path = write(dir.path(), "host-arrays", &data, Ty::F32);
    let stored = data.rounded(Ty::F32);
    let udf = load("probe_host_arrays");
    let tiles = [vec![2, 3, 5], vec![1, 9, 11], vec![5, 9, 4]];
    for case in cases(24, &tiles, 3) {
        let what = format!("{case:?}");
        let results = run_one(&path, &udf, Params::default(), case.options()).unwrap_or_else(|e| panic!("{what}: {e}"));
        let r = &results.udfs[0];
        let mut sum = vec![0.0; stored.frame_len()];
        let mut sumsig = Vec::new();
        for n in (0..stored.frames()).filter(|&n| case.selected(n)) {
            let frame = stored.frame(n);
            for (o, v) in sum.iter_mut().zip(frame.iter()) {
                *o += v;
            }
            sumsig.push(frame.iter().sum::<f64>());
        }
        assert_close(&values(r, "intensity"), &sum, 1e-5, &what);
        let got: Vec<f64> = values(r, "sumsig").into_iter().filter(|v| !v.is_nan()).collect();
        assert_close(&got, &sumsig, 1e-5, &what);
    }
}

/// The Rust twin of the Python host-array plugins (`tests/probes/host_array_ops`, the
/// "Languages" benchmark's Rust column) against plain loops: sum, sum over pixels,
/// per-pixel mean and variance (pairwise-merged across tiles and partitions), a stack of
/// masks, for every partitioning, tiling and ROI; `calls` counts its calls.
#[test]
fn host_array_ops_match_plain_loops() {
    let dir = tempfile::tempdir().unwrap();
    let (nav, sig) = ([4, 6], [9, 11]);
    let data = scaled(fixtures::mk_uniform(&nav, &sig, 6), 100.0);
    let path = write(dir.path(), "host-array-ops", &data, Ty::U16);
    let stored = data.rounded(Ty::U16);
    let px = stored.frame_len();
    let masks: Vec<f32> = (0..3 * px).map(|i| ((i * 37) % 11) as f32 / 7.0 - 0.5).collect();
    let masks_param = ParamValue::Array(std::sync::Arc::new(NdArray::from_vec(&[3, 9, 11], masks.clone()).unwrap()));
    let udf = load("probe_host_array_ops");
    let op =
        |name: &str| udf_host_tests::params(&[("op", ParamValue::Text(name.into())), ("masks", masks_param.clone())]);
    let tiles = [vec![2, 3, 5], vec![1, 9, 11], vec![5, 9, 4]];
    for case in cases(24, &tiles, 7) {
        let what = format!("{case:?}");
        let frames: Vec<usize> = (0..stored.frames()).filter(|&n| case.selected(n)).collect();
        let run = |name: &str| {
            let results =
                run_one(&path, &udf, op(name), case.options()).unwrap_or_else(|e| panic!("{name} {what}: {e}"));
            results.udfs.into_iter().next().unwrap()
        };
        let sum: Vec<f64> = (0..px).map(|i| frames.iter().map(|&n| stored.frame(n)[i]).sum()).collect();
        assert_close(&values(&run("sum"), "intensity"), &sum, 1e-5, &format!("sum {what}"));
        let sumsig: Vec<f64> = frames.iter().map(|&n| stored.frame(n).iter().sum()).collect();
        let got: Vec<f64> = values(&run("sumsig"), "intensity").into_iter().filter(|v| !v.is_nan()).collect();
        assert_close(&got, &sumsig, 1e-5, &format!("sumsig {what}"));
        let count = frames.len() as f64;
        let varsum: Vec<f64> =
            (0..px).map(|i| frames.iter().map(|&n| (stored.frame(n)[i] - sum[i] / count).powi(2)).sum()).collect();
        let stddev = run("stddev");
        assert_eq!(values(&stddev, "num_frames"), vec![count], "{what}");
        assert_close(&values(&stddev, "sum"), &sum, 1e-12, &format!("stddev sum {what}"));
        if !frames.is_empty() {
            assert_close(&values(&stddev, "varsum"), &varsum, 1e-9, &format!("stddev varsum {what}"));
        }
        let dots: Vec<f64> = frames
            .iter()
            .flat_map(|&n| {
                let frame = stored.frame(n);
                let masks = &masks;
                (0..3).map(move |k| (0..px).map(|i| frame[i] * f64::from(masks[k * px + i])).sum::<f64>())
            })
            .collect();
        let got: Vec<f64> = values(&run("masks"), "intensity").into_iter().filter(|v| !v.is_nan()).collect();
        assert_close(&got, &dots, 1e-4, &format!("masks {what}"));
    }
}

/// Found profiling the "Languages" benchmark: a plugin with host tiles asking for 8 MiB
/// tiles got LiberTEM's shape (depth grown first, frames cut into signal slices), so
/// every tile was gathered into a copy instead of lent from the file mapping. UDFs that
/// all read in place now get whole frames — as many as the negotiated tile holds — on
/// float32 and on integer files (read unconverted); a plugin that takes tiles into its
/// own memory keeps LiberTEM's slices.
#[test]
fn plugins_with_host_tiles_get_whole_frames_lent_from_the_mapping() {
    let dir = tempfile::tempdir().unwrap();
    // 256 frames of 128 x 128 (64 KiB as float32): 8 MiB is 128 whole frames.
    let data = fixtures::mk_uniform(&[16, 16], &[128, 128], 3);
    let plan = |ty: Ty, udf: &str| {
        let path = write(dir.path(), &format!("frames-{ty:?}"), &data, ty);
        let opened = udf_host::dataset::DatasetSpec::file(&path, Default::default()).open().unwrap();
        let spec = udf_host::exec::UdfSpec { udf: load(udf), params: Params::default() };
        let options = udf_host::exec::RunOptions { partitions: Some(1), ..Default::default() };
        let run = udf_host::exec::Run::plan(opened, vec![spec], options).unwrap();
        (run.tiling().depth, run.tiling().slices.len())
    };
    assert_eq!(plan(Ty::F32, "probe_host_array_ops"), (128, 1), "float32, host tiles");
    assert_eq!(plan(Ty::U16, "probe_host_array_ops"), (128, 1), "uint16, host tiles");
    let (_, slices) = plan(Ty::F32, "sum");
    assert!(slices > 1, "a plugin taking tiles into its memory keeps LiberTEM's signal slices");
}

/// A plugin that keeps every host array it makes hits the live-array cap with a typed
/// error naming it, not a host panic; the same plugin without keeping them runs, and
/// so does one whose partitions each keep fewer than the cap (nothing carries over).
#[test]
fn a_plugin_that_keeps_every_array_hits_the_cap_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let frames = udf_host::wasm::MAX_LIVE_ARRAYS + 10;
    let data = fixtures::mk_uniform(&[frames], &[2, 2], 8);
    let path = write(dir.path(), "leak", &data, Ty::F32);
    let udf = load("probe_host_arrays");
    let options =
        udf_host::exec::RunOptions { partitions: Some(1), tile_shape: Some(vec![1, 2, 2]), ..Default::default() };
    let leak = udf_host_tests::params(&[("leak", ParamValue::Bool(true))]);
    let Err(err) = run_one(&path, &udf, leak, options.clone()) else {
        panic!("a plugin keeping every array must fail");
    };
    let message = err.to_string();
    assert!(message.contains("arrays") && message.contains(&udf_host::wasm::MAX_LIVE_ARRAYS.to_string()), "{message}");
    run_one(&path, &udf, Params::default(), options).expect("the same plugin without keeping arrays runs");
    // Arrays do not leak from one partition to the next: in two partitions each keeps
    // half of them, below the cap, and the run succeeds.
    let two = udf_host::exec::RunOptions { partitions: Some(2), tile_shape: Some(vec![1, 2, 2]), ..Default::default() };
    let leak = udf_host_tests::params(&[("leak", ParamValue::Bool(true))]);
    let results = run_one(&path, &udf, leak, two).expect("each partition keeps fewer arrays than the cap");
    let sums = values(&results.udfs[0], "sumsig");
    let stored = data.rounded(Ty::F32);
    let expected: Vec<f64> = (0..frames).map(|n| stored.frame(n).iter().sum()).collect();
    assert_close(&sums, &expected, 1e-5, "sums of a run whose partitions keep their arrays");
}

/// `--max-memory` caps an instance's linear memory and host arrays together: with a
/// cap of 64 MiB, 48 MiB of host arrays or 24 MiB more linear memory fit alone, 48 MiB
/// of arrays on top of 24 MiB of linear memory fail with the arrays' memory error (each
/// alone would fit), and so do 80 MiB of arrays with no linear memory to speak of.
#[test]
fn host_arrays_and_linear_memory_count_against_one_memory_cap() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_uniform(&[4], &[2, 2], 9);
    let path = write(dir.path(), "cap", &data, Ty::F32);
    let runtime = udf_host::wasm::WasmRuntime::new(udf_host::wasm::RuntimeOptions {
        max_memory: 64 << 20,
        ..udf_host_tests::runtime_options()
    })
    .unwrap();
    let (udf, _) = runtime.load(&udf_host_tests::plugin("probe_host_arrays")).unwrap();
    let udf: std::sync::Arc<dyn udf_host::udf::Udf> = std::sync::Arc::new(udf);
    let options = udf_host::exec::RunOptions { partitions: Some(1), threads: Some(1), ..Default::default() };
    let run = |grow: i64, hold: i64| {
        let params =
            udf_host_tests::params(&[("grow_mib", ParamValue::Int(grow)), ("hold_mib", ParamValue::Int(hold))]);
        run_one(&path, &udf, params, options.clone())
    };
    run(24, 0).expect("24 MiB of linear memory fit under 64 MiB");
    run(0, 48).expect("48 MiB of host arrays fit under 64 MiB");
    for (grow, hold) in [(24, 48), (0, 80)] {
        let err = run(grow, hold).err().unwrap_or_else(|| panic!("{grow} MiB grown + {hold} MiB arrays must fail"));
        let message = err.to_string();
        assert!(
            message.contains("more than the") && message.contains("may still use for arrays (--max-memory"),
            "{grow} + {hold}: {message}"
        );
    }
    drop(udf); // and its main-side instance
    assert_eq!(runtime.budget().used(), 0, "every instance gave its memory and arrays back");
}

/// A uint16 file read by a host-array plugin alone is lent to it unconverted (the plan's
/// direct dtype is the stored uint16: the plugin's tiles are converting host arrays, which
/// convert in its reductions), and gives the plain loops' sums; with a ROI the executor
/// converts (float32 tiles) and the sums are the same.
#[test]
fn a_uint16_file_reaches_a_host_array_plugin_unconverted_and_sums_as_plain_loops() {
    let dir = tempfile::tempdir().unwrap();
    let (nav, sig) = ([5, 6], [13, 9]);
    let data = scaled(fixtures::mk_uniform(&nav, &sig, 11), 60000.0);
    let path = write(dir.path(), "host-arrays-u16", &data, Ty::U16);
    let stored = data.rounded(Ty::U16);
    let udf = load("probe_host_arrays");
    let roi = fixtures::random_roi(30, 0.5, 4);
    for with_roi in [false, true] {
        let options = udf_host::exec::RunOptions {
            roi: with_roi.then(|| udf_host::roi::Roi::from_mask(roi.clone())),
            partitions: Some(3),
            ..Default::default()
        };
        let opened =
            udf_host::dataset::DatasetSpec::file(&path, udf_host::dataset::OpenOptions::default()).open().unwrap();
        let spec = udf_host::exec::UdfSpec { udf: udf.clone(), params: Params::default() };
        let run = udf_host::exec::Run::plan(opened, vec![spec], options).unwrap();
        let expected_dtype = if with_roi { udf_host::dtype::DType::F32 } else { udf_host::dtype::DType::U16 };
        assert_eq!(run.as_plan().direct_dtype, expected_dtype, "roi={with_roi}");
        let results = run.execute().unwrap();
        let mut sum = vec![0.0; stored.frame_len()];
        for n in (0..stored.frames()).filter(|&n| !with_roi || roi[n]) {
            for (o, v) in sum.iter_mut().zip(stored.frame(n).iter()) {
                *o += v;
            }
        }
        assert_close(&values(&results.udfs[0], "intensity"), &sum, 1e-6, &format!("roi={with_roi}"));
    }
}
