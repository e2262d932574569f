//! `stddev` against NumPy's `var`/`std`/`mean` (ddof 0) written as two-pass loops, and
//! LiberTEM's numerical-stability scenario: 1024 partitions × 1024 tiles × 8 float32
//! frames with a large mean, merged through the built-in's own `merge`.

use super::{Case, Fixture, Input, builtin, cases};
use std::sync::Arc;
use udf_host::array::NdArray;
use udf_host::dataset::{SigSlice, TilingScheme};
use udf_host::dtype::DType;
use udf_host::udf::{
    BufferUse, BufferViewMut, DatasetMeta, DeviceClass, InitContext, MergeContext, Method, NamedBuffer, ParamValue,
    Params, PartitionMeta, ResultsContext, Tile,
};
use udf_host_tests::fixtures;
use udf_host_tests::reference::{assert_close, to_f64};

/// (n, sum (re, im), varsum) per pixel over the selected frames, two passes in f64.
fn moments(f: &Fixture, case: &Case) -> (usize, Vec<(f64, f64)>, Vec<f64>) {
    let selected: Vec<usize> = (0..f.frames()).filter(|&i| case.selected(i)).collect();
    let n = selected.len();
    let mut sum = vec![(0.0, 0.0); f.frame_len()];
    for &i in &selected {
        for (p, s) in sum.iter_mut().enumerate() {
            s.0 += f.frame(i)[p];
            s.1 += f.frame_im(i)[p];
        }
    }
    let mut var = vec![0.0; f.frame_len()];
    for &i in &selected {
        for (p, v) in var.iter_mut().enumerate() {
            let (mr, mi) = (sum[p].0 / n as f64, sum[p].1 / n as f64);
            *v += (f.frame(i)[p] - mr).powi(2) + (f.frame_im(i)[p] - mi).powi(2);
        }
    }
    (n, sum, var)
}

#[test]
fn stddev_matches_two_pass_moments_for_every_case_and_input() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[5, 7], &[19, 23], 41);
    for input in [Input::F32, Input::U16, Input::C64] {
        let f = Fixture::write(dir.path(), input, &data, 41);
        for case in cases(f.frames(), &f.sig, &[3, 5, 7]) {
            let what = format!("{input:?}, {}", case.label);
            let results = f.run(vec![(builtin("stddev"), Params::default())], &case);
            let r = &results.udfs[0];
            let (n, sum, varsum) = moments(&f, &case);
            let nf = n as f64;
            let var: Vec<f64> = varsum.iter().map(|v| v / nf).collect();
            let sum_dtype = if f.is_complex() { DType::C128 } else { DType::F64 };
            assert_eq!(to_f64(&r.buffer("num_frames").unwrap().data), vec![nf], "{what}");
            for (name, dtype) in [
                ("varsum", DType::F64),
                ("var", DType::F64),
                ("std", DType::F64),
                ("sum", sum_dtype),
                ("mean", sum_dtype),
            ] {
                let b = r.buffer(name).unwrap_or_else(|| panic!("{what}: no {name}"));
                assert_eq!((b.dtype(), b.data.shape()), (dtype, &[19usize, 23][..]), "{what} {name}");
            }
            let get = |name: &str| to_f64(&r.buffer(name).unwrap().data);
            assert_close(&get("var"), &var, 1e-9, &format!("var {what}"));
            assert_close(&get("std"), &var.iter().map(|v| v.sqrt()).collect::<Vec<_>>(), 1e-9, &format!("std {what}"));
            assert_close(&get("varsum"), &varsum, 1e-9, &format!("varsum {what}"));
            let mean: Vec<(f64, f64)> = sum.iter().map(|s| (s.0 / nf, s.1 / nf)).collect();
            super::masks::check(&r.buffer("sum").unwrap().data, &sum, 1e-9, &format!("sum {what}"));
            super::masks::check(&r.buffer("mean").unwrap().data, &mean, 1e-9, &format!("mean {what}"));
        }
    }
}

#[test]
fn stddev_base_dtype_float32() {
    let dir = tempfile::tempdir().unwrap();
    let f = Fixture::write(dir.path(), Input::F32, &fixtures::mk_uniform(&[4, 3], &[6, 5], 2), 2);
    let case = Case { partitions: 2, tile: Some(vec![5, 2, 3]), roi: None, label: "float32 base".into() };
    let p = udf_host_tests::params(&[("dtype", ParamValue::Text("float32".into()))]);
    let results = f.run(vec![(builtin("stddev"), p)], &case);
    let r = &results.udfs[0];
    assert_eq!(r.buffer("var").unwrap().dtype(), DType::F32);
    assert_eq!(r.buffer("sum").unwrap().dtype(), DType::F32);
    let (n, _, varsum) = moments(&f, &case);
    let var: Vec<f64> = varsum.iter().map(|v| v / n as f64).collect();
    assert_close(&to_f64(&r.buffer("var").unwrap().data), &var, 1e-5, "float32 var");
}

