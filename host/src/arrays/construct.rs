//! Constructors (`full`, `arange`, `linspace`, `eye`) and functions that gather
//! elements into a new array (`concat`, `stack`, `take`, boolean-mask selection).

use super::array::{Dense, HostArray, broadcast_shapes};
use super::element::CastTo;
use super::elementwise::{Ctx, Scalar, cast_dense, scalar_array};
use super::error::{ArrayError, normalize_axis};
use crate::dtype::{DType, result_type};
use ndarray::{Axis, Zip};

/// `full(shape, value, dtype)` (dtype `None`: the value's default dtype).
pub fn full(cx: &Ctx<'_>, shape: &[usize], value: Scalar, dtype: Option<DType>) -> Result<HostArray, ArrayError> {
    let op = "full";
    let dtype = dtype.unwrap_or(value.default_dtype());
    let one = scalar_array(cx, value, dtype, op)?;
    let out = Dense::alloc(cx.memory, op, dtype, shape, false)?;
    {
        let r = one.storage.read(op)?;
        let mut w = out.storage.write(op)?;
        let size = dtype.size();
        let pattern = r[..size].to_vec();
        for chunk in w.chunks_exact_mut(size) {
            chunk.copy_from_slice(&pattern);
        }
    }
    Ok(HostArray::Dense(out))
}

/// `arange(start, stop, step, dtype)`: `ceil((stop - start) / step)` values.
pub fn arange(cx: &Ctx<'_>, start: f64, stop: f64, step: f64, dtype: DType) -> Result<HostArray, ArrayError> {
    let op = "arange";
    if step == 0.0 || !step.is_finite() || !start.is_finite() || !stop.is_finite() {
        return Err(ArrayError::value(op, "start, stop and step must be finite and step non-zero"));
    }
    let count = ((stop - start) / step).ceil().max(0.0);
    if count > (1u64 << 48) as f64 {
        return Err(ArrayError::value(op, format!("{count} elements are too many")));
    }
    let count = count as usize;
    let out = Dense::alloc(cx.memory, op, dtype, &[count], false)?;
    {
        let mut w = out.storage.write(op)?;
        crate::with_dtype!(dtype, T => {
            let o: &mut [T] = bytemuck::cast_slice_mut(&mut w[..]);
            // Exact integers while they fit in i64 (past it, as NumPy's float64 values).
            let exact = |x: f64| x.fract() == 0.0 && x.abs() < 9.0e18;
            let integral = exact(start) && exact(step);
            for (i, v) in o.iter_mut().enumerate() {
                let int = (i as i64).checked_mul(step as i64).and_then(|d| (start as i64).checked_add(d));
                *v = match int {
                    Some(int) if integral => int.cast_to::<T>(),
                    _ => (start + i as f64 * step).cast_to::<T>(),
                };
            }
        }, return Err(ArrayError::dtype(op, &[dtype], "needs a numeric dtype")));
    }
    Ok(HostArray::Dense(out))
}

/// `linspace(start, stop, num, endpoint)` as float64 (or `dtype`).
pub fn linspace(
    cx: &Ctx<'_>,
    start: f64,
    stop: f64,
    num: usize,
    endpoint: bool,
    dtype: DType,
) -> Result<HostArray, ArrayError> {
    let op = "linspace";
    let values = Dense::alloc(cx.memory, op, DType::F64, &[num], false)?;
    {
        let mut w = values.storage.write(op)?;
        let o: &mut [f64] = bytemuck::cast_slice_mut(&mut w[..]);
        let div = if endpoint { num.saturating_sub(1) } else { num } as f64;
        let step = if div > 0.0 { (stop - start) / div } else { 0.0 };
        for (i, v) in o.iter_mut().enumerate() {
            *v = start + i as f64 * step;
        }
        if endpoint && num > 1 {
            o[num - 1] = stop;
        }
    }
    let values = if dtype == DType::F64 { values } else { cast_dense(cx, &values, dtype, op)? };
    Ok(HostArray::Dense(values))
}

/// `eye(n_rows, n_cols, k, dtype)`.
pub fn eye(cx: &Ctx<'_>, rows: usize, cols: usize, k: i64, dtype: DType) -> Result<HostArray, ArrayError> {
    let op = "eye";
    let out = Dense::alloc(cx.memory, op, dtype, &[rows, cols], true)?;
    {
        let mut w = out.storage.write(op)?;
        let size = dtype.size();
        let one = scalar_array(cx, Scalar::Int(1), dtype, op)?;
        let r = one.storage.read(op)?;
        // The diagonal's first element and length: no loop over rows that it misses
        // (`eye(2**63, 0)` has none), no `i + k` that overflows.
        let (row, col) = if k >= 0 { (0, k.unsigned_abs()) } else { (k.unsigned_abs(), 0) };
        let len = (rows as u64).saturating_sub(row).min((cols as u64).saturating_sub(col));
        for t in 0..len {
            let (i, j) = ((row + t) as usize, (col + t) as usize);
            let at = (i * cols + j) * size;
            w[at..at + size].copy_from_slice(&r[..size]);
        }
    }
    Ok(HostArray::Dense(out))
}

