//! Frame maps: a function of one frame becomes a whole plugin (LiberTEM's `AutoUDF` and
//! `ctx.map(f=...)`).
//!
//! ```
//! use udf_sdk::prelude::*;
//! udf_sdk::export_map!("sum-rows", |frame: ArrayViewD<'_, f32>| frame.sum_axis(Axis(1)));
//! ```
//!
//! The plugin has one nav buffer, `result`, whose dtype and extra shape are those of the
//! function's return value — found, as `AutoUDF` does, by calling the function once on a
//! frame of zeros of the dataset's signal shape. It uses the frame method and prefers
//! the input dtype of the function's argument; a frame of another dtype (float64 data
//! for an `f32` function, say) is converted to it first. The return value may be a
//! number of any dtype ([`Scalar`]), an ndarray, a `Vec` or an array of numbers.

use crate::bindings::udf::plugin::types::{BufferDecl, DatasetMeta, Description, Method};
use crate::buffers::Buffers;
use crate::error::{Result, UdfError};
use crate::ops::Scalar;
use crate::params::to_usize_shape;
use crate::tile::Frame;
use ndarray::{ArrayBase, ArrayD, ArrayViewD, Data, Dimension, IxDyn};

/// The name of a frame map's buffer (as LiberTEM's `AutoUDF`).
pub const RESULT: &str = "result";

/// What a frame map may return: a number, or an array of numbers.
pub trait MapOutput {
    /// The element type (the buffer's dtype).
    type Elem: Scalar;
    /// The shape of the value (`[]` for a number): the buffer's extra shape.
    fn shape(&self) -> Vec<usize>;
    /// The elements in C order.
    fn values(self) -> Vec<Self::Elem>;
}

macro_rules! scalar_output {
    ($($t:ty),*) => {$(
        impl MapOutput for $t {
            type Elem = $t;
            fn shape(&self) -> Vec<usize> {
                Vec::new()
            }
            fn values(self) -> Vec<$t> {
                vec![self]
            }
        }
    )*};
}

scalar_output!(bool, u8, u16, u32, u64, i8, i16, i32, i64, f32, f64, crate::Complex32, crate::Complex64);

impl<E: Scalar, S: Data<Elem = E>, D: Dimension> MapOutput for ArrayBase<S, D> {
    type Elem = E;
    fn shape(&self) -> Vec<usize> {
        ArrayBase::shape(self).to_vec()
    }
    fn values(self) -> Vec<E> {
        self.iter().copied().collect()
    }
}

impl<E: Scalar> MapOutput for Vec<E> {
    type Elem = E;
    fn shape(&self) -> Vec<usize> {
        vec![self.len()]
    }
    fn values(self) -> Vec<E> {
        self
    }
}

impl<E: Scalar, const N: usize> MapOutput for [E; N] {
    type Elem = E;
    fn shape(&self) -> Vec<usize> {
        vec![N]
    }
    fn values(self) -> Vec<E> {
        self.to_vec()
    }
}

