//! `masks` (dense, sparse, several masks, complex masks, mask dtypes) and the virtual
//! detectors `disk`, `ring`, `point` against `Σ F · mask` written out per frame.

use super::{Case, Fixture, Input, builtin, cases, nav_reference};
use std::sync::Arc;
use udf_host::array::NdArray;
use udf_host::dtype::DType;
use udf_host::udf::ParamValue;
use udf_host_tests::fixtures;
use udf_host_tests::params;
use udf_host_tests::reference::{assert_close, assert_close_complex, to_complex};

/// `Σ_p F_n[p] · mask[p]` in complex `f64` for every selected frame and mask:
/// `(frames × M)` values, NaN outside the ROI.
fn reference(f: &Fixture, case: &Case, masks: &[Vec<(f64, f64)>]) -> Vec<(f64, f64)> {
    let m = masks.len();
    let re = nav_reference(case, f.frames(), m, |i| masks.iter().map(|mask| dot(f, i, mask).0).collect());
    let im = nav_reference(case, f.frames(), m, |i| masks.iter().map(|mask| dot(f, i, mask).1).collect());
    re.into_iter().zip(im).collect()
}

/// Compare a result with complex expectations: both parts for complex results, the
/// real part for real ones. Complex products cancel (`re·re − im·im`), and a float32
/// dot product is then only accurate relative to `Σ |F|·|mask|`: complex results are
/// held to `rtol` of that scale (`scale`), real ones to `rtol` of the value.
pub fn check(actual: &NdArray, expected: &[(f64, f64)], rtol: f64, what: &str) {
    check_scaled(actual, expected, None, rtol, what)
}

