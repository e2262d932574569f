//! `stddev` (LiberTEM's StdDevUDF) against a two-pass float64 reference (`np.var(ddof=0)`
//! style: the mean first, then `Σ (x − mean)²`), across partitionings, tile shapes, ROIs,
//! input dtypes, base dtypes and complex data; its merge in isolation; and LiberTEM's
//! numerical-stability case (1024 partitions × 1024 tiles × 8 float32 frames).

use std::sync::Arc;
use udf_host::array::NdArray;
use udf_host::dataset::{OpenOptions, TilingScheme};
use udf_host::dtype::DType;
use udf_host::exec::{RunOptions, UdfResults};
use udf_host::roi::Roi;
use udf_host::udf::{
    BufferViewMut, CallError, DatasetMeta, DeviceClass, ErrorKind, MergeContext, Method, NamedBuffer, ParamValue,
    Params, PartitionMeta,
};
use udf_host_tests::fixtures::{self, ComplexData, Data, Ty};
use udf_host_tests::reference::{assert_close, to_complex, to_f64};
use udf_host_tests::{load, params, run_on};

/// Per-pixel moments of the selected frames, computed in two passes in float64.
struct Expected {
    n: usize,
    sum: Vec<f64>,
    varsum: Vec<f64>,
}

impl Expected {
    /// `var = varsum / n` (NaN for n = 0, as NumPy's 0/0).
    fn var(&self) -> Vec<f64> {
        self.varsum.iter().map(|v| v / self.n as f64).collect()
    }

    fn std(&self) -> Vec<f64> {
        self.var().iter().map(|v| v.sqrt()).collect()
    }

    fn mean(&self) -> Vec<f64> {
        self.sum.iter().map(|s| s / self.n as f64).collect()
    }
}

fn selected(frames: usize, roi: Option<&[bool]>) -> Vec<usize> {
    (0..frames).filter(|&i| roi.is_none_or(|r| r[i])).collect()
}

fn two_pass(data: &Data, roi: Option<&[bool]>) -> Expected {
    let frames = selected(data.frames(), roi);
    let mut sum = vec![0.0; data.frame_len()];
    for &i in &frames {
        for (s, x) in sum.iter_mut().zip(data.frame(i)) {
            *s += x;
        }
    }
    let mean: Vec<f64> = sum.iter().map(|s| s / frames.len() as f64).collect();
    let mut varsum = vec![0.0; data.frame_len()];
    for &i in &frames {
        for ((v, m), x) in varsum.iter_mut().zip(&mean).zip(data.frame(i)) {
            *v += (x - m) * (x - m);
        }
    }
    Expected { n: frames.len(), sum, varsum }
}

/// Complex moments: `sum` of re and im separately, `varsum = Σ |x − mean|²`.
fn two_pass_complex(data: &ComplexData, roi: Option<&[bool]>) -> (Expected, Expected) {
    let frames = selected(data.frames(), roi);
    let px = data.frame_len();
    let (mut re, mut im) = (vec![0.0; px], vec![0.0; px]);
    for &i in &frames {
        for ((r, m), &(x, y)) in re.iter_mut().zip(im.iter_mut()).zip(data.frame(i)) {
            *r += x;
            *m += y;
        }
    }
    let n = frames.len() as f64;
    let mut varsum = vec![0.0; px];
    for &i in &frames {
        for (p, &(x, y)) in data.frame(i).iter().enumerate() {
            varsum[p] += (x - re[p] / n).powi(2) + (y - im[p] / n).powi(2);
        }
    }
    (Expected { n: frames.len(), sum: re, varsum }, Expected { n: frames.len(), sum: im, varsum: vec![] })
}

/// The ROIs every test runs with: none, random, all false, a single frame.
fn rois(frames: usize) -> Vec<(&'static str, Option<Vec<bool>>)> {
    let mut single = vec![false; frames];
    single[frames / 2] = true;
    vec![
        ("no roi", None),
        ("random roi", Some(fixtures::random_roi(frames, 0.5, 77))),
        ("all-false roi", Some(vec![false; frames])),
        ("single-frame roi", Some(single)),
    ]
}

/// Tile shapes on a 19 × 23 frame: odd slices that divide nothing, narrow columns, and
/// whole partitions of full frames.
const TILES: [Option<[usize; 3]>; 4] = [None, Some([3, 5, 7]), Some([4, 19, 4]), Some([64, 19, 23])];

