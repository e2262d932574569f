//! Bad input of every kind gets a clear error naming the file or plugin.

use udf_host::dataset::{self, OpenOptions};
use udf_host::dtype::{DType, StoredDType};
use udf_host::exec::{RunError, RunOptions};
use udf_host::udf::{CallError, ErrorKind, ParamValue, Params};
use udf_host::wasm::LoadErrorKind;
use udf_host_tests::fixtures::{self, Ty};
use udf_host_tests::{load, params, plugin, run_on, runtime};

fn open_err(path: &std::path::Path, options: &OpenOptions) -> String {
    match dataset::open(path, options) {
        Ok(_) => panic!("{} opened", path.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn missing_data_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.npy");
    let msg = open_err(&path, &OpenOptions::default());
    assert!(msg.contains("nope.npy") && msg.contains("cannot open"), "{msg}");
}

#[test]
fn truncated_npy_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.npy");
    fixtures::write_npy(&path, &fixtures::mk_random(&[4, 4], &[8, 8], 0), Ty::F32);
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len - 100).unwrap();
    let msg = open_err(&path, &OpenOptions::default());
    assert!(msg.contains("cut.npy") && msg.contains("truncated"), "{msg}");
    // Cut inside the header.
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(40).unwrap();
    let msg = open_err(&path, &OpenOptions::default());
    assert!(msg.contains("cut.npy") && msg.contains("truncated"), "{msg}");
}

#[test]
fn raw_shape_and_dtype_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u16.raw");
    fixtures::write_raw(&path, &fixtures::mk_random(&[4, 4], &[8, 8], 0), Ty::U16, false, 0);
    let as_f32 = OpenOptions {
        dtype: Some(StoredDType::le(DType::F32)),
        nav_shape: Some(vec![4, 4]),
        sig_shape: Some(vec![8, 8]),
        ..OpenOptions::default()
    };
    let msg = open_err(&path, &as_f32);
    assert!(msg.contains("u16.raw") && msg.contains("too short") && msg.contains("--dtype"), "{msg}");
    let as_u8 = OpenOptions { dtype: Some(StoredDType::le(DType::U8)), ..as_f32.clone() };
    let msg = open_err(&path, &as_u8);
    assert!(msg.contains("too long"), "{msg}");
    let odd_sig = OpenOptions {
        dtype: Some(StoredDType::le(DType::U16)),
        nav_shape: None,
        sig_shape: Some(vec![7, 7]),
        ..OpenOptions::default()
    };
    let msg = open_err(&path, &odd_sig);
    assert!(msg.contains("not a whole number"), "{msg}");
    let no_dtype = OpenOptions { dtype: None, ..as_f32 };
    assert!(open_err(&path, &no_dtype).contains("needs --dtype"));
}

#[test]
fn npy_reshape_mismatch_and_fortran_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.npy");
    fixtures::write_npy(&path, &fixtures::mk_random(&[4, 4], &[8, 8], 0), Ty::F32);
    let bad_nav = OpenOptions { nav_shape: Some(vec![3, 5]), ..OpenOptions::default() };
    let msg = open_err(&path, &bad_nav);
    assert!(msg.contains("nav shape [3, 5]") && msg.contains("16 frames"), "{msg}");
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.windows(5).position(|w| w == b"False").unwrap();
    bytes[at..at + 5].copy_from_slice(b"True ");
    std::fs::write(&path, bytes).unwrap();
    let msg = open_err(&path, &OpenOptions::default());
    assert!(msg.contains("Fortran order"), "{msg}");
}

fn load_err(bytes: &[u8]) -> (LoadErrorKind, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plugin.wasm");
    std::fs::write(&path, bytes).unwrap();
    match runtime().load(&path) {
        Ok(_) => panic!("loaded"),
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("plugin.wasm"), "names the file: {msg}");
            (e.kind, msg)
        }
    }
}

#[test]
fn a_text_file_is_not_a_plugin() {
    let (kind, msg) = load_err(b"#!/bin/sh\necho hello\n");
    assert_eq!(kind, LoadErrorKind::NotWasm, "{msg}");
}

#[test]
fn a_core_module_is_not_a_component() {
    let (kind, msg) = load_err(&wat::parse_str("(module (func (export \"f\")))").unwrap());
    assert_eq!(kind, LoadErrorKind::CoreModule, "{msg}");
    assert!(msg.contains("wasm32-wasip2"), "says how to fix it: {msg}");
}

