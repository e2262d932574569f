//! Write udf-host plugins in Rust.
//!
//! A plugin is a LiberTEM-style user-defined function (UDF) compiled to a WebAssembly
//! component. The host splits a dataset into partitions, gives each partition a fresh
//! plugin instance, feeds it tiles of frames and merges the partitions' result buffers.
//! This crate hides the generated bindings of `wit/udf.wit` behind:
//!
//! - [`Udf`]: the trait a plugin implements (declare, process, merge),
//! - [`Declaration`]: name, parameters, method, input dtype and buffers with their merge
//!   rules in one place, so `describe`, `result_buffers`, the dtype preference and the
//!   merge need no code,
//! - [`export_map!`]: a function of one frame as a whole plugin (LiberTEM's `AutoUDF`),
//! - [`Tile`] / [`Frame`]: typed views of the data,
//! - [`Buffers`]: typed views of the result buffers with LiberTEM's view shapes, and
//!   operations that work for every dtype ([`Buffers::accumulate`], [`Buffers::fill`],
//!   [`Buffers::assign`], [`Buffers::merge_from`] with a [`Merge`] rule),
//! - [`Params`] / [`Context`]: typed parameters and meta,
//! - [`export_udf!`]: exports a `Udf` as the component's interface,
//! - [`log!`]: log lines the host shows to the user.
//!
//! # Example: the sum of all frames
//!
//! This is `guest-sdk/examples/short_sum.rs`; the tests build it as a component and
//! check its results.
#![doc = concat!("```\n", include_str!("../examples/short_sum.rs"), "```")]
//!
//! The same without a [`Declaration`] (`guest-sdk/examples/my_sum.rs`), with the
//! description, the buffers and the merge written out:
#![doc = concat!("```\n", include_str!("../examples/my_sum.rs"), "```")]
//!
//! And a frame map (`guest-sdk/examples/frame_map.rs`), the sum of each row of every frame:
#![doc = concat!("```\n", include_str!("../examples/frame_map.rs"), "```")]
//!
//! Build a plugin crate (crate type `cdylib`) with
//! `cargo build --release --target wasm32-wasip2` and run it with
//! `udf-host run target/wasm32-wasip2/release/my_sum.wasm data.npy`. (Plugins only
//! link for wasm targets: the export names of the component model are not valid
//! native symbol names.)
//!
//! If the run's input dtype is not `f32` (float64 data, say), `tile.data::<f32>()` fails
//! with a clear error. Plugins that follow LiberTEM's "result dtype = input dtype" rule
//! declare their buffers with [`BufferDType::Input`] and use the dtype-independent
//! operations of [`Buffers`] ([`ops`](crate::ops)), or [`with_float_type!`] /
//! [`with_numeric_type!`] to write typed code once for every dtype.

mod adapter;
pub mod array;
#[doc(hidden)]
pub mod bindings;
mod buffers;
pub mod declaration;
mod describe;
mod element;
mod error;
pub mod map;
pub mod ops;
mod params;
pub mod simd;
mod tile;
mod udf;

pub use bindings::udf::plugin::host::LogLevel;
pub use bindings::udf::plugin::types::{
    ArrayData, BufferDecl, BufferKind, BufferUse, DataAccess, DatasetMeta, Description, DeviceClass, Dtype as DType,
    DtypePreference, Method, Ndarray, Param, ParamSpec, ParamType, ParamValue, PartitionMeta, RunPlan, SigSlice,
    TileDepth, TileSize, TilingPreferences,
};
pub use buffers::{BufferMut, Buffers, ResultOut};
pub use declaration::{BufferDType, Declaration};
pub use element::{Element, Float, Numeric, dtype_from_name, dtype_name, dtype_size, result_type};
pub use error::{ErrorKind, Result, UdfError};
pub use ndarray;
pub use num_complex::{Complex32, Complex64};
pub use ops::{Merge, Operand, Scalar};
pub use params::{Context, Params, frame_shape_2d};
pub use tile::{Frame, Tile};
pub use udf::{MergeContext, ResultsContext, Udf};

/// Everything a plugin usually needs, every type of the contract included:
/// `use udf_sdk::prelude::*;`.
pub mod prelude {
    pub use crate::{
        ArrayData, BufferDType, BufferDecl, BufferKind, BufferUse, Buffers, Complex32, Complex64, Context, DType,
        DataAccess, DatasetMeta, Declaration, Description, DeviceClass, DtypePreference, Element, ErrorKind, Float,
        Frame, LogLevel, Merge, MergeContext, Method, Ndarray, Numeric, Param, ParamSpec, ParamType, ParamValue,
        Params, PartitionMeta, Result, ResultOut, ResultsContext, RunPlan, Scalar, SigSlice, Tile, TileDepth, TileSize,
        TilingPreferences, Udf, UdfError,
    };
    pub use ndarray::{Array1, Array2, ArrayD, ArrayView1, ArrayView2, ArrayViewD, ArrayViewMutD, Axis, IxDyn, Zip};
}

#[doc(hidden)]
pub mod __private {
    pub use crate::adapter::{Adapter, CrateVersion};
}

/// Send a log line to the host: `log!(info, "x = {}", x)`, or `log!("...")` for info.
/// Levels: `trace`, `debug`, `info`, `warn`, `error`.
#[macro_export]
macro_rules! log {
    (trace, $($arg:tt)+) => { $crate::__log($crate::LogLevel::Trace, &format!($($arg)+)) };
    (debug, $($arg:tt)+) => { $crate::__log($crate::LogLevel::Debug, &format!($($arg)+)) };
    (info, $($arg:tt)+) => { $crate::__log($crate::LogLevel::Info, &format!($($arg)+)) };
    (warn, $($arg:tt)+) => { $crate::__log($crate::LogLevel::Warn, &format!($($arg)+)) };
    (error, $($arg:tt)+) => { $crate::__log($crate::LogLevel::Error, &format!($($arg)+)) };
    ($($arg:tt)+) => { $crate::__log($crate::LogLevel::Info, &format!($($arg)+)) };
}

#[doc(hidden)]
pub fn __log(level: LogLevel, message: &str) {
    bindings::udf::plugin::host::log(level, message);
}

/// Export a [`Udf`] as this component's `udf:plugin/udf` interface. A description
/// without a version (a [`Declaration`] without [`Declaration::version`]) gets the plugin
/// crate's version.
#[macro_export]
macro_rules! export_udf {
    ($udf:ty) => {
        struct __UdfSdkCrate;
        impl $crate::__private::CrateVersion for __UdfSdkCrate {
            const VERSION: &'static str = env!("CARGO_PKG_VERSION");
        }
        type __UdfSdkExport = $crate::__private::Adapter<$udf, __UdfSdkCrate>;
        $crate::bindings::export_udf_bindings!(__UdfSdkExport with_types_in $crate::bindings);
    };
}
