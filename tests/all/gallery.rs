//! The gallery (`plugins/examples/`): every UDF of LiberTEM's UDF documentation, ported
//! to the Rust SDK, against plain loops written here from the docs' definitions (each
//! port's module docs state its numbers), across partitionings, tile shapes and ROIs.
//! The gallery's index (`plugins/examples/README.md`) and its line-count table are
//! checked by `gallery_index_is_current`.

use crate::plugin_matrix::{Case, cases, returned_error, run_one, scaled};
use std::path::Path;
use std::sync::Arc;
use udf_host::array::NdArray;
use udf_host::dataset::OpenOptions;
use udf_host::dtype::DType;
use udf_host::exec::{Run, RunOptions, RunResults, UdfResults, UdfSpec};
use udf_host::roi::Roi;
use udf_host::udf::{ErrorKind, Method, ParamValue, Params, Udf};
use udf_host_tests::fixtures::{self, Data, Ty};
use udf_host_tests::reference::{assert_close, sum_frames, to_f64};
use udf_host_tests::{load, params, run_on};

/// The gallery plugin `plugins/examples/<name>/`.
fn example(name: &str) -> Arc<dyn Udf> {
    load(&format!("example_{name}"))
}

/// Write `data` as `<name>-<ty>.npy` in `dir`.
fn npy(dir: &Path, name: &str, data: &Data, ty: Ty) -> std::path::PathBuf {
    let path = dir.join(format!("{name}-{ty:?}.npy"));
    fixtures::write_npy(&path, data, ty);
    path
}

/// The frames a case selects, in compressed (flat nav) order.
fn selected(case: &Case, frames: usize) -> Vec<usize> {
    (0..frames).filter(|&n| case.selected(n)).collect()
}

/// Raw (ROI-compressed) values of buffer `name` as `f64`.
#[track_caller]
fn raw(results: &UdfResults, name: &str) -> Vec<f64> {
    to_f64(&results.buffer(name).unwrap_or_else(|| panic!("no buffer '{name}'")).raw)
}

/// A float64 array parameter.
fn array(shape: &[usize], values: Vec<f64>) -> ParamValue {
    ParamValue::Array(Arc::new(NdArray::from_vec(shape, values).expect("array param")))
}

/// Run `name` over every case of the matrix (tiles `[3, 5, 7]` and `[2, 11, 4]` for a
/// `11 x 13` frame: partial frames for the tile method) and hand each result to `check`.
fn each_case(path: &Path, name: &str, frames: usize, params: &Params, mut check: impl FnMut(&Case, &RunResults)) {
    let udf = example(name);
    for case in cases(frames, &[vec![3, 5, 7], vec![2, 11, 4]], 21) {
        let results = run_one(path, &udf, params.clone(), case.options())
            .unwrap_or_else(|e| panic!("{name} {} {case:?}: {e}", case.roi_name));
        check(&case, &results);
    }
}

fn frame_sum(data: &Data, n: usize) -> f64 {
    data.frame(n).iter().sum()
}

#[test]
fn auto_udf_maps_each_frame_to_its_row_sums_with_the_shape_of_its_value() {
    let dir = tempfile::tempdir().unwrap();
    let data = scaled(fixtures::mk_uniform(&[5, 7], &[11, 13], 31), 10.0);
    let stored = data.rounded(Ty::F32);
    let path = npy(dir.path(), "auto", &data, Ty::F32);
    each_case(&path, "auto_udf", 35, &Params::default(), |case, results| {
        let r = &results.udfs[0];
        assert_eq!(r.method, Method::Frame);
        let result = r.buffer("result").unwrap();
        assert_eq!((result.dtype(), result.extra_shape.clone()), (DType::F32, vec![11]), "{case:?}");
        let expected: Vec<f64> = selected(case, 35)
            .iter()
            .flat_map(|&n| stored.frame(n).chunks(13).map(|row| row.iter().sum::<f64>()))
            .collect();
        assert_close(&raw(r, "result"), &expected, 1e-5, &format!("auto_udf {case:?}"));
    });
    // float64 data: the f32 function gets each frame converted to float32.
    let path = npy(dir.path(), "auto", &data, Ty::F64);
    let results = run_one(&path, &example("auto_udf"), Params::default(), RunOptions::default()).unwrap();
    assert_eq!(results.input_dtype, DType::F64);
    let expected: Vec<f64> = (0..35)
        .flat_map(|n| data.frame(n).chunks(13).map(|row| row.iter().map(|&v| f64::from(v as f32)).sum::<f64>()))
        .collect();
    assert_close(&raw(&results.udfs[0], "result"), &expected, 1e-5, "auto_udf float64 data");
}

