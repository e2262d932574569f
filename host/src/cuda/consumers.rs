//! The GPU side of each [`Request`]: a [`Consumer`] in the partition's feed holding its
//! device buffers for one partition (accumulators in double where the CPU's are float32, so
//! the GPU's numbers are at least as accurate), and the [`GpuRunner`] the built-in gets.
//! Exported buffers have the CPU built-ins' names, dtypes and shapes.

use super::feed::{self, Chunk, Consumer, Feed};
use super::gpu::Gpu;
use super::kernels::{MasksArgs, RadialArgs, StdDevArgs, SumArgs, SumSigArgs, ToF32Args};
use super::{RadialMask, Request};
use crate::array::NdArray;
use crate::dtype::DType;
use crate::udf::{CallError, InitContext, NamedBuffer, PartitionRunner, SliceRuns, Tile};
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig};
use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig};
use std::sync::{Arc, Mutex};

/// Threads per block of every kernel (`THREADS` in kernels.cu).
const THREADS: usize = 256;

/// Masks applied per pass of the one-pass kernel (its largest variant).
const MASKS_PER_PASS: usize = 32;

/// Float32 masks above this count go to cuBLAS SGEMM (where it loads); fewer run in the
/// one-pass kernel. From the benchmark on an H200 (docs/benchmarks.md "GPU"): with 4
/// masks the one-pass kernel reads 3.3 TB/s of frames, cuBLAS 2.0; with 8, 0.95 against
/// 2.0 (the one-pass kernel rereads every mask value from L2 for each few frames).
const GEMM_ABOVE: usize = 4;

/// How a masks consumer multiplies: chosen by the mask count ([`GEMM_ABOVE`]), or forced
/// (the benchmark compares both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MasksPath {
    Chosen,
    OnePass,
    Gemm,
}

/// A built-in's runner on the GPU: its consumer in the partition's shared feed.
struct GpuRunner {
    feed: Arc<Mutex<Feed>>,
    id: usize,
}

impl GpuRunner {
    fn feed(&self) -> Result<std::sync::MutexGuard<'_, Feed>, CallError> {
        self.feed.lock().map_err(|_| CallError::internal("the partition's GPU feed is poisoned"))
    }
}

impl PartitionRunner for GpuRunner {
    fn process(&mut self, tile: &Tile<'_>) -> Result<(), CallError> {
        self.feed()?.process(tile, self.id)
    }

    fn postprocess(&mut self) -> Result<(), CallError> {
        self.feed()?.postprocess(self.id)
    }

    fn export(&mut self) -> Result<Vec<NamedBuffer>, CallError> {
        self.feed()?.export(self.id)
    }
}

/// See [`super::start`].
pub(crate) fn start(ctx: &InitContext<'_>, request: Request<'_>) -> Result<Box<dyn PartitionRunner>, CallError> {
    let gpu = Gpu::get().map_err(|e| {
        CallError::invalid_data(format!(
            "the run plan puts this built-in on the GPU, but this process cannot use one: {e}"
        ))
    })?;
    let partition = ctx.partition.ok_or_else(|| CallError::internal("a GPU runner needs a partition"))?;
    let meta = ctx.dataset;
    let sig = meta.sig_shape.clone();
    let frame_len: usize = sig.iter().product();
    if u32::try_from(frame_len).is_err() || u32::try_from(partition.frames).is_err() {
        return Err(CallError::invalid_data("frames or partitions beyond 2^32 elements are not supported on the GPU"));
    }
    let float = float_of(request, meta.input_dtype).map_err(CallError::internal)?;
    // Compile (once per process) for the tiles this run can hand over: the stored dtype
    // read unconverted, or the input dtype.
    let pairs: Vec<(DType, DType)> = [meta.dataset_dtype, meta.input_dtype]
        .into_iter()
        .filter(|d| super::type_name(*d).is_some())
        .map(|d| (d, float))
        .collect();
    gpu.prepare(&pairs).map_err(|e| CallError::internal(format!("CUDA: {e}")))?;
    let runs = SliceRuns::for_scheme(&sig, &partition.tiling.slices);
    let frames = partition.frames;
    let make = move |stream: &Arc<CudaStream>| {
        consumer_with(gpu, stream, request, float, &sig, &runs, frames, MasksPath::Chosen)
    };
    let max_elem = meta.input_dtype.size().max(meta.dataset_dtype.size());
    let (feed, id) = feed::join(gpu, partition, &meta.sig_shape, max_elem, &make)
        .map_err(|e| CallError::internal(format!("CUDA: {e}")))?;
    Ok(Box::new(GpuRunner { feed, id }))
}

