//! The frame built-ins `logsum`, `fem` and `crystallinity` against per-frame loops
//! (crystallinity against a plain discrete Fourier transform).

use super::{Case, Fixture, Input, builtin, cases, nav_reference};
use udf_host::dtype::DType;
use udf_host::udf::{ParamValue, Params};
use udf_host_tests::fixtures;
use udf_host_tests::reference::{assert_close, to_f64};
use udf_host_tests::{params, run_on};

fn inputs(dir: &std::path::Path, seed: u64) -> Vec<Fixture> {
    let data = fixtures::mk_random(&[5, 7], &[19, 23], seed);
    [Input::F32, Input::U16].iter().map(|&i| Fixture::write(dir, i, &data, seed)).collect()
}

#[test]
fn logsum_matches_the_log_scaled_sum() {
    let dir = tempfile::tempdir().unwrap();
    for f in inputs(dir.path(), 61) {
        for case in cases(f.frames(), &f.sig, &[3, 5, 7]) {
            let what = format!("{:?}, {}", f.input, case.label);
            let results = f.run(vec![(builtin("logsum"), Params::default())], &case);
            let b = results.udfs[0].buffer("logsum").expect("logsum");
            assert_eq!((b.dtype(), b.data.shape()), (DType::F32, &[19usize, 23][..]), "{what}");
            let mut expected = vec![0.0; f.frame_len()];
            for i in (0..f.frames()).filter(|&i| case.selected(i)) {
                let frame = f.frame(i);
                let min = frame.iter().copied().fold(f64::INFINITY, f64::min);
                for (e, &x) in expected.iter_mut().zip(frame) {
                    *e += (x - min + 1.0).ln();
                }
            }
            assert_close(&to_f64(&b.data), &expected, 1e-5, &what);
        }
    }
}

