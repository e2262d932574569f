//! The `com` plugin against a plain-loop reference of BUILTINS.md §5 (CoMUDF): masks,
//! centre of mass, shifts, rotation and flip, regression over the valid positions,
//! `np.gradient`-style divergence and curl on the full scan grid with NaN outside the ROI.
//!
//! The fixture is a bright disk on a noisy background whose centre moves with the scan
//! position (linearly plus a wobble), so shifts, regression, divergence and curl are all
//! non-trivial. With whole-number pixel values every float32 sum is exact, so float32 and
//! uint16 inputs are held to `rtol = 1e-5`; non-integer float32 data gets a tolerance
//! scaled by each buffer's magnitude (shifts are differences of large numbers); float64
//! input is held to `1e-9`.

use crate::plugin_matrix::{Case, cases, returned_error, run_one, run_shaped, values, write};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use udf_host::array::NdArray;
use udf_host::dataset::{self, OpenOptions};
use udf_host::dtype::DType;
use udf_host::exec::{Run, RunOptions, UdfResults, UdfSpec};
use udf_host::udf::{ErrorKind, ParamValue, Params};
use udf_host_tests::fixtures::{Data, Ty};
use udf_host_tests::reference::assert_close;
use udf_host_tests::{load, params};

const NAV: [usize; 2] = [6, 7];
/// Odd height: the default centre row is `15 // 2 = 7`, not 7.5.
const SIG: [usize; 2] = [15, 18];

/// A disk of radius 3.2 and brightness 500 over a background in `[0, 20)`, centred at a
/// position that depends on the scan position. `integer`: whole-number values.
fn moving_disk(integer: bool, seed: u64) -> Data {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut values = Vec::new();
    for iy in 0..NAV[0] {
        for ix in 0..NAV[1] {
            let (fy, fx) = (iy as f64, ix as f64);
            let cy = 6.0 + 0.5 * fy - 0.25 * fx + 0.3 * fx.sin();
            let cx = 8.0 + 0.4 * fx + 0.2 * fy + 0.2 * (1.3 * fy).cos();
            for y in 0..SIG[0] {
                for x in 0..SIG[1] {
                    let background =
                        if integer { f64::from(rng.random_range(0u8..20)) } else { rng.random_range(0.0..20.0) };
                    let inside = (y as f64 - cy).powi(2) + (x as f64 - cx).powi(2) <= 3.2 * 3.2;
                    values.push(background + if inside { 500.0 } else { 0.0 });
                }
            }
        }
    }
    Data { nav: NAV.to_vec(), sig: SIG.to_vec(), values }
}

/// The regression param.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Reg {
    Mode(i8),
    Given([[f64; 2]; 3]),
}

/// All CoM params; `None` centres are left out (the plugin's default).
#[derive(Debug, Clone, Copy)]
struct Setting {
    cy: Option<f64>,
    cx: Option<f64>,
    r: f64,
    ri: f64,
    rotation: f64,
    flip_y: bool,
    regression: Reg,
}

const DEFAULT: Setting =
    Setting { cy: None, cx: None, r: f64::INFINITY, ri: 0.0, rotation: 0.0, flip_y: false, regression: Reg::Mode(-1) };

/// Every param away from its default.
const EVERYTHING: Setting =
    Setting { cy: Some(7.3), cx: Some(8.6), r: 6.0, ri: 1.5, rotation: -35.0, flip_y: true, regression: Reg::Mode(1) };

fn array(shape: &[usize], values: Vec<f64>) -> ParamValue {
    ParamValue::Array(Arc::new(NdArray::from_vec(shape, values).unwrap()))
}

impl Setting {
    fn params(&self) -> Params {
        let mut p = vec![
            ("r", ParamValue::Float(self.r)),
            ("ri", ParamValue::Float(self.ri)),
            ("scan_rotation", ParamValue::Float(self.rotation)),
            ("flip_y", ParamValue::Bool(self.flip_y)),
        ];
        if let Some(cy) = self.cy {
            p.push(("cy", ParamValue::Float(cy)));
        }
        if let Some(cx) = self.cx {
            p.push(("cx", ParamValue::Float(cx)));
        }
        p.push((
            "regression",
            match self.regression {
                Reg::Mode(m) => array(&[1], vec![f64::from(m)]),
                Reg::Given(c) => array(&[3, 2], c.iter().flatten().copied().collect()),
            },
        ));
        params(&p)
    }
}

