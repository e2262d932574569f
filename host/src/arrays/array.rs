//! [`HostArray`]: an n-dimensional array the host owns, and its views.
//!
//! A host array is a representation of an n-d array. Today there is one, [`Dense`]:
//! a [`Storage`] of elements and a strided layout over it (shape, strides in elements,
//! offset), so slicing with steps, transposing, broadcasting and adding axes are views
//! that copy nothing. The enum is where a compressed sparse row (CSR) representation
//! goes next (LiberTEM's sparse backends): an operation asks for the representation it
//! handles (`dense`) and any other answers with [`ArrayError::Unsupported`] until it
//! has a kernel.

use super::error::{ArrayError, normalize_axes, normalize_axis, shape_text};
use super::memory::{ArrayMemory, Lease, Storage, array_bytes, check_ndim, element_count};
use crate::dtype::DType;
use ndarray::{ArrayViewD, ArrayViewMutD, IxDyn, ShapeBuilder};
use std::sync::Arc;

/// A view's layout for ndarray: byte offset of the lowest element, shape, strides (all
/// non-negative) and the axes whose strides were negative.
type RawParts = (usize, Vec<usize>, Vec<usize>, Vec<usize>);

/// An n-dimensional array the host owns.
#[derive(Clone)]
pub enum HostArray {
    /// Elements in memory with a strided layout.
    Dense(Dense),
    /// A tile of stored integers seen as the run's float input dtype, converted where it
    /// is read: reductions convert in registers, every other operation converts it once.
    Converting(Converting),
}

impl std::fmt::Debug for HostArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostArray::Dense(d) => write!(f, "HostArray({} {})", d.dtype.name(), shape_text(&d.shape)),
            HostArray::Converting(c) => {
                write!(f, "HostArray({} {} of {})", c.dtype.name(), shape_text(&c.stored.shape), c.stored.dtype.name())
            }
        }
    }
}

/// A strided view of a [`Storage`].
#[derive(Clone)]
pub struct Dense {
    pub(crate) storage: Arc<Storage>,
    pub(crate) dtype: DType,
    pub(crate) shape: Vec<usize>,
    /// Elements to step per index, per axis (negative for reversed slices, 0 for
    /// broadcast axes).
    pub(crate) strides: Vec<isize>,
    /// Elements from the storage's start to element `[0, 0, ...]`.
    pub(crate) offset: usize,
}

/// Stored integers (a tile mapped from the file) seen as a float dtype, the values an
/// `as` cast gives — what the executor's conversion on read would have made. Reductions
/// ([`super::reduce`]) read the integers and convert in registers; any other operation
/// gets the converted copy, made once ([`HostArray::dense`]).
#[derive(Clone)]
pub struct Converting {
    /// The stored elements, C order.
    pub(crate) stored: Dense,
    /// The dtype the plugin sees (`float32`, `float64`).
    pub(crate) dtype: DType,
    memory: Arc<ArrayMemory>,
    converted: Arc<std::sync::OnceLock<Dense>>,
}

impl Converting {
    /// The converted copy, made on first use. Fails as the stored view does once its
    /// lease is revoked, also when the copy exists (a tile's views end with its call).
    fn converted(&self, op: &str) -> Result<&Dense, ArrayError> {
        drop(self.stored.storage.read(op)?);
        if let Some(d) = self.converted.get() {
            return Ok(d);
        }
        let cx = super::elementwise::Ctx { memory: &self.memory, stop: &|| None };
        let mut copy = super::elementwise::cast_dense(&cx, &self.stored, self.dtype, op)?;
        // Read-only as the tile itself: reductions read the stored values, so a write
        // into the copy would not be seen by all operations.
        if let Some(storage) = Arc::get_mut(&mut copy.storage) {
            storage.freeze();
        }
        Ok(self.converted.get_or_init(|| copy))
    }

    /// Whether every stored value converts to `dtype` exactly (then any accumulator
    /// dtype may read the stored values directly).
    pub(crate) fn exact(&self) -> bool {
        self.stored.dtype.size() < self.dtype.size()
    }
}

/// Rows and columns per block of [`transpose_in_blocks`]: a block's source and
/// destination lines stay in L1 while it is copied.
const TRANSPOSE_BLOCK: usize = 32;

/// `dst` (C order) = `view`, a matrix with contiguous columns, in square blocks: copied
/// element by element in C order, every read would fall in another cache line (a
/// plugin's masks cut to `(pixels, M)` once per partition took tens of milliseconds).
fn transpose_in_blocks<T: Copy>(view: ndarray::ArrayView2<'_, T>, dst: &mut [T]) {
    let (rows, cols) = view.dim();
    for r0 in (0..rows).step_by(TRANSPOSE_BLOCK) {
        for c0 in (0..cols).step_by(TRANSPOSE_BLOCK) {
            for c in c0..(c0 + TRANSPOSE_BLOCK).min(cols) {
                for r in r0..(r0 + TRANSPOSE_BLOCK).min(rows) {
                    dst[r * cols + c] = view[[r, c]];
                }
            }
        }
    }
}

/// One entry of an index (`x[1:5:2, None, ..., 3]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexItem {
    /// `start:stop:step` (Python's defaults when `None`).
    Slice { start: Option<i64>, stop: Option<i64>, step: Option<i64> },
    /// One position; the axis goes away (negative counts from the end).
    At(i64),
    /// A new axis of length 1 (`None`, `np.newaxis`).
    NewAxis,
    /// As many full slices as needed (`...`).
    Ellipsis,
}

