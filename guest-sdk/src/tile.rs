//! The data a plugin processes: tiles and frames.

use crate::bindings::udf::plugin::types::{self as wit, Dtype, ParamValue};
use crate::element::{Element, data_dtype, dtype_name};
use crate::error::{Result, UdfError};
use crate::params::{Context, to_usize_shape};
use ndarray::{ArrayD, ArrayViewD, Axis, CowArray, IxDyn, Slice};

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

    /// The compressed flat nav indices of the tile's frames: LiberTEM's
    /// `meta.slice.get(nav_only=True)` (positions in a ROI-compressed nav result).
    pub fn nav_range(&self) -> std::ops::Range<u64> {
        self.raw.origin..self.raw.origin + self.raw.frames
    }

    /// The tile's part of a sig-shaped array: its last axes (the signal shape) cut to the
    /// tile's signal slice, any leading axes kept (a stack of masks `(n, *sig)` becomes
    /// `(n, *tile sig)`). LiberTEM's `sig_array[tile.meta.slice.get(sig_only=True)]`.
    ///
    /// # Errors
    /// A bad-param error if the array's last axes are not the dataset's signal shape.
    pub fn sig_part<'v, T>(&self, mut view: ArrayViewD<'v, T>) -> Result<ArrayViewD<'v, T>> {
        let sig = &self.ctx.dataset.sig_shape;
        let first = view.ndim().checked_sub(sig.len());
        let fits = first.is_some_and(|first| view.shape()[first..].iter().zip(sig).all(|(&a, &b)| a as u64 == b));
        let Some(first) = first.filter(|_| fits) else {
            return Err(UdfError::bad_param(format!(
                "an array of shape {:?} does not end in the signal shape {:?}",
                view.shape(),
                sig
            )));
        };
        for (axis, (&origin, &len)) in self.raw.sig.origin.iter().zip(&self.sig_shape).enumerate() {
            let origin = origin as usize;
            view.slice_axis_inplace(Axis(first + axis), Slice::from(origin..origin + len));
        }
        Ok(view)
    }

    /// The tile's part of the sig-shaped array parameter `name` (see [`sig_part`](Self::sig_part)):
    /// `tile.sig_param::<f32>("mask")`.
    ///
    /// # Errors
    /// If the parameter is missing, not an array of `T`, or does not end in the signal
    /// shape.
    pub fn sig_param<T: Element>(&self, name: &str) -> Result<ArrayViewD<'a, T>> {
        self.sig_part(self.ctx.params.array::<T>(name)?)
            .map_err(|e| UdfError::bad_param(format!("parameter '{name}': {}", e.message)))
    }

    /// The data converted to `f64` (complex: the real part), `[frames, ..sig_shape]`.
    pub fn to_f64(&self) -> Result<ArrayD<f64>> {
        let mut shape = vec![self.frames()];
        shape.extend_from_slice(&self.sig_shape);
        let values = converted_real(&self.raw.data, 0..self.frames() * self.frame_len())?;
        Ok(ArrayD::from_shape_vec(IxDyn(&shape), values)?)
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
    pub(crate) tile: &'t Tile<'t>,
    pub(crate) index: usize,
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

    /// The sum of the frame's values as `f64` (NumPy's `np.sum(frame)` for real data).
    ///
    /// # Errors
    /// For complex data (the sum would be complex).
    pub fn sum(&self) -> Result<f64> {
        let n = self.tile.frame_len();
        Ok(converted_real(&self.tile.raw.data, self.index * n..(self.index + 1) * n)?.iter().sum())
    }

    /// The frame converted to `f64`, of the signal shape.
    ///
    /// # Errors
    /// For complex data.
    pub fn to_f64(&self) -> Result<ArrayD<f64>> {
        let n = self.tile.frame_len();
        let values = converted_real(&self.tile.raw.data, self.index * n..(self.index + 1) * n)?;
        Ok(ArrayD::from_shape_vec(IxDyn(&self.tile.sig_shape), values)?)
    }

    /// The frame as a view of `T` whatever the input dtype: borrowed when it is `T`,
    /// converted otherwise (see [`Scalar::from_parts`](crate::Scalar::from_parts)).
    pub fn values<T: crate::Scalar>(&self) -> Result<CowArray<'t, T, IxDyn>> {
        if T::slice(&self.tile.raw.data).is_some() {
            return Ok(CowArray::from(self.data::<T>()?));
        }
        let n = self.tile.frame_len();
        let values = crate::ops::converted::<T>(&self.tile.raw.data, self.index * n..(self.index + 1) * n)?;
        Ok(CowArray::from(ArrayD::from_shape_vec(IxDyn(&self.tile.sig_shape), values)?))
    }

    /// The params and meta of the partition.
    pub fn context(&self) -> &'t Context {
        self.tile.ctx
    }
}

