//! The contract's rules (API.md §3, §5, §6, §8, §9) checked with the `probe_contract`
//! plugin, which verifies view shapes from inside and records what it saw.

use std::path::{Path, PathBuf};
use udf_host::array::NdArray;
use udf_host::dataset::OpenOptions;
use udf_host::dtype::DType;
use udf_host::exec::{Run, RunError, RunOptions, UdfSpec};
use udf_host::roi::Roi;
use udf_host::udf::{CallError, ParamValue, Params};
use udf_host_tests::fixtures::{self, Data, Ty};
use udf_host_tests::reference::{assert_close, sum_frames, to_complex, to_f64};
use udf_host_tests::{load, params, run_on};

const NAV: [usize; 2] = [3, 5];
const SIG: [usize; 2] = [6, 7];

fn dataset(dir: &Path) -> (PathBuf, Data) {
    let data = fixtures::mk_random(&NAV, &SIG, 11);
    let path = dir.join("contract.npy");
    fixtures::write_npy(&path, &data, Ty::F32);
    (path, data)
}

fn text(v: &str) -> ParamValue {
    ParamValue::Text(v.into())
}

/// The ROIs of the acceptance matrix: none, random, all-false, a single frame.
fn rois() -> Vec<(&'static str, Option<Vec<bool>>)> {
    let random: Vec<bool> = (0..15).map(|i| [0, 2, 3, 7, 8, 12, 14].contains(&i)).collect();
    let single: Vec<bool> = (0..15).map(|i| i == 9).collect();
    vec![("none", None), ("random", Some(random)), ("all-false", Some(vec![false; 15])), ("single", Some(single))]
}

#[test]
fn views_coverage_and_coordinates_in_every_method_partitioning_tiling_and_roi() {
    let dir = tempfile::tempdir().unwrap();
    let (path, data) = dataset(dir.path());
    let probe = load("probe_contract");
    for method in ["tile", "frame", "partition"] {
        for partitions in [1, 2, 3, 7] {
            for tile in [vec![2, 6, 7], vec![3, 4, 5], vec![1, 1, 7], vec![4, 6, 3]] {
                for (roi_name, roi) in rois() {
                    let what = format!("method {method}, {partitions} partitions, tile {tile:?}, roi {roi_name}");
                    let selected: Vec<bool> = roi.clone().unwrap_or_else(|| vec![true; 15]);
                    let n = selected.iter().filter(|&&s| s).count();
                    let options = RunOptions {
                        roi: roi.map(Roi::from_mask),
                        partitions: Some(partitions),
                        tile_shape: Some(tile.clone()),
                        ..Default::default()
                    };
                    let p = params(&[("method", text(method))]);
                    let results = run_on(&path, &OpenOptions::default(), vec![(probe.clone(), p)], options)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    let r = &results.udfs[0];
                    let slices = if method == "tile" { 6usize.div_ceil(tile[1]) * 7usize.div_ceil(tile[2]) } else { 1 };
                    let nonempty = (0..partitions.min(15))
                        .filter(|&k| {
                            (k * 15 / partitions.min(15)..(k + 1) * 15 / partitions.min(15)).any(|f| selected[f])
                        })
                        .count();

                    let visits = to_f64(&r.buffer("visits").unwrap().data);
                    let pixels = to_f64(&r.buffer("pixels").unwrap().data);
                    let coords = to_f64(&r.buffer("coords").unwrap().data);
                    let compressed = to_f64(&r.buffer("compressed").unwrap().raw);
                    let derived = r.buffer("derived").unwrap();
                    let mut k = 0;
                    for f in 0..15 {
                        if selected[f] {
                            assert_eq!(visits[f], slices as f64, "{what}: visits of frame {f}");
                            assert_eq!(pixels[f], 42.0, "{what}: pixels of frame {f}");
                            assert_eq!(
                                &coords[2 * f..2 * f + 2],
                                &[(f / 5) as f64, (f % 5) as f64],
                                "{what}: coords {f}"
                            );
                            assert_eq!(compressed[k], k as f64, "{what}: compressed index of frame {f}");
                            k += 1;
                        } else {
                            assert_eq!((visits[f], pixels[f]), (0.0, 0.0), "{what}: frame {f} outside the ROI is 0");
                        }
                    }
                    let derived_data = to_f64(&derived.data);
                    let derived_valid = derived.valid.to_bools().unwrap();
                    for f in 0..15 {
                        if selected[f] {
                            assert_eq!(derived_data[f], 42.0, "{what}");
                        } else {
                            assert!(derived_data[f].is_nan(), "{what}: float nav results are NaN outside the ROI");
                        }
                        assert_eq!(derived_valid[f], selected[f], "{what}: valid mask of frame {f}");
                    }
                    assert_eq!(derived.data.shape(), &NAV, "{what}");
                    assert_eq!(derived.raw.shape(), &[n], "{what}: raw is compressed");
                    let coverage = to_f64(&r.buffer("coverage").unwrap().data);
                    assert!(coverage.iter().all(|&c| c == n as f64), "{what}: every pixel of every frame once");
                    let tiles = to_f64(&r.buffer("tiles").unwrap().data);
                    assert_eq!(tiles[3], nonempty as f64, "{what}: one postprocess per non-empty partition");
                    assert_eq!(to_f64(&r.buffer("merges").unwrap().data), vec![nonempty as f64], "{what}");
                    assert_eq!(r.buffer("empty").unwrap().data.shape(), &[3, 5, 0], "{what}");
                    assert!(r.buffer("scratch").is_none(), "{what}: private buffers are not results");
                    let expected_sum = sum_frames(&data.rounded(Ty::F32), Some(&selected));
                    assert_close(&to_f64(&r.buffer("sum").unwrap().data), &expected_sum, 1e-5, &what);
                    assert_eq!(results.stats.partitions_merged, nonempty, "{what}: empty partitions are skipped");
                }
            }
        }
    }
}

