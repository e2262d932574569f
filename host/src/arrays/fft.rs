//! Fourier transforms with rustfft (the crate the crystallinity built-in uses):
//! `fft2`, `ifft2`, `rfft2`, `irfft2` over two axes (default the last two), NumPy's
//! "backward" normalisation (the inverse divides by the length), and `fftshift` /
//! `ifftshift` (any dtype).

use super::array::{Dense, HostArray};
use super::elementwise::{Ctx, cast_dense};
use super::error::{ArrayError, normalize_axes};
use super::ops::FftOp;
use crate::dtype::{Complex32, Complex64, DType, Kind};
use ndarray::{ArrayViewMutD, Axis, Slice};
use rustfft::{FftNum, FftPlanner};

/// An FFT operation over `axes` (default: the last two).
///
/// # Errors
/// Fewer than the axes' dimensions, bad axes, memory, interruption.
pub fn fft(cx: &Ctx<'_>, op: FftOp, x: &HostArray, axes: Option<&[i64]>) -> Result<HostArray, ArrayError> {
    let name = op.name();
    let d = x.dense(name)?;
    let default_axes: Vec<i64> = match op {
        FftOp::Fftshift | FftOp::Ifftshift => (0..d.shape.len() as i64).collect(),
        _ => vec![-2, -1],
    };
    if !matches!(op, FftOp::Fftshift | FftOp::Ifftshift) && d.shape.len() < 2 && axes.is_none() {
        return Err(ArrayError::shape(name, &[&d.shape], "needs at least 2 dimensions"));
    }
    let axes = normalize_axes(name, Some(axes.unwrap_or(&default_axes)), &d.shape)?;
    if axes.is_empty() && !matches!(op, FftOp::Fftshift | FftOp::Ifftshift) {
        return Err(ArrayError::value(name, "needs at least one axis to transform"));
    }
    match op {
        FftOp::Fftshift | FftOp::Ifftshift => shift(cx, d, &axes, op == FftOp::Ifftshift),
        _ => {
            let single = matches!(d.dtype, DType::F32 | DType::C64)
                || (d.dtype.kind() != Kind::Float && d.dtype.kind() != Kind::Complex && d.dtype.size() <= 2);
            let cdtype = if single { DType::C64 } else { DType::C128 };
            if op == FftOp::Irfft2 {
                return if single { irfft::<f32>(cx, d, &axes, cdtype) } else { irfft::<f64>(cx, d, &axes, cdtype) };
            }
            let mut data = cast_dense(cx, d, cdtype, name)?;
            let inverse = op == FftOp::Ifft2;
            let (first, last) = (&axes[..axes.len() - 1], axes[axes.len() - 1]);
            if op == FftOp::Rfft2 {
                if d.dtype.kind() == Kind::Complex {
                    return Err(ArrayError::dtype(name, &[d.dtype], "needs real input"));
                }
                // The real transform along the last axis keeps n/2 + 1 frequencies.
                transform_axis(cx, name, &data, last, false, single)?;
                let keep = data.shape[last] / 2 + 1;
                let mut index = vec![super::array::IndexItem::FULL; data.shape.len()];
                index[last] = super::array::IndexItem::Slice { start: None, stop: Some(keep as i64), step: None };
                data = data.index(&index)?.to_c_order(cx.memory, name)?;
                for &a in first {
                    transform_axis(cx, name, &data, a, false, single)?;
                }
                return Ok(HostArray::Dense(data));
            }
            for &a in &axes {
                transform_axis(cx, name, &data, a, inverse, single)?;
            }
            Ok(HostArray::Dense(data))
        }
    }
}

/// Transform `data` (complex, C order, owned) in place along `axis`.
fn transform_axis(
    cx: &Ctx<'_>,
    op: &str,
    data: &Dense,
    axis: usize,
    inverse: bool,
    single: bool,
) -> Result<(), ArrayError> {
    let mut w = data.storage.write(op)?;
    if single {
        let view = data.view_mut_in::<Complex32>(&mut w, op)?;
        lanes::<f32>(cx, op, view, axis, inverse)
    } else {
        let view = data.view_mut_in::<Complex64>(&mut w, op)?;
        lanes::<f64>(cx, op, view, axis, inverse)
    }
}

