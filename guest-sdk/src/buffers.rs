//! Result buffers and the views a plugin gets of them.
//!
//! The view arithmetic of LiberTEM's buffer layer lives here, once, and nowhere in
//! plugins. With `P` frames in the partition, `T` in the tile, extra shape `E`, frame
//! shape `S` and tile signal shape `s`:
//!
//! | kind   | storage     | partition | tile      | frame                  |
//! |--------|-------------|-----------|-----------|------------------------|
//! | nav    | `(P, *E)`   | `(P, *E)` | `(T, *E)` | `E`, or `(1,)` if empty |
//! | sig    | `(*S, *E)`  | `(*S, *E)`| `(*s, *E)`| `(*S, *E)`             |
//! | single | `E` or `(1,)` | same    | same      | same                   |

use crate::bindings::udf::plugin::types::{
    ArrayData, BufferDecl, BufferKind, BufferUse, Dtype, NamedArray, Ndarray, ResultEntry,
};
use crate::element::{Element, data_dtype, dtype_name, element_count, zeros};
use crate::error::{Result, UdfError};
use crate::params::{normalize, to_usize_shape};
use ndarray::{ArrayD, ArrayViewD, ArrayViewMutD, Axis, IxDyn, Slice};

/// The part of the buffers the current hook works on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Unit {
    /// Whole buffers: preprocess, postprocess, partition method, merge, get_results.
    Whole,
    /// A tile: frames `nav` (relative to the partition) and a signal slice.
    Tile { nav: std::ops::Range<usize>, sig_origin: Vec<usize>, sig_shape: Vec<usize> },
    /// One frame (relative to the partition).
    Frame { nav: usize },
}

/// One buffer: its declaration (when known) and its elements.
#[derive(Debug, Clone)]
struct Buffer {
    name: String,
    kind: Option<BufferKind>,
    sig_dims: usize,
    dtype: Dtype,
    shape: Vec<usize>,
    data: ArrayData,
}

impl Buffer {
    fn view<T: Element>(&self, unit: &Unit) -> Result<ArrayViewD<'_, T>> {
        let data = T::slice(&self.data).ok_or_else(|| self.wrong_type::<T>())?;
        let view = ArrayViewD::from_shape(IxDyn(&self.shape), data)?;
        Ok(restrict(view, self.kind, self.sig_dims, unit))
    }

    fn view_mut<T: Element>(&mut self, unit: &Unit) -> Result<ArrayViewMutD<'_, T>> {
        let err = self.wrong_type::<T>();
        let data = T::slice_mut(&mut self.data).ok_or(err)?;
        let view = ArrayViewMutD::from_shape(IxDyn(&self.shape), data)?;
        Ok(restrict(view, self.kind, self.sig_dims, unit))
    }

    fn wrong_type<T: Element>(&self) -> UdfError {
        UdfError::internal(format!(
            "buffer '{}' holds {}, not {}",
            self.name,
            dtype_name(self.dtype),
            dtype_name(T::DTYPE)
        ))
    }
}

/// Cut a whole-buffer view down to `unit` (the table in the module docs).
fn restrict<V: ViewLike>(mut view: V, kind: Option<BufferKind>, sig_dims: usize, unit: &Unit) -> V {
    match (kind, unit) {
        (_, Unit::Whole) | (None, _) | (Some(BufferKind::Single), _) => view,
        (Some(BufferKind::Nav), Unit::Tile { nav, .. }) => {
            view.slice_axis_(Axis(0), Slice::from(nav.clone()));
            view
        }
        (Some(BufferKind::Nav), Unit::Frame { nav }) => {
            let view = view.index_axis_move0(*nav);
            if view.ndim_() == 0 { view.insert_axis0() } else { view }
        }
        (Some(BufferKind::Sig), Unit::Tile { sig_origin, sig_shape, .. }) => {
            for axis in 0..sig_dims.min(sig_origin.len()) {
                let start = sig_origin[axis];
                view.slice_axis_(Axis(axis), Slice::from(start..start + sig_shape[axis]));
            }
            view
        }
        (Some(BufferKind::Sig), Unit::Frame { .. }) => view,
    }
}

/// The few view operations `restrict` needs from both view kinds.
trait ViewLike: Sized {
    fn slice_axis_(&mut self, axis: Axis, slice: Slice);
    fn index_axis_move0(self, index: usize) -> Self;
    fn insert_axis0(self) -> Self;
    fn ndim_(&self) -> usize;
}