fn fem_reference(f: &Fixture, case: &Case, center: (f64, f64), rin: f64, rout: f64) -> Vec<f64> {
    nav_reference(case, f.frames(), 1, |i| {
        let ring: Vec<f64> = f
            .frame(i)
            .iter()
            .enumerate()
            .filter(|(p, _)| {
                let d = (((p / 23) as f64 - center.0).powi(2) + ((p % 23) as f64 - center.1).powi(2)).sqrt();
                d <= rout && d > rin
            })
            .map(|(_, &v)| v)
            .collect();
        let n = ring.len() as f64;
        let mean = ring.iter().sum::<f64>() / n;
        vec![(ring.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt()]
    })
}

#[test]
fn fem_matches_the_ring_standard_deviation() {
    let dir = tempfile::tempdir().unwrap();
    for f in inputs(dir.path(), 62) {
        for (center, rin, rout) in [((9.5, 11.0), 3.0, 8.0), ((2.0, 20.0), 0.0, 5.5)] {
            let p = params(&[
                (
                    "center",
                    ParamValue::Array(std::sync::Arc::new(
                        udf_host::array::NdArray::from_vec(&[2], vec![center.0, center.1]).unwrap(),
                    )),
                ),
                ("rad_in", ParamValue::Float(rin)),
                ("rad_out", ParamValue::Float(rout)),
            ]);
            for case in cases(f.frames(), &f.sig, &[3, 5, 7]) {
                let what = format!("{:?} {center:?} {rin} {rout}, {}", f.input, case.label);
                let results = f.run(vec![(builtin("fem"), p.clone())], &case);
                let b = results.udfs[0].buffer("intensity").expect("intensity");
                assert_eq!((b.dtype(), b.data.shape()), (DType::F32, &[5usize, 7][..]), "{what}");
                assert_close(&to_f64(&b.data), &fem_reference(&f, &case, center, rin, rout), 1e-5, &what);
            }
        }
    }
}

/// `Σ |rfft2(F · real_mask)| · fftshift(ring)[:, :X//2+1]` with a plain DFT.
fn crystallinity_reference(
    frame: &[f64],
    sy: usize,
    sx: usize,
    rin: f64,
    rout: f64,
    real: Option<(f64, f64, f64)>,
) -> f64 {
    let masked: Vec<f64> = frame
        .iter()
        .enumerate()
        .map(|(p, &v)| match real {
            Some((cy, cx, r)) if ((p / sx) as f64 - cy).powi(2) + ((p % sx) as f64 - cx).powi(2) <= r * r => 0.0,
            _ => v,
        })
        .collect();
    let ring = |y: usize, x: usize| {
        let d = ((y as f64 - sy as f64 / 2.0).powi(2) + (x as f64 - sx as f64 / 2.0).powi(2)).sqrt();
        f64::from(u8::from(d <= rout)) - f64::from(u8::from(d <= rin))
    };
    let mut total = 0.0;
    for ky in 0..sy {
        for kx in 0..sx / 2 + 1 {
            // fftshift: index k holds the unshifted (k - n/2) mod n.
            let w = ring((ky + sy - sy / 2) % sy, (kx + sx - sx / 2) % sx);
            if w == 0.0 {
                continue;
            }
            let (mut re, mut im) = (0.0, 0.0);
            for (p, &v) in masked.iter().enumerate() {
                let angle = -2.0
                    * std::f64::consts::PI
                    * ((ky * (p / sx)) as f64 / sy as f64 + (kx * (p % sx)) as f64 / sx as f64);
                re += v * angle.cos();
                im += v * angle.sin();
            }
            total += re.hypot(im) * w;
        }
    }
    total
}

#[test]
fn crystallinity_matches_a_plain_fourier_transform() {
    let dir = tempfile::tempdir().unwrap();
    for f in inputs(dir.path(), 63) {
        for (rin, rout, real) in [(2.0, 7.0, None), (1.0, 9.5, Some((9.0, 11.0, 3.0)))] {
            let mut p = vec![("rad_in", ParamValue::Float(rin)), ("rad_out", ParamValue::Float(rout))];
            if let Some((cy, cx, r)) = real {
                let center = udf_host::array::NdArray::from_vec(&[2], vec![cy, cx]).unwrap();
                p.push(("real_center", ParamValue::Array(std::sync::Arc::new(center))));
                p.push(("real_rad", ParamValue::Float(r)));
            }
            let p = params(&p);
            let per_frame: Vec<f64> =
                (0..f.frames()).map(|i| crystallinity_reference(f.frame(i), 19, 23, rin, rout, real)).collect();
            for case in cases(f.frames(), &f.sig, &[3, 5, 7]).into_iter().step_by(2) {
                let what = format!("{:?} {rin} {rout} {real:?}, {}", f.input, case.label);
                let results = f.run(vec![(builtin("crystallinity"), p.clone())], &case);
                let b = results.udfs[0].buffer("intensity").expect("intensity");
                assert_eq!((b.dtype(), b.data.shape()), (DType::F32, &[5usize, 7][..]), "{what}");
                let expected = nav_reference(&case, f.frames(), 1, |i| vec![per_frame[i]]);
                assert_close(&to_f64(&b.data), &expected, 1e-5, &what);
            }
        }
    }
}

#[test]
fn frame_builtins_refuse_complex_input() {
    let dir = tempfile::tempdir().unwrap();
    let f = Fixture::write(dir.path(), Input::C64, &fixtures::mk_random(&[4], &[6, 5], 1), 1);
    for name in ["logsum", "crystallinity"] {
        let p = if name == "logsum" {
            Params::default()
        } else {
            params(&[("rad_in", ParamValue::Float(1.0)), ("rad_out", ParamValue::Float(3.0))])
        };
        let err = run_on(&f.path, &Default::default(), vec![(builtin(name), p)], Default::default()).err().unwrap();
        assert!(err.to_string().contains("needs real input"), "{name}: {err}");
    }
}