/// The expected results on the full scan grid (NaN outside the ROI).
#[derive(Debug)]
struct Expected {
    raw_com: Vec<f64>,
    raw_shifts: Vec<f64>,
    field: Vec<f64>,
    field_y: Vec<f64>,
    field_x: Vec<f64>,
    magnitude: Vec<f64>,
    divergence: Vec<f64>,
    curl: Vec<f64>,
    regression: [[f64; 2]; 3],
}

/// `np.gradient(f, axis)` on the `NAV` grid: central differences inside, one-sided at
/// the border.
fn np_gradient(f: &[f64], axis: usize) -> Vec<f64> {
    let [ny, nx] = NAV;
    let at = |y: usize, x: usize| f[y * nx + x];
    let mut out = Vec::with_capacity(ny * nx);
    for y in 0..ny {
        for x in 0..nx {
            let (i, n) = if axis == 0 { (y, ny) } else { (x, nx) };
            let step = |d: usize| if axis == 0 { at(d, x) } else { at(y, d) };
            out.push(if i == 0 {
                step(1) - step(0)
            } else if i == n - 1 {
                step(n - 1) - step(n - 2)
            } else {
                (step(i + 1) - step(i - 1)) / 2.0
            });
        }
    }
    out
}

/// Solve the 3 × 3 system `m c = b` by Gaussian elimination with partial pivoting.
fn solve3(mut m: [[f64; 3]; 3], mut b: [f64; 3]) -> [f64; 3] {
    for col in 0..3 {
        let pivot = (col..3).max_by(|&i, &j| m[i][col].abs().total_cmp(&m[j][col].abs())).unwrap();
        m.swap(col, pivot);
        b.swap(col, pivot);
        for row in col + 1..3 {
            let f = m[row][col] / m[col][col];
            let pivot_row = m[col];
            for (v, p) in m[row].iter_mut().zip(pivot_row).skip(col) {
                *v -= f * p;
            }
            b[row] -= f * b[col];
        }
    }
    let mut c = [0.0; 3];
    for row in (0..3).rev() {
        c[row] = (b[row] - (row + 1..3).map(|k| m[row][k] * c[k]).sum::<f64>()) / m[row][row];
    }
    c
}