#[test]
fn sum_over_sig_and_pixelsum_give_the_sum_of_each_selected_frame() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[5, 7], &[11, 13], 32);
    let path = npy(dir.path(), "sums", &data, Ty::F32);
    for name in ["sum_over_sig", "pixelsum"] {
        each_case(&path, name, 35, &Params::default(), |case, results| {
            let expected: Vec<f64> = selected(case, 35).iter().map(|&n| frame_sum(&data, n)).collect();
            let buffer = if name == "pixelsum" { "pixelsum_nav_raw" } else { "pixelsum" };
            let b = results.udfs[0].buffer(buffer).unwrap();
            assert_eq!(b.dtype(), DType::F32, "{name}: float32 (pixelsum: the dataset's dtype)");
            assert_close(&raw(&results.udfs[0], buffer), &expected, 1e-6, &format!("{name} {case:?}"));
        });
    }
    // pixelsum's buffer takes the dataset's dtype: uint16 here (sums below 65536).
    let path = npy(dir.path(), "sums", &data, Ty::U16);
    let results = run_one(&path, &example("pixelsum"), Params::default(), RunOptions::default()).unwrap();
    let b = results.udfs[0].buffer("pixelsum_nav_raw").unwrap();
    assert_eq!((b.dtype(), b.raw.shape().to_vec()), (DType::U16, vec![35]));
    let expected: Vec<f64> = (0..35).map(|n| frame_sum(&data, n)).collect();
    assert_eq!(to_f64(&b.raw), expected);
}

#[test]
fn max_is_the_maximum_over_selected_frames_starting_from_minus_infinity() {
    let dir = tempfile::tempdir().unwrap();
    // Every value negative: a buffer starting at zero instead of -inf would show.
    let mut data = scaled(fixtures::mk_uniform(&[5, 7], &[11, 13], 33), 100.0);
    data.values.iter_mut().for_each(|v| *v -= 200.0);
    let stored = data.rounded(Ty::F32);
    let path = npy(dir.path(), "max", &data, Ty::F32);
    each_case(&path, "max", 35, &Params::default(), |case, results| {
        let mut expected = vec![f64::NEG_INFINITY; 143];
        for n in selected(case, 35) {
            for (e, &v) in expected.iter_mut().zip(stored.frame(n)) {
                *e = e.max(v);
            }
        }
        let b = results.udfs[0].buffer("maxbuf").unwrap();
        assert_eq!((b.dtype(), b.data.shape().to_vec()), (DType::F32, vec![11, 13]));
        assert_eq!(to_f64(&b.data), expected, "max {case:?}");
    });
    // Integer data with the integer dtype as input (float32 preferred: float32 here).
    let path = npy(dir.path(), "max", &fixtures::mk_random(&[4, 4], &[11, 13], 34), Ty::U16);
    let results = run_one(&path, &example("max"), Params::default(), RunOptions::default()).unwrap();
    assert_eq!(results.udfs[0].buffer("maxbuf").unwrap().dtype(), results.input_dtype);
}

