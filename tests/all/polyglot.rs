//! Plugins written in C, Zig, Python and JavaScript (`plugins/polyglot/`, SDKs in
//! `guest-sdk/{c,zig,python,js}`) against plain-Rust references and the Rust `sum`/`sumsig`, across partitionings, odd
//! tile shapes, dtypes and a ROI.
//!
//! Python and JavaScript components take seconds to compile; the shared test cache
//! (`udf_host_tests::test_cache_dir()`) makes reruns fast. C and Zig components are
//! committed (`scripts/polyglot/fixtures.sh` rebuilds them bit for bit); Python and
//! JavaScript ones are built by `scripts/polyglot/{python,js}.sh` into `target/polyglot/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use udf_host::array::NdArray;
use udf_host::conformance::Status;
use udf_host::dataset::OpenOptions;
use udf_host::dtype::DType;
use udf_host::exec::{RunError, RunOptions};
use udf_host::roi::Roi;
use udf_host::udf::{ParamValue, Params, Udf};
use udf_host::wasm::{RuntimeOptions, WasmRuntime};
use udf_host_tests::fixtures::{self, Data, Ty};
use udf_host_tests::reference::{assert_close, sum_frames, sum_sig, to_f64};
use udf_host_tests::{params, plugin, run_on, runtime_options};

/// Languages with `sum` and `sumsig` plugins.
const LANGUAGES: [&str; 4] = ["c", "zig", "python", "js"];

/// The component `<language>/<name>.wasm`: committed in `tests/fixtures/polyglot/` (C, Zig)
/// or built by `scripts/polyglot/<language>.sh` into `target/polyglot/` (Python, JS;
/// `scripts/test.sh` and CI build them).
fn component(language: &str, name: &str) -> PathBuf {
    let file = format!("{name}.wasm");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let committed = root.join("tests/fixtures/polyglot").join(language).join(&file);
    if committed.exists() {
        return committed;
    }
    let built = root.join("target/polyglot").join(language).join(&file);
    assert!(
        built.exists(),
        "{} is missing: build it with scripts/polyglot/{language}.sh (scripts/test.sh does)",
        built.display()
    );
    built
}

/// A runtime for these tests: the shared test cache, and time to compile the Python and
/// JavaScript components (seconds each, minutes on a busy machine) on a first run.
fn polyglot_runtime() -> &'static WasmRuntime {
    static RUNTIME: OnceLock<WasmRuntime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        let options = RuntimeOptions { compile_timeout: Duration::from_secs(1800), ..runtime_options() };
        WasmRuntime::new(options).expect("runtime")
    })
}

/// Load a component once per test process: the tests run in parallel, and compiling a
/// Python or JavaScript component twice at once would only cost time.
fn load_path(path: &Path) -> Arc<dyn Udf> {
    static LOADED: Mutex<BTreeMap<PathBuf, Arc<dyn Udf>>> = Mutex::new(BTreeMap::new());
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(udf) = loaded.get(path) {
        return udf.clone();
    }
    let (udf, _) = polyglot_runtime().load(path).unwrap_or_else(|e| panic!("{e}"));
    let udf: Arc<dyn Udf> = Arc::new(udf);
    loaded.insert(path.to_owned(), udf.clone());
    udf
}

/// A polyglot plugin.
fn load_polyglot(language: &str, name: &str) -> Arc<dyn Udf> {
    load_path(&component(language, name))
}

/// A Rust plugin from `plugins/`, with the same runtime.
fn load_rust(name: &str) -> Arc<dyn Udf> {
    load_path(&plugin(name))
}

fn write_npy(dir: &Path, data: &Data, ty: Ty) -> PathBuf {
    let path = dir.join(format!("data-{ty:?}-{}.npy", data.frames()));
    fixtures::write_npy(&path, data, ty);
    path
}

fn array_param(dtype: DType, shape: &[usize], values: &[f64]) -> ParamValue {
    let bytes: Vec<u8> = match dtype {
        DType::F32 => values.iter().flat_map(|&v| (v as f32).to_le_bytes()).collect(),
        DType::F64 => values.iter().flat_map(|&v| v.to_le_bytes()).collect(),
        other => panic!("array_param: {other:?}"),
    };
    ParamValue::Array(Arc::new(NdArray::from_bytes(dtype, shape, &bytes).expect("array param")))
}

