//! The GPU benchmark (docs/gpu.md, docs/benchmarks.md "GPU"): needs a build with the
//! `cuda` feature and a GPU. Prints a Markdown report (and writes it to the file named by
//! `UDF_GPU_REPORT`, if set):
//!
//! 1. the device: nominal memory bandwidth, a device-to-device copy, host-to-device from
//!    pinned memory;
//! 2. each kernel on device-resident data (256 × 256 frames, float32 and uint16), GB/s of
//!    frame data and its share of the device copy's bandwidth;
//! 3. end to end from the page cache: `Run::execute` on the CPU built-ins and on the GPU
//!    ones (float32 and uint16 `.npy` files of `UDF_GPU_BENCH_GIB` GiB, default 4 and 2,
//!    in `UDF_BENCH_DIR`, default /tmp), best of `UDF_BENCH_REPEAT` (3).
//!
//! Built by scripts/gpu/build.sh, run by scripts/gpu/run.sh (no Rust needed there).

#[cfg(not(any(feature = "cuda", feature = "cuda13")))]
fn main() {
    eprintln!("the GPU benchmark needs a build with `--features cuda` (or cuda13): scripts/gpu/build.sh");
    std::process::exit(1);
}

#[cfg(any(feature = "cuda", feature = "cuda13"))]
fn main() {
    if let Err(e) = gpu::main() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

#[cfg(any(feature = "cuda", feature = "cuda13"))]
mod gpu {
    use std::fmt::Write as _;
    use std::io::Write as _;
    use std::path::{Path, PathBuf};
    use std::sync::Arc;
    use std::time::Instant;
    use udf_host::array::NdArray;
    use udf_host::cuda::Device;
    use udf_host::cuda::bench::{self, KernelCase};
    use udf_host::dataset::{DatasetSpec, OpenOptions};
    use udf_host::dtype::DType;
    use udf_host::exec::{Run, RunOptions, UdfSpec};
    use udf_host::udf::{Param, ParamValue, Params};

    const SIDE: usize = 256;

    fn env_number(name: &str, default: f64) -> f64 {
        std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
    }

    pub fn main() -> Result<(), String> {
        let mut report = String::new();
        let device = bench::device().map_err(|e| e.to_string())?;
        let info = &device.info;
        let _ = writeln!(report, "# udf-host GPU benchmark\n");
        let _ = writeln!(
            report,
            "device: {} (compute capability {}.{}, {:.1} GiB, {} SMs), NVRTC {}.{}, udf-host {}\n",
            info.name,
            info.compute_capability.0,
            info.compute_capability.1,
            info.memory as f64 / (1u64 << 30) as f64,
            device.multiprocessors,
            info.nvrtc_version.0,
            info.nvrtc_version.1,
            env!("CARGO_PKG_VERSION"),
        );
        let copy = bench::device_copy_gbps(1 << 30)?;
        let link = bench::host_to_device_gbps(256 << 20)?;
        let nominal = device.nominal_bandwidth_gbps.map_or("not reported".into(), |g| format!("{g:.0} GB/s"));
        let _ = writeln!(report, "| memory bandwidth | GB/s |\n|---|---|");
        let _ = writeln!(report, "| nominal (2 × clock × bus width) | {nominal} |");
        let _ = writeln!(report, "| device-to-device copy (read + write) | {copy:.0} |");
        let _ = writeln!(report, "| host-to-device, pinned, 256 MiB | {link:.1} |\n");
        print!("{report}");

        let mut section = String::new();
        let _ = writeln!(section, "## Kernels on device-resident data ({SIDE} × {SIDE} frames)\n");
        let _ = writeln!(section, "| kernel | dtype | GB/s of frames | % of the device copy |\n|---|---|---|---|");
        let cases = [
            KernelCase::Sum,
            KernelCase::SumSig,
            KernelCase::StdDev,
            KernelCase::Masks(1),
            KernelCase::Masks(4),
            KernelCase::MasksGemm(4),
            KernelCase::MasksOnePass(8),
            KernelCase::MasksGemm(8),
            KernelCase::MasksOnePass(16),
            KernelCase::MasksGemm(16),
            KernelCase::MasksOnePass(32),
            KernelCase::MasksGemm(32),
            KernelCase::MasksOnePass(128),
            KernelCase::MasksGemm(128),
            KernelCase::Disk,
            KernelCase::Com,
        ];
        for case in cases {
            for (dtype, frames) in [(DType::F32, 4096), (DType::U16, 8192)] {
                let line = match bench::kernel_gbps(case, dtype, frames, SIDE, SIDE) {
                    Ok(g) => format!("| {} | {dtype} | {g:.0} | {:.0} % |", case.label(), 100.0 * g / copy),
                    Err(e) => format!("| {} | {dtype} | failed: {e} | |", case.label()),
                };
                println!("{line}");
                let _ = writeln!(section, "{line}");
            }
        }
        report.push_str(&section);
        report.push('\n');

        let end_to_end = end_to_end(link)?;
        report.push_str(&end_to_end);
        if let Ok(path) = std::env::var("UDF_GPU_REPORT") {
            std::fs::write(&path, &report).map_err(|e| format!("cannot write {path}: {e}"))?;
            eprintln!("report written to {path}");
        }
        Ok(())
    }

    /// A `.npy` file of `frames` frames of SIDE × SIDE pseudo-random counts 0..=1023.
    fn write_dataset(path: &Path, dtype: DType, frames: usize) -> Result<(), String> {
        let bytes = (frames * SIDE * SIDE * dtype.size()) as u64;
        if std::fs::metadata(path).is_ok_and(|m| m.len() > bytes) {
            return Ok(());
        }
        let err = |e: std::io::Error| format!("writing {}: {e}", path.display());
        let descr = if dtype == DType::F32 { "<f4" } else { "<u2" };
        let mut file = std::io::BufWriter::new(std::fs::File::create(path).map_err(err)?);
        let nav = [frames / 64, 64];
        file.write_all(&udf_host_tests::fixtures::npy_header(descr, &[nav[0], nav[1], SIDE, SIDE])).map_err(err)?;
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut frame = Vec::with_capacity(SIDE * SIDE * 4);
        for _ in 0..frames {
            frame.clear();
            for _ in 0..SIDE * SIDE {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let v = (state % 1024) as u16;
                if dtype == DType::F32 {
                    frame.extend_from_slice(&f32::from(v).to_le_bytes());
                } else {
                    frame.extend_from_slice(&v.to_le_bytes());
                }
            }
            file.write_all(&frame).map_err(err)?;
        }
        file.flush().map_err(err)
    }

    fn specs(case: &str) -> Vec<UdfSpec> {
        let builtin = |name: &str| udf_host::builtins::get(name).expect("built-in");
        let param = |name: &str, value: ParamValue| Params(vec![Param { name: name.into(), value }]);
        match case {
            "masks16" => {
                let values: Vec<f32> = (0..16 * SIDE * SIDE).map(|i| ((i * 31) % 7) as f32).collect();
                let masks = NdArray::from_vec(&[16, SIDE, SIDE], values).expect("masks");
                vec![UdfSpec { udf: builtin("masks"), params: param("masks", ParamValue::Array(Arc::new(masks))) }]
            }
            "com" => vec![UdfSpec { udf: builtin("com"), params: param("r", ParamValue::Float(64.0)) }],
            name => vec![UdfSpec { udf: builtin(name), params: Params::default() }],
        }
    }

    /// Seconds of `execute()` on the file, best of `repeat`.
    fn seconds(path: &Path, case: &str, device: Device, repeat: usize) -> Result<f64, String> {
        let mut best = f64::INFINITY;
        for _ in 0..repeat {
            let data = DatasetSpec::file(path, OpenOptions::default()).open().map_err(|e| e.to_string())?;
            let run = Run::plan(data, specs(case), RunOptions { device, ..Default::default() })
                .map_err(|e| format!("{case} on {device}: {e}"))?;
            let start = Instant::now();
            run.execute().map_err(|e| format!("{case} on {device}: {e}"))?;
            best = best.min(start.elapsed().as_secs_f64());
        }
        Ok(best)
    }

    fn end_to_end(link: f64) -> Result<String, String> {
        let dir = PathBuf::from(std::env::var("UDF_BENCH_DIR").unwrap_or_else(|_| "/tmp".into()));
        let gib = env_number("UDF_GPU_BENCH_GIB", 4.0);
        let repeat = env_number("UDF_BENCH_REPEAT", 3.0) as usize;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut out = String::new();
        let mut feeding = String::new();
        let _ = writeln!(
            out,
            "## End to end from the page cache (all CPU threads; best of {repeat})\n\n\
             | case | dtype | file GiB | CPU GB/s | GPU GB/s | GPU / CPU | GPU / host-to-device link | `auto` chooses ({threads} threads) |\n|---|---|---|---|---|---|---|---|"
        );
        println!("{out}");
        for dtype in [DType::F32, DType::U16] {
            let bytes_per_frame = SIDE * SIDE * dtype.size();
            let size = if dtype == DType::F32 { gib } else { gib / 2.0 };
            let frames = ((size * (1u64 << 30) as f64) as usize / bytes_per_frame).max(64) / 64 * 64;
            let path = dir.join(format!("udf-host-gpu-bench-{}.npy", dtype.name()));
            write_dataset(&path, dtype, frames)?;
            let file_bytes = std::fs::metadata(&path).map_err(|e| e.to_string())?.len() as f64;
            // Into the page cache.
            let mut file = std::fs::File::open(&path).map_err(|e| e.to_string())?;
            std::io::copy(&mut file, &mut std::io::sink()).map_err(|e| e.to_string())?;
            if dtype == DType::F32 {
                feeding.push_str(&feeding_report(&path, link));
            }
            for case in ["sum", "sumsig", "stddev", "masks16", "com"] {
                let cpu = seconds(&path, case, Device::Cpu, repeat)?;
                let gpu = seconds(&path, case, Device::Cuda, repeat)?;
                let (c, g) = (file_bytes / cpu / 1e9, file_bytes / gpu / 1e9);
                let (builtin, masks) = if case == "masks16" { ("masks", 16) } else { (case, 0) };
                let auto = match udf_host::cuda::auto::prefers_gpu(builtin, masks, dtype, threads) {
                    Ok(()) if g >= c => "GPU (right)",
                    Ok(()) => "GPU (wrong)",
                    Err(_) if c >= g => "CPU (right)",
                    Err(_) => "CPU (wrong)",
                };
                let line = format!(
                    "| {case} | {dtype} | {:.1} | {c:.1} | {g:.1} | {:.2} | {:.0} % | {auto} |",
                    file_bytes / (1u64 << 30) as f64,
                    g / c,
                    100.0 * g / link
                );
                println!("{line}");
                let _ = writeln!(out, "{line}");
            }
        }
        out.push('\n');
        out.push_str(&feeding);
        Ok(out)
    }

    /// Where the end-to-end time goes: the CPU's staging copy, the link with one and
    /// several streams, and a registered file mapping the GPU copies from directly.
    fn feeding_report(path: &Path, link: f64) -> String {
        let mut out =
            String::from("## Feeding the GPU from the page cache (float32 file)\n\n| step | GB/s |\n|---|---|\n");
        let mut line = |what: &str, value: Result<String, String>| {
            let line = format!("| {what} | {} |", value.unwrap_or_else(|e| format!("failed: {e}")));
            println!("{line}");
            let _ = writeln!(out, "{line}");
        };
        line("host-to-device, pinned, 1 stream (256 MiB)", Ok(format!("{link:.1}")));
        for streams in [2, 4] {
            line(
                &format!("host-to-device, pinned, {streams} streams at once (64 MiB each)"),
                bench::host_to_device_streams_gbps(64 << 20, streams).map(|g| format!("{g:.1}")),
            );
        }
        line(
            "staging copy: file mapping to pinned memory, all CPU threads",
            bench::staging_copy_gbps(path).map(|g| format!("{g:.1}")),
        );
        line(
            "host-to-device from the file mapping registered read-only (2 streams; registering took)",
            bench::registered_mapping(path).map(|(seconds, g)| format!("{g:.1} ({seconds:.3} s)")),
        );
        out.push('\n');
        out
    }
}