fn violation(v: &str) -> Result<udf_host::exec::RunResults, RunError> {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = dataset(dir.path());
    let p = params(&[("violation", text(v))]);
    run_on(&path, &OpenOptions::default(), vec![(load("probe_contract"), p)], RunOptions::default())
}

#[track_caller]
fn contract_error(v: &str, needle: &str) {
    match violation(v) {
        Err(RunError::Udf { at, error: CallError::Contract(message), .. }) => {
            assert_eq!(at.method, "get_results", "{v}");
            assert!(message.contains(needle), "{v}: {message}");
        }
        other => panic!("{v}: expected a contract error, got {other:?}"),
    }
}

#[test]
fn get_results_rules() {
    assert!(violation("none").is_ok());
    contract_error("undeclared", "returned undeclared buffer 'surprise'");
    contract_error("private", "returned private buffer 'scratch'");
    contract_error("missing-result-only", "did not produce result-only buffer 'derived'");
    contract_error("wrong-kind", "declared int32 (the kind must match)");
    contract_error("bad-mask", "valid mask of 'derived'");
}

#[test]
fn custom_valid_masks() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = dataset(dir.path());
    let run = |mask: &str| {
        let p = params(&[("mask", text(mask))]);
        let results = run_on(&path, &OpenOptions::default(), vec![(load("probe_contract"), p)], RunOptions::default());
        results.unwrap().udfs[0].buffer("derived").unwrap().valid.to_bools().unwrap()
    };
    assert_eq!(run("none"), vec![true; 15]);
    assert_eq!(run("false"), vec![false; 15]);
    assert_eq!(run("per-nav"), (0..15).map(|i| i % 2 == 0).collect::<Vec<_>>());
    assert_eq!(run("per-element"), (0..15).map(|i| i % 3 == 0).collect::<Vec<_>>());
}