#[test]
fn sum_and_sumsig_in_every_language_match_the_reference_and_the_rust_plugins() {
    let dir = tempfile::tempdir().unwrap();
    // 35 frames of 19 x 23: no tile shape below divides the frame evenly.
    let data = fixtures::mk_random(&[5, 7], &[19, 23], 11);
    let rust_sum = load_rust("sum");
    let rust_sumsig = load_rust("sumsig");
    for language in LANGUAGES {
        let sum = load_polyglot(language, "sum");
        let sumsig = load_polyglot(language, "sumsig");
        for ty in [Ty::F32, Ty::U16] {
            let path = write_npy(dir.path(), &data, ty);
            let stored = data.rounded(ty);
            let expected_sum = sum_frames(&stored, None);
            let expected_sig = sum_sig(&stored);
            for partitions in [1, 3, 7] {
                for tile in [None, Some(vec![3, 5, 7]), Some(vec![1, 19, 23]), Some(vec![4, 19, 4])] {
                    let what = format!("{language} {ty:?} partitions={partitions} tile={tile:?}");
                    let options = RunOptions { partitions: Some(partitions), tile_shape: tile, ..Default::default() };
                    let udfs: Vec<(Arc<dyn Udf>, Params)> = vec![
                        (sum.clone(), Params::default()),
                        (sumsig.clone(), Params::default()),
                        (rust_sum.clone(), Params::default()),
                        (rust_sumsig.clone(), Params::default()),
                    ];
                    let results =
                        run_on(&path, &OpenOptions::default(), udfs, options).unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(results.input_dtype, DType::F32, "{what}");
                    let s = results.udfs[0].buffer("intensity").expect("sum intensity");
                    assert_eq!(s.data.shape(), &[19, 23], "{what}");
                    assert_eq!(s.dtype(), DType::F32, "{what}");
                    assert_close(&to_f64(&s.data), &expected_sum, 1e-5, &format!("sum {what}"));
                    let rust = results.udfs[2].buffer("intensity").unwrap();
                    assert_close(&to_f64(&s.data), &to_f64(&rust.data), 1e-5, &format!("sum vs Rust {what}"));
                    let ss = results.udfs[1].buffer("intensity").expect("sumsig intensity");
                    assert_eq!(ss.data.shape(), &[5, 7], "{what}");
                    assert_eq!(ss.dtype(), DType::F32, "{what}");
                    assert_close(&to_f64(&ss.data), &expected_sig, 1e-5, &format!("sumsig {what}"));
                    let rust = results.udfs[3].buffer("intensity").unwrap();
                    assert_close(&to_f64(&ss.data), &to_f64(&rust.data), 1e-5, &format!("sumsig vs Rust {what}"));
                    assert!(s.all_valid && ss.all_valid, "{what}: complete run is all valid");
                }
            }
        }
    }
}

#[test]
fn sum_in_every_language_follows_the_input_dtype_rule_and_its_dtype_param() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[4, 4], &[8, 8], 12);
    let f64_path = write_npy(dir.path(), &data, Ty::F64);
    let i32_path = write_npy(dir.path(), &data, Ty::I32);
    for language in LANGUAGES {
        let sum = load_polyglot(language, "sum");
        let sumsig = load_polyglot(language, "sumsig");
        // float64 data: float32 preferred + float64 native = float64: exact sums.
        let options = RunOptions { partitions: Some(3), tile_shape: Some(vec![3, 5, 8]), ..Default::default() };
        let udfs = vec![(sum.clone(), Params::default()), (sumsig.clone(), Params::default())];
        let results = run_on(&f64_path, &OpenOptions::default(), udfs, options.clone()).unwrap();
        assert_eq!(results.input_dtype, DType::F64, "{language}");
        let s = results.udfs[0].buffer("intensity").unwrap();
        assert_eq!(s.dtype(), DType::F64, "{language}");
        assert_close(&to_f64(&s.data), &sum_frames(&data, None), 1e-12, &format!("{language} float64 sum"));
        let ss = results.udfs[1].buffer("intensity").unwrap();
        assert_eq!(ss.dtype(), DType::F64, "{language}");
        assert_close(&to_f64(&ss.data), &sum_sig(&data), 1e-12, &format!("{language} float64 sumsig"));
        // int32 data, sum with dtype=int32 alone: integer buffers, exact. (With another UDF
        // in the same pass the one input dtype is the result type of all preferences.)
        let p = params(&[("dtype", ParamValue::Text("int32".into()))]);
        let results = run_on(&i32_path, &OpenOptions::default(), vec![(sum.clone(), p)], options.clone()).unwrap();
        assert_eq!(results.input_dtype, DType::I32, "{language}");
        let s = results.udfs[0].buffer("intensity").unwrap();
        assert_eq!(s.dtype(), DType::I32, "{language}");
        assert_eq!(to_f64(&s.data), sum_frames(&data.rounded(Ty::I32), None), "{language} int32 sum");
        // int32 data, sumsig (float32 preferred): result_type(int32, float32) = float64.
        let results =
            run_on(&i32_path, &OpenOptions::default(), vec![(sumsig.clone(), Params::default())], options).unwrap();
        assert_eq!(results.input_dtype, DType::F64, "{language}");
        let ss = results.udfs[0].buffer("intensity").unwrap();
        assert_eq!(ss.dtype(), DType::F64, "{language}");
        assert_eq!(to_f64(&ss.data), sum_sig(&data.rounded(Ty::I32)), "{language} int32 sumsig");
    }
}

#[test]
fn sumsig_in_every_language_fills_only_the_roi() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[6, 5], &[7, 9], 13);
    let path = write_npy(dir.path(), &data, Ty::F32);
    let roi: Vec<bool> = (0..30).map(|i| i % 3 != 1 && i != 17).collect();
    let expected = sum_sig(&data);
    for language in LANGUAGES {
        let options = RunOptions {
            partitions: Some(4),
            tile_shape: Some(vec![2, 3, 9]),
            roi: Some(Roi::from_mask(roi.clone())),
            ..Default::default()
        };
        let udfs = vec![(load_polyglot(language, "sumsig"), Params::default())];
        let results = run_on(&path, &OpenOptions::default(), udfs, options).unwrap();
        let ss = results.udfs[0].buffer("intensity").unwrap();
        let got = to_f64(&ss.data);
        for (i, (&g, &e)) in got.iter().zip(&expected).enumerate() {
            if roi[i] {
                assert!((g - e).abs() <= 1e-5 * e.abs() + 1e-8, "{language} frame {i}: got {g}, expected {e}");
            } else {
                assert!(g.is_nan(), "{language} frame {i} is outside the ROI: got {g}, expected NaN");
            }
        }
    }
}

