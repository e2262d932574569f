//! `sum` and `sumsig`: references, wasm twins, the zero-copy path, the command line.

use super::{Case, Fixture, Input, builtin, cases, nav_reference};
use std::sync::{Arc, Mutex};
use udf_host::dataset::OpenOptions;
use udf_host::dtype::DType;
use udf_host::exec::{Run, RunOptions, UdfSpec};
use udf_host::udf::{
    BufferDecl, BufferViewMut, CallError, DatasetMeta, Description, InitContext, MergeContext, NamedBuffer, ParamValue,
    Params, PartitionRunner, ResultEntry, ResultsContext, RunPlan, Tile, Udf,
};
use udf_host_tests::fixtures;
use udf_host_tests::reference::{assert_close, assert_close_complex, to_complex, to_f64};

/// Σ over the selected frames, per pixel, as (re, im).
fn sum_reference(f: &Fixture, case: &Case) -> Vec<(f64, f64)> {
    let mut out = vec![(0.0, 0.0); f.frame_len()];
    for i in (0..f.frames()).filter(|&i| case.selected(i)) {
        for (o, (&r, &m)) in out.iter_mut().zip(f.frame(i).iter().zip(f.frame_im(i))) {
            o.0 += r;
            o.1 += m;
        }
    }
    out
}

#[test]
fn sum_and_sumsig_match_plain_loops_for_every_case_and_input() {
    let dir = tempfile::tempdir().unwrap();
    // 35 frames of 19 x 23: no forced tile shape divides the frame evenly.
    let data = fixtures::mk_random(&[5, 7], &[19, 23], 11);
    for input in [Input::F32, Input::U16, Input::C64] {
        let f = Fixture::write(dir.path(), input, &data, 11);
        for case in cases(f.frames(), &f.sig, &[3, 5, 7]) {
            let what = format!("{input:?}, {}", case.label);
            let results =
                f.run(vec![(builtin("sum"), Params::default()), (builtin("sumsig"), Params::default())], &case);
            let expected_dtype = if f.is_complex() { DType::C64 } else { DType::F32 };
            assert_eq!(results.input_dtype, expected_dtype, "{what}");

            let s = results.udfs[0].buffer("intensity").expect("sum intensity");
            assert_eq!((s.data.shape(), s.dtype()), (&[19usize, 23][..], expected_dtype), "{what}");
            assert_close_complex(&to_complex(&s.data), &sum_reference(&f, &case), 1e-5, &format!("sum {what}"));

            let ss = results.udfs[1].buffer("intensity").expect("sumsig intensity");
            assert_eq!((ss.data.shape(), ss.dtype()), (&[5usize, 7][..], expected_dtype), "{what}");
            let re = nav_reference(&case, f.frames(), 1, |i| vec![f.frame(i).iter().sum()]);
            let im = nav_reference(&case, f.frames(), 1, |i| vec![f.frame_im(i).iter().sum()]);
            let actual = to_complex(&ss.data);
            if f.is_complex() {
                assert_close_complex(
                    &actual,
                    &re.into_iter().zip(im).collect::<Vec<_>>(),
                    1e-5,
                    &format!("sumsig {what}"),
                );
            } else {
                assert_close(&to_f64(&ss.data), &re, 1e-5, &format!("sumsig {what}"));
            }
        }
    }
}

#[test]
fn sum_honours_its_dtype_parameter() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[4, 4], &[8, 8], 3);
    let path = dir.path().join("i32.npy");
    fixtures::write_npy(&path, &data, fixtures::Ty::I32);
    let p = udf_host_tests::params(&[("dtype", udf_host::udf::ParamValue::Text("int32".into()))]);
    let results =
        udf_host_tests::run_on(&path, &OpenOptions::default(), vec![(builtin("sum"), p)], RunOptions::default())
            .unwrap();
    assert_eq!(results.input_dtype, DType::I32);
    let s = results.udfs[0].buffer("intensity").unwrap();
    assert_eq!(s.dtype(), DType::I32);
    assert_eq!(to_f64(&s.data), udf_host_tests::reference::sum_frames(&data.rounded(fixtures::Ty::I32), None));
}

#[test]
fn sum_and_sumsig_agree_with_their_wasm_twins_in_one_pass() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_uniform(&[6, 9], &[17, 13], 5);
    for input in [Input::F32, Input::U16] {
        let f = Fixture::write(dir.path(), input, &data, 5);
        for case in cases(f.frames(), &f.sig, &[5, 4, 6]).into_iter().filter(|c| c.roi.is_none() || c.partitions == 3) {
            let udfs = vec![
                (builtin("sum"), Params::default()),
                (udf_host_tests::load("sum"), Params::default()),
                (builtin("sumsig"), Params::default()),
                (udf_host_tests::load("sumsig"), Params::default()),
            ];
            let results = f.run(udfs, &case);
            for (native, wasm, name) in [(0, 1, "sum"), (2, 3, "sumsig")] {
                let n = results.udfs[native].buffer("intensity").unwrap();
                let w = results.udfs[wasm].buffer("intensity").unwrap();
                assert_eq!(results.udfs[native].source, format!("builtin:{name}"));
                assert_eq!(n.dtype(), w.dtype(), "{name} {input:?} {}", case.label);
                assert_close(&to_f64(&n.data), &to_f64(&w.data), 1e-5, &format!("{name} {input:?} {}", case.label));
            }
        }
    }
}