#[test]
fn buffer_declarations_give_the_documented_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let path = npy(dir.path(), "decl", &fixtures::mk_random(&[4, 6], &[8, 9], 35), Ty::F32);
    let options = RunOptions { partitions: Some(3), ..Default::default() };
    let results = run_one(&path, &example("buffer_declarations"), Params::default(), options).unwrap();
    let r = &results.udfs[0];
    for (name, shape) in
        [("nav_buffer", vec![4, 6, 3, 2]), ("sig_buffer", vec![8, 9, 2]), ("single_buffer", vec![16, 16])]
    {
        let b = r.buffer(name).unwrap();
        assert_eq!((b.dtype(), b.data.shape().to_vec()), (DType::F32, shape), "{name}");
        assert!(to_f64(&b.data).iter().all(|&v| v == 0.0), "{name}: nothing is written");
    }
}

#[test]
fn my_param_mirrors_its_parameter_or_its_default() {
    let dir = tempfile::tempdir().unwrap();
    let path = npy(dir.path(), "param", &fixtures::mk_random(&[3, 5], &[4, 4], 36), Ty::F32);
    let options = || RunOptions { partitions: Some(4), ..Default::default() };
    for (given, expected) in [(None, "Eins, zwei drei!"), (Some("42"), "42")] {
        let p = given.map_or_else(Params::default, |v| params(&[("my_param", ParamValue::Text(v.into()))]));
        let results = run_one(&path, &example("my_param"), p, options()).unwrap();
        let demo = results.udfs[0].buffer("demo").unwrap();
        assert_eq!(demo.dtype(), DType::U8);
        assert_eq!(demo.raw.bytes(), expected.as_bytes(), "{given:?}");
    }
}

#[test]
fn your_udf_runs_with_sum_in_one_pass_and_with_a_roi() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[6, 5], &[7, 9], 37);
    let path = npy(dir.path(), "your", &data, Ty::F32);
    let roi: Vec<bool> = (0..30).map(|i| i % 4 != 1).collect();
    for roi in [None, Some(roi)] {
        let options = RunOptions { partitions: Some(3), roi: roi.clone().map(Roi::from_mask), ..Default::default() };
        let udfs = vec![(example("your_udf"), Params::default()), (load("sum"), Params::default())];
        let results = run_on(&path, &OpenOptions::default(), udfs, options).unwrap();
        let buf1 = to_f64(&results.udfs[0].buffer("buf1").unwrap().data);
        for (i, &v) in buf1.iter().enumerate() {
            let inside = roi.as_ref().is_none_or(|r| r[i]);
            assert!(if inside { v == 42.0 } else { v.is_nan() }, "frame {i} (in the ROI: {inside}): {v}");
        }
        let sum = to_f64(&results.udfs[1].buffer("intensity").unwrap().data);
        assert_close(&sum, &sum_frames(&data, roi.as_deref()), 1e-6, "SumUDF in the same pass");
    }
}

#[test]
fn correlate_peaks_reads_each_peak_and_rejects_peaks_outside_the_frame() {
    let dir = tempfile::tempdir().unwrap();
    let data = scaled(fixtures::mk_uniform(&[5, 7], &[11, 13], 38), 50.0);
    let stored = data.rounded(Ty::F32);
    let path = npy(dir.path(), "peaks", &data, Ty::F32);
    let peaks = [(0, 0), (10, 12), (4, 7)];
    let p = params(&[("peaks", array(&[3, 2], peaks.iter().flat_map(|&(y, x)| [y as f64, x as f64]).collect()))]);
    each_case(&path, "correlate_peaks", 35, &p, |case, results| {
        let expected: Vec<f64> =
            selected(case, 35).iter().flat_map(|&n| peaks.map(|(y, x)| stored.frame(n)[y * 13 + x])).collect();
        assert_eq!(raw(&results.udfs[0], "correlation"), expected, "{case:?}");
    });
    let outside = params(&[("peaks", array(&[1, 2], vec![11.0, 0.0]))]);
    let (kind, message) = returned_error(run_one(&path, &example("correlate_peaks"), outside, RunOptions::default()));
    assert_eq!(kind, ErrorKind::BadParam);
    assert!(message.contains("(11, 0)") && message.contains("11 x 13"), "{message}");
}