/// The reference. `roi`: selected positions (all if `None`); `merged`: positions whose
/// frames have been merged (their sums are 0 otherwise).
fn reference(data: &Data, s: &Setting, roi: Option<&[bool]>, merged: &[bool]) -> Expected {
    let [ny, nx] = NAV;
    let n = ny * nx;
    let cy = s.cy.unwrap_or((SIG[0] / 2) as f64);
    let cx = s.cx.unwrap_or((SIG[1] / 2) as f64);
    let in_roi = |p: usize| roi.is_none_or(|r| r[p]);
    let valid: Vec<bool> = (0..n).map(|p| in_roi(p) && merged[p]).collect();
    let mut raw_shifts = vec![f64::NAN; 2 * n];
    for p in (0..n).filter(|&p| in_roi(p)) {
        let (mut i, mut sy, mut sx) = (0.0, 0.0, 0.0);
        if merged[p] {
            let frame = data.frame(p);
            for y in 0..SIG[0] {
                for x in 0..SIG[1] {
                    let d2 = (y as f64 - cy).powi(2) + (x as f64 - cx).powi(2);
                    let selected = if s.ri > 0.0 { s.ri * s.ri < d2 && d2 <= s.r * s.r } else { d2 <= s.r * s.r };
                    if selected {
                        let v = frame[y * SIG[1] + x];
                        i += v;
                        sy += v * y as f64;
                        sx += v * x as f64;
                    }
                }
            }
        }
        raw_shifts[2 * p] = if i == 0.0 { 0.0 } else { sy / i - cy };
        raw_shifts[2 * p + 1] = if i == 0.0 { 0.0 } else { sx / i - cx };
    }
    let raw_com: Vec<f64> = raw_shifts.chunks(2).flat_map(|v| [v[0] + cy, v[1] + cx]).collect();
    // Flip first, then rotate by R(θ) = [[cos, sin], [−sin, cos]].
    let theta = s.rotation.to_radians();
    let mut field = Vec::with_capacity(2 * n);
    for v in raw_shifts.chunks(2) {
        let (y, x) = (if s.flip_y { -v[0] } else { v[0] }, v[1]);
        field.push(theta.cos() * y + theta.sin() * x);
        field.push(-theta.sin() * y + theta.cos() * x);
    }
    let valid_positions: Vec<usize> = (0..n).filter(|&p| valid[p]).collect();
    let regression = match s.regression {
        Reg::Mode(-1) => [[0.0; 2]; 3],
        Reg::Mode(0) => {
            let count = valid_positions.len() as f64;
            let mean = |k: usize| valid_positions.iter().map(|&p| field[2 * p + k]).sum::<f64>() / count;
            [[mean(0), mean(1)], [0.0; 2], [0.0; 2]]
        }
        Reg::Mode(1) => {
            let row = |p: usize| [1.0, (p / nx) as f64, (p % nx) as f64];
            match valid_positions[..] {
                [] => [[0.0; 2]; 3],
                // One position: the minimum-norm solution a (a·f) / |a|².
                [p] => {
                    let a = row(p);
                    let norm2: f64 = a.iter().map(|v| v * v).sum();
                    [0, 1, 2].map(|j| [0, 1].map(|k| a[j] * field[2 * p + k] / norm2))
                }
                // One scan row (column): fit f = α + β·column (row); the minimum-norm split of
                // α between the constant and the constant coordinate c is α/(1+c²), α·c/(1+c²).
                _ if valid_positions.iter().all(|&p| p / nx == valid_positions[0] / nx)
                    || valid_positions.iter().all(|&p| p % nx == valid_positions[0] % nx) =>
                {
                    let same_row = valid_positions.iter().all(|&p| p / nx == valid_positions[0] / nx);
                    let (constant, varying) = if same_row { (1, 2) } else { (2, 1) };
                    let c = row(valid_positions[0])[constant];
                    let t: Vec<f64> = valid_positions.iter().map(|&p| row(p)[varying]).collect();
                    let mut out = [[0.0; 2]; 3];
                    for k in 0..2 {
                        let f: Vec<f64> = valid_positions.iter().map(|&p| field[2 * p + k]).collect();
                        let count = t.len() as f64;
                        let (t_mean, f_mean) = (t.iter().sum::<f64>() / count, f.iter().sum::<f64>() / count);
                        let beta = t.iter().zip(&f).map(|(t, f)| (t - t_mean) * (f - f_mean)).sum::<f64>()
                            / t.iter().map(|t| (t - t_mean).powi(2)).sum::<f64>();
                        let alpha = f_mean - beta * t_mean;
                        out[0][k] = alpha / (1.0 + c * c);
                        out[constant][k] = alpha * c / (1.0 + c * c);
                        out[varying][k] = beta;
                    }
                    out
                }
                _ => {
                    let mut ata = [[0.0; 3]; 3];
                    let mut atb = [[0.0; 3]; 2];
                    for &p in &valid_positions {
                        let a = row(p);
                        for j in 0..3 {
                            for k in 0..3 {
                                ata[j][k] += a[j] * a[k];
                            }
                            for (c, rhs) in atb.iter_mut().enumerate() {
                                rhs[j] += a[j] * field[2 * p + c];
                            }
                        }
                    }
                    let (cy_, cx_) = (solve3(ata, atb[0]), solve3(ata, atb[1]));
                    [[cy_[0], cx_[0]], [cy_[1], cx_[1]], [cy_[2], cx_[2]]]
                }
            }
        }
        Reg::Mode(other) => panic!("no regression mode {other}"),
        Reg::Given(c) => c,
    };
    // LiberTEM: the linear correction if C[1:] is not allclose to 0, else the mean one.
    let close0 = |v: &[f64]| v.iter().all(|x| x.abs() <= 1e-8);
    let linear = !close0(&[regression[1][0], regression[1][1], regression[2][0], regression[2][1]]);
    let mean = !close0(&regression[0]);
    for p in 0..n {
        let (y, x) = ((p / nx) as f64, (p % nx) as f64);
        for k in 0..2 {
            if linear {
                field[2 * p + k] -= regression[0][k] + y * regression[1][k] + x * regression[2][k];
            } else if mean {
                field[2 * p + k] -= regression[0][k];
            }
        }
    }
    let field_y: Vec<f64> = (0..n).map(|p| field[2 * p]).collect();
    let field_x: Vec<f64> = (0..n).map(|p| field[2 * p + 1]).collect();
    let magnitude = (0..n).map(|p| field_y[p].hypot(field_x[p])).collect();
    let (fy_rows, fy_cols) = (np_gradient(&field_y, 0), np_gradient(&field_y, 1));
    let (fx_rows, fx_cols) = (np_gradient(&field_x, 0), np_gradient(&field_x, 1));
    Expected {
        raw_com,
        raw_shifts,
        field,
        magnitude,
        divergence: (0..n).map(|p| fy_rows[p] + fx_cols[p]).collect(),
        curl: (0..n).map(|p| fy_cols[p] - fx_rows[p]).collect(),
        field_y,
        field_x,
        regression,
    }
}