/// What the pointer probe saw of one tile: (partition origin, tile first frame, frames,
/// address of the first byte, dtype).
type SeenTile = (u64, u64, usize, usize, DType);
type Seen = Arc<Mutex<Vec<SeenTile>>>;

/// A native probe that reads in place like a built-in (and, if `converts`, says it
/// converts stored integers on read) and records where each tile's bytes are.
struct PointerProbe {
    description: Description,
    seen: Seen,
    converts: bool,
}

impl PointerProbe {
    fn shared(seen: &Seen, converts: bool) -> Arc<dyn Udf> {
        let mut description = builtin("sum").description().clone();
        description.params.clear();
        description.custom_merge = false;
        Arc::new(PointerProbe { description, seen: seen.clone(), converts })
    }
}

struct PointerRunner {
    seen: Seen,
    origin: u64,
}

impl Udf for PointerProbe {
    fn description(&self) -> &Description {
        &self.description
    }
    fn source(&self) -> &str {
        "test:pointer-probe"
    }
    fn reads_in_place(&self) -> bool {
        true
    }
    fn converts_on_read(&self) -> bool {
        self.converts
    }
    fn plan(&self, _: &Params, _: &DatasetMeta) -> Result<RunPlan, CallError> {
        let d = &self.description;
        Ok(RunPlan { method: d.methods[0], input_dtype: d.input_dtype, tiling: d.tiling })
    }
    fn result_buffers(&self, _: &Params, _: &DatasetMeta) -> Result<Vec<BufferDecl>, CallError> {
        Ok(Vec::new())
    }
    fn start(&self, ctx: InitContext<'_>) -> Result<Box<dyn PartitionRunner + '_>, CallError> {
        Ok(Box::new(PointerRunner { seen: self.seen.clone(), origin: ctx.partition.map_or(0, |p| p.origin) }))
    }
    fn merge(&self, _: MergeContext<'_>, _: &mut [BufferViewMut<'_>], _: &[NamedBuffer]) -> Result<(), CallError> {
        Ok(())
    }
    fn get_results(&self, _: ResultsContext<'_>, _: &[NamedBuffer]) -> Result<Vec<ResultEntry>, CallError> {
        Ok(Vec::new())
    }
}

impl PartitionRunner for PointerRunner {
    fn process(&mut self, tile: &Tile<'_>) -> Result<(), CallError> {
        let entry = (self.origin, tile.origin, tile.frames, tile.data.as_ptr() as usize, tile.dtype);
        self.seen.lock().map_err(|_| CallError::internal("lock"))?.push(entry);
        Ok(())
    }
    fn export(&mut self) -> Result<Vec<NamedBuffer>, CallError> {
        Ok(Vec::new())
    }
}

#[test]
fn builtins_read_float32_data_in_place_as_whole_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[30], &[16, 16], 9);
    let f = Fixture::write(dir.path(), Input::F32, &data, 9);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let probe = PointerProbe::shared(&seen, false);
    let open = udf_host::dataset::open(&f.path, &OpenOptions::default()).unwrap();
    let specs = vec![
        UdfSpec { udf: builtin("sum"), params: Params::default() },
        UdfSpec { udf: builtin("sumsig"), params: Params::default() },
        UdfSpec { udf: probe, params: Params::default() },
    ];
    let options = RunOptions { partitions: Some(3), ..RunOptions::default() };
    let run = Run::plan(open, specs, options).unwrap();
    // Only native UDFs, no conversion: one tile per partition (10 frames of 16 x 16).
    assert_eq!(run.tiling().tile_shape(), vec![10, 16, 16]);
    let results = run.execute().unwrap();
    let sum = results.udfs[0].buffer("intensity").unwrap();
    assert_close(
        &to_f64(&sum.data),
        &udf_host_tests::reference::sum_frames(&data.rounded(fixtures::Ty::F32), None),
        1e-5,
        "sum",
    );

    // The tiles are the file itself: tile addresses differ exactly by the frames' file
    // offsets (separate copies would live in separately allocated buffers).
    let mut seen = seen.lock().unwrap().clone();
    seen.sort_by_key(|s| (s.0, s.1));
    assert_eq!(seen.iter().map(|s| (s.1, s.2)).collect::<Vec<_>>(), vec![(0, 10), (10, 10), (20, 10)]);
    assert_in_place(&seen, 16 * 16 * 4);
}