fn options(roi: &Option<Vec<bool>>, partitions: usize, tile: Option<[usize; 3]>) -> RunOptions {
    RunOptions {
        roi: roi.clone().map(Roi::from_mask),
        partitions: Some(partitions),
        tile_shape: tile.map(|t| t.to_vec()),
        ..RunOptions::default()
    }
}

/// Check the real-valued results of one run against `expected`.
#[track_caller]
fn check_real(udf: &UdfResults, expected: &Expected, base: DType, sig: &[usize], rtol: f64, what: &str) {
    let num_frames = udf.buffer("num_frames").expect("num_frames");
    assert_eq!(num_frames.dtype(), DType::I64, "{what}: num_frames dtype");
    assert_eq!(num_frames.data.shape(), &[1], "{what}: num_frames is a single value");
    assert_eq!(num_frames.data.as_slice::<i64>().unwrap(), &[expected.n as i64], "{what}: num_frames");
    for (name, values) in [
        ("sum", expected.sum.clone()),
        ("varsum", expected.varsum.clone()),
        ("var", expected.var()),
        ("std", expected.std()),
        ("mean", expected.mean()),
    ] {
        let b = udf.buffer(name).unwrap_or_else(|| panic!("{what}: no buffer {name}"));
        assert_eq!(b.dtype(), base, "{what}: {name} dtype");
        assert_eq!(b.data.shape(), sig, "{what}: {name} shape");
        assert!(b.all_valid, "{what}: {name} is a sig buffer, all valid");
        assert_close(&to_f64(&b.data), &values, rtol, &format!("{what}: {name}"));
    }
}

#[test]
fn stddev_matches_the_two_pass_reference_for_every_partitioning_tiling_and_roi() {
    let dir = tempfile::tempdir().unwrap();
    // 35 frames of 19 x 23, values 0/1 with two outliers (LiberTEM's _mk_random).
    let data = fixtures::mk_random(&[5, 7], &[19, 23], 11);
    let stddev = load("stddev");
    for ty in [Ty::F32, Ty::U16] {
        let path = dir.path().join(format!("data-{ty:?}.npy"));
        fixtures::write_npy(&path, &data, ty);
        let stored = data.rounded(ty);
        for (roi_name, roi) in rois(data.frames()) {
            let expected = two_pass(&stored, roi.as_deref());
            for partitions in [1, 2, 3, 7] {
                for tile in TILES {
                    let what = format!("{ty:?} {roi_name} partitions={partitions} tile={tile:?}");
                    let results = run_on(
                        &path,
                        &OpenOptions::default(),
                        vec![(stddev.clone(), Params::default())],
                        options(&roi, partitions, tile),
                    )
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(results.input_dtype, DType::F32, "{what}: float32 preferred");
                    // Base float64: every step is float64, so far tighter than rtol 1e-5.
                    check_real(&results.udfs[0], &expected, DType::F64, &[19, 23], 1e-9, &what);
                }
            }
        }
    }
}

#[test]
fn stddev_with_float32_base_keeps_float32_buffers_within_rtol_1e5() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_uniform(&[6, 9], &[11, 13], 12);
    let path = dir.path().join("uniform.npy");
    fixtures::write_npy(&path, &data, Ty::F32);
    let stored = data.rounded(Ty::F32);
    let p = params(&[("dtype", ParamValue::Text("float32".into()))]);
    for (roi_name, roi) in rois(data.frames()) {
        let expected = two_pass(&stored, roi.as_deref());
        for partitions in [1, 2, 3, 7] {
            for tile in [None, Some([5, 3, 4]), Some([1, 11, 13]), Some([100, 11, 13])] {
                let what = format!("float32 base {roi_name} partitions={partitions} tile={tile:?}");
                let results = run_on(
                    &path,
                    &OpenOptions::default(),
                    vec![(load("stddev"), p.clone())],
                    options(&roi, partitions, tile),
                )
                .unwrap_or_else(|e| panic!("{what}: {e}"));
                check_real(&results.udfs[0], &expected, DType::F32, &[11, 13], 1e-5, &what);
            }
        }
    }
}

