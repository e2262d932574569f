//! Every built-in with a wasm twin in `plugins/` gives the same buffers as the twin —
//! names, kinds, dtypes, shapes, values (rtol 1e-5) and valid masks — over partitions,
//! tile shapes and ROIs, for float32 and uint16 input (and complex64 where LiberTEM
//! supports it). `sum`/`sumsig` are compared in `sum.rs`. Both run in one pass, so they
//! see the same tiles.

use super::{Fixture, Input, builtin, cases};
use std::sync::Arc;
use udf_host::array::NdArray;
use udf_host::dtype::DType;
use udf_host::udf::{ParamValue, Params};
use udf_host_tests::fixtures;
use udf_host_tests::reference::{assert_close, to_complex, to_f64};

const NAV: [usize; 2] = [5, 6];
const SIG: [usize; 2] = [12, 10];

fn array(shape: &[usize], values: Vec<f64>) -> ParamValue {
    ParamValue::Array(Arc::new(NdArray::from_vec(shape, values).expect("param shape")))
}

/// (twin plugin, params, inputs) for each built-in.
fn twins() -> Vec<(&'static str, Params, Vec<Input>)> {
    let px = SIG[0] * SIG[1];
    let disk = (0..px).map(|i| f64::from(u8::from(((i / SIG[1]) as f64 - 6.0).hypot((i % SIG[1]) as f64 - 5.0) < 4.0)));
    let ramp = (0..px).map(|i| (i % SIG[1]) as f64 / 10.0 - 0.3);
    let masks = array(&[2, SIG[0], SIG[1]], disk.chain(ramp).collect());
    let p = udf_host_tests::params;
    let real = vec![Input::F32, Input::U16];
    vec![
        ("stddev", Params::default(), vec![Input::F32, Input::U16, Input::C64]),
        ("masks", p(&[("masks", masks)]), vec![Input::F32, Input::U16, Input::C64]),
        ("pick", Params::default(), vec![Input::F32, Input::U16, Input::C64]),
        ("com", p(&[("r", ParamValue::Float(5.0)), ("scan_rotation", ParamValue::Float(30.0))]), real.clone()),
        ("logsum", Params::default(), real.clone()),
        (
            "fem",
            p(&[
                ("center", array(&[2], vec![6.0, 5.0])),
                ("rad_in", ParamValue::Float(1.5)),
                ("rad_out", ParamValue::Float(4.0)),
            ]),
            real.clone(),
        ),
        ("crystallinity", p(&[("rad_in", ParamValue::Float(1.0)), ("rad_out", ParamValue::Float(4.0))]), real),
    ]
}

fn values(array: &NdArray) -> Vec<f64> {
    match array.dtype() {
        DType::C64 | DType::C128 => to_complex(array).into_iter().flat_map(|(re, im)| [re, im]).collect(),
        _ => to_f64(array),
    }
}

#[test]
fn builtins_agree_with_their_wasm_twins() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_uniform(&NAV, &SIG, 21);
    let mut compared = std::collections::BTreeMap::<&str, usize>::new();
    for (name, params, inputs) in twins() {
        let twin = udf_host_tests::load(name);
        for input in inputs {
            let f = Fixture::write(dir.path(), input, &data, 21);
            let frames = f.frames();
            // Pick copies the frames of a small ROI: give it one everywhere.
            let all = cases(frames, &f.sig, &[4, 5, 3]);
            let selected: Vec<_> = all
                .into_iter()
                .filter(|c| c.partitions != 2)
                .filter(|c| name != "pick" || c.roi.is_some())
                .filter(|c| name != "com" || c.roi.is_none() || c.partitions == 3)
                .collect();
            for case in selected {
                let what = format!("{name} {input:?} {}", case.label);
                let results = f.run(vec![(builtin(name), params.clone()), (twin.clone(), params.clone())], &case);
                let (native, wasm) = (&results.udfs[0], &results.udfs[1]);
                let names =
                    |u: &udf_host::exec::UdfResults| u.buffers.iter().map(|b| b.name.clone()).collect::<Vec<_>>();
                assert_eq!(names(native), names(wasm), "{what}: buffers");
                *compared.entry(name).or_default() += native.buffers.len();
                for (n, w) in native.buffers.iter().zip(&wasm.buffers) {
                    let what = format!("{what}, buffer {}", n.name);
                    assert_eq!((n.kind, &n.extra_shape), (w.kind, &w.extra_shape), "{what}: kind, extra shape");
                    assert_eq!(n.data.dtype(), w.data.dtype(), "{what}: dtype");
                    assert_eq!(n.data.shape(), w.data.shape(), "{what}: shape");
                    assert_eq!(to_f64(&n.valid), to_f64(&w.valid), "{what}: valid mask");
                    let (nv, wv) = (values(&n.data), values(&w.data));
                    if name == "com" {
                        // Derived quantities (divergence, curl) are differences of nearly
                        // equal float32-based gradients: compare with an absolute floor.
                        for (i, (a, b)) in nv.iter().zip(&wv).enumerate() {
                            let ok = (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-5 + 1e-4 * b.abs();
                            assert!(ok, "{what}: element {i}: native {a}, wasm {b}");
                        }
                    } else {
                        assert_close(&nv, &wv, 1e-5, &what);
                    }
                }
            }
        }
    }
    // Every twin ran, with its buffers compared.
    assert_eq!(compared.len(), 7, "{compared:?}");
    assert!(compared.values().all(|&n| n >= 20), "{compared:?}");
    eprintln!("buffers compared: {compared:?}");
}