pub(crate) fn sig_shape_of(raw: &wit::Tile) -> Result<Vec<usize>> {
    to_usize_shape(&raw.sig.shape)
}

/// Elements `range` of real array data as `f64`; complex data is refused.
fn converted_real(data: &wit::ArrayData, range: std::ops::Range<usize>) -> Result<Vec<f64>> {
    if matches!(data, wit::ArrayData::Complex64(_) | wit::ArrayData::Complex128(_)) {
        return Err(UdfError::invalid_data("complex data has no real sum or f64 form; view it as complex"));
    }
    crate::ops::converted::<f64>(data, range)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::udf::plugin::types::{
        DatasetMeta, DeviceClass, Method, Ndarray, Param, PartitionMeta, SigSlice,
    };
    use crate::params::Params;

    /// A 4 x 5 frame; a tile of 2 frames (compressed 7 and 8, true 10 and 12) covering
    /// rows 1..3 and columns 2..5; a `mask` param of shape (2, 4, 5) holding 0..40.
    fn fixture() -> (Context, wit::Tile) {
        let mask = ParamValue::Array(Ndarray {
            dtype: Dtype::Float64,
            shape: vec![2, 4, 5],
            data: wit::ArrayData::Float64((0..40).map(f64::from).collect()),
        });
        let ctx = Context {
            params: Params::new(vec![Param { name: "mask".into(), value: mask }]),
            dataset: DatasetMeta {
                nav_shape: vec![4, 4],
                sig_shape: vec![4, 5],
                dataset_dtype: Dtype::Uint16,
                input_dtype: Dtype::Uint16,
                roi_count: Some(9),
                device_class: DeviceClass::Cpu,
                threads_per_worker: 1,
            },
            partition: Some(PartitionMeta {
                index: 1,
                origin: 6,
                frames: 3,
                method: Method::Tile,
                tiling_scheme: Vec::new(),
                tile_depth: 2,
            }),
        };
        let tile = wit::Tile {
            origin: 7,
            frames: 2,
            scheme_index: 0,
            sig: SigSlice { origin: vec![1, 2], shape: vec![2, 3] },
            true_nav_indices: vec![10, 12],
            data: wit::ArrayData::Uint16((0..12).collect()),
        };
        (ctx, tile)
    }

    #[test]
    fn sig_arrays_are_cut_to_the_tile_and_frames_convert() {
        let (ctx, raw) = fixture();
        let tile = Tile { raw: &raw, ctx: &ctx, dtype: Dtype::Uint16, sig_shape: vec![2, 3] };
        assert_eq!(tile.nav_range(), 7..9);
        assert_eq!(tile.coordinates(), vec![vec![2, 2], vec![3, 0]]);
        let part = tile.sig_param::<f64>("mask").unwrap();
        assert_eq!(part.shape(), &[2, 2, 3]);
        // Mask m, row y, column x holds 20 m + 5 y + x; the tile starts at row 1, column 2.
        assert_eq!(part[[0, 0, 0]], 7.0);
        assert_eq!(part[[1, 1, 2]], 20.0 + 10.0 + 4.0);
        let wrong = ndarray::ArrayD::<f32>::zeros(IxDyn(&[4, 4]));
        let message = tile.sig_part(wrong.view()).unwrap_err().message;
        assert!(message.contains("[4, 4]") && message.contains("signal shape [4, 5]"), "{message}");
        assert!(tile.sig_param::<f32>("mask").unwrap_err().message.contains("'mask'"));
        assert_eq!(tile.to_f64().unwrap().shape(), &[2, 2, 3]);
        let frame = tile.frame(1);
        assert_eq!(frame.sum().unwrap(), (6..12).sum::<u16>() as f64);
        assert_eq!(frame.values::<f32>().unwrap().as_slice().unwrap(), &[6.0, 7.0, 8.0, 9.0, 10.0, 11.0]);
        assert_eq!(frame.values::<u16>().unwrap()[[1, 2]], 11, "borrowed when the dtype is the input's");
        assert_eq!(tile.nav_offset(), 1);
    }
}