fn lanes<F: FftNum + num_traits::Float>(
    cx: &Ctx<'_>,
    op: &str,
    mut view: ArrayViewMutD<'_, num_complex::Complex<F>>,
    axis: usize,
    inverse: bool,
) -> Result<(), ArrayError> {
    let n = view.shape()[axis];
    if view.is_empty() {
        // No lane to transform: no plan either (an empty array's other axes can be
        // 2**62 long, and a plan's tables as long as its axis).
        return Ok(());
    }
    let mut planner = FftPlanner::<F>::new();
    let plan = if inverse { planner.plan_fft_inverse(n) } else { planner.plan_fft_forward(n) };
    let scale = F::from(1.0 / n as f64).unwrap_or_else(F::one);
    let mut buffer = vec![num_complex::Complex::<F>::new(F::zero(), F::zero()); n];
    let mut scratch = vec![num_complex::Complex::<F>::new(F::zero(), F::zero()); plan.get_inplace_scratch_len()];
    for (i, mut lane) in view.lanes_mut(Axis(axis)).into_iter().enumerate() {
        if i % 256 == 0 {
            cx.check(op)?;
        }
        for (b, v) in buffer.iter_mut().zip(lane.iter()) {
            *b = *v;
        }
        plan.process_with_scratch(&mut buffer, &mut scratch);
        for (v, b) in lane.iter_mut().zip(&buffer) {
            *v = if inverse { *b * scale } else { *b };
        }
    }
    Ok(())
}