#[test]
fn polyglot_plugins_report_a_bad_dtype_param_as_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[2, 2], &[4, 4], 14);
    let path = write_npy(dir.path(), &data, Ty::F32);
    for language in LANGUAGES {
        let p = params(&[("dtype", ParamValue::Text("float17".into()))]);
        let udfs = vec![(load_polyglot(language, "sum"), p)];
        let err = run_on(&path, &OpenOptions::default(), udfs, RunOptions::default()).err();
        let message = match err {
            Some(e @ RunError::Udf { .. }) if e.is_user_error() => format!("{e}"),
            Some(other) => panic!("{language}: expected a bad-param error from the plugin, got {other}"),
            None => panic!("{language}: a bad dtype param was accepted"),
        };
        assert!(message.contains("float17"), "{language}: {message}");
    }
}

/// The C and Zig `sum` and `sumsig` compute with host arrays (`.host_arrays`: the tile
/// stays in the host) and give the numbers of plain loops over the selected frames, for
/// float32 and uint16 data, odd tilings and a ROI.
#[test]
fn c_and_zig_host_array_sums_match_plain_loops_with_a_roi() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[6, 5], &[13, 17], 35);
    let roi: Vec<bool> = (0..30).map(|i| i % 4 != 1 && i != 22).collect();
    for language in ["c", "zig"] {
        let sum = load_polyglot(language, "sum");
        let sumsig = load_polyglot(language, "sumsig");
        assert!(sum.reads_in_place() && sumsig.reads_in_place(), "{language}: sum and sumsig take host tiles");
        for ty in [Ty::F32, Ty::U16] {
            let path = write_npy(dir.path(), &data, ty);
            let stored = data.rounded(ty);
            for roi in [None, Some(roi.clone())] {
                let selected: Vec<usize> = (0..30).filter(|&n| roi.as_ref().is_none_or(|r| r[n])).collect();
                let mut expected_sum = vec![0.0; 13 * 17];
                for &n in &selected {
                    for (e, v) in expected_sum.iter_mut().zip(stored.frame(n)) {
                        *e += v;
                    }
                }
                let expected_sig: Vec<f64> = selected.iter().map(|&n| stored.frame(n).iter().sum()).collect();
                for (partitions, tile) in [(1, None), (4, Some(vec![3, 5, 7])), (7, Some(vec![2, 13, 4]))] {
                    let what = format!("{language} {ty:?} roi={} partitions={partitions} tile={tile:?}", roi.is_some());
                    let options = RunOptions {
                        partitions: Some(partitions),
                        tile_shape: tile,
                        roi: roi.clone().map(Roi::from_mask),
                        ..Default::default()
                    };
                    let udfs = vec![(sum.clone(), Params::default()), (sumsig.clone(), Params::default())];
                    let results =
                        run_on(&path, &OpenOptions::default(), udfs, options).unwrap_or_else(|e| panic!("{what}: {e}"));
                    let s = results.udfs[0].buffer("intensity").expect("sum intensity");
                    assert_eq!((s.dtype(), s.data.shape().to_vec()), (DType::F32, vec![13, 17]), "{what}");
                    assert_close(&to_f64(&s.data), &expected_sum, 1e-5, &format!("sum {what}"));
                    let ss = results.udfs[1].buffer("intensity").expect("sumsig intensity");
                    let got: Vec<f64> = to_f64(&ss.data).into_iter().filter(|v| !v.is_nan()).collect();
                    assert_close(&got, &expected_sig, 1e-5, &format!("sumsig {what}"));
                }
            }
        }
    }
}

/// A C plugin whose host-array call has shapes that do not fit (`plugins/polyglot/c/
/// shape_error`: `[frames, pixels] @ [pixels + 1, 1]`) fails the run with the host's typed
/// error, named after the plugin and the operation — not a trap, not a host panic.
#[test]
fn a_c_plugin_with_a_bad_array_call_gets_the_typed_error_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[2, 3], &[4, 5], 36);
    let path = write_npy(dir.path(), &data, Ty::F32);
    let udfs = vec![(load_polyglot("c", "shape_error"), Params::default())];
    let err = run_on(&path, &OpenOptions::default(), udfs, RunOptions::default()).err();
    let message = match err {
        Some(e @ RunError::Udf { .. }) => format!("{e}"),
        Some(other) => panic!("expected the plugin's error, got {other}"),
        None => panic!("a matmul of shapes that do not fit succeeded"),
    };
    for part in ["'shape-error'", "array shape error", "matmul", ", 20)", "(21, 1)"] {
        assert!(message.contains(part), "'{part}' is not in: {message}");
    }
    assert!(!message.contains("trap") && !message.contains("panic"), "{message}");
}

/// The C and Zig host-array plugins keep no array from one tile or partition to the
/// next: the conformance kit's array check passes and looked at their arrays.
#[test]
fn c_and_zig_host_array_plugins_pass_the_array_leak_check() {
    for (language, names) in [("c", &["sum", "sumsig", "array_ops"][..]), ("zig", &["sum", "sumsig"][..])] {
        for &name in names {
            let config = crate::conformance::config_for(name);
            let report = udf_host::conformance::check_plugin(load_polyglot(language, name), &config)
                .unwrap_or_else(|e| panic!("{language} {name}: {e}"));
            assert!(report.passed, "{language} {name} does not conform:\n{}", report.to_text(false));
            let check = report.check("resources.array_growth").expect("the array check");
            assert_eq!(check.status, Status::Pass, "{language} {name}: {}", report.to_text(true));
        }
    }
}

