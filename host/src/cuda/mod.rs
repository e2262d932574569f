//! CUDA versions of the heavy built-ins, behind the `cuda` (CUDA 12) and `cuda13` cargo
//! features (docs/gpu.md).
//!
//! | item | role |
//! |------|------|
//! | [`Device`] | what a run asks for: `cpu`, `cuda` or `auto` ([`RunOptions::device`](crate::exec::RunOptions)) |
//! | [`available`] | whether this process can use a GPU, and why not (probes the libraries before any CUDA call) |
//! | [`auto`] | what `--device auto` decides per built-in: the GPU only where it is expected to finish first (an estimate from the measured figures) |
//! | [`computes`] | whether the kernels compute a UDF's buffers (which built-ins have a GPU request is the built-in registry's to say) |
//! | [`Request`], [`start`] | what a built-in's `start` requests when its device is CUDA (which kernel, with what), and the GPU runner it gets back |
//! | [`KERNEL_SOURCE`], [`kernels`], `compile_all`, `nvrtc` | the CUDA C of every kernel; each kernel's arguments, declared once (its entry points and its Rust launch); compiled with NVRTC at run time (the last two with a feature) |
//! | `bench` (with a feature) | the measurements of the GPU benchmark |
//!
//! With a feature, the submodules `gpu` (the process's GPU, kernel cache, lane pool),
//! `feed` (a partition's shared two-lane upload) and `consumers` (each request's device
//! state in the feed, its kernel launches and exports) do the work.
//!
//! The layering: built-ins call down into this module (a built-in whose
//! [`DatasetMeta::device_class`](crate::udf::DatasetMeta) is CUDA asks [`start`] for its
//! runner instead of making its CPU one); this module knows the contract's types and
//! arrays, never the built-ins. Everything that touches CUDA is in the feature-gated
//! submodules; without a feature, [`available`] says so and [`start`] refuses.
//!
//! Without a GPU nothing here calls into CUDA: cudarc panics when a library is missing,
//! so [`available`] first checks that the driver and NVRTC libraries can be loaded.

use crate::array::NdArray;
use crate::dtype::DType;
use crate::udf::{BufferDecl, BufferKind, BufferUse, CallError, InitContext, PartitionRunner};
use serde::{Deserialize, Serialize};
use std::fmt;

#[cfg(all(feature = "cuda", feature = "cuda13"))]
compile_error!(
    "the `cuda` (CUDA 12) and `cuda13` (CUDA 13) features of udf-host exclude each other: \
     cudarc's CUDA-version features are not additive; build with one of them"
);

pub mod auto;
#[cfg(any(feature = "cuda", feature = "cuda13"))]
mod consumers;
#[cfg(any(feature = "cuda", feature = "cuda13"))]
mod feed;
#[cfg(any(feature = "cuda", feature = "cuda13"))]
mod gpu;
pub mod kernels;
#[cfg(any(feature = "cuda", feature = "cuda13"))]
pub mod nvrtc;

#[cfg(any(feature = "cuda", feature = "cuda13"))]
pub mod bench;

/// Whether this build has CUDA support (one of the features).
pub const BUILT: bool = cfg!(any(feature = "cuda", feature = "cuda13"));

/// The CUDA C source of every kernel (`kernels.cu`): templates over the stored element
/// type and the float type computed in. [`instantiations`] adds the `extern "C"` entry
/// points for the element types a run needs.
pub const KERNEL_SOURCE: &str = include_str!("kernels.cu");

/// Where a run computes: what `--device` and `RunOptions::device` say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    /// Everything on the CPU (the default).
    #[default]
    Cpu,
    /// Built-ins with a kernel on the GPU; an error if there is no usable GPU. UDFs
    /// without a kernel (wasm plugins, other built-ins) still run on the CPU.
    Cuda,
    /// The GPU for built-ins with a kernel when a GPU is usable, else the CPU.
    Auto,
}

impl Device {
    /// `cpu`, `cuda` or `auto`.
    pub fn parse(text: &str) -> Option<Device> {
        match text.trim().to_ascii_lowercase().as_str() {
            "cpu" => Some(Device::Cpu),
            "cuda" | "gpu" => Some(Device::Cuda),
            "auto" => Some(Device::Auto),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Cuda => "cuda",
            Device::Auto => "auto",
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why this process cannot use a GPU.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    /// Built without the `cuda`/`cuda13` feature.
    #[error(
        "this udf-host was built without CUDA support; build it with `--features cuda` (CUDA 12 drivers) or `--features cuda13` (CUDA 13)"
    )]
    NotBuilt,
    /// A shared library could not be loaded.
    #[error("the {library} library ({file}) cannot be loaded: {hint} (docs/gpu.md)")]
    MissingLibrary { library: &'static str, file: &'static str, hint: &'static str },
    /// The driver loaded but there is no usable device, or CUDA failed to start.
    #[error("no usable CUDA device: {0}")]
    NoDevice(String),
}

/// A usable GPU: what [`available`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuInfo {
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Device memory, bytes.
    pub memory: usize,
    /// NVRTC's version (major, minor).
    pub nvrtc_version: (i32, i32),
}