impl IndexItem {
    pub const FULL: IndexItem = IndexItem::Slice { start: None, stop: None, step: None };
}

/// C-order strides (in elements) of `shape`.
pub fn c_strides(shape: &[usize]) -> Vec<isize> {
    let mut strides = vec![0isize; shape.len()];
    let mut step = 1isize;
    for (s, &d) in strides.iter_mut().zip(shape).rev() {
        *s = step;
        step = step.saturating_mul(d.max(1) as isize);
    }
    strides
}

impl HostArray {
    /// The dense representation, or the error `op` gives for others.
    pub fn dense(&self, op: &str) -> Result<&Dense, ArrayError> {
        match self {
            HostArray::Dense(d) => Ok(d),
            HostArray::Converting(c) => c.converted(op),
        }
    }

    pub fn dtype(&self) -> DType {
        match self {
            HostArray::Dense(d) => d.dtype,
            HostArray::Converting(c) => c.dtype,
        }
    }

    pub fn shape(&self) -> &[usize] {
        match self {
            HostArray::Dense(d) => &d.shape,
            HostArray::Converting(c) => &c.stored.shape,
        }
    }

    pub fn ndim(&self) -> usize {
        self.shape().len()
    }

    /// Number of elements.
    pub fn size(&self) -> usize {
        self.shape().iter().product()
    }

    /// A new C-order array of `dtype` and `shape`, zeroed.
    pub fn zeros(memory: &Arc<ArrayMemory>, dtype: DType, shape: &[usize]) -> Result<HostArray, ArrayError> {
        Dense::alloc(memory, "zeros", dtype, shape, true).map(HostArray::Dense)
    }

    /// A new C-order array from little-endian bytes.
    pub fn from_bytes(
        memory: &Arc<ArrayMemory>,
        dtype: DType,
        shape: &[usize],
        bytes: &[u8],
    ) -> Result<HostArray, ArrayError> {
        let n = element_count("asarray", shape)?;
        if n.checked_mul(dtype.size()) != Some(bytes.len()) {
            return Err(ArrayError::value(
                "asarray",
                format!(
                    "{} bytes do not hold a {} array of shape {} ({} bytes)",
                    bytes.len(),
                    dtype.name(),
                    shape_text(shape),
                    n as u128 * dtype.size() as u128
                ),
            ));
        }
        let dense = Dense::alloc(memory, "asarray", dtype, shape, false)?;
        dense.storage.write("asarray")?.copy_from_slice(bytes);
        Ok(HostArray::Dense(dense))
    }

    /// A view of `bytes` (C order) that reads them until `lease` is revoked; a copy when
    /// they are not aligned for `dtype`.
    ///
    /// # Safety
    /// As [`Storage::borrowed`]: `bytes` stay valid and unchanged until `lease` is
    /// revoked.
    pub unsafe fn borrowed(
        memory: &Arc<ArrayMemory>,
        dtype: DType,
        shape: &[usize],
        bytes: &[u8],
        lease: Arc<Lease>,
    ) -> Result<HostArray, ArrayError> {
        // The item size counts: `(0, 2**62)` of int64 is too big an array (as in NumPy),
        // though it holds no element and no byte.
        if array_bytes("tile", dtype, shape)? != bytes.len() {
            return Err(ArrayError::value("tile", "bytes and shape disagree"));
        }
        if !(bytes.as_ptr() as usize).is_multiple_of(dtype.size().min(16)) {
            return Self::from_bytes(memory, dtype, shape, bytes);
        }
        // SAFETY: passed on to our caller.
        let storage = unsafe { Storage::borrowed(bytes, lease) };
        Ok(HostArray::Dense(Dense { storage, dtype, strides: c_strides(shape), shape: shape.to_vec(), offset: 0 }))
    }

    /// A view of `bytes` (C order) of the stored dtype `stored` that the plugin sees as
    /// `dtype` (a float): a [`Converting`] array.
    ///
    /// # Safety
    /// As [`Storage::borrowed`]: `bytes` stay valid and unchanged until `lease` is
    /// revoked.
    pub unsafe fn borrowed_converting(
        memory: &Arc<ArrayMemory>,
        stored: DType,
        dtype: DType,
        shape: &[usize],
        bytes: &[u8],
        lease: Arc<Lease>,
    ) -> Result<HostArray, ArrayError> {
        // SAFETY: passed on to our caller.
        let stored = match unsafe { Self::borrowed(memory, stored, shape, bytes, lease)? } {
            HostArray::Dense(d) => d,
            HostArray::Converting(c) => c.stored,
        };
        Ok(HostArray::Converting(Converting {
            stored,
            dtype,
            memory: memory.clone(),
            converted: Arc::new(std::sync::OnceLock::new()),
        }))
    }

