//! Throughput of the native built-ins and their wasm twins on ≥ 1 GiB datasets in the
//! page cache (float32 and uint16), next to memcpy bandwidth measured in the same run.
//!
//! ```sh
//! cargo bench -p udf-host-tests --bench builtins            # everything
//! cargo bench -p udf-host-tests --bench builtins -- sum masks16   # some (label filter)
//! UDF_BENCH_DTYPES=uint16 UDF_BENCH_REPEAT=5 cargo bench -p udf-host-tests --bench builtins
//! ```
//!
//! The datasets (`$UDF_BENCH_DIR`, default `/tmp`: `udf-host-bench-float32.npy`, 2 GiB, and
//! `udf-host-bench-uint16.npy`, 1 GiB; 128 × 64 frames of 256 × 256) are written once
//! and read once to get them into the page cache. Each case then runs alone, as
//! `udf-host run` would (all cores, default partitions, the file freshly mapped), best of
//! `$UDF_BENCH_REPEAT` (default 5) runs: the native built-in, and for `sum`, `sumsig`,
//! `stddev`, `masks16` and `com` the wasm plugin of `plugins/` with epoch interruption
//! (the default) and without (`--trusted`). The variants of a case take turns, one run
//! each per round, so a busy moment of a shared machine slows all of them alike and
//! their ratios stay meaningful. memcpy baselines, as many threads as cores:
//! - `memcpy map→L2`: a fresh mapping of the file copied into a 1 MiB buffer per thread
//!   (page faults included, like a run) — the bandwidth at which data can be read;
//! - `memcpy map→L2 (mapped)`: the same over a mapping already faulted in;
//! - `memcpy heap→heap`: 2 × 256 MiB heap buffers per thread.
//!
//! GB/s = file bytes / wall time of `execute()`. "anon MiB" is the peak anonymous
//! (non-file) resident memory during the best run, sampled every 5 ms: what a run
//! allocates, without the page cache of the mapping. Results go to docs/benchmarks.md.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use udf_host::array::NdArray;
use udf_host::dataset::{self, OpenOptions};
use udf_host::exec::{Run, RunOptions, UdfSpec};
use udf_host::udf::{Param, ParamValue, Params, Udf};
use udf_host::wasm::{RuntimeOptions, WasmRuntime};
use udf_host_tests::bench_data::{DTYPES, NAV, SIG, data_path, ensure_data, masks};

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Copy `map` into a reused 1 MiB buffer per thread; returns GB/s.
fn memcpy_from(map: &[u8]) -> f64 {
    let t = threads();
    let started = Instant::now();
    std::thread::scope(|s| {
        for part in map.chunks(map.len().div_ceil(t)) {
            s.spawn(move || {
                let mut buf = vec![0u8; 1 << 20];
                for chunk in part.chunks(1 << 20) {
                    buf[..chunk.len()].copy_from_slice(chunk);
                    std::hint::black_box(&buf);
                }
            });
        }
    });
    map.len() as f64 / started.elapsed().as_secs_f64() / 1e9
}

/// Copy 256 MiB heap buffers (already touched) 4 times per thread; returns GB/s.
fn memcpy_heap() -> f64 {
    const SIZE: usize = 256 << 20;
    const TIMES: usize = 4;
    let t = threads();
    let mut buffers: Vec<(Vec<u8>, Vec<u8>)> = (0..t).map(|_| (vec![1u8; SIZE], vec![0u8; SIZE])).collect();
    let started = Instant::now();
    std::thread::scope(|s| {
        for (src, dst) in buffers.iter_mut() {
            s.spawn(move || {
                for _ in 0..TIMES {
                    dst.copy_from_slice(src);
                    std::hint::black_box(&dst);
                }
            });
        }
    });
    (SIZE * TIMES * t) as f64 / started.elapsed().as_secs_f64() / 1e9
}

fn map(path: &Path) -> memmap2::Mmap {
    let file = std::fs::File::open(path).expect("open data");
    // SAFETY: read-only mapping of a file nobody modifies during the benchmark.
    unsafe { memmap2::Mmap::map(&file) }.expect("map data")
}