/// [`check`] with the scale `Σ |F|·|mask|` per element for complex results.
pub fn check_scaled(actual: &NdArray, expected: &[(f64, f64)], scale: Option<&[f64]>, rtol: f64, what: &str) {
    if matches!(actual.dtype(), DType::C64 | DType::C128) {
        let Some(scale) = scale else {
            return assert_close_complex(&to_complex(actual), expected, rtol, what);
        };
        let got = to_complex(actual);
        assert_eq!(got.len(), expected.len(), "{what}: length");
        for (i, ((a, e), s)) in got.iter().zip(expected).zip(scale).enumerate() {
            let close = |x: f64, y: f64| (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-8 + rtol * s.max(y.abs());
            assert!(close(a.0, e.0) && close(a.1, e.1), "{what}: element {i}: got {a:?}, expected {e:?} (scale {s})");
        }
    } else {
        let re: Vec<f64> = expected.iter().map(|c| c.0).collect();
        assert_close(&udf_host_tests::reference::to_f64(actual), &re, rtol, what);
    }
}

/// `Σ_p |F_n[p]| · |mask[p]|` per selected frame and mask (NaN elsewhere).
fn scales(f: &Fixture, case: &Case, masks: &[Vec<(f64, f64)>]) -> Vec<f64> {
    nav_reference(case, f.frames(), masks.len(), |i| {
        masks
            .iter()
            .map(|mask| {
                let frame = f.frame(i).iter().zip(f.frame_im(i));
                frame.zip(mask).map(|((&r, &im), &(mr, mi))| r.hypot(im) * mr.hypot(mi)).sum()
            })
            .collect()
    })
}

fn dot(f: &Fixture, i: usize, mask: &[(f64, f64)]) -> (f64, f64) {
    let mut acc = (0.0, 0.0);
    for ((&r, &im), &(mr, mi)) in f.frame(i).iter().zip(f.frame_im(i)).zip(mask) {
        acc.0 += r * mr - im * mi;
        acc.1 += r * mi + im * mr;
    }
    acc
}

/// `count` seeded masks of `len` pixels: real parts in [0, 1) (so real products do not
/// cancel and `rtol` applies as is), imaginary parts in [-1, 1) for complex masks.
fn random_masks(count: usize, len: usize, complex: bool, seed: u64) -> Vec<Vec<(f64, f64)>> {
    let re = fixtures::mk_uniform(&[count], &[len], seed);
    let im = fixtures::mk_uniform(&[count], &[len], seed + 1);
    (0..count)
        .map(|m| {
            (0..len)
                .map(|p| {
                    let r = re.values[m * len + p] as f32 as f64;
                    let i = if complex { (im.values[m * len + p] * 2.0 - 1.0) as f32 as f64 } else { 0.0 };
                    // Make a third of the pixels zero, so sparse masks are sparse.
                    if (m + p) % 3 == 0 { (0.0, 0.0) } else { (r, i) }
                })
                .collect()
        })
        .collect()
}

/// The masks as an array param of `dtype`, shape `(M, ..sig)`.
fn mask_param(masks: &[Vec<(f64, f64)>], sig: &[usize], dtype: DType) -> ParamValue {
    let mut shape = vec![masks.len()];
    shape.extend_from_slice(sig);
    let flat = masks.iter().flatten();
    let array = match dtype {
        DType::F32 => NdArray::from_vec(&shape, flat.map(|&(r, _)| r as f32).collect::<Vec<f32>>()),
        DType::F64 => NdArray::from_vec(&shape, flat.map(|&(r, _)| r).collect::<Vec<f64>>()),
        DType::C64 => NdArray::from_vec(
            &shape,
            flat.map(|&(r, i)| num_complex::Complex32::new(r as f32, i as f32)).collect::<Vec<_>>(),
        ),
        other => panic!("no masks of {other} in these tests"),
    };
    ParamValue::Array(Arc::new(array.unwrap()))
}

#[test]
fn masks_match_the_dot_products_for_every_case_input_and_mask_kind() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[5, 7], &[19, 23], 21);
    let len = 19 * 23;
    // (label, masks, mask array dtype, params, expected result dtype for real / complex input)
    let real4 = random_masks(4, len, false, 1);
    let one = random_masks(1, len, false, 2);
    let complex3 = random_masks(3, len, true, 3);
    #[allow(clippy::type_complexity)]
    let variants: Vec<(&str, &Vec<Vec<(f64, f64)>>, DType, Vec<(&str, ParamValue)>, DType, DType)> = vec![
        ("4 dense float32", &real4, DType::F32, vec![], DType::F32, DType::C64),
        (
            "4 sparse float32",
            &real4,
            DType::F32,
            vec![("use_sparse", ParamValue::Text("true".into()))],
            DType::F32,
            DType::C64,
        ),
        ("4 dense float64", &real4, DType::F64, vec![], DType::F64, DType::C128),
        (
            "float64 masks as float32",
            &real4,
            DType::F64,
            vec![("mask_dtype", ParamValue::Text("float32".into()))],
            DType::F32,
            DType::C64,
        ),
        ("1 dense", &one, DType::F32, vec![], DType::F32, DType::C64),
        ("3 complex", &complex3, DType::C64, vec![], DType::C64, DType::C64),
        (
            "3 complex sparse",
            &complex3,
            DType::C64,
            vec![("use_sparse", ParamValue::Text("true".into()))],
            DType::C64,
            DType::C64,
        ),
    ];
    for input in [Input::F32, Input::U16, Input::C64] {
        let f = Fixture::write(dir.path(), input, &data, 21);
        for (label, masks, dtype, extra, real_out, complex_out) in &variants {
            let mut p = vec![("masks", mask_param(masks, &f.sig, *dtype))];
            p.extend(extra.iter().cloned());
            let p = params(&p);
            let expected_dtype = if f.is_complex() { *complex_out } else { *real_out };
            // Rounding the masks to float32 (mask_dtype) is part of the definition.
            let masks_used: Vec<Vec<(f64, f64)>> =
                masks.iter().map(|m| m.iter().map(|&(r, i)| (r as f32 as f64, i as f32 as f64)).collect()).collect();
            for case in cases(f.frames(), &f.sig, &[3, 5, 7]) {
                let what = format!("{input:?}, {label}, {}", case.label);
                let results = f.run(vec![(builtin("masks"), p.clone())], &case);
                let b = results.udfs[0].buffer("intensity").expect("intensity");
                assert_eq!(b.data.shape(), &[5, 7, masks.len()], "{what}");
                assert_eq!(b.dtype(), expected_dtype, "{what}");
                let rtol = if expected_dtype == DType::F64 || expected_dtype == DType::C128 { 1e-9 } else { 1e-5 };
                let scale = scales(&f, &case, &masks_used);
                check_scaled(&b.data, &reference(&f, &case, &masks_used), Some(&scale), rtol, &what);
            }
        }
    }
}

