//! The `crystallinity` plugin against BUILTINS.md §8 computed with a naive O(n²) DFT:
//! `intensity = Σ |rfft2(F · real_mask)| · half`, `half` the left `X//2 + 1` columns of the
//! fftshifted ring `[d ≤ rad_out] − [d ≤ rad_in]` centred at `(Y/2, X/2)`.

use crate::plugin_matrix::{Case, cases, integer_uniform, returned_error, run_one, scaled, values, write};
use std::f64::consts::PI;
use std::sync::Arc;
use udf_host::array::NdArray;
use udf_host::dtype::DType;
use udf_host::exec::RunOptions;
use udf_host::udf::{ErrorKind, Method, ParamValue, Params};
use udf_host_tests::fixtures::{self, Data, Ty};
use udf_host_tests::reference::assert_close;
use udf_host_tests::{load, params};

/// The params: the ring and optionally the real-space disk `(row, column, radius)`.
#[derive(Debug, Clone, Copy)]
struct Setting {
    rad_in: f64,
    rad_out: f64,
    real: Option<(f64, f64, f64)>,
}

impl Setting {
    fn params(&self) -> Params {
        let mut p = vec![("rad_in", ParamValue::Float(self.rad_in)), ("rad_out", ParamValue::Float(self.rad_out))];
        if let Some((y, x, r)) = self.real {
            p.push(("real_center", ParamValue::Array(Arc::new(NdArray::from_vec(&[2], vec![y, x]).unwrap()))));
            p.push(("real_rad", ParamValue::Float(r)));
        }
        params(&p)
    }
}

/// `np.fft.fftshift` of the ring as `np.roll(ring, (Y//2, X//2))`: entry `(k, l)` comes
/// from `((k − Y//2) mod Y, (l − X//2) mod X)`.
fn shifted_ring(sy: usize, sx: usize, rad_in: f64, rad_out: f64, k: usize, l: usize) -> f64 {
    let y = (k as isize - (sy / 2) as isize).rem_euclid(sy as isize) as f64;
    let x = (l as isize - (sx / 2) as isize).rem_euclid(sx as isize) as f64;
    let d = ((y - sy as f64 / 2.0).powi(2) + (x - sx as f64 / 2.0).powi(2)).sqrt();
    f64::from(u8::from(d <= rad_out)) - f64::from(u8::from(d <= rad_in))
}

/// The reference on the full nav grid (NaN outside the ROI).
fn crystallinity(data: &Data, case: &Case, s: Setting) -> Vec<f64> {
    let (sy, sx) = (data.sig[0], data.sig[1]);
    (0..data.frames())
        .map(|n| {
            if !case.selected(n) {
                return f64::NAN;
            }
            let frame = data.frame(n);
            let masked = |y: usize, x: usize| -> f64 {
                let inside =
                    s.real.is_some_and(|(cy, cx, r)| (y as f64 - cy).powi(2) + (x as f64 - cx).powi(2) <= r * r);
                if inside { 0.0 } else { frame[y * sx + x] }
            };
            let mut total = 0.0;
            for k in 0..sy {
                for l in 0..sx / 2 + 1 {
                    let w = shifted_ring(sy, sx, s.rad_in, s.rad_out, k, l);
                    if w == 0.0 {
                        continue;
                    }
                    // R[k, l] = Σ f[y, x] exp(−2πi (k y / Y + l x / X)), phases reduced exactly.
                    let (mut re, mut im) = (0.0, 0.0);
                    for y in 0..sy {
                        for x in 0..sx {
                            let phase =
                                2.0 * PI * (((k * y) % sy) as f64 / sy as f64 + ((l * x) % sx) as f64 / sx as f64);
                            re += masked(y, x) * phase.cos();
                            im -= masked(y, x) * phase.sin();
                        }
                    }
                    total += (re * re + im * im).sqrt() * w;
                }
            }
            total
        })
        .collect()
}