/// A component that exports `udf:plugin/udf` at `version` (with one dummy function).
fn component_exporting(version: &str) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(component
            (core module $m (func (export "f")))
            (core instance $i (instantiate $m))
            (func $f (canon lift (core func $i "f")))
            (instance $udf (export "describe" (func $f)))
            (export "udf:plugin/udf@{version}" (instance $udf)))"#
    ))
    .unwrap()
}

#[test]
fn a_component_of_another_contract_version_is_rejected_naming_both() {
    for version in ["0.2.0", "1.0.0"] {
        let (kind, msg) = load_err(&component_exporting(version));
        assert_eq!(kind, LoadErrorKind::WitVersion, "{msg}");
        assert!(msg.contains(&format!("udf:plugin@{version}")) && msg.contains("udf:plugin@0.1.x (0.1.1)"), "{msg}");
    }
}

#[test]
fn a_component_importing_something_unknown_is_rejected() {
    let bytes = wat::parse_str(
        r#"(component
            (import "evil:net/socket@1.0.0" (instance))
            (core module $m (func (export "f")))
            (core instance $i (instantiate $m))
            (func $f (canon lift (core func $i "f")))
            (instance $udf (export "describe" (func $f)))
            (export "udf:plugin/udf@0.1.0" (instance $udf)))"#,
    )
    .unwrap();
    let (kind, msg) = load_err(&bytes);
    assert_eq!(kind, LoadErrorKind::Interface, "{msg}");
    assert!(msg.contains("evil:net/socket@1.0.0"), "{msg}");
}

#[test]
fn a_component_without_the_udf_export_is_rejected() {
    let bytes = wat::parse_str("(component)").unwrap();
    let (kind, msg) = load_err(&bytes);
    assert_eq!(kind, LoadErrorKind::Interface, "{msg}");
    assert!(msg.contains("does not export the udf:plugin/udf interface"), "{msg}");
}

fn small_dataset(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("d.npy");
    fixtures::write_npy(&path, &fixtures::mk_random(&[8, 4], &[6, 6], 9), Ty::F32);
    path
}

#[test]
fn unknown_and_mistyped_params_are_user_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = small_dataset(dir.path());
    let unknown = params(&[("dtyp", ParamValue::Text("float32".into()))]);
    let err = run_on(&path, &OpenOptions::default(), vec![(load("sum"), unknown)], RunOptions::default()).unwrap_err();
    assert!(err.is_user_error());
    let msg = err.to_string();
    assert!(msg.contains("'sum' has no parameter 'dtyp'") && msg.contains("dtype (text)"), "{msg}");

    let mistyped = params(&[("dtype", ParamValue::Int(3))]);
    let err = run_on(&path, &OpenOptions::default(), vec![(load("sum"), mistyped)], RunOptions::default()).unwrap_err();
    assert!(err.to_string().contains("parameter 'dtype' of 'sum' must be text"), "{err}");

    // A value the plugin itself rejects comes back as a typed error from `plan`.
    let bad = params(&[("dtype", ParamValue::Text("float33".into()))]);
    let err = run_on(&path, &OpenOptions::default(), vec![(load("sum"), bad)], RunOptions::default()).unwrap_err();
    assert!(err.is_user_error(), "{err}");
    match &err {
        RunError::Udf { udf, at, error: CallError::Returned { kind: ErrorKind::BadParam, message }, .. } => {
            assert_eq!(udf, "sum");
            assert_eq!(at.method, "plan");
            assert!(message.contains("float33"), "{message}");
        }
        other => panic!("expected a bad-param error from plan, got {other:?}"),
    }
}

#[test]
fn a_trapping_plugin_is_reported_with_plugin_method_partition_and_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = small_dataset(dir.path());
    // 32 frames in 4 partitions of 8: frame 19 is in partition 2.
    let p = params(&[("mode", ParamValue::Text("panic".into())), ("frame", ParamValue::Int(19))]);
    let options = RunOptions { partitions: Some(4), threads: Some(1), ..Default::default() };
    let err = run_on(&path, &OpenOptions::default(), vec![(load("probe_trap"), p)], options).unwrap_err();
    assert!(!err.is_user_error());
    let msg = err.to_string();
    assert!(msg.contains("'trap'") && msg.contains("probe_trap.wasm"), "names the plugin: {msg}");
    assert!(msg.contains("process, partition 2, frames 16..=23"), "names method, partition and frames: {msg}");
    assert!(msg.contains("unreachable"), "says it trapped: {msg}");
    assert!(msg.contains("panic: ") && msg.contains("probe panics at frame 19"), "keeps the panic message: {msg}");
    assert!(msg.contains("about to fail at frame 19"), "keeps the plugin's log: {msg}");
}