#[test]
fn iteration_yields_partial_results_with_valid_masks() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = dataset(dir.path());
    let data = udf_host::dataset::open(&path, &OpenOptions::default()).unwrap();
    let spec = UdfSpec { udf: load("probe_contract"), params: Params::default() };
    let options = RunOptions { partitions: Some(5), threads: Some(2), ..Default::default() };
    let mut iter = Run::plan(data, vec![spec], options).unwrap().iter();
    let mut merged_before = 0;
    let mut steps = 0;
    while let Some(step) = iter.next() {
        let step = step.unwrap();
        steps += 1;
        assert_eq!(step.merged, steps);
        let results = iter.results().unwrap();
        let damage = iter.damage().to_vec();
        let merged_now = damage.iter().filter(|&&d| d).count();
        assert_eq!(merged_now, merged_before + 3, "each partition adds its 3 frames");
        merged_before = merged_now;
        let visits = results.udfs[0].buffer("visits").unwrap();
        assert_eq!(visits.valid.to_bools().unwrap(), damage, "nav valid mask = merged positions");
        let visit_values = to_f64(&visits.data);
        for (f, &d) in damage.iter().enumerate() {
            assert_eq!(visit_values[f] > 0.0, d, "merged frames have data, unmerged are still zero");
        }
        assert!(results.udfs[0].buffer("coverage").unwrap().all_valid, "sig buffers are always valid");
    }
    assert_eq!(steps, 5);
    let last = iter.results().unwrap();
    assert!(last.udfs[0].buffer("visits").unwrap().all_valid);
}

#[test]
fn parameter_updates_reach_partitions_started_later() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[16], &[4, 4], 3);
    let path = dir.path().join("d.npy");
    fixtures::write_npy(&path, &data, Ty::F32);
    let ds = udf_host::dataset::open(&path, &OpenOptions::default()).unwrap();
    let spec = UdfSpec { udf: load("probe_contract"), params: params(&[("scale", ParamValue::Float(1.0))]) };
    let options = RunOptions { partitions: Some(8), threads: Some(1), ..Default::default() };
    let mut iter = Run::plan(ds, vec![spec], options).unwrap().iter();
    iter.next().unwrap().unwrap();
    iter.update_params(0, &params(&[("scale", ParamValue::Float(5.0))])).unwrap();
    let err = iter.update_params(0, &params(&[("nope", ParamValue::Float(5.0))])).unwrap_err();
    assert!(err.to_string().contains("no parameter 'nope'"), "{err}");
    for step in iter.by_ref() {
        step.unwrap();
    }
    let scaled = to_f64(&iter.results().unwrap().udfs[0].buffer("scaled").unwrap().data);
    // One thread, a channel of two: partitions from the fifth on start after the update.
    assert!(scaled[8..].iter().all(|&s| s == 5.0), "{scaled:?}");
    let first_new = scaled.iter().position(|&s| s == 5.0).unwrap();
    assert!(
        scaled[..first_new].iter().all(|&s| s == 1.0) && scaled[first_new..].iter().all(|&s| s == 5.0),
        "{scaled:?}"
    );
}

/// Write a 1-frame-per-position `.npy` of `dtype` with values 0..n.
fn typed_dataset(dir: &Path, dtype: DType) -> PathBuf {
    let n = 4 * 2 * 3;
    let mut bytes = Vec::new();
    for i in 0..n {
        udf_host::sample::encode(f64::from(i % 2), dtype, false, &mut bytes);
    }
    let array = NdArray::from_bytes(dtype, &[2, 2, 2, 3], &bytes).unwrap();
    let path = dir.join(format!("{}.npy", dtype.name()));
    let mut file = std::fs::File::create(&path).unwrap();
    udf_host::npy::write_array(&mut file, &array).unwrap();
    path
}

#[test]
fn input_dtype_rule_matches_libertem_table() {
    let dir = tempfile::tempdir().unwrap();
    // (preferred, native) -> input: tests/udf/test_simple_udf.py::test_dtypes.
    let table = [
        ("bool", DType::U16, DType::U16),
        ("float32", DType::Bool, DType::F32),
        ("float32", DType::C64, DType::C64),
        ("float32", DType::C128, DType::C128),
        ("int16", DType::U16, DType::I32),
        ("native", DType::I32, DType::I32),
        ("float32", DType::I32, DType::F64),
    ];
    for (preferred, native, expected) in table {
        let path = typed_dataset(dir.path(), native);
        let p = params(&[("dtype", text(preferred))]);
        let results = run_on(&path, &OpenOptions::default(), vec![(load("probe_contract"), p)], RunOptions::default())
            .unwrap_or_else(|e| panic!("{preferred} on {native}: {e}"));
        assert_eq!(results.input_dtype, expected, "preferred {preferred}, native {native}");
        assert_eq!(results.udfs[0].buffer("sum").unwrap().dtype(), expected, "the probe saw {expected} tiles");
    }
    // All UDFs of a run share one dtype: float32 and float64 preferences give float64.
    let path = typed_dataset(dir.path(), DType::U16);
    let udfs = vec![
        (load("probe_contract"), params(&[("dtype", text("float32"))])),
        (load("probe_contract"), params(&[("dtype", text("float64"))])),
    ];
    let results = run_on(&path, &OpenOptions::default(), udfs, RunOptions::default()).unwrap();
    assert_eq!(results.input_dtype, DType::F64);
    assert_eq!(results.udfs[1].name, "contract-2", "the same plugin twice gets distinct names");
}