impl<T> ViewLike for ArrayViewD<'_, T> {
    fn slice_axis_(&mut self, axis: Axis, slice: Slice) {
        self.slice_axis_inplace(axis, slice);
    }
    fn index_axis_move0(self, index: usize) -> Self {
        self.index_axis_move(Axis(0), index)
    }
    fn insert_axis0(self) -> Self {
        self.insert_axis(Axis(0))
    }
    fn ndim_(&self) -> usize {
        self.ndim()
    }
}

impl<T> ViewLike for ArrayViewMutD<'_, T> {
    fn slice_axis_(&mut self, axis: Axis, slice: Slice) {
        self.slice_axis_inplace(axis, slice);
    }
    fn index_axis_move0(self, index: usize) -> Self {
        self.index_axis_move(Axis(0), index)
    }
    fn insert_axis0(self) -> Self {
        self.insert_axis(Axis(0))
    }
    fn ndim_(&self) -> usize {
        self.ndim()
    }
}

/// A set of named buffers, viewed through the current unit (partition, tile or frame).
///
/// In `process_*`, `preprocess` and `postprocess` these are the partition's result
/// buffers; in `merge` the merged state (`dest`) and a partition's result (`src`); in
/// `get_results` the merged buffers.
#[derive(Debug, Clone)]
pub struct Buffers {
    buffers: Vec<Buffer>,
    pub(crate) unit: Unit,
}

/// Mutable access to one buffer, from [`Buffers::many_mut`].
pub struct BufferMut<'a> {
    buffer: &'a mut Buffer,
    unit: &'a Unit,
}

impl<'a> BufferMut<'a> {
    /// The typed view of this buffer for the current unit.
    pub fn view_mut<T: Element>(self) -> Result<ArrayViewMutD<'a, T>> {
        self.buffer.view_mut(self.unit)
    }
}

impl Buffers {
    /// Zeroed buffers for the declarations (result-only ones are skipped), with `frames`
    /// entries along the nav axis.
    pub(crate) fn allocate(decls: &[BufferDecl], frames: u64, sig_shape: &[u64]) -> Result<Self> {
        let mut buffers = Vec::new();
        for decl in decls.iter().filter(|d| d.usage != BufferUse::ResultOnly) {
            let shape = storage_shape(decl, frames, sig_shape)?;
            let len = shape.iter().product();
            buffers.push(Buffer {
                name: decl.name.clone(),
                kind: Some(decl.kind),
                sig_dims: sig_shape.len(),
                dtype: decl.dtype,
                shape,
                data: zeros(decl.dtype, len),
            });
        }
        Ok(Buffers { buffers, unit: Unit::Whole })
    }

    /// Buffers received from the host (merge, get_results): whole-array views.
    pub(crate) fn from_named(arrays: Vec<NamedArray>) -> Result<Self> {
        let mut buffers = Vec::new();
        for mut named in arrays {
            normalize(&mut named.data);
            let shape = to_usize_shape(&named.data.shape)?;
            let expected: usize = shape.iter().product();
            if element_count(&named.data.data, named.data.dtype) != expected
                || data_dtype(&named.data.data) != Some(named.data.dtype)
            {
                return Err(UdfError::internal(format!(
                    "buffer '{}' from the host does not match its shape or dtype",
                    named.name
                )));
            }
            buffers.push(Buffer {
                name: named.name,
                kind: None,
                sig_dims: 0,
                dtype: named.data.dtype,
                shape,
                data: named.data.data,
            });
        }
        Ok(Buffers { buffers, unit: Unit::Whole })
    }

    pub(crate) fn into_named(self) -> Vec<NamedArray> {
        self.buffers
            .into_iter()
            .map(|b| NamedArray {
                name: b.name,
                data: Ndarray { dtype: b.dtype, shape: b.shape.iter().map(|&d| d as u64).collect(), data: b.data },
            })
            .collect()
    }

    fn index(&self, name: &str) -> Result<usize> {
        self.buffers.iter().position(|b| b.name == name).ok_or_else(|| {
            let known: Vec<&str> = self.buffers.iter().map(|b| b.name.as_str()).collect();
            UdfError::internal(format!("no buffer '{name}' (buffers: {})", known.join(", ")))
        })
    }

