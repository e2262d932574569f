//! Host arrays: n-dimensional arrays that live in the host, and the executor that
//! computes on them with NumPy's semantics — what a plugin calls through the contract's
//! `arrays` interface (`wit/udf.wit`) instead of copying a tile into its own memory.
//!
//! | type / function | role |
//! |---|---|
//! | [`HostArray`] | an array: [`Dense`] (a strided view of a [`Storage`]) or [`Converting`] (a tile of the file's integers seen as the float input dtype); a sparse (CSR) representation is the next variant |
//! | [`ArrayMemory`] | an instance's arrays' memory: charged to its limits, a few buffers kept for reuse |
//! | [`Ctx`] | what every operation gets: the memory and the interruption check |
//! | [`ops`] | **the one table** of operation names shared by the WIT, the SDKs and the docs |
//! | [`elementwise`] | `astype`, unary and binary functions (broadcasting, NEP 50 promotion), `where`, `clip` |
//! | [`reduce`] | reductions over axes with `keepdims`, `dtype=`, `correction` |
//! | [`linalg`] | `matmul`, `tensordot`, `vecdot` |
//! | [`simd`] | the AVX-512 and AVX2/FMA kernels of products with a few float32 columns (`tile @ masks`; the mask built-ins' kernels) |
//! | [`fft`] | `fft2`, `ifft2`, `rfft2`, `irfft2`, `fftshift`, `ifftshift` |
//! | [`construct`] | `full`, `arange`, `linspace`, `eye`, `concat`, `stack`, `take`, mask selection |
//! | [`writes`] | `x[index] = v`, `x[index] += v` |
//! | [`ArrayError`] | the typed error every operation returns: the operation, the shapes, what was expected |
//!
//! ```
//! use udf_host::arrays::{ArrayMemory, Ctx, HostArray, Operand, ReduceOptions, binary, reduce};
//! use udf_host::arrays::ops::{BinaryOp, ReduceOp};
//! use udf_host::dtype::DType;
//!
//! let memory = ArrayMemory::with_limit(1 << 20);
//! let cx = Ctx { memory: &memory, stop: &|| None };
//! let bytes: Vec<u8> = (0..6).flat_map(|v: i32| (v as f32).to_le_bytes()).collect();
//! let tile = HostArray::from_bytes(&memory, DType::F32, &[2, 3], &bytes)?;
//! let scaled = binary(&cx, BinaryOp::Multiply, Operand::Array(&tile), Operand::Scalar(udf_host::arrays::Scalar::Float(2.0)))?;
//! let sums = reduce(&cx, ReduceOp::Sum, &scaled, ReduceOptions { axes: Some(&[0]), ..Default::default() })?;
//! assert_eq!(udf_host::arrays::to_vec::<f32>(&sums)?, [6.0, 10.0, 14.0]);
//! # Ok::<(), udf_host::arrays::ArrayError>(())
//! ```
//!
//! # Eager, with reused buffers — decided by measurement
//!
//! Each call computes its result at once (eager). A recorded chain of elementwise
//! operations run in one pass would save the temporaries' memory traffic, but measured
//! on this machine (`docs/benchmarks.md`, "Host arrays: eager or fused"), the cost that
//! mattered was not the extra pass but fresh allocations: a variance written as
//! `x - m`, `d * d`, `sum` over a 1 MiB float32 tile ran at 0.9 GB/s with new
//! temporaries each call, 9.9 GB/s with reused ones, 10.6 GB/s as a chunked interpreted
//! chain, and 16.9 GB/s as one hand-fused kernel. So temporaries come from a pool
//! ([`ArrayMemory`]), and the compound operations that decide a UDF's speed are single
//! fused kernels (`sum`/`mean`/`var`/`std` with `dtype=` convert in registers;
//! `matmul` against a stack of masks; `x[i] += v` in place) — 25.2 vs 14.7 GB/s for a
//! uint16 tile summed with `dtype=float32` against `astype` then `sum`.
//!
//! The same holds for the tile itself: a plugin with host tiles on a file of integers
//! gets the file's mapping lent unconverted as a [`Converting`] array of the run's float
//! input dtype (as a native built-in that converts on read does). Reductions and the
//! product with a stack of masks convert in registers or in cache-sized blocks; any
//! other operation converts the tile once, on first use.

pub mod array;
pub mod construct;
pub mod element;
pub mod elementwise;
pub mod error;
pub mod fft;
pub mod linalg;
pub mod memory;
pub mod ops;
pub mod reduce;
pub mod simd;
pub mod writes;

pub use array::{Converting, Dense, HostArray, IndexItem};
pub use elementwise::{Ctx, Operand, Scalar, astype, binary, clip, to_vec, unary, where_};
pub use error::ArrayError;
pub use memory::{ArrayMemory, FixedLimit, Lease, MemoryLimit, Storage};
pub use reduce::{ReduceOptions, reduce, sum_var};
pub use writes::{WriteMode, write};