/// A deterministic float32 value with a large mean: 1000 + [0, 1).
fn value(i: u64) -> f32 {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    1000.0 + (x >> 40) as f32 / (1u64 << 24) as f32
}

#[test]
fn stddev_is_stable_over_1024_partitions_of_1024_tiles() {
    const PARTITIONS: usize = 1024;
    const TILES: usize = 1024;
    const DEPTH: usize = 8;
    const PX: usize = 2;
    let udf = builtin("stddev");
    let desc = udf.description().clone();
    let params = udf_host::params::resolve("stddev", &desc.params, &Params::default()).unwrap();
    let frames = PARTITIONS * TILES * DEPTH;
    let meta = DatasetMeta {
        nav_shape: vec![frames],
        sig_shape: vec![PX],
        dataset_dtype: DType::F32,
        input_dtype: DType::F32,
        roi_count: None,
        device_class: DeviceClass::Cpu,
        threads_per_worker: 1,
    };
    let tiling = Arc::new(TilingScheme::from_tile_shape(DEPTH, &[PX], &[PX], Method::Tile));
    let decls = udf.result_buffers(&params, &meta).unwrap();
    let mut merged: Vec<NamedBuffer> = decls
        .iter()
        .filter(|d| d.usage != BufferUse::ResultOnly)
        .map(|d| NamedBuffer { name: d.name.clone(), array: NdArray::zeros(d.dtype, &d.storage_shape(frames, &[PX])) })
        .collect();
    let sig = SigSlice::full(&[PX]);
    let indices: Vec<u64> = (0..DEPTH as u64).collect();
    let mut data = vec![0f32; DEPTH * PX];
    // Exact two-pass reference over the same float32 values.
    let mut sums = [0f64; PX];
    for p in 0..PARTITIONS {
        let origin = (p * TILES * DEPTH) as u64;
        let pmeta =
            PartitionMeta { index: p, origin, frames: TILES * DEPTH, method: Method::Tile, tiling: tiling.clone() };
        let mut runner = udf.start(InitContext { params: &params, dataset: &meta, partition: Some(&pmeta) }).unwrap();
        for t in 0..TILES {
            let first = origin + (t * DEPTH) as u64;
            for (k, v) in data.iter_mut().enumerate() {
                *v = value(first * PX as u64 + k as u64);
                sums[k % PX] += f64::from(*v);
            }
            let tile = Tile {
                origin: first,
                frames: DEPTH,
                scheme_index: 0,
                sig: &sig,
                true_nav_indices: &indices,
                dtype: DType::F32,
                data: bytemuck::cast_slice(&data),
            };
            runner.process(&tile).unwrap();
        }
        runner.postprocess().unwrap();
        let src = runner.export().unwrap();
        let mut views: Vec<BufferViewMut<'_>> = merged
            .iter_mut()
            .map(|b| BufferViewMut {
                name: &b.name,
                dtype: b.array.dtype(),
                shape: b.array.shape().to_vec(),
                bytes: b.array.bytes_mut(),
            })
            .collect();
        let ctx = MergeContext { params: &params, dataset: &meta, partition: &pmeta, valid_nav_mask: &[] };
        udf.merge(ctx, &mut views, &src).unwrap();
    }
    let ctx = ResultsContext { params: &params, dataset: &meta, valid_nav_mask: &[], roi: None };
    let results = udf.get_results(ctx, &merged).unwrap();
    let var = to_f64(&results.iter().find(|r| r.name == "var").unwrap().array);
    let mut expected = [0f64; PX];
    for i in 0..(frames * PX) as u64 {
        let k = (i % PX as u64) as usize;
        expected[k] += (f64::from(value(i)) - sums[k] / frames as f64).powi(2);
    }
    let expected: Vec<f64> = expected.iter().map(|v| v / frames as f64).collect();
    // Uniform [0, 1) has variance 1/12; a naive Σx² − (Σx)²/n in float32 has no digit left.
    assert!((expected[0] - 1.0 / 12.0).abs() < 1e-3, "{expected:?}");
    assert_close(&var, &expected, 1e-9, "var over 8 Mi frames");
}