#[test]
fn a_typed_error_from_process_names_the_kind() {
    let dir = tempfile::tempdir().unwrap();
    let path = small_dataset(dir.path());
    let p = params(&[("mode", ParamValue::Text("error".into())), ("frame", ParamValue::Int(3))]);
    let err = run_on(&path, &OpenOptions::default(), vec![(load("probe_trap"), p)], RunOptions::default()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("invalid data: probe rejects frame 3"), "{msg}");
    let p = params(&[("mode", ParamValue::Text("sometimes".into()))]);
    let err = run_on(&path, &OpenOptions::default(), vec![(load("probe_trap"), p)], RunOptions::default()).unwrap_err();
    assert!(err.is_user_error() && err.to_string().contains("mode 'sometimes'"), "{err}");
}

#[test]
fn an_roi_of_the_wrong_size_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let path = small_dataset(dir.path());
    let roi = udf_host::roi::Roi::from_mask(vec![true; 5]);
    let options = RunOptions { roi: Some(roi), ..Default::default() };
    let err = run_on(&path, &OpenOptions::default(), vec![(load("sum"), Params::default())], options).unwrap_err();
    assert!(err.to_string().contains("the ROI has 5 positions") && err.to_string().contains("32"), "{err}");
    let _ = plugin("sum");
}

fn run_with_runtime(
    options: udf_host::wasm::RuntimeOptions,
    mode: &str,
) -> Result<udf_host::exec::RunResults, RunError> {
    let dir = tempfile::tempdir().unwrap();
    let path = small_dataset(dir.path());
    let runtime = udf_host::wasm::WasmRuntime::new(options).unwrap();
    let (udf, _) = runtime.load(&plugin("probe_trap")).unwrap();
    let p = params(&[("mode", ParamValue::Text(mode.into())), ("frame", ParamValue::Int(5))]);
    run_on(&path, &OpenOptions::default(), vec![(std::sync::Arc::new(udf), p)], RunOptions::default())
}

#[test]
fn an_endless_loop_hits_the_timeout() {
    let options = udf_host::wasm::RuntimeOptions {
        timeout: std::time::Duration::from_millis(300),
        ..udf_host_tests::runtime_options()
    };
    let started = std::time::Instant::now();
    let err = run_with_runtime(options, "spin").unwrap_err();
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "stopped in bounded time");
    let msg = err.to_string();
    assert!(msg.contains("timed out") && msg.contains("--timeout 0.3 s") && msg.contains("frame 5"), "{msg}");
}

#[test]
fn a_memory_bomb_hits_the_memory_limit() {
    let options = udf_host::wasm::RuntimeOptions { max_memory: 64 << 20, ..udf_host_tests::runtime_options() };
    let err = run_with_runtime(options, "grow").unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("memory limit of 64 MiB"), "{msg}");
}

#[test]
fn an_interrupt_stops_a_running_call_and_keeps_what_was_merged() {
    let dir = tempfile::tempdir().unwrap();
    let path = small_dataset(dir.path());
    let options = udf_host::wasm::RuntimeOptions {
        timeout: std::time::Duration::from_secs(120),
        ..udf_host_tests::runtime_options()
    };
    let runtime = udf_host::wasm::WasmRuntime::new(options).unwrap();
    let (trap, _) = runtime.load(&plugin("probe_trap")).unwrap();
    // 32 frames in 4 partitions on one thread; the plugin spins forever at frame 9.
    let p = params(&[("mode", ParamValue::Text("spin".into())), ("frame", ParamValue::Int(9))]);
    let spec = udf_host::exec::UdfSpec { udf: std::sync::Arc::new(trap), params: p };
    let ds = dataset::open(&path, &OpenOptions::default()).unwrap();
    let options = RunOptions { partitions: Some(4), threads: Some(1), ..Default::default() };
    let mut iter = udf_host::exec::Run::plan(ds, vec![spec], options).unwrap().iter();
    let started = std::time::Instant::now();
    iter.next().unwrap().unwrap(); // partition 0 merged; partition 1 is spinning
    let progress = iter.progress();
    let stopper = runtime.clone();
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(200));
        progress.interrupt();
        stopper.interrupt();
    });
    let rest: Vec<_> = iter.by_ref().collect();
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "stopped long before the 120 s timeout");
    assert!(matches!(rest.last(), Some(Err(RunError::Cancelled))), "{rest:?}");
    assert!(iter.interrupted());
    assert!(iter.failures().is_empty(), "an interrupt is not a failure: {:?}", iter.failures());
    let results = iter.results().unwrap();
    let valid = results.udfs[0].buffer("seen").unwrap().valid.to_bools().unwrap();
    assert_eq!(valid, (0..32).map(|f| f < 8).collect::<Vec<_>>());
}

