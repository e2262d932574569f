//! The process's GPU: found and opened once ([`Gpu::get`]), its kernels compiled with
//! NVRTC per (tile type, float type) pair on first use and cached for the process, and a
//! pool of feeding lanes (stream, pinned staging buffer, device buffer) that partitions
//! borrow and give back.

use super::nvrtc::{self, Target};
use super::{GpuInfo, Unavailable};
use crate::dtype::DType;
use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, PinnedHostSlice};
use cudarc::nvrtc::Ptx;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// The GPU of this process (device 0).
pub(crate) struct Gpu {
    pub info: GpuInfo,
    pub ctx: Arc<CudaContext>,
    /// Streaming multiprocessors: launch sizes aim at a few blocks per SM.
    pub sm_count: u32,
    /// What NVRTC compiles to for this device.
    target: Target,
    /// Whether cuBLAS can be loaded (the GEMM path for many float32 masks).
    pub cublas: bool,
    /// Compiled modules by (tile type, float type).
    modules: Mutex<HashMap<(DType, DType), Arc<CudaModule>>>,
    /// Kernels already looked up, by entry point.
    functions: Mutex<HashMap<String, CudaFunction>>,
    /// Lane pairs given back by finished partitions, by capacity.
    lanes: Mutex<Vec<[Lane; 2]>>,
}

/// One feeding lane: a stream, a pinned staging buffer the CPU fills, and the device
/// buffer it is copied into; `copied` marks when the staging buffer is free again.
pub(crate) struct Lane {
    pub stream: Arc<CudaStream>,
    pub staging: PinnedHostSlice<u8>,
    pub input: CudaSlice<u8>,
    pub copied: CudaEvent,
}

impl Lane {
    pub fn capacity(&self) -> usize {
        self.staging.len()
    }
}

static GPU: OnceLock<Result<Gpu, Unavailable>> = OnceLock::new();

