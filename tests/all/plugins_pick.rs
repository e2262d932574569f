//! `pick` (LiberTEM's PickUDF) against plain frame copies (`data[roi]`), across
//! partitionings, tile shapes, ROIs and native dtypes; its dtype in a mixed run; and the
//! warning for a result larger than 256 MiB.

use std::sync::{Arc, Mutex};
use udf_host::dataset::OpenOptions;
use udf_host::dtype::{DType, StoredDType};
use udf_host::exec::{Run, RunOptions, UdfSpec};
use udf_host::log::{LogLevel, LogRecord};
use udf_host::roi::Roi;
use udf_host::udf::{BufferKind, Params, Udf};
use udf_host::wasm::WasmRuntime;
use udf_host_tests::fixtures::{self, Ty};
use udf_host_tests::reference::{to_complex, to_f64};
use udf_host_tests::{load, plugin, run_on, runtime_options};

const NAV: [usize; 2] = [5, 7];
const SIG: [usize; 2] = [19, 23];

fn rois(frames: usize) -> Vec<(&'static str, Option<Vec<bool>>)> {
    let mut single = vec![false; frames];
    single[4] = true;
    vec![
        ("no roi", None),
        ("random roi", Some(fixtures::random_roi(frames, 0.3, 41))),
        ("all-false roi", Some(vec![false; frames])),
        ("single-frame roi", Some(single)),
    ]
}

fn selected(frames: usize, roi: Option<&[bool]>) -> Vec<usize> {
    (0..frames).filter(|&i| roi.is_none_or(|r| r[i])).collect()
}

#[test]
fn pick_copies_the_selected_frames_in_their_native_dtype() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&NAV, &SIG, 40);
    let pick = load("pick");
    for (ty, dtype) in [(Ty::U16, DType::U16), (Ty::F32, DType::F32), (Ty::I32, DType::I32), (Ty::U8, DType::U8)] {
        let path = dir.path().join(format!("data-{ty:?}.npy"));
        // uint8 cannot hold the outliers; the stored values are what must come back.
        fixtures::write_npy(&path, &data, ty);
        let stored = data.rounded(ty);
        for (roi_name, roi) in rois(data.frames()) {
            let frames = selected(data.frames(), roi.as_deref());
            let expected: Vec<f64> = frames.iter().flat_map(|&i| stored.frame(i).to_vec()).collect();
            for partitions in [1, 2, 3, 7] {
                for tile in [None, Some(vec![3, 5, 7]), Some(vec![4, 19, 4]), Some(vec![64, 19, 23])] {
                    let what = format!("{ty:?} {roi_name} partitions={partitions} tile={tile:?}");
                    let options = RunOptions {
                        roi: roi.clone().map(Roi::from_mask),
                        partitions: Some(partitions),
                        tile_shape: tile,
                        ..RunOptions::default()
                    };
                    let results =
                        run_on(&path, &OpenOptions::default(), vec![(pick.clone(), Params::default())], options)
                            .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(results.input_dtype, dtype, "{what}: native dtype");
                    let b = results.udfs[0].buffer("intensity").expect("intensity");
                    assert_eq!(b.kind, BufferKind::Single, "{what}");
                    assert_eq!(b.dtype(), dtype, "{what}");
                    assert_eq!(b.data.shape(), &[frames.len(), SIG[0], SIG[1]], "{what}: (N_roi, *sig)");
                    assert!(b.all_valid, "{what}: a single buffer is all valid");
                    assert_eq!(to_f64(&b.data), expected, "{what}: frames");
                }
            }
        }
    }
}