/// `|a − e| ≤ rtol · (|e| + scale)` with `scale` the largest finite `|e|` of the buffer
/// when `scaled`, else 0 (then NumPy's `allclose` with `atol = 1e-8`).
#[track_caller]
fn check_buffer(actual: &[f64], expected: &[f64], rtol: f64, scaled: bool, what: &str) {
    if !scaled {
        return assert_close(actual, expected, rtol, what);
    }
    let scale = expected.iter().filter(|v| v.is_finite()).fold(0.0f64, |m, v| m.max(v.abs()));
    assert_eq!(actual.len(), expected.len(), "{what}: length");
    for (i, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        let ok = (a.is_nan() && e.is_nan()) || (a - e).abs() <= 1e-8 + rtol * (e.abs() + scale);
        assert!(ok, "{what}: element {i}: got {a}, expected {e} (rtol {rtol} scaled by {scale})");
    }
}

/// Compare every result buffer with the reference.
#[track_caller]
fn check(r: &UdfResults, e: &Expected, rtol: f64, scaled: bool, what: &str) {
    let buffers: [(&str, &Vec<f64>); 8] = [
        ("raw_com", &e.raw_com),
        ("raw_shifts", &e.raw_shifts),
        ("field", &e.field),
        ("field_y", &e.field_y),
        ("field_x", &e.field_x),
        ("magnitude", &e.magnitude),
        ("divergence", &e.divergence),
        ("curl", &e.curl),
    ];
    for (name, expected) in buffers {
        check_buffer(&values(r, name), expected, rtol, scaled, &format!("{name}: {what}"));
    }
    let regression: Vec<f64> = e.regression.iter().flatten().copied().collect();
    check_buffer(&values(r, "regression"), &regression, rtol, scaled, &format!("regression: {what}"));
}

fn tiles() -> [Vec<usize>; 3] {
    [vec![3, 5, 7], vec![1, 15, 18], vec![7, 15, 5]]
}

fn all_merged() -> Vec<bool> {
    vec![true; NAV[0] * NAV[1]]
}

#[test]
fn com_matches_the_reference_for_every_partitioning_tiling_roi_and_dtype() {
    let dir = tempfile::tempdir().unwrap();
    let data = moving_disk(true, 41);
    let udf = load("com");
    for ty in [Ty::F32, Ty::U16] {
        let path = write(dir.path(), "com", &data, ty);
        for setting in [DEFAULT, EVERYTHING] {
            for case in cases(42, &tiles(), 42) {
                let what = format!("{ty:?} {setting:?} {case:?}");
                let results =
                    run_one(&path, &udf, setting.params(), case.options()).unwrap_or_else(|e| panic!("{what}: {e}"));
                let expected = reference(&data, &setting, case.roi.as_deref(), &all_merged());
                check(&results.udfs[0], &expected, 1e-5, false, &what);
            }
        }
    }
}