/// The description of the frame map `f` (see [`export_map!`](crate::export_map)).
pub fn describe<T, R, F>(_: &F, name: &str, summary: &str) -> Description
where
    T: Scalar,
    R: MapOutput,
    F: Fn(ArrayViewD<'_, T>) -> R,
{
    let summary = if summary.is_empty() { "A frame map (LiberTEM's AutoUDF)" } else { summary };
    Description::new(name, "", summary).methods(&[Method::Frame]).input_dtype(T::DTYPE)
}

/// The buffer of the frame map `f`: `f` called on a frame of zeros gives its shape.
///
/// # Errors
/// If the signal shape does not fit in memory.
pub fn result_buffers<T, R, F>(f: &F, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>>
where
    T: Scalar,
    R: MapOutput,
    F: Fn(ArrayViewD<'_, T>) -> R,
{
    let sig = to_usize_shape(&dataset.sig_shape)?;
    let zeros = ArrayD::from_elem(IxDyn(&sig), T::from_parts(0.0, 0.0));
    let shape: Vec<u64> = f(zeros.view()).shape().iter().map(|&d| d as u64).collect();
    Ok(vec![BufferDecl::nav(RESULT, <R::Elem as crate::Element>::DTYPE).extra_shape(&shape)])
}

/// Apply the frame map `f` to one frame and store its value.
///
/// # Errors
/// If the value's shape differs from the one found on the frame of zeros.
pub fn process_frame<T, R, F>(f: &F, frame: &Frame<'_>, results: &mut Buffers) -> Result<()>
where
    T: Scalar,
    R: MapOutput,
    F: Fn(ArrayViewD<'_, T>) -> R,
{
    let values = frame.values::<T>()?;
    let out = f(values.view());
    let shape = out.shape();
    results.assign(RESULT, &out.values()).map_err(|_| {
        UdfError::invalid_data(format!(
            "the frame map returned a value of shape {shape:?} for frame {}, unlike its value for a frame of zeros",
            frame.nav_index()
        ))
    })
}

/// Export a frame map as this component's plugin — LiberTEM's `ctx.map(f=...)`:
///
/// ```
/// use udf_sdk::prelude::*;
/// udf_sdk::export_map!("sum-rows", |frame: ArrayViewD<'_, f32>| frame.sum_axis(Axis(1)));
/// ```
///
/// `export_map!(name, function)` or `export_map!(name, summary, function)`; `function` is
/// a closure or a function taking `ArrayViewD<'_, T>` (`T` any element type: the frame,
/// converted to `T` if the input dtype differs) and returning a number or an array (see
/// [`map`](crate::map)). The result is the nav buffer `result`.
#[macro_export]
macro_rules! export_map {
    ($name:expr, $f:expr $(,)?) => {
        $crate::export_map!($name, "", $f);
    };
    ($name:expr, $summary:expr, $f:expr $(,)?) => {
        struct __UdfSdkMap;

        impl $crate::Udf for __UdfSdkMap {
            fn describe() -> $crate::Description {
                $crate::map::describe(&$f, $name, $summary)
            }
            fn result_buffers(
                _: &$crate::Params,
                dataset: &$crate::DatasetMeta,
            ) -> $crate::Result<Vec<$crate::BufferDecl>> {
                $crate::map::result_buffers(&$f, dataset)
            }
            fn new(_: &$crate::Context) -> $crate::Result<Self> {
                Ok(__UdfSdkMap)
            }
            fn process_frame(
                &mut self,
                frame: &$crate::Frame<'_>,
                results: &mut $crate::Buffers,
            ) -> $crate::Result<()> {
                $crate::map::process_frame(&$f, frame, results)
            }
        }

        $crate::export_udf!(__UdfSdkMap);
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::udf::plugin::types::{DeviceClass, Dtype};
    use ndarray::Axis;

    fn meta() -> DatasetMeta {
        DatasetMeta {
            nav_shape: vec![4],
            sig_shape: vec![3, 5],
            dataset_dtype: Dtype::Uint16,
            input_dtype: Dtype::Float32,
            roi_count: None,
            device_class: DeviceClass::Cpu,
            threads_per_worker: 1,
        }
    }

    #[test]
    fn the_buffer_takes_the_shape_and_dtype_of_the_value_on_zeros() {
        let rows = |frame: ArrayViewD<'_, f32>| frame.sum_axis(Axis(frame.ndim() - 1));
        let decls = result_buffers(&rows, &meta()).unwrap();
        assert_eq!(decls[0].name, "result");
        assert_eq!((decls[0].dtype, decls[0].extra_shape.clone()), (Dtype::Float32, vec![3]));
        let total = |frame: ArrayViewD<'_, u16>| frame.iter().map(|&v| u64::from(v)).sum::<u64>();
        let decls = result_buffers(&total, &meta()).unwrap();
        assert_eq!((decls[0].dtype, decls[0].extra_shape.clone()), (Dtype::Uint64, vec![]));
        let pair = |frame: ArrayViewD<'_, f64>| [frame.len() as f64, 0.0];
        assert_eq!(result_buffers(&pair, &meta()).unwrap()[0].extra_shape, vec![2]);
        let d = describe(&total, "total", "");
        assert_eq!(d.methods, vec![Method::Frame]);
        assert_eq!(d.input_dtype, crate::DtypePreference::Prefer(Dtype::Uint16));
        assert!(d.summary.contains("AutoUDF"));
    }
}
