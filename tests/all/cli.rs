//! The command line, run in-process through `udf_host::cli::execute`.

use std::path::Path;
use udf_host::cli::{execute, exit};
use udf_host_tests::fixtures::{self, Ty};
use udf_host_tests::plugin;
use udf_host_tests::reference::{sum_frames, to_f64};

pub(crate) fn cli(args: &[&str]) -> Result<(), (u8, String)> {
    let cache = udf_host_tests::test_cache_dir();
    let mut all = vec!["udf-host".to_owned()];
    all.extend(args.iter().map(|s| (*s).to_owned()));
    if args.first() == Some(&"run") || args.first() == Some(&"inspect") {
        all.extend(["--cache-dir".to_owned(), cache.display().to_string(), "-q".to_owned()]);
        if args.first() == Some(&"inspect") {
            all.pop();
        }
    }
    execute(all).map_err(|f| (f.code, format!("{:#}", f.error)))
}

pub(crate) fn s(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn run_writes_npy_and_results_json() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[6, 5], &[7, 9], 5);
    let input = dir.path().join("in.npy");
    fixtures::write_npy(&input, &data, Ty::U16);
    let out = dir.path().join("out");
    cli(&["run", &s(&plugin("sum")), &s(&plugin("sumsig")), &s(&input), "--out", &s(&out), "--partitions", "3"])
        .unwrap();
    let sum = udf_host::npy::read_array(&out.join("sum/intensity.npy")).unwrap();
    assert_eq!(sum.shape(), &[7, 9]);
    assert_eq!(to_f64(&sum), sum_frames(&data.rounded(Ty::U16), None));
    let sumsig = udf_host::npy::read_array(&out.join("sumsig/intensity.npy")).unwrap();
    assert_eq!(sumsig.shape(), &[6, 5]);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(summary["dataset"]["nav_shape"], serde_json::json!([6, 5]));
    assert_eq!(summary["dataset"]["dtype"], "<u2");
    assert_eq!(summary["input_dtype"], "float32");
    assert_eq!(summary["partitions"]["count"], 3);
    assert_eq!(summary["udfs"][0]["name"], "sum");
    assert_eq!(summary["udfs"][0]["params"]["dtype"], "float32");
    assert_eq!(summary["udfs"][0]["buffers"][0]["file"], "sum/intensity.npy");
    assert_eq!(summary["udfs"][1]["buffers"][0]["shape"], serde_json::json!([6, 5]));
    assert!(summary["timings"]["process_seconds"].as_f64().is_some());
    assert!(summary["throughput_gb_per_s"].as_f64().is_some());
    // The file is the library's run summary: it reads back as one and writes the same
    // fields (numbers aside: a float may come back one unit in the last place off).
    let typed: udf_host::report::RunSummary = serde_json::from_value(summary.clone()).unwrap();
    assert_eq!(typed.status, udf_host::report::RunStatus::Complete);
    assert_eq!(without_numbers(&serde_json::to_value(&typed).unwrap()), without_numbers(&summary));
}

/// `value` with every number replaced by 0.
fn without_numbers(value: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Number(_) => Value::from(0),
        Value::Array(items) => Value::Array(items.iter().map(without_numbers).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), without_numbers(v))).collect()),
        other => other.clone(),
    }
}

#[test]
fn an_existing_output_is_kept_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    fixtures::write_npy(&input, &fixtures::mk_random(&[4], &[4, 4], 5), Ty::F32);
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("precious.txt"), "keep me").unwrap();
    let (code, msg) = cli(&["run", &s(&plugin("sum")), &s(&input), "--out", &s(&out)]).unwrap_err();
    assert_eq!(code, exit::USER_ERROR);
    assert!(msg.contains("already exists") && msg.contains("--force"), "{msg}");
    assert_eq!(std::fs::read_to_string(out.join("precious.txt")).unwrap(), "keep me");
    cli(&["run", &s(&plugin("sum")), &s(&input), "--out", &s(&out), "--force"]).unwrap();
    assert!(!out.join("precious.txt").exists());
    assert!(out.join("sum/intensity.npy").exists());
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_failing_run_writes_what_was_merged_and_says_what_failed() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    fixtures::write_npy(&input, &fixtures::mk_random(&[4, 4], &[4, 4], 5), Ty::F32);
    let out = dir.path().join("out");
    // One thread and four partitions of four frames: 0 and 1 merge, 2 fails at frame 9.
    let (code, msg) = cli(&[
        "run",
        &s(&plugin("sumsig")),
        &s(&plugin("probe_trap")),
        &s(&input),
        "--out",
        &s(&out),
        "--param",
        "trap.frame=9",
        "--threads",
        "1",
        "--partitions",
        "4",
    ])
    .unwrap_err();
    assert_eq!(code, exit::PLUGIN_FAILURE, "{msg}");
    assert!(msg.contains("probe panics at frame 9") && msg.contains("the run stopped"), "{msg}");
    let summary = read_json(&out.join("results.json"));
    assert_eq!(summary["status"], "failed");
    assert_eq!(summary["failures"][0]["partition"], 2);
    assert_eq!(summary["failures"][0]["udf"], "trap");
    assert_eq!(summary["failures"][0]["at"]["method"], "process");
    assert_eq!(summary["partitions"]["merged"], 2);
    let valid = udf_host::npy::read_array(&out.join("sumsig/intensity.valid.npy")).unwrap();
    let expected: Vec<bool> = (0..16).map(|f| f < 8).collect();
    assert_eq!(valid.to_bools().unwrap(), expected, "merged partitions are valid, the rest is not");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 2, "only the input and the output, no temporary directories: {left:?}");
}