/// `irfft2`: inverse over the leading axes, then the real inverse of the last axis
/// (output length `2 * (n - 1)`).
fn irfft<F>(cx: &Ctx<'_>, d: &Dense, axes: &[usize], cdtype: DType) -> Result<HostArray, ArrayError>
where
    num_complex::Complex<F>: bytemuck::Pod,
    F: FftNum + num_traits::Float + bytemuck::Pod,
{
    let op = "irfft2";
    let data = cast_dense(cx, d, cdtype, op)?;
    let single = cdtype == DType::C64;
    let (first, last) = (&axes[..axes.len() - 1], axes[axes.len() - 1]);
    for &a in first {
        transform_axis(cx, op, &data, a, true, single)?;
    }
    let half = data.shape[last];
    let n = half.saturating_sub(1).checked_mul(2).ok_or_else(|| {
        ArrayError::shape(op, &[&data.shape], "the output's last axis is longer than an array can be")
    })?;
    let mut out_shape = data.shape.clone();
    out_shape[last] = n;
    let real = if single { DType::F32 } else { DType::F64 };
    let out = Dense::alloc(cx.memory, op, real, &out_shape, true)?;
    if out.is_empty() {
        // No lane: no plan (whose tables are as long as the axis).
        return Ok(HostArray::Dense(out));
    }
    {
        let r = data.storage.read(op)?;
        let mut w = out.storage.write(op)?;
        let src = data.view_in::<num_complex::Complex<F>>(&r, op)?;
        let mut dst = out.view_mut_in::<F>(&mut w, op)?;
        let mut planner = FftPlanner::<F>::new();
        let plan = planner.plan_fft_inverse(n);
        let scale = F::from(1.0 / n as f64).unwrap_or_else(F::one);
        let mut buffer = vec![num_complex::Complex::<F>::new(F::zero(), F::zero()); n];
        for (i, (s, mut o)) in src.lanes(Axis(last)).into_iter().zip(dst.lanes_mut(Axis(last))).enumerate() {
            if i % 256 == 0 {
                cx.check(op)?;
            }
            // Hermitian extension: X[n - k] = conj(X[k]).
            for k in 0..n {
                buffer[k] = if k < half { s[k] } else { s[n - k].conj() };
            }
            buffer[0].im = F::zero();
            if n % 2 == 0 {
                buffer[n / 2].im = F::zero();
            }
            plan.process(&mut buffer);
            for (v, b) in o.iter_mut().zip(&buffer) {
                *v = b.re * scale;
            }
        }
    }
    Ok(HostArray::Dense(out))
}

/// `fftshift` (`ifftshift` with `inverse`): roll each axis by `n // 2` (or back).
fn shift(cx: &Ctx<'_>, d: &Dense, axes: &[usize], inverse: bool) -> Result<HostArray, ArrayError> {
    let op = if inverse { "ifftshift" } else { "fftshift" };
    let out = Dense::alloc(cx.memory, op, d.dtype, &d.shape, false)?;
    let data = if d.dtype == DType::Bool { DType::U8 } else { d.dtype };
    {
        let r = d.storage.read(op)?;
        let mut w = out.storage.write(op)?;
        crate::with_dtype!(data, T => {
        let src = d.view_in::<T>(&r, op)?;
        let mut dst = out.view_mut_in::<T>(&mut w, op)?;
        cx.check(op)?;
        // Build the result by copying the 2^k blocks the rolls move: only axes of 2 or
        // more move (and an array has at least 2^k elements then; an empty one none).
        let mut plans: Vec<(usize, usize)> = Vec::new();
        for &a in axes {
            let n = d.shape[a];
            let k = if inverse { n - n / 2 } else { n / 2 };
            if n >= 2 && !out.is_empty() {
                plans.push((a, k));
            }
        }
        let blocks = 1usize << plans.len();
        for b in 0..blocks {
            let mut s = src.view();
            let mut o = dst.view_mut();
            for (bit, &(a, k)) in plans.iter().enumerate() {
                let n = d.shape[a] as isize;
                let k = k as isize;
                // Source part [n-k, n) goes to [0, k); [0, n-k) goes to [k, n).
                if b >> bit & 1 == 0 {
                    s.slice_axis_inplace(Axis(a), Slice::from(n - k..n));
                    o.slice_axis_inplace(Axis(a), Slice::from(0..k));
                } else {
                    s.slice_axis_inplace(Axis(a), Slice::from(0..n - k));
                    o.slice_axis_inplace(Axis(a), Slice::from(k..n));
                }
            }
            o.assign(&s);
        }
    }, return Err(ArrayError::value(op, "internal error: dtype")));
    }
    Ok(HostArray::Dense(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrays::ArrayMemory;

    /// Found by the `host_arrays` fuzz target (its first run): a transform over no axes
    /// (`axes=()`) took the last of them, and underflowed. It is refused; `fftshift`
    /// over no axes is a copy, as in NumPy.
    #[test]
    fn transforms_over_no_axes_are_refused() {
        let memory = ArrayMemory::with_limit(1 << 20);
        let cx = Ctx { memory: &memory, stop: &|| None };
        let x = HostArray::zeros(&memory, DType::F32, &[2, 3]).unwrap();
        for op in [FftOp::Fft2, FftOp::Ifft2, FftOp::Rfft2, FftOp::Irfft2] {
            let refused = fft(&cx, op, &x, Some(&[]));
            assert!(matches!(refused, Err(ArrayError::Value { .. })), "{op}: {refused:?}");
        }
        assert_eq!(fft(&cx, FftOp::Fftshift, &x, Some(&[])).unwrap().shape(), &[2, 3]);
    }

    /// Found writing the `host_arrays` fuzz target: an empty array whose other axis is
    /// 2**40 long planned a transform of that length (tables as long as the axis: an
    /// allocation that aborts the host).
    #[test]
    fn transforms_of_empty_arrays_with_long_axes_plan_nothing() {
        let memory = ArrayMemory::with_limit(1 << 20);
        let cx = Ctx { memory: &memory, stop: &|| None };
        let empty = HostArray::zeros(&memory, DType::F32, &[0, 1 << 40]).unwrap();
        for op in [FftOp::Fft2, FftOp::Ifft2, FftOp::Rfft2] {
            let out = fft(&cx, op, &empty, None).unwrap();
            assert_eq!(out.shape()[0], 0, "{op}");
        }
        let long = HostArray::zeros(&memory, DType::C64, &[0, 1 << 40]).unwrap();
        assert_eq!(fft(&cx, FftOp::Irfft2, &long, None).unwrap().shape(), &[0, (1 << 41) - 2]);
    }
}
