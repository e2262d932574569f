//! `radial-fourier` against its masks written out (BUILTINS.md §13): complex
//! coefficients, their absolute values and phases, and the dominant order.

use super::masks::check_scaled;
use super::{Fixture, Input, builtin, cases, nav_reference};
use udf_host::dtype::DType;
use udf_host::udf::ParamValue;
use udf_host_tests::fixtures;
use udf_host_tests::params;
use udf_host_tests::reference::{to_complex, to_f64};

/// The masks `(bins × orders, sy × sx)` as complex64 values.
#[allow(clippy::too_many_arguments)]
fn masks(sy: usize, sx: usize, cy: f64, cx: f64, ri: f64, ro: f64, bins: usize, orders: usize) -> Vec<Vec<(f64, f64)>> {
    let width = (ro - ri) / bins as f64;
    let mut out = Vec::new();
    for b in 0..bins {
        let r0 = ri + width * (b as f64 + 0.5);
        for o in 0..orders {
            out.push(
                (0..sy * sx)
                    .map(|p| {
                        let (dy, dx) = ((p / sx) as f64 - cy, (p % sx) as f64 - cx);
                        let r = (dy * dy + dx * dx).sqrt();
                        let profile = (width / 2.0 + 0.5 - (r - r0).abs()).clamp(0.0, 1.0);
                        let phi = o as f64 * dy.atan2(dx);
                        ((profile * phi.cos()) as f32 as f64, (profile * phi.sin()) as f32 as f64)
                    })
                    .collect(),
            );
        }
    }
    out
}

#[test]
fn radial_fourier_matches_its_masks() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[5, 7], &[19, 23], 81);
    let (bins, orders) = (2, 4);
    let m = masks(19, 23, 9.0, 11.5, 1.0, 9.0, bins, orders);
    let p = params(&[
        ("cx", ParamValue::Float(11.5)),
        ("cy", ParamValue::Float(9.0)),
        ("ri", ParamValue::Float(1.0)),
        ("ro", ParamValue::Float(9.0)),
        ("n_bins", ParamValue::Int(bins as i64)),
        ("max_order", ParamValue::Int(orders as i64 - 1)),
    ]);
    for input in [Input::F32, Input::U16, Input::C64] {
        let f = Fixture::write(dir.path(), input, &data, 81);
        let per_frame: Vec<Vec<(f64, f64)>> = (0..f.frames())
            .map(|i| {
                m.iter()
                    .map(|mask| {
                        let mut acc = (0.0, 0.0);
                        for ((&r, &im), &(mr, mi)) in f.frame(i).iter().zip(f.frame_im(i)).zip(mask) {
                            acc.0 += r * mr - im * mi;
                            acc.1 += r * mi + im * mr;
                        }
                        acc
                    })
                    .collect()
            })
            .collect();
        let scale_of = |i: usize| -> Vec<f64> {
            m.iter()
                .map(|mask| {
                    let frame = f.frame(i).iter().zip(f.frame_im(i));
                    frame.zip(mask).map(|((&r, &im), &(mr, mi))| r.hypot(im) * mr.hypot(mi)).sum()
                })
                .collect()
        };
        for case in cases(f.frames(), &f.sig, &[3, 5, 7]).into_iter().step_by(3) {
            let what = format!("{input:?}, {}", case.label);
            let results = f.run(vec![(builtin("radial-fourier"), p.clone())], &case);
            let r = &results.udfs[0];
            let width = bins * orders;
            let re = nav_reference(&case, f.frames(), width, |i| per_frame[i].iter().map(|c| c.0).collect());
            let im = nav_reference(&case, f.frames(), width, |i| per_frame[i].iter().map(|c| c.1).collect());
            let expected: Vec<(f64, f64)> = re.into_iter().zip(im).collect();
            let scale = nav_reference(&case, f.frames(), width, scale_of);

            let complex = r.buffer("complex").expect("complex");
            assert_eq!((complex.dtype(), complex.data.shape()), (DType::C64, &[5usize, 7, bins, orders][..]), "{what}");
            check_scaled(&complex.data, &expected, Some(&scale), 1e-5, &what);

            let absolute = to_f64(&r.buffer("absolute").unwrap().data);
            let phase = to_f64(&r.buffer("phase").unwrap().data);
            let polar: Vec<(f64, f64)> = absolute.iter().zip(&phase).map(|(a, p)| (a * p.cos(), a * p.sin())).collect();
            let as_complex = udf_host::array::NdArray::from_vec(
                &[polar.len()],
                polar.iter().map(|&(a, b)| num_complex::Complex64::new(a, b)).collect::<Vec<_>>(),
            )
            .unwrap();
            check_scaled(&as_complex, &to_complex(&complex.data), Some(&scale), 1e-6, &format!("polar {what}"));

            let dominant = to_f64(&r.buffer("dominant").unwrap().data);
            for (k, chunk) in expected.chunks(orders).enumerate() {
                let i = k / bins;
                if !case.selected(i) {
                    continue;
                }
                let abs: Vec<f64> = chunk.iter().map(|c| c.0.hypot(c.1)).collect();
                let mut sorted: Vec<(usize, f64)> = abs.iter().copied().enumerate().skip(1).collect();
                sorted.sort_by(|a, b| b.1.total_cmp(&a.1));
                // Only where the winner is clear of float32 rounding.
                if sorted.len() > 1 && sorted[0].1 - sorted[1].1 > 1e-3 * (1.0 + sorted[0].1) {
                    assert_eq!(dominant[k], sorted[0].0 as f64, "{what}: dominant order of bin {}", k % bins);
                }
            }
        }
    }
}