#[test]
fn com_non_integer_float32_and_float64_data() {
    let dir = tempfile::tempdir().unwrap();
    let data = moving_disk(false, 43);
    let udf = load("com");
    let roi = cases(42, &tiles(), 44).into_iter().find(|c| c.roi_name == "random").unwrap().roi;
    for (ty, rtol, scaled) in [(Ty::F32, 1e-5, true), (Ty::F64, 1e-9, false)] {
        let path = write(dir.path(), "com-float", &data, ty);
        let stored = data.rounded(ty);
        for setting in [DEFAULT, EVERYTHING] {
            for roi in [None, roi.clone()] {
                let case = Case { partitions: 3, tile: vec![4, 6, 7], roi_name: "-", roi: roi.clone() };
                let what = format!("{ty:?} {setting:?} {case:?}");
                let results = run_one(&path, &udf, setting.params(), case.options()).unwrap();
                check(
                    &results.udfs[0],
                    &reference(&stored, &setting, roi.as_deref(), &all_merged()),
                    rtol,
                    scaled,
                    &what,
                );
            }
        }
    }
}

#[test]
fn com_every_param_follows_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let data = moving_disk(false, 45);
    let path = write(dir.path(), "com-params", &data, Ty::F64);
    let udf = load("com");
    let coefficients = [[0.4, -0.3], [0.05, 0.02], [-0.01, 0.07]];
    let settings = [
        DEFAULT,
        Setting { cy: Some(7.0), cx: Some(9.0), ..DEFAULT },
        Setting { cy: Some(6.4), cx: Some(10.2), ..DEFAULT },
        Setting { r: 4.5, ..DEFAULT },
        Setting { r: 6.0, ri: 2.0, ..DEFAULT },
        // Integer radii around the integer default centre: pixels lie exactly on both circles.
        Setting { r: 5.0, ri: 3.0, ..DEFAULT },
        Setting { rotation: 90.0, ..DEFAULT },
        Setting { rotation: 123.4, ..DEFAULT },
        Setting { flip_y: true, ..DEFAULT },
        Setting { flip_y: true, rotation: -60.0, ..DEFAULT },
        Setting { regression: Reg::Mode(0), ..DEFAULT },
        Setting { regression: Reg::Mode(1), ..DEFAULT },
        Setting { regression: Reg::Given(coefficients), ..DEFAULT },
        Setting { regression: Reg::Given([[0.4, -0.3], [0.0; 2], [0.0; 2]]), ..DEFAULT },
        EVERYTHING,
    ];
    let mut seen: Vec<Vec<f64>> = Vec::new();
    for s in settings {
        let results =
            run_one(&path, &udf, s.params(), RunOptions { partitions: Some(3), ..Default::default() }).unwrap();
        let r = &results.udfs[0];
        check(r, &reference(&data, &s, None, &all_merged()), 1e-9, false, &format!("{s:?}"));
        let field = values(r, "field");
        assert!(!seen.contains(&field) || s.cy == Some(7.0), "{s:?} changes the field");
        seen.push(field);
    }
    // The regression buffer returns the given coefficients as they are.
    let s = Setting { regression: Reg::Given(coefficients), ..DEFAULT };
    let r = run_one(&path, &udf, s.params(), RunOptions::default()).unwrap();
    assert_eq!(values(&r.udfs[0], "regression"), coefficients.iter().flatten().copied().collect::<Vec<_>>());
    // A flat 6-value array means the same as (3, 2).
    let flat = params(&[("regression", array(&[6], coefficients.iter().flatten().copied().collect()))]);
    let r6 = run_one(&path, &udf, flat, RunOptions::default()).unwrap();
    assert_eq!(values(&r6.udfs[0], "field"), values(&r.udfs[0], "field"));
}

