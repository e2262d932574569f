//! The `fem` plugin against a plain loop over frames of BUILTINS.md §7: the population
//! standard deviation of the pixels with `rad_in < d ≤ rad_out`, `d` measured from
//! `center = (row, column)`.

use crate::plugin_matrix::{Case, cases, integer_uniform, returned_error, run_one, run_shaped, scaled, values, write};
use std::sync::Arc;
use udf_host::array::NdArray;
use udf_host::dtype::DType;
use udf_host::exec::RunOptions;
use udf_host::udf::{ErrorKind, Method, ParamValue, Params};
use udf_host_tests::fixtures::{self, Data, Ty};
use udf_host_tests::reference::assert_close;
use udf_host_tests::{load, params};

fn center(y: f64, x: f64) -> ParamValue {
    ParamValue::Array(Arc::new(NdArray::from_vec(&[2], vec![y, x]).unwrap()))
}

fn fem_params(cy: f64, cx: f64, rad_in: f64, rad_out: f64) -> Params {
    params(&[
        ("center", center(cy, cx)),
        ("rad_in", ParamValue::Float(rad_in)),
        ("rad_out", ParamValue::Float(rad_out)),
    ])
}

/// The reference on the full nav grid (NaN outside the ROI, like the result's `data`).
fn fem(data: &Data, case: &Case, (cy, cx): (f64, f64), rad_in: f64, rad_out: f64) -> Vec<f64> {
    let (sy, sx) = (data.sig[0], data.sig[1]);
    (0..data.frames())
        .map(|n| {
            if !case.selected(n) {
                return f64::NAN;
            }
            let frame = data.frame(n);
            let mut ring = Vec::new();
            for y in 0..sy {
                for x in 0..sx {
                    let d = ((y as f64 - cy).powi(2) + (x as f64 - cx).powi(2)).sqrt();
                    if d <= rad_out && d > rad_in {
                        ring.push(frame[y * sx + x]);
                    }
                }
            }
            let mean = ring.iter().sum::<f64>() / ring.len() as f64;
            (ring.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / ring.len() as f64).sqrt()
        })
        .collect()
}

#[test]
fn fem_matches_the_reference_for_every_partitioning_tiling_roi_and_dtype() {
    let dir = tempfile::tempdir().unwrap();
    let (nav, sig) = ([5, 7], [19, 23]);
    let datasets = [
        (Ty::F32, scaled(fixtures::mk_uniform(&nav, &sig, 21), 50.0)),
        (Ty::U16, integer_uniform(&nav, &sig, 3000.0, 22)),
    ];
    let udf = load("fem");
    let tiles = [vec![3, 5, 7], vec![1, 19, 23], vec![8, 19, 4]];
    // An off-centre ring: row 8.5, column 13 (row first, as LiberTEM's code uses it).
    let (c, rad_in, rad_out) = ((8.5, 13.0), 2.5, 7.0);
    for (ty, data) in &datasets {
        let path = write(dir.path(), "fem", data, *ty);
        let stored = data.rounded(*ty);
        for case in cases(35, &tiles, 23) {
            let what = format!("{ty:?} {case:?}");
            let p = fem_params(c.0, c.1, rad_in, rad_out);
            let results = run_one(&path, &udf, p, case.options()).unwrap_or_else(|e| panic!("{what}: {e}"));
            let r = &results.udfs[0];
            assert_eq!(r.method, Method::Frame, "{what}");
            let buffer = r.buffer("intensity").unwrap();
            assert_eq!((buffer.data.shape(), buffer.dtype()), (&[5, 7][..], DType::F32), "{what}");
            assert_close(&values(r, "intensity"), &fem(&stored, &case, c, rad_in, rad_out), 1e-5, &what);
        }
    }
}

#[test]
fn fem_center_is_row_first_and_radii_select_the_ring() {
    let dir = tempfile::tempdir().unwrap();
    let data = integer_uniform(&[3, 4], &[16, 21], 1000.0, 24);
    let path = write(dir.path(), "fem-center", &data, Ty::U16);
    let udf = load("fem");
    let all = Case { partitions: 2, tile: vec![4, 16, 21], roi_name: "none", roi: None };
    let run = |p: Params| values(&run_one(&path, &udf, p, RunOptions::default()).unwrap().udfs[0], "intensity");
    for (c, rad_in, rad_out) in [((4.0, 15.0), 0.0, 3.0), ((15.0, 4.0), 1.0, 6.5), ((8.0, 10.0), 0.0, f64::INFINITY)] {
        let expected = fem(&data, &all, c, rad_in, rad_out);
        assert_close(
            &run(fem_params(c.0, c.1, rad_in, rad_out)),
            &expected,
            1e-5,
            &format!("{c:?} {rad_in} {rad_out}"),
        );
    }
    // Swapping row and column changes the result: the order matters and is (row, column).
    let swapped = fem(&data, &all, (15.0, 4.0), 0.0, 3.0);
    let got = run(fem_params(4.0, 15.0, 0.0, 3.0));
    assert!(got.iter().zip(&swapped).any(|(a, b)| (a - b).abs() > 1e-3 * b.abs()), "{got:?} vs {swapped:?}");
    // An empty ring (rad_in == rad_out) gives NaN, like np.std of nothing.
    assert!(run(fem_params(8.0, 10.0, 3.0, 3.0)).iter().all(|v| v.is_nan()));
}

#[test]
fn fem_rejects_bad_params() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "fem-bad", &integer_uniform(&[2, 3], &[8, 8], 100.0, 25), Ty::U16);
    let udf = load("fem");
    let run = |p: Params| returned_error(run_one(&path, &udf, p, RunOptions::default()));
    let three = ParamValue::Array(Arc::new(NdArray::from_vec(&[3], vec![1.0, 2.0, 3.0]).unwrap()));
    let cases = [
        (
            params(&[("center", three), ("rad_in", ParamValue::Float(0.0)), ("rad_out", ParamValue::Float(2.0))]),
            "2 numbers",
        ),
        (fem_params(4.0, 4.0, 3.0, 2.0), "rad_in"),
        (fem_params(4.0, 4.0, -1.0, 2.0), "non-negative"),
        (fem_params(f64::NAN, 4.0, 0.0, 2.0), "finite"),
    ];
    for (p, needle) in cases {
        let (kind, message) = run(p);
        assert_eq!(kind, ErrorKind::BadParam, "{message}");
        assert!(message.contains(needle), "{message}");
    }
    // A 1-D signal cannot hold a ring.
    let flat = write(dir.path(), "fem-1d", &integer_uniform(&[2, 3], &[64], 100.0, 26), Ty::U16);
    let (kind, message) = returned_error(run_shaped(&flat, &[2, 3], &[64], &udf, fem_params(4.0, 4.0, 0.0, 2.0)));
    assert_eq!(kind, ErrorKind::InvalidData, "{message}");
    assert!(message.contains("2-D frames, but the signal shape is [64]"), "{message}");
}
