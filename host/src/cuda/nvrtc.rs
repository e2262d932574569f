//! NVRTC: CUDA C to PTX (for a virtual architecture, JIT-compiled by the driver) or to
//! CUBIN (for the device's own architecture: no JIT, and no dependence on the driver
//! understanding this NVRTC's PTX version). The library is loaded at run time; every
//! function checks first that it can be loaded, since cudarc panics when it cannot.

use cudarc::nvrtc::{result, sys};
use std::ffi::{CStr, CString, c_char, c_int};

/// What to compile to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// PTX for a virtual architecture: `compute_80`.
    Ptx(String),
    /// Machine code for a real one: `sm_90`.
    Cubin(String),
}

impl Target {
    fn option(&self) -> String {
        match self {
            Target::Ptx(arch) | Target::Cubin(arch) => format!("--gpu-architecture={arch}"),
        }
    }
}

/// Whether the NVRTC library can be loaded (by its CUDA-major file name, through the
/// usual library search path: `LD_LIBRARY_PATH`, the loader cache).
pub fn library_present() -> bool {
    // SAFETY: only tries to dlopen the library (and closes it again); no NVRTC call.
    unsafe { sys::is_culib_present() }
}

fn missing() -> String {
    "the NVRTC library (libnvrtc.so) cannot be loaded: install CUDA's NVRTC, or \
     `pip install nvidia-cuda-nvrtc-cu12` and put its nvidia/cuda_nvrtc/lib directory on LD_LIBRARY_PATH"
        .to_owned()
}

/// NVRTC's version, (major, minor).
///
/// # Errors
/// The library cannot be loaded.
pub fn version() -> Result<(i32, i32), String> {
    if !library_present() {
        return Err(missing());
    }
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: the library is loadable (checked above); both pointers are valid for writes.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }.result().map_err(|e| format!("nvrtcVersion failed: {e:?}"))?;
    Ok((major, minor))
}

/// The real architectures this NVRTC can compile for, as `major * 10 + minor` (90 for
/// sm_90), ascending.
///
/// # Errors
/// The library cannot be loaded.
pub fn supported_archs() -> Result<Vec<i32>, String> {
    if !library_present() {
        return Err(missing());
    }
    let mut count: c_int = 0;
    // SAFETY: the library is loadable; `count` is valid for writes.
    unsafe { sys::nvrtcGetNumSupportedArchs(&mut count) }
        .result()
        .map_err(|e| format!("nvrtcGetNumSupportedArchs failed: {e:?}"))?;
    let mut archs = vec![0 as c_int; count.max(0) as usize];
    if !archs.is_empty() {
        // SAFETY: `archs` has room for the `count` entries NVRTC writes.
        unsafe { sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) }
            .result()
            .map_err(|e| format!("nvrtcGetSupportedArchs failed: {e:?}"))?;
    }
    archs.sort_unstable();
    Ok(archs)
}

/// A program, destroyed when dropped.
struct Program {
    handle: sys::nvrtcProgram,
    // NVRTC may keep pointers into the source and name until the program is destroyed.
    _source: CString,
    _name: CString,
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: `handle` came from nvrtcCreateProgram and is destroyed only here.
        let _ = unsafe { result::destroy_program(self.handle) };
    }
}

/// Compile `source` (CUDA C, no includes) for `target`; the PTX text (NUL-terminated, as
/// the driver takes it) or the CUBIN bytes.
///
/// # Errors
/// The library cannot be loaded, or NVRTC's error with its log.
pub fn compile(source: &str, target: Target) -> Result<Vec<u8>, String> {
    if !library_present() {
        return Err(missing());
    }
    let source_c = CString::new(source).map_err(|_| "the kernel source contains a NUL byte".to_owned())?;
    let name = CString::new("udf_host_kernels.cu").unwrap_or_default();
    let handle = result::create_program(&source_c, Some(&name)).map_err(|e| format!("nvrtcCreateProgram: {e:?}"))?;
    let program = Program { handle, _source: source_c, _name: name };
    let options = [target.option(), "--std=c++17".to_owned()];
    // SAFETY: `program.handle` is a live program (destroyed only when `program` drops).
    if let Err(e) = unsafe { result::compile_program(program.handle, &options) } {
        // SAFETY: as above; the log is NUL-terminated by NVRTC.
        let log = unsafe { result::get_program_log(program.handle) }
            .map(|log| {
                // SAFETY: `log` holds the NUL-terminated log NVRTC wrote.
                unsafe { CStr::from_ptr(log.as_ptr()) }.to_string_lossy().into_owned()
            })
            .unwrap_or_default();
        return Err(format!("NVRTC could not compile the kernels ({options:?}): {e:?}\n{log}"));
    }
    match target {
        Target::Ptx(_) => {
            // SAFETY: the program compiled (above).
            let ptx = unsafe { result::get_ptx(program.handle) }.map_err(|e| format!("nvrtcGetPTX: {e:?}"))?;
            Ok(ptx.into_iter().map(|c: c_char| c as u8).collect())
        }
        Target::Cubin(_) => {
            let mut size = 0usize;
            // SAFETY: the program compiled; `size` is valid for writes.
            unsafe { sys::nvrtcGetCUBINSize(program.handle, &mut size) }
                .result()
                .map_err(|e| format!("nvrtcGetCUBINSize: {e:?}"))?;
            let mut cubin = vec![0u8; size];
            // SAFETY: `cubin` has room for the `size` bytes NVRTC writes.
            unsafe { sys::nvrtcGetCUBIN(program.handle, cubin.as_mut_ptr().cast::<c_char>()) }
                .result()
                .map_err(|e| format!("nvrtcGetCUBIN: {e:?}"))?;
            Ok(cubin)
        }
    }
}

/// The best target for a device of compute capability `(major, minor)` with this NVRTC:
/// CUBIN for the device's own architecture when NVRTC knows it, else PTX for the newest
/// architecture it knows below it (the driver compiles that for the device).
///
/// # Errors
/// The library cannot be loaded, or it knows no architecture up to the device's.
pub fn target_for(major: i32, minor: i32) -> Result<Target, String> {
    let device = major * 10 + minor;
    let archs = supported_archs()?;
    if archs.contains(&device) {
        return Ok(Target::Cubin(format!("sm_{device}")));
    }
    let below = archs.iter().rev().find(|&&a| a <= device).ok_or_else(|| {
        format!("this NVRTC compiles for {archs:?}, none of them up to the device's compute capability {major}.{minor}")
    })?;
    Ok(Target::Ptx(format!("compute_{below}")))
}