/// `concat(arrays, axis)` (`None`: flattened).
pub fn concat(cx: &Ctx<'_>, arrays: &[&HostArray], axis: Option<i64>) -> Result<HostArray, ArrayError> {
    let op = "concat";
    let Some(first) = arrays.first() else {
        return Err(ArrayError::value(op, "needs at least one array"));
    };
    let dtype = arrays.iter().map(|a| a.dtype()).reduce(result_type).unwrap_or(first.dtype());
    let flat: Vec<HostArray>;
    let arrays: Vec<&HostArray> = if axis.is_none() {
        flat = arrays.iter().map(|a| a.reshape(cx.memory, &[-1])).collect::<Result<_, _>>()?;
        flat.iter().collect()
    } else {
        arrays.to_vec()
    };
    let base = arrays[0].shape().to_vec();
    if base.is_empty() {
        return Err(ArrayError::shape(op, &[&base], "zero-dimensional arrays cannot be concatenated"));
    }
    let axis = normalize_axis(op, axis.unwrap_or(0), &base)?;
    let mut total = 0;
    for a in &arrays {
        let s = a.shape();
        let same = s.len() == base.len() && s.iter().zip(&base).enumerate().all(|(i, (x, y))| i == axis || x == y);
        if !same {
            return Err(ArrayError::shape(op, &[&base, s], format!("all axes but {axis} must match")));
        }
        total = s[axis].checked_add(total).ok_or_else(|| ArrayError::Memory {
            op: op.into(),
            shape: base.clone(),
            bytes: u128::MAX,
            available: 0,
        })?;
    }
    let mut shape = base.clone();
    shape[axis] = total;
    let out = Dense::alloc(cx.memory, op, dtype, &shape, false)?;
    let data = if dtype == DType::Bool { DType::U8 } else { dtype };
    let mut at = 0;
    for a in &arrays {
        cx.check(op)?;
        let d = a.dense(op)?;
        let d = if d.dtype == dtype { d.clone() } else { cast_dense(cx, d, dtype, op)? };
        let n = d.shape[axis];
        let r = d.storage.read(op)?;
        let mut w = out.storage.write(op)?;
        crate::with_dtype!(data, T => {
            let src = d.view_in::<T>(&r, op)?;
            let mut dst = out.view_mut_in::<T>(&mut w, op)?;
            dst.slice_axis_inplace(Axis(axis), ndarray::Slice::from(at..at + n));
            dst.assign(&src);
        }, ());
        at += n;
    }
    Ok(HostArray::Dense(out))
}

/// `stack(arrays, axis)`: a new axis.
pub fn stack(cx: &Ctx<'_>, arrays: &[&HostArray], axis: i64) -> Result<HostArray, ArrayError> {
    let op = "stack";
    let Some(first) = arrays.first() else {
        return Err(ArrayError::value(op, "needs at least one array"));
    };
    let mut widened = first.shape().to_vec();
    widened.push(1);
    let at = normalize_axis(op, axis, &widened)?;
    let expanded: Vec<HostArray> = arrays
        .iter()
        .map(|a| {
            if a.shape() != first.shape() {
                return Err(ArrayError::shape(op, &[first.shape(), a.shape()], "all arrays must have the same shape"));
            }
            a.expand_dims(at as i64)
        })
        .collect::<Result<_, _>>()?;
    let refs: Vec<&HostArray> = expanded.iter().collect();
    concat(cx, &refs, Some(at as i64))
}

/// `take(x, indices, axis)`: integer array indexing along one axis.
pub fn take(cx: &Ctx<'_>, x: &HostArray, indices: &[i64], axis: Option<i64>) -> Result<HostArray, ArrayError> {
    let op = "take";
    let flat;
    let x = if axis.is_none() {
        flat = x.reshape(cx.memory, &[-1])?;
        &flat
    } else {
        x
    };
    let d = x.dense(op)?;
    let axis = normalize_axis(op, axis.unwrap_or(0), &d.shape)?;
    let n = d.shape[axis] as i64;
    let mut resolved = Vec::with_capacity(indices.len());
    for &i in indices {
        let p = if i < 0 { i + n } else { i };
        if p < 0 || p >= n {
            return Err(ArrayError::index(
                op,
                &d.shape,
                format!("index {i} is out of bounds for axis {axis} with size {n}"),
            ));
        }
        resolved.push(p as usize);
    }
    let mut shape = d.shape.clone();
    shape[axis] = resolved.len();
    let out = Dense::alloc(cx.memory, op, d.dtype, &shape, false)?;
    let data = if d.dtype == DType::Bool { DType::U8 } else { d.dtype };
    {
        let r = d.storage.read(op)?;
        let mut w = out.storage.write(op)?;
        crate::with_dtype!(data, T => {
            let src = d.view_in::<T>(&r, op)?;
            let mut dst = out.view_mut_in::<T>(&mut w, op)?;
            for (k, &i) in resolved.iter().enumerate() {
                dst.index_axis_mut(Axis(axis), k).assign(&src.index_axis(Axis(axis), i));
            }
        }, ());
    }
    Ok(HostArray::Dense(out))
}

