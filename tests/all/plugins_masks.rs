//! `masks` (LiberTEM's ApplyMasksUDF) against explicit per-frame dot products, across
//! partitionings, tile shapes, ROIs, input dtypes, mask counts and dtypes (the
//! `result_type` rule and `mask_dtype`), dense vs sparse, and complex masks.

use std::sync::Arc;
use udf_host::array::NdArray;
use udf_host::dataset::OpenOptions;
use udf_host::dtype::DType;
use udf_host::exec::{ResultBuffer, RunOptions};
use udf_host::roi::Roi;
use udf_host::udf::{ParamValue, Params, Udf};
use udf_host_tests::fixtures::{self, Data, Ty};
use udf_host_tests::reference::{to_complex, to_f64};
use udf_host_tests::{load, params, run_on};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const NAV: [usize; 2] = [5, 7];
const SIG: [usize; 2] = [19, 23];
const PX: usize = SIG[0] * SIG[1];

/// A stack of masks as `(re, im)` values in C order `(count, *SIG)`.
#[derive(Clone)]
struct MaskStack {
    count: usize,
    values: Vec<(f64, f64)>,
}

impl MaskStack {
    fn mask(&self, m: usize) -> &[(f64, f64)] {
        &self.values[m * PX..(m + 1) * PX]
    }

    /// The values as stored in `dtype` (float32/complex64 parts rounded).
    fn rounded(&self, dtype: DType) -> MaskStack {
        let narrow = matches!(dtype, DType::F32 | DType::C64);
        let r = |x: f64| if narrow { f64::from(x as f32) } else { x };
        MaskStack { count: self.count, values: self.values.iter().map(|&(a, b)| (r(a), r(b))).collect() }
    }

    /// The `masks` param: shape `(count, *SIG)`, or `SIG` alone when `single`.
    fn param(&self, dtype: DType, single: bool) -> ParamValue {
        let mut shape = vec![self.count];
        shape.extend(SIG);
        if single {
            assert_eq!(self.count, 1);
            shape.remove(0);
        }
        let re = self.values.iter().map(|v| v.0);
        let array = match dtype {
            DType::F32 => NdArray::from_vec(&shape, re.map(|x| x as f32).collect()),
            DType::F64 => NdArray::from_vec(&shape, re.collect()),
            DType::U8 => NdArray::from_vec(&shape, re.map(|x| x as u8).collect()),
            DType::I32 => NdArray::from_vec(&shape, re.map(|x| x as i32).collect()),
            DType::C64 => NdArray::from_vec(
                &shape,
                self.values.iter().map(|&(a, b)| num_complex::Complex32::new(a as f32, b as f32)).collect(),
            ),
            DType::C128 => {
                NdArray::from_vec(&shape, self.values.iter().map(|&(a, b)| num_complex::Complex64::new(a, b)).collect())
            }
            other => panic!("no mask fixture of {other}"),
        };
        ParamValue::Array(Arc::new(array.unwrap()))
    }
}

/// Dense random masks with values in [0, 1).
fn dense_masks(count: usize, seed: u64) -> MaskStack {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    MaskStack { count, values: (0..count * PX).map(|_| (rng.random_range(0.0..1.0), 0.0)).collect() }
}

/// Sparse masks: disks of radius 2 around random centres, values 1 (≈ 3 % non-zero).
fn disk_masks(count: usize, seed: u64) -> MaskStack {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut values = vec![(0.0, 0.0); count * PX];
    for m in 0..count {
        let (cy, cx) = (rng.random_range(0..SIG[0]) as f64, rng.random_range(0..SIG[1]) as f64);
        for y in 0..SIG[0] {
            for x in 0..SIG[1] {
                if (y as f64 - cy).powi(2) + (x as f64 - cx).powi(2) <= 4.0 {
                    values[m * PX + y * SIG[1] + x] = (1.0, 0.0);
                }
            }
        }
    }
    MaskStack { count, values }
}

/// Complex masks `w(r) · exp(i·o·φ)` like LiberTEM's radial Fourier analysis (orders 0..count).
fn fourier_masks(count: usize) -> MaskStack {
    let (cy, cx) = (9.0, 11.0);
    let mut values = Vec::with_capacity(count * PX);
    for order in 0..count {
        for y in 0..SIG[0] {
            for x in 0..SIG[1] {
                let (dy, dx) = (y as f64 - cy, x as f64 - cx);
                let w = if dy.hypot(dx) <= 8.0 { 1.0 } else { 0.0 };
                let phi = dy.atan2(dx) * order as f64;
                values.push((w * phi.cos(), w * phi.sin()));
            }
        }
    }
    MaskStack { count, values }
}