/// The float type a request computes in: the input dtype, or its masks' / result's.
///
/// # Errors
/// Not float32 or float64.
pub(crate) fn float_of(request: Request<'_>, input: DType) -> Result<DType, String> {
    let float = match request {
        Request::Sum | Request::SumSig | Request::StdDev { .. } => input,
        Request::Masks { masks, .. } => masks.values.dtype(),
        Request::Radial { result, .. } => result,
    };
    if matches!(float, DType::F32 | DType::F64) {
        Ok(float)
    } else {
        Err(format!("the GPU kernels compute in float32/float64, not {float}"))
    }
}

/// A request's device state for a partition of `frames` frames of shape `sig`, tiled as
/// `runs`, set up on `stream`; masks multiplied by `path` (the built-ins: [`MasksPath::Chosen`]).
///
/// # Errors
/// Out of device memory, or a request these frames do not fit.
#[allow(clippy::too_many_arguments)]
pub(crate) fn consumer_with(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    request: Request<'_>,
    float: DType,
    sig: &[usize],
    runs: &[SliceRuns],
    frames: usize,
    path: MasksPath,
) -> Result<Box<dyn Consumer>, String> {
    let frame_len: usize = sig.iter().product();
    let zeros = |len: usize| stream.alloc_zeros::<f64>(len.max(1)).map_err(|e| format!("device memory: {e:?}"));
    Ok(match request {
        Request::Sum => Box::new(SumConsumer { float, acc: zeros(frame_len)?, sig: sig.to_vec() }),
        Request::SumSig => Box::new(SumSigConsumer { float, acc: zeros(frames)?, frames }),
        Request::StdDev { base, sum } => Box::new(StdDevConsumer {
            float,
            base,
            sum_dtype: sum,
            sum: zeros(frame_len)?,
            varsum: zeros(frame_len)?,
            counts: vec![0; runs.len()],
            sig: sig.to_vec(),
        }),
        Request::Masks { masks, buffer, extra_shape } => {
            Box::new(MasksConsumer::new(gpu, stream, &masks, runs, frames, buffer, extra_shape, path)?)
        }
        Request::Radial { mask, result, buffer, extra_shape } => {
            let sx = match sig {
                [_, sx] => *sx,
                _ => return Err(format!("computed masks need 2-D frames, not {sig:?}")),
            };
            let count = if mask.weighted { 3 } else { 1 };
            Box::new(RadialConsumer {
                mask,
                float: result,
                sx,
                out: zeros(frames * count)?,
                shape: nav_shape(frames, extra_shape),
                name: buffer.to_owned(),
            })
        }
    })
}

fn nav_shape(frames: usize, extra: &[usize]) -> Vec<usize> {
    let mut shape = vec![frames];
    shape.extend_from_slice(extra);
    shape
}

fn launch_error(kernel: &str) -> impl Fn(cudarc::driver::DriverError) -> String + '_ {
    move |e| format!("launching {kernel}: {e:?}")
}

