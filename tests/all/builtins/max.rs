//! `max`: the element-wise maximum of the selected frames against a plain loop, for every
//! partitioning, tiling, ROI and input dtype (in the dataset's own dtype, as NumPy's
//! `data.max(axis=nav)` gives it).

use super::{Input, builtin, cases};
use udf_host::dataset::OpenOptions;
use udf_host::dtype::DType;
use udf_host::exec::RunOptions;
use udf_host::udf::Params;
use udf_host_tests::fixtures::{self, Ty};
use udf_host_tests::reference::{to_complex, to_f64};

/// NumPy's order of complex values: real parts, then imaginary parts.
fn greater(a: (f64, f64), b: (f64, f64)) -> bool {
    a.0 > b.0 || (a.0 == b.0 && a.1 > b.1)
}

#[test]
fn max_matches_a_plain_loop_for_every_case_and_input() {
    let dir = tempfile::tempdir().unwrap();
    let mut data = fixtures::mk_uniform(&[5, 7], &[19, 23], 13);
    for v in &mut data.values {
        *v *= 1000.0;
    }
    for input in [Input::F32, Input::U16, Input::C64] {
        let f = super::Fixture::write(dir.path(), input, &data, 13);
        let (dtype, lowest) = match input {
            Input::F32 => (DType::F32, f64::NEG_INFINITY),
            Input::U16 => (DType::U16, 0.0),
            Input::C64 => (DType::C64, f64::NEG_INFINITY),
        };
        for case in cases(f.frames(), &f.sig, &[3, 5, 7]) {
            let what = format!("{input:?}, {}", case.label);
            let results = f.run(vec![(builtin("max"), Params::default())], &case);
            let m = results.udfs[0].buffer("intensity").expect("max intensity");
            assert_eq!((m.data.shape(), m.dtype()), (&[19usize, 23][..], dtype), "{what}");
            let mut expected = vec![(lowest, lowest); f.frame_len()];
            for i in (0..f.frames()).filter(|&i| case.selected(i)) {
                for (e, (&re, &im)) in expected.iter_mut().zip(f.frame(i).iter().zip(f.frame_im(i))) {
                    if greater((re, im), *e) {
                        *e = (re, im);
                    }
                }
            }
            if f.is_complex() {
                assert_eq!(to_complex(&m.data), expected, "{what}");
            } else {
                let (real, imag): (Vec<f64>, Vec<f64>) = expected.into_iter().unzip();
                assert!(imag.iter().all(|&v| v == 0.0 || v == lowest));
                assert_eq!(to_f64(&m.data), real, "{what}");
            }
        }
    }
}

#[test]
fn max_keeps_every_stored_dtype() {
    let dir = tempfile::tempdir().unwrap();
    // Values below zero too, so that signed types cannot pass by starting at zero.
    let mut data = fixtures::mk_uniform(&[3, 4], &[6, 5], 29);
    for v in &mut data.values {
        *v = *v * 250.0 - 100.0;
    }
    for (ty, dtype) in [
        (Ty::U8, DType::U8),
        (Ty::I16, DType::I16),
        (Ty::I32, DType::I32),
        (Ty::U32, DType::U32),
        (Ty::F64, DType::F64),
    ] {
        let path = dir.path().join(format!("{dtype}.npy"));
        fixtures::write_npy(&path, &data, ty);
        let options = RunOptions { partitions: Some(3), ..RunOptions::default() };
        let results =
            udf_host_tests::run_on(&path, &OpenOptions::default(), vec![(builtin("max"), Params::default())], options)
                .unwrap();
        assert_eq!(results.input_dtype, dtype);
        let m = results.udfs[0].buffer("intensity").unwrap();
        assert_eq!(m.dtype(), dtype);
        let stored = data.rounded(ty);
        let frame_len = 30;
        let mut expected = vec![f64::NEG_INFINITY; frame_len];
        for frame in stored.values.chunks_exact(frame_len) {
            for (e, &v) in expected.iter_mut().zip(frame) {
                *e = e.max(v);
            }
        }
        assert_eq!(to_f64(&m.data), expected, "{dtype}");
    }
}