#[test]
fn keep_going_skips_failed_partitions_and_exits_with_partial() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[4, 4], &[4, 4], 5);
    let input = dir.path().join("in.npy");
    fixtures::write_npy(&input, &data, Ty::F32);
    let out = dir.path().join("out");
    let (code, msg) = cli(&[
        "run",
        &s(&plugin("sumsig")),
        &s(&plugin("probe_trap")),
        &s(&input),
        "--out",
        &s(&out),
        "--param",
        "trap.frame=9",
        "--partitions",
        "4",
        "--keep-going",
    ])
    .unwrap_err();
    assert_eq!(code, exit::PARTIAL, "{msg}");
    assert!(msg.contains("1 of 4 partitions failed"), "{msg}");
    let summary = read_json(&out.join("results.json"));
    assert_eq!(summary["status"], "partial");
    assert_eq!(summary["partitions"]["merged"], 3);
    assert_eq!(summary["failures"].as_array().unwrap().len(), 1);
    assert_eq!(summary["failures"][0]["frames"], serde_json::json!([8, 11]));
    let sumsig = to_f64(&udf_host::npy::read_array(&out.join("sumsig/intensity.npy")).unwrap());
    let valid = udf_host::npy::read_array(&out.join("sumsig/intensity.valid.npy")).unwrap().to_bools().unwrap();
    for f in 0..16 {
        assert_eq!(valid[f], !(8..12).contains(&f), "frame {f}");
        if valid[f] {
            assert_eq!(sumsig[f], data.frame(f).iter().sum::<f64>(), "frame {f}");
        }
    }
}

#[test]
fn param_flags_are_checked_and_targeted() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    fixtures::write_npy(&input, &fixtures::mk_random(&[4], &[4, 4], 5), Ty::F32);
    let out = dir.path().join("out");
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "--force", "--out"];
        let out_s = s(&out);
        let sum = s(&plugin("sum"));
        let inp = s(&input);
        let mut owned: Vec<String> = args.drain(..).map(str::to_owned).collect();
        owned.push(out_s);
        owned.extend(extra.iter().map(|e| (*e).to_owned()));
        owned.push(sum);
        owned.push(inp);
        let refs: Vec<&str> = owned.iter().map(String::as_str).collect();
        cli(&refs)
    };
    let (code, msg) = run(&["--param", "bogus=1"]).unwrap_err();
    assert_eq!(code, exit::USER_ERROR);
    assert!(msg.contains("no plugin has a parameter 'bogus'") && msg.contains("sum: dtype"), "{msg}");
    let (code, msg) = run(&["--param", "nope.dtype=float64"]).unwrap_err();
    assert_eq!(code, exit::USER_ERROR);
    assert!(msg.contains("no plugin named 'nope'"), "{msg}");
    let (code, msg) = run(&["--param", "dtype"]).unwrap_err();
    assert_eq!(code, exit::USER_ERROR);
    assert!(msg.contains("NAME=VALUE"), "{msg}");
    run(&["--param", "sum.dtype=float64"]).unwrap();
    let sum = udf_host::npy::read_array(&out.join("sum/intensity.npy")).unwrap();
    assert_eq!(sum.dtype(), udf_host::dtype::DType::F64);
}

#[test]
fn bad_files_exit_with_a_user_or_plugin_error() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    fixtures::write_npy(&input, &fixtures::mk_random(&[4], &[4, 4], 5), Ty::F32);
    let out = s(&dir.path().join("out"));
    let (code, msg) = cli(&["run", &s(&plugin("sum")), "missing.npy", "--out", &out]).unwrap_err();
    assert_eq!(code, exit::USER_ERROR);
    assert!(msg.contains("missing.npy"), "{msg}");
    let not_wasm = dir.path().join("fake.wasm");
    std::fs::write(&not_wasm, "not wasm").unwrap();
    let (code, msg) = cli(&["run", &s(&not_wasm), &s(&input), "--out", &out]).unwrap_err();
    assert_eq!(code, exit::PLUGIN_FAILURE);
    assert!(msg.contains("fake.wasm") && msg.contains("not a WebAssembly file"), "{msg}");
}