#[test]
fn results_larger_than_the_memory_cap_are_refused_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let path = small_dataset(dir.path());
    let options = RunOptions { max_result_bytes: Some(100), ..Default::default() };
    let err = run_on(&path, &OpenOptions::default(), vec![(load("sum"), Params::default())], options).unwrap_err();
    assert!(err.is_user_error());
    let msg = err.to_string();
    assert!(msg.contains("more than the limit") && msg.contains("'intensity' of 'sum'"), "{msg}");
}

/// Issue 33, finding 3: `--sig-shape 4,4611686018427387905` multiplies out to 4 pixels
/// when the product wraps; the raw reader took 16-byte frames and every partition then
/// panicked indexing the file. A shape whose size does not fit is bad input.
#[test]
fn a_sig_shape_whose_size_wraps_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u16.raw");
    fixtures::write_raw(&path, &fixtures::mk_random(&[4, 4], &[4, 4], 0), Ty::U16, false, 0);
    let wrapping = OpenOptions {
        dtype: Some(StoredDType::le(DType::U16)),
        sig_shape: Some(vec![4, 4_611_686_018_427_387_905]),
        ..OpenOptions::default()
    };
    let msg = open_err(&path, &wrapping);
    assert!(msg.contains("u16.raw") && msg.contains("--sig-shape") && msg.contains("more elements"), "{msg}");
    let nav = OpenOptions { sig_shape: Some(vec![4, 4]), nav_shape: Some(vec![1 << 62, 1 << 3]), ..wrapping };
    let msg = open_err(&path, &nav);
    assert!(msg.contains("--nav-shape") && msg.contains("more elements"), "{msg}");
    // On the command line, the option itself is refused (exit 1).
    let (code, msg) = crate::cli::cli(&[
        "run",
        "builtin:sumsig",
        &path.display().to_string(),
        "--format",
        "raw",
        "--dtype",
        "uint16",
        "--sig-shape",
        "4,4611686018427387905",
        "--out",
        &dir.path().join("out").display().to_string(),
    ])
    .expect_err("a wrapping shape is refused");
    assert_eq!(code, udf_host::cli::exit::USER_ERROR, "{msg}");
    assert!(msg.contains("more elements than this machine can address"), "{msg}");
    assert!(!dir.path().join("out").exists());
}

/// A dataset whose reads of one frame panic, as a format reader with an arithmetic bug
/// would (`--sig-shape 4,4611686018427387905` on a raw file did, in every partition).
struct PanicsAt {
    inner: std::sync::Arc<dyn dataset::Dataset>,
    frame: u64,
}

impl dataset::Dataset for PanicsAt {
    fn shape(&self) -> &dataset::DatasetShape {
        self.inner.shape()
    }
    fn stored_dtype(&self) -> StoredDType {
        self.inner.stored_dtype()
    }
    fn info(&self) -> dataset::DatasetInfo {
        self.inner.info()
    }
    fn read_tile(
        &self,
        frames: &[u64],
        sig: &dataset::SigSlice,
        dtype: DType,
        out: &mut [u8],
    ) -> Result<(), dataset::DatasetError> {
        assert!(!frames.contains(&self.frame), "a reader's index out of bounds at frame {}", self.frame);
        self.inner.read_tile(frames, sig, dtype, out)
    }
}

