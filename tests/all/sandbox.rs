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
    use udf_host::exec::{RunError, RunOptions};
    use udf_host::log::LogRecord;
    use udf_host::udf::{CallError, ParamValue};
    use udf_host::wasm::{ComponentCache, LoadErrorKind, RuntimeOptions, WasmRuntime};
    use udf_host_tests::fixtures::{self, Ty};
    use udf_host_tests::{params, plugin, run_on, runtime_options};

    /// Run the hostile probe with `attack` under `options`; also return the log lines.
    fn attack(attack: &str, options: RuntimeOptions) -> (Result<udf_host::exec::RunResults, RunError>, Vec<String>) {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let options = RuntimeOptions {
            logger: Arc::new(move |r: &LogRecord| sink.lock().unwrap().push(r.message.clone())),
            ..options
        };
        let runtime = WasmRuntime::new(options).unwrap();
        let (udf, _) = runtime.load(&plugin("probe_hostile")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.npy");
        fixtures::write_npy(&path, &fixtures::mk_random(&[8], &[4, 4], 1), Ty::F32);
        let p = params(&[("attack", ParamValue::Text(attack.into()))]);
        let options = RunOptions { partitions: Some(1), ..Default::default() };
        let result = run_on(&path, &OpenOptions::default(), vec![(Arc::new(udf), p)], options);
        let lines = lines.lock().unwrap().clone();
        (result, lines)
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

    #[test]
    fn behaving_baseline() {
        let results = attack("none", runtime_options()).0.unwrap();
        assert_eq!(results.udfs[0].buffer("x").unwrap().data.shape(), &[8]);
    }

    #[test]
    fn malformed_exports_are_rejected() {
        contract("huge-export", "sent 41943040 values");
        contract("wrong-shape", "exported as float32 [9], but is declared as float32 [8]");
        contract("wrong-dtype", "exported as float64 [8], but is declared as float32 [8]");
        contract("undeclared", "exported buffer 'y' was never declared");
        contract("missing", "buffer 'x' was declared but not exported");
    }

    #[test]
    fn absurd_declarations_are_rejected_before_allocating() {
        let err = attack("huge-decl", runtime_options()).0.unwrap_err();
        assert!(err.to_string().contains("result_buffers") && err.to_string().contains("is too large"), "{err}");
    }

    #[test]
    fn huge_error_messages_are_truncated() {
        let err = attack("huge-error", runtime_options()).0.unwrap_err();
        let msg = err.to_string();
        assert!(msg.len() < 8 * 1024, "{} bytes", msg.len());
        assert!(msg.contains("bytes cut]"), "says it was cut");
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
}