#[test]
fn stddev_buffer_dtypes_follow_result_type_of_input_and_base() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_uniform(&[10], &[4, 5], 13);
    let f64_path = dir.path().join("f64.npy");
    fixtures::write_npy(&f64_path, &data, Ty::F64);
    let cdata = fixtures::mk_complex(&[10], &[4, 5], 14);
    let c64_path = dir.path().join("c64.npy");
    fixtures::write_npy_complex(&c64_path, &cdata, false);
    // (file, dtype param, varsum/var/std dtype, sum/mean dtype), BUILTINS.md §3.
    let cases = [
        (&f64_path, "float64", DType::F64, DType::F64),
        (&f64_path, "float32", DType::F32, DType::F64),
        (&c64_path, "float64", DType::F64, DType::C128),
        (&c64_path, "float32", DType::F32, DType::C64),
    ];
    for (path, base, real, sum) in cases {
        let p = params(&[("dtype", ParamValue::Text(base.into()))]);
        let results = run_on(path, &OpenOptions::default(), vec![(load("stddev"), p)], RunOptions::default())
            .unwrap_or_else(|e| panic!("{base}: {e}"));
        let udf = &results.udfs[0];
        for (name, dtype) in
            [("varsum", real), ("var", real), ("std", real), ("sum", sum), ("mean", sum), ("num_frames", DType::I64)]
        {
            assert_eq!(udf.buffer(name).unwrap().dtype(), dtype, "{path:?} base {base}: {name}");
        }
    }
}

#[test]
fn stddev_of_complex_data_uses_the_modulus_for_the_variance() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_complex(&[4, 6], &[7, 9], 15);
    for double in [false, true] {
        let path = dir.path().join(format!("complex-{double}.npy"));
        fixtures::write_npy_complex(&path, &data, double);
        let stored = if double { data.clone() } else { data.rounded_c64() };
        // complex64 data is accumulated in complex128 (base float64) from float32 parts:
        // float64 accuracy either way.
        for (roi_name, roi) in rois(data.frames()) {
            let (re, im) = two_pass_complex(&stored, roi.as_deref());
            for partitions in [1, 3, 7] {
                for tile in [None, Some([5, 3, 4]), Some([30, 7, 9])] {
                    let what = format!("complex double={double} {roi_name} partitions={partitions} tile={tile:?}");
                    let results = run_on(
                        &path,
                        &OpenOptions::default(),
                        vec![(load("stddev"), Params::default())],
                        options(&roi, partitions, tile),
                    )
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                    let udf = &results.udfs[0];
                    assert_eq!(udf.buffer("num_frames").unwrap().data.as_slice::<i64>().unwrap(), &[re.n as i64]);
                    for name in ["varsum", "var", "std"] {
                        assert_eq!(udf.buffer(name).unwrap().dtype(), DType::F64, "{what}: {name}");
                    }
                    assert_close(&to_f64(&udf.buffer("varsum").unwrap().data), &re.varsum, 1e-9, &what);
                    assert_close(&to_f64(&udf.buffer("var").unwrap().data), &re.var(), 1e-9, &what);
                    assert_close(&to_f64(&udf.buffer("std").unwrap().data), &re.std(), 1e-9, &what);
                    for (name, parts) in [("sum", (re.sum.clone(), im.sum.clone())), ("mean", (re.mean(), im.mean()))] {
                        let b = udf.buffer(name).unwrap();
                        assert_eq!(b.dtype(), DType::C128, "{what}: {name}");
                        let (got_re, got_im): (Vec<f64>, Vec<f64>) = to_complex(&b.data).into_iter().unzip();
                        assert_close(&got_re, &parts.0, 1e-9, &format!("{what}: {name}.re"));
                        assert_close(&got_im, &parts.1, 1e-9, &format!("{what}: {name}.im"));
                    }
                }
            }
        }
    }
}

#[test]
fn stddev_rejects_a_non_float_base_dtype() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_uniform(&[4], &[3, 3], 16);
    let path = dir.path().join("d.npy");
    fixtures::write_npy(&path, &data, Ty::F32);
    for bad in ["int32", "complex64", "float33"] {
        let p = params(&[("dtype", ParamValue::Text(bad.into()))]);
        let err = run_on(&path, &OpenOptions::default(), vec![(load("stddev"), p)], RunOptions::default())
            .err()
            .unwrap_or_else(|| panic!("dtype={bad} must fail"));
        assert!(err.is_user_error(), "dtype={bad}: {err}");
        assert!(err.to_string().contains("float32 or float64"), "dtype={bad}: {err}");
    }
}