#[test]
fn pick_copies_complex_frames() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_complex(&NAV, &SIG, 42);
    let path = dir.path().join("c.npy");
    fixtures::write_npy_complex(&path, &data, true);
    let roi = fixtures::random_roi(data.frames(), 0.5, 43);
    let options = RunOptions {
        roi: Some(Roi::from_mask(roi.clone())),
        partitions: Some(3),
        tile_shape: Some(vec![2, 7, 7]),
        ..RunOptions::default()
    };
    let results = run_on(&path, &OpenOptions::default(), vec![(load("pick"), Params::default())], options).unwrap();
    let b = results.udfs[0].buffer("intensity").unwrap();
    assert_eq!(b.dtype(), DType::C128);
    let expected: Vec<(f64, f64)> =
        selected(data.frames(), Some(&roi)).iter().flat_map(|&i| data.frame(i).to_vec()).collect();
    assert_eq!(to_complex(&b.data), expected);
}

#[test]
fn pick_takes_the_common_input_dtype_of_a_mixed_run() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&NAV, &SIG, 44);
    let path = dir.path().join("u16.npy");
    fixtures::write_npy(&path, &data, Ty::U16);
    // sum prefers float32: the run's input dtype is float32, and pick gets float32 frames.
    let roi = fixtures::random_roi(data.frames(), 0.5, 45);
    let options = RunOptions { roi: Some(Roi::from_mask(roi.clone())), partitions: Some(2), ..Default::default() };
    let udfs: Vec<(Arc<dyn Udf>, Params)> = vec![(load("pick"), Params::default()), (load("sum"), Params::default())];
    let results = run_on(&path, &OpenOptions::default(), udfs, options).unwrap();
    assert_eq!(results.input_dtype, DType::F32);
    let b = results.udfs[0].buffer("intensity").unwrap();
    assert_eq!(b.dtype(), DType::F32);
    let stored = data.rounded(Ty::U16);
    let expected: Vec<f64> =
        selected(data.frames(), Some(&roi)).iter().flat_map(|&i| stored.frame(i).to_vec()).collect();
    assert_eq!(to_f64(&b.data), expected);
}

/// Plan (without running) a pick over a raw float32 file of `frames` frames of 256 × 256
/// with `roi`, and return the warnings the plugin logged.
fn planning_warnings(path: &std::path::Path, frames: usize, roi: Option<Vec<bool>>) -> Vec<String> {
    let lines: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = lines.clone();
    let mut options = runtime_options();
    options.logger = Arc::new(move |r: &LogRecord| {
        if r.level == LogLevel::Warn {
            sink.lock().unwrap().push(format!("{}: {}", r.plugin, r.message));
        }
    });
    let runtime = WasmRuntime::new(options).unwrap();
    let (udf, _) = runtime.load(&plugin("pick")).unwrap();
    let open = OpenOptions {
        dtype: Some(StoredDType::parse("<f4").unwrap()),
        nav_shape: Some(vec![frames]),
        sig_shape: Some(vec![256, 256]),
        ..OpenOptions::default()
    };
    let dataset = udf_host::dataset::open(path, &open).unwrap();
    let spec = UdfSpec { udf: Arc::new(udf), params: Params::default() };
    let run =
        Run::plan(dataset, vec![spec], RunOptions { roi: roi.map(Roi::from_mask), ..Default::default() }).unwrap();
    drop(run);
    lines.lock().unwrap().clone()
}

#[test]
fn pick_warns_when_the_result_exceeds_256_mib() {
    let dir = tempfile::tempdir().unwrap();
    // 1100 frames of 256 x 256 float32 = 275 MiB; a sparse file, never read (plan only).
    let frames = 1100;
    let path = dir.path().join("big.raw");
    std::fs::File::create(&path).unwrap().set_len((frames * 256 * 256 * 4) as u64).unwrap();
    let warnings = planning_warnings(&path, frames, None);
    assert!(
        warnings.iter().any(|w| w.contains("pick") && w.contains("275 MiB") && w.contains("ROI")),
        "expected a size warning, got {warnings:?}"
    );
    // A ROI of two frames is small: no warning.
    let mut roi = vec![false; frames];
    roi[3] = true;
    roi[700] = true;
    let warnings = planning_warnings(&path, frames, Some(roi));
    assert!(warnings.is_empty(), "no warning expected, got {warnings:?}");
}
