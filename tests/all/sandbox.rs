//! The sandbox: a plugin gets nothing but `log`. Each capability a hostile plugin might
//! reach for through WASI gives an error or nothing.

use udf_host::dataset::OpenOptions;
use udf_host::exec::RunOptions;
use udf_host::udf::Params;
use udf_host_tests::fixtures::{self, Ty};
use udf_host_tests::reference::to_f64;
use udf_host_tests::{load, run_on};

/// The checks of tests/probes/sandbox, in order.
const CHECKS: [&str; 13] = [
    "read /etc/passwd",
    "list /",
    "list .",
    "write a file",
    "environment",
    "arguments",
    "wall clock",
    "monotonic clock",
    "random bytes",
    "tcp connect",
    "udp bind",
    "name lookup",
    "CPU-dependent relaxed SIMD",
];

#[test]
fn wasi_grants_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.npy");
    fixtures::write_npy(&path, &fixtures::mk_random(&[4], &[2, 2], 1), Ty::U8);
    let results =
        run_on(&path, &OpenOptions::default(), vec![(load("probe_sandbox"), Params::default())], RunOptions::default())
            .unwrap();
    let outcome = to_f64(&results.udfs[0].buffer("outcome").unwrap().data);
    assert_eq!(outcome.len(), CHECKS.len());
    let leaks: Vec<&str> = CHECKS.iter().zip(&outcome).filter(|(_, o)| **o != 1.0).map(|(c, _)| *c).collect();
    assert!(leaks.is_empty(), "the plugin obtained: {leaks:?} (outcome {outcome:?})");
    assert!(!std::path::Path::new("udf-probe-was-here.txt").exists());
}