#[test]
fn coords_are_the_true_nav_coordinates_of_the_selected_frames() {
    let dir = tempfile::tempdir().unwrap();
    let path = npy(dir.path(), "coords", &fixtures::mk_random(&[5, 7], &[11, 13], 39), Ty::F32);
    each_case(&path, "coords", 35, &Params::default(), |case, results| {
        let b = results.udfs[0].buffer("coords").unwrap();
        assert_eq!(b.dtype(), DType::I64);
        let expected: Vec<f64> = selected(case, 35).iter().flat_map(|&n| [(n / 7) as f64, (n % 7) as f64]).collect();
        assert_eq!(to_f64(&b.raw), expected, "{case:?}");
    });
    // The docs' check: a ROI of (7, 13) and (11, 3) in a 16 x 16 scan.
    let path = npy(dir.path(), "coords16", &fixtures::mk_random(&[16, 16], &[2, 2], 40), Ty::F32);
    let mut roi = vec![false; 256];
    roi[7 * 16 + 13] = true;
    roi[11 * 16 + 3] = true;
    let options = RunOptions { roi: Some(Roi::from_mask(roi)), ..Default::default() };
    let results = run_one(&path, &example("coords"), Params::default(), options).unwrap();
    assert_eq!(raw(&results.udfs[0], "coords"), vec![7.0, 13.0, 11.0, 3.0]);
}

#[test]
fn average_is_the_sum_over_the_number_of_frames() {
    let dir = tempfile::tempdir().unwrap();
    let data = scaled(fixtures::mk_uniform(&[5, 7], &[11, 13], 41), 10.0);
    let stored = data.rounded(Ty::F32);
    let path = npy(dir.path(), "average", &data, Ty::F32);
    each_case(&path, "average", 35, &Params::default(), |case, results| {
        let r = &results.udfs[0];
        let chosen = case.roi.as_deref();
        let n = selected(case, 35).len() as f64;
        let sum = sum_frames(&stored, chosen);
        assert_close(&to_f64(&r.buffer("sum").unwrap().data), &sum, 1e-5, &format!("sum {case:?}"));
        assert_eq!(to_f64(&r.buffer("num_frames").unwrap().data), vec![n], "{case:?}");
        let average: Vec<f64> = sum.iter().map(|s| s / n).collect();
        let b = r.buffer("average").unwrap();
        assert_eq!(b.dtype(), DType::F32);
        assert_close(&to_f64(&b.data), &average, 1e-5, &format!("average {case:?}"));
    });
}

#[test]
fn custom_valid_mask_lays_sums_out_on_the_nav_grid_with_the_merged_positions_valid() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[5, 7], &[11, 13], 42);
    let path = npy(dir.path(), "valid", &data, Ty::F32);
    each_case(&path, "custom_valid_mask", 35, &Params::default(), |case, results| {
        let b = results.udfs[0].buffer("custom_2d").unwrap();
        let chosen = selected(case, 35);
        let shape = if case.roi.is_some() { vec![chosen.len()] } else { vec![5, 7] };
        assert_eq!(b.data.shape(), shape.as_slice(), "{case:?}");
        let expected: Vec<f64> = chosen.iter().map(|&n| frame_sum(&data, n)).collect();
        assert_close(&to_f64(&b.data), &expected, 1e-6, &format!("{case:?}"));
        assert!(b.all_valid, "{case:?}: a complete run is valid everywhere");
    });
    // Partial results: after each merged partition, exactly the merged frames are valid.
    let dataset = udf_host::dataset::open(&path, &OpenOptions::default()).unwrap();
    let spec = UdfSpec { udf: example("custom_valid_mask"), params: Params::default() };
    let run = Run::plan(dataset, vec![spec], RunOptions { partitions: Some(5), ..Default::default() }).unwrap();
    let mut iter = run.iter();
    let mut steps = 0;
    while let Some(step) = iter.next() {
        step.unwrap();
        let partial = iter.results().unwrap();
        let valid = partial.udfs[0].buffer("custom_2d").unwrap().valid.to_bools().unwrap();
        assert_eq!(valid, iter.damage().to_vec(), "after {} partitions", steps + 1);
        steps += 1;
    }
    assert_eq!(steps, 5);
}