/// Whether this process can run kernels, probing once (and caching the answer): the
/// feature, the driver library, a device, NVRTC. Never panics, whatever is missing.
///
/// # Errors
/// [`Unavailable`] saying what is missing.
pub fn available() -> Result<GpuInfo, Unavailable> {
    #[cfg(any(feature = "cuda", feature = "cuda13"))]
    {
        gpu::Gpu::get().map(|g| g.info.clone())
    }
    #[cfg(not(any(feature = "cuda", feature = "cuda13")))]
    {
        Err(Unavailable::NotBuilt)
    }
}

/// Whether the kernels compute a UDF's buffers: all real floats (`float32`/`float64`),
/// integer `single` buffers aside (counters the host keeps, like `stddev`'s
/// `num_frames`). Complex masks, complex or integer sums stay on the CPU. Which UDFs
/// have a GPU request at all is the built-in registry's to say
/// ([`crate::builtins::gpu_request_for`]).
///
/// # Errors
/// Why not, in a few words (for `-v` and `results.json`).
pub fn computes(decls: &[BufferDecl]) -> Result<(), String> {
    for d in decls.iter().filter(|d| d.usage != BufferUse::ResultOnly) {
        let counter = d.kind == BufferKind::Single && d.dtype == DType::I64;
        if !counter && !matches!(d.dtype, DType::F32 | DType::F64) {
            return Err(format!("its buffer '{}' is {}; the kernels compute in float32/float64", d.name, d.dtype));
        }
    }
    Ok(())
}

/// A mask computed from the pixel position instead of read from memory:
/// `ri2 < (y − cy)² + (x − cx)² ≤ ro2` (disk: `ri2 = −∞`; point: the pixel itself,
/// `ro2 = 0` at an integer centre).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RadialMask {
    pub cy: f64,
    pub cx: f64,
    /// Squared inner radius (excluded); `-inf` for none.
    pub ri2: f64,
    /// Squared outer radius (included); may be `inf`.
    pub ro2: f64,
    /// Three masks `(inside, y·inside, x·inside)` (CoM) instead of one (`inside`).
    pub weighted: bool,
    /// Leave out the pixels outside (the CPU's sparse product: a NaN there does not
    /// spoil the sum).
    pub sparse: bool,
}

impl RadialMask {
    /// Whether pixel `(y, x)` is inside: `ri2 < (y − cy)² + (x − cx)² <= ro2`, in double
    /// precision without fused multiply-adds (the kernels compute exactly this).
    pub fn inside(&self, y: usize, x: usize) -> bool {
        let d2 = (y as f64 - self.cy).powi(2) + (x as f64 - self.cx).powi(2);
        self.ri2 < d2 && d2 <= self.ro2
    }
}

/// Masks given as values: `(M, frame_len)` in the result dtype (float32 or float64).
#[derive(Debug, Clone, Copy)]
pub struct MaskStack<'a> {
    pub values: &'a NdArray,
    pub count: usize,
    /// Leave out zero entries (the CPU's sparse product).
    pub sparse: bool,
}

/// What a built-in hands to [`start`]: which kernel, with what.
#[derive(Debug, Clone, Copy)]
pub enum Request<'a> {
    /// `sum`: sig buffer `intensity` of the input dtype.
    Sum,
    /// `sumsig`: nav buffer `intensity` of the input dtype.
    SumSig,
    /// `stddev`: `varsum` (`base`), `num_frames`, `sum` (`sum`).
    StdDev { base: DType, sum: DType },
    /// `masks`: nav buffer `buffer` `(frames, ..extra_shape)` of the masks' dtype.
    Masks { masks: MaskStack<'a>, buffer: &'a str, extra_shape: &'a [usize] },
    /// `disk`/`ring`/`point` (one mask, no extra shape) and `com` (three, `(3,)`):
    /// masks computed in the kernel, products in `result` (float32 or float64).
    Radial { mask: RadialMask, result: DType, buffer: &'a str, extra_shape: &'a [usize] },
}

/// The GPU runner of a built-in for one partition (the built-in calls this from its
/// `start` when its device is CUDA). Runners of one partition share their uploads.
///
/// # Errors
/// No usable GPU in this process (a plan made elsewhere), a CUDA failure, or a request this
/// module cannot run (the plan's [`computes`] said it could).
pub fn start(ctx: &InitContext<'_>, request: Request<'_>) -> Result<Box<dyn PartitionRunner>, CallError> {
    #[cfg(any(feature = "cuda", feature = "cuda13"))]
    {
        consumers::start(ctx, request)
    }
    #[cfg(not(any(feature = "cuda", feature = "cuda13")))]
    {
        let _ = (ctx, request);
        Err(CallError::invalid_data(format!("the plan runs this built-in on CUDA, but {}", Unavailable::NotBuilt)))
    }
}

