//! Throughput of the native built-ins on a ≥ 2 GiB float32 dataset in the page cache,
//! next to memcpy bandwidth measured in the same run.
//!
//! ```sh
//! cargo bench -p udf-host-tests --bench builtins            # all built-ins
//! cargo bench -p udf-host-tests --bench builtins -- sum masks16   # some
//! ```
//!
//! The dataset (`$UDF_BENCH_DATA`, default `/tmp/udf-host-bench-f32.npy`: 128 × 64
//! frames of 256 × 256 float32, 2 GiB) is written once and read once to get it into the
//! page cache. Each built-in then runs alone, as `udf-host run builtin:NAME` would (all
//! cores, default partitions, the file freshly mapped), best of `$UDF_BENCH_REPEAT`
//! (default 3) runs. memcpy baselines, with as many threads as cores:
//! - `memcpy map→L2`: a fresh mapping of the file copied into a 1 MiB buffer per thread
//!   (page faults included, like a run) — the bandwidth at which data can be read;
//! - `memcpy map→L2 (mapped)`: the same over a mapping already faulted in;
//! - `memcpy heap→heap`: 2 × 256 MiB heap buffers per thread.
//!
//! Results and the machine go to docs/benchmarks.md (by hand).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use udf_host::array::NdArray;
use udf_host::dataset::{self, OpenOptions};
use udf_host::exec::{Run, RunOptions, UdfSpec};
use udf_host::udf::{Param, ParamValue, Params};

const NAV: [usize; 2] = [128, 64];
const SIG: [usize; 2] = [256, 256];

fn data_path() -> PathBuf {
    std::env::var_os("UDF_BENCH_DATA").map_or_else(|| PathBuf::from("/tmp/udf-host-bench-f32.npy"), PathBuf::from)
}

fn header() -> Vec<u8> {
    let dict = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}, {}, {}), }}",
        NAV[0], NAV[1], SIG[0], SIG[1]
    );
    let total = (10 + dict.len() + 1).div_ceil(64) * 64;
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&((total - 10) as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.resize(total - 1, b' ');
    out.push(b'\n');
    out
}

/// Write the dataset unless a file of the right size is there.
fn ensure_data(path: &Path) -> u64 {
    let frames = NAV[0] * NAV[1];
    let frame_len = SIG[0] * SIG[1];
    let header = header();
    let len = (header.len() + frames * frame_len * 4) as u64;
    if std::fs::metadata(path).is_ok_and(|m| m.len() == len) {
        return len;
    }
    eprintln!("writing {} ({:.2} GiB)...", path.display(), len as f64 / (1u64 << 30) as f64);
    let mut file = std::io::BufWriter::with_capacity(1 << 24, std::fs::File::create(path).expect("create data"));
    file.write_all(&header).expect("write");
    let mut frame = vec![0f32; frame_len];
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..frames {
        for v in frame.iter_mut() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            *v = (state >> 40) as f32 / (1u64 << 16) as f32;
        }
        file.write_all(bytemuck::cast_slice(&frame)).expect("write");
    }
    file.flush().expect("flush");
    len
}

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

/// `count` masks of the frame: rings of random-ish weights.
fn masks(count: usize) -> ParamValue {
    let len = SIG[0] * SIG[1];
    let values: Vec<f32> = (0..count * len).map(|i| ((i * 7919) % 1000) as f32 / 1000.0).collect();
    let array = NdArray::from_vec(&[count, SIG[0], SIG[1]], values).expect("masks");
    ParamValue::Array(Arc::new(array))
}

/// The built-ins to time: (label, built-in, params).
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
    let repeat: usize = std::env::var("UDF_BENCH_REPEAT").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let path = data_path();
    let bytes = ensure_data(&path);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    // Into the page cache.
    let warm = memcpy_from(&map(&path));
    println!(
        "dataset {} ({:.2} GiB float32, {} frames of {}x{}), {} threads, load average at start: {}",
        path.display(),
        bytes as f64 / (1u64 << 30) as f64,
        NAV[0] * NAV[1],
        SIG[0],
        SIG[1],
        threads(),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    println!("(first read of the file: {warm:.2} GB/s)");
    let best = |f: &mut dyn FnMut() -> f64| (0..repeat).map(|_| f()).fold(0.0, f64::max);
    let fresh = best(&mut || memcpy_from(&map(&path)));
    let mapped = map(&path);
    memcpy_from(&mapped);
    let hot = best(&mut || memcpy_from(&mapped));
    drop(mapped);
    let heap = best(&mut memcpy_heap);
    println!();
    println!("| what | GB/s | vs memcpy map→L2 | vs memcpy heap→heap |");
    println!("|---|---:|---:|---:|");
    println!("| memcpy map→L2 (fresh mapping) | {fresh:.2} | 100 % | {:.0} % |", 100.0 * fresh / heap);
    println!("| memcpy map→L2 (mapped) | {hot:.2} | {:.0} % | {:.0} % |", 100.0 * hot / fresh, 100.0 * hot / heap);
    println!("| memcpy heap→heap | {heap:.2} | {:.0} % | 100 % |", 100.0 * heap / fresh);
    for (label, name, params) in cases() {
        if !filters.is_empty() && !filters.iter().any(|f| label.contains(f.as_str())) {
            continue;
        }
        let mut tile = Vec::new();
        let mut run_once = || {
            let data = dataset::open(&path, &OpenOptions::default()).expect("open");
            let udf = udf_host::builtins::get(name).expect("built-in");
            let spec = UdfSpec { udf, params: params.clone() };
            let run = Run::plan(data, vec![spec], RunOptions::default()).expect("plan");
            tile = run.tiling().tile_shape();
            let started = Instant::now();
            let results = run.execute().expect("run");
            let seconds = started.elapsed().as_secs_f64();
            std::hint::black_box(&results);
            bytes as f64 / seconds / 1e9
        };
        let gbps = best(&mut run_once);
        println!(
            "| {label} (tile {tile:?}) | {gbps:.2} | {:.0} % | {:.0} % |",
            100.0 * gbps / fresh,
            100.0 * gbps / heap
        );
    }
}