#[test]
fn sumsig_backends_sums_each_frame_in_at_least_float32() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[5, 7], &[11, 13], 43);
    let expected: Vec<f64> = (0..35).map(|n| frame_sum(&data, n)).collect();
    for (ty, dtype) in [(Ty::F32, DType::F32), (Ty::U16, DType::F32), (Ty::F64, DType::F64)] {
        let path = npy(dir.path(), "sumsig", &data, ty);
        each_case(&path, "sumsig_backends", 35, &Params::default(), |case, results| {
            let b = results.udfs[0].buffer("intensity").unwrap();
            assert_eq!(b.dtype(), dtype, "{ty:?}");
            let chosen: Vec<f64> = selected(case, 35).iter().map(|&n| expected[n]).collect();
            assert_close(&to_f64(&b.raw), &chosen, 1e-6, &format!("{ty:?} {case:?}"));
        });
    }
}

#[test]
fn my_sum_is_the_sum_of_the_selected_frames_in_the_input_dtype() {
    let dir = tempfile::tempdir().unwrap();
    let data = scaled(fixtures::mk_uniform(&[5, 7], &[11, 13], 44), 10.0);
    for (ty, dtype) in [(Ty::F32, DType::F32), (Ty::F64, DType::F64)] {
        let stored = data.rounded(ty);
        let path = npy(dir.path(), "mysum", &data, ty);
        each_case(&path, "my_sum", 35, &Params::default(), |case, results| {
            let b = results.udfs[0].buffer("intensity").unwrap();
            assert_eq!(b.dtype(), dtype);
            let expected = sum_frames(&stored, case.roi.as_deref());
            assert_close(&to_f64(&b.data), &expected, 1e-5, &format!("{ty:?} {case:?}"));
        });
    }
}

#[test]
fn aux_scale_multiplies_each_frame_sum_by_its_own_factor() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[5, 7], &[11, 13], 45);
    let path = npy(dir.path(), "aux", &data, Ty::F32);
    let scale: Vec<f64> = (0..35).map(|n| 0.5 + n as f64 * 0.25).collect();
    let p = params(&[("scale", array(&[5, 7], scale.clone()))]);
    each_case(&path, "aux_scale", 35, &p, |case, results| {
        let expected: Vec<f64> = selected(case, 35).iter().map(|&n| scale[n] * frame_sum(&data, n)).collect();
        assert_close(&raw(&results.udfs[0], "scaled"), &expected, 1e-12, &format!("{case:?}"));
    });
}

#[test]
fn saturation_counts_pixels_at_the_largest_value_of_the_native_integer_dtype() {
    let dir = tempfile::tempdir().unwrap();
    let mut data = fixtures::mk_random(&[5, 7], &[11, 13], 46);
    for (i, v) in data.values.iter_mut().enumerate() {
        if i % 17 == 3 || i % 29 == 0 {
            *v = 65535.0;
        }
    }
    let path = npy(dir.path(), "saturation", &data, Ty::U16);
    each_case(&path, "saturation", 35, &Params::default(), |case, results| {
        assert_eq!(results.input_dtype, DType::U16, "the native dtype");
        let expected: Vec<f64> = selected(case, 35)
            .iter()
            .map(|&n| data.frame(n).iter().filter(|&&v| v == 65535.0).count() as f64)
            .collect();
        assert!(expected.iter().any(|&c| c > 0.0) || case.roi_name == "all-false");
        assert_eq!(raw(&results.udfs[0], "saturated"), expected, "{case:?}");
    });
    let path = npy(dir.path(), "saturation", &data, Ty::F32);
    let (kind, message) = returned_error(run_one(&path, &example("saturation"), Params::default(), Default::default()));
    assert_eq!(kind, ErrorKind::InvalidData);
    assert!(message.contains("integer"), "{message}");
}