#[test]
fn bad_masks_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let f = Fixture::write(dir.path(), Input::F32, &fixtures::mk_random(&[4], &[6, 5], 1), 1);
    let wrong = NdArray::from_vec(&[2, 5, 6], vec![0f32; 60]).unwrap();
    let p = params(&[("masks", ParamValue::Array(Arc::new(wrong)))]);
    let options = udf_host::exec::RunOptions::default();
    let err = udf_host_tests::run_on(&f.path, &Default::default(), vec![(builtin("masks"), p)], options).err().unwrap();
    let text = err.to_string();
    assert!(text.contains("'masks'") && text.contains("[2, 5, 6]") && text.contains("[6, 5]"), "{text}");
    assert!(err.is_user_error(), "{text}");
}

/// The detector masks, written from BUILTINS.md §13.
fn detector_mask(kind: &str, sy: usize, sx: usize, p: &[(&str, f64)]) -> Vec<(f64, f64)> {
    let get = |n: &str, d: f64| p.iter().find(|(k, _)| *k == n).map_or(d, |(_, v)| *v);
    let (cx, cy) = (get("cx", sx as f64 / 2.0), get("cy", sy as f64 / 2.0));
    (0..sy * sx)
        .map(|i| {
            let (y, x) = ((i / sx) as f64, (i % sx) as f64);
            let d2 = (y - cy).powi(2) + (x - cx).powi(2);
            let on = match kind {
                "disk" => d2 <= get("r", 0.0).powi(2),
                "ring" => get("ri", 0.0).powi(2) < d2 && d2 <= get("ro", 0.0).powi(2),
                "point" => y == cy.trunc() && x == cx.trunc(),
                _ => unreachable!(),
            };
            (if on { 1.0 } else { 0.0 }, 0.0)
        })
        .collect()
}

#[test]
fn disk_ring_and_point_match_their_masks() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[5, 7], &[19, 23], 31);
    let detectors: Vec<(&str, Vec<(&str, f64)>)> = vec![
        ("disk", vec![("r", 6.5)]),
        ("disk", vec![("cx", 3.0), ("cy", 15.25), ("r", 4.0)]),
        ("ring", vec![("ri", 3.0), ("ro", 8.0)]),
        ("ring", vec![("cx", 20.0), ("cy", 2.0), ("ri", 1.5), ("ro", 30.0)]),
        ("point", vec![]),
        ("point", vec![("cx", 22.9), ("cy", 0.5)]),
    ];
    for input in [Input::F32, Input::U16, Input::C64] {
        let f = Fixture::write(dir.path(), input, &data, 31);
        for (kind, values) in &detectors {
            let mask = detector_mask(kind, 19, 23, values);
            assert!(mask.iter().any(|m| m.0 != 0.0), "{kind} {values:?} selects something");
            let p: Vec<(&str, ParamValue)> = values.iter().map(|(k, v)| (*k, ParamValue::Float(*v))).collect();
            for case in cases(f.frames(), &f.sig, &[4, 6, 5]) {
                let what = format!("{input:?} {kind} {values:?}, {}", case.label);
                let results = f.run(vec![(builtin(kind), params(&p))], &case);
                let b = results.udfs[0].buffer("intensity").expect("intensity");
                assert_eq!(b.data.shape(), &[5, 7], "{what}");
                assert_eq!(b.dtype(), if f.is_complex() { DType::C64 } else { DType::F32 }, "{what}");
                check(&b.data, &reference(&f, &case, std::slice::from_ref(&mask)), 1e-5, &what);
            }
        }
    }
}

#[test]
fn a_point_outside_the_frame_is_a_bad_parameter() {
    let dir = tempfile::tempdir().unwrap();
    let f = Fixture::write(dir.path(), Input::F32, &fixtures::mk_random(&[4], &[6, 5], 1), 1);
    let p = params(&[("cx", ParamValue::Float(5.0)), ("cy", ParamValue::Float(1.0))]);
    let err = udf_host_tests::run_on(&f.path, &Default::default(), vec![(builtin("point"), p)], Default::default())
        .err()
        .unwrap();
    assert!(err.is_user_error() && err.to_string().contains("outside the frame"), "{err}");
}
