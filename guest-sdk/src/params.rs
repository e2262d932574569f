//! Typed access to the parameters and meta a plugin receives.

use crate::bindings::udf::plugin::types::{ArrayData, DatasetMeta, Dtype, Ndarray, Param, ParamValue, PartitionMeta};
use crate::element::{Element, bytes_to_typed, data_dtype, dtype_name};
use crate::error::{Result, UdfError};
use ndarray::{ArrayViewD, IxDyn};

/// The parameters of a run, with defaults already filled in by the host.
#[derive(Debug, Clone, Default)]
pub struct Params {
    list: Vec<Param>,
}

impl Params {
    /// Wrap the list sent by the host; array values sent as bytes become typed.
    pub(crate) fn new(mut list: Vec<Param>) -> Self {
        for param in &mut list {
            if let ParamValue::Array(array) = &mut param.value {
                normalize(array);
            }
        }
        Params { list }
    }

    /// The raw value of a parameter, if given.
    pub fn get(&self, name: &str) -> Option<&ParamValue> {
        self.list.iter().find(|p| p.name == name).map(|p| &p.value)
    }

    fn require(&self, name: &str) -> Result<&ParamValue> {
        self.get(name).ok_or_else(|| UdfError::bad_param(format!("parameter '{name}' is missing")))
    }

    fn wrong(name: &str, expected: &str, found: &ParamValue) -> UdfError {
        let found = match found {
            ParamValue::Boolean(_) => "a boolean",
            ParamValue::Int(_) => "an integer",
            ParamValue::Float(_) => "a float",
            ParamValue::Text(_) => "text",
            ParamValue::Array(_) => "an array",
        };
        UdfError::bad_param(format!("parameter '{name}' must be {expected}, found {found}"))
    }

    /// A boolean parameter.
    pub fn boolean(&self, name: &str) -> Result<bool> {
        match self.require(name)? {
            ParamValue::Boolean(v) => Ok(*v),
            other => Err(Self::wrong(name, "a boolean", other)),
        }
    }

    /// An integer parameter.
    pub fn int(&self, name: &str) -> Result<i64> {
        match self.require(name)? {
            ParamValue::Int(v) => Ok(*v),
            other => Err(Self::wrong(name, "an integer", other)),
        }
    }

    /// A float parameter (an integer value is converted).
    pub fn float(&self, name: &str) -> Result<f64> {
        match self.require(name)? {
            ParamValue::Float(v) => Ok(*v),
            ParamValue::Int(v) => Ok(*v as f64),
            other => Err(Self::wrong(name, "a float", other)),
        }
    }

    /// A text parameter.
    pub fn text(&self, name: &str) -> Result<&str> {
        match self.require(name)? {
            ParamValue::Text(v) => Ok(v),
            other => Err(Self::wrong(name, "text", other)),
        }
    }

    /// The dtype of an array parameter.
    pub fn array_dtype(&self, name: &str) -> Result<Dtype> {
        match self.require(name)? {
            ParamValue::Array(a) => Ok(a.dtype),
            other => Err(Self::wrong(name, "an array", other)),
        }
    }