#[test]
fn com_default_centre_is_the_integer_frame_centre() {
    let dir = tempfile::tempdir().unwrap();
    let data = moving_disk(false, 46);
    let path = write(dir.path(), "com-centre", &data, Ty::F64);
    let udf = load("com");
    let run = |p: Params| run_one(&path, &udf, p, RunOptions::default()).unwrap().udfs.remove(0);
    let absent = run(Params::default());
    let nan = run(params(&[("cy", ParamValue::Float(f64::NAN)), ("cx", ParamValue::Float(f64::NAN))]));
    let explicit = run(params(&[("cy", ParamValue::Float(7.0)), ("cx", ParamValue::Float(9.0))]));
    let half = run(params(&[("cy", ParamValue::Float(7.5)), ("cx", ParamValue::Float(9.0))]));
    for name in ["raw_com", "raw_shifts", "field", "divergence"] {
        assert_eq!(values(&absent, name), values(&explicit, name), "{name}: absent = Y//2, X//2");
        assert_eq!(values(&nan, name), values(&explicit, name), "{name}: NaN = Y//2, X//2");
    }
    assert_ne!(values(&half, "raw_shifts"), values(&explicit, "raw_shifts"), "7.5 is not the default");
    // raw_com − raw_shifts is the reference point.
    let (com, shifts) = (values(&absent, "raw_com"), values(&absent, "raw_shifts"));
    for (c, s) in com.chunks(2).zip(shifts.chunks(2)) {
        assert!((c[0] - s[0] - 7.0).abs() < 1e-12 && (c[1] - s[1] - 9.0).abs() < 1e-12, "{c:?} {s:?}");
    }
}

#[test]
fn com_sign_conventions_of_rotation_and_flip() {
    let dir = tempfile::tempdir().unwrap();
    let data = moving_disk(false, 47);
    let path = write(dir.path(), "com-signs", &data, Ty::F64);
    let udf = load("com");
    let run = |s: Setting| run_one(&path, &udf, s.params(), RunOptions::default()).unwrap().udfs.remove(0);
    let plain = run(DEFAULT);
    let shifts = values(&plain, "raw_shifts");
    let largest = shifts.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    assert!(largest > 1.0, "the fixture's shifts are non-trivial: {largest}");
    assert!(shifts.chunks(2).filter(|s| s[0].abs() > 0.1 && s[1].abs() > 0.1).count() > 10, "both components vary");
    // Without corrections the field is the shift.
    assert_close(&values(&plain, "field"), &shifts, 1e-12, "field = raw_shifts");
    // θ = 90°: field_y = +shift_x, field_x = −shift_y.
    let rotated = run(Setting { rotation: 90.0, ..DEFAULT });
    let (fy, fx) = (values(&rotated, "field_y"), values(&rotated, "field_x"));
    for (p, s) in shifts.chunks(2).enumerate() {
        assert!((fy[p] - s[1]).abs() < 1e-12, "θ=90°: field_y[{p}] = {} but shift_x = {}", fy[p], s[1]);
        assert!((fx[p] + s[0]).abs() < 1e-12, "θ=90°: field_x[{p}] = {} but −shift_y = {}", fx[p], -s[0]);
    }
    // flip_y: field_y = −shift_y, field_x = shift_x.
    let flipped = run(Setting { flip_y: true, ..DEFAULT });
    let (fy, fx) = (values(&flipped, "field_y"), values(&flipped, "field_x"));
    for (p, s) in shifts.chunks(2).enumerate() {
        assert_eq!((fy[p], fx[p]), (-s[0], s[1]), "flip_y at {p}");
    }
    // magnitude = |field|, divergence and curl of the rotated field as the reference says.
    let e = reference(&data, &Setting { rotation: 90.0, ..DEFAULT }, None, &all_merged());
    assert_close(&values(&rotated, "curl"), &e.curl, 1e-9, "curl");
    assert_close(&values(&rotated, "divergence"), &e.divergence, 1e-9, "divergence");
}

#[test]
fn com_divergence_and_curl_are_nan_outside_the_roi() {
    let dir = tempfile::tempdir().unwrap();
    let data = moving_disk(false, 48);
    let path = write(dir.path(), "com-roi", &data, Ty::F32);
    let udf = load("com");
    let [ny, nx] = NAV;
    // A block of rows 1..5 and columns 2..6: interior points have all four neighbours.
    let roi: Vec<bool> = (0..ny * nx).map(|p| (1..5).contains(&(p / nx)) && (2..6).contains(&(p % nx))).collect();
    let case = Case { partitions: 2, tile: vec![5, 7, 9], roi_name: "block", roi: Some(roi.clone()) };
    let results = run_one(&path, &udf, EVERYTHING.params(), case.options()).unwrap();
    let r = &results.udfs[0];
    let (div, curl, fy) = (values(r, "divergence"), values(r, "curl"), values(r, "field_y"));
    for p in 0..ny * nx {
        let (y, x) = (p / nx, p % nx);
        if !roi[p] {
            assert!(div[p].is_nan() && curl[p].is_nan() && fy[p].is_nan(), "outside the ROI at ({y}, {x})");
        } else if (2..4).contains(&y) && (3..5).contains(&x) {
            assert!(div[p].is_finite() && curl[p].is_finite(), "interior ({y}, {x})");
        } else {
            // np.gradient reaches outside the ROI from its border: NaN, as in LiberTEM.
            assert!(div[p].is_nan() && curl[p].is_nan() && fy[p].is_finite(), "ROI border ({y}, {x})");
        }
    }
    assert_eq!(r.buffer("divergence").unwrap().raw.shape(), &[16], "compressed to the ROI");
    let stored = data.rounded(Ty::F32);
    check(r, &reference(&stored, &EVERYTHING, Some(&roi), &all_merged()), 1e-5, true, "block ROI");
}