    /// Names of the buffers present.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.buffers.iter().map(|b| b.name.as_str())
    }

    /// The dtype of a buffer.
    pub fn dtype(&self, name: &str) -> Result<Dtype> {
        Ok(self.buffers[self.index(name)?].dtype)
    }

    /// A read-only typed view of a buffer for the current unit.
    pub fn view<T: Element>(&self, name: &str) -> Result<ArrayViewD<'_, T>> {
        self.buffers[self.index(name)?].view(&self.unit)
    }

    /// A mutable typed view of a buffer for the current unit.
    pub fn view_mut<T: Element>(&mut self, name: &str) -> Result<ArrayViewMutD<'_, T>> {
        let index = self.index(name)?;
        self.buffers[index].view_mut(&self.unit)
    }

    /// A read-only typed view of a whole buffer, whatever the current unit.
    pub fn whole<T: Element>(&self, name: &str) -> Result<ArrayViewD<'_, T>> {
        self.buffers[self.index(name)?].view(&Unit::Whole)
    }

    /// A mutable typed view of a whole buffer, whatever the current unit.
    pub fn whole_mut<T: Element>(&mut self, name: &str) -> Result<ArrayViewMutD<'_, T>> {
        let index = self.index(name)?;
        self.buffers[index].view_mut(&Unit::Whole)
    }

    /// Mutable access to several distinct buffers at once:
    /// `let [sum, n] = results.many_mut(["sum", "n"])?;`
    pub fn many_mut<const N: usize>(&mut self, names: [&str; N]) -> Result<[BufferMut<'_>; N]> {
        let mut indices = [0; N];
        for (slot, name) in indices.iter_mut().zip(names) {
            *slot = self.index(name)?;
        }
        let unit = &self.unit;
        let buffers = self
            .buffers
            .get_disjoint_mut(indices)
            .map_err(|_| UdfError::internal(format!("buffers {names:?} are not distinct")))?;
        Ok(buffers.map(|buffer| BufferMut { buffer, unit }))
    }

    /// A copy of a whole buffer as an owned array (for `get_results`).
    pub fn to_owned<T: Element>(&self, name: &str) -> Result<ArrayD<T>> {
        Ok(self.buffers[self.index(name)?].view::<T>(&Unit::Whole)?.to_owned())
    }

    /// A buffer unchanged, as a result (what LiberTEM does for buffers `get_results`
    /// does not mention).
    pub fn pass_through(&self, name: &str) -> Result<ResultOut> {
        let b = &self.buffers[self.index(name)?];
        Ok(ResultOut {
            entry: ResultEntry {
                name: b.name.clone(),
                data: Ndarray {
                    dtype: b.dtype,
                    shape: b.shape.iter().map(|&d| d as u64).collect(),
                    data: b.data.clone(),
                },
                valid: None,
            },
        })
    }
}

/// The storage shape of a declared buffer.
pub(crate) fn storage_shape(decl: &BufferDecl, frames: u64, sig_shape: &[u64]) -> Result<Vec<usize>> {
    let mut shape: Vec<u64> = match decl.kind {
        BufferKind::Nav => vec![frames],
        BufferKind::Sig => sig_shape.to_vec(),
        BufferKind::Single => Vec::new(),
    };
    shape.extend_from_slice(&decl.extra_shape);
    if shape.is_empty() {
        shape.push(1);
    }
    to_usize_shape(&shape)
}

/// One result of [`Udf::get_results`](crate::Udf::get_results).
#[derive(Debug, Clone)]
pub struct ResultOut {
    pub(crate) entry: ResultEntry,
}

impl ResultOut {
    /// A result from an owned array. Nav results are `(frames, *extra_shape)`, in the
    /// compressed (ROI-selected) order.
    pub fn new<T: Element>(name: &str, array: ArrayD<T>) -> Self {
        let shape = array.shape().iter().map(|&d| d as u64).collect();
        let values: Vec<T> = array.iter().copied().collect();
        ResultOut {
            entry: ResultEntry {
                name: name.to_owned(),
                data: Ndarray { dtype: T::DTYPE, shape, data: T::into_data(values) },
                valid: None,
            },
        }
    }

    /// Attach a valid mask (LiberTEM's `with_mask`): one value, one per nav position, or
    /// one per element.
    pub fn with_mask(mut self, mask: Vec<bool>) -> Self {
        self.entry.valid = Some(mask);
        self
    }
}