    /// An array parameter as a typed n-d view; fails if its dtype is not `T`.
    pub fn array<T: Element>(&self, name: &str) -> Result<ArrayViewD<'_, T>> {
        match self.require(name)? {
            ParamValue::Array(a) => ndarray_view(a, name),
            other => Err(Self::wrong(name, "an array", other)),
        }
    }

    /// Two radii in pixels (`inner`, `outer`) of a ring: non-negative, not NaN, inner
    /// not larger than outer.
    pub fn radii(&self, inner: &str, outer: &str) -> Result<(f64, f64)> {
        let (r_in, r_out) = (self.float(inner)?, self.float(outer)?);
        if r_in.is_nan() || r_out.is_nan() || r_in < 0.0 || r_out < 0.0 {
            return Err(UdfError::bad_param(format!(
                "radii must be non-negative numbers, found {inner} = {r_in}, {outer} = {r_out}"
            )));
        }
        if r_in > r_out {
            return Err(UdfError::bad_param(format!("{inner} ({r_in}) must not be larger than {outer} ({r_out})")));
        }
        Ok((r_in, r_out))
    }

    /// A point of the frame given as an array of 2 finite numbers, row (y) first, or
    /// `None` for an empty array (a point that was not given).
    pub fn point_yx(&self, name: &str) -> Result<Option<[f64; 2]>> {
        let values = self.array_f64(name)?;
        match values.iter().copied().collect::<Vec<f64>>()[..] {
            [] => Ok(None),
            [y, x] if y.is_finite() && x.is_finite() => Ok(Some([y, x])),
            [y, x] => Err(UdfError::bad_param(format!("parameter '{name}' must be finite, found ({y}, {x})"))),
            ref other => Err(UdfError::bad_param(format!(
                "parameter '{name}' must hold 2 numbers (row y, column x), found {}",
                other.len()
            ))),
        }
    }

    /// An array parameter converted to `f64` (any real dtype).
    pub fn array_f64(&self, name: &str) -> Result<ndarray::ArrayD<f64>> {
        let array = match self.require(name)? {
            ParamValue::Array(a) => a,
            other => return Err(Self::wrong(name, "an array", other)),
        };
        let shape = to_usize_shape(&array.shape)?;
        let values: Vec<f64> = match &array.data {
            ArrayData::Boolean(v) => v.iter().map(|&b| f64::from(u8::from(b))).collect(),
            ArrayData::Uint8(v) => v.iter().map(|&x| f64::from(x)).collect(),
            ArrayData::Uint16(v) => v.iter().map(|&x| f64::from(x)).collect(),
            ArrayData::Uint32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            ArrayData::Uint64(v) => v.iter().map(|&x| x as f64).collect(),
            ArrayData::Int8(v) => v.iter().map(|&x| f64::from(x)).collect(),
            ArrayData::Int16(v) => v.iter().map(|&x| f64::from(x)).collect(),
            ArrayData::Int32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            ArrayData::Int64(v) => v.iter().map(|&x| x as f64).collect(),
            ArrayData::Float32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            ArrayData::Float64(v) => v.clone(),
            ArrayData::Complex64(_) | ArrayData::Complex128(_) | ArrayData::Bytes(_) => {
                return Err(UdfError::bad_param(format!(
                    "parameter '{name}' must be a real array, found {}",
                    dtype_name(array.dtype)
                )));
            }
        };
        Ok(ndarray::ArrayD::from_shape_vec(IxDyn(&shape), values)?)
    }

    /// Every parameter, in the order the host sent them.
    pub fn iter(&self) -> impl Iterator<Item = &Param> {
        self.list.iter()
    }
}

/// Replace a `bytes` payload by the typed list of the array's dtype.
pub(crate) fn normalize(array: &mut Ndarray) {
    if let ArrayData::Bytes(bytes) = &array.data {
        array.data = bytes_to_typed(bytes, array.dtype);
    }
}

pub(crate) fn to_usize_shape(shape: &[u64]) -> Result<Vec<usize>> {
    shape.iter().map(|&d| usize::try_from(d).map_err(|_| UdfError::invalid_data("array dimension too large"))).collect()
}

/// A typed view of an n-d array.
pub(crate) fn ndarray_view<'a, T: Element>(array: &'a Ndarray, what: &str) -> Result<ArrayViewD<'a, T>> {
    let data = T::slice(&array.data).ok_or_else(|| {
        let found = data_dtype(&array.data).map_or("bytes", dtype_name);
        UdfError::invalid_data(format!("'{what}' holds {found}, not {}", dtype_name(T::DTYPE)))
    })?;
    let shape = to_usize_shape(&array.shape)?;
    Ok(ArrayViewD::from_shape(IxDyn(&shape), data)?)
}

/// What every hook of a partition can see: the params and the meta.
#[derive(Debug, Clone)]
pub struct Context {
    pub(crate) params: Params,
    pub(crate) dataset: DatasetMeta,
    pub(crate) partition: Option<PartitionMeta>,
}

impl Context {
    /// The parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Dataset-level meta.
    pub fn dataset(&self) -> &DatasetMeta {
        &self.dataset
    }

    /// The partition being processed; `None` on the main side.
    pub fn partition(&self) -> Option<&PartitionMeta> {
        self.partition.as_ref()
    }

    /// The dtype of the tiles.
    pub fn input_dtype(&self) -> Dtype {
        self.dataset.input_dtype
    }
}

impl DatasetMeta {
    /// Number of frames in the nav shape (ignoring the ROI).
    pub fn nav_len(&self) -> u64 {
        self.nav_shape.iter().product()
    }

    /// Number of pixels in a frame.
    pub fn sig_len(&self) -> u64 {
        self.sig_shape.iter().product()
    }