    /// The elements in C order as little-endian bytes: a copy, charged to `memory` while
    /// it is made (a broadcast view copies more than it holds).
    pub fn to_bytes(&self, memory: &ArrayMemory, op: &str) -> Result<Vec<u8>, ArrayError> {
        let d = self.dense(op)?;
        let len = array_bytes(op, d.dtype, &d.shape)?;
        let _copy = memory.reserve(op, &d.shape, len)?;
        let bytes = d.storage.read(op)?;
        if d.is_c_contiguous() {
            let start = d.offset * d.dtype.size();
            return Ok(bytes[start..start + len].to_vec());
        }
        let mut out = Vec::new();
        out.try_reserve_exact(len).map_err(|_| ArrayError::Memory {
            op: op.into(),
            shape: d.shape.clone(),
            bytes: len as u128,
            available: 0,
        })?;
        crate::with_dtype!(d.dtype, T => {
            let view = d.view_in::<T>(&bytes, op)?;
            for v in view.iter() {
                out.extend_from_slice(bytemuck::bytes_of(v));
            }
        }, {
            let view = d.view_in::<u8>(&bytes, op)?;
            out.extend(view.iter().copied());
        });
        Ok(out)
    }

    /// `x[index]`: a view (basic indexing).
    pub fn get(&self, index: &[IndexItem]) -> Result<HostArray, ArrayError> {
        Ok(HostArray::Dense(self.dense("getitem")?.index(index)?))
    }

    /// `reshape(x, shape)` with one `-1` allowed: a view when the layout allows, else a
    /// copy.
    pub fn reshape(&self, memory: &Arc<ArrayMemory>, shape: &[i64]) -> Result<HostArray, ArrayError> {
        if let HostArray::Converting(c) = self {
            // A tile is C order: its reshapes are views that still convert where read.
            drop(c.stored.storage.read("reshape")?);
            let shape = resolve_shape("reshape", &c.stored.shape, shape)?;
            if let Some(stored) = c.stored.reshaped_view(&shape) {
                return Ok(HostArray::Converting(Converting { stored, converted: Default::default(), ..c.clone() }));
            }
        }
        let d = self.dense("reshape")?;
        let shape = resolve_shape("reshape", &d.shape, shape)?;
        if let Some(view) = d.reshaped_view(&shape) {
            return Ok(HostArray::Dense(view));
        }
        let copy = d.to_c_order(memory, "reshape")?;
        Ok(HostArray::Dense(Dense { strides: c_strides(&shape), shape, ..copy }))
    }

    /// `permute_dims(x, axes)` (`None`: reversed, as `x.T`).
    pub fn permute_dims(&self, axes: Option<&[i64]>) -> Result<HostArray, ArrayError> {
        let d = self.dense("permute_dims")?;
        let order: Vec<usize> = match axes {
            None => (0..d.shape.len()).rev().collect(),
            Some(axes) => {
                if axes.len() != d.shape.len() {
                    return Err(ArrayError::shape(
                        "permute_dims",
                        &[&d.shape],
                        format!("{} axes given for {} dimensions", axes.len(), d.shape.len()),
                    ));
                }
                normalize_axes("permute_dims", Some(axes), &d.shape)?
            }
        };
        Ok(HostArray::Dense(Dense {
            shape: order.iter().map(|&a| d.shape[a]).collect(),
            strides: order.iter().map(|&a| d.strides[a]).collect(),
            ..d.clone()
        }))
    }

    /// `broadcast_to(x, shape)`: a read-only view.
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<HostArray, ArrayError> {
        Ok(HostArray::Dense(self.dense("broadcast_to")?.broadcast("broadcast_to", shape)?))
    }

    /// `expand_dims(x, axis)`.
    pub fn expand_dims(&self, axis: i64) -> Result<HostArray, ArrayError> {
        let d = self.dense("expand_dims")?;
        let mut widened = d.shape.clone();
        widened.push(1);
        check_ndim("expand_dims", &widened)?;
        let at = normalize_axis("expand_dims", axis, &widened)?;
        let mut out = d.clone();
        out.shape.insert(at, 1);
        out.strides.insert(at, 0);
        Ok(HostArray::Dense(out))
    }

    /// `squeeze(x, axis)`: drop axes of length 1 (`None`: all of them).
    pub fn squeeze(&self, axes: Option<&[i64]>) -> Result<HostArray, ArrayError> {
        let d = self.dense("squeeze")?;
        let drop: Vec<usize> = match axes {
            None => (0..d.shape.len()).filter(|&a| d.shape[a] == 1).collect(),
            Some(axes) => {
                let axes = normalize_axes("squeeze", Some(axes), &d.shape)?;
                if let Some(&a) = axes.iter().find(|&&a| d.shape[a] != 1) {
                    return Err(ArrayError::shape(
                        "squeeze",
                        &[&d.shape],
                        format!("axis {a} has length {}, not 1", d.shape[a]),
                    ));
                }
                axes
            }
        };
        let keep = |a: &usize| !drop.contains(a);
        Ok(HostArray::Dense(Dense {
            shape: (0..d.shape.len()).filter(keep).map(|a| d.shape[a]).collect(),
            strides: (0..d.shape.len()).filter(keep).map(|a| d.strides[a]).collect(),
            ..d.clone()
        }))
    }
}

