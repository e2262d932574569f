//! The data a plugin processes: tiles and frames.

use crate::bindings::udf::plugin::types::{self as wit, Dtype, ParamValue};
use crate::element::{Element, data_dtype, dtype_name};
use crate::error::{Result, UdfError};
use crate::params::{Context, to_usize_shape};
use ndarray::{ArrayViewD, Axis, IxDyn, Slice};

/// A tile: `frames()` consecutive frames times one signal slice, in C order
/// `[frames, ..sig_shape]`. With the partition method it is the whole partition.
pub struct Tile<'a> {
    pub(crate) raw: &'a wit::Tile,
    pub(crate) ctx: &'a Context,
    pub(crate) dtype: Dtype,
    pub(crate) sig_shape: Vec<usize>,
}

impl<'a> Tile<'a> {
    /// Element type of the data (the run's input dtype).
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// Number of frames.
    pub fn frames(&self) -> usize {
        self.raw.frames as usize
    }

    /// Compressed flat nav index of the first frame (LiberTEM's `meta.slice.origin[0]`).
    pub fn origin(&self) -> u64 {
        self.raw.origin
    }

    /// Origin of the signal slice.
    pub fn sig_origin(&self) -> &[u64] {
        &self.raw.sig.origin
    }

    /// Shape of the signal slice.
    pub fn sig_shape(&self) -> &[usize] {
        &self.sig_shape
    }

    /// Index of the signal slice in the tiling scheme (`meta.tiling_scheme_idx`).
    pub fn scheme_index(&self) -> u32 {
        self.raw.scheme_index
    }

    /// The params and meta of the partition.
    pub fn context(&self) -> &'a Context {
        self.ctx
    }

    /// The data as one flat slice.
    pub fn flat<T: Element>(&self) -> Result<&'a [T]> {
        T::slice(&self.raw.data).ok_or_else(|| {
            UdfError::internal(format!(
                "the tile holds {}, not {}",
                data_dtype(&self.raw.data).map_or("bytes", dtype_name),
                dtype_name(T::DTYPE)
            ))
        })
    }

    /// The data as an n-d view `[frames, ..sig_shape]`.
    pub fn data<T: Element>(&self) -> Result<ArrayViewD<'a, T>> {
        let mut shape = vec![self.frames()];
        shape.extend_from_slice(&self.sig_shape);
        Ok(ArrayViewD::from_shape(IxDyn(&shape), self.flat::<T>()?)?)
    }

    /// Number of elements in one frame of this tile (product of the signal slice).
    pub fn frame_len(&self) -> usize {
        self.sig_shape.iter().product()
    }

    /// True (uncompressed) flat nav index of frame `i` of the tile.
    pub fn true_nav_index(&self, i: usize) -> u64 {
        self.raw.true_nav_indices[i]
    }

    /// True nav coordinates of every frame (LiberTEM's `meta.coordinates`).
    pub fn coordinates(&self) -> Vec<Vec<u64>> {
        self.raw.true_nav_indices.iter().map(|&i| self.ctx.dataset.nav_coordinates(i)).collect()
    }

    /// The per-frame aux data `name` for the frames of this tile: `[frames, ..extra]`.
    pub fn aux<T: Element>(&self, name: &str) -> Result<ArrayViewD<'a, T>> {
        let start = self.nav_offset();
        let mut view = aux_partition_view::<T>(self.ctx, name)?;
        view.slice_axis_inplace(Axis(0), Slice::from(start..start + self.frames()));
        Ok(view)
    }

    /// Frame `i` of the tile.
    pub fn frame(&self, i: usize) -> Frame<'_> {
        Frame { tile: self, index: i }
    }

    /// Index of the tile's first frame within the partition.
    pub(crate) fn nav_offset(&self) -> usize {
        let partition_origin = self.ctx.partition.as_ref().map_or(0, |p| p.origin);
        (self.raw.origin - partition_origin) as usize
    }
}

/// The partition-sized view of a nav aux param.
fn aux_partition_view<'a, T: Element>(ctx: &'a Context, name: &str) -> Result<ArrayViewD<'a, T>> {
    match ctx.params.get(name) {
        Some(ParamValue::Array(array)) => crate::params::ndarray_view(array, name),
        _ => Err(UdfError::bad_param(format!("no aux array parameter '{name}'"))),
    }
}

/// One full frame (frame method).
pub struct Frame<'t> {
    tile: &'t Tile<'t>,
    index: usize,
}

impl<'t> Frame<'t> {
    /// The frame as an n-d view of the signal shape.
    pub fn data<T: Element>(&self) -> Result<ArrayViewD<'t, T>> {
        let flat = self.flat::<T>()?;
        Ok(ArrayViewD::from_shape(IxDyn(&self.tile.sig_shape), flat)?)
    }

    /// The frame as a flat slice.
    pub fn flat<T: Element>(&self) -> Result<&'t [T]> {
        let n = self.tile.frame_len();
        Ok(&self.tile.flat::<T>()?[self.index * n..][..n])
    }

    /// Element type.
    pub fn dtype(&self) -> Dtype {
        self.tile.dtype
    }

    /// Signal shape.
    pub fn sig_shape(&self) -> &[usize] {
        &self.tile.sig_shape
    }

    /// Compressed flat nav index of this frame.
    pub fn nav_index(&self) -> u64 {
        self.tile.origin() + self.index as u64
    }

    /// True (uncompressed) flat nav index of this frame.
    pub fn true_nav_index(&self) -> u64 {
        self.tile.true_nav_index(self.index)
    }

    /// True nav coordinates of this frame.
    pub fn coordinates(&self) -> Vec<u64> {
        self.tile.ctx.dataset.nav_coordinates(self.tile.true_nav_index(self.index))
    }

    /// The per-frame aux data `name` of this frame: `extra` shape, or `[1]` if empty.
    pub fn aux<T: Element>(&self, name: &str) -> Result<ArrayViewD<'t, T>> {
        let view =
            aux_partition_view::<T>(self.tile.ctx, name)?.index_axis_move(Axis(0), self.tile.nav_offset() + self.index);
        Ok(if view.ndim() == 0 { view.insert_axis(Axis(0)) } else { view })
    }

    /// The params and meta of the partition.
    pub fn context(&self) -> &'t Context {
        self.tile.ctx
    }
}

pub(crate) fn sig_shape_of(raw: &wit::Tile) -> Result<Vec<usize>> {
    to_usize_shape(&raw.sig.shape)
}
