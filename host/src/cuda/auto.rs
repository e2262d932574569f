//! What `--device auto` decides for a built-in with a kernel, once a GPU is usable: the
//! GPU only where it is expected to finish first. A GPU run from a file is bounded by
//! feeding the GPU (the CPU's copy into pinned memory and the host-to-device link), not
//! by the kernels, while the CPU built-ins scale with the threads; so the cheap built-ins
//! stay on a many-core CPU and the expensive ones (stddev, many masks) go to the GPU.
//!
//! The figures are from one machine (docs/benchmarks.md "GPU": an NVIDIA H200 host with
//! 16 cores, PCIe 5, page-cached files, 2026-11-27); they are estimates for other
//! machines, and `--device cuda` puts every built-in with a kernel on the GPU regardless.

use crate::dtype::DType;

/// GB/s of file data a GPU run reached end to end from the page cache (measured 26-33 GB/s
/// for every kernel but `masks`: the staging copy and the link bound it, not the kernels;
/// `masks` 22-24 on float32 files and 17-19 on uint16 ones, which cuBLAS gets converted).
fn gpu_fed_gbps(builtin: &str, narrow: bool) -> f64 {
    match (builtin, narrow) {
        ("masks", false) => 22.0,
        ("masks", true) => 18.0,
        _ => 25.0,
    }
}

/// Seconds per GB per CPU thread of a built-in on files of 4-byte (`wide`) or narrower
/// elements, measured with 16 threads: `(wide, narrow)`. For `masks` the time grows with
/// the mask count: `base + per_mask · count` (fitted through the reading cost, sum's,
/// and the 16-mask measurement).
fn cpu_seconds_per_gb(builtin: &str, masks: usize, narrow: bool) -> Option<f64> {
    let pick = |wide: f64, narrow_rate: f64| if narrow { 1.0 / narrow_rate } else { 1.0 / wide };
    Some(match builtin {
        "sum" => pick(3.4, 2.7),
        "sumsig" => pick(3.2, 2.3),
        "stddev" => pick(1.4, 0.9),
        "com" | "disk" | "ring" | "point" => pick(2.9, 2.0),
        "masks" => {
            let (base, at16) = if narrow { (1.0 / 2.7, 1.0 / 1.2) } else { (1.0 / 3.4, 1.0 / 2.0) };
            base + (at16 - base) / 16.0 * masks as f64
        }
        _ => return None,
    })
}

/// `Ok` if `auto` should put built-in `builtin` (with `masks` masks, for `masks`) on the
/// GPU for a file of `stored` elements read by `threads` CPU threads; else why not (for
/// `-v` and `results.json`).
///
/// # Errors
/// The estimate that keeps it on the CPU, in words.
pub fn prefers_gpu(builtin: &str, masks: usize, stored: DType, threads: usize) -> Result<(), String> {
    let narrow = stored.size() < 4;
    let Some(seconds) = cpu_seconds_per_gb(builtin, masks, narrow) else {
        return Ok(());
    };
    let per_thread = 1.0 / seconds;
    let cpu = per_thread * threads.max(1) as f64;
    let gpu = gpu_fed_gbps(builtin, narrow);
    if cpu < gpu {
        return Ok(());
    }
    Err(format!(
        "--device auto: {threads} CPU threads × ~{per_thread:.1} GB/s ({builtin} on {stored}) ≈ {cpu:.0} GB/s, faster than \
         the ~{gpu:.0} GB/s a GPU is fed at from a file (docs/gpu.md; --device cuda puts it on the GPU)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cheap_builtins_stay_on_many_cores_and_expensive_ones_go_to_the_gpu() {
        // One thread: every built-in is faster on the GPU.
        for name in ["sum", "sumsig", "stddev", "com", "disk", "masks"] {
            assert_eq!(prefers_gpu(name, 16, DType::F32, 1), Ok(()), "{name}");
        }
        // 16 threads (the measured machine): what the end-to-end figures showed.
        let sixteen = |name: &str, masks: usize, dtype: DType| prefers_gpu(name, masks, dtype, 16).is_ok();
        assert!(!sixteen("sum", 0, DType::F32) && !sixteen("sum", 0, DType::U16));
        assert!(!sixteen("com", 0, DType::F32));
        assert!(sixteen("stddev", 0, DType::F32) && sixteen("stddev", 0, DType::U16));
        assert!(!sixteen("masks", 16, DType::F32), "16 float32 masks: CPU 31 GB/s vs GPU 22 measured");
        assert!(!sixteen("masks", 16, DType::U16), "16 uint16 masks: CPU 17-21 GB/s vs GPU 17-19 measured");
        assert!(sixteen("masks", 40, DType::U16));
        assert!(sixteen("masks", 128, DType::F32));
        // The reason names the estimate and how to override it.
        let why = prefers_gpu("sum", 0, DType::F32, 64).unwrap_err();
        assert!(why.contains("64 CPU threads") && why.contains("--device cuda"), "{why}");
        // Built-ins without a figure are left to the GPU.
        assert_eq!(prefers_gpu("something-new", 0, DType::F32, 64), Ok(()));
    }
}
