//! Native built-in UDFs: LiberTEM's built-ins (`reference/libertem/BUILTINS.md`) in Rust.
//!
//! A built-in implements the same [`Udf`] trait as a wasm plugin, so the executor runs
//! both alike, mixed in one pass. What a built-in may do that a plugin cannot is read
//! tiles in place: [`Udf::reads_in_place`] is true, so when the data needs no dtype
//! conversion the executor hands over slices of the file mapping (no copy), and the
//! tiling negotiation lets a `TileSize::Max` UDF take whole partitions as one tile.
//! The kernels then walk such a tile in cache-sized chunks (see [`kernels`]).
//!
//! | name | module | LiberTEM |
//! |------|--------|----------|
//! | `sum`, `sumsig` | [`sum`], [`sumsig`] | `SumUDF`, `SumSigUDF` |
//! | `stddev` | [`stddev`] | `StdDevUDF` |
//! | `max` | [`max`] | NumPy's `data.max(axis=nav)` (no LiberTEM UDF) |
//! | `masks` | [`masks`] | `ApplyMasksUDF` |
//! | `disk`, `ring`, `point` | [`detectors`] | disk/ring/point analyses (masks built for you) |
//! | `radial-fourier` | [`radial_fourier`] | radial Fourier analysis (complex masks) |
//! | `com` | [`com`] | `CoMUDF` |
//! | `pick` | [`pick`] | `PickUDF` |
//! | `logsum`, `fem`, `crystallinity` | [`logsum`], [`fem`], [`crystallinity`] | `LogsumUDF`, `FEMUDF`, `CrystallinityUDF` |
//!
//! What the UDF files share lives in modules of its own, which the UDF files import
//! (they never import each other): [`mask_engine`] (mask products for `masks`, the
//! virtual detectors, `radial-fourier` and `com`), [`kernels`] (sums and merges over
//! tiles), [`element`] (element types, the `with_*!` dtype dispatch, tile access),
//! [`spec`] (descriptions, parameters, buffer declarations) and [`frames`] (per-frame
//! helpers). The dense-masks kernels (AVX-512 or AVX2/FMA) are [`crate::arrays::simd`],
//! shared with the host arrays' `matmul`; `stddev`'s per-block variance passes are the
//! host arrays' (`arrays::reduce`).
//!
//! # The registry
//!
//! [`REGISTRY`] maps each name to a constructor and says whether the built-in has a GPU
//! request ([`gpu_request_for`]). [`get`] builds one by name, [`all`]
//! builds every one (for `udf-host list`), and [`from_source`] understands the
//! `builtin:NAME` spelling the command line uses where a plugin path would go.
//!
//! ```
//! let ring = udf_host::builtins::from_source("builtin:ring").unwrap().unwrap();
//! assert_eq!(ring.description().name, "ring");
//! assert!(ring.reads_in_place());
//! ```
//!
//! # Adding a built-in
//!
//! 1. Write `host/src/builtins/NAME.rs`: a struct holding its [`Description`] (build it
//!    with [`spec::describe`] and the `spec` parameter helpers, using the parameter names
//!    of the LiberTEM UDF), `impl Default`, and `impl Udf` with `source()` returning
//!    `builtin:NAME` and `reads_in_place()` returning true (`merge` and `get_results`
//!    only where it has a custom merge or results). Its `start` returns a
//!    [`PartitionRunner`] that allocates everything once per partition (buffers,
//!    scratch space) so that `process` does no allocation. What every partition of a
//!    run would make alike (a mask built-in's masks and their cuts to the tiling's
//!    signal slices) is made once per run and shared: the built-in's `for_run` gives
//!    the run a copy holding that state ([`mask_engine::MaskRun`]).
//! 2. Add `mod NAME;` below and a line to [`REGISTRY`] (`gpu(..)` if its `start` hands a
//!    [`crate::cuda::Request`] to the GPU, else `cpu(..)`).
//! 3. Test it against an independent reference in `tests/all/builtins.rs`.
//!
//! [`Description`]: crate::udf::Description
//! [`PartitionRunner`]: crate::udf::PartitionRunner

pub mod com;
pub mod crystallinity;
pub mod detectors;
pub mod element;
pub mod fem;
pub mod frames;
pub mod kernels;
pub mod logsum;
pub mod mask_engine;
pub mod masks;
pub mod max;
pub mod pick;
pub mod radial_fourier;
pub mod spec;
pub mod stddev;
pub mod sum;
pub mod sumsig;

use crate::udf::{BufferDecl, Udf, UdfOrigin};
use std::sync::Arc;

/// How the command line names a built-in where a plugin path would go: `builtin:sum`.
pub const PREFIX: &str = "builtin:";

/// Builds a built-in.
pub type Constructor = fn() -> Arc<dyn Udf>;

fn make<U: Udf + Default + 'static>() -> Arc<dyn Udf> {
    Arc::new(U::default())
}

/// A built-in in the [`REGISTRY`].
pub struct Registered {
    pub name: &'static str,
    pub make: Constructor,
    /// Whether its `start` hands a [`crate::cuda::Request`] to the GPU when the plan puts
    /// it there (it has a CUDA kernel for float data).
    pub gpu: bool,
}

const fn cpu(name: &'static str, make: Constructor) -> Registered {
    Registered { name, make, gpu: false }
}

const fn gpu(name: &'static str, make: Constructor) -> Registered {
    Registered { name, make, gpu: true }
}