/// One masks UDF of a run and what it must produce.
struct Case {
    name: &'static str,
    params: Params,
    masks: MaskStack,
    /// Expected `intensity` dtype (for float32 input).
    dtype: DType,
}

/// A case whose `masks` param is 2-d for a single mask, else `(count, *SIG)`.
fn case(name: &'static str, masks: &MaskStack, mask_dtype: DType, extra: &[(&str, &str)], dtype: DType) -> Case {
    case_shaped(name, masks, mask_dtype, masks.count == 1, extra, dtype)
}

fn case_shaped(
    name: &'static str,
    masks: &MaskStack,
    mask_dtype: DType,
    single: bool,
    extra: &[(&str, &str)],
    dtype: DType,
) -> Case {
    let mut pairs = vec![("masks", masks.param(mask_dtype, single))];
    pairs.extend(extra.iter().map(|&(k, v)| (k, ParamValue::Text(v.into()))));
    let cast = extra.iter().find(|(k, _)| *k == "mask_dtype").map_or(mask_dtype, |(_, v)| DType::parse(v).unwrap());
    Case { name, params: params(&pairs), masks: masks.rounded(mask_dtype).rounded(cast), dtype }
}

/// Every case runs as one UDF of the same pass.
fn cases() -> Vec<Case> {
    let one = dense_masks(1, 21);
    let four = dense_masks(4, 22);
    let disks = disk_masks(4, 23);
    let fourier = fourier_masks(4);
    vec![
        case("1 float32 mask (a 2-d array), dense", &one, DType::F32, &[("use_sparse", "false")], DType::F32),
        case("1 float32 mask (a 2-d array), sparse", &one, DType::F32, &[("use_sparse", "true")], DType::F32),
        case_shaped("1 float64 mask as a (1, 19, 23) stack", &one, DType::F64, false, &[], DType::F64),
        case("4 float64 masks, dense", &four, DType::F64, &[("use_sparse", "false")], DType::F64),
        case("4 float64 masks, sparse", &four, DType::F64, &[("use_sparse", "true")], DType::F64),
        case("4 float64 masks, mask_dtype float32", &four, DType::F64, &[("mask_dtype", "float32")], DType::F32),
        case("4 disk masks float32, auto (sparse)", &disks, DType::F32, &[], DType::F32),
        case("4 disk masks float32, dense", &disks, DType::F32, &[("use_sparse", "false")], DType::F32),
        case("4 disk masks uint8", &disks, DType::U8, &[], DType::F32),
        case("4 disk masks int32", &disks, DType::I32, &[], DType::F64),
        case("4 complex64 masks, dense", &fourier, DType::C64, &[("use_sparse", "false")], DType::C64),
        case("4 complex64 masks, sparse", &fourier, DType::C64, &[("use_sparse", "true")], DType::C64),
        case("4 complex128 masks, auto", &fourier, DType::C128, &[], DType::C128),
        case("4 float32 masks, mask_dtype complex128", &four, DType::F32, &[("mask_dtype", "complex128")], DType::C128),
    ]
}

/// `intensity[n, m] = Σ_p F_n[p] · mask_m[p]` per selected frame (re, im), and the scale
/// `Σ_p |F_n[p] · mask_m[p]|` that bounds the rounding error of any summation order.
fn reference(data: &Data, masks: &MaskStack, frames: &[usize]) -> Vec<((f64, f64), f64)> {
    let mut out = Vec::new();
    for &n in frames {
        for m in 0..masks.count {
            let (mut re, mut im, mut scale) = (0.0, 0.0, 0.0);
            for (&x, &(a, b)) in data.frame(n).iter().zip(masks.mask(m)) {
                re += x * a;
                im += x * b;
                scale += (x * a).hypot(x * b);
            }
            out.push(((re, im), scale));
        }
    }
    out
}

/// `(re, im)` of every element of a real or complex array.
fn parts(array: &NdArray) -> Vec<(f64, f64)> {
    match array.dtype() {
        DType::C64 | DType::C128 => to_complex(array),
        _ => to_f64(array).into_iter().map(|x| (x, 0.0)).collect(),
    }
}