/// Issue 33, finding 1: a panic in a partition was swallowed — the partition was missing
/// from every plugin's results, the sums were wrong without an invalid mark, and the run
/// said "complete". A panic is that partition's internal error; every partition ends
/// merged or failed; the others' results are kept.
#[test]
fn a_panic_in_a_partition_fails_that_partition_and_never_passes_for_complete() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u16.npy");
    fixtures::write_npy(&path, &fixtures::mk_random(&[4, 4], &[8, 8], 3), Ty::U16);
    let open = || -> std::sync::Arc<dyn dataset::Dataset> {
        std::sync::Arc::new(PanicsAt { inner: dataset::open(&path, &OpenOptions::default()).unwrap(), frame: 5 })
    };
    let sumsig = || udf_host::builtins::get("sumsig").unwrap();
    let spec = || vec![udf_host::exec::UdfSpec { udf: sumsig(), params: Params::default() }];
    // Stopping at the failure: the run fails with an internal error naming the partition.
    let options = RunOptions { partitions: Some(4), threads: Some(2), ..RunOptions::default() };
    let err = udf_host::exec::Run::plan(open(), spec(), options.clone()).unwrap().execute().unwrap_err();
    assert!(matches!(err, RunError::Internal(_)), "{err:?}");
    assert!(err.to_string().contains("partition 1") && err.to_string().contains("panicked"), "{err}");
    // Going on: the other three partitions are merged, the failed one is recorded and
    // its positions are invalid; merged + failed = partitions.
    let options = RunOptions { keep_going: true, ..options };
    let mut iter = udf_host::exec::Run::plan(open(), spec(), options).unwrap().iter();
    let steps: Vec<_> = iter.by_ref().collect();
    assert_eq!(steps.iter().filter(|s| s.is_err()).count(), 1, "{steps:?}");
    iter.check_accounted().unwrap();
    let results = iter.results().unwrap();
    assert_eq!((results.stats.partitions_merged, results.stats.partitions_failed), (3, 1));
    assert_eq!(iter.failures().len(), 1);
    assert_eq!(iter.failures()[0].partition, Some(1));
    let valid = results.udfs[0].buffer("intensity").unwrap().valid.to_bools().unwrap();
    assert_eq!(valid.iter().filter(|v| !**v).count(), 4, "the failed partition's 4 frames are invalid");
}

/// Issue 33, finding 2: the result memory cap counted ROI-compressed buffers only. 65536
/// one-pixel masks over a 16-position ROI of a 4096 x 4096 scan are 4 MiB merged, but the
/// results expand them to the whole scan (4 PiB): the allocation aborted the process
/// with nothing written. What is really allocated is counted, and the run is refused
/// before it starts, naming the buffer and the sizes.
#[test]
fn results_that_expand_beyond_memory_are_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("scan.raw");
    // Sparse: 4096 x 4096 frames of 4 x 4 uint8, all zero.
    std::fs::File::create(&data).unwrap().set_len(4096 * 4096 * 16).unwrap();
    let masks_path = dir.path().join("masks.npy");
    let masks: Vec<u8> = (0..65536 * 16).map(|i| u8::from(i % 16 == (i / 16) % 16)).collect();
    let masks = udf_host::array::NdArray::from_vec(&[65536, 4, 4], masks).unwrap();
    udf_host::npy::write_array(&mut std::fs::File::create(&masks_path).unwrap(), &masks).unwrap();
    let out = dir.path().join("out");
    let (code, msg) = crate::cli::cli(&[
        "run",
        "builtin:masks",
        "--param",
        &format!("masks=@{}", masks_path.display()),
        &data.display().to_string(),
        "--format",
        "raw",
        "--dtype",
        "uint8",
        "--sig-shape",
        "4,4",
        "--nav-shape",
        "4096,4096",
        "--roi-rect",
        "0:4,0:4",
        "--out",
        &out.display().to_string(),
    ])
    .expect_err("the run is refused");
    assert_eq!(code, udf_host::cli::exit::USER_ERROR, "{msg}");
    assert!(msg.contains("expanded to the whole scan") && msg.contains("'intensity' of 'masks'"), "{msg}");
    assert!(!out.exists(), "nothing written");
}

/// Issue 33, finding 2: the PNG previews (`--preview`, and those every `--snapshot-every`
/// snapshot draws) were not counted in `--max-result-memory`. They are: a cap the results
/// fit under alone refuses the run when previews are drawn, naming them.
#[test]
fn previews_count_against_the_result_memory_cap() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("scan.npy");
    // A 64 x 64 frame sum: 16 KiB of results, an image upscaled to 256 x 256 with its
    // colour bar (about 1.5 MiB to draw).
    fixtures::write_npy(&data, &fixtures::mk_random(&[4, 4], &[64, 64], 1), Ty::F32);
    let out = dir.path().join("out");
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "builtin:sum", data.to_str().unwrap(), "--max-result-memory", "1M", "--force"];
        args.extend_from_slice(&["--out", out.to_str().unwrap()]);
        args.extend_from_slice(extra);
        crate::cli::cli(&args)
    };
    run(&[]).expect("the results alone fit in 1 MiB");
    std::fs::remove_dir_all(&out).unwrap();
    for extra in [&["--preview"][..], &["--snapshot-every", "60"]] {
        let (code, msg) = run(extra).expect_err("with previews they do not");
        assert_eq!(code, udf_host::cli::exit::USER_ERROR, "{extra:?}: {msg}");
        assert!(msg.contains("previews") && msg.contains("--max-result-memory"), "{extra:?}: {msg}");
        assert!(!out.exists(), "{extra:?}: nothing written");
    }
}