fn param(name: &str, value: ParamValue) -> Param {
    Param { name: name.into(), value }
}

/// Peak anonymous resident memory of this process while `f` runs, sampled every 5 ms.
fn with_peak_anon<T>(f: impl FnOnce() -> T) -> (T, f64) {
    fn anon_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("RssAnon:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }
    let done = std::sync::atomic::AtomicBool::new(false);
    let peak = std::sync::atomic::AtomicU64::new(anon_kib());
    let value = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak.fetch_max(anon_kib(), std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        });
        let value = f();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        value
    });
    (value, peak.into_inner() as f64 / 1024.0)
}

/// A wasm plugin of `plugins/`, with or without epoch interruption.
fn plugin(name: &str, trusted: bool) -> Arc<dyn Udf> {
    static RUNTIMES: std::sync::OnceLock<[WasmRuntime; 2]> = std::sync::OnceLock::new();
    let runtimes = RUNTIMES.get_or_init(|| {
        let make = |trusted| {
            let options = RuntimeOptions { trusted, ..udf_host_tests::runtime_options() };
            WasmRuntime::new(options).expect("runtime")
        };
        [make(false), make(true)]
    });
    let (udf, _) = runtimes[usize::from(trusted)].load(&udf_host_tests::plugin(name)).expect("load plugin");
    Arc::new(udf)
}

/// The wasm twins benchmarked, by label.
fn twin(label: &str) -> Option<&'static str> {
    match label {
        "sum" => Some("sum"),
        "sumsig" => Some("sumsig"),
        "stddev" => Some("stddev"),
        "masks16" => Some("masks"),
        "com" => Some("com"),
        _ => None,
    }
}

/// The built-ins to time: (label, built-in, params).
/// Makes the UDF of a benchmark run.
type MakeUdf = dyn Fn() -> Arc<dyn Udf>;

fn cases() -> Vec<(&'static str, &'static str, Params)> {
    let f = |v: f64| ParamValue::Float(v);
    vec![
        ("sum", "sum", Params::default()),
        ("sumsig", "sumsig", Params::default()),
        ("masks16", "masks", Params(vec![param("masks", masks(16))])),
        ("masks1", "masks", Params(vec![param("masks", masks(1))])),
        (
            "masks16-sparse",
            "masks",
            Params(vec![param("masks", masks(16)), param("use_sparse", ParamValue::Text("true".into()))]),
        ),
        ("disk", "disk", Params(vec![param("r", f(40.0))])),
        ("ring", "ring", Params(vec![param("ri", f(20.0)), param("ro", f(60.0))])),
        ("point", "point", Params::default()),
        ("com", "com", Params::default()),
        ("stddev", "stddev", Params::default()),
        ("logsum", "logsum", Params::default()),
        (
            "fem",
            "fem",
            Params(vec![
                param(
                    "center",
                    ParamValue::Array(Arc::new(NdArray::from_vec(&[2], vec![128.0, 128.0]).expect("centre"))),
                ),
                param("rad_in", f(20.0)),
                param("rad_out", f(60.0)),
            ]),
        ),
        ("radial-fourier", "radial-fourier", Params::default()),
        ("crystallinity", "crystallinity", Params(vec![param("rad_in", f(10.0)), param("rad_out", f(40.0))])),
    ]
}

fn main() {
    let filters: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let repeat: usize = std::env::var("UDF_BENCH_REPEAT").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let dtypes = std::env::var("UDF_BENCH_DTYPES").unwrap_or_else(|_| "float32,uint16".into());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "{} threads, load average at start: {}",
        threads(),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    for (dtype, descr, size) in DTYPES {
        if !dtypes.split(',').any(|d| d == dtype) {
            continue;
        }
        let path = data_path(dtype);
        let bytes = ensure_data(&path, descr, size);
        bench_dataset(&path, dtype, bytes, repeat, &filters);
    }
}