/// CoMUDF's raw centre of mass and field (BUILTINS.md §5), written out as plain loops.
struct ComReference {
    raw_com: Vec<[f64; 2]>,
    raw_shifts: Vec<[f64; 2]>,
    field: Vec<[f64; 2]>,
}

fn com_reference(data: &Data, cy: f64, cx: f64, r: f64, ri: f64, rotation_deg: f64, flip_y: bool) -> ComReference {
    let (sy, sx) = (data.sig[0], data.sig[1]);
    let mut out = ComReference { raw_com: vec![], raw_shifts: vec![], field: vec![] };
    for n in 0..data.frames() {
        let frame = data.frame(n);
        let (mut i, mut gy, mut gx) = (0.0, 0.0, 0.0);
        for y in 0..sy {
            for x in 0..sx {
                let d2 = (y as f64 - cy).powi(2) + (x as f64 - cx).powi(2);
                let inside = d2 <= r * r && (ri <= 0.0 || d2 > ri * ri);
                if inside {
                    let v = frame[y * sx + x];
                    i += v;
                    gy += v * y as f64;
                    gx += v * x as f64;
                }
            }
        }
        let (shift_y, shift_x) = if i == 0.0 { (0.0, 0.0) } else { (gy / i - cy, gx / i - cx) };
        out.raw_com.push([shift_y + cy, shift_x + cx]);
        out.raw_shifts.push([shift_y, shift_x]);
        let fy = if flip_y { -shift_y } else { shift_y };
        let (s, c) = rotation_deg.to_radians().sin_cos();
        out.field.push([c * fy + s * shift_x, -s * fy + c * shift_x]);
    }
    out
}

/// `np.gradient` of a `(ny, nx)` grid along `axis`: central differences inside, one-sided
/// at the edges.
fn gradient(f: &[f64], ny: usize, nx: usize, axis: usize) -> Vec<f64> {
    let (n, step) = if axis == 0 { (ny, nx) } else { (nx, 1) };
    (0..ny * nx)
        .map(|at| {
            let k = if axis == 0 { at / nx } else { at % nx };
            if k == 0 {
                f[at + step] - f[at]
            } else if k == n - 1 {
                f[at] - f[at - step]
            } else {
                (f[at + step] - f[at - step]) / 2.0
            }
        })
        .collect()
}

/// CoMUDF's `divergence = d field_y / dy + d field_x / dx`, `curl = d field_y / dx - d field_x / dy`.
fn divergence_and_curl(field_y: &[f64], field_x: &[f64], ny: usize, nx: usize) -> (Vec<f64>, Vec<f64>) {
    let (dyy, dxx) = (gradient(field_y, ny, nx, 0), gradient(field_x, ny, nx, 1));
    let (dyx, dxy) = (gradient(field_y, ny, nx, 1), gradient(field_x, ny, nx, 0));
    let divergence = dyy.iter().zip(&dxx).map(|(a, b)| a + b).collect();
    let curl = dyx.iter().zip(&dxy).map(|(a, b)| a - b).collect();
    (divergence, curl)
}

/// A centre of mass case: label, parameters, and the reference's (cy, cx, r, ri, scan
/// rotation, flip_y).
type ComCase<'a> = (&'a str, Vec<(&'a str, ParamValue)>, (f64, f64, f64, f64, f64, bool));

#[test]
fn c_com_matches_the_builtins_formulas() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[4, 5], &[16, 15], 15);
    let path = write_npy(dir.path(), &data, Ty::F32);
    let com = load_polyglot("c", "com");
    let cases: [ComCase<'_>; 3] = [
        ("defaults", vec![], (8.0, 7.0, f64::INFINITY, 0.0, 0.0, false)),
        (
            "disk, rotation 30, flip_y",
            vec![
                ("cy", ParamValue::Float(6.5)),
                ("cx", ParamValue::Float(8.0)),
                ("r", ParamValue::Float(5.0)),
                ("scan_rotation", ParamValue::Float(30.0)),
                ("flip_y", ParamValue::Bool(true)),
            ],
            (6.5, 8.0, 5.0, 0.0, 30.0, true),
        ),
        (
            "ring, rotation 90",
            vec![
                ("r", ParamValue::Float(7.0)),
                ("ri", ParamValue::Float(2.0)),
                ("scan_rotation", ParamValue::Float(90.0)),
            ],
            (8.0, 7.0, 7.0, 2.0, 90.0, false),
        ),
    ];
    for (name, p, (cy, cx, r, ri, rot, flip)) in cases {
        let expected = com_reference(&data, cy, cx, r, ri, rot, flip);
        for (partitions, tile) in [(1, None), (3, Some(vec![3, 5, 7])), (6, Some(vec![2, 16, 4]))] {
            let what = format!("{name}, {partitions} partitions, tile {tile:?}");
            let options = RunOptions { partitions: Some(partitions), tile_shape: tile, ..Default::default() };
            let results = run_on(&path, &OpenOptions::default(), vec![(com.clone(), params(&p))], options)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let buf = |n: &str| results.udfs[0].buffer(n).unwrap_or_else(|| panic!("{what}: no {n}"));
            let flat = |v: &[[f64; 2]]| v.iter().flatten().copied().collect::<Vec<f64>>();
            assert_eq!(buf("raw_com").data.shape(), &[4, 5, 2], "{what}");
            assert_close(&to_f64(&buf("raw_com").data), &flat(&expected.raw_com), 1e-5, &format!("raw_com {what}"));
            assert_close(
                &to_f64(&buf("raw_shifts").data),
                &flat(&expected.raw_shifts),
                1e-4,
                &format!("raw_shifts {what}"),
            );
            assert_close(&to_f64(&buf("field").data), &flat(&expected.field), 1e-4, &format!("field {what}"));
            let field_y: Vec<f64> = expected.field.iter().map(|f| f[0]).collect();
            let field_x: Vec<f64> = expected.field.iter().map(|f| f[1]).collect();
            assert_close(&to_f64(&buf("field_y").data), &field_y, 1e-4, &format!("field_y {what}"));
            assert_close(&to_f64(&buf("field_x").data), &field_x, 1e-4, &format!("field_x {what}"));
            let magnitude: Vec<f64> = expected.field.iter().map(|f| f[0].hypot(f[1])).collect();
            assert_close(&to_f64(&buf("magnitude").data), &magnitude, 1e-4, &format!("magnitude {what}"));
            let (divergence, curl) = divergence_and_curl(&field_y, &field_x, 4, 5);
            assert_close(&to_f64(&buf("divergence").data), &divergence, 1e-4, &format!("divergence {what}"));
            assert_close(&to_f64(&buf("curl").data), &curl, 1e-4, &format!("curl {what}"));
            assert!(results.udfs[0].buffer("raw_mask_result").is_none(), "{what}: the private buffer is no result");
        }
    }
}

