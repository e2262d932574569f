//! The `logsum` plugin against a plain loop over frames of BUILTINS.md §6:
//! `logsum[y, x] = Σ_n ln(F_n[y, x] − min F_n + 1)`.

use crate::plugin_matrix::{Case, cases, integer_uniform, run_one, scaled, values, write};
use udf_host::dtype::DType;
use udf_host::udf::{Method, Params};
use udf_host_tests::fixtures::{self, Data, Ty};
use udf_host_tests::load;
use udf_host_tests::reference::assert_close;

/// The reference: frames outside the ROI are skipped.
fn logsum(data: &Data, case: &Case) -> Vec<f64> {
    let mut out = vec![0.0; data.frame_len()];
    for n in (0..data.frames()).filter(|&n| case.selected(n)) {
        let frame = data.frame(n);
        let min = frame.iter().copied().fold(f64::INFINITY, f64::min);
        for (o, v) in out.iter_mut().zip(frame) {
            *o += (v - min + 1.0).ln();
        }
    }
    out
}

#[test]
fn logsum_matches_the_reference_for_every_partitioning_tiling_roi_and_dtype() {
    let dir = tempfile::tempdir().unwrap();
    let (nav, sig) = ([5, 7], [19, 23]);
    let datasets = [
        (Ty::F32, scaled(fixtures::mk_uniform(&nav, &sig, 11), 300.0)),
        (Ty::U16, integer_uniform(&nav, &sig, 4000.0, 12)),
    ];
    let udf = load("logsum");
    // Frame-method plugins get full frames whatever the forced tile shape; depth still varies.
    let tiles = [vec![3, 5, 7], vec![1, 19, 23], vec![8, 19, 4]];
    for (ty, data) in &datasets {
        let path = write(dir.path(), "logsum", data, *ty);
        let stored = data.rounded(*ty);
        for case in cases(35, &tiles, 13) {
            let what = format!("{ty:?} {case:?}");
            let results =
                run_one(&path, &udf, Params::default(), case.options()).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(results.input_dtype, DType::F32, "{what}");
            let r = &results.udfs[0];
            assert_eq!(r.method, Method::Frame, "{what}");
            let buffer = r.buffer("logsum").unwrap();
            assert_eq!(buffer.data.shape(), &[19, 23], "{what}");
            assert_eq!(buffer.dtype(), DType::F32, "{what}");
            let expected = logsum(&stored, &case);
            assert_close(&values(r, "logsum"), &expected, 1e-5, &what);
            if case.roi_name == "all-false" {
                assert!(expected.iter().all(|&v| v == 0.0), "{what}: nothing processed, zero sum");
            } else {
                assert!(expected.iter().any(|&v| v > 1.0), "{what}: the fixture gives a non-trivial sum");
            }
        }
    }
}

#[test]
fn logsum_of_float64_data_is_float32_and_exact_to_float32_rounding() {
    let dir = tempfile::tempdir().unwrap();
    let data = scaled(fixtures::mk_uniform(&[4, 3], &[6, 5], 14), 1e6);
    let path = write(dir.path(), "logsum64", &data, Ty::F64);
    let case = Case { partitions: 2, tile: vec![5, 6, 5], roi_name: "none", roi: None };
    let results = run_one(&path, &load("logsum"), Params::default(), case.options()).unwrap();
    assert_eq!(results.input_dtype, DType::F64, "float32 preferred + float64 native");
    assert_eq!(results.udfs[0].buffer("logsum").unwrap().dtype(), DType::F32);
    assert_close(&values(&results.udfs[0], "logsum"), &logsum(&data, &case), 1e-6, "float64 input");
}