#[test]
fn com_regression_uses_only_valid_positions() {
    let dir = tempfile::tempdir().unwrap();
    let data = moving_disk(false, 49);
    let path = write(dir.path(), "com-regression", &data, Ty::F64);
    let udf = load("com");
    let n = NAV[0] * NAV[1];
    let random = cases(n, &tiles(), 50).into_iter().find(|c| c.roi_name == "random").unwrap().roi.unwrap();
    for mode in [0, 1] {
        let s = Setting { regression: Reg::Mode(mode), ..DEFAULT };
        // With a ROI: fitted over the ROI's positions only, not over the whole scan.
        let options = RunOptions { roi: Some(udf_host::roi::Roi::from_mask(random.clone())), ..Default::default() };
        let r = run_one(&path, &udf, s.params(), options).unwrap().udfs.remove(0);
        let in_roi = reference(&data, &s, Some(&random), &all_merged()).regression;
        let whole = reference(&data, &s, None, &all_merged()).regression;
        let got = values(&r, "regression");
        assert_close(&got, &in_roi.iter().flatten().copied().collect::<Vec<_>>(), 1e-9, &format!("mode {mode} ROI"));
        let differ = got.iter().zip(whole.iter().flatten()).any(|(a, b)| (a - b).abs() > 1e-6);
        assert!(differ, "mode {mode}: the ROI fit differs from the whole-scan fit");
        // After subtracting the mean, the field averages to 0 over the ROI.
        if mode == 0 {
            let f = values(&r, "field");
            let sum: f64 = (0..n).filter(|&p| random[p]).map(|p| f[2 * p]).sum();
            assert!(sum.abs() < 1e-9, "mean-free over the ROI: {sum}");
        }

        // Intermediate results: only the merged partition counts.
        let ds = dataset::open(&path, &OpenOptions::default()).unwrap();
        let spec = UdfSpec { udf: udf.clone(), params: s.params() };
        let run = Run::plan(ds, vec![spec], RunOptions { partitions: Some(2), threads: Some(1), ..Default::default() });
        let mut iter = run.unwrap().iter();
        iter.next().expect("one partition").expect("merged");
        let partial = iter.results().unwrap();
        let merged = partial.damage.clone();
        assert!(merged.iter().any(|&m| m) && merged.iter().any(|&m| !m), "half merged: {merged:?}");
        let e = reference(&data, &s, None, &merged);
        check(&partial.udfs[0], &e, 1e-9, false, &format!("mode {mode} after one of two partitions"));
        for step in iter.by_ref() {
            step.unwrap();
        }
    }
    // One valid position: the fit is exact there (minimum-norm least squares / the mean).
    let mut single = vec![false; n];
    single[23] = true;
    for mode in [0, 1] {
        let s = Setting { regression: Reg::Mode(mode), ..DEFAULT };
        let options = RunOptions { roi: Some(udf_host::roi::Roi::from_mask(single.clone())), ..Default::default() };
        let r = run_one(&path, &udf, s.params(), options).unwrap().udfs.remove(0);
        check(&r, &reference(&data, &s, Some(&single), &all_merged()), 1e-9, false, &format!("mode {mode} single"));
        let f = values(&r, "field");
        assert!(f[46].abs() < 1e-12 && f[47].abs() < 1e-12, "mode {mode}: {:?}", &f[46..48]);
    }
    // One scan row or column: a rank-deficient fit, solved like np.linalg.lstsq (minimum norm).
    let s = Setting { regression: Reg::Mode(1), ..DEFAULT };
    for (what, roi) in [
        ("row 2", (0..n).map(|p| p / NAV[1] == 2).collect::<Vec<bool>>()),
        ("column 3", (0..n).map(|p| p % NAV[1] == 3).collect()),
    ] {
        let options = RunOptions { roi: Some(udf_host::roi::Roi::from_mask(roi.clone())), ..Default::default() };
        let r = run_one(&path, &udf, s.params(), options).unwrap().udfs.remove(0);
        let e = reference(&data, &s, Some(&roi), &all_merged());
        check(&r, &e, 1e-9, false, what);
        assert!(e.regression.iter().flatten().all(|c| c.abs() > 1e-6), "{what}: all coefficients used: {e:?}");
    }
}