/// Every built-in: its name, constructor and whether it has a GPU request, in the order
/// `udf-host list` shows them.
pub const REGISTRY: &[Registered] = &[
    gpu("sum", make::<sum::Sum>),
    gpu("sumsig", make::<sumsig::SumSig>),
    gpu("stddev", make::<stddev::StdDev>),
    cpu("max", make::<max::Max>),
    gpu("masks", make::<masks::ApplyMasks>),
    gpu("disk", || Arc::new(detectors::VirtualDetector::new(detectors::DetectorKind::Disk))),
    gpu("ring", || Arc::new(detectors::VirtualDetector::new(detectors::DetectorKind::Ring))),
    gpu("point", || Arc::new(detectors::VirtualDetector::new(detectors::DetectorKind::Point))),
    cpu("radial-fourier", make::<radial_fourier::RadialFourier>),
    gpu("com", make::<com::CoM>),
    cpu("pick", make::<pick::Pick>),
    cpu("logsum", make::<logsum::Logsum>),
    cpu("fem", make::<fem::Fem>),
    cpu("crystallinity", make::<crystallinity::Crystallinity>),
];

/// The names of all built-ins.
pub fn names() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().map(|r| r.name)
}

/// The built-in called `name`, if there is one.
pub fn get(name: &str) -> Option<Arc<dyn Udf>> {
    REGISTRY.iter().find(|r| r.name == name).map(|r| (r.make)())
}

/// One instance of every built-in.
pub fn all() -> Vec<Arc<dyn Udf>> {
    REGISTRY.iter().map(|r| (r.make)()).collect()
}

/// Whether a planned UDF can run on the GPU: a built-in with a GPU request whose
/// buffers the kernels compute ([`crate::cuda::computes`]).
///
/// # Errors
/// Why not, in a few words (for `-v` and `results.json`).
pub fn gpu_request_for(origin: &UdfOrigin, decls: &[BufferDecl]) -> Result<(), String> {
    let UdfOrigin::Builtin { name } = origin else {
        return Err("not a built-in (plugins run on the CPU)".into());
    };
    if !REGISTRY.iter().any(|r| r.name == name && r.gpu) {
        return Err(format!("built-in '{name}' has no CUDA kernel"));
    }
    crate::cuda::computes(decls)
}

/// A `builtin:NAME` that names no built-in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("there is no built-in '{name}'; built-ins are: {} (see `udf-host list`)", names().collect::<Vec<_>>().join(", "))]
pub struct UnknownBuiltin {
    pub name: String,
}

/// `None` if `source` does not start with `builtin:`; else the built-in it names.
///
/// # Errors
/// [`UnknownBuiltin`] if the name after `builtin:` is not in the registry.
pub fn from_source(source: &str) -> Option<Result<Arc<dyn Udf>, UnknownBuiltin>> {
    let name = source.strip_prefix(PREFIX)?;
    Some(get(name).ok_or_else(|| UnknownBuiltin { name: name.to_owned() }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::udf::{BufferKind, BufferUse};

    #[test]
    fn every_builtin_is_named_as_registered_and_reads_in_place() {
        for Registered { name, make, .. } in REGISTRY {
            let udf = make();
            assert_eq!(udf.description().name, *name);
            assert_eq!(udf.source(), format!("{PREFIX}{name}"));
            assert!(udf.reads_in_place(), "{name}");
        }
    }

    fn decl(name: &str, kind: BufferKind, dtype: DType) -> BufferDecl {
        BufferDecl { name: name.into(), kind, dtype, extra_shape: vec![], usage: BufferUse::Normal }
    }

    #[test]
    fn only_float_builtins_with_a_gpu_request_go_to_the_gpu() {
        let builtin = |n: &str| UdfOrigin::Builtin { name: n.into() };
        let nav = |n: &str, d: DType| decl(n, BufferKind::Nav, d);
        assert!(gpu_request_for(&builtin("sum"), &[nav("intensity", DType::F32)]).is_ok());
        assert!(gpu_request_for(&builtin("com"), &[nav("raw_mask_result", DType::F64)]).is_ok());
        let stddev = [
            decl("varsum", BufferKind::Sig, DType::F64),
            decl("num_frames", BufferKind::Single, DType::I64),
            decl("sum", BufferKind::Sig, DType::F32),
        ];
        assert!(gpu_request_for(&builtin("stddev"), &stddev).is_ok());
        let complex = gpu_request_for(&builtin("masks"), &[nav("intensity", DType::C64)]).unwrap_err();
        assert!(complex.contains("complex64"), "{complex}");
        assert!(gpu_request_for(&builtin("sum"), &[nav("intensity", DType::U16)]).is_err());
        let pick = gpu_request_for(&builtin("pick"), &[nav("intensity", DType::F32)]).unwrap_err();
        assert!(pick.contains("no CUDA kernel"), "{pick}");
        let wasm = UdfOrigin::Wasm { path: "sum.wasm".into(), sha256: String::new() };
        assert!(gpu_request_for(&wasm, &[nav("intensity", DType::F32)]).is_err());
    }

    #[test]
    fn sources_resolve() {
        assert!(from_source("sum.wasm").is_none());
        assert!(from_source("builtin:sumsig").is_some_and(|r| r.is_ok()));
        let err = from_source("builtin:nope").unwrap().err().unwrap();
        assert!(err.to_string().contains("'nope'") && err.to_string().contains("sumsig"), "{err}");
    }
}
