//! Measurements for the GPU benchmark (`tests/benches/gpu.rs`, scripts/gpu/): the
//! device's memory bandwidth (nominal and a device-to-device copy), the host-to-device
//! link from pinned memory, and each kernel on device-resident data, timed with CUDA
//! events. End-to-end runs are measured by the benchmark itself through `exec`.

use super::consumers::{MasksPath, consumer_with, float_of};
use super::feed::Chunk;
use super::gpu::Gpu;
use super::{GpuInfo, MaskStack, RadialMask, Request, Unavailable};
use crate::array::NdArray;
use crate::dtype::DType;
use crate::udf::SliceRuns;
use cudarc::driver::CudaStream;
use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use rayon::prelude::*;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// What the device is, with its nominal memory bandwidth.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeviceReport {
    pub info: GpuInfo,
    pub multiprocessors: u32,
    /// `2 × memory clock × bus width`, GB/s (10^9 bytes); `None` where the driver does
    /// not report the clock.
    pub nominal_bandwidth_gbps: Option<f64>,
}

/// The device, for the report's header.
///
/// # Errors
/// No usable GPU.
pub fn device() -> Result<DeviceReport, Unavailable> {
    let gpu = Gpu::get()?;
    let clock = gpu.ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE).ok();
    let width = gpu.ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH).ok();
    let nominal = match (clock, width) {
        (Some(khz), Some(bits)) if khz > 0 && bits > 0 => {
            Some(2.0 * f64::from(khz) * 1e3 * f64::from(bits) / 8.0 / 1e9)
        }
        _ => None,
    };
    Ok(DeviceReport { info: gpu.info.clone(), multiprocessors: gpu.sm_count, nominal_bandwidth_gbps: nominal })
}

/// Seconds per repetition of `work` on `stream`, timed with events (best of `rounds`
/// rounds of `repeat` repetitions, after one warm-up).
fn time(
    stream: &Arc<CudaStream>,
    repeat: usize,
    rounds: usize,
    mut work: impl FnMut() -> Result<(), String>,
) -> Result<f64, String> {
    let ctx = stream.context();
    let event = || ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(|e| format!("event: {e:?}"));
    work()?;
    stream.synchronize().map_err(|e| format!("{e:?}"))?;
    let mut best = f64::INFINITY;
    for _ in 0..rounds.max(1) {
        let (start, end) = (event()?, event()?);
        start.record(stream).map_err(|e| format!("{e:?}"))?;
        for _ in 0..repeat.max(1) {
            work()?;
        }
        end.record(stream).map_err(|e| format!("{e:?}"))?;
        let ms = start.elapsed_ms(&end).map_err(|e| format!("{e:?}"))?;
        best = best.min(f64::from(ms) / 1e3 / repeat.max(1) as f64);
    }
    Ok(best)
}

fn gpu() -> Result<&'static Gpu, String> {
    Gpu::get().map_err(|e| e.to_string())
}

/// Device-to-device copy of `bytes`: GB/s of traffic (read + write, 2 × bytes), the
/// practical peak the kernels are compared with.
///
/// # Errors
/// No GPU, out of memory, a CUDA error.
pub fn device_copy_gbps(bytes: usize) -> Result<f64, String> {
    let gpu = gpu()?;
    let stream = gpu.ctx.new_stream().map_err(|e| format!("{e:?}"))?;
    let src = stream.alloc_zeros::<u8>(bytes).map_err(|e| format!("{e:?}"))?;
    let mut dst = stream.alloc_zeros::<u8>(bytes).map_err(|e| format!("{e:?}"))?;
    let seconds = time(&stream, 10, 5, || stream.memcpy_dtod(&src, &mut dst).map_err(|e| format!("{e:?}")))?;
    Ok(2.0 * bytes as f64 / seconds / 1e9)
}

/// Host-to-device copy of `bytes` from pinned memory, GB/s.
///
/// # Errors
/// No GPU, out of memory, a CUDA error.
pub fn host_to_device_gbps(bytes: usize) -> Result<f64, String> {
    let gpu = gpu()?;
    let stream = gpu.ctx.new_stream().map_err(|e| format!("{e:?}"))?;
    // SAFETY: the contents are never read; only copied to the device.
    let pinned = unsafe { gpu.ctx.alloc_pinned::<u8>(bytes) }.map_err(|e| format!("{e:?}"))?;
    let mut dst = stream.alloc_zeros::<u8>(bytes).map_err(|e| format!("{e:?}"))?;
    let seconds = time(&stream, 5, 5, || stream.memcpy_htod(&pinned, &mut dst).map_err(|e| format!("{e:?}")))?;
    Ok(bytes as f64 / seconds / 1e9)
}