/// Check a run's `intensity` against the reference: raw (compressed) values within
/// `rtol` of the error scale, `.data` with NaN at every position outside the ROI.
#[track_caller]
fn check(buffer: &ResultBuffer, expected: &[((f64, f64), f64)], count: usize, roi: Option<&[bool]>, what: &str) {
    let frames = roi.map_or(NAV[0] * NAV[1], |r| r.iter().filter(|&&b| b).count());
    assert_eq!(buffer.raw.shape(), &[frames, count], "{what}: raw shape");
    assert_eq!(buffer.data.shape(), &[NAV[0], NAV[1], count], "{what}: data shape");
    let got = parts(&buffer.raw);
    for (i, (&(g_re, g_im), &((e_re, e_im), scale))) in got.iter().zip(expected).enumerate() {
        let tol = 1e-8 + 1e-5 * scale;
        assert!(
            (g_re - e_re).abs() <= tol && (g_im - e_im).abs() <= tol,
            "{what}: frame {} mask {}: got ({g_re}, {g_im}), expected ({e_re}, {e_im}) ± {tol}",
            i / count.max(1),
            i % count.max(1)
        );
    }
    let data = parts(&buffer.data);
    let complex = matches!(buffer.dtype(), DType::C64 | DType::C128);
    let mut compressed = 0;
    for position in 0..NAV[0] * NAV[1] {
        let row = &data[position * count..(position + 1) * count];
        if roi.is_none_or(|r| r[position]) {
            assert_eq!(row, &got[compressed * count..(compressed + 1) * count], "{what}: .data at {position}");
            compressed += 1;
        } else {
            let nan = row.iter().all(|v| v.0.is_nan() && (!complex || v.1.is_nan()));
            assert!(nan, "{what}: .data at {position} outside the ROI is not NaN");
        }
    }
}

fn rois(frames: usize) -> Vec<(&'static str, Option<Vec<bool>>)> {
    let mut single = vec![false; frames];
    single[frames - 3] = true;
    vec![
        ("no roi", None),
        ("random roi", Some(fixtures::random_roi(frames, 0.5, 31))),
        ("all-false roi", Some(vec![false; frames])),
        ("single-frame roi", Some(single)),
    ]
}

#[test]
fn masks_match_explicit_dot_products_for_every_partitioning_tiling_roi_and_mask_kind() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&NAV, &SIG, 20);
    let cases = cases();
    let udf = load("masks");
    for ty in [Ty::F32, Ty::U16] {
        let path = dir.path().join(format!("data-{ty:?}.npy"));
        fixtures::write_npy(&path, &data, ty);
        let stored = data.rounded(ty);
        for (roi_name, roi) in rois(data.frames()) {
            let frames: Vec<usize> = (0..data.frames()).filter(|&i| roi.as_ref().is_none_or(|r| r[i])).collect();
            let expected: Vec<_> = cases.iter().map(|c| reference(&stored, &c.masks, &frames)).collect();
            for partitions in [1, 2, 3, 7] {
                for tile in [None, Some(vec![3, 5, 7]), Some(vec![4, 19, 4]), Some(vec![64, 19, 23])] {
                    let what = format!("{ty:?} {roi_name} partitions={partitions} tile={tile:?}");
                    let options = RunOptions {
                        roi: roi.clone().map(Roi::from_mask),
                        partitions: Some(partitions),
                        tile_shape: tile,
                        ..RunOptions::default()
                    };
                    let udfs: Vec<(Arc<dyn Udf>, Params)> =
                        cases.iter().map(|c| (udf.clone(), c.params.clone())).collect();
                    let results =
                        run_on(&path, &OpenOptions::default(), udfs, options).unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(results.input_dtype, DType::F32, "{what}");
                    for ((c, result), expected) in cases.iter().zip(&results.udfs).zip(&expected) {
                        let what = format!("{what}, {}", c.name);
                        let buffer = result.buffer("intensity").expect("intensity");
                        assert_eq!(buffer.dtype(), c.dtype, "{what}: dtype");
                        check(buffer, expected, c.masks.count, roi.as_deref(), &what);
                    }
                }
            }
        }
    }
}