#[test]
fn crystallinity_matches_a_naive_dft_for_every_partitioning_tiling_roi_and_dtype() {
    let dir = tempfile::tempdir().unwrap();
    // Odd and even frame sides: 15 rows, 12 columns.
    let (nav, sig) = ([4, 5], [15, 12]);
    let datasets = [
        (Ty::F32, scaled(fixtures::mk_uniform(&nav, &sig, 31), 80.0)),
        (Ty::U16, integer_uniform(&nav, &sig, 2000.0, 32)),
    ];
    let udf = load("crystallinity");
    let tiles = [vec![3, 5, 7], vec![1, 15, 12], vec![6, 15, 5]];
    let settings = [
        Setting { rad_in: 1.5, rad_out: 5.0, real: None },
        Setting { rad_in: 0.0, rad_out: 3.0, real: Some((6.0, 5.5, 2.5)) },
    ];
    for (ty, data) in &datasets {
        let path = write(dir.path(), "crystallinity", data, *ty);
        let stored = data.rounded(*ty);
        for s in settings {
            let all = Case { partitions: 1, tile: vec![1, 15, 12], roi_name: "none", roi: None };
            let expected_all = crystallinity(&stored, &all, s);
            for case in cases(20, &tiles, 33) {
                let what = format!("{ty:?} {s:?} {case:?}");
                let results =
                    run_one(&path, &udf, s.params(), case.options()).unwrap_or_else(|e| panic!("{what}: {e}"));
                let r = &results.udfs[0];
                assert_eq!(r.method, Method::Frame, "{what}");
                let buffer = r.buffer("intensity").unwrap();
                assert_eq!((buffer.data.shape(), buffer.dtype()), (&[4, 5][..], DType::F32), "{what}");
                let expected: Vec<f64> =
                    (0..20).map(|n| if case.selected(n) { expected_all[n] } else { f64::NAN }).collect();
                assert_close(&values(r, "intensity"), &expected, 1e-5, &what);
            }
        }
    }
}

#[test]
fn the_real_space_mask_and_the_ring_change_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let data = integer_uniform(&[2, 3], &[10, 9], 500.0, 34);
    let path = write(dir.path(), "crystallinity-params", &data, Ty::F32);
    let udf = load("crystallinity");
    let all = Case { partitions: 1, tile: vec![1, 10, 9], roi_name: "none", roi: None };
    let run =
        |s: Setting| values(&run_one(&path, &udf, s.params(), RunOptions::default()).unwrap().udfs[0], "intensity");
    let plain = Setting { rad_in: 0.0, rad_out: 2.0, real: None };
    let masked = Setting { real: Some((4.0, 4.0, 3.0)), ..plain };
    let ring = Setting { rad_in: 2.0, rad_out: 4.5, ..plain };
    let mut seen = Vec::new();
    for s in [plain, masked, ring] {
        let got = run(s);
        assert_close(&got, &crystallinity(&data, &all, s), 1e-5, &format!("{s:?}"));
        seen.push(got);
    }
    assert!(seen[0] != seen[1] && seen[0] != seen[2], "each param changes the result: {seen:?}");
}

#[test]
fn crystallinity_rejects_bad_params() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "crystallinity-bad", &integer_uniform(&[2, 2], &[8, 8], 100.0, 35), Ty::U16);
    let udf = load("crystallinity");
    let run = |p: Params| returned_error(run_one(&path, &udf, p, RunOptions::default()));
    let ring = |a: f64, b: f64| vec![("rad_in", ParamValue::Float(a)), ("rad_out", ParamValue::Float(b))];
    let centre = |v: Vec<f64>| ParamValue::Array(Arc::new(NdArray::from_vec(&[v.len()], v).unwrap()));
    let mut only_rad = ring(0.0, 2.0);
    only_rad.push(("real_rad", ParamValue::Float(2.0)));
    let mut only_centre = ring(0.0, 2.0);
    only_centre.push(("real_center", centre(vec![3.0, 3.0])));
    let mut three = ring(0.0, 2.0);
    three.extend([("real_center", centre(vec![1.0, 2.0, 3.0])), ("real_rad", ParamValue::Float(2.0))]);
    for (p, needle) in [
        (ring(3.0, 2.0), "rad_in"),
        (ring(-1.0, 2.0), "non-negative"),
        (only_rad, "give both or neither"),
        (only_centre, "give both or neither"),
        (three, "2 numbers"),
    ] {
        let (kind, message) = run(params(&p));
        assert_eq!(kind, ErrorKind::BadParam, "{message}");
        assert!(message.contains(needle), "{message}");
    }
}