fn grid(x: usize, y: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (x.clamp(1, i32::MAX as usize) as u32, y.clamp(1, 65535) as u32, 1),
        block_dim: (THREADS as u32, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Blocks that keep every SM busy with a few blocks each.
fn target_blocks(gpu: &Gpu) -> usize {
    gpu.sm_count as usize * 8
}

/// Grid for kernels that give each block `per_block` frames: frame groups on y, the
/// pixels split on x until the GPU is full (at least 1024 pixels per block).
fn frame_group_grid(gpu: &Gpu, chunk: &Chunk<'_>, per_block: usize) -> LaunchConfig {
    let groups = chunk.frames.div_ceil(per_block).min(65535);
    let most = chunk.slice_len.div_ceil(THREADS * 4).max(1);
    grid(target_blocks(gpu).div_ceil(groups).clamp(1, most), groups)
}

/// Device values (double) as an array of `dtype` (float32/float64: `as` casts, like the
/// CPU built-ins' exports).
fn to_array(values: &[f64], dtype: DType, shape: &[usize]) -> Result<NdArray, String> {
    let len: usize = shape.iter().product();
    let values = values.get(..len).ok_or("fewer device values than the buffer has")?;
    match dtype {
        DType::F32 => NdArray::from_vec(shape, values.iter().map(|&v| v as f32).collect::<Vec<f32>>()),
        DType::F64 => NdArray::from_vec(shape, values.to_vec()),
        other => return Err(format!("cannot export {other} from the GPU")),
    }
    .map_err(|e| e.to_string())
}

fn download(stream: &Arc<CudaStream>, slice: &CudaSlice<f64>) -> Result<Vec<f64>, String> {
    stream.clone_dtoh(slice).map_err(|e| format!("download: {e:?}"))
}

/// `sum`: a frame-sized double accumulator.
struct SumConsumer {
    float: DType,
    acc: CudaSlice<f64>,
    sig: Vec<usize>,
}

impl Consumer for SumConsumer {
    fn launch(&mut self, gpu: &Gpu, chunk: &Chunk<'_>) -> Result<(), String> {
        let function = gpu.function("sum", chunk.dtype, self.float)?;
        let blocks_x = chunk.slice_len.div_ceil(THREADS);
        // Split the frames into groups when the pixels alone do not fill the GPU.
        let groups = (target_blocks(gpu) / blocks_x).clamp(1, chunk.frames);
        let group_frames = chunk.frames.div_ceil(groups).max(chunk.frames.div_ceil(65535));
        let args = SumArgs {
            tile: chunk.data,
            frames: chunk.frames as u32,
            slice_len: chunk.slice_len as u32,
            starts: chunk.starts,
            run_len: chunk.run_len as u32,
            group_frames: group_frames as u32,
            acc: &mut self.acc,
        };
        // SAFETY: `frames * slice_len` tile elements, the slice's run starts and a
        // frame-sized double accumulator, which every `pos` indexes within.
        unsafe { args.launch(chunk.stream, &function, grid(blocks_x, chunk.frames.div_ceil(group_frames))) }
            .map_err(launch_error("sum"))
    }

    fn export(&mut self, stream: &Arc<CudaStream>) -> Result<Vec<NamedBuffer>, String> {
        let array = to_array(&download(stream, &self.acc)?, self.float, &self.sig)?;
        Ok(vec![NamedBuffer { name: "intensity".into(), array }])
    }
}

/// `sumsig`: a double per frame of the partition.
struct SumSigConsumer {
    float: DType,
    acc: CudaSlice<f64>,
    frames: usize,
}

impl Consumer for SumSigConsumer {
    fn launch(&mut self, gpu: &Gpu, chunk: &Chunk<'_>) -> Result<(), String> {
        let function = gpu.function("sumsig", chunk.dtype, self.float)?;
        let per_frame =
            target_blocks(gpu).div_ceil(chunk.frames).clamp(1, chunk.slice_len.div_ceil(THREADS * 4).max(1));
        if chunk.row0 + chunk.frames > self.frames {
            return Err("a tile beyond the partition".into());
        }
        let args = SumSigArgs {
            tile: chunk.data,
            frames: chunk.frames as u32,
            slice_len: chunk.slice_len as u32,
            row0: chunk.row0 as u32,
            acc: &mut self.acc,
        };
        // SAFETY: rows `row0..row0 + frames` are within the partition-sized accumulator
        // (checked above).
        unsafe { args.launch(chunk.stream, &function, grid(per_frame, chunk.frames)) }.map_err(launch_error("sumsig"))
    }

    fn export(&mut self, stream: &Arc<CudaStream>) -> Result<Vec<NamedBuffer>, String> {
        let array = to_array(&download(stream, &self.acc)?, self.float, &[self.frames])?;
        Ok(vec![NamedBuffer { name: "intensity".into(), array }])
    }
}

/// `stddev`: per-pixel double sums and varsums, and the frames seen per signal slice.
struct StdDevConsumer {
    float: DType,
    base: DType,
    sum_dtype: DType,
    sum: CudaSlice<f64>,
    varsum: CudaSlice<f64>,
    counts: Vec<u64>,
    sig: Vec<usize>,
}

impl Consumer for StdDevConsumer {
    fn launch(&mut self, gpu: &Gpu, chunk: &Chunk<'_>) -> Result<(), String> {
        let function = gpu.function("stddev", chunk.dtype, self.float)?;
        let count = self.counts.get_mut(chunk.scheme_index).ok_or("unknown signal slice")?;
        let n0 = *count;
        *count += chunk.frames as u64;
        let args = StdDevArgs {
            tile: chunk.data,
            frames: chunk.frames as u32,
            slice_len: chunk.slice_len as u32,
            starts: chunk.starts,
            run_len: chunk.run_len as u32,
            n0,
            sum: &mut self.sum,
            varsum: &mut self.varsum,
        };
        // SAFETY: both state arrays are frame-sized.
        unsafe { args.launch(chunk.stream, &function, grid(chunk.slice_len.div_ceil(THREADS), 1)) }
            .map_err(launch_error("stddev"))
    }

    fn postprocess(&mut self) -> Result<(), String> {
        match self.counts.first() {
            Some(first) if self.counts.iter().any(|c| c != first) => {
                Err(format!("signal slices saw different frame counts: {:?}", self.counts))
            }
            _ => Ok(()),
        }
    }

    fn export(&mut self, stream: &Arc<CudaStream>) -> Result<Vec<NamedBuffer>, String> {
        let n = i64::try_from(self.counts.first().copied().unwrap_or(0)).map_err(|_| "frame count")?;
        let varsum = to_array(&download(stream, &self.varsum)?, self.base, &self.sig)?;
        let sum = to_array(&download(stream, &self.sum)?, self.sum_dtype, &self.sig)?;
        let count = NdArray::from_vec(&[1], vec![n]).map_err(|e| e.to_string())?;
        Ok(vec![
            NamedBuffer { name: "varsum".into(), array: varsum },
            NamedBuffer { name: "num_frames".into(), array: count },
            NamedBuffer { name: "sum".into(), array: sum },
        ])
    }
}

/// The product's output: doubles added by the one-pass kernel, or float32 by cuBLAS.
enum Products {
    OnePass(CudaSlice<f64>),
    Gemm {
        out: CudaSlice<f32>,
        blas: [Option<CudaBlas>; 2],
        /// The chunk as float32 (integer tiles).
        scratch: Option<CudaSlice<f32>>,
    },
}

/// `masks` (and the mask-based built-ins when given masks): the masks cut to each signal
/// slice, `(M, slice_len)` in the result dtype, as bytes.
struct MasksConsumer {
    float: DType,
    count: usize,
    slices: Vec<CudaSlice<u8>>,
    /// Leave out zero mask entries (sparse masks: as the CPU's CSR product).
    skip_zero: bool,
    products: Products,
    shape: Vec<usize>,
    name: String,
}

impl MasksConsumer {
    #[allow(clippy::too_many_arguments)]
    fn new(
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        masks: &super::MaskStack<'_>,
        runs: &[SliceRuns],
        frames: usize,
        buffer: &str,
        extra_shape: &[usize],
        path: MasksPath,
    ) -> Result<Self, String> {
        let (values, count, float) = (masks.values, masks.count, masks.values.dtype());
        // `count` masks of `frame_len` elements, whatever the array's shape (a
        // parameter's array is used as given: `(M, ..sig)`).
        let frame_len = values.len().checked_div(count).unwrap_or(0);
        let size = float.size();
        let mut slices = Vec::with_capacity(runs.len());
        for r in runs {
            let mut cut = Vec::with_capacity(count * r.slice_len * size);
            for m in 0..count {
                let mask = &values.bytes()[m * frame_len * size..(m + 1) * frame_len * size];
                for &start in &r.starts {
                    cut.extend_from_slice(&mask[start * size..(start + r.run_len) * size]);
                }
            }
            if cut.is_empty() {
                cut.resize(size, 0);
            }
            slices.push(stream.clone_htod(&cut).map_err(|e| format!("uploading the masks: {e:?}"))?);
        }
        let gemm = match path {
            MasksPath::Chosen => float == DType::F32 && count > GEMM_ABOVE && gpu.cublas,
            MasksPath::OnePass => false,
            MasksPath::Gemm if float == DType::F32 && gpu.cublas => true,
            MasksPath::Gemm => {
                return Err(format!("cuBLAS SGEMM needs float32 masks and libcublas, not {float} masks"));
            }
        };
        let products = if gemm {
            let out =
                stream.alloc_zeros::<f32>((frames * count).max(1)).map_err(|e| format!("device memory: {e:?}"))?;
            Products::Gemm { out, blas: [None, None], scratch: None }
        } else {
            Products::OnePass(
                stream.alloc_zeros::<f64>((frames * count).max(1)).map_err(|e| format!("device memory: {e:?}"))?,
            )
        };
        Ok(MasksConsumer {
            float,
            count,
            slices,
            skip_zero: masks.sparse,
            products,
            shape: nav_shape(frames, extra_shape),
            name: buffer.to_owned(),
        })
    }
}

impl Consumer for MasksConsumer {
    fn launch(&mut self, gpu: &Gpu, chunk: &Chunk<'_>) -> Result<(), String> {
        let masks = self.slices.get(chunk.scheme_index).ok_or("unknown signal slice")?;
        let (count, k, frames) = (self.count, chunk.slice_len, chunk.frames);
        if count == 0 || k == 0 {
            return Ok(());
        }
        match &mut self.products {
            Products::OnePass(out) => {
                for m0 in (0..count).step_by(MASKS_PER_PASS) {
                    let (kernel, per_block) = match count - m0 {
                        1 => ("masks1", 8),
                        2..=4 => ("masks4", 8),
                        5..=16 => ("masks16", 4),
                        _ => ("masks32", 2),
                    };
                    let function = gpu.function(kernel, chunk.dtype, self.float)?;
                    let args = MasksArgs {
                        tile: chunk.data,
                        frames: frames as u32,
                        slice_len: k as u32,
                        masks,
                        m_count: count as u32,
                        m0: m0 as u32,
                        skip_zero: i32::from(self.skip_zero),
                        out: &mut *out,
                        row0: chunk.row0 as u32,
                        width: count as u32,
                    };
                    let config = frame_group_grid(gpu, chunk, per_block);
                    // SAFETY: the masks are (count, k) of the float type, `out` holds
                    // (partition frames, count) doubles and the chunk's rows lie within
                    // the partition.
                    unsafe { args.launch(chunk.stream, &function, config) }.map_err(launch_error(kernel))?;
                }
                Ok(())
            }
            Products::Gemm { out, blas, scratch } => {
                let slot = blas.get_mut(chunk.lane).ok_or("unknown lane")?;
                if slot.is_none() {
                    *slot = Some(CudaBlas::new(chunk.stream.clone()).map_err(|e| format!("cuBLAS: {e:?}"))?);
                }
                let blas = slot.as_ref().ok_or("no cuBLAS handle")?;
                let n = frames * k;
                let data = if chunk.dtype == DType::F32 {
                    // SAFETY: the chunk holds `n` float32 values (its dtype), 256-byte aligned.
                    unsafe { chunk.data.transmute::<f32>(n) }.ok_or("a chunk smaller than its frames")?
                } else {
                    if scratch.as_ref().is_none_or(|s| s.len() < n) {
                        *scratch =
                            Some(chunk.stream.alloc_zeros::<f32>(n).map_err(|e| format!("device memory: {e:?}"))?);
                    }
                    let target = scratch.as_mut().ok_or("no scratch buffer")?;
                    let function = gpu.function("to_f32", chunk.dtype, DType::F32)?;
                    let total = n as u64;
                    {
                        let args = ToF32Args { input: chunk.data, n: total, out: &mut *target };
                        let blocks = n.div_ceil(THREADS).min(gpu.sm_count as usize * 32);
                        // SAFETY: `to_f32_impl` reads `n` elements of the chunk and writes `n`
                        // floats into the scratch buffer (at least `n` long).
                        unsafe { args.launch(chunk.stream, &function, grid(blocks, 1)) }
                            .map_err(launch_error("to_f32"))?;
                    }
                    target.slice(..n)
                };
                // SAFETY: the masks are (count, k) float32 values (the GEMM path is taken
                // for float32 masks only).
                let a = unsafe { masks.transmute::<f32>(count * k) }.ok_or("masks smaller than (M, pixels)")?;
                let rows = chunk.row0 * count..(chunk.row0 + frames) * count;
                let mut c = out.try_slice_mut(rows).ok_or("a tile beyond the partition")?;
                let int = |v: usize| i32::try_from(v).map_err(|_| "a matrix too large for cuBLAS".to_owned());
                // Row-major out (frames × M) += data (frames × K) · masksᵀ, as column-major
                // C (M × frames) = Aᵀ · B with A = masks (K × M, lda K), B = data (K × frames).
                let cfg = GemmConfig {
                    transa: cublasOperation_t::CUBLAS_OP_T,
                    transb: cublasOperation_t::CUBLAS_OP_N,
                    m: int(count)?,
                    n: int(frames)?,
                    k: int(k)?,
                    alpha: 1.0f32,
                    lda: int(k)?,
                    ldb: int(k)?,
                    beta: 1.0f32,
                    ldc: int(count)?,
                };
                // SAFETY: the shapes above describe exactly the three buffers' extents.
                unsafe { blas.gemm(cfg, &a, &data, &mut c) }.map_err(|e| format!("cuBLAS sgemm: {e:?}"))
            }
        }
    }

    fn export(&mut self, stream: &Arc<CudaStream>) -> Result<Vec<NamedBuffer>, String> {
        let array = match &self.products {
            Products::OnePass(out) => to_array(&download(stream, out)?, self.float, &self.shape)?,
            Products::Gemm { out, .. } => {
                let values = stream.clone_dtoh(out).map_err(|e| format!("download: {e:?}"))?;
                let len: usize = self.shape.iter().product();
                NdArray::from_vec(&self.shape, values.get(..len).ok_or("short download")?.to_vec())
                    .map_err(|e| e.to_string())?
            }
        };
        Ok(vec![NamedBuffer { name: self.name.clone(), array }])
    }
}

/// `disk`, `ring`, `point`, `com`: masks computed in the kernel.
struct RadialConsumer {
    mask: RadialMask,
    float: DType,
    sx: usize,
    out: CudaSlice<f64>,
    shape: Vec<usize>,
    name: String,
}

impl Consumer for RadialConsumer {
    fn launch(&mut self, gpu: &Gpu, chunk: &Chunk<'_>) -> Result<(), String> {
        let kernel = if self.mask.weighted { "radial3" } else { "radial1" };
        let function = gpu.function(kernel, chunk.dtype, self.float)?;
        let m = &self.mask;
        let args = RadialArgs {
            tile: chunk.data,
            frames: chunk.frames as u32,
            slice_len: chunk.slice_len as u32,
            starts: chunk.starts,
            run_len: chunk.run_len as u32,
            sx: self.sx as u32,
            cy: m.cy,
            cx: m.cx,
            ri2: m.ri2,
            ro2: m.ro2,
            skip_zero: i32::from(m.sparse),
            out: &mut self.out,
            row0: chunk.row0 as u32,
        };
        // SAFETY: `out` holds (partition frames, 1 or 3) doubles, the chunk's rows lie
        // within the partition, frames are 2-D of width sx.
        unsafe { args.launch(chunk.stream, &function, frame_group_grid(gpu, chunk, 8)) }.map_err(launch_error(kernel))
    }

    fn export(&mut self, stream: &Arc<CudaStream>) -> Result<Vec<NamedBuffer>, String> {
        let array = to_array(&download(stream, &self.out)?, self.float, &self.shape)?;
        Ok(vec![NamedBuffer { name: self.name.clone(), array }])
    }
}