#[test]
fn masks_take_8_and_16_bit_tiles_natively_with_float32_masks() {
    // Float32 masks on uint8/uint16 data: the plugin asks for the native tiles and its
    // SIMD kernel converts them as it reads (the same values as float32 tiles).
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&NAV, &SIG, 27);
    let (one, four, disks) = (dense_masks(1, 28), dense_masks(4, 29), disk_masks(5, 30));
    // 17: two vectors of masks per register block (AVX-512) and a masked tail.
    let seventeen = dense_masks(17, 31);
    let cases = [
        case("1 float32 mask", &one, DType::F32, &[], DType::F32),
        case("4 float32 masks, dense", &four, DType::F32, &[("use_sparse", "false")], DType::F32),
        case("17 float32 masks, dense", &seventeen, DType::F32, &[("use_sparse", "false")], DType::F32),
        case("5 float32 disk masks, sparse", &disks, DType::F32, &[], DType::F32),
        case("4 float64 masks, mask_dtype float32", &four, DType::F64, &[("mask_dtype", "float32")], DType::F32),
    ];
    let udf = load("masks");
    let frames: Vec<usize> = (0..data.frames()).collect();
    for (ty, dtype) in [(Ty::U16, DType::U16), (Ty::U8, DType::U8)] {
        let path = dir.path().join(format!("data-{ty:?}.npy"));
        fixtures::write_npy(&path, &data, ty);
        let stored = data.rounded(ty);
        for partitions in [1, 3] {
            for tile in [None, Some(vec![3, 5, 7]), Some(vec![64, 19, 23])] {
                let what = format!("{ty:?} partitions={partitions} tile={tile:?}");
                let options = RunOptions { partitions: Some(partitions), tile_shape: tile, ..RunOptions::default() };
                let udfs: Vec<(Arc<dyn Udf>, Params)> = cases.iter().map(|c| (udf.clone(), c.params.clone())).collect();
                let results =
                    run_on(&path, &OpenOptions::default(), udfs, options).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(results.input_dtype, dtype, "{what}: the tiles stay {dtype:?}");
                for (c, result) in cases.iter().zip(&results.udfs) {
                    let buffer = result.buffer("intensity").expect("intensity");
                    assert_eq!(buffer.dtype(), DType::F32, "{what}, {}", c.name);
                    let expected = reference(&stored, &c.masks, &frames);
                    check(buffer, &expected, c.masks.count, None, &format!("{what}, {}", c.name));
                }
            }
        }
        // With float64 masks in the same pass, the run reads float32 tiles instead.
        let mixed = vec![
            (udf.clone(), cases[1].params.clone()),
            (udf.clone(), case("float64", &four, DType::F64, &[], DType::F64).params),
        ];
        let results = run_on(&path, &OpenOptions::default(), mixed, RunOptions::default()).unwrap();
        assert_eq!(results.input_dtype, DType::F32, "{ty:?}: float64 masks in the run");
        let buffer = results.udfs[0].buffer("intensity").unwrap();
        check(buffer, &reference(&stored, &cases[1].masks, &frames), 4, None, &format!("{ty:?} mixed"));
    }
}

#[test]
fn masks_follow_the_input_dtype_and_preferred_dtype() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_uniform(&NAV, &SIG, 24);
    let path = dir.path().join("f64.npy");
    fixtures::write_npy(&path, &data, Ty::F64);
    let four = dense_masks(4, 25);
    let frames: Vec<usize> = (0..data.frames()).collect();
    // float64 data + float32 masks → float64 (the data widens the result).
    let c = case("float64 data", &four, DType::F32, &[], DType::F64);
    let results =
        run_on(&path, &OpenOptions::default(), vec![(load("masks"), c.params)], RunOptions::default()).unwrap();
    assert_eq!(results.input_dtype, DType::F64);
    let buffer = results.udfs[0].buffer("intensity").unwrap();
    assert_eq!(buffer.dtype(), DType::F64);
    check(buffer, &reference(&data, &c.masks, &frames), 4, None, "float64 data");
    // preferred_dtype complex64 on float32 data: complex64 tiles and result.
    let path = dir.path().join("f32.npy");
    fixtures::write_npy(&path, &data, Ty::F32);
    let c = case("complex input", &four, DType::F32, &[("preferred_dtype", "complex64")], DType::C64);
    let results =
        run_on(&path, &OpenOptions::default(), vec![(load("masks"), c.params)], RunOptions::default()).unwrap();
    assert_eq!(results.input_dtype, DType::C64);
    let buffer = results.udfs[0].buffer("intensity").unwrap();
    assert_eq!(buffer.dtype(), DType::C64);
    check(buffer, &reference(&data.rounded(Ty::F32), &c.masks, &frames), 4, None, "complex64 input");
}

