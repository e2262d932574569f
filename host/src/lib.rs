//! udf-host: run LiberTEM-style user-defined functions (UDFs) over 4D-STEM datasets.
//!
//! A UDF is either a WebAssembly component built against `wit/udf.wit` (run sandboxed
//! by [`wasm::WasmRuntime`]) or a native built-in; the executor sees both through the
//! [`udf::Udf`] trait.
//!
//! | module | role |
//! |--------|------|
//! | [`dataset`] | formats, memory-mapped reading, partitions, tiling negotiation |
//! | [`exec`] | the run plan, running partitions, the merger, the in-process engine |
//! | [`loader`] | loading a plan's UDFs (built-ins, wasm by hash) where its partitions run |
//! | [`udf`] | the `Udf` abstraction and the contract's types |
//! | [`wasm`] | wasmtime engine, compile cache, limits, plugins as `Udf`s |
//! | [`builtins`] | native built-in UDFs (LiberTEM's), the same `Udf`s |
//! | [`conformance`] | the plugin conformance kit (`udf-host conformance`) |
//! | [`report`] | what the host reports: dataset, plugin and run summaries (`results.json`), for every front end |
//! | [`interrupt`] | Ctrl-C: the first stops a run (its results are written), a second quits |
//! | [`output`] | writing results (`.npy`, `results.json`, `index.html`) atomically; live snapshots |
//! | [`preview`] | PNG previews of image results (colour maps, robust scaling, colour bar) |
//! | [`dtype`], [`array`], [`npy`] | element types, arrays, the `.npy` format |
//! | [`params`], [`roi`], [`log`] | parameters, regions of interest, plugin logs |
//! | [`serve`] | `udf-host serve`: the browser front end (a local web server and its page) |
//!
//! See `docs/architecture.md` for how the pieces fit together.

pub mod array;
pub mod builtins;
#[cfg(feature = "cli")]
pub mod cli;
pub mod conformance;
pub mod cuda;
pub mod dataset;
pub mod dtype;
pub mod exec;
#[doc(hidden)]
pub mod fuzzing;
pub mod interrupt;
pub mod loader;
pub mod log;
pub mod npy;
pub mod output;
pub mod params;
pub mod preview;
pub mod report;
pub mod roi;
pub mod sample;
pub mod serve;
pub mod udf;
pub mod wasm;