/// Resolve a shape with at most one `-1` for `len` elements of `from`.
pub fn resolve_shape(op: &str, from: &[usize], shape: &[i64]) -> Result<Vec<usize>, ArrayError> {
    if shape.len() > super::memory::MAX_NDIM {
        return Err(ArrayError::value(op, format!("{} dimensions are more than an array can have", shape.len())));
    }
    let len: usize = from.iter().product();
    let unknown: Vec<usize> = (0..shape.len()).filter(|&i| shape[i] == -1).collect();
    if unknown.len() > 1 || shape.iter().any(|&d| d < -1) {
        return Err(ArrayError::value(
            op,
            format!("cannot reshape to {shape:?}: only one -1 and no other negative length"),
        ));
    }
    // Past u128 it is no shape of `len` elements either.
    let known: u128 =
        shape.iter().filter(|&&d| d >= 0).try_fold(1u128, |n, &d| n.checked_mul(d as u128)).unwrap_or(u128::MAX);
    let mut out: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
    if let [i] = unknown[..] {
        if known == 0 || !(len as u128).is_multiple_of(known) {
            return Err(ArrayError::shape(op, &[from], format!("cannot reshape {len} elements to {shape:?}")));
        }
        out[i] = (len as u128 / known) as usize;
    } else if known != len as u128 {
        return Err(ArrayError::shape(op, &[from, &out], format!("cannot reshape {len} elements to {known}")));
    }
    // `(0, 2**62, 2**62)` holds 0 elements, but is too big an array (as in NumPy).
    element_count(op, &out)?;
    Ok(out)
}

/// The broadcast shape of several shapes (NumPy's rules), or the error for `op`.
pub fn broadcast_shapes(op: &str, shapes: &[&[usize]]) -> Result<Vec<usize>, ArrayError> {
    let ndim = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; ndim];
    for shape in shapes {
        for (i, &d) in shape.iter().enumerate() {
            let o = &mut out[ndim - shape.len() + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return Err(ArrayError::shape(op, shapes, "they do not broadcast together"));
            }
        }
    }
    Ok(out)
}