#[test]
fn zig_python_and_js_masks_match_the_dot_products() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_uniform(&[3, 7], &[9, 11], 16);
    let path = write_npy(dir.path(), &data, Ty::F32);
    // Three masks: a disk-ish pattern, a gradient, and a checkerboard with negative values.
    let (m, px) = (3, 9 * 11);
    let mut masks = vec![0.0; m * px];
    for y in 0..9 {
        for x in 0..11 {
            let i = y * 11 + x;
            masks[i] = if (y as f64 - 4.0).powi(2) + (x as f64 - 5.0).powi(2) <= 9.0 { 1.0 } else { 0.0 };
            masks[px + i] = x as f64 * 0.25 + y as f64;
            masks[2 * px + i] = if (x + y) % 2 == 0 { 1.5 } else { -0.5 };
        }
    }
    let stored = data.rounded(Ty::F32);
    let masks_ref = &masks;
    let expected: Vec<f64> = (0..stored.frames())
        .flat_map(|n| {
            let frame = stored.frame(n);
            (0..m).map(move |k| (0..px).map(|i| frame[i] * masks_ref[k * px + i]).sum::<f64>()).collect::<Vec<_>>()
        })
        .collect();
    for language in ["zig", "python", "js"] {
        let plugin = load_polyglot(language, "masks");
        for mask_dtype in [DType::F32, DType::F64] {
            let p = params(&[("masks", array_param(mask_dtype, &[m, 9, 11], &masks))]);
            for (partitions, tile) in [(1, None), (2, Some(vec![4, 3, 11])), (5, Some(vec![3, 9, 5]))] {
                let what = format!("{language} masks {mask_dtype:?}, {partitions} partitions, tile {tile:?}");
                let options = RunOptions { partitions: Some(partitions), tile_shape: tile, ..Default::default() };
                let results = run_on(&path, &OpenOptions::default(), vec![(plugin.clone(), p.clone())], options)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(results.input_dtype, DType::F32, "{what}: float32 preferred and native");
                let b = results.udfs[0].buffer("intensity").unwrap();
                assert_eq!(b.data.shape(), &[3, 7, 3], "{what}");
                assert_eq!(b.dtype(), mask_dtype, "{what}: result_type(float32, mask dtype)");
                assert_close(&to_f64(&b.data), &expected, 1e-5, &what);
            }
        }
    }
}

