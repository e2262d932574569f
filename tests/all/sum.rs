//! `sum` and `sumsig` against plain-Rust references, across partitionings, tile shapes,
//! dtypes and byte orders.

use std::sync::Arc;
use udf_host::dataset::OpenOptions;
use udf_host::dtype::{ByteOrder, DType, StoredDType};
use udf_host::exec::RunOptions;
use udf_host::udf::{ParamValue, Params, Udf};
use udf_host_tests::fixtures::{self, Data, Ty};
use udf_host_tests::reference::{assert_close, sum_frames, sum_sig, to_f64};
use udf_host_tests::{load, params, run_on};

/// Write `data` as `ty` (npy for little-endian, raw for big-endian) and return the
/// path and open options.
fn write(dir: &std::path::Path, data: &Data, ty: Ty, big: bool) -> (std::path::PathBuf, OpenOptions) {
    if big {
        let path = dir.join(format!("data-{ty:?}-be.raw"));
        fixtures::write_raw(&path, data, ty, true, 0);
        let dtype = StoredDType::parse(&format!(">{}", ty.code())).expect("dtype");
        let open = OpenOptions {
            dtype: Some(dtype),
            nav_shape: Some(data.nav.clone()),
            sig_shape: Some(data.sig.clone()),
            ..OpenOptions::default()
        };
        (path, open)
    } else {
        let path = dir.join(format!("data-{ty:?}.npy"));
        fixtures::write_npy(&path, data, ty);
        (path, OpenOptions::default())
    }
}

#[test]
fn sum_and_sumsig_match_the_reference_for_every_partitioning_and_tiling() {
    let dir = tempfile::tempdir().unwrap();
    // 35 frames of 19 x 23: no tile shape below divides the frame evenly.
    let data = fixtures::mk_random(&[5, 7], &[19, 23], 1);
    let sum = load("sum");
    let sumsig = load("sumsig");
    for (ty, big) in [(Ty::F32, false), (Ty::U16, false), (Ty::U16, true)] {
        let (path, open) = write(dir.path(), &data, ty, big);
        let stored = data.rounded(ty);
        let expected_sum = sum_frames(&stored, None);
        let expected_sig = sum_sig(&stored);
        for partitions in [1, 2, 3, 7] {
            for tile in [None, Some(vec![3, 5, 7]), Some(vec![1, 19, 23]), Some(vec![4, 19, 4]), Some(vec![35, 2, 23])]
            {
                let what = format!("{ty:?} big={big} partitions={partitions} tile={tile:?}");
                let options =
                    RunOptions { partitions: Some(partitions), tile_shape: tile.clone(), ..Default::default() };
                let udfs: Vec<(Arc<dyn Udf>, Params)> =
                    vec![(sum.clone(), Params::default()), (sumsig.clone(), Params::default())];
                let results = run_on(&path, &open, udfs, options).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(results.input_dtype, DType::F32, "{what}: float32 preferred, native {ty:?}");
                assert_eq!(results.stats.partitions_merged, partitions, "{what}");
                let s = results.udfs[0].buffer("intensity").expect("sum intensity");
                assert_eq!(s.data.shape(), &[19, 23], "{what}");
                assert_eq!(s.dtype(), DType::F32, "{what}");
                assert_close(&to_f64(&s.data), &expected_sum, 1e-5, &format!("sum {what}"));
                let ss = results.udfs[1].buffer("intensity").expect("sumsig intensity");
                assert_eq!(ss.data.shape(), &[5, 7], "{what}");
                assert_close(&to_f64(&ss.data), &expected_sig, 1e-5, &format!("sumsig {what}"));
                assert!(s.all_valid && ss.all_valid, "{what}: complete run is all valid");
            }
        }
    }
}

#[test]
fn non_integer_float32_data_sums_within_tolerance() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_uniform(&[64], &[16, 16], 2);
    let (path, open) = write(dir.path(), &data, Ty::F32, false);
    let stored = data.rounded(Ty::F32);
    for partitions in [1, 3, 7] {
        let options =
            RunOptions { partitions: Some(partitions), tile_shape: Some(vec![5, 3, 16]), ..Default::default() };
        let results = run_on(&path, &open, vec![(load("sum"), Params::default())], options).unwrap();
        let s = results.udfs[0].buffer("intensity").unwrap();
        assert_close(&to_f64(&s.data), &sum_frames(&stored, None), 1e-5, &format!("{partitions} partitions"));
    }
}

#[test]
fn sum_follows_the_input_dtype_rule() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[4, 4], &[8, 8], 3);
    // float64 data: float32 preferred + float64 native = float64 (API.md §6).
    let (path, open) = write(dir.path(), &data, Ty::F64, false);
    let results = run_on(&path, &open, vec![(load("sum"), Params::default())], RunOptions::default()).unwrap();
    assert_eq!(results.input_dtype, DType::F64);
    let s = results.udfs[0].buffer("intensity").unwrap();
    assert_eq!(s.dtype(), DType::F64);
    assert_close(&to_f64(&s.data), &sum_frames(&data, None), 0.0, "float64 sum is exact");
    // int32 data with the dtype param asking for int32: integer sums, exact.
    let (path, open) = write(dir.path(), &data, Ty::I32, false);
    let p = params(&[("dtype", ParamValue::Text("int32".into()))]);
    let results = run_on(&path, &open, vec![(load("sum"), p)], RunOptions::default()).unwrap();
    assert_eq!(results.input_dtype, DType::I32);
    let s = results.udfs[0].buffer("intensity").unwrap();
    assert_eq!(s.dtype(), DType::I32);
    assert_eq!(to_f64(&s.data), sum_frames(&data.rounded(Ty::I32), None));
}

#[test]
fn raw_files_honour_offset_and_byte_order() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[6], &[5, 9], 4);
    let path = dir.path().join("offset.raw");
    fixtures::write_raw(&path, &data, Ty::U16, true, 13);
    let open = OpenOptions {
        dtype: Some(StoredDType { dtype: DType::U16, order: ByteOrder::Big }),
        nav_shape: Some(vec![6]),
        sig_shape: Some(vec![5, 9]),
        offset: 13,
        ..OpenOptions::default()
    };
    let results = run_on(&path, &open, vec![(load("sumsig"), Params::default())], RunOptions::default()).unwrap();
    let ss = results.udfs[0].buffer("intensity").unwrap();
    assert_eq!(to_f64(&ss.data), sum_sig(&data.rounded(Ty::U16)));
}

#[test]
fn the_sdk_documentation_example_works() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_uniform(&[3, 11], &[9, 10], 6);
    let (path, open) = write(dir.path(), &data, Ty::F32, false);
    let options = RunOptions { partitions: Some(3), tile_shape: Some(vec![4, 4, 10]), ..Default::default() };
    let results = run_on(&path, &open, vec![(load("probe_sdk_example"), Params::default())], options).unwrap();
    assert_eq!(results.udfs[0].name, "my-sum");
    let s = results.udfs[0].buffer("intensity").unwrap();
    assert_close(&to_f64(&s.data), &sum_frames(&data.rounded(Ty::F32), None), 1e-5, "my-sum");
}