mod hostile {
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};
    use udf_host::dataset::OpenOptions;
    use udf_host::exec::{RunError, RunOptions, RunResults};
    use udf_host::log::LogRecord;
    use udf_host::udf::{CallError, ParamValue, Udf};
    use udf_host::wasm::{ComponentCache, LoadErrorKind, RuntimeOptions, WasmRuntime};
    use udf_host_tests::fixtures::{self, Ty};
    use udf_host_tests::{params, plugin, run_on, runtime_options};

    /// What a run of the hostile probe gave: the result, the log lines (with their
    /// plugin and partition), and the runtime (for its memory budget).
    struct Outcome {
        result: Result<RunResults, RunError>,
        lines: Vec<LogRecord>,
        runtime: WasmRuntime,
    }

    /// Run the hostile probe with `attack` in call `at` (and `others` beside it) over 16
    /// frames of 4 x 4 under `options` and `run`.
    fn run_attack(attack: &str, at: &str, options: RuntimeOptions, run: RunOptions) -> Outcome {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let options =
            RuntimeOptions { logger: Arc::new(move |r: &LogRecord| sink.lock().unwrap().push(r.clone())), ..options };
        let runtime = WasmRuntime::new(options).unwrap();
        let (udf, _) = runtime.load(&plugin("probe_hostile")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.npy");
        fixtures::write_npy(&path, &fixtures::mk_random(&[16], &[4, 4], 1), Ty::F32);
        let p = params(&[("attack", ParamValue::Text(attack.into())), ("at", ParamValue::Text(at.into()))]);
        let result = run_on(&path, &OpenOptions::default(), vec![(Arc::new(udf) as Arc<dyn Udf>, p)], run);
        let lines = lines.lock().unwrap().clone();
        Outcome { result, lines, runtime }
    }

    /// Run the hostile probe with `attack` under `options`, one partition; also return
    /// the log lines.
    fn attack(attack: &str, options: RuntimeOptions) -> (Result<RunResults, RunError>, Vec<String>) {
        let run = RunOptions { partitions: Some(1), ..Default::default() };
        let outcome = run_attack(attack, "", options, run);
        (outcome.result, outcome.lines.into_iter().map(|r| r.message).collect())
    }

    #[track_caller]
    fn contract(attack_name: &str, needle: &str) {
        let started = Instant::now();
        match attack(attack_name, runtime_options()).0 {
            Err(RunError::Udf { error: CallError::Contract(message), .. }) => {
                assert!(message.contains(needle), "{attack_name}: {message}");
            }
            other => panic!("{attack_name}: expected a contract error, got {other:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(180), "{attack_name}: bounded time");
    }

    /// The error of a run that must fail, as text.
    #[track_caller]
    fn failure(outcome: &Outcome) -> String {
        match &outcome.result {
            Ok(_) => panic!("the run succeeded"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn behaving_baseline() {
        let results = attack("none", runtime_options()).0.unwrap();
        assert_eq!(results.udfs[0].buffer("x").unwrap().data.shape(), &[16]);
    }

    #[test]
    fn malformed_exports_are_rejected() {
        contract("huge-export", "sent 41943040 values");
        contract("wrong-shape", "exported as float32 [17], but is declared as float32 [16]");
        contract("wrong-dtype", "exported as float64 [16], but is declared as float32 [16]");
        contract("undeclared", "exported buffer 'y' was never declared");
        contract("missing", "buffer 'x' was declared but not exported");
    }

    #[test]
    fn absurd_declarations_are_rejected_before_allocating() {
        let err = attack("huge-decl", runtime_options()).0.unwrap_err();
        assert!(err.to_string().contains("result_buffers") && err.to_string().contains("is too large"), "{err}");
    }

    #[test]
    fn huge_error_messages_are_refused_before_the_host_copies_them() {
        // 64 MiB of message from `process`, which may hand back only an error message.
        let err = attack("huge-error", runtime_options()).0.unwrap_err();
        let msg = err.to_string();
        assert!(msg.len() < 8 * 1024, "{} bytes", msg.len());
        assert!(msg.contains("returned more data than the host accepts from an error message"), "{msg}");
    }

    #[test]
    fn log_spam_is_capped() {
        let started = Instant::now();
        let (result, lines) = attack("spam", runtime_options());
        result.unwrap();
        assert!(lines.len() <= udf_host::wasm::MAX_LOG_LINES + 1, "{} lines", lines.len());
        assert!(lines.iter().all(|l| l.len() <= udf_host::wasm::MAX_LOG_LINE + 64));
        assert!(lines.last().unwrap().contains("dropping the rest"));
        assert!(started.elapsed() < Duration::from_secs(120), "bounded time");
    }

    #[test]
    fn stack_overflow_traps() {
        // Rust keeps large locals on a stack in linear memory; overflowing it shows up as an
        // out-of-bounds access (deep recursion without such locals hits wasm's own stack
        // limit: "stack overflow").
        let err = attack("recurse", runtime_options()).0.unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("stack overflow") || msg.contains("stack overflowing"), "{msg}");
    }

    #[test]
    fn slow_compilation_is_abandoned() {
        let options = RuntimeOptions {
            cache: ComponentCache::new(None),
            compile_timeout: Duration::from_micros(1),
            ..runtime_options()
        };
        let runtime = WasmRuntime::new(options).unwrap();
        let started = Instant::now();
        let err = runtime.load(&plugin("probe_hostile")).err().expect("compiling in 1 µs is impossible");
        assert_eq!(err.kind, LoadErrorKind::Compile);
        assert!(err.to_string().contains("did not compile within"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    // Issue 15, item 1: a plugin that sleeps (std::thread::sleep) or polls a timer never
    // blocks the host on a real timer: timers are due at once, and a plugin that waits
    // for the frozen clock to move loops in wasm, where --timeout stops it.
    #[test]
    fn sleeping_and_polling_never_block_on_a_real_timer() {
        let timeout = Duration::from_millis(500);
        for (attack, at) in [("sleep", "process"), ("poll", "process"), ("sleep", "merge"), ("poll", "init")] {
            let options = RuntimeOptions { timeout, ..runtime_options() };
            let run = RunOptions { partitions: Some(2), threads: Some(2), ..Default::default() };
            let started = Instant::now();
            let outcome = run_attack(attack, at, options, run);
            let elapsed = started.elapsed();
            let msg = failure(&outcome);
            assert!(msg.contains("timed out") && msg.contains(at), "{attack} in {at}: {msg}");
            // Each sleep asks for an hour: a real timer would keep the host that long.
            assert!(elapsed < 4 * timeout + Duration::from_secs(2), "{attack} in {at}: took {elapsed:?}");
        }
    }

    #[test]
    fn a_plugin_that_naps_for_an_hour_goes_on_at_once_and_is_counted() {
        for at in ["init", "process", "export_buffers"] {
            let run = RunOptions { partitions: Some(2), ..Default::default() };
            let started = Instant::now();
            let results = run_attack("nap", at, runtime_options(), run).result.unwrap();
            assert!(started.elapsed() < Duration::from_secs(60), "{at}: no real hour");
            let waits: u64 = results.udfs[0].instances.iter().map(|(_, s)| s.timer_waits).sum();
            assert_eq!(waits, 2, "{at}: one nap per partition instance");
        }
    }

    // Host resources (WASI pollables, streams) an instance may hold are capped.
    #[test]
    fn hoarding_host_resources_traps() {
        let run = RunOptions { partitions: Some(1), ..Default::default() };
        let outcome = run_attack("resources", "process", runtime_options(), run);
        let msg = failure(&outcome);
        assert!(msg.contains("failed in process") && msg.contains("resource table"), "{msg}");
    }

    // Item 2: the total memory budget covers every instance's linear memory (and what
    // their calls return), and is given back.
    #[test]
    fn a_small_budget_fits_well_behaved_instances_and_is_given_back() {
        let options = RuntimeOptions { max_memory: 64 << 20, max_memory_total: 32 << 20, ..runtime_options() };
        let run = RunOptions { partitions: Some(8), threads: Some(4), ..Default::default() };
        let outcome = run_attack("none", "", options, run);
        let results = outcome.result.unwrap();
        assert_eq!(results.udfs[0].buffer("x").unwrap().data.shape(), &[16]);
        assert_eq!(outcome.runtime.budget().used(), 0, "every instance gave its memory back");
    }

    #[test]
    fn a_full_budget_refuses_memory_with_a_message_naming_it() {
        // Less total than one instance may have: the first growth beyond it traps.
        let options = RuntimeOptions { max_memory: 64 << 20, max_memory_total: 24 << 20, ..runtime_options() };
        let run = RunOptions { partitions: Some(1), threads: Some(1), ..Default::default() };
        let outcome = run_attack("allocate", "process", options, run);
        let msg = failure(&outcome);
        assert!(msg.contains("total memory budget of 24 MiB") && msg.contains("--max-memory-total"), "{msg}");
    }

    #[test]
    fn what_a_call_returns_is_refused_when_the_budget_has_no_room_for_it() {
        // 8 MiB of data in an instance of ~10 MiB: lifting it may need 3 x 11 MiB, but a
        // budget of 24 MiB leaves room for a third of what is free.
        let options = RuntimeOptions { max_memory: 64 << 20, max_memory_total: 24 << 20, ..runtime_options() };
        let run = RunOptions { partitions: Some(1), threads: Some(1), ..Default::default() };
        let outcome = run_attack("big", "export_buffers", options, run);
        let msg = failure(&outcome);
        assert!(
            msg.contains("returned more data than the host accepts: the run's total memory budget had room for")
                && msg.contains("--max-memory-total 24 MiB"),
            "{msg}"
        );
        assert_eq!(outcome.runtime.budget().used(), 0);
        // With room, the same data is lifted and then refused for its shape.
        let outcome = run_attack("big", "export_buffers", runtime_options(), RunOptions::default());
        assert!(failure(&outcome).contains("but sent 2097152 values"), "{}", failure(&outcome));
    }

    #[test]
    fn many_tiny_arrays_are_refused_within_the_budget() {
        for at in ["export_buffers", "merge", "get_results"] {
            let options = RuntimeOptions { max_memory: 64 << 20, max_memory_total: 256 << 20, ..runtime_options() };
            let run = RunOptions { partitions: Some(2), threads: Some(2), ..Default::default() };
            let outcome = run_attack("many", at, options, run);
            let msg = failure(&outcome);
            let refused = ["at most 1024", "returned 200000 buffers", "returned more data", "timed out"];
            assert!(refused.iter().any(|r| msg.contains(r)), "{at}: {msg}");
            assert_eq!(outcome.runtime.budget().used(), 0, "{at}: every reservation was given back");
        }
    }

    // Item 3: declarations are capped and checked in linear time.
    #[test]
    fn fifty_thousand_buffers_are_refused_at_once() {
        let started = Instant::now();
        let outcome = run_attack("oversized", "result_buffers", runtime_options(), RunOptions::default());
        let msg = failure(&outcome);
        assert!(msg.contains("result_buffers") && msg.contains("declares 50000 buffers; at most 1024"), "{msg}");
        assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
        let outcome = run_attack("odd", "result_buffers", runtime_options(), RunOptions::default());
        assert!(failure(&outcome).contains("extra shape of 40 axes; at most 32"), "{}", failure(&outcome));
    }

    // Item 4: names that clash with another buffer's files are refused when declared.
    #[test]
    fn clashing_and_unusable_names_are_refused_when_declared() {
        let outcome = run_attack("misnamed", "result_buffers", runtime_options(), RunOptions::default());
        let msg = failure(&outcome);
        assert!(msg.contains("result_buffers") && msg.contains("\"x.valid\" is not usable"), "{msg}");
        let outcome = run_attack("misnamed", "export_buffers", runtime_options(), RunOptions::default());
        let msg = failure(&outcome);
        assert!(msg.contains("export_buffers") && msg.contains("never declared"), "{msg}");
    }

    // Item 5: with keep_going, a plugin's custom valid mask cannot mark the frames of a
    // failed partition valid.
    #[test]
    fn the_hosts_valid_mask_wins_over_the_plugins() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.npy");
        fixtures::write_npy(&path, &fixtures::mk_random(&[16], &[4, 4], 1), Ty::F32);
        let (udf, _) = WasmRuntime::new(runtime_options()).unwrap().load(&plugin("probe_hostile")).unwrap();
        let p = params(&[("attack", ParamValue::Text("valid-lies".into()))]);
        let spec = udf_host::exec::UdfSpec { udf: Arc::new(udf), params: p };
        let data = udf_host::dataset::open(&path, &OpenOptions::default()).unwrap();
        let run = RunOptions { partitions: Some(4), threads: Some(1), keep_going: true, ..Default::default() };
        let mut iter = udf_host::exec::Run::plan(data, vec![spec], run).unwrap().iter();
        let steps: Vec<_> = iter.by_ref().collect();
        assert_eq!(steps.iter().filter(|s| s.is_err()).count(), 1, "partition 1 fails at frame 5: {steps:?}");
        let results = iter.results().unwrap();
        let x = results.udfs[0].buffer("x").unwrap();
        let expected: Vec<bool> = (0..16).map(|f| !(4..8).contains(&f)).collect();
        assert_eq!(x.valid.to_bools().unwrap(), expected, "the plugin said all are valid; frames 4..8 failed");
        assert!(!x.all_valid);
    }

    // Item 8: text a plugin controls reaches messages with its control characters escaped.
    #[test]
    fn control_characters_of_plugins_are_escaped() {
        let outcome = run_attack("odd", "process", runtime_options(), RunOptions::default());
        let msg = failure(&outcome);
        assert!(!msg.contains('\x1b') && !msg.contains('\r'), "{msg:?}");
        assert!(msg.contains("bad input\\n\\u{1b}[2K\\rerror: udf-host itself failed"), "{msg}");
    }

    // Item 9: the log tail keeps the last lines after the cap (a late panic's message is
    // in the error), and the run's total output is capped.
    #[test]
    fn a_panic_after_ten_thousand_log_lines_still_reaches_the_error() {
        let run = RunOptions { partitions: Some(1), ..Default::default() };
        let outcome = run_attack("late-panic", "", runtime_options(), run);
        let msg = failure(&outcome);
        assert!(msg.contains("late panic after 20000 lines"), "{msg}");
        assert!(msg.contains("line 19999"), "the last lines: {msg}");
        assert!(!outcome.lines.iter().any(|l| l.message.contains("late panic")), "the panic goes with the error only");
    }

    #[test]
    fn the_log_of_a_whole_run_is_capped() {
        // 8 instances of 2000 lines of 4000 bytes: 64 MB without the run's cap.
        let run = RunOptions { partitions: Some(8), threads: Some(2), ..Default::default() };
        let outcome = run_attack("chatty", "", runtime_options(), run);
        outcome.result.unwrap();
        let bytes: usize = outcome.lines.iter().map(|l| l.message.len()).sum();
        assert!(bytes <= udf_host::wasm::MAX_RUN_LOG_BYTES, "{bytes} bytes logged");
        let notices =
            outcome.lines.iter().filter(|l| l.message.contains("logged more than 16 MiB in this run")).count();
        assert_eq!(notices, 1, "one notice for the run");
    }

    /// Issue 33, finding 9: the log cap was the runtime's, so in a long-lived process (a
    /// notebook's `Context`, a Dask worker) one chatty run silenced the plugin's log for
    /// every later run. Each run has its own cap.
    #[test]
    fn the_log_cap_is_per_run_not_per_process() {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let options = RuntimeOptions {
            logger: Arc::new(move |r: &LogRecord| sink.lock().unwrap().push(r.clone())),
            ..runtime_options()
        };
        let runtime = WasmRuntime::new(options).unwrap();
        let udf: Arc<dyn Udf> = Arc::new(runtime.load(&plugin("probe_hostile")).unwrap().0);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.npy");
        fixtures::write_npy(&path, &fixtures::mk_random(&[16], &[4, 4], 1), Ty::F32);
        let chatty = params(&[("attack", ParamValue::Text("chatty".into()))]);
        let run = |partitions| {
            let run = RunOptions { partitions: Some(partitions), threads: Some(2), ..Default::default() };
            run_on(&path, &OpenOptions::default(), vec![(udf.clone(), chatty.clone())], run).unwrap();
            std::mem::take(&mut *lines.lock().unwrap())
        };
        // 8 instances of 2000 lines of 4000 bytes: past the cap.
        let first = run(8);
        assert!(first.iter().any(|l| l.message.contains("logged more than 16 MiB")), "the first run is capped");
        // One instance's 8 MB fit under a fresh cap.
        let second = run(1);
        let chatty_lines = second.iter().filter(|l| l.message.starts_with("cccc")).count();
        assert_eq!(chatty_lines, 2000, "the second run's log is its own: {} lines came through", chatty_lines);
    }

    /// Issue 33, finding 9: the plugin's main-side instance (plan, merge, results) lived as
    /// long as the loaded plugin, so a long-lived process kept its memory from one run to
    /// the next. A run's instances go with the run.
    #[test]
    fn a_loaded_plugin_keeps_no_instance_memory_between_runs() {
        let runtime = WasmRuntime::new(runtime_options()).unwrap();
        let udf: Arc<dyn Udf> = Arc::new(runtime.load(&plugin("probe_hostile")).unwrap().0);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.npy");
        fixtures::write_npy(&path, &fixtures::mk_random(&[16], &[4, 4], 1), Ty::F32);
        let none = params(&[("attack", ParamValue::Text("none".into()))]);
        for _ in 0..2 {
            let data = udf_host::dataset::open(&path, &OpenOptions::default()).unwrap();
            let spec = udf_host::exec::UdfSpec { udf: udf.clone(), params: none.clone() };
            let mut iter = udf_host::exec::Run::plan(data, vec![spec], RunOptions::default()).unwrap().iter();
            iter.by_ref().for_each(|step| step.map(drop).unwrap());
            iter.results().unwrap();
            assert!(runtime.budget().used() > 0, "the run's main-side instance holds memory while the run lives");
            drop(iter);
            assert_eq!(runtime.budget().used(), 0, "bytes of instance memory left after the run");
        }
    }

    // Item 10: contract errors name the lifecycle call and are the plugin's (not the user's).
    #[test]
    fn contract_errors_name_the_call_and_are_not_user_errors() {
        for (attack, at, needle) in [
            ("odd", "plan", "failed in plan: broke the contract: it chose the partition method"),
            ("misnamed", "result_buffers", "failed in result_buffers: broke the contract"),
            ("misnamed", "merge", "failed in merge, partition"),
            ("misnamed", "get_results", "failed in get_results: broke the contract"),
        ] {
            let outcome = run_attack(attack, at, runtime_options(), RunOptions::default());
            let err = outcome.result.err().unwrap();
            assert!(!err.is_user_error(), "{attack} in {at}: {err}");
            assert!(err.to_string().contains(needle), "{attack} in {at}: {err}");
        }
    }
}

/// The conformance kit flags plugins that sleep and buffer names that clash (issue 15).
mod conformance_kit {
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    use udf_host::conformance::{self, Config, Group, Status};
    use udf_host::udf::{ParamValue, Udf};
    use udf_host::wasm::{RuntimeOptions, WasmRuntime};
    use udf_host_tests::{params, plugin, runtime_options};

    fn check(attack: &str, at: &str, options: RuntimeOptions, groups: Option<Vec<Group>>) -> conformance::Report {
        let (udf, _) = WasmRuntime::new(options).unwrap().load(&plugin("probe_hostile")).unwrap();
        let config = Config {
            params: params(&[("attack", ParamValue::Text(attack.into())), ("at", ParamValue::Text(at.into()))]),
            threads: 2,
            groups,
            ..Config::default()
        };
        conformance::check_plugin(Arc::new(udf) as Arc<dyn Udf>, &config).unwrap()
    }

    #[test]
    fn a_plugin_that_sleeps_is_flagged() {
        let report = check("nap", "init", runtime_options(), Some(vec![Group::Resources]));
        assert_eq!(report.check("run.baseline").unwrap().status, Status::Pass, "the nap is over at once");
        let timers = report.check("resources.timers").unwrap();
        assert_eq!(timers.status, Status::Fail, "{timers:?}");
        assert!(timers.summary.contains("waited on a timer"), "{}", timers.summary);
        assert!(!report.passed);
        // A well-behaved run of the same plugin passes the check.
        let report = check("none", "", runtime_options(), Some(vec![Group::Resources]));
        assert_eq!(report.check("resources.timers").unwrap().status, Status::Pass);
    }

    #[test]
    fn a_plugin_that_sleeps_forever_is_flagged_in_about_one_timeout() {
        let timeout = Duration::from_millis(500);
        let options = RuntimeOptions { timeout, ..runtime_options() };
        let started = Instant::now();
        let report = check("sleep", "process", options, None);
        let elapsed = started.elapsed();
        let baseline = report.check("run.baseline").unwrap();
        assert_eq!(baseline.status, Status::Fail);
        assert!(baseline.evidence[0].message.contains("timed out"), "{:?}", baseline.evidence);
        assert!(baseline.evidence[1].message.contains("not run: the baseline on"), "{:?}", baseline.evidence);
        // One timeout, not one per run of the suite (~70).
        assert!(elapsed < 4 * timeout + Duration::from_secs(10), "took {elapsed:?}");
    }

    #[test]
    fn clashing_buffer_names_are_flagged() {
        let report = check("misnamed", "result_buffers", runtime_options(), Some(vec![Group::Declarations]));
        let buffers = report.check("declarations.buffers").unwrap();
        assert_eq!(buffers.status, Status::Fail, "{buffers:?}");
        assert!(buffers.summary.contains("\"x.valid\" is not usable"), "{}", buffers.summary);
    }
}

/// What the command line says and writes when plugins fail (issue 15, items 6, 10, 11).
mod command_line {
    use crate::cli::{cli, s};
    use udf_host::cli::exit;
    use udf_host_tests::fixtures::{self, Ty};
    use udf_host_tests::plugin;
    use udf_host_tests::reference::to_f64;

    fn read_json(path: &std::path::Path) -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn input(dir: &std::path::Path) -> (std::path::PathBuf, fixtures::Data) {
        let data = fixtures::mk_random(&[4, 4], &[4, 4], 5);
        let path = dir.join("in.npy");
        fixtures::write_npy(&path, &data, Ty::F32);
        (path, data)
    }

    /// `udf-host run hostile sumsig` on `path` into `out` with `extra` options; it must fail
    /// (exit 2). Its message and `results.json`.
    fn hostile_beside_sumsig(
        path: &std::path::Path,
        out: &std::path::Path,
        extra: &[&str],
    ) -> (String, serde_json::Value) {
        let (hostile, sumsig, path, out_s) = (s(&plugin("probe_hostile")), s(&plugin("sumsig")), s(path), s(out));
        let mut args = vec!["run", &hostile, &sumsig, &path, "--out", &out_s];
        args.extend_from_slice(extra);
        let (code, msg) = cli(&args).unwrap_err();
        assert_eq!(code, exit::PLUGIN_FAILURE, "{msg}");
        (msg, read_json(&out.join("results.json")))
    }

    // Item 6: a failing get_results costs the other plugins nothing.
    #[test]
    fn a_failing_get_results_keeps_the_other_plugins_results() {
        let dir = tempfile::tempdir().unwrap();
        let (path, data) = input(dir.path());
        let out = dir.path().join("out");
        let (msg, summary) = hostile_beside_sumsig(&path, &out, &["-p", "hostile.attack=fail-results"]);
        assert!(msg.contains("failed in get_results") && msg.contains("get_results fails on purpose"), "{msg}");
        assert_eq!(summary["status"], "failed");
        let failures = summary["failures"].as_array().unwrap();
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert_eq!(failures[0]["udf"], "hostile");
        assert_eq!(failures[0]["at"]["method"], "get_results");
        assert_eq!(failures[0]["partition"], serde_json::Value::Null);
        let names: Vec<&str> =
            summary["udfs"].as_array().unwrap().iter().map(|u| u["name"].as_str().unwrap()).collect();
        assert_eq!(names, vec!["sumsig"], "the failed plugin has no results");
        assert!(!out.join("hostile").exists());
        let sumsig = to_f64(&udf_host::npy::read_array(&out.join("sumsig/intensity.npy")).unwrap());
        let expected: Vec<f64> = (0..16).map(|f| data.frame(f).iter().map(|&v| f64::from(v as f32)).sum()).collect();
        udf_host_tests::reference::assert_close(&sumsig, &expected, 1e-5, "sumsig");
        assert!(!out.join("sumsig/intensity.valid.npy").exists(), "complete: every position valid");
    }

    // Item 6: a failed merge is listed (it stops the run; what is complete is written).
    #[test]
    fn a_failed_merge_is_listed_among_the_failures() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = input(dir.path());
        let out = dir.path().join("out");
        let extra = ["-p", "hostile.attack=trap", "-p", "hostile.at=merge", "--threads", "1", "--partitions", "4"];
        let (_, summary) = hostile_beside_sumsig(&path, &out, &extra);
        assert_eq!(summary["status"], "failed");
        let failures = summary["failures"].as_array().unwrap();
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert_eq!(failures[0]["at"]["method"], "merge");
        assert_eq!(failures[0]["partition"], 0);
        assert!(failures[0]["error"].as_str().unwrap().contains("hostile: trap in merge"), "{failures:?}");
        // The partition was merged into sumsig: its frames are valid there.
        let valid = udf_host::npy::read_array(&out.join("sumsig/intensity.valid.npy")).unwrap().to_bools().unwrap();
        assert_eq!(valid, (0..16).map(|f| f < 4).collect::<Vec<_>>());
    }

    // Item 10: a contract error of a plugin is exit 2 and names the call.
    #[test]
    fn contract_errors_are_plugin_failures_naming_the_call() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = input(dir.path());
        let out = dir.path().join("out");
        let (code, msg) = cli(&[
            "run",
            &s(&plugin("probe_hostile")),
            &s(&path),
            "--out",
            &s(&out),
            "-p",
            "attack=misnamed",
            "-p",
            "at=result_buffers",
        ])
        .unwrap_err();
        assert_eq!(code, exit::PLUGIN_FAILURE, "{msg}");
        assert!(msg.contains("failed in result_buffers: broke the contract"), "{msg}");
        assert!(!out.exists(), "nothing written");
    }

    // Item 11: the second instance of a plugin is NAME-2, for --param too.
    #[test]
    fn the_second_instance_of_a_plugin_takes_params_by_its_run_name() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = input(dir.path());
        let out = dir.path().join("out");
        let hostile = s(&plugin("probe_hostile"));
        let (code, msg) = cli(&[
            "run",
            &hostile,
            &hostile,
            &s(&path),
            "--out",
            &s(&out),
            "-p",
            "hostile-2.attack=odd",
            "-p",
            "hostile-2.at=process",
        ])
        .unwrap_err();
        assert_eq!(code, exit::PLUGIN_FAILURE, "{msg}");
        assert!(msg.contains("'hostile-2'") && msg.contains("failed in process"), "only the second one fails: {msg}");
        let out = dir.path().join("out2");
        let (code, msg) =
            cli(&["run", &hostile, &s(&path), "--out", &s(&out), "-p", "hostile-3.attack=odd"]).unwrap_err();
        assert_eq!(code, exit::USER_ERROR);
        assert!(msg.contains("no plugin named 'hostile-3'") && msg.contains("plugins: hostile"), "{msg}");
    }

    // Item 11: a Rust panic's message shows once, with the plugin's own frames readable.
    #[test]
    fn a_panic_is_reported_once_with_readable_frames() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = input(dir.path());
        let (code, msg) =
            cli(&["run", &s(&plugin("probe_trap")), &s(&path), "--out", &s(&dir.path().join("out")), "-p", "frame=3"])
                .unwrap_err();
        assert_eq!(code, exit::PLUGIN_FAILURE, "{msg}");
        assert_eq!(msg.matches("probe panics at frame 3").count(), 1, "{msg}");
        assert!(!msg.contains("_ZN") && !msg.contains("::h"), "demangled, without hashes: {msg}");
        assert!(
            msg.contains("(in <probe_trap::Trap as udf_sdk::udf::Udf>::process_frame"),
            "its own frame first: {msg}"
        );
    }

    // Item 11: a plugin failing on an input dtype another plugin raised is told so.
    #[test]
    fn a_dtype_raised_by_another_plugin_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = input(dir.path());
        let (code, msg) = cli(&[
            "run",
            &s(&plugin("probe_slow")),
            &s(&plugin("sum")),
            &s(&path),
            "--out",
            &s(&dir.path().join("out")),
            "-p",
            "sum.dtype=float64",
        ])
        .unwrap_err();
        assert_eq!(code, exit::PLUGIN_FAILURE, "{msg}");
        assert!(msg.contains("not float32"), "{msg}");
        assert!(
            msg.contains("'slow' asks for float32 input, but 'sum' raised the run's input dtype to float64"),
            "{msg}"
        );
    }

    // Item 11: the OS error of a missing dataset once; the dataset first is a usage error.
    #[test]
    fn usage_errors_read_well() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = input(dir.path());
        let out = s(&dir.path().join("out"));
        let args = ["udf-host", "run", &s(&plugin("sum")), "missing.npy", "--out", &out];
        let failure = udf_host::cli::execute(args).unwrap_err();
        assert_eq!(failure.code, exit::USER_ERROR);
        let text = udf_host::cli::error_text(&failure.error);
        assert!(text.contains("missing.npy"), "{text}");
        assert_eq!(text.matches("(os error 2)").count(), 1, "{text}");
        let (code, msg) = cli(&["run", &s(&path), &s(&plugin("sum")), "--out", &out]).unwrap_err();
        assert_eq!(code, exit::USER_ERROR);
        assert!(msg.contains("must be the dataset: udf-host run PLUGIN... DATA"), "{msg}");
    }
}