/// Buffers `(varsum, num_frames, sum)` of one side of a merge, base float64.
fn state(n: i64, sum: &[f64], varsum: &[f64]) -> Vec<NamedBuffer> {
    let px = sum.len();
    vec![
        NamedBuffer { name: "varsum".into(), array: NdArray::from_vec(&[px], varsum.to_vec()).unwrap() },
        NamedBuffer { name: "num_frames".into(), array: NdArray::from_vec(&[1], vec![n]).unwrap() },
        NamedBuffer { name: "sum".into(), array: NdArray::from_vec(&[px], sum.to_vec()).unwrap() },
    ]
}

/// Call the plugin's merge directly: `dest` (updated in place) and `src`.
fn merge(dest: &mut [NamedBuffer], src: &[NamedBuffer]) -> Result<(), CallError> {
    let stddev = load("stddev");
    let p = params(&[("dtype", ParamValue::Text("float64".into()))]);
    let dataset = DatasetMeta {
        nav_shape: vec![8],
        sig_shape: vec![dest[0].array.len()],
        dataset_dtype: DType::F32,
        input_dtype: DType::F32,
        roi_count: None,
        device_class: DeviceClass::Cpu,
        threads_per_worker: 1,
    };
    let tiling = Arc::new(TilingScheme::from_tile_shape(8, &dataset.sig_shape, &dataset.sig_shape, Method::Tile));
    let partition = PartitionMeta { index: 0, origin: 0, frames: 8, method: Method::Tile, tiling };
    let ctx = MergeContext { params: &p, dataset: &dataset, partition: &partition, valid_nav_mask: &[] };
    let mut views: Vec<BufferViewMut<'_>> = dest
        .iter_mut()
        .map(|b| BufferViewMut {
            name: &b.name,
            dtype: b.array.dtype(),
            shape: b.array.shape().to_vec(),
            bytes: b.array.bytes_mut(),
        })
        .collect();
    stddev.merge(ctx, &mut views, src)
}

fn values(buffers: &[NamedBuffer], name: &str) -> Vec<f64> {
    to_f64(&buffers.iter().find(|b| b.name == name).unwrap().array)
}

#[test]
fn stddev_merge_handles_empty_sides_and_matches_the_pooled_moments() {
    // Two groups of one pixel: {1, 2, 3} and {10, 20}.
    let (a, b) = ([1.0, 2.0, 3.0], [10.0, 20.0]);
    let moments = |xs: &[f64]| {
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        (xs.iter().sum::<f64>(), xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>())
    };
    let ((sa, va), (sb, vb)) = (moments(&a), moments(&b));
    let (s_all, v_all) = moments(&[1.0, 2.0, 3.0, 10.0, 20.0]);

    // n0 == 0: dest takes src.
    let mut dest = state(0, &[0.0], &[0.0]);
    merge(&mut dest, &state(3, &[sa], &[va])).unwrap();
    assert_eq!(values(&dest, "num_frames"), [3.0]);
    assert_eq!(values(&dest, "sum"), [sa]);
    assert_eq!(values(&dest, "varsum"), [va]);
    // n1 == 0: unchanged.
    merge(&mut dest, &state(0, &[123.0], &[456.0])).unwrap();
    assert_eq!(values(&dest, "num_frames"), [3.0]);
    assert_eq!(values(&dest, "sum"), [sa]);
    assert_eq!(values(&dest, "varsum"), [va]);
    // Both orders give the pooled moments.
    merge(&mut dest, &state(2, &[sb], &[vb])).unwrap();
    let mut other = state(2, &[sb], &[vb]);
    merge(&mut other, &state(3, &[sa], &[va])).unwrap();
    for d in [&dest, &other] {
        assert_eq!(values(d, "num_frames"), [5.0]);
        assert_close(&values(d, "sum"), &[s_all], 1e-12, "merged sum");
        assert_close(&values(d, "varsum"), &[v_all], 1e-12, "merged varsum");
    }
    // A negative count from the host is rejected, not trusted.
    let mut dest = state(-1, &[0.0], &[0.0]);
    match merge(&mut dest, &state(1, &[1.0], &[0.0])) {
        Err(CallError::Returned { kind: ErrorKind::InvalidData, message }) => {
            assert!(message.contains("negative"), "{message}")
        }
        other => panic!("expected invalid-data, got {other:?}"),
    }
}