/// Host-to-device GB/s (all streams together) from pinned memory, `streams` streams each
/// copying `bytes` at once: whether copies in flight on several streams (as the feeding
/// lanes of several partitions are) share the link or add up.
///
/// # Errors
/// No GPU, out of memory, a CUDA error.
pub fn host_to_device_streams_gbps(bytes: usize, streams: usize) -> Result<f64, String> {
    let gpu = gpu()?;
    let mut lanes = Vec::with_capacity(streams);
    for _ in 0..streams.max(1) {
        let stream = gpu.ctx.new_stream().map_err(|e| format!("{e:?}"))?;
        // SAFETY: the contents are never read; only copied to the device.
        let pinned = unsafe { gpu.ctx.alloc_pinned::<u8>(bytes) }.map_err(|e| format!("{e:?}"))?;
        let dst = stream.alloc_zeros::<u8>(bytes).map_err(|e| format!("{e:?}"))?;
        lanes.push((stream, pinned, dst));
    }
    let mut best = f64::INFINITY;
    for round in 0..4 {
        let start = Instant::now();
        for (stream, pinned, dst) in &mut lanes {
            stream.memcpy_htod(&*pinned, dst).map_err(|e| format!("{e:?}"))?;
        }
        for (stream, _, _) in &lanes {
            stream.synchronize().map_err(|e| format!("{e:?}"))?;
        }
        if round > 0 {
            best = best.min(start.elapsed().as_secs_f64());
        }
    }
    Ok((bytes * lanes.len()) as f64 / best / 1e9)
}

/// The benchmark's file at `path`, mapped.
fn map_file(path: &Path) -> Result<memmap2::Mmap, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY: the benchmark's own file, not modified while mapped.
    unsafe { memmap2::Mmap::map(&file) }.map_err(|e| format!("{}: {e}", path.display()))
}

/// The CPU's copy from the mapping of the file at `path` (page-cached) into pinned memory
/// with every thread, as the feeding lanes' staging copy does: GB/s, best of 3.
///
/// # Errors
/// No GPU, the file cannot be mapped, out of pinned memory.
pub fn staging_copy_gbps(path: &Path) -> Result<f64, String> {
    let gpu = gpu()?;
    let map = map_file(path)?;
    let source = &map[..];
    let size = source.len().min(1 << 30);
    // SAFETY: only written (below) before it is read.
    let mut pinned = unsafe { gpu.ctx.alloc_pinned::<u8>(size.max(1)) }.map_err(|e| format!("{e:?}"))?;
    let staging = pinned.as_mut_slice().map_err(|e| format!("{e:?}"))?;
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let start = Instant::now();
        for piece in source.chunks(size.max(1)) {
            staging[..piece.len()]
                .par_chunks_mut(1 << 20)
                .zip(piece.par_chunks(1 << 20))
                .for_each(|(to, from)| to.copy_from_slice(from));
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    Ok(source.len() as f64 / best / 1e9)
}

/// A file mapping registered with the driver (read-only host memory the GPU copies from
/// directly, with no staging copy): the seconds registering took and the host-to-device
/// GB/s of the whole file through two streams, or why it cannot be done.
///
/// # Errors
/// No GPU, the file cannot be mapped, or the driver refuses the registration (its error).
pub fn registered_mapping(path: &Path) -> Result<(f64, f64), String> {
    use cudarc::driver::sys;
    let gpu = gpu()?;
    let supported = gpu
        .ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED)
        .map_err(|e| format!("{e:?}"))?;
    if supported == 0 {
        return Err("the device does not support registering read-only host memory".into());
    }
    let map = map_file(path)?;
    let len = map.len() / 4096 * 4096;
    gpu.ctx.bind_to_thread().map_err(|e| format!("{e:?}"))?;
    let ptr = map.as_ptr() as *mut std::ffi::c_void;
    let start = Instant::now();
    // SAFETY: `ptr..ptr + len` is a live, page-aligned mapping, unregistered below before
    // it is unmapped; read-only registration never writes to it.
    unsafe { sys::cuMemHostRegister_v2(ptr, len, sys::CU_MEMHOSTREGISTER_READ_ONLY) }
        .result()
        .map_err(|e| format!("cuMemHostRegister(READ_ONLY) of a file mapping: {e:?}"))?;
    let register = start.elapsed().as_secs_f64();
    let copy = (|| -> Result<f64, String> {
        const CHUNK: usize = 64 << 20;
        let streams =
            [gpu.ctx.new_stream().map_err(|e| format!("{e:?}"))?, gpu.ctx.new_stream().map_err(|e| format!("{e:?}"))?];
        let mut targets = Vec::new();
        for s in &streams {
            targets.push(s.alloc_zeros::<u8>(CHUNK).map_err(|e| format!("{e:?}"))?);
        }
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let start = Instant::now();
            for (i, offset) in (0..len).step_by(CHUNK).enumerate() {
                let n = CHUNK.min(len - offset);
                let (stream, target) = (&streams[i % 2], &mut targets[i % 2]);
                let (device, _written) = cudarc::driver::DevicePtrMut::device_ptr_mut(target, stream);
                // SAFETY: `n` bytes from inside the registered mapping into a device buffer
                // of CHUNK >= n bytes.
                unsafe { sys::cuMemcpyHtoDAsync_v2(device, map.as_ptr().add(offset).cast(), n, stream.cu_stream()) }
                    .result()
                    .map_err(|e| format!("copy from the registered mapping: {e:?}"))?;
            }
            for s in &streams {
                s.synchronize().map_err(|e| format!("{e:?}"))?;
            }
            best = best.min(start.elapsed().as_secs_f64());
        }
        Ok(len as f64 / best / 1e9)
    })();
    // SAFETY: registered above.
    let _ = unsafe { sys::cuMemHostUnregister(ptr) };
    Ok((register, copy?))
}