/// `x[mask]`: the elements where a boolean `mask` of `x`'s shape is true, in C order.
pub fn select(cx: &Ctx<'_>, x: &HostArray, mask: &HostArray) -> Result<HostArray, ArrayError> {
    let op = "getitem";
    let d = x.dense(op)?;
    let m = mask.dense(op)?;
    if m.dtype != DType::Bool {
        return Err(ArrayError::dtype(op, &[m.dtype], "a mask index must be bool"));
    }
    if m.shape != d.shape {
        return Err(ArrayError::shape(op, &[&d.shape, &m.shape], "a boolean mask must have the array's shape"));
    }
    broadcast_shapes(op, &[&d.shape, &m.shape])?;
    let rm = m.storage.read(op)?;
    let mask_view = m.view_in::<u8>(&rm, op)?;
    let count = mask_view.iter().filter(|&&v| v != 0).count();
    let out = Dense::alloc(cx.memory, op, d.dtype, &[count], false)?;
    let data = if d.dtype == DType::Bool { DType::U8 } else { d.dtype };
    {
        let r = d.storage.read(op)?;
        let mut w = out.storage.write(op)?;
        crate::with_dtype!(data, T => {
            let src = d.view_in::<T>(&r, op)?;
            let o: &mut [T] = bytemuck::cast_slice_mut(&mut w[..]);
            let mut k = 0;
            Zip::from(&src).and(&mask_view).for_each(|&v, &keep| {
                if keep != 0 && k < o.len() {
                    o[k] = v;
                    k += 1;
                }
            });
        }, ());
    }
    Ok(HostArray::Dense(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrays::{ArrayMemory, to_vec};

    /// Found writing the `host_arrays` fuzz target: `eye(2, 2, k=2**63-1)` overflowed
    /// `i + k`. Expected values: NumPy, `np.eye(3, 4, k=-1)` and `np.eye(2, 2, k=2**63-1)`.
    #[test]
    fn eye_with_any_diagonal_offset_does_not_overflow() {
        let memory = ArrayMemory::with_limit(1 << 20);
        let cx = Ctx { memory: &memory, stop: &|| None };
        let below = eye(&cx, 3, 4, -1, DType::I32).unwrap();
        assert_eq!(to_vec::<i32>(&below).unwrap(), [0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0]);
        for k in [i64::MAX, i64::MIN] {
            assert_eq!(to_vec::<i32>(&eye(&cx, 2, 2, k, DType::I32).unwrap()).unwrap(), [0; 4]);
        }
        // No columns: no diagonal, and no loop over 2**40 rows.
        assert_eq!(eye(&cx, 1 << 40, 0, 0, DType::I32).unwrap().shape(), &[1 << 40, 0]);
    }

    /// Found writing the `host_arrays` fuzz target: integral `start` and `step` were
    /// added as i64 and overflowed. Expected values: NumPy,
    /// `np.arange(8.9e18, 2e19, 8.9e18)` (float64 past i64).
    #[test]
    fn arange_past_i64_does_not_overflow() {
        let memory = ArrayMemory::with_limit(1 << 20);
        let cx = Ctx { memory: &memory, stop: &|| None };
        let values = arange(&cx, 8.9e18, 2e19, 8.9e18, DType::F64).unwrap();
        assert_eq!(to_vec::<f64>(&values).unwrap(), [8.9e18, 1.78e19]);
    }

    /// Found writing the `host_arrays` fuzz target: the lengths of broadcast views
    /// concatenated along an axis overflowed their sum.
    #[test]
    fn concatenating_more_elements_than_usize_holds_is_refused() {
        let memory = ArrayMemory::with_limit(1 << 20);
        let cx = Ctx { memory: &memory, stop: &|| None };
        let one = HostArray::from_bytes(&memory, DType::U8, &[1], &[7]).unwrap();
        let wide = one.broadcast_to(&[1 << 62]).unwrap();
        let joined = concat(&cx, &[&wide, &wide, &wide, &wide], Some(0));
        assert!(matches!(joined, Err(ArrayError::Memory { .. })), "{joined:?}");
    }
}