#[test]
fn com_result_dtypes_and_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let data = moving_disk(true, 51);
    let udf = load("com");
    for (ty, d) in [(Ty::U16, DType::F32), (Ty::F32, DType::F32), (Ty::F64, DType::F64)] {
        let path = write(dir.path(), "com-dtypes", &data, ty);
        let results = run_one(&path, &udf, Params::default(), RunOptions::default()).unwrap();
        assert_eq!(results.input_dtype, d);
        let r = &results.udfs[0];
        let names: Vec<&str> = r.buffers.iter().map(|b| b.name.as_str()).collect();
        let expected_names =
            ["raw_com", "raw_shifts", "field", "field_y", "field_x", "magnitude", "divergence", "curl", "regression"];
        assert_eq!(names, expected_names, "raw_mask_result is private");
        for name in ["raw_com", "raw_shifts"] {
            let b = r.buffer(name).unwrap();
            assert_eq!((b.dtype(), b.data.shape()), (d, &[6, 7, 2][..]), "{name} {ty:?}");
        }
        // Like LiberTEM 0.16, the field quantities are float64 whatever the input.
        let b = r.buffer("field").unwrap();
        assert_eq!((b.dtype(), b.data.shape()), (DType::F64, &[6, 7, 2][..]), "field {ty:?}");
        for name in ["field_y", "field_x", "magnitude", "divergence", "curl"] {
            let b = r.buffer(name).unwrap();
            assert_eq!((b.dtype(), b.data.shape()), (DType::F64, &[6, 7][..]), "{name} {ty:?}");
        }
        let b = r.buffer("regression").unwrap();
        assert_eq!((b.dtype(), b.data.shape()), (DType::F64, &[3, 2][..]));
    }
}

#[test]
fn com_rejects_bad_params_and_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let data = moving_disk(true, 52);
    let path = write(dir.path(), "com-bad", &data, Ty::U16);
    let udf = load("com");
    let bad = [
        (Setting { r: 3.0, ri: 3.0, ..DEFAULT }.params(), "inner radius"),
        (Setting { ri: f64::INFINITY, ..DEFAULT }.params(), "inner radius"),
        (Setting { r: -2.0, ..DEFAULT }.params(), "non-negative"),
        (Setting { regression: Reg::Mode(2), ..DEFAULT }.params(), "regression"),
        (params(&[("regression", array(&[2, 2], vec![0.0; 4]))]), "shape [2, 2]"),
        (params(&[("cy", ParamValue::Float(f64::INFINITY))]), "finite"),
    ];
    for (p, needle) in bad {
        let (kind, message) = returned_error(run_one(&path, &udf, p, RunOptions::default()));
        assert_eq!(kind, ErrorKind::BadParam, "{message}");
        assert!(message.contains(needle), "{message}");
    }
    // Shapes: 1-D scan, 1-D frames, a scan one position high.
    for (nav, sig, needle) in [
        (vec![42], vec![15, 18], "nav shape is [42] and the sig shape [15, 18]"),
        (vec![6, 7], vec![270], "nav shape is [6, 7] and the sig shape [270]"),
        (vec![1, 42], vec![15, 18], "at least 2 scan positions along each nav axis"),
    ] {
        let (kind, message) = returned_error(run_shaped(&path, &nav, &sig, &udf, Params::default()));
        assert_eq!(kind, ErrorKind::InvalidData, "{message}");
        assert!(message.contains(needle), "{message}");
    }
}