/// The tiles are the file itself: tile addresses differ exactly by the frames' file
/// offsets (separate copies would live in separately allocated buffers).
fn assert_in_place(seen: &[SeenTile], frame_bytes: usize) {
    for s in &seen[1..] {
        assert_eq!(s.3 - seen[0].3, s.1 as usize * frame_bytes, "tile at frame {} is not read in place", s.1);
    }
}

/// A uint16 file run with `udfs` and a probe (converting on read or not), the conversion
/// left to the UDFs or done by the executor: the results, the tile shape and what the
/// probe saw, sorted.
fn run_uint16(
    f: &Fixture,
    udfs: &[(&str, Params)],
    probe_converts: bool,
    convert_in_executor: bool,
) -> (udf_host::exec::RunResults, Vec<usize>, Vec<SeenTile>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut specs: Vec<UdfSpec> =
        udfs.iter().map(|(name, params)| UdfSpec { udf: builtin(name), params: params.clone() }).collect();
    specs.push(UdfSpec { udf: PointerProbe::shared(&seen, probe_converts), params: Params::default() });
    let open = udf_host::dataset::open(&f.path, &OpenOptions::default()).unwrap();
    // Merges in a fixed order, so that floating-point merges (stddev's) are reproducible.
    let options =
        RunOptions { partitions: Some(3), convert_in_executor, shuffle_merges: Some(7), ..RunOptions::default() };
    let run = Run::plan(open, specs, options).unwrap();
    let tile = run.tiling().tile_shape();
    let results = run.execute().unwrap();
    let mut seen = seen.lock().unwrap().clone();
    seen.sort_by_key(|s| s.1);
    (results, tile, seen)
}

#[test]
fn integer_files_reach_builtins_that_convert_on_read_unconverted_with_the_same_results() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[5, 6], &[16, 16], 13);
    let f = Fixture::write(dir.path(), Input::U16, &data, 13);
    let masks: Vec<f32> = (0..16 * 256).map(|i| ((i * 37) % 23) as f32 / 7.0 - 1.5).collect();
    let masks = udf_host::array::NdArray::from_vec(&[16, 16, 16], masks).unwrap();
    let masks = udf_host_tests::params(&[("masks", ParamValue::Array(Arc::new(masks)))]);
    let ring = udf_host_tests::params(&[("ri", ParamValue::Float(2.0)), ("ro", ParamValue::Float(6.0))]);
    let udfs = [
        ("sum", Params::default()),
        ("sumsig", Params::default()),
        ("masks", masks),
        ("ring", ring),
        ("com", Params::default()),
        ("stddev", Params::default()),
    ];

    // Every UDF converts on read: the file's own uint16 bytes, whole partitions in place.
    let (fused, tile, seen) = run_uint16(&f, &udfs, true, false);
    assert_eq!(fused.input_dtype, DType::F32);
    assert_eq!(tile, vec![10, 16, 16]);
    assert_eq!(
        seen.iter().map(|s| (s.1, s.2, s.4)).collect::<Vec<_>>(),
        vec![(0, 10, DType::U16), (10, 10, DType::U16), (20, 10, DType::U16)]
    );
    assert_in_place(&seen, 16 * 16 * 2);

    // The same run converting in the executor, and one where a UDF cannot convert:
    // float32 tiles, and bit for bit the same results (same values, same arithmetic, the
    // same merge order).
    for (probe_converts, convert_in_executor) in [(true, true), (false, false)] {
        let (copied, _, seen) = run_uint16(&f, &udfs, probe_converts, convert_in_executor);
        assert!(seen.iter().all(|s| s.4 == DType::F32), "{seen:?}");
        for (a, b) in fused.udfs.iter().zip(&copied.udfs) {
            for (x, y) in a.buffers.iter().zip(&b.buffers) {
                assert_eq!((&x.name, x.dtype()), (&y.name, y.dtype()));
                assert_eq!(x.data.bytes(), y.data.bytes(), "{} '{}'", a.name, x.name);
            }
        }
    }

    // And right: sum against a plain loop over the stored values.
    let sum = fused.udfs[0].buffer("intensity").unwrap();
    assert_close(
        &to_f64(&sum.data),
        &udf_host_tests::reference::sum_frames(&data.rounded(fixtures::Ty::U16), None),
        1e-6,
        "sum",
    );
}

#[test]
fn unknown_builtin_is_a_user_error() {
    let err = udf_host::builtins::from_source("builtin:summ").unwrap().err().unwrap().to_string();
    assert!(err.contains("'summ'") && err.contains("sum, sumsig"), "{err}");
}