/// StdDevUDF in Python and JavaScript with host arrays (`plugins/polyglot/{python,js}/stddev`)
/// against plain loops over the selected frames (two-pass mean and variance in float64), for
/// both base dtypes, odd tilings and a ROI; an empty ROI gives NaN.
#[test]
fn python_and_js_stddev_match_the_per_pixel_moments() {
    let dir = tempfile::tempdir().unwrap();
    let mut data = fixtures::mk_uniform(&[5, 6], &[9, 11], 34);
    data.values.iter_mut().for_each(|v| *v = 1000.0 + 50.0 * *v);
    let path = write_npy(dir.path(), &data, Ty::F32);
    let stored = data.rounded(Ty::F32);
    let rois: [Option<Vec<bool>>; 3] = [None, Some((0..30).map(|i| i % 4 != 1).collect()), Some(vec![false; 30])];
    for (language, base) in [("python", "float64"), ("python", "float32"), ("js", "float64"), ("js", "float32")] {
        let stddev = load_polyglot(language, "stddev");
        let p = params(&[("dtype", ParamValue::Text(base.into()))]);
        for roi in &rois {
            let frames: Vec<usize> = (0..30).filter(|&n| roi.as_ref().is_none_or(|r| r[n])).collect();
            let count = frames.len() as f64;
            let px = 9 * 11;
            let mean: Vec<f64> =
                (0..px).map(|i| frames.iter().map(|&n| stored.frame(n)[i]).sum::<f64>() / count).collect();
            let var: Vec<f64> = (0..px)
                .map(|i| frames.iter().map(|&n| (stored.frame(n)[i] - mean[i]).powi(2)).sum::<f64>() / count)
                .collect();
            let std: Vec<f64> = var.iter().map(|v| v.sqrt()).collect();
            for (partitions, tile) in [(1, None), (3, Some(vec![4, 3, 11])), (7, Some(vec![2, 9, 4]))] {
                let what =
                    format!("{language} base {base}, roi {}, {partitions} partitions, tile {tile:?}", roi.is_some());
                let options = RunOptions {
                    partitions: Some(partitions),
                    tile_shape: tile,
                    roi: roi.clone().map(Roi::from_mask),
                    ..Default::default()
                };
                let results = run_on(&path, &OpenOptions::default(), vec![(stddev.clone(), p.clone())], options)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let buf = |n: &str| results.udfs[0].buffer(n).unwrap_or_else(|| panic!("{what}: no {n}"));
                let base_dtype = if base == "float32" { DType::F32 } else { DType::F64 };
                assert_eq!(buf("var").dtype(), base_dtype, "{what}");
                if frames.is_empty() {
                    assert!(to_f64(&buf("std").data).iter().all(|v| v.is_nan()), "{what}: no frame, NaN");
                    continue;
                }
                let rtol = if base == "float32" { 1e-4 } else { 1e-9 };
                let mean_rtol = if base == "float32" { 1e-5 } else { 1e-12 };
                assert_close(&to_f64(&buf("mean").data), &mean, mean_rtol, &format!("mean {what}"));
                assert_close(&to_f64(&buf("var").data), &var, rtol, &format!("var {what}"));
                assert_close(&to_f64(&buf("std").data), &std, rtol, &format!("std {what}"));
            }
        }
    }
}

#[test]
fn python_fem_matches_the_ring_standard_deviation() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_uniform(&[4, 3], &[13, 12], 17);
    let path = write_npy(dir.path(), &data, Ty::F32);
    let stored = data.rounded(Ty::F32);
    let (cy, cx, r_in, r_out) = (6.0, 5.0, 2.0, 5.0);
    let expected: Vec<f64> = (0..stored.frames())
        .map(|n| {
            let frame = stored.frame(n);
            let ring: Vec<f64> = (0..13 * 12)
                .filter(|i| {
                    let d2 = ((i / 12) as f64 - cy).powi(2) + ((i % 12) as f64 - cx).powi(2);
                    d2 <= r_out * r_out && d2 > r_in * r_in
                })
                .map(|i| frame[i])
                .collect();
            let mean = ring.iter().sum::<f64>() / ring.len() as f64;
            (ring.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / ring.len() as f64).sqrt()
        })
        .collect();
    let p = params(&[
        ("center", array_param(DType::F64, &[2], &[cy, cx])),
        ("rad_in", ParamValue::Float(r_in)),
        ("rad_out", ParamValue::Float(r_out)),
    ]);
    let fem = load_polyglot("python", "fem");
    for (partitions, tile) in [(1, None), (3, Some(vec![5, 13, 12]))] {
        let what = format!("{partitions} partitions, tile {tile:?}");
        let options = RunOptions { partitions: Some(partitions), tile_shape: tile, ..Default::default() };
        let results = run_on(&path, &OpenOptions::default(), vec![(fem.clone(), p.clone())], options)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let b = results.udfs[0].buffer("intensity").unwrap();
        assert_eq!(b.data.shape(), &[4, 3], "{what}");
        assert_eq!(b.dtype(), DType::F32, "{what}");
        assert_close(&to_f64(&b.data), &expected, 1e-5, &what);
    }
}

#[test]
fn js_logsum_matches_the_sum_of_log_scaled_frames() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[5, 4], &[10, 7], 18);
    let path = write_npy(dir.path(), &data, Ty::U16);
    let stored = data.rounded(Ty::U16);
    let mut expected = vec![0.0; 70];
    for n in 0..stored.frames() {
        let frame = stored.frame(n);
        let min = frame.iter().copied().fold(f64::INFINITY, f64::min);
        for (e, v) in expected.iter_mut().zip(frame) {
            *e += (v - min + 1.0).ln();
        }
    }
    let logsum = load_polyglot("js", "logsum");
    for (partitions, tile) in [(1, None), (4, Some(vec![3, 10, 7]))] {
        let what = format!("{partitions} partitions, tile {tile:?}");
        let options = RunOptions { partitions: Some(partitions), tile_shape: tile, ..Default::default() };
        let results = run_on(&path, &OpenOptions::default(), vec![(logsum.clone(), Params::default())], options)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let b = results.udfs[0].buffer("logsum").unwrap();
        assert_eq!(b.data.shape(), &[10, 7], "{what}");
        assert_eq!(b.dtype(), DType::F32, "{what}");
        assert_close(&to_f64(&b.data), &expected, 1e-5, &what);
    }
}