impl Dense {
    /// A new C-order array.
    pub fn alloc(
        memory: &Arc<ArrayMemory>,
        op: &str,
        dtype: DType,
        shape: &[usize],
        zeroed: bool,
    ) -> Result<Dense, ArrayError> {
        let storage = memory.allocate(op, dtype, shape, zeroed)?;
        Ok(Dense { storage, dtype, shape: shape.to_vec(), strides: c_strides(shape), offset: 0 })
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the elements are in C order, one after the other.
    pub fn is_c_contiguous(&self) -> bool {
        if self.shape.contains(&0) {
            return true;
        }
        let mut step = 1isize;
        for (&d, &s) in self.shape.iter().zip(&self.strides).rev() {
            if d != 1 && s != step {
                return false;
            }
            step = step.saturating_mul(d as isize);
        }
        true
    }

    /// Whether two views read exactly the same elements in the same order.
    pub fn same_layout(&self, other: &Dense) -> bool {
        self.dtype == other.dtype
            && self.offset == other.offset
            && self.shape == other.shape
            && self.strides == other.strides
    }

    /// Whether two arrays may share elements.
    pub fn shares_storage(&self, other: &Dense) -> bool {
        Arc::ptr_eq(&self.storage, &other.storage)
    }

    /// The array as an ndarray view of `T` over `bytes` (this array's storage, read).
    pub fn view_in<'a, T: bytemuck::Pod>(&self, bytes: &'a [u8], op: &str) -> Result<ArrayViewD<'a, T>, ArrayError> {
        let (ptr, shape, strides, flips) = self.raw_parts::<T>(bytes.len(), op)?;
        // SAFETY: `raw_parts` checked that every element the layout reaches lies inside
        // `bytes` and that the start is aligned for `T`; `bytes` is borrowed for 'a.
        let mut view = unsafe {
            ArrayViewD::from_shape_ptr(IxDyn(&shape).strides(IxDyn(&strides)), bytes.as_ptr().add(ptr).cast::<T>())
        };
        for axis in flips {
            view.invert_axis(ndarray::Axis(axis));
        }
        Ok(view)
    }

    /// The array as a mutable ndarray view over `bytes` (its storage, written). Fails for
    /// layouts where elements repeat (broadcast views).
    pub fn view_mut_in<'a, T: bytemuck::Pod>(
        &self,
        bytes: &'a mut [u8],
        op: &str,
    ) -> Result<ArrayViewMutD<'a, T>, ArrayError> {
        if self.shape.iter().zip(&self.strides).any(|(&d, &s)| s == 0 && d > 1) {
            return Err(ArrayError::value(op, "cannot write into a broadcast view (its elements repeat)"));
        }
        let (ptr, shape, strides, flips) = self.raw_parts::<T>(bytes.len(), op)?;
        // SAFETY: as in `view_in`; no element repeats (checked above) and `bytes` is
        // borrowed mutably for 'a.
        let mut view = unsafe {
            ArrayViewMutD::from_shape_ptr(
                IxDyn(&shape).strides(IxDyn(&strides)),
                bytes.as_mut_ptr().add(ptr).cast::<T>(),
            )
        };
        for axis in flips {
            view.invert_axis(ndarray::Axis(axis));
        }
        Ok(view)
    }

    /// The byte offset of the lowest element, the shape, non-negative strides and the
    /// axes to flip back; checked against a storage of `storage_len` bytes.
    fn raw_parts<T>(&self, storage_len: usize, op: &str) -> Result<RawParts, ArrayError> {
        let size = std::mem::size_of::<T>();
        let broken = || ArrayError::value(op, "internal error: a view reaches outside its array");
        if size == 0 || size != self.dtype.size() {
            return Err(broken());
        }
        if self.shape.contains(&0) {
            // No element is reached: C-order strides of the shape (ndarray refuses
            // strides under which elements overlap, even of an empty view) instead of
            // the view's, which a reversed or stepped slice of an empty axis scales.
            let strides = c_strides(&self.shape).iter().map(|s| s.unsigned_abs()).collect();
            return Ok((0, self.shape.clone(), strides, Vec::new()));
        }
        let mut low = self.offset as isize;
        let mut high = self.offset as isize;
        let mut flips = Vec::new();
        let mut strides = Vec::with_capacity(self.shape.len());
        for (axis, (&d, &s)) in self.shape.iter().zip(&self.strides).enumerate() {
            let reach = s.checked_mul(d.saturating_sub(1) as isize).ok_or_else(broken)?;
            if s < 0 {
                low = low.checked_add(reach).ok_or_else(broken)?;
                flips.push(axis);
            } else {
                high = high.checked_add(reach).ok_or_else(broken)?;
            }
            strides.push(s.unsigned_abs());
        }
        let end = (high as usize).checked_add(1).and_then(|n| n.checked_mul(size));
        if low < 0 || end.is_none_or(|end| end > storage_len) {
            return Err(broken());
        }
        let start = low as usize * size;
        if !start.is_multiple_of(size.min(16)) {
            return Err(broken());
        }
        Ok((start, self.shape.clone(), strides, flips))
    }

    /// A C-order copy.
    pub fn to_c_order(&self, memory: &Arc<ArrayMemory>, op: &str) -> Result<Dense, ArrayError> {
        let out = Dense::alloc(memory, op, self.dtype, &self.shape, false)?;
        {
            let src = self.storage.read(op)?;
            let mut dst = out.storage.write(op)?;
            crate::with_dtype!(self.dtype, T => {
                let view = self.view_in::<T>(&src, op)?;
                let dst: &mut [T] = bytemuck::cast_slice_mut(&mut dst[..]);
                if self.is_transposed_matrix() {
                    let view = view.into_dimensionality::<ndarray::Ix2>().map_err(|e| ArrayError::value(op, e.to_string()))?;
                    transpose_in_blocks(view, dst);
                } else {
                    for (d, s) in dst.iter_mut().zip(view.iter()) {
                        *d = *s;
                    }
                }
            }, {
                let view = self.view_in::<u8>(&src, op)?;
                for (d, s) in dst.iter_mut().zip(view.iter()) {
                    *d = *s;
                }
            });
        }
        Ok(out)
    }

    /// Whether this is a matrix whose columns are contiguous (the transpose of a C-order
    /// matrix): [`Dense::to_c_order`] copies it in blocks.
    fn is_transposed_matrix(&self) -> bool {
        self.shape.len() == 2 && self.shape[0] > 1 && self.strides[0] == 1 && self.strides[1] > 1
    }

    /// The same elements with `shape`, without copying, when the layout allows.
    fn reshaped_view(&self, shape: &[usize]) -> Option<Dense> {
        if self.is_c_contiguous() {
            return Some(Dense { shape: shape.to_vec(), strides: c_strides(shape), ..self.clone() });
        }
        None
    }

    /// A read-only view broadcast to `shape`.
    pub fn broadcast(&self, op: &str, shape: &[usize]) -> Result<Dense, ArrayError> {
        array_bytes(op, self.dtype, shape)?;
        if shape.len() < self.shape.len() {
            return Err(ArrayError::shape(op, &[&self.shape, shape], "cannot broadcast to fewer dimensions"));
        }
        let lead = shape.len() - self.shape.len();
        let mut strides = vec![0isize; shape.len()];
        for (i, (&d, &s)) in self.shape.iter().zip(&self.strides).enumerate() {
            let target = shape[lead + i];
            if d == target {
                strides[lead + i] = s;
            } else if d == 1 {
                strides[lead + i] = 0;
            } else {
                return Err(ArrayError::shape(op, &[&self.shape, shape], "they do not broadcast together"));
            }
        }
        Ok(Dense { shape: shape.to_vec(), strides, ..self.clone() })
    }

    /// Basic indexing: slices with steps, integers, new axes, one ellipsis.
    pub fn index(&self, index: &[IndexItem]) -> Result<Dense, ArrayError> {
        let op = "getitem";
        let ellipses = index.iter().filter(|i| matches!(i, IndexItem::Ellipsis)).count();
        if ellipses > 1 {
            return Err(ArrayError::index(op, &self.shape, "an index can only have a single ellipsis ('...')"));
        }
        let consuming = index.iter().filter(|i| matches!(i, IndexItem::Slice { .. } | IndexItem::At(_))).count();
        if consuming > self.shape.len() {
            return Err(ArrayError::index(
                op,
                &self.shape,
                format!("too many indices: {consuming} for {} dimensions", self.shape.len()),
            ));
        }
        let mut expanded: Vec<IndexItem> = Vec::with_capacity(self.shape.len() + index.len());
        for item in index {
            if matches!(item, IndexItem::Ellipsis) {
                expanded.extend(std::iter::repeat_n(IndexItem::FULL, self.shape.len() - consuming));
            } else {
                expanded.push(*item);
            }
        }
        let used = expanded.iter().filter(|i| matches!(i, IndexItem::Slice { .. } | IndexItem::At(_))).count();
        expanded.extend(std::iter::repeat_n(IndexItem::FULL, self.shape.len() - used));

        // Offsets and strides saturate: they can only overflow for an empty array (whose
        // strides `c_strides` saturates), where no element is read through them.
        let mut offset = self.offset as isize;
        let mut shape = Vec::new();
        let mut strides = Vec::new();
        let mut axis = 0;
        for item in expanded {
            match item {
                IndexItem::NewAxis => {
                    shape.push(1);
                    strides.push(0);
                }
                IndexItem::At(i) => {
                    let n = self.shape[axis] as i64;
                    let pos = if i < 0 { i + n } else { i };
                    if pos < 0 || pos >= n {
                        return Err(ArrayError::index(
                            op,
                            &self.shape,
                            format!("index {i} is out of bounds for axis {axis} with size {n}"),
                        ));
                    }
                    offset = offset.saturating_add((pos as isize).saturating_mul(self.strides[axis]));
                    axis += 1;
                }
                IndexItem::Slice { start, stop, step } => {
                    let (first, len, step) = slice_indices(op, &self.shape, self.shape[axis], start, stop, step)?;
                    if len > 0 {
                        offset = offset.saturating_add((first as isize).saturating_mul(self.strides[axis]));
                    }
                    shape.push(len);
                    // One element or none: the step is never taken (and may be huge).
                    let stride = if len > 1 { self.strides[axis].saturating_mul(step as isize) } else { 0 };
                    strides.push(stride);
                    axis += 1;
                }
                IndexItem::Ellipsis => {}
            }
        }
        check_ndim(op, &shape)?;
        let offset = if shape.contains(&0) { self.offset } else { offset as usize };
        Ok(Dense { shape, strides, offset, ..self.clone() })
    }
}

