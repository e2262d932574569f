//! Measurements for the GPU benchmark (`tests/benches/gpu.rs`, scripts/gpu/): the
//! device's memory bandwidth (nominal and a device-to-device copy), the host-to-device
//! link from pinned memory, and each kernel on device-resident data, timed with CUDA
//! events. End-to-end runs are measured by the benchmark itself through `exec`.

use super::consumers::{consumer, float_of};
use super::feed::Chunk;
use super::gpu::Gpu;
use super::{GpuInfo, MaskStack, RadialMask, Request, Unavailable};
use crate::array::NdArray;
use crate::dtype::DType;
use crate::udf::SliceRuns;
use cudarc::driver::CudaStream;
use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use std::sync::Arc;

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

/// A kernel case of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelCase {
    Sum,
    SumSig,
    StdDev,
    /// Dense float32 masks of this count (over 32: cuBLAS where it can be loaded).
    Masks(usize),
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
    let bytes: Vec<u8> = match dtype {
        DType::U16 => (0..elements).flat_map(|i| ((i * 7919 % 4096) as u16).to_ne_bytes()).collect(),
        DType::F32 => (0..elements).flat_map(|i| ((i * 7919 % 4096) as f32).to_ne_bytes()).collect(),
        other => return Err(format!("the benchmark makes float32 or uint16 data, not {other}")),
    };
    let data = stream.clone_htod(&bytes).map_err(|e| format!("upload: {e:?}"))?;
    let runs = [SliceRuns { run_len: k, starts: vec![0], slice_len: k }];
    let starts = stream.clone_htod(&[0u32]).map_err(|e| format!("{e:?}"))?;
    let mask_count = if let KernelCase::Masks(n) = case { n } else { 0 };
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
        KernelCase::Masks(n) => Request::Masks {
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
    let mut consumer = consumer(gpu, &stream, request, float, &[sy, sx], &runs, frames)?;
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
    Ok(bytes.len() as f64 / seconds / 1e9)
}