/// Every polyglot plugin passes the conformance kit, with the parameters and tolerances
/// of its Rust twin (`conformance::config_for`).
#[test]
fn every_polyglot_plugin_conforms() {
    let mut failures = Vec::new();
    for (language, names) in [
        // `map` (a frame map) and `max` (declared buffers with a max merge): the SDKs' short
        // forms.
        ("c", &["sum", "sumsig", "com", "map", "max"][..]),
        ("zig", &["sum", "sumsig", "masks", "map", "max"][..]),
        // Python plugins with host arrays run at the host's speed: all of them.
        ("python", &["sum", "sumsig", "fem", "map", "max", "stddev", "masks"][..]),
        // JavaScript plugins with host arrays too (built without the bindings'
        // FinalizationRegistry, their heap does not grow: docs/plugins/js.md).
        ("js", &["sum", "sumsig", "logsum", "map", "max", "stddev", "masks"][..]),
    ] {
        for name in names {
            let config = crate::conformance::config_for(name);
            let report = udf_host::conformance::check_plugin(load_polyglot(language, name), &config)
                .unwrap_or_else(|e| panic!("{language} {name}: {e}"));
            if !report.passed {
                failures.push(format!("{language} {name} does not conform:\n{}", report.to_text(false)));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The CLI sizes the instance pool from the thread count (4 component instances for one
/// plugin on 2 threads); a Python component alone holds ~20-30 core instances, and
/// two of them at once must fit.
#[test]
fn python_plugins_run_in_the_clis_small_instance_pool() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[4, 6], &[8, 8], 31);
    let path = write_npy(dir.path(), &data, Ty::F32);
    let options = RuntimeOptions { max_instances: 4, compile_timeout: Duration::from_secs(1800), ..runtime_options() };
    let runtime = WasmRuntime::new(options).expect("runtime");
    let (sum, _) = runtime.load(&component("python", "sum")).unwrap_or_else(|e| panic!("{e}"));
    let run = RunOptions { partitions: Some(6), threads: Some(2), ..Default::default() };
    let results = run_on(&path, &OpenOptions::default(), vec![(Arc::new(sum) as Arc<dyn Udf>, Params::default())], run)
        .unwrap_or_else(|e| panic!("{e}"));
    let s = results.udfs[0].buffer("intensity").unwrap();
    assert_close(&to_f64(&s.data), &sum_frames(&data.rounded(Ty::F32), None), 1e-5, "python sum, small pool");
}

/// The frame maps of every language (`plugins/polyglot/<language>/map`): the sum of every
/// row of each frame, with the shape found on a frame of zeros; C and Zig maps take
/// float32 frames (float64 data is converted), Python's and JavaScript's (host arrays:
/// `np.sum(frame, axis=-1)`, `xp.sum(frame, { axis: -1 })`) have the frame's dtype.
#[test]
fn frame_maps_in_every_language_give_the_row_sums_of_each_frame() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_uniform(&[5, 6], &[7, 9], 32);
    let roi: Vec<bool> = (0..30).map(|i| i % 4 != 2).collect();
    for language in LANGUAGES {
        let map = load_polyglot(language, "map");
        for ty in [Ty::F32, Ty::F64] {
            let value_dtype = match (language, ty) {
                ("c" | "zig", _) | ("python" | "js", Ty::F32) => DType::F32,
                _ => DType::F64,
            };
            let path = write_npy(dir.path(), &data, ty);
            // Rows of the frame as the map sees it: float32 for C and Zig, else as stored.
            let frame_ty = if value_dtype == DType::F32 { Ty::F32 } else { ty };
            let stored = data.rounded(ty).rounded(frame_ty);
            for roi in [None, Some(roi.clone())] {
                let what = format!("{language} {ty:?} roi={}", roi.is_some());
                let options =
                    RunOptions { partitions: Some(4), roi: roi.clone().map(Roi::from_mask), ..Default::default() };
                let results = run_on(&path, &OpenOptions::default(), vec![(map.clone(), Params::default())], options)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let r = &results.udfs[0];
                assert_eq!(r.name, "row-sums", "{what}");
                let b = r.buffer("result").expect("result");
                assert_eq!((b.dtype(), b.extra_shape.clone()), (value_dtype, vec![7]), "{what}");
                let expected: Vec<f64> = (0..30)
                    .filter(|&n| roi.as_ref().is_none_or(|r| r[n]))
                    .flat_map(|n| stored.frame(n).chunks(9).map(|row| row.iter().sum::<f64>()))
                    .collect();
                assert_close(&to_f64(&b.raw), &expected, 1e-6, &what);
            }
        }
    }
}

/// MaxUDF in every language (`plugins/polyglot/<language>/max`), written with the SDKs'
/// operations for every dtype and (Python, JavaScript) a declared merge rule: the maximum
/// over the selected frames, -inf where none is selected.
#[test]
fn max_in_every_language_is_the_maximum_over_the_selected_frames() {
    let dir = tempfile::tempdir().unwrap();
    // Negative values: a maximum that starts at zero instead of -inf would show.
    let mut data = fixtures::mk_uniform(&[5, 7], &[19, 23], 33);
    data.values.iter_mut().for_each(|v| *v = -100.0 * *v - 1.0);
    let path = write_npy(dir.path(), &data, Ty::F32);
    let stored = data.rounded(Ty::F32);
    let rois: [Option<Vec<bool>>; 3] = [None, Some((0..35).map(|i| i % 3 == 0).collect()), Some(vec![false; 35])];
    for language in LANGUAGES {
        let max = load_polyglot(language, "max");
        for roi in &rois {
            for (partitions, tile) in [(1, vec![3, 5, 7]), (3, vec![4, 19, 4]), (7, vec![1, 19, 23])] {
                let what = format!("{language} partitions={partitions} tile={tile:?} roi={roi:?}");
                let options = RunOptions {
                    partitions: Some(partitions),
                    tile_shape: Some(tile),
                    roi: roi.clone().map(Roi::from_mask),
                    ..Default::default()
                };
                let results = run_on(&path, &OpenOptions::default(), vec![(max.clone(), Params::default())], options)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let b = results.udfs[0].buffer("maxbuf").expect("maxbuf");
                assert_eq!((b.dtype(), b.data.shape().to_vec()), (DType::F32, vec![19, 23]), "{what}");
                let mut expected = vec![f64::NEG_INFINITY; 19 * 23];
                for n in (0..35).filter(|&n| roi.as_ref().is_none_or(|r| r[n])) {
                    for (e, &v) in expected.iter_mut().zip(stored.frame(n)) {
                        *e = e.max(v);
                    }
                }
                assert_eq!(to_f64(&b.data), expected, "{what}");
            }
        }
    }
}

/// The C SDK's operation enums (`guest-sdk/c/udf_sdk.h`, cast to the WIT enums by
/// `udf_array.c`) name the operations of the one table (`udf_host::arrays::ops`), in its
/// order; the Zig SDK uses the same constants.
#[test]
fn c_sdk_array_enums_follow_the_one_table() {
    use udf_host::arrays::ops::{BinaryOp, FftOp, ReduceOp, UnaryOp};
    let header = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk/c/udf_sdk.h"))
        .expect("udf_sdk.h");
    // The constants of `typedef enum NAME { ... } NAME;`, in order.
    let constants = |name: &str| -> Vec<String> {
        let start = header.find(&format!("typedef enum {name} {{")).unwrap_or_else(|| panic!("no enum {name}"));
        let body = &header[start..];
        let body = &body[body.find('{').unwrap() + 1..body.find('}').unwrap()];
        body.split(',').map(str::trim).filter(|c| !c.is_empty()).map(String::from).collect()
    };
    let expected =
        |names: Vec<&str>| -> Vec<String> { names.into_iter().map(|n| format!("UDF_{}", n.to_uppercase())).collect() };
    assert_eq!(constants("udf_unary_op"), expected(UnaryOp::ALL.iter().map(|o| o.name()).collect()));
    assert_eq!(constants("udf_binary_op"), expected(BinaryOp::ALL.iter().map(|o| o.name()).collect()));
    assert_eq!(constants("udf_reduce_op"), expected(ReduceOp::ALL.iter().map(|o| o.name()).collect()));
    assert_eq!(constants("udf_fft_op"), expected(FftOp::ALL.iter().map(|o| o.name()).collect()));
}

/// The C SDK's header is valid C++20 (`tests/fixtures/c_sdk/`: a plugin that uses every
/// macro and inline helper of the header, and a frame map through `UDF_EXPORT_MAP`),
/// compiled by the host's C++ compiler (`$CXX`, or `c++`) with warnings as errors — the
/// frame map with all of `-Wextra`: the header's own designated initialisers do not warn.
#[test]
fn the_c_sdk_header_is_valid_cpp() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let compiler = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let strict = ["-std=c++20", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-pedantic-errors"];
    for (file, relaxed) in [("map.cpp", None), ("plugin.cpp", Some("-Wno-missing-field-initializers"))] {
        let out = std::process::Command::new(&compiler)
            .args(strict)
            .args(relaxed)
            .arg("-I")
            .arg(root.join("guest-sdk/c"))
            .arg(root.join("tests/fixtures/c_sdk").join(file))
            .output()
            .unwrap_or_else(|e| panic!("{compiler}: {e} (a C++ compiler is needed: apt-get install g++)"));
        assert!(out.status.success(), "{file} with {compiler}:\n{}", String::from_utf8_lossy(&out.stderr));
    }
}

/// The C SDK's host-array calls beyond `sum` (`plugins/polyglot/c/array_ops`: binary ops
/// with scalars, `where`, `full`, `add_at` through an ellipsis and into a view, `set`,
/// `get`, `astype`, and `from_bytes` of more than one 512 KiB piece) against plain loops,
/// with tiles that cover part of each frame.
#[test]
fn c_array_ops_match_plain_loops() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_uniform(&[3, 5], &[9, 11], 37);
    let path = write_npy(dir.path(), &data, Ty::F32);
    let stored = data.rounded(Ty::F32);
    let big: f64 = (0..200_000u32).map(|i| f64::from(i % 7)).sum();
    let expected: Vec<f64> = (0..15)
        .flat_map(|n| {
            let frame = stored.frame(n);
            let squares: f64 = frame.iter().filter(|&&v| v > 0.5).map(|v| v * v).sum();
            let plus_one: f64 = frame.iter().map(|v| v + 1.0).sum();
            [squares, plus_one, big]
        })
        .collect();
    let udf = load_polyglot("c", "array_ops");
    for (partitions, tile) in [(1, None), (4, Some(vec![2, 9, 4])), (3, Some(vec![4, 5, 11]))] {
        let what = format!("partitions={partitions} tile={tile:?}");
        let options = RunOptions { partitions: Some(partitions), tile_shape: tile, ..Default::default() };
        let results = run_on(&path, &OpenOptions::default(), vec![(udf.clone(), Params::default())], options)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let b = results.udfs[0].buffer("ops").expect("ops");
        assert_eq!(b.data.shape(), &[3, 5, 3], "{what}");
        assert_close(&to_f64(&b.data), &expected, 1e-5, &what);
    }
}