/// LiberTEM's `test_stability` (1024 partitions × 1024 tiles × 8 frames of float32) at
/// `partitions × tiles × 8` frames of 1 × 2 pixels with a large mean (1000 and 1500 plus
/// uniform noise, so the naive `Σx² − (Σx)²/n` would lose every digit in float32). The
/// float64 and the float32 base run in the same pass and must match a float64 two-pass
/// reference: rtol 1e-9 and 1e-5.
fn check_stability(partitions: usize, tiles_per_partition: usize) {
    const DEPTH: usize = 8;
    let frames = partitions * tiles_per_partition * DEPTH;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stability.npy");
    let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(17);
    let values: Vec<f32> =
        (0..frames * 2).map(|i| 1000.0 + (i % 2) as f32 * 500.0 + rand::Rng::random::<f32>(&mut rng)).collect();
    fixtures::write_npy_f32(&path, &[frames], &[1, 2], &values);

    // Float64 two-pass reference on the float32 values.
    let mut sum = [0.0f64; 2];
    for frame in values.chunks_exact(2) {
        sum[0] += f64::from(frame[0]);
        sum[1] += f64::from(frame[1]);
    }
    let mean = sum.map(|s| s / frames as f64);
    let mut varsum = [0.0f64; 2];
    for frame in values.chunks_exact(2) {
        for p in 0..2 {
            varsum[p] += (f64::from(frame[p]) - mean[p]).powi(2);
        }
    }
    let expected = Expected { n: frames, sum: sum.to_vec(), varsum: varsum.to_vec() };
    // The data is hard enough: the naive one-pass float32 formula is far off.
    let (mut s, mut q) = (0.0f32, 0.0f32);
    for frame in values.chunks_exact(2) {
        s += frame[0];
        q += frame[0] * frame[0];
    }
    let naive = (q - s * s / frames as f32) / frames as f32;
    let var = varsum[0] / frames as f64;
    assert!((f64::from(naive) - var).abs() > 0.1 * var, "naive float32 variance {naive} is close to {var}");
    drop(values);

    let started = std::time::Instant::now();
    let options =
        RunOptions { partitions: Some(partitions), tile_shape: Some(vec![DEPTH, 1, 2]), ..RunOptions::default() };
    let udfs = vec![
        (load("stddev"), Params::default()),
        (load("stddev"), params(&[("dtype", ParamValue::Text("float32".into()))])),
    ];
    let results = run_on(&path, &OpenOptions::default(), udfs, options).unwrap();
    eprintln!(
        "stddev stability: {partitions} partitions x {tiles_per_partition} tiles x {DEPTH} frames = {frames} frames, \
         two stddev UDFs: {:.1} s (process {:.1} s, merge {:.1} s)",
        started.elapsed().as_secs_f64(),
        results.stats.process_seconds,
        results.stats.merge_seconds,
    );
    assert_eq!(results.stats.partitions_merged, partitions);
    let what = format!("{partitions} x {tiles_per_partition} x {DEPTH}");
    check_real(&results.udfs[0], &expected, DType::F64, &[1, 2], 1e-9, &format!("stability {what}, float64 base"));
    // float32 base: varsum accumulates in float32 across 1024 tiles and the merges; the
    // pairwise formula keeps it within 1e-4 where the naive one is off by > 10 %.
    check_real(&results.udfs[1], &expected, DType::F32, &[1, 2], 1e-4, &format!("stability {what}, float32 base"));
}

/// The stability case scaled to 64 of LiberTEM's 1024 partitions (still 1024 tiles of 8
/// frames each, 512 Ki frames): the host sends every merge the full valid-nav mask, so the
/// full size costs O(partitions × frames) in merges — far too slow in a debug build.
#[test]
fn stddev_is_numerically_stable_over_64_partitions_of_1024_tiles() {
    check_stability(64, 1024);
}

/// LiberTEM's full size, 8 Mi frames. Run it in a release build:
/// `cargo test --release -p udf-host-tests --test all stddev_stability_full -- --ignored`.
#[test]
#[ignore = "8 Mi frames in 1024 partitions: minutes even in release (O(partitions x frames) merge contexts)"]
fn stddev_stability_full_libertem_size() {
    check_stability(1024, 1024);
}