/// Python's `slice.indices(n)`: the first index, the length and the step.
pub fn slice_indices(
    op: &str,
    shape: &[usize],
    n: usize,
    start: Option<i64>,
    stop: Option<i64>,
    step: Option<i64>,
) -> Result<(i64, usize, i64), ArrayError> {
    let n = n as i64;
    let step = step.unwrap_or(1);
    if step == 0 {
        return Err(ArrayError::index(op, shape, "slice step cannot be zero"));
    }
    let clamp = |v: i64, lo: i64, hi: i64| v.max(lo).min(hi);
    let norm = |v: i64| if v < 0 { v.saturating_add(n) } else { v };
    let (first, last) = if step > 0 {
        (clamp(norm(start.unwrap_or(0)), 0, n), clamp(norm(stop.unwrap_or(n)), 0, n))
    } else {
        (clamp(start.map_or(n - 1, norm), -1, n - 1), stop.map_or(-1, |s| clamp(norm(s), -1, n - 1)))
    };
    // `last - first` is at most `n + 1`; the step may be anything but 0 (`i64::MIN` too).
    let len = if step > 0 {
        if last > first { (last - first - 1) / step + 1 } else { 0 }
    } else if first > last {
        ((first - last - 1) as u64 / step.unsigned_abs() + 1) as i64
    } else {
        0
    };
    Ok((first, len as usize, step))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_follow_python() {
        // Expected values: Python's range(10)[start:stop:step].
        type Case<'a> = (Option<i64>, Option<i64>, Option<i64>, &'a [i64]);
        let cases: &[Case<'_>] = &[
            (None, None, None, &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]),
            (Some(2), Some(8), Some(3), &[2, 5]),
            (None, None, Some(-1), &[9, 8, 7, 6, 5, 4, 3, 2, 1, 0]),
            (Some(-3), None, None, &[7, 8, 9]),
            (Some(8), Some(2), Some(-2), &[8, 6, 4]),
            (Some(20), None, Some(-3), &[9, 6, 3, 0]),
            (Some(5), Some(5), None, &[]),
            (None, Some(-20), Some(-1), &[9, 8, 7, 6, 5, 4, 3, 2, 1, 0]),
        ];
        for &(start, stop, step, expected) in cases {
            let (first, len, step) = slice_indices("t", &[10], 10, start, stop, step).unwrap();
            let got: Vec<i64> = (0..len as i64).map(|i| first + i * step).collect();
            assert_eq!(got, expected, "{start:?}:{stop:?}:{step:?}");
        }
    }

    fn int_array(memory: &Arc<ArrayMemory>, shape: &[usize]) -> HostArray {
        let n: usize = shape.iter().product();
        let bytes: Vec<u8> = (0..n as i32).flat_map(|v| v.to_le_bytes()).collect();
        HostArray::from_bytes(memory, DType::I32, shape, &bytes).unwrap()
    }

    fn ints(memory: &ArrayMemory, x: &HostArray) -> Vec<i32> {
        bytemuck::pod_collect_to_vec(&x.to_bytes(memory, "t").unwrap())
    }

    /// Found writing the `host_arrays` fuzz target (its hostile values): a step beyond the axis
    /// (`x[::2**63-1]`, `x[::-2**63]`) overflowed the slice length and the view's stride.
    /// Expected values: NumPy, `np.arange(12).reshape(3, 4)[::2**63-1]` and `[::-2**63]`.
    #[test]
    fn slice_steps_as_large_as_i64_give_one_element_instead_of_overflowing() {
        let memory = ArrayMemory::with_limit(1 << 20);
        let a = int_array(&memory, &[3, 4]);
        let forward = a.get(&[IndexItem::Slice { start: None, stop: None, step: Some(i64::MAX) }]).unwrap();
        assert_eq!((forward.shape(), ints(&memory, &forward)), (&[1, 4][..], vec![0, 1, 2, 3]));
        let back = a.get(&[IndexItem::Slice { start: None, stop: None, step: Some(i64::MIN) }]).unwrap();
        assert_eq!((back.shape(), ints(&memory, &back)), (&[1, 4][..], vec![8, 9, 10, 11]));
        let cols = a.get(&[IndexItem::FULL, IndexItem::Slice { start: Some(-1), stop: None, step: Some(i64::MIN) }]);
        assert_eq!(ints(&memory, &cols.unwrap()), [3, 7, 11]);
    }

    /// Found writing the `host_arrays` fuzz target: an empty array whose other axes are
    /// huge (`zeros((3, 0, 2**62, 2**62))`, or an empty array reshaped to that) was
    /// accepted, and its strides saturated: indexing it, checking its layout and reading
    /// it overflowed or failed with an internal error. As in NumPy ("array is too big"),
    /// the non-zero lengths multiplied must fit an allocation; empty arrays that do are
    /// indexed and read.
    #[test]
    fn empty_arrays_whose_other_axes_are_too_big_are_refused() {
        let memory = ArrayMemory::with_limit(1 << 20);
        let huge = HostArray::zeros(&memory, DType::F64, &[3, 0, 1 << 62, 1 << 62]);
        assert!(matches!(huge, Err(ArrayError::Memory { .. })), "{huge:?}");
        let none = HostArray::zeros(&memory, DType::F64, &[0]).unwrap();
        let reshaped = none.reshape(&memory, &[0, 1 << 62, 1 << 62]);
        assert!(matches!(reshaped, Err(ArrayError::Memory { .. })), "{reshaped:?}");

        let empty = HostArray::zeros(&memory, DType::F64, &[3, 0, 1 << 20, 1 << 38]).unwrap();
        let view = empty
            .get(&[
                IndexItem::Slice { start: None, stop: None, step: Some(2) },
                IndexItem::FULL,
                IndexItem::At(-1),
                IndexItem::Slice { start: Some(1), stop: None, step: Some(3) },
            ])
            .unwrap();
        assert_eq!(view.shape(), &[2, 0, (1 << 38) / 3]);
        assert_eq!(view.to_bytes(&memory, "t").unwrap(), Vec::<u8>::new());
        let cx = crate::arrays::Ctx { memory: &memory, stop: &|| None };
        let negated = crate::arrays::unary(&cx, crate::arrays::ops::UnaryOp::Negative, &view).unwrap();
        assert_eq!(negated.shape(), view.shape());
    }

    /// Found by the `host_arrays` fuzz target (timeouts): an empty array whose other axis
    /// is long (`zeros((2**40, 0))`, which NumPy allows) made ndarray's `assign` and
    /// `Zip` walk its 2**40 outer lanes — hours in `concat`, elementwise functions,
    /// `where`, writes, `take`, `fftshift`, `matmul`. Empty results return at once.
    #[test]
    fn operations_on_empty_arrays_with_long_axes_return_at_once() {
        use crate::arrays::ops::{BinaryOp, FftOp};
        use crate::arrays::{Operand, Scalar, WriteMode};
        let memory = ArrayMemory::with_limit(1 << 20);
        let cx = crate::arrays::Ctx { memory: &memory, stop: &|| None };
        let empty = HostArray::zeros(&memory, DType::U8, &[1 << 40, 0]).unwrap();
        let shape = empty.shape().to_vec();
        let sum = crate::arrays::binary(&cx, BinaryOp::Add, Operand::Array(&empty), Operand::Scalar(Scalar::Int(1)));
        assert_eq!(sum.unwrap().shape(), shape);
        assert_eq!(crate::arrays::astype(&cx, &empty, DType::F32).unwrap().shape(), shape);
        let chosen = crate::arrays::where_(&cx, &empty, Operand::Array(&empty), Operand::Scalar(Scalar::Int(2)));
        assert_eq!(chosen.unwrap().shape(), shape);
        let joined = crate::arrays::construct::concat(&cx, &[&empty, &empty], Some(1)).unwrap();
        assert_eq!(joined.shape(), shape);
        assert_eq!(
            crate::arrays::construct::take(&cx, &empty, &[0, 1], Some(1)).map(|t| t.shape().to_vec()).ok(),
            None
        );
        let written = crate::arrays::write(&cx, &empty, &[], Operand::Scalar(Scalar::Int(3)), WriteMode::Add);
        assert!(written.is_ok(), "{written:?}");
        let shifted = crate::arrays::fft::fft(&cx, FftOp::Fftshift, &empty, None).unwrap();
        assert_eq!(shifted.shape(), shape);
        // (0, 2**40) @ (2**40, 0): an empty (0, 0) result, no loop over the long axis.
        let wide = empty.permute_dims(None).unwrap();
        assert_eq!(crate::arrays::linalg::matmul(&cx, &wide, &empty).unwrap().shape(), &[0, 0]);
    }

    /// Found writing the `host_arrays` fuzz target: a broadcast view claims bytes it does
    /// not hold, and `to_bytes` copied them all, outside the plugin's memory limit (up
    /// to an allocation failure that aborts the host). A view of more than `isize::MAX`
    /// bytes is refused (NumPy: "array is too big"); a copy counts against the limit.
    #[test]
    fn broadcast_views_are_bounded_and_their_copies_count_against_the_memory() {
        let memory = ArrayMemory::with_limit(1 << 20);
        let one = int_array(&memory, &[1]);
        let huge = one.broadcast_to(&[1 << 31, 1 << 31]);
        assert!(matches!(huge, Err(ArrayError::Memory { .. })), "{huge:?}");
        // 2 MiB of int32 from 4 bytes: more than the 1 MiB the arrays may use.
        let wide = one.broadcast_to(&[512, 1024]).unwrap();
        let copy = wide.to_bytes(&memory, "to_bytes");
        assert!(matches!(copy, Err(ArrayError::Memory { .. })), "{:?}", copy.map(|c| c.len()));
        let fits = one.broadcast_to(&[16, 1024]).unwrap();
        assert_eq!(fits.to_bytes(&memory, "to_bytes").unwrap().len(), 16 * 1024 * 4);
    }

    /// Found by the `host_arrays` fuzz target (pass 5): a lent tile's shape was checked
    /// in elements, not bytes, so an empty int64 tile of shape `(0, 2**62)` — too big an
    /// array for NumPy — was accepted, and comparing it panicked in ndarray's layout
    /// check. Tiles are checked as every other array is.
    #[test]
    fn a_lent_tile_is_refused_when_its_shape_is_too_big_for_its_dtype() {
        let memory = ArrayMemory::with_limit(1 << 20);
        let lease = Lease::new();
        // SAFETY: an empty slice, valid for the whole test.
        let huge = unsafe { HostArray::borrowed(&memory, DType::I64, &[0, 1 << 62], &[], lease.clone()) };
        assert!(matches!(huge, Err(ArrayError::Memory { .. })), "{huge:?}");
        // SAFETY: as above.
        let fits = unsafe { HostArray::borrowed(&memory, DType::U8, &[0, 1 << 62], &[], lease) }.unwrap();
        assert_eq!(fits.shape(), &[0, 1 << 62]);
    }

    /// Found writing the `host_arrays` fuzz target: new axes could be added without
    /// end, and `fftshift` over 65 axes shifted `1 << 65` (and looped over 2^axes
    /// blocks). Arrays have at most 64 dimensions, as in NumPy 2.
    #[test]
    fn arrays_have_at_most_64_dimensions() {
        let memory = ArrayMemory::with_limit(1 << 20);
        let mut a = int_array(&memory, &[1]);
        for _ in 1..64 {
            a = a.get(&[IndexItem::NewAxis]).unwrap();
        }
        assert_eq!(a.ndim(), 64);
        assert!(a.get(&[IndexItem::NewAxis]).is_err());
        assert!(a.expand_dims(0).is_err());
        assert!(a.reshape(&memory, &[1; 65]).is_err());
        assert!(a.broadcast_to(&[1; 65]).is_err());
        assert!(HostArray::zeros(&memory, DType::U8, &[1; 65]).is_err());
        let cx = crate::arrays::Ctx { memory: &memory, stop: &|| None };
        let shifted = crate::arrays::fft::fft(&cx, crate::arrays::ops::FftOp::Fftshift, &a, None).unwrap();
        assert_eq!(ints(&memory, &shifted), [0]);
    }

    /// Found writing the `host_arrays` fuzz target: the product of the lengths asked of
    /// `reshape` overflowed u128.
    #[test]
    fn reshape_to_lengths_whose_product_overflows_is_refused() {
        let memory = ArrayMemory::with_limit(1 << 20);
        let a = int_array(&memory, &[2, 3]);
        let huge = a.reshape(&memory, &[1 << 62, 1 << 62, 1 << 62]);
        assert!(matches!(huge, Err(ArrayError::Shape { .. })), "{huge:?}");
    }

    #[test]
    fn transposed_matrices_copy_to_the_transposed_values() {
        let memory = ArrayMemory::with_limit(1 << 20);
        // Rows and columns not multiples of the block; one row; a 1-column result.
        for (rows, cols) in [(70usize, 37usize), (1, 9), (33, 1), (64, 64)] {
            let x = int_array(&memory, &[rows, cols]);
            let values = ints(&memory, &x);
            let t = x.permute_dims(None).unwrap();
            let copy = t.dense("t").unwrap().to_c_order(&memory, "t").unwrap();
            let want: Vec<i32> =
                (0..cols).flat_map(|c| (0..rows).map(move |r| (r, c))).map(|(r, c)| values[r * cols + c]).collect();
            assert_eq!(ints(&memory, &HostArray::Dense(copy)), want, "{rows} x {cols}");
        }
    }

    #[test]
    fn reversed_views_read_the_right_elements() {
        let memory = ArrayMemory::with_limit(1 << 20);
        let bytes: Vec<u8> = (0..12i32).flat_map(|v| v.to_le_bytes()).collect();
        let a = HostArray::from_bytes(&memory, DType::I32, &[3, 4], &bytes).unwrap();
        let v = a
            .get(&[
                IndexItem::Slice { start: None, stop: None, step: Some(-1) },
                IndexItem::Slice { start: Some(1), stop: None, step: Some(2) },
            ])
            .unwrap();
        let out: Vec<i32> = bytemuck::pod_collect_to_vec(&v.to_bytes(&memory, "t").unwrap());
        assert_eq!(out, [9, 11, 5, 7, 1, 3]);
        assert_eq!(v.shape(), &[3, 2]);
    }
}