fn bench_dataset(path: &Path, dtype: &str, bytes: u64, repeat: usize, filters: &[String]) {
    // Into the page cache.
    let warm = memcpy_from(&map(path));
    println!();
    println!(
        "### {dtype}: {} ({:.2} GiB, {} frames of {}x{})",
        path.display(),
        bytes as f64 / (1u64 << 30) as f64,
        NAV[0] * NAV[1],
        SIG[0],
        SIG[1],
    );
    println!();
    println!("(first read of the file: {warm:.2} GB/s)");
    let best = |f: &mut dyn FnMut() -> f64| (0..repeat).map(|_| f()).fold(0.0, f64::max);
    let fresh = best(&mut || memcpy_from(&map(path)));
    let mapped = map(path);
    memcpy_from(&mapped);
    let hot = best(&mut || memcpy_from(&mapped));
    drop(mapped);
    let heap = best(&mut memcpy_heap);
    println!();
    println!("| memcpy | GB/s |");
    println!("|---|---:|");
    println!("| map→L2 (fresh mapping) = 100 % | {fresh:.2} |");
    println!("| map→L2 (mapped) | {hot:.2} |");
    println!("| heap→heap | {heap:.2} |");
    println!();
    println!(
        "| case (tile) | native GB/s | vs memcpy | anon MiB | native, executor converts GB/s | wasm GB/s | wasm --trusted GB/s | wasm/native |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (label, name, params) in cases() {
        if !filters.is_empty() && !filters.iter().any(|f| label.contains(f.as_str())) {
            continue;
        }
        // (GB/s, peak anon MiB, tile shape) of one run of `udf`.
        let run_once = |udf: Arc<dyn Udf>, convert_in_executor: bool| -> (f64, f64, Vec<usize>) {
            let data = dataset::open(path, &OpenOptions::default()).expect("open");
            let spec = UdfSpec { udf, params: params.clone() };
            let options = RunOptions { convert_in_executor, ..RunOptions::default() };
            let run = Run::plan(data, vec![spec], options).expect("plan");
            let tile = run.tiling().tile_shape();
            let (seconds, anon) = with_peak_anon(|| {
                let started = Instant::now();
                let results = run.execute().expect("run");
                std::hint::black_box(&results);
                started.elapsed().as_secs_f64()
            });
            (bytes as f64 / seconds / 1e9, anon, tile)
        };
        let builtin = || udf_host::builtins::get(name).expect("built-in");
        // The variants of a case: the built-in; for integer data, the built-in with the
        // conversion done by the executor into a copied tile (as before built-ins
        // converted on read); the wasm twin with and without `--trusted`.
        let copied = dtype != "float32" && builtin().converts_on_read();
        let twin = twin(label);
        let mut variants: Vec<(Box<MakeUdf>, bool)> = vec![(Box::new(builtin), false)];
        if copied {
            variants.push((Box::new(builtin), true));
        }
        if let Some(plugin_name) = twin {
            variants.push((Box::new(move || plugin(plugin_name, false)), false));
            variants.push((Box::new(move || plugin(plugin_name, true)), false));
        }
        // Best of `repeat` rounds, each round running every variant once, so that a
        // busy moment of the machine hits all variants alike rather than one of them.
        let mut best = vec![(0.0f64, 0.0f64); variants.len()];
        let mut native_tile = Vec::new();
        for _ in 0..repeat {
            for (v, (udf, convert_in_executor)) in variants.iter().enumerate() {
                let (gbps, anon, tile) = run_once(udf(), *convert_in_executor);
                if v == 0 {
                    native_tile = tile;
                }
                if gbps > best[v].0 {
                    best[v] = (gbps, anon);
                }
            }
        }
        let (native, anon) = best[0];
        let copied = if copied { format!("{:.2}", best[1].0) } else { "–".into() };
        let (wasm, trusted) = match twin {
            Some(_) => {
                let (wasm, trusted) = (best[variants.len() - 2].0, best[variants.len() - 1].0);
                (format!("{wasm:.2}"), format!("{trusted:.2} | {:.0} %", 100.0 * trusted.max(wasm) / native))
            }
            None => ("–".into(), "– | –".into()),
        };
        println!(
            "| {label} ({native_tile:?}) | {native:.2} | {:.0} % | {anon:.0} | {copied} | {wasm} | {trusted} |",
            100.0 * native / fresh
        );
    }
}