#[test]
fn generate_and_inspect() {
    let dir = tempfile::tempdir().unwrap();
    let sample = dir.path().join("sample.npy");
    cli(&["generate", &s(&sample), "--nav-shape", "4,4", "--sig-shape", "8,8", "--dtype", "uint16"]).unwrap();
    let data = udf_host::dataset::open(&sample, &Default::default()).unwrap();
    assert_eq!(data.shape().nav, vec![4, 4]);
    assert_eq!(data.stored_dtype().dtype, udf_host::dtype::DType::U16);
    cli(&["inspect", &s(&plugin("sum"))]).unwrap();
    let (code, _) = cli(&["generate", &s(&dir.path().join("x.npy")), "--dtype", "float33"]).unwrap_err();
    assert_eq!(code, exit::USER_ERROR);
}

#[test]
fn roi_options_select_frames_and_write_valid_masks() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[4, 5], &[3, 3], 7);
    let input = dir.path().join("in.npy");
    fixtures::write_npy(&input, &data, Ty::F32);
    let out = dir.path().join("out");
    cli(&["run", &s(&plugin("sum")), &s(&plugin("sumsig")), &s(&input), "--out", &s(&out), "--roi-rect", "1:3,0:2"])
        .unwrap();
    let selected: Vec<bool> = (0..20).map(|i| (1..3).contains(&(i / 5)) && i % 5 < 2).collect();
    let sum = udf_host::npy::read_array(&out.join("sum/intensity.npy")).unwrap();
    assert_eq!(to_f64(&sum), sum_frames(&data, Some(&selected)));
    assert!(!out.join("sum/intensity.valid.npy").exists(), "sig results are all valid");
    let sumsig = to_f64(&udf_host::npy::read_array(&out.join("sumsig/intensity.npy")).unwrap());
    let valid = udf_host::npy::read_array(&out.join("sumsig/intensity.valid.npy")).unwrap();
    assert_eq!(valid.shape(), &[4, 5]);
    assert_eq!(valid.to_bools().unwrap(), selected);
    for (f, &sel) in selected.iter().enumerate() {
        assert_eq!(sumsig[f].is_nan(), !sel, "frame {f}: NaN outside the ROI");
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(summary["roi"]["count"], 4);
    assert_eq!(summary["udfs"][1]["buffers"][0]["valid_file"], "sumsig/intensity.valid.npy");

    // The same ROI from a .npy mask.
    let roi_path = dir.path().join("roi.npy");
    let mask = udf_host::array::NdArray::from_bools(&[4, 5], &selected).unwrap();
    udf_host::npy::write_array(&mut std::fs::File::create(&roi_path).unwrap(), &mask).unwrap();
    let out2 = dir.path().join("out2");
    cli(&["run", &s(&plugin("sum")), &s(&input), "--out", &s(&out2), "--roi", &s(&roi_path)]).unwrap();
    let sum2 = udf_host::npy::read_array(&out2.join("sum/intensity.npy")).unwrap();
    assert_eq!(to_f64(&sum2), to_f64(&sum));
    let (code, msg) =
        cli(&["run", &s(&plugin("sum")), &s(&input), "--out", &s(&dir.path().join("out3")), "--roi-rect", "0:9,0:1"])
            .unwrap_err();
    assert_eq!(code, exit::USER_ERROR);
    assert!(msg.contains("--roi-rect") && msg.contains("outside"), "{msg}");
}

/// What `udf-host run` does after planning is a library call a second front end makes
/// too: record a planned run into a results directory.
#[test]
fn the_library_records_a_run_as_the_command_line_does() {
    use udf_host::exec::{Run, RunOptions, UdfSpec};
    use udf_host::output::record::{Destination, record};
    use udf_host::report::{RunStatus, RunSummary};
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    let values: Vec<f32> = (0..24).map(|i| i as f32).collect();
    fixtures::write_npy_f32(&input, &[2, 3], &[2, 2], &values);
    let data = udf_host::dataset::DatasetSpec::file(&input, Default::default()).open().unwrap();
    let spec = UdfSpec { udf: udf_host::builtins::get("sumsig").unwrap(), params: Default::default() };
    let run = Run::plan(data, vec![spec], RunOptions::default()).unwrap();
    let summary = RunSummary::planned(&run, Vec::new(), Default::default());
    let out = dir.path().join("out");
    let to = Destination { dir: out.clone(), force: false, previews: true, snapshot_every: None };
    let recorded = record(run, summary, &to, std::time::Instant::now(), &mut ()).unwrap();
    assert_eq!(recorded.summary.status, RunStatus::Complete);
    assert!(recorded.stopped_by.is_none());
    let written: RunSummary =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(written.status, RunStatus::Complete);
    assert_eq!(written.failures.as_deref(), Some(&[][..]));
    let buffer = &written.udfs[0].buffers[0];
    assert_eq!((buffer.file.as_str(), buffer.shape.as_slice()), ("sumsig/intensity.npy", &[2, 3][..]));
    assert_eq!(buffer.previews.len(), 1, "a 2-D scan's nav buffer is an image");
    // Each frame's sum, from a plain loop over the values written.
    let expected: Vec<f64> = values.chunks(4).map(|frame| frame.iter().map(|&v| f64::from(v)).sum()).collect();
    assert_eq!(to_f64(&udf_host::npy::read_array(&out.join(&buffer.file)).unwrap()), expected);
}
