//! Plugins written with host arrays against the native built-ins ("Languages" in
//! docs/benchmarks.md): on the benchmark datasets (`udf_host_tests::bench_data`, float32
//! and uint16, 2 GiB and 1 GiB), for `sum`, `sumsig`, `stddev` and `masks` (16 masks),
//! the GB/s of
//! - the native built-in (`builtin:NAME`),
//! - the Rust probe `probe_host_array_ops` (the same host-array operations as the Python
//!   plugins, `op=NAME`),
//! - the Python plugin `target/polyglot/python/NAME.wasm` (`scripts/polyglot/python.sh`),
//! - the JavaScript plugin `target/polyglot/js/NAME.wasm` (`scripts/polyglot/js.sh`; all four
//!   are written with host arrays),
//!
//! each run as `udf-host run` would (all cores, default partitions), the variants of a
//! case taking turns, best of `$UDF_BENCH_REPEAT` (default 3) rounds. Then the cost of
//! one host call on a small array: the probe's `op=calls` (`small + 1.0` on 4 float32
//! values, the result dropped) on one thread, wall time / calls.
//!
//! ```sh
//! scripts/polyglot/python.sh && scripts/polyglot/js.sh && cargo bench -p udf-host-tests --bench languages
//! UDF_BENCH_DTYPES=float32 cargo bench -p udf-host-tests --bench languages -- sum masks
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use udf_host::dataset::{self, OpenOptions};
use udf_host::exec::{Run, RunOptions, UdfSpec};
use udf_host::udf::{Param, ParamValue, Params, Udf};
use udf_host::wasm::{RuntimeOptions, WasmRuntime};
use udf_host_tests::bench_data::{DTYPES, NAV, SIG, data_path, ensure_data, masks};
use udf_host_tests::{fixtures, run_on};

fn runtime() -> &'static WasmRuntime {
    static RUNTIME: std::sync::OnceLock<WasmRuntime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| {
        // Python and JavaScript components take a while to compile the first time.
        let options =
            RuntimeOptions { compile_timeout: Duration::from_secs(3600), ..udf_host_tests::runtime_options() };
        WasmRuntime::new(options).expect("runtime")
    })
}

fn load(path: &Path) -> Arc<dyn Udf> {
    let (udf, _) = runtime().load(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Arc::new(udf)
}

fn polyglot(language: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/polyglot").join(language).join(format!("{name}.wasm"))
}

/// A UDF of a case with its params.
type Variant = (Arc<dyn Udf>, Vec<Param>);

fn text(name: &str, value: &str) -> Param {
    Param { name: name.into(), value: ParamValue::Text(value.into()) }
}

/// (label, built-in and plugin name, the plugins' params).
fn cases() -> Vec<(&'static str, &'static str, Vec<Param>)> {
    let masks16 = Param { name: "masks".into(), value: masks(16) };
    vec![
        ("sum", "sum", vec![]),
        ("sumsig", "sumsig", vec![]),
        ("stddev", "stddev", vec![]),
        ("masks16", "masks", vec![masks16]),
    ]
}

/// GB/s of one run of `udf` over `path`.
fn run_once(path: &Path, bytes: u64, udf: Arc<dyn Udf>, params: &[Param]) -> f64 {
    let data = dataset::open(path, &OpenOptions::default()).expect("open");
    let spec = UdfSpec { udf, params: Params(params.to_vec()) };
    let run = Run::plan(data, vec![spec], RunOptions::default()).expect("plan");
    let started = Instant::now();
    std::hint::black_box(run.execute().expect("run"));
    bytes as f64 / started.elapsed().as_secs_f64() / 1e9
}

fn main() {
    let filters: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let repeat: usize = std::env::var("UDF_BENCH_REPEAT").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let dtypes = std::env::var("UDF_BENCH_DTYPES").unwrap_or_else(|_| "float32,uint16".into());
    let load_avg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "{} threads, load average at start: {}",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        load_avg.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    let probe = udf_host_tests::plugin("probe_host_array_ops");
    for (dtype, descr, size) in DTYPES {
        if !dtypes.split(',').any(|d| d == dtype) {
            continue;
        }
        let path = data_path(dtype);
        let bytes = ensure_data(&path, descr, size);
        println!();
        println!(
            "### {dtype}: {} ({:.2} GiB, {} frames of {}x{}), best of {repeat}",
            path.display(),
            bytes as f64 / (1u64 << 30) as f64,
            NAV[0] * NAV[1],
            SIG[0],
            SIG[1]
        );
        println!();
        println!(
            "| case | native GB/s | Rust, host arrays | vs native | Python, host arrays | vs native | JavaScript | vs native |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|");
        for (label, name, params) in cases() {
            if !filters.is_empty() && !filters.iter().any(|f| label.contains(f.as_str())) {
                continue;
            }
            // The variants: (udf, params); None where the component is not built.
            let builtin = udf_host::builtins::get(name).expect("built-in");
            let mut probe_params = params.clone();
            probe_params.push(text("op", name));
            let mut variants: Vec<Option<Variant>> =
                vec![Some((builtin, params.clone())), Some((load(&probe), probe_params))];
            for language in ["python", "js"] {
                let path = polyglot(language, name);
                variants.push(path.exists().then(|| (load(&path), params.clone())));
            }
            let mut best = vec![0.0f64; variants.len()];
            for _ in 0..repeat {
                for (v, variant) in variants.iter().enumerate() {
                    if let Some((udf, p)) = variant {
                        best[v] = best[v].max(run_once(&path, bytes, udf.clone(), p));
                    }
                }
            }
            let native = best[0];
            let cell = |v: usize| match variants[v] {
                Some(_) => format!("{:.2} | {:.0} %", best[v], 100.0 * best[v] / native),
                None => "not built | –".into(),
            };
            println!("| {label} | {native:.2} | {} | {} | {} |", cell(1), cell(2), cell(3));
        }
    }
    per_call_cost(&probe);
}

/// The cost of one host call on a small array, from the probe's `op=calls`.
fn per_call_cost(probe: &Path) {
    const CALLS: i64 = 20_000;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("small.npy");
    fixtures::write_npy_f32(&path, &[64], &[4, 4], &[1.0; 64 * 16]);
    let udf = load(probe);
    let time = |calls: i64| {
        let params = Params(vec![text("op", "calls"), Param { name: "calls".into(), value: ParamValue::Int(calls) }]);
        let options = RunOptions { threads: Some(1), tile_shape: Some(vec![1, 4, 4]), ..RunOptions::default() };
        let started = Instant::now();
        run_on(&path, &OpenOptions::default(), vec![(udf.clone(), params)], options).expect("run");
        started.elapsed().as_secs_f64()
    };
    time(CALLS); // warm up
    let (mut with, mut without) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..5 {
        with = with.min(time(CALLS));
        without = without.min(time(0));
    }
    let per_call = (with - without) / (64 * CALLS) as f64;
    println!();
    println!(
        "Per-call cost (Rust probe, `small + 1.0` on 4 float32 values, result dropped; 64 tiles × {CALLS} calls, \
         1 thread, best of 5, minus the run without calls): {:.2} µs",
        per_call * 1e6
    );
}