/// A plugin alone in a run gets each tile the executor gathers or converts read straight
/// into its memory (`PartitionRunner::process_unread`); two plugins share one read into
/// the executor's buffer. Both must see the same elements, for every dtype, converted or
/// not, with sliced tiles and a ROI.
#[test]
fn tiles_read_into_a_plugins_memory_hold_the_same_elements_as_shared_tiles() {
    let dir = tempfile::tempdir().unwrap();
    let value = |i: usize| ((i * 7) % 5) as f64;
    let n = NAV.iter().chain(&SIG).product::<usize>();
    let frame_len = SIG.iter().product::<usize>();
    // (stored, preferred, input): converted (u16 -> f32, i32 -> f64) and native cases.
    let cases = [
        (DType::U8, "native", DType::U8),
        (DType::U16, "native", DType::U16),
        (DType::U16, "float32", DType::F32),
        (DType::I16, "native", DType::I16),
        (DType::U32, "native", DType::U32),
        (DType::I32, "float32", DType::F64),
        (DType::I64, "native", DType::I64),
        (DType::F32, "native", DType::F32),
        (DType::F64, "native", DType::F64),
        (DType::C64, "native", DType::C64),
        (DType::C128, "native", DType::C128),
    ];
    for (stored, preferred, input) in cases {
        let mut bytes = Vec::new();
        for i in 0..n {
            udf_host::sample::encode(value(i), stored, false, &mut bytes);
        }
        let array = NdArray::from_bytes(stored, &[NAV[0], NAV[1], SIG[0], SIG[1]], &bytes).unwrap();
        let path = dir.path().join(format!("{}.npy", stored.name()));
        udf_host::npy::write_array(&mut std::fs::File::create(&path).unwrap(), &array).unwrap();
        for tile in [vec![2, 6, 7], vec![3, 4, 5], vec![1, 1, 7]] {
            for (roi_name, roi) in rois().into_iter().filter(|(name, _)| ["none", "random"].contains(name)) {
                let what = format!("{stored} read as {preferred}, tile {tile:?}, roi {roi_name}");
                let selected = roi.clone().unwrap_or_else(|| vec![true; 15]);
                let mut expected = vec![0.0; frame_len];
                for (f, _) in selected.iter().enumerate().filter(|(_, s)| **s) {
                    for (p, e) in expected.iter_mut().enumerate() {
                        *e += value(f * frame_len + p);
                    }
                }
                let options = || RunOptions {
                    roi: roi.clone().map(Roi::from_mask),
                    partitions: Some(2),
                    tile_shape: Some(tile.clone()),
                    ..Default::default()
                };
                let p = params(&[("method", text("tile")), ("dtype", text(preferred))]);
                let open = OpenOptions::default();
                let alone = run_on(&path, &open, vec![(load("probe_contract"), p.clone())], options())
                    .unwrap_or_else(|e| panic!("{what}, alone: {e}"));
                let udfs = vec![(load("probe_contract"), p.clone()), (load("probe_contract"), p)];
                let shared = run_on(&path, &open, udfs, options()).unwrap_or_else(|e| panic!("{what}, shared: {e}"));
                assert_eq!(alone.input_dtype, input, "{what}");
                let sum = &alone.udfs[0].buffer("sum").unwrap().data;
                assert_eq!(sum.dtype(), input, "{what}");
                assert_eq!(sum.bytes(), shared.udfs[0].buffer("sum").unwrap().data.bytes(), "{what}: alone vs shared");
                let actual = if matches!(input, DType::C64 | DType::C128) {
                    let (re, im): (Vec<f64>, Vec<f64>) = to_complex(sum).into_iter().unzip();
                    assert!(im.iter().all(|&x| x == 0.0), "{what}: imaginary parts");
                    re
                } else {
                    to_f64(sum)
                };
                assert_eq!(actual, expected, "{what}");
            }
        }
    }
}