#[test]
fn frame_variance_is_the_population_variance_of_each_frame() {
    let dir = tempfile::tempdir().unwrap();
    let data = scaled(fixtures::mk_uniform(&[5, 7], &[11, 13], 47), 10.0);
    let stored = data.rounded(Ty::F32);
    let path = npy(dir.path(), "variance", &data, Ty::F32);
    each_case(&path, "frame_variance", 35, &Params::default(), |case, results| {
        assert_eq!(results.udfs[0].method, Method::Partition);
        let expected: Vec<f64> = selected(case, 35)
            .iter()
            .map(|&n| {
                let f = stored.frame(n);
                let mean = f.iter().sum::<f64>() / f.len() as f64;
                f.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / f.len() as f64
            })
            .collect();
        assert_close(&raw(&results.udfs[0], "variance"), &expected, 1e-9, &format!("{case:?}"));
    });
}

/// Blobfinder's `evaluate_correlations`, on one `side x side` map, as plain loops:
/// `(center, refined, height, elevation)` in map coordinates.
fn evaluate(map: &[f64], side: usize) -> ([usize; 2], [f64; 2], f64, f64) {
    let mut best = 0;
    for i in 1..map.len() {
        if map[i] > map[best] {
            best = i;
        }
    }
    let (cy, cx) = (best / side, best % side);
    let r = [2, cy, cx, side - 1 - cy, side - 1 - cx].into_iter().min().unwrap();
    let refined = if r == 0 {
        [cy as f64, cx as f64]
    } else {
        let mut low = f64::INFINITY;
        for y in cy - r..=cy + r {
            for x in cx - r..=cx + r {
                low = low.min(map[y * side + x]);
            }
        }
        let (mut s, mut sy, mut sx) = (0.0, 0.0, 0.0);
        for y in cy - r..=cy + r {
            for x in cx - r..=cx + r {
                let w = map[y * side + x] - low;
                s += w;
                sy += w * (y - (cy - r)) as f64;
                sx += w * (x - (cx - r)) as f64;
            }
        }
        [cy as f64 + sy / s - r as f64, cx as f64 + sx / s - r as f64]
    };
    let mut elevation = f64::INFINITY;
    for y in 0..side {
        for x in 0..side {
            let dist = ((y as f64 - refined[0]).powi(2) + (x as f64 - refined[1]).powi(2)).sqrt();
            if dist >= 1.5 {
                elevation = elevation.min((map[best] - map[y * side + x]) / dist);
            }
        }
    }
    ([cy, cx], refined, map[best], elevation.max(0.0))
}

