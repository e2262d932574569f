//! `com` against BUILTINS.md §5 written out: masks, shifts, rotation and flip,
//! regression (none, mean, least squares, given), magnitude, divergence and curl with
//! NumPy's gradient, on the full nav grid with NaN outside the ROI.

use super::{Case, Fixture, Input, builtin, cases};
use std::sync::Arc;
use udf_host::array::NdArray;
use udf_host::dtype::DType;
use udf_host::udf::{ParamValue, Params};
use udf_host_tests::fixtures;
use udf_host_tests::params;
use udf_host_tests::reference::to_f64;

#[derive(Debug, Clone)]
struct ComCase {
    cy: Option<f64>,
    cx: Option<f64>,
    r: f64,
    ri: f64,
    rotation: f64,
    flip_y: bool,
    /// -1, 0, 1, or given coefficients.
    regression: Result<i32, [[f64; 2]; 3]>,
}

impl ComCase {
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
        let reg = match self.regression {
            Ok(k) => NdArray::from_vec(&[1], vec![f64::from(k)]).unwrap(),
            Err(c) => NdArray::from_vec(&[3, 2], c.iter().flatten().copied().collect::<Vec<f64>>()).unwrap(),
        };
        p.push(("regression", ParamValue::Array(Arc::new(reg))));
        params(&p)
    }
}

/// NumPy's `gradient` along `axis` of a `(ny, nx)` grid.
fn np_gradient(v: &[f64], ny: usize, nx: usize, axis: usize) -> Vec<f64> {
    let mut out = vec![0.0; v.len()];
    for y in 0..ny {
        for x in 0..nx {
            let (pos, len) = if axis == 0 { (y, ny) } else { (x, nx) };
            let at = |d: isize| {
                let (yy, xx) = if axis == 0 { ((y as isize + d) as usize, x) } else { (y, (x as isize + d) as usize) };
                v[yy * nx + xx]
            };
            out[y * nx + x] = if pos == 0 {
                at(1) - at(0)
            } else if pos == len - 1 {
                at(0) - at(-1)
            } else {
                (at(1) - at(-1)) / 2.0
            };
        }
    }
    out
}

#[allow(clippy::needless_range_loop)]
/// Solve the 3 × 3 system `m · c = b` by Cramer's rule.
fn solve3(m: [[f64; 3]; 3], b: [f64; 3]) -> [f64; 3] {
    let det = |m: [[f64; 3]; 3]| {
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    };
    let d = det(m);
    let mut out = [0.0; 3];
    for (k, o) in out.iter_mut().enumerate() {
        let mut mk = m;
        for r in 0..3 {
            mk[r][k] = b[r];
        }
        *o = det(mk) / d;
    }
    out
}

#[allow(clippy::needless_range_loop)] // (y, x) component arithmetic
/// All results on the full `(ny, nx)` grid: raw_com, raw_shifts, field (pairs), field_y,
/// field_x, magnitude, divergence, curl, regression (6).
fn reference(f: &Fixture, case: &Case, c: &ComCase) -> Vec<(&'static str, Vec<f64>)> {
    let (ny, nx, sy, sx) = (5, 7, 19, 23);
    let cy = c.cy.unwrap_or((sy / 2) as f64);
    let cx = c.cx.unwrap_or((sx / 2) as f64);
    let n = ny * nx;
    let (mut raw_com, mut shifts, mut field) = (vec![f64::NAN; 2 * n], vec![f64::NAN; 2 * n], vec![f64::NAN; 2 * n]);
    let theta = c.rotation.to_radians();
    for i in (0..n).filter(|&i| case.selected(i)) {
        let (mut total, mut sum_y, mut sum_x) = (0.0, 0.0, 0.0);
        for (p, &v) in f.frame(i).iter().enumerate() {
            let (y, x) = ((p / sx) as f64, (p % sx) as f64);
            let d2 = (y - cy).powi(2) + (x - cx).powi(2);
            if d2 <= c.r * c.r && (c.ri == 0.0 || d2 > c.ri * c.ri) {
                total += v;
                sum_y += v * y;
                sum_x += v * x;
            }
        }
        let (dy, dx) = if total == 0.0 { (0.0, 0.0) } else { (sum_y / total - cy, sum_x / total - cx) };
        raw_com[2 * i] = dy + cy;
        raw_com[2 * i + 1] = dx + cx;
        shifts[2 * i] = dy;
        shifts[2 * i + 1] = dx;
        let dy = if c.flip_y { -dy } else { dy };
        field[2 * i] = theta.cos() * dy + theta.sin() * dx;
        field[2 * i + 1] = -theta.sin() * dy + theta.cos() * dx;
    }
    let valid: Vec<usize> = (0..n).filter(|&i| case.selected(i)).collect();
    let coefficients = match c.regression {
        Ok(-1) => [[0.0; 2]; 3],
        Ok(0) => {
            let k = valid.len() as f64;
            let mean = |a: usize| valid.iter().map(|&i| field[2 * i + a]).sum::<f64>() / k;
            [[mean(0), mean(1)], [0.0; 2], [0.0; 2]]
        }
        Ok(_) => {
            let mut ata = [[0.0; 3]; 3];
            let mut atb = [[0.0; 3]; 2];
            for &i in &valid {
                let row = [1.0, (i / nx) as f64, (i % nx) as f64];
                for a in 0..3 {
                    for b in 0..3 {
                        ata[a][b] += row[a] * row[b];
                    }
                    for k in 0..2 {
                        atb[k][a] += row[a] * field[2 * i + k];
                    }
                }
            }
            let (cy_, cx_) = (solve3(ata, atb[0]), solve3(ata, atb[1]));
            [[cy_[0], cx_[0]], [cy_[1], cx_[1]], [cy_[2], cx_[2]]]
        }
        Err(given) => given,
    };
    if c.regression != Ok(-1) {
        for i in 0..n {
            let (y, x) = ((i / nx) as f64, (i % nx) as f64);
            for a in 0..2 {
                field[2 * i + a] -= coefficients[0][a] + y * coefficients[1][a] + x * coefficients[2][a];
            }
        }
    }
    let fy: Vec<f64> = (0..n).map(|i| field[2 * i]).collect();
    let fx: Vec<f64> = (0..n).map(|i| field[2 * i + 1]).collect();
    let magnitude = fy.iter().zip(&fx).map(|(a, b)| (a * a + b * b).sqrt()).collect();
    let divergence = np_gradient(&fy, ny, nx, 0).iter().zip(np_gradient(&fx, ny, nx, 1)).map(|(a, b)| a + b).collect();
    let curl = np_gradient(&fy, ny, nx, 1).iter().zip(np_gradient(&fx, ny, nx, 0)).map(|(a, b)| a - b).collect();
    vec![
        ("raw_com", raw_com),
        ("raw_shifts", shifts),
        ("field", field),
        ("field_y", fy),
        ("field_x", fx),
        ("magnitude", magnitude),
        ("divergence", divergence),
        ("curl", curl),
        ("regression", coefficients.iter().flatten().copied().collect()),
    ]
}