    /// Number of frames processed: the ROI count, or every frame.
    pub fn frames(&self) -> u64 {
        self.roi_count.unwrap_or_else(|| self.nav_len())
    }

    /// The nav shape as a nav result sees it: the dataset's nav shape, or `[roi count]`
    /// with a ROI (LiberTEM's `self.meta.dataset_shape.nav`, or
    /// `(np.count_nonzero(self.meta.roi),)`).
    pub fn compressed_nav_shape(&self) -> Vec<u64> {
        match self.roi_count {
            Some(n) => vec![n],
            None => self.nav_shape.clone(),
        }
    }

    /// Un-flatten a true flat nav index into nav coordinates.
    pub fn nav_coordinates(&self, mut flat: u64) -> Vec<u64> {
        let mut coords = vec![0; self.nav_shape.len()];
        for (c, &d) in coords.iter_mut().zip(&self.nav_shape).rev() {
            if d > 0 {
                *c = flat % d;
                flat /= d;
            }
        }
        coords
    }
}

/// The frame shape `(Y, X)` of a UDF that needs non-empty 2-D frames, or an
/// invalid-data error naming `udf` and the dataset's signal shape.
pub fn frame_shape_2d(dataset: &DatasetMeta, udf: &str) -> Result<(usize, usize)> {
    match dataset.sig_shape[..] {
        [y, x] if y > 0 && x > 0 => match (usize::try_from(y), usize::try_from(x)) {
            (Ok(y), Ok(x)) => Ok((y, x)),
            _ => Err(UdfError::invalid_data(format!("{udf}: frames of {y} x {x} pixels are too large"))),
        },
        _ => Err(UdfError::invalid_data(format!(
            "{udf} needs non-empty 2-D frames, but the signal shape is {:?}",
            dataset.sig_shape
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: Vec<(&str, ParamValue)>) -> Params {
        Params::new(pairs.into_iter().map(|(name, value)| Param { name: name.to_owned(), value }).collect())
    }

    fn array(values: &[f64]) -> ParamValue {
        ParamValue::Array(Ndarray {
            dtype: Dtype::Float64,
            shape: vec![values.len() as u64],
            data: ArrayData::Float64(values.to_vec()),
        })
    }

    fn error(result: Result<impl std::fmt::Debug>) -> String {
        result.expect_err("a bad parameter").to_string()
    }

    #[test]
    fn radii_and_points_are_checked_with_the_parameter_names() {
        let p = params(vec![
            ("a", ParamValue::Float(1.5)),
            ("b", ParamValue::Int(4)),
            ("nan", ParamValue::Float(f64::NAN)),
            ("neg", ParamValue::Float(-1.0)),
            ("yx", array(&[3.0, 4.5])),
            ("none", array(&[])),
            ("three", array(&[1.0, 2.0, 3.0])),
            ("inf", array(&[1.0, f64::INFINITY])),
        ]);
        assert_eq!(p.radii("a", "b").unwrap(), (1.5, 4.0));
        assert!(error(p.radii("b", "a")).contains("b (4) must not be larger than a (1.5)"));
        assert!(error(p.radii("nan", "b")).contains("nan = NaN"));
        assert!(error(p.radii("neg", "a")).contains("non-negative"));
        assert_eq!(p.point_yx("yx").unwrap(), Some([3.0, 4.5]));
        assert_eq!(p.point_yx("none").unwrap(), None);
        assert!(error(p.point_yx("three")).contains("'three' must hold 2 numbers (row y, column x), found 3"));
        assert!(error(p.point_yx("inf")).contains("'inf' must be finite"));
        assert!(error(p.point_yx("missing")).contains("missing"));
    }

    #[test]
    fn frame_shape_2d_names_the_udf() {
        let meta = |sig: Vec<u64>| DatasetMeta {
            nav_shape: vec![2],
            sig_shape: sig,
            dataset_dtype: Dtype::Float32,
            input_dtype: Dtype::Float32,
            roi_count: None,
            device_class: crate::bindings::udf::plugin::types::DeviceClass::Cpu,
            threads_per_worker: 1,
        };
        assert_eq!(frame_shape_2d(&meta(vec![3, 5]), "fem").unwrap(), (3, 5));
        let message = error(frame_shape_2d(&meta(vec![15]), "fem"));
        assert!(message.contains("fem needs non-empty 2-D frames") && message.contains("[15]"), "{message}");
        assert!(error(frame_shape_2d(&meta(vec![0, 5]), "fem")).contains("2-D"));
    }
}