#[test]
fn sparse_correlation_finds_the_best_shift_of_the_template_around_each_peak() {
    let dir = tempfile::tempdir().unwrap();
    let (sy, sx) = (24, 26);
    // Frames with a bright disk near each expected peak, shifted per frame.
    let mut data = scaled(fixtures::mk_uniform(&[4, 5], &[sy, sx], 48), 2.0);
    let peaks = [(6usize, 7usize), (17, 18), (1, 24)];
    for n in 0..20 {
        for (k, &(py, px)) in peaks.iter().enumerate() {
            let (cy, cx) = (py as f64 + (n % 3) as f64 - 1.0, px as f64 + ((n + k) % 5) as f64 - 2.0);
            for y in 0..sy {
                for x in 0..sx {
                    let d = ((y as f64 - cy).powi(2) + (x as f64 - cx).powi(2)).sqrt();
                    if d <= 2.5 {
                        data.values[n * sy * sx + y * sx + x] += 100.0 * (3.0 - d);
                    }
                }
            }
        }
    }
    let stored = data.rounded(Ty::F32);
    let path = npy(dir.path(), "sparse", &data, Ty::F32);
    let (radius, steps, crop) = (2.0f64, 3usize, 4usize);
    let p = params(&[
        ("peaks", array(&[3, 2], peaks.iter().flat_map(|&(y, x)| [y as f64, x as f64]).collect())),
        ("radius", ParamValue::Float(radius)),
        ("steps", ParamValue::Int(steps as i64)),
    ]);
    let side = 2 * steps + 1;
    // The reference: for each frame, peak and shift, the template (d / radius inside the
    // radius) centred at peak + shift against ln(1 + max(F, 0)), cut to the frame.
    let reference = |n: usize| {
        let f = stored.frame(n);
        let mut out = vec![];
        for &(py, px) in &peaks {
            let mut map = vec![0.0; side * side];
            for (m, value) in map.iter_mut().enumerate() {
                let (cy, cx) = (
                    py as isize + (m / side) as isize - steps as isize,
                    px as isize + (m % side) as isize - steps as isize,
                );
                for y in cy - crop as isize..=cy + crop as isize {
                    for x in cx - crop as isize..=cx + crop as isize {
                        let d = (((y - cy) * (y - cy) + (x - cx) * (x - cx)) as f64).sqrt();
                        if d <= radius && (0..sy as isize).contains(&y) && (0..sx as isize).contains(&x) {
                            *value += d / radius * (1.0 + f[y as usize * sx + x as usize].max(0.0)).ln();
                        }
                    }
                }
            }
            let (center, refined, height, elevation) = evaluate(&map, side);
            let shift = |c: f64, p: usize| p as f64 + c - steps as f64;
            out.push((
                [shift(center[0] as f64, py), shift(center[1] as f64, px)],
                [shift(refined[0], py), shift(refined[1], px)],
                height,
                elevation,
            ));
        }
        out
    };
    each_case(&path, "sparse_correlation", 20, &p, |case, results| {
        let r = &results.udfs[0];
        assert!(r.buffer("corr").is_none(), "corr is private");
        let expected: Vec<_> = selected(case, 20).iter().flat_map(|&n| reference(n)).collect();
        let what = format!("{case:?}");
        let centers: Vec<f64> = expected.iter().flat_map(|e| e.0).collect();
        assert_eq!(raw(r, "centers"), centers, "centers {what}");
        let refineds: Vec<f64> = expected.iter().flat_map(|e| e.1).collect();
        assert_close(&raw(r, "refineds"), &refineds, 1e-4, &format!("refineds {what}"));
        let heights: Vec<f64> = expected.iter().map(|e| e.2).collect();
        assert_close(&raw(r, "peak_values"), &heights, 1e-5, &format!("peak_values {what}"));
        let elevations: Vec<f64> = expected.iter().map(|e| e.3).collect();
        assert_close(&raw(r, "peak_elevations"), &elevations, 1e-4, &format!("peak_elevations {what}"));
    });
}

#[test]
fn gallery_index_is_current_and_ports_stay_short() {
    // The line-count table of the gallery index comes from scripts/gallery-lines.py;
    // --check fails when the index differs from what the script computes now, or when
    // the median ratio of port to original exceeds 1.5 (issue 21's bar).
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::process::Command::new("python3")
        .arg(root.join("scripts/gallery-lines.py"))
        .arg("--check")
        .output()
        .expect("python3 runs scripts/gallery-lines.py");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "scripts/gallery-lines.py --check failed:\n{text}");
    // Every gallery crate is built and listed in the index.
    let index = std::fs::read_to_string(root.join("plugins/examples/README.md")).unwrap();
    for name in env!("UDF_EXAMPLE_PLUGIN_NAMES").split(',') {
        let dir = name.strip_prefix("example_").expect("gallery lib names start with example_");
        assert!(index.contains(&format!("[`{dir}`]({dir}/src/lib.rs)")), "{dir} is not in the gallery index");
    }
}