/// Centre-of-mass values come from float32 sums (`Sy / I`), so they are accurate to
/// `rtol` of the frame's size in pixels, not of the (small) shift: compare with that
/// absolute tolerance.
fn assert_pixels_close(actual: &[f64], expected: &[f64], what: &str) {
    assert_eq!(actual.len(), expected.len(), "{what}: length");
    for (i, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        let ok = (a.is_nan() && e.is_nan()) || (a - e).abs() <= 1e-5 * (23.0 + e.abs());
        assert!(ok, "{what}: element {i}: got {a}, expected {e}");
    }
}

#[test]
fn com_matches_the_definitions_for_every_parameter_set_and_case() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_uniform(&[5, 7], &[19, 23], 71);
    let coms = [
        ComCase { cy: None, cx: None, r: f64::INFINITY, ri: 0.0, rotation: 0.0, flip_y: false, regression: Ok(-1) },
        ComCase { cy: Some(8.5), cx: Some(10.0), r: 6.0, ri: 0.0, rotation: 90.0, flip_y: false, regression: Ok(0) },
        ComCase { cy: None, cx: Some(12.25), r: 8.0, ri: 2.0, rotation: 33.0, flip_y: true, regression: Ok(1) },
        ComCase {
            cy: Some(9.0),
            cx: Some(11.0),
            r: 30.0,
            ri: 0.0,
            rotation: -150.0,
            flip_y: true,
            regression: Err([[0.5, -0.25], [0.01, 0.02], [-0.03, 0.04]]),
        },
    ];
    for input in [Input::F32, Input::U16] {
        let data = if input == Input::U16 {
            fixtures::Data { values: data.values.iter().map(|v| (v * 1000.0).floor()).collect(), ..data.clone() }
        } else {
            data.clone()
        };
        let f = Fixture::write(dir.path(), input, &data, 71);
        for c in &coms {
            for case in cases(f.frames(), &f.sig, &[3, 5, 7]) {
                // A fit needs three positions not on one line.
                let selected = (0..f.frames()).filter(|&i| case.selected(i)).count();
                if c.regression == Ok(1) && selected < 3 {
                    continue;
                }
                let what = format!("{input:?} {c:?}, {}", case.label);
                let results = f.run(vec![(builtin("com"), c.params())], &case);
                let r = &results.udfs[0];
                assert!(r.buffer("raw_mask_result").is_none(), "{what}: private buffers stay private");
                for (name, expected) in reference(&f, &case, c) {
                    let b = r.buffer(name).unwrap_or_else(|| panic!("{what}: no {name}"));
                    let dtype = if matches!(name, "raw_com" | "raw_shifts") { DType::F32 } else { DType::F64 };
                    assert_eq!(b.dtype(), dtype, "{what} {name}");
                    assert_pixels_close(&to_f64(&b.data), &expected, &format!("{name} {what}"));
                }
            }
        }
    }
}

#[test]
fn com_rejects_bad_parameters_and_complex_input() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[2, 3], &[6, 5], 1);
    let f = Fixture::write(dir.path(), Input::F32, &data, 1);
    let run = |p: Params, path: &std::path::Path| {
        udf_host_tests::run_on(path, &Default::default(), vec![(builtin("com"), p)], Default::default()).err().unwrap()
    };
    let err = run(params(&[("r", ParamValue::Float(2.0)), ("ri", ParamValue::Float(2.0))]), &f.path);
    assert!(err.is_user_error() && err.to_string().contains("ri < r"), "{err}");
    let bad = NdArray::from_vec(&[2], vec![1.0, 2.0]).unwrap();
    let err = run(params(&[("regression", ParamValue::Array(Arc::new(bad)))]), &f.path);
    assert!(err.is_user_error() && err.to_string().contains("regression"), "{err}");
    let c = Fixture::write(dir.path(), Input::C64, &data, 1);
    let err = run(Params::default(), &c.path);
    assert!(err.to_string().contains("real input"), "{err}");
}