impl Gpu {
    /// The GPU, probed and opened on the first call.
    ///
    /// # Errors
    /// Why there is none (the same answer on every call).
    pub fn get() -> Result<&'static Gpu, Unavailable> {
        GPU.get_or_init(Gpu::open).as_ref().map_err(Clone::clone)
    }

    fn open() -> Result<Gpu, Unavailable> {
        // SAFETY: only tries to dlopen the driver library; no CUDA call.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(Unavailable::MissingLibrary {
                library: "CUDA driver",
                file: "libcuda.so.1",
                hint: "this needs a machine with an NVIDIA GPU and its driver installed",
            });
        }
        if !nvrtc::library_present() {
            return Err(Unavailable::MissingLibrary {
                library: "NVRTC",
                file: if cfg!(feature = "cuda13") { "libnvrtc.so.13" } else { "libnvrtc.so.12" },
                hint: "install CUDA's NVRTC, or `pip install nvidia-cuda-nvrtc-cu12` (CUDA 13: nvidia-cuda-nvrtc) \
                       and put its nvidia/cuda_nvrtc/lib directory on LD_LIBRARY_PATH",
            });
        }
        let no_device = |what: &str, e: &dyn std::fmt::Debug| Unavailable::NoDevice(format!("{what}: {e:?}"));
        let count = CudaContext::device_count().map_err(|e| no_device("cuInit/cuDeviceGetCount failed", &e))?;
        if count < 1 {
            return Err(Unavailable::NoDevice("the driver reports no CUDA device".into()));
        }
        let ctx = CudaContext::new(0).map_err(|e| no_device("cannot open device 0", &e))?;
        let name = ctx.name().map_err(|e| no_device("cuDeviceGetName", &e))?;
        let (major, minor) = ctx.compute_capability().map_err(|e| no_device("compute capability", &e))?;
        if major < 6 {
            return Err(Unavailable::NoDevice(format!(
                "{name} has compute capability {major}.{minor}; the kernels need 6.0 or newer"
            )));
        }
        let memory = ctx.total_mem().map_err(|e| no_device("cuDeviceTotalMem", &e))?;
        let sm_count = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(|e| no_device("multiprocessor count", &e))?;
        let nvrtc_version = nvrtc::version().map_err(Unavailable::NoDevice)?;
        let target = nvrtc::target_for(major, minor).map_err(Unavailable::NoDevice)?;
        // SAFETY: only tries to dlopen cuBLAS; no cuBLAS call.
        let cublas = unsafe { cudarc::cublas::sys::is_culib_present() };
        Ok(Gpu {
            info: GpuInfo { name, compute_capability: (major, minor), memory, nvrtc_version },
            ctx,
            sm_count: sm_count.max(1) as u32,
            target,
            cublas,
            modules: Mutex::new(HashMap::new()),
            functions: Mutex::new(HashMap::new()),
            lanes: Mutex::new(Vec::new()),
        })
    }

    /// Compile the kernels for every pair not compiled yet, in one NVRTC run.
    ///
    /// # Errors
    /// A pair without kernels, or NVRTC's or the driver's error.
    pub fn prepare(&self, pairs: &[(DType, DType)]) -> Result<(), String> {
        let mut modules = self.modules.lock().map_err(|_| "the kernel cache is poisoned".to_owned())?;
        let mut missing: Vec<(DType, DType)> = pairs.iter().copied().filter(|p| !modules.contains_key(p)).collect();
        missing.dedup();
        if missing.is_empty() {
            return Ok(());
        }
        let entries =
            super::instantiations(&missing).ok_or_else(|| format!("no kernels for tiles and floats {missing:?}"))?;
        let code = nvrtc::compile(&format!("{}\n{entries}", super::KERNEL_SOURCE), self.target.clone())?;
        let image = match self.target {
            Target::Cubin(_) => Ptx::from_binary(code),
            Target::Ptx(_) => {
                let text = String::from_utf8_lossy(&code).trim_end_matches('\0').to_owned();
                Ptx::from_src(text)
            }
        };
        let module = self
            .ctx
            .load_module(image)
            .map_err(|e| format!("the driver cannot load the compiled kernels ({:?}): {e:?}", self.target))?;
        for pair in missing {
            modules.insert(pair, module.clone());
        }
        Ok(())
    }

    /// Kernel `kernel` for tiles of `tile` computed in `float` (compiled on first use).
    ///
    /// # Errors
    /// As [`prepare`](Self::prepare), or no such kernel.
    pub fn function(&self, kernel: &str, tile: DType, float: DType) -> Result<CudaFunction, String> {
        let name = super::entry_point(kernel, tile, float).ok_or_else(|| format!("no kernels for {tile} tiles"))?;
        if let Some(f) = self.functions.lock().map_err(|_| "poisoned".to_owned())?.get(&name) {
            return Ok(f.clone());
        }
        self.prepare(&[(tile, float)])?;
        let module = self
            .modules
            .lock()
            .map_err(|_| "the kernel cache is poisoned".to_owned())?
            .get(&(tile, float))
            .cloned()
            .ok_or_else(|| format!("the kernels for ({tile}, {float}) were not compiled"))?;
        let function = module.load_function(&name).map_err(|e| format!("kernel {name}: {e:?}"))?;
        self.functions.lock().map_err(|_| "poisoned".to_owned())?.insert(name, function.clone());
        Ok(function)
    }

    /// Two lanes of `capacity` bytes: from the pool, or new.
    ///
    /// # Errors
    /// Out of (pinned or device) memory, or another CUDA error.
    pub fn take_lanes(&self, capacity: usize) -> Result<[Lane; 2], String> {
        if let Ok(mut pool) = self.lanes.lock()
            && let Some(i) = pool.iter().position(|l| l[0].capacity() == capacity)
        {
            return Ok(pool.swap_remove(i));
        }
        Ok([self.new_lane(capacity)?, self.new_lane(capacity)?])
    }

    fn new_lane(&self, capacity: usize) -> Result<Lane, String> {
        let what =
            |e: cudarc::driver::DriverError| format!("cannot allocate a {} MiB feeding buffer: {e:?}", capacity >> 20);
        let stream = self.ctx.new_stream().map_err(what)?;
        // SAFETY: the buffer is only written (by the CPU, before each copy) and then copied
        // from; its initial contents are never read.
        let staging = unsafe { self.ctx.alloc_pinned::<u8>(capacity) }.map_err(what)?;
        // SAFETY: as above: written by a copy before any kernel reads it.
        let input = unsafe { stream.alloc::<u8>(capacity) }.map_err(what)?;
        let copied = self.ctx.new_event(None).map_err(what)?;
        Ok(Lane { stream, staging, input, copied })
    }

    /// Give lanes back for the next partition (idle: their streams are synchronised).
    pub fn give_back(&self, lanes: [Lane; 2]) {
        if lanes.iter().any(|l| l.stream.synchronize().is_err()) {
            return;
        }
        if let Ok(mut pool) = self.lanes.lock()
            && pool.len() < 64
        {
            pool.push(lanes);
        }
    }
}