#[test]
fn udfs_with_different_methods_share_one_pass() {
    let dir = tempfile::tempdir().unwrap();
    let (path, data) = dataset(dir.path());
    for methods in [["tile", "frame"], ["tile", "partition"], ["frame", "partition"]] {
        let udfs = methods.iter().map(|m| (load("probe_contract"), params(&[("method", text(m))]))).collect();
        let options = RunOptions { partitions: Some(3), tile_shape: Some(vec![2, 3, 3]), ..Default::default() };
        let results = run_on(&path, &OpenOptions::default(), udfs, options).unwrap();
        for r in &results.udfs {
            let expected = sum_frames(&data.rounded(Ty::F32), None);
            assert_close(&to_f64(&r.buffer("sum").unwrap().data), &expected, 1e-5, &format!("{methods:?}"));
            assert!(to_f64(&r.buffer("pixels").unwrap().data).iter().all(|&p| p == 42.0), "{methods:?}");
        }
    }
}

#[test]
fn an_unknown_method_is_a_bad_param() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = dataset(dir.path());
    let p = params(&[("method", text("diagonal"))]);
    let err =
        run_on(&path, &OpenOptions::default(), vec![(load("probe_contract"), p)], RunOptions::default()).unwrap_err();
    assert!(err.is_user_error() && err.to_string().contains("method 'diagonal'"), "{err}");
}

#[test]
fn aux_data_is_sliced_per_partition_tile_and_frame_after_the_roi() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = dataset(dir.path());
    let aux_values: Vec<f32> = (0..30).map(|i| i as f32 * 0.5).collect();
    for aux_shape in [vec![3, 5, 2], vec![15, 2]] {
        let aux = std::sync::Arc::new(NdArray::from_vec(&aux_shape, aux_values.clone()).unwrap());
        for method in ["tile", "frame", "partition"] {
            for (roi_name, roi) in rois() {
                let what = format!("aux {aux_shape:?}, {method}, roi {roi_name}");
                let selected = roi.clone().unwrap_or_else(|| vec![true; 15]);
                let options = RunOptions {
                    roi: roi.map(Roi::from_mask),
                    partitions: Some(3),
                    tile_shape: Some(vec![2, 3, 7]),
                    ..Default::default()
                };
                let p = params(&[("aux", ParamValue::Array(aux.clone())), ("method", text(method))]);
                let results = run_on(&path, &OpenOptions::default(), vec![(load("probe_aux"), p)], options)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let echo = to_f64(&results.udfs[0].buffer("echo").unwrap().data);
                for f in 0..15 {
                    for e in 0..2 {
                        let got = echo[2 * f + e];
                        if selected[f] {
                            assert_eq!(got, f64::from(aux_values[2 * f + e]), "{what}: frame {f}");
                        } else {
                            assert!(got.is_nan(), "{what}: frame {f} outside the ROI");
                        }
                    }
                }
            }
        }
    }
    let wrong = std::sync::Arc::new(NdArray::from_vec(&[4, 2], vec![0f32; 8]).unwrap());
    let err = run_on(
        &path,
        &OpenOptions::default(),
        vec![(load("probe_aux"), params(&[("aux", ParamValue::Array(wrong))]))],
        RunOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("leading axes must be the nav shape [3, 5]"), "{err}");
}