/// The element types a tile may have on the GPU (stored integers converted in the
/// kernels, or the float input dtype), with their CUDA C names.
pub const TILE_TYPES: [(DType, &str); 8] = [
    (DType::U8, "u8"),
    (DType::U16, "u16"),
    (DType::U32, "u32"),
    (DType::I8, "i8"),
    (DType::I16, "i16"),
    (DType::I32, "i32"),
    (DType::F32, "f32"),
    (DType::F64, "f64"),
];

pub use kernels::KERNEL_NAMES;

/// The float types computed in, with their CUDA C names.
pub const FLOAT_TYPES: [(DType, &str); 2] = [(DType::F32, "f32"), (DType::F64, "f64")];

/// The CUDA C name of a tile or float type.
pub fn type_name(dtype: DType) -> Option<&'static str> {
    TILE_TYPES.iter().find(|(d, _)| *d == dtype).map(|(_, n)| *n)
}

/// The `extern "C"` entry points of every kernel for tiles of `tile` computed in
/// `float`: the `INSTANTIATE(S, F)` macro ([`kernels::instantiate_macro`]) and a line
/// `INSTANTIATE(u16, f32)` per pair, appended to [`KERNEL_SOURCE`] for the pairs a run
/// needs. `None` for a type without kernels.
pub fn instantiations(pairs: &[(DType, DType)]) -> Option<String> {
    let mut out = kernels::instantiate_macro();
    for &(tile, float) in pairs {
        if !matches!(float, DType::F32 | DType::F64) {
            return None;
        }
        out.push_str(&format!("INSTANTIATE({}, {})\n", type_name(tile)?, type_name(float)?));
    }
    Some(out)
}

/// Every (tile, float) pair there are kernels for.
pub fn all_pairs() -> Vec<(DType, DType)> {
    TILE_TYPES.iter().flat_map(|&(t, _)| FLOAT_TYPES.iter().map(move |&(f, _)| (t, f))).collect()
}

/// The name of a kernel's entry point for tiles of `tile` computed in `float`:
/// `sum_u16_f32`.
pub fn entry_point(kernel: &str, tile: DType, float: DType) -> Option<String> {
    Some(format!("{kernel}_{}_{}", type_name(tile)?, type_name(float)?))
}

/// Compile every kernel for every type pair with NVRTC, to PTX for the virtual
/// architecture `arch` (e.g. `compute_80`): what the test that needs no GPU does.
/// Returns the PTX's size in bytes.
///
/// # Errors
/// NVRTC cannot be loaded, or a compile error with NVRTC's log.
#[cfg(any(feature = "cuda", feature = "cuda13"))]
pub fn compile_all(arch: &str) -> Result<usize, String> {
    let source = format!("{KERNEL_SOURCE}\n{}", instantiations(&all_pairs()).unwrap_or_default());
    nvrtc::compile(&source, nvrtc::Target::Ptx(arch.to_owned())).map(|code| code.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_parse_and_name_themselves() {
        for d in [Device::Cpu, Device::Cuda, Device::Auto] {
            assert_eq!(Device::parse(d.name()), Some(d));
            assert_eq!(serde_json::to_string(&d).unwrap(), format!("\"{d}\""));
        }
        assert_eq!(Device::parse(" GPU "), Some(Device::Cuda));
        assert_eq!(Device::parse("tpu"), None);
    }

    #[test]
    fn every_type_pair_has_entry_points() {
        assert_eq!(all_pairs().len(), 16);
        assert_eq!(entry_point("sum", DType::U16, DType::F32).as_deref(), Some("sum_u16_f32"));
        let i8_f64 = instantiations(&[(DType::I8, DType::F64)]).unwrap();
        assert!(i8_f64.starts_with("#define INSTANTIATE(S, F)") && i8_f64.ends_with("\nINSTANTIATE(i8, f64)\n"));
        assert_eq!(instantiations(&[(DType::U8, DType::U8)]), None);
        assert_eq!(instantiations(&[(DType::C64, DType::F32)]), None);
    }

    #[cfg(not(any(feature = "cuda", feature = "cuda13")))]
    #[test]
    fn without_the_feature_the_gpu_is_unavailable_and_says_how_to_get_it() {
        let e = available().unwrap_err();
        assert_eq!(e, Unavailable::NotBuilt);
        assert!(e.to_string().contains("--features cuda"), "{e}");
    }
}