/// A kernel case of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelCase {
    Sum,
    SumSig,
    StdDev,
    /// Dense float32 masks of this count, by the path the built-in chooses (cuBLAS above
    /// the threshold where it can be loaded).
    Masks(usize),
    /// As `Masks`, always in the one-pass kernel.
    MasksOnePass(usize),
    /// As `Masks`, always with cuBLAS SGEMM.
    MasksGemm(usize),
    Disk,
    Com,
}

impl KernelCase {
    pub fn label(self) -> String {
        match self {
            KernelCase::Sum => "sum".into(),
            KernelCase::SumSig => "sumsig".into(),
            KernelCase::StdDev => "stddev".into(),
            KernelCase::Masks(n) => format!("masks{n}"),
            KernelCase::MasksOnePass(n) => format!("masks{n} (one-pass kernel)"),
            KernelCase::MasksGemm(n) => format!("masks{n} (cuBLAS)"),
            KernelCase::Disk => "disk".into(),
            KernelCase::Com => "com".into(),
        }
    }
}

/// GB/s of a kernel over `frames` frames of `sy × sx` pixels of `dtype` held on the
/// device (one chunk, the partition's buffers set up once; the bytes counted are the
/// frames' bytes).
///
/// # Errors
/// No GPU, out of memory, a dtype without kernels, a CUDA error.
pub fn kernel_gbps(case: KernelCase, dtype: DType, frames: usize, sy: usize, sx: usize) -> Result<f64, String> {
    let gpu = gpu()?;
    let float = if dtype == DType::F64 { DType::F64 } else { DType::F32 };
    let stream = gpu.ctx.new_stream().map_err(|e| format!("{e:?}"))?;
    let k = sy * sx;
    let elements = frames * k;
    let value = |i: usize| (i * 7919 % 4096) as u16;
    let data = match dtype {
        DType::U16 => {
            let values: Vec<u16> = (0..elements).into_par_iter().map(value).collect();
            stream.clone_htod(bytemuck::cast_slice::<u16, u8>(&values))
        }
        DType::F32 => {
            let values: Vec<f32> = (0..elements).into_par_iter().map(|i| f32::from(value(i))).collect();
            stream.clone_htod(bytemuck::cast_slice::<f32, u8>(&values))
        }
        other => return Err(format!("the benchmark makes float32 or uint16 data, not {other}")),
    }
    .map_err(|e| format!("upload: {e:?}"))?;
    let data_bytes = elements * dtype.size();
    let runs = [SliceRuns { run_len: k, starts: vec![0], slice_len: k }];
    let starts = stream.clone_htod(&[0u32]).map_err(|e| format!("{e:?}"))?;
    let (mask_count, path) = match case {
        KernelCase::Masks(n) => (n, MasksPath::Chosen),
        KernelCase::MasksOnePass(n) => (n, MasksPath::OnePass),
        KernelCase::MasksGemm(n) => (n, MasksPath::Gemm),
        _ => (0, MasksPath::Chosen),
    };
    let masks = NdArray::from_vec(&[mask_count, k], (0..mask_count * k).map(|i| (i % 3) as f32).collect::<Vec<f32>>())
        .map_err(|e| e.to_string())?;
    let radial = RadialMask {
        cy: sy as f64 / 2.0,
        cx: sx as f64 / 2.0,
        ri2: f64::NEG_INFINITY,
        ro2: (sy.min(sx) as f64 / 4.0).powi(2),
        weighted: case == KernelCase::Com,
        sparse: false,
    };
    let request = match case {
        KernelCase::Sum => Request::Sum,
        KernelCase::SumSig => Request::SumSig,
        KernelCase::StdDev => Request::StdDev { base: DType::F64, sum: float },
        KernelCase::Masks(n) | KernelCase::MasksOnePass(n) | KernelCase::MasksGemm(n) => Request::Masks {
            masks: MaskStack { values: &masks, count: n, sparse: false },
            buffer: "intensity",
            extra_shape: &[],
        },
        KernelCase::Disk | KernelCase::Com => {
            Request::Radial { mask: radial, result: float, buffer: "intensity", extra_shape: &[] }
        }
    };
    let float = float_of(request, float)?;
    gpu.prepare(&[(dtype, float)])?;
    let mut consumer = consumer_with(gpu, &stream, request, float, &[sy, sx], &runs, frames, path)?;
    let chunk = Chunk {
        dtype,
        data: &data,
        frames,
        slice_len: k,
        row0: 0,
        scheme_index: 0,
        starts: &starts,
        run_len: k,
        lane: 0,
        stream: &stream,
    };
    let seconds = time(&stream, 5, 5, || consumer.launch(gpu, &chunk))?;
    Ok(data_bytes as f64 / seconds / 1e9)
}