#[test]
fn preprocess_on_the_main_side_initialises_the_merged_buffers() {
    let dir = tempfile::tempdir().unwrap();
    let mut data = fixtures::mk_uniform(&[4, 3], &[5, 5], 8);
    data.values.iter_mut().for_each(|v| *v += 1.0); // all values in [1, 2): zero is no neutral element
    let path = dir.path().join("d.npy");
    fixtures::write_npy(&path, &data, Ty::F32);
    let stored = data.rounded(Ty::F32);
    let (mut lo, mut hi) = (vec![f64::INFINITY; 25], vec![f64::NEG_INFINITY; 25]);
    for f in 0..12 {
        for (p, &v) in stored.frame(f).iter().enumerate() {
            lo[p] = lo[p].min(v);
            hi[p] = hi[p].max(v);
        }
    }
    let options = RunOptions { partitions: Some(3), ..Default::default() };
    let results =
        run_on(&path, &OpenOptions::default(), vec![(load("probe_minmax"), Params::default())], options.clone())
            .unwrap();
    assert_eq!(to_f64(&results.udfs[0].buffer("min").unwrap().data), lo);
    assert_eq!(to_f64(&results.udfs[0].buffer("max").unwrap().data), hi);
    // Without the main-side initialisation the merged minimum starts at zero.
    let p = params(&[("main", ParamValue::Bool(false))]);
    let results = run_on(&path, &OpenOptions::default(), vec![(load("probe_minmax"), p)], options).unwrap();
    assert!(to_f64(&results.udfs[0].buffer("min").unwrap().data).iter().all(|&v| v == 0.0));
}

#[test]
fn get_results_is_only_called_when_results_are_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = dataset(dir.path());
    let ds = udf_host::dataset::open(&path, &OpenOptions::default()).unwrap();
    // With scale NaN the probe's get_results fails; merging must not call it.
    let spec = UdfSpec { udf: load("probe_contract"), params: params(&[("scale", ParamValue::Float(f64::NAN))]) };
    let mut iter = Run::plan(ds, vec![spec], RunOptions { partitions: Some(3), ..Default::default() }).unwrap().iter();
    for step in iter.by_ref() {
        step.unwrap();
    }
    let err = iter.results().unwrap_err();
    assert!(err.to_string().contains("scale is NaN"), "{err}");
}

#[test]
fn shuffled_merges_forced_methods_and_kept_partition_buffers() {
    let dir = tempfile::tempdir().unwrap();
    let (path, data) = dataset(dir.path());
    let base = RunOptions { partitions: Some(5), tile_shape: Some(vec![2, 3, 4]), ..Default::default() };
    let run = |options: RunOptions| {
        run_on(&path, &OpenOptions::default(), vec![(load("probe_contract"), Params::default())], options).unwrap()
    };
    let reference = sum_frames(&data.rounded(Ty::F32), None);
    for seed in [1, 2, 3] {
        let results = run(RunOptions { shuffle_merges: Some(seed), ..base.clone() });
        assert_close(&to_f64(&results.udfs[0].buffer("sum").unwrap().data), &reference, 1e-5, "shuffled");
        assert_eq!(
            to_f64(&results.udfs[0].buffer("compressed").unwrap().raw),
            (0..15).map(f64::from).collect::<Vec<_>>()
        );
    }
    for method in [udf_host::udf::Method::Frame, udf_host::udf::Method::Partition] {
        let results = run(RunOptions { force_method: Some(method), ..base.clone() });
        let visits = to_f64(&results.udfs[0].buffer("visits").unwrap().data);
        assert!(visits.iter().all(|&v| v == 1.0), "{method:?}: one visit per frame, not one per tile slice");
    }
    let ds = udf_host::dataset::open(&path, &OpenOptions::default()).unwrap();
    let spec = UdfSpec { udf: load("probe_contract"), params: Params::default() };
    let mut iter =
        Run::plan(ds, vec![spec], RunOptions { keep_partition_buffers: true, ..base.clone() }).unwrap().iter();
    for step in iter.by_ref() {
        step.unwrap();
    }
    let kept = iter.partition_buffers(0);
    assert_eq!(kept.len(), 5);
    let frames: usize = kept.iter().map(|(_, b)| b.iter().find(|b| b.name == "visits").unwrap().array.len()).sum();
    assert_eq!(frames, 15);
    let results = iter.results().unwrap();
    assert_eq!(results.udfs[0].instances.len(), 5, "wasm plugins report instance stats");
    assert!(results.udfs[0].instances.iter().all(|(_, s)| s.peak_memory > 0 && s.process_calls > 0));
}