#[test]
fn masks_with_complex_data_and_complex_masks_multiply_without_conjugation() {
    let dir = tempfile::tempdir().unwrap();
    let cdata = fixtures::mk_complex(&NAV, &SIG, 26);
    let fourier = fourier_masks(3);
    for double in [false, true] {
        let path = dir.path().join(format!("c-{double}.npy"));
        fixtures::write_npy_complex(&path, &cdata, double);
        let stored = if double { cdata.clone() } else { cdata.rounded_c64() };
        for (mask_dtype, sparse) in [(DType::C64, "false"), (DType::C64, "true"), (DType::C128, "false")] {
            let c = case("complex", &fourier, mask_dtype, &[("use_sparse", sparse)], DType::C128);
            let what = format!("data complex128={double}, masks {mask_dtype} sparse={sparse}");
            for partitions in [1, 3] {
                let options =
                    RunOptions { partitions: Some(partitions), tile_shape: Some(vec![3, 5, 7]), ..Default::default() };
                let results =
                    run_on(&path, &OpenOptions::default(), vec![(load("masks"), c.params.clone())], options).unwrap();
                let buffer = results.udfs[0].buffer("intensity").unwrap();
                let expected_dtype = if double || mask_dtype == DType::C128 { DType::C128 } else { DType::C64 };
                assert_eq!(buffer.dtype(), expected_dtype, "{what}");
                // (a + ib)(c + id) = (ac − bd) + i(ad + bc)
                let mut expected = Vec::new();
                for n in 0..stored.frames() {
                    for m in 0..c.masks.count {
                        let (mut re, mut im, mut scale) = (0.0, 0.0, 0.0);
                        for (&(a, b), &(mc, md)) in stored.frame(n).iter().zip(c.masks.mask(m)) {
                            re += a * mc - b * md;
                            im += a * md + b * mc;
                            scale += a.hypot(b) * mc.hypot(md);
                        }
                        expected.push(((re, im), scale));
                    }
                }
                check(buffer, &expected, c.masks.count, None, &what);
            }
        }
    }
}

#[test]
fn masks_reject_bad_params_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_uniform(&NAV, &SIG, 27);
    let path = dir.path().join("d.npy");
    fixtures::write_npy(&path, &data, Ty::F32);
    let four = dense_masks(4, 28);
    let wrong_shape = ParamValue::Array(Arc::new(NdArray::from_vec(&[4, 23, 19], vec![0.5f32; 4 * PX]).unwrap()));
    let cases: Vec<(Vec<(&str, ParamValue)>, &str)> = vec![
        (vec![("masks", wrong_shape)], "expected (M, [19, 23])"),
        (
            vec![
                ("masks", fourier_masks(2).param(DType::C64, false)),
                ("mask_dtype", ParamValue::Text("float32".into())),
            ],
            "imaginary part",
        ),
        (
            vec![("masks", four.param(DType::F32, false)), ("use_sparse", ParamValue::Text("maybe".into()))],
            "use_sparse",
        ),
        (
            vec![("masks", four.param(DType::F32, false)), ("mask_dtype", ParamValue::Text("int16".into()))],
            "mask_dtype",
        ),
        (
            vec![("masks", four.param(DType::F32, false)), ("preferred_dtype", ParamValue::Text("uint8".into()))],
            "preferred_dtype",
        ),
    ];
    for (pairs, needle) in cases {
        let err = run_on(&path, &OpenOptions::default(), vec![(load("masks"), params(&pairs))], RunOptions::default())
            .err()
            .unwrap_or_else(|| panic!("{needle}: must fail"));
        assert!(err.is_user_error(), "{needle}: {err}");
        assert!(err.to_string().contains(needle), "expected '{needle}' in: {err}");
    }
    // The masks param is required.
    let err = run_on(&path, &OpenOptions::default(), vec![(load("masks"), Params::default())], RunOptions::default())
        .expect_err("no masks must fail");
    assert!(err.to_string().contains("masks"), "{err}");
}
