//! Elementwise operations: `astype`, unary and binary functions with broadcasting and
//! NumPy 2's type promotion (NEP 50: Python scalars are "weak" and take the array's
//! dtype), `where` and `clip`.

use super::array::{Dense, HostArray, broadcast_shapes};
use super::element::{Elem, IntElem, RealElem};
use super::error::ArrayError;
use super::memory::ArrayMemory;
use super::ops::{BinaryOp, UnaryOp};
use crate::dtype::{Complex32, Complex64, DType, Kind, result_type};
use ndarray::{ArrayViewD, ArrayViewMutD, Axis, Zip};
use num_complex::ComplexFloat;
use std::sync::Arc;

/// Elements per slice between two interruption checks.
pub const CHECK_EVERY: usize = 1 << 20;

/// What every operation gets: where its results are allocated, and how to ask whether
/// it should stop (`--timeout`, Ctrl-C), checked every [`CHECK_EVERY`] elements.
pub struct Ctx<'a> {
    pub memory: &'a Arc<ArrayMemory>,
    pub stop: &'a dyn Fn() -> Option<String>,
}

impl Ctx<'_> {
    /// Fail with [`ArrayError::Interrupted`] when the caller wants to stop.
    pub fn check(&self, op: &str) -> Result<(), ArrayError> {
        match (self.stop)() {
            Some(why) => Err(ArrayError::Interrupted { op: op.into(), why }),
            None => Ok(()),
        }
    }
}

/// A Python scalar operand.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
    Complex(f64, f64),
}

/// An operand of a binary function: an array or a Python scalar.
#[derive(Debug, Clone, Copy)]
pub enum Operand<'a> {
    Array(&'a HostArray),
    Scalar(Scalar),
}

impl Scalar {
    fn kind(self) -> Kind {
        match self {
            Scalar::Bool(_) => Kind::Bool,
            Scalar::Int(_) => Kind::Signed,
            Scalar::Float(_) => Kind::Float,
            Scalar::Complex(..) => Kind::Complex,
        }
    }

    /// The dtype a scalar alone has (NumPy's defaults).
    pub fn default_dtype(self) -> DType {
        match self {
            Scalar::Bool(_) => DType::Bool,
            Scalar::Int(_) => DType::I64,
            Scalar::Float(_) => DType::F64,
            Scalar::Complex(..) => DType::C128,
        }
    }

    /// The value as an element of `T` (`astype` semantics).
    fn cast<T: Elem>(self) -> T {
        match self {
            Scalar::Bool(b) => T::cast_from(b as u8),
            Scalar::Int(i) => T::cast_from(i),
            Scalar::Float(f) => T::cast_from(f),
            Scalar::Complex(re, im) => T::cast_from(Complex64::new(re, im)),
        }
    }
}

/// NEP 50: the dtype of `array <op> scalar` before the operation's own rule.
fn weak_promotion(op: &str, array: DType, scalar: Scalar) -> Result<DType, ArrayError> {
    use Kind::*;
    Ok(match (array.kind(), scalar.kind()) {
        (_, Bool) => array,
        (Bool, Signed) => DType::I64,
        (Unsigned | Signed, Signed) => {
            let Scalar::Int(v) = scalar else { unreachable_dtype(op)? };
            if !int_fits(array, v) {
                return Err(ArrayError::value(op, format!("Python integer {v} is out of bounds for {}", array.name())));
            }
            array
        }
        (Float | Complex, Signed) => array,
        (Bool | Unsigned | Signed, Float) => DType::F64,
        (Float | Complex, Float) => array,
        (Bool | Unsigned | Signed, Complex) => DType::C128,
        (Float, Complex) => {
            if array == DType::F32 {
                DType::C64
            } else {
                DType::C128
            }
        }
        (Complex, Complex) => array,
        (_, Unsigned) => array,
    })
}

fn unreachable_dtype<T>(op: &str) -> Result<T, ArrayError> {
    Err(ArrayError::value(op, "internal error: inconsistent scalar kind"))
}

fn int_fits(dtype: DType, v: i64) -> bool {
    let (lo, hi): (i128, i128) = match dtype {
        DType::U8 => (0, u8::MAX as i128),
        DType::U16 => (0, u16::MAX as i128),
        DType::U32 => (0, u32::MAX as i128),
        DType::U64 => (0, u64::MAX as i128),
        DType::I8 => (i8::MIN as i128, i8::MAX as i128),
        DType::I16 => (i16::MIN as i128, i16::MAX as i128),
        DType::I32 => (i32::MIN as i128, i32::MAX as i128),
        _ => (i64::MIN as i128, i64::MAX as i128),
    };
    (lo..=hi).contains(&(v as i128))
}

/// The float dtype NumPy computes an integer's transcendental functions in (no
/// float16 here: 8-bit integers go to float32).
pub fn float_for(dtype: DType) -> DType {
    match dtype.kind() {
        Kind::Float | Kind::Complex => dtype,
        _ if dtype.size() <= 2 => DType::F32,
        _ => DType::F64,
    }
}

/// The real dtype of a complex one (itself for others).
pub fn real_of(dtype: DType) -> DType {
    match dtype {
        DType::C64 => DType::F32,
        DType::C128 => DType::F64,
        d => d,
    }
}

/// `astype(x, dtype)`: a C-order copy with the values cast (NumPy's `astype`).
pub fn astype(cx: &Ctx<'_>, x: &HostArray, dtype: DType) -> Result<HostArray, ArrayError> {
    // A converting tile whose stored integers convert exactly goes straight from them to
    // a float dtype (the same values: `tile.astype(np.float64)` of a uint16 tile), not
    // through its converted copy (a whole-partition tile: 256 MiB more and a pass).
    if let HostArray::Converting(c) = x
        && c.exact()
        && matches!(dtype.kind(), Kind::Float | Kind::Complex)
    {
        return Ok(HostArray::Dense(cast_dense(cx, &c.stored, dtype, "astype")?));
    }
    Ok(HostArray::Dense(cast_dense(cx, x.dense("astype")?, dtype, "astype")?))
}

/// `x` as a C-order array of `dtype` (a copy, also when the dtype is the same).
pub fn cast_dense(cx: &Ctx<'_>, x: &Dense, dtype: DType, op: &str) -> Result<Dense, ArrayError> {
    if x.dtype == dtype {
        return x.to_c_order(cx.memory, op);
    }
    let out = Dense::alloc(cx.memory, op, dtype, &x.shape, false)?;
    if out.is_empty() {
        return Ok(out);
    }
    {
        let src = x.storage.read(op)?;
        let mut dst = out.storage.write(op)?;
        let source = if x.dtype == DType::Bool { DType::U8 } else { x.dtype };
        crate::with_dtype!(source, S => {
            let view = x.view_in::<S>(&src, op)?;
            cast_view_into(view, &mut dst, dtype);
        }, unreachable_dtype(op)?);
    }
    Ok(out)
}

/// Write `view` (C order) cast to `dtype` into `dst`.
fn cast_view_into<S: Elem>(view: ArrayViewD<'_, S>, dst: &mut [u8], dtype: DType) {
    if dtype == DType::Bool {
        for (o, s) in dst.iter_mut().zip(view.iter()) {
            *o = s.truthy() as u8;
        }
        return;
    }
    crate::with_dtype!(dtype, D => {
        let dst: &mut [D] = bytemuck::cast_slice_mut(dst);
        match view.as_slice() {
            Some(src) => {
                for (o, s) in dst.iter_mut().zip(src) {
                    *o = s.cast_to::<D>();
                }
            }
            None => {
                for (o, s) in dst.iter_mut().zip(view.iter()) {
                    *o = s.cast_to::<D>();
                }
            }
        }
    }, ())
}

/// A scalar as a 0-d array of `dtype`.
pub fn scalar_array(cx: &Ctx<'_>, value: Scalar, dtype: DType, op: &str) -> Result<Dense, ArrayError> {
    let out = Dense::alloc(cx.memory, op, dtype, &[], false)?;
    {
        let mut bytes = out.storage.write(op)?;
        if dtype == DType::Bool {
            bytes[0] = match value {
                Scalar::Bool(b) => b as u8,
                Scalar::Int(i) => (i != 0) as u8,
                Scalar::Float(f) => (f != 0.0) as u8,
                Scalar::Complex(re, im) => (re != 0.0 || im != 0.0) as u8,
            };
        } else {
            crate::with_dtype!(dtype, T => {
                let v: T = value.cast();
                bytes[..std::mem::size_of::<T>()].copy_from_slice(bytemuck::bytes_of(&v));
            }, ());
        }
    }
    Ok(out)
}

/// An operand as a dense array of `dtype` (cast if needed; scalars as 0-d arrays).
fn operand_as(cx: &Ctx<'_>, operand: Operand<'_>, dtype: DType, op: &str) -> Result<Dense, ArrayError> {
    match operand {
        Operand::Array(a) => {
            let d = a.dense(op)?;
            if d.dtype == dtype { Ok(d.clone()) } else { cast_dense(cx, d, dtype, op) }
        }
        Operand::Scalar(s) => scalar_array(cx, s, dtype, op),
    }
}

/// The promoted dtype of two operands (NumPy 2, NEP 50).
pub fn promote(op: &str, a: Operand<'_>, b: Operand<'_>) -> Result<DType, ArrayError> {
    match (a, b) {
        (Operand::Array(x), Operand::Array(y)) => Ok(result_type(x.dtype(), y.dtype())),
        (Operand::Array(x), Operand::Scalar(s)) | (Operand::Scalar(s), Operand::Array(x)) => {
            weak_promotion(op, x.dtype(), s)
        }
        (Operand::Scalar(s), Operand::Scalar(t)) => Ok(result_type(s.default_dtype(), t.default_dtype())),
    }
}

fn operand_shape<'a>(operand: &Operand<'a>) -> &'a [usize] {
    match operand {
        Operand::Array(a) => a.shape(),
        Operand::Scalar(_) => &[],
    }
}

/// Run `f(out, a, b)` over matching slices of the outer axis, checking for interruption
/// between slices.
fn chunked3<O, A, B>(
    cx: &Ctx<'_>,
    op: &str,
    mut out: ArrayViewMutD<'_, O>,
    a: ArrayViewD<'_, A>,
    b: ArrayViewD<'_, B>,
    f: impl Fn(ArrayViewMutD<'_, O>, ArrayViewD<'_, A>, ArrayViewD<'_, B>),
) -> Result<(), ArrayError> {
    if out.is_empty() {
        // ndarray walks the outer lanes of an empty array: (2**40, 0) would take hours.
        return Ok(());
    }
    if out.ndim() == 0 || out.len() <= CHECK_EVERY {
        f(out, a, b);
        return Ok(());
    }
    let row = out.len() / out.shape()[0].max(1);
    let rows = (CHECK_EVERY / row.max(1)).max(1);
    for ((o, x), y) in out
        .axis_chunks_iter_mut(Axis(0), rows)
        .zip(a.axis_chunks_iter(Axis(0), rows))
        .zip(b.axis_chunks_iter(Axis(0), rows))
    {
        cx.check(op)?;
        f(o, x, y);
    }
    Ok(())
}

/// Apply `f` to broadcast pairs of `a` and `b` (already of dtype `T`) into `out`.
fn zip2<T: bytemuck::Pod, R: bytemuck::Pod>(
    cx: &Ctx<'_>,
    op: &str,
    a: &Dense,
    b: &Dense,
    out: &Dense,
    f: impl Fn(T, T) -> R + Copy,
) -> Result<(), ArrayError> {
    let (ra, rb) = (a.storage.read(op)?, b.storage.read(op)?);
    let mut w = out.storage.write(op)?;
    let shape = out.shape.clone();
    let va = a.view_in::<T>(&ra, op)?;
    let vb = b.view_in::<T>(&rb, op)?;
    let va = va.broadcast(shape.clone()).ok_or_else(|| ArrayError::shape(op, &[&a.shape, &shape], "broadcast"))?;
    let vb = vb.broadcast(shape.clone()).ok_or_else(|| ArrayError::shape(op, &[&b.shape, &shape], "broadcast"))?;
    let mut vo = out.view_mut_in::<R>(&mut w, op)?;
    // C-order operands of the result's shape, or one of them a single value (`x / n`,
    // `d * w`): loops over slices, which the compiler vectorises (the general zip of
    // broadcast views of dynamic dimension does not).
    let single = |v: &ArrayViewD<'_, T>| if v.strides().iter().all(|&s| s == 0) { v.first().copied() } else { None };
    let (sa, sb, ca, cb) = (va.as_slice(), vb.as_slice(), single(&va), single(&vb));
    if let Some(os) = vo.as_slice_mut()
        && ((sa.is_some() || ca.is_some()) && (sb.is_some() || cb.is_some()))
    {
        for (c, o) in os.chunks_mut(CHECK_EVERY).enumerate() {
            cx.check(op)?;
            let at = c * CHECK_EVERY;
            match (sa, sb, ca, cb) {
                (Some(x), Some(y), _, _) => {
                    o.iter_mut().zip(&x[at..]).zip(&y[at..]).for_each(|((o, &x), &y)| *o = f(x, y))
                }
                (Some(x), None, _, Some(y)) => o.iter_mut().zip(&x[at..]).for_each(|(o, &x)| *o = f(x, y)),
                (None, Some(y), Some(x), _) => o.iter_mut().zip(&y[at..]).for_each(|(o, &y)| *o = f(x, y)),
                (_, _, Some(x), Some(y)) => o.iter_mut().for_each(|o| *o = f(x, y)),
                _ => return Err(ArrayError::value(op, "internal error: operands without a flat layout")),
            }
        }
        return Ok(());
    }
    chunked3(cx, op, vo, va, vb, |o, x, y| Zip::from(o).and(&x).and(&y).for_each(|o, &x, &y| *o = f(x, y)))
}

/// A binary function `op(a, b)` with broadcasting.
///
/// # Errors
/// Shapes that do not broadcast, dtypes the function does not take, a Python integer
/// out of range, a negative integer power, memory, interruption.
pub fn binary(cx: &Ctx<'_>, op: BinaryOp, a: Operand<'_>, b: Operand<'_>) -> Result<HostArray, ArrayError> {
    use BinaryOp::*;
    let name = op.name();
    let shape = broadcast_shapes(name, &[operand_shape(&a), operand_shape(&b)])?;
    let promoted = promote(name, a, b)?;
    let kind = promoted.kind();
    let bad = |why: &str| {
        let dtypes: Vec<DType> = [a, b]
            .iter()
            .map(|o| match o {
                Operand::Array(x) => x.dtype(),
                Operand::Scalar(s) => s.default_dtype(),
            })
            .collect();
        Err(ArrayError::dtype(name, &dtypes, why))
    };
    // The dtype the elements are computed in, and the result's.
    let (compute, result) = match op {
        Add | Subtract | Multiply | Pow => {
            if kind == Kind::Bool {
                return bad("needs numeric dtypes, not bool");
            }
            (promoted, promoted)
        }
        Divide => {
            let f = match kind {
                Kind::Float | Kind::Complex => promoted,
                _ => DType::F64,
            };
            (f, f)
        }
        FloorDivide | Remainder => match kind {
            Kind::Bool => return bad("needs real numeric dtypes, not bool"),
            Kind::Complex => return bad("is not defined for complex numbers"),
            _ => (promoted, promoted),
        },
        Maximum | Minimum => {
            if kind == Kind::Complex {
                return bad("is not defined for complex numbers");
            }
            (promoted, promoted)
        }
        Equal | NotEqual => (promoted, DType::Bool),
        Less | LessEqual | Greater | GreaterEqual => {
            if kind == Kind::Complex {
                return bad("complex numbers have no order");
            }
            (promoted, DType::Bool)
        }
        LogicalAnd | LogicalOr | LogicalXor => (promoted, DType::Bool),
        BitwiseAnd | BitwiseOr | BitwiseXor => match kind {
            Kind::Bool | Kind::Unsigned | Kind::Signed => (promoted, promoted),
            _ => return bad("needs integer or bool dtypes"),
        },
        BitwiseLeftShift | BitwiseRightShift => match kind {
            Kind::Unsigned | Kind::Signed => (promoted, promoted),
            _ => return bad("needs integer dtypes"),
        },
        Atan2 | Hypot | Copysign => {
            if kind == Kind::Complex {
                return bad("needs real dtypes");
            }
            // NumPy picks the smallest float loop each input casts to safely.
            let float_of = |o: &Operand<'_>| match o {
                Operand::Array(x) if x.dtype() == DType::Bool => DType::F32,
                Operand::Array(x) => float_for(x.dtype()),
                Operand::Scalar(_) => DType::F32,
            };
            let f = if kind == Kind::Float { promoted } else { result_type(float_of(&a), float_of(&b)) };
            (f, f)
        }
    };
    let x = operand_as(cx, a, compute, name)?;
    let y = operand_as(cx, b, compute, name)?;
    let out = Dense::alloc(cx.memory, name, result, &shape, false)?;
    let data = if compute == DType::Bool { DType::U8 } else { compute };
    let unsupported = || ArrayError::dtype(name, &[compute], "not supported for this dtype");
    match op {
        Equal | NotEqual | Less | LessEqual | Greater | GreaterEqual => {
            crate::with_dtype!(data, T => compare::<T>(cx, op, &x, &y, &out)?, unreachable_dtype(name)?)
        }
        // Each op its own call of zip2 (here and below): a closure chosen by a `match`
        // becomes a function pointer, called per element and never vectorized (`t * t`
        // was 6.8x slower than NumPy's).
        LogicalAnd | LogicalOr | LogicalXor => crate::with_dtype!(data, T => match op {
            LogicalAnd => zip2::<T, u8>(cx, name, &x, &y, &out, |p: T, q: T| (p.truthy() && q.truthy()) as u8)?,
            LogicalOr => zip2::<T, u8>(cx, name, &x, &y, &out, |p: T, q: T| (p.truthy() || q.truthy()) as u8)?,
            _ => zip2::<T, u8>(cx, name, &x, &y, &out, |p: T, q: T| (p.truthy() != q.truthy()) as u8)?,
        }, unreachable_dtype(name)?),
        BitwiseAnd | BitwiseOr | BitwiseXor | BitwiseLeftShift | BitwiseRightShift => {
            crate::with_int!(data, T => match op {
                BitwiseAnd => zip2::<T, T>(cx, name, &x, &y, &out, <T as IntElem>::bit_and)?,
                BitwiseOr => zip2::<T, T>(cx, name, &x, &y, &out, T::bit_or)?,
                BitwiseXor => zip2::<T, T>(cx, name, &x, &y, &out, T::bit_xor)?,
                BitwiseLeftShift => zip2::<T, T>(cx, name, &x, &y, &out, T::shl)?,
                _ => zip2::<T, T>(cx, name, &x, &y, &out, T::shr)?,
            }, return Err(unsupported()))
        }
        Pow if matches!(kind, Kind::Unsigned | Kind::Signed) => crate::with_int!(data, T => {
            let negative = std::cell::Cell::new(false);
            let r = zip2::<T, T>(cx, name, &x, &y, &out, |p: T, q: T| match IntElem::pow(p, q) {
                Some(v) => v,
                None => {
                    negative.set(true);
                    T::default()
                }
            });
            r?;
            if negative.get() {
                return Err(ArrayError::value(name, "integers to negative integer powers are not allowed"));
            }
        }, return Err(unsupported())),
        Add | Subtract | Multiply => crate::with_dtype!(data, T => match op {
            Add => zip2::<T, T>(cx, name, &x, &y, &out, T::add)?,
            Subtract => zip2::<T, T>(cx, name, &x, &y, &out, T::sub)?,
            _ => zip2::<T, T>(cx, name, &x, &y, &out, T::mul)?,
        }, return Err(unsupported())),
        FloorDivide | Remainder | Maximum | Minimum => match compute {
            DType::Bool if op == Maximum => zip2::<u8, u8>(cx, name, &x, &y, &out, |p: u8, q: u8| p | q)?,
            DType::Bool => zip2::<u8, u8>(cx, name, &x, &y, &out, |p: u8, q: u8| p & q)?,
            _ => crate::with_real_numeric!(data, T => match op {
                FloorDivide => zip2::<T, T>(cx, name, &x, &y, &out, T::floor_div)?,
                Remainder => zip2::<T, T>(cx, name, &x, &y, &out, T::rem)?,
                Maximum => zip2::<T, T>(cx, name, &x, &y, &out, <T as RealElem>::maximum)?,
                _ => zip2::<T, T>(cx, name, &x, &y, &out, <T as RealElem>::minimum)?,
            }, return Err(unsupported())),
        },
        Divide | Pow => crate::with_inexact!(data, T => {
            if op == Divide {
                zip2::<T, T>(cx, name, &x, &y, &out, |p: T, q: T| p / q)?
            } else {
                zip2::<T, T>(cx, name, &x, &y, &out, |p: T, q: T| p.powc_like(q))?
            }
        }, return Err(unsupported())),
        Atan2 | Hypot | Copysign => crate::with_real!(data, T => {
            let f = match op {
                Atan2 => |p: T, q: T| p.atan2(q),
                Hypot => |p: T, q: T| p.hypot(q),
                _ => |p: T, q: T| p.copysign(q),
            };
            zip2::<T, T>(cx, name, &x, &y, &out, f)?
        }, return Err(unsupported())),
    }
    Ok(HostArray::Dense(out))
}

/// `pow` for floats and complex numbers.
trait PowLike {
    fn powc_like(self, other: Self) -> Self;
}

impl PowLike for f32 {
    fn powc_like(self, other: Self) -> Self {
        self.powf(other)
    }
}
impl PowLike for f64 {
    fn powc_like(self, other: Self) -> Self {
        self.powf(other)
    }
}
impl PowLike for Complex32 {
    fn powc_like(self, other: Self) -> Self {
        if other == Complex32::new(0.0, 0.0) { Complex32::new(1.0, 0.0) } else { self.powc(other) }
    }
}
impl PowLike for Complex64 {
    fn powc_like(self, other: Self) -> Self {
        if other == Complex64::new(0.0, 0.0) { Complex64::new(1.0, 0.0) } else { self.powc(other) }
    }
}

/// Comparisons: complex `==`/`!=` compare both parts; the order of reals.
fn compare<T: Elem + PartialOrdMaybe>(
    cx: &Ctx<'_>,
    op: BinaryOp,
    x: &Dense,
    y: &Dense,
    out: &Dense,
) -> Result<(), ArrayError> {
    use BinaryOp::*;
    let name = op.name();
    match op {
        Equal => zip2::<T, u8>(cx, name, x, y, out, |p, q| (p == q) as u8),
        NotEqual => zip2::<T, u8>(cx, name, x, y, out, |p, q| (p != q) as u8),
        Less => zip2::<T, u8>(cx, name, x, y, out, |p, q| p.lt_maybe(q) as u8),
        LessEqual => zip2::<T, u8>(cx, name, x, y, out, |p, q| p.le_maybe(q) as u8),
        Greater => zip2::<T, u8>(cx, name, x, y, out, |p, q| q.lt_maybe(p) as u8),
        _ => zip2::<T, u8>(cx, name, x, y, out, |p, q| q.le_maybe(p) as u8),
    }
}

/// `<` and `<=` where they exist (complex numbers never reach them: `binary` refuses).
pub trait PartialOrdMaybe: Copy {
    fn lt_maybe(self, other: Self) -> bool;
    fn le_maybe(self, other: Self) -> bool;
}

macro_rules! ordered {
    ($($t:ty),*) => {$(
        impl PartialOrdMaybe for $t {
            #[inline(always)] fn lt_maybe(self, o: Self) -> bool { self < o }
            #[inline(always)] fn le_maybe(self, o: Self) -> bool { self <= o }
        }
    )*};
}
ordered!(u8, u16, u32, u64, i8, i16, i32, i64, f32, f64);
impl PartialOrdMaybe for Complex32 {
    fn lt_maybe(self, o: Self) -> bool {
        (self.re, self.im) < (o.re, o.im)
    }
    fn le_maybe(self, o: Self) -> bool {
        (self.re, self.im) <= (o.re, o.im)
    }
}
impl PartialOrdMaybe for Complex64 {
    fn lt_maybe(self, o: Self) -> bool {
        (self.re, self.im) < (o.re, o.im)
    }
    fn le_maybe(self, o: Self) -> bool {
        (self.re, self.im) <= (o.re, o.im)
    }
}

/// Apply `f` to every element of `x` (of dtype `T`) into `out`.
fn map1<T: bytemuck::Pod, R: bytemuck::Pod>(
    cx: &Ctx<'_>,
    op: &str,
    x: &Dense,
    out: &Dense,
    f: impl Fn(T) -> R + Copy,
) -> Result<(), ArrayError> {
    let r = x.storage.read(op)?;
    let mut w = out.storage.write(op)?;
    let vx = x.view_in::<T>(&r, op)?;
    let vo = out.view_mut_in::<R>(&mut w, op)?;
    let unused = x.view_in::<T>(&r, op)?;
    chunked3(cx, op, vo, vx, unused, |o, x, _| Zip::from(o).and(&x).for_each(|o, &x| *o = f(x)))
}

/// A unary function.
///
/// # Errors
/// A dtype the function does not take, memory, interruption.
pub fn unary(cx: &Ctx<'_>, op: UnaryOp, x: &HostArray) -> Result<HostArray, ArrayError> {
    use UnaryOp::*;
    let name = op.name();
    let d = x.dense(name)?;
    let dtype = d.dtype;
    let kind = dtype.kind();
    let bad = |why: &str| Err(ArrayError::dtype(name, &[dtype], why));
    let data = if dtype == DType::Bool { DType::U8 } else { dtype };
    match op {
        Isnan | Isinf | Isfinite => {
            let out = Dense::alloc(cx.memory, name, DType::Bool, &d.shape, false)?;
            crate::with_dtype!(data, T => match op {
                Isnan => map1::<T, u8>(cx, name, d, &out, |v: T| v.is_nan() as u8)?,
                Isinf => map1::<T, u8>(cx, name, d, &out, |v: T| v.is_inf() as u8)?,
                _ => map1::<T, u8>(cx, name, d, &out, |v: T| (!v.is_nan() && !v.is_inf()) as u8)?,
            }, unreachable_dtype(name)?);
            Ok(HostArray::Dense(out))
        }
        LogicalNot => {
            let out = Dense::alloc(cx.memory, name, DType::Bool, &d.shape, false)?;
            crate::with_dtype!(data, T => map1::<T, u8>(cx, name, d, &out, |v: T| (!v.truthy()) as u8)?,
                unreachable_dtype(name)?);
            Ok(HostArray::Dense(out))
        }
        BitwiseInvert => {
            let out = Dense::alloc(cx.memory, name, dtype, &d.shape, false)?;
            if dtype == DType::Bool {
                map1::<u8, u8>(cx, name, d, &out, |v| (v == 0) as u8)?;
            } else {
                crate::with_int!(dtype, T => map1::<T, T>(cx, name, d, &out, T::bit_not)?,
                    return bad("needs an integer or bool dtype"));
            }
            Ok(HostArray::Dense(out))
        }
        Positive => {
            if kind == Kind::Bool {
                return bad("needs a numeric dtype, not bool");
            }
            Ok(HostArray::Dense(d.to_c_order(cx.memory, name)?))
        }
        Negative | Square => {
            if kind == Kind::Bool {
                return bad("needs a numeric dtype, not bool");
            }
            let out = Dense::alloc(cx.memory, name, dtype, &d.shape, false)?;
            crate::with_dtype!(dtype, T => {
                if op == Negative {
                    map1::<T, T>(cx, name, d, &out, |v: T| v.neg())?
                } else {
                    map1::<T, T>(cx, name, d, &out, |v: T| v.mul(v))?
                }
            }, unreachable_dtype(name)?);
            Ok(HostArray::Dense(out))
        }
        Abs => {
            let out_dtype = real_of(dtype);
            let out = Dense::alloc(cx.memory, name, out_dtype, &d.shape, false)?;
            match dtype {
                DType::Bool => map1::<u8, u8>(cx, name, d, &out, |v| v)?,
                DType::C64 => map1::<Complex32, f32>(cx, name, d, &out, |v| v.norm())?,
                DType::C128 => map1::<Complex64, f64>(cx, name, d, &out, |v| v.norm())?,
                _ => crate::with_real_numeric!(dtype, T => map1::<T, T>(cx, name, d, &out, RealElem::abs)?,
                    unreachable_dtype(name)?),
            }
            Ok(HostArray::Dense(out))
        }
        Sign | Floor | Ceil | Trunc | Round => {
            if kind == Kind::Bool {
                return bad("needs a numeric dtype, not bool");
            }
            let out = Dense::alloc(cx.memory, name, dtype, &d.shape, false)?;
            match dtype {
                DType::C64 if op == Sign => {
                    map1::<Complex32, Complex32>(cx, name, d, &out, |v| if v.norm() == 0.0 { v } else { v / v.norm() })?
                }
                DType::C128 if op == Sign => {
                    map1::<Complex64, Complex64>(cx, name, d, &out, |v| if v.norm() == 0.0 { v } else { v / v.norm() })?
                }
                DType::C64 | DType::C128 => return bad("is not defined for complex numbers"),
                _ => crate::with_real_numeric!(dtype, T => match op {
                    Sign => map1::<T, T>(cx, name, d, &out, RealElem::sign)?,
                    Floor => map1::<T, T>(cx, name, d, &out, RealElem::floor)?,
                    Ceil => map1::<T, T>(cx, name, d, &out, RealElem::ceil)?,
                    Trunc => map1::<T, T>(cx, name, d, &out, RealElem::trunc)?,
                    _ => map1::<T, T>(cx, name, d, &out, RealElem::round)?,
                }, unreachable_dtype(name)?),
            }
            Ok(HostArray::Dense(out))
        }
        Real | Imag | Conj => match (op, dtype) {
            (Real, DType::C64) | (Imag, DType::C64) => {
                let out = Dense::alloc(cx.memory, name, DType::F32, &d.shape, false)?;
                let f = if op == Real { |v: Complex32| v.re } else { |v: Complex32| v.im };
                map1::<Complex32, f32>(cx, name, d, &out, f)?;
                Ok(HostArray::Dense(out))
            }
            (Real, DType::C128) | (Imag, DType::C128) => {
                let out = Dense::alloc(cx.memory, name, DType::F64, &d.shape, false)?;
                let f = if op == Real { |v: Complex64| v.re } else { |v: Complex64| v.im };
                map1::<Complex64, f64>(cx, name, d, &out, f)?;
                Ok(HostArray::Dense(out))
            }
            (Conj, DType::C64) => {
                let out = Dense::alloc(cx.memory, name, dtype, &d.shape, false)?;
                map1::<Complex32, Complex32>(cx, name, d, &out, |v| v.conj())?;
                Ok(HostArray::Dense(out))
            }
            (Conj, DType::C128) => {
                let out = Dense::alloc(cx.memory, name, dtype, &d.shape, false)?;
                map1::<Complex64, Complex64>(cx, name, d, &out, |v| v.conj())?;
                Ok(HostArray::Dense(out))
            }
            (Imag, _) => Ok(HostArray::Dense(Dense::alloc(cx.memory, name, dtype, &d.shape, true)?)),
            _ => Ok(HostArray::Dense(d.to_c_order(cx.memory, name)?)),
        },
        Sqrt | Exp | Expm1 | Log | Log1p | Log2 | Log10 | Sin | Cos | Tan | Asin | Acos | Atan | Sinh | Cosh | Tanh
        | Asinh | Acosh | Atanh => {
            let f_dtype = if kind == Kind::Bool { DType::F32 } else { float_for(dtype) };
            let input = if f_dtype == dtype { d.clone() } else { cast_dense(cx, d, f_dtype, name)? };
            let out = Dense::alloc(cx.memory, name, f_dtype, &d.shape, false)?;
            crate::with_inexact!(f_dtype, T => {
                if op == Sqrt {
                    // Cheap enough per element that a call through a pointer would dominate.
                    map1::<T, T>(cx, name, &input, &out, T::sqrt)?
                } else {
                    map1::<T, T>(cx, name, &input, &out, transcendental::<T>(op))?
                }
            }, unreachable_dtype(name)?);
            Ok(HostArray::Dense(out))
        }
    }
}

/// The function of a transcendental op for floats and complex numbers.
fn transcendental<T: ComplexFloat + LogOnePlus>(op: UnaryOp) -> fn(T) -> T {
    use UnaryOp::*;
    match op {
        Sqrt => T::sqrt,
        Exp => T::exp,
        Expm1 => T::exp_m1_like,
        Log => T::ln,
        Log1p => T::ln_1p_like,
        Log2 => T::log2,
        Log10 => T::log10,
        Sin => T::sin,
        Cos => T::cos,
        Tan => T::tan,
        Asin => T::asin,
        Acos => T::acos,
        Atan => T::atan,
        Sinh => T::sinh,
        Cosh => T::cosh,
        Tanh => T::tanh,
        Asinh => T::asinh,
        Acosh => T::acosh,
        _ => T::atanh,
    }
}

/// `log1p` and `expm1`, exact near zero for reals.
pub trait LogOnePlus: Sized {
    fn ln_1p_like(self) -> Self;
    fn exp_m1_like(self) -> Self;
}
impl LogOnePlus for f32 {
    fn ln_1p_like(self) -> Self {
        self.ln_1p()
    }
    fn exp_m1_like(self) -> Self {
        self.exp_m1()
    }
}
impl LogOnePlus for f64 {
    fn ln_1p_like(self) -> Self {
        self.ln_1p()
    }
    fn exp_m1_like(self) -> Self {
        self.exp_m1()
    }
}
impl LogOnePlus for Complex32 {
    fn ln_1p_like(self) -> Self {
        (self + 1.0).ln()
    }
    fn exp_m1_like(self) -> Self {
        self.exp() - 1.0
    }
}
impl LogOnePlus for Complex64 {
    fn ln_1p_like(self) -> Self {
        (self + 1.0).ln()
    }
    fn exp_m1_like(self) -> Self {
        self.exp() - 1.0
    }
}

/// `where(cond, a, b)`: elements of `a` where `cond` is true, else of `b` (broadcast).
pub fn where_(cx: &Ctx<'_>, cond: &HostArray, a: Operand<'_>, b: Operand<'_>) -> Result<HostArray, ArrayError> {
    let op = "where";
    let shape = broadcast_shapes(op, &[cond.shape(), operand_shape(&a), operand_shape(&b)])?;
    let dtype = promote(op, a, b)?;
    let c = cond.dense(op)?;
    let c = if c.dtype == DType::Bool { c.clone() } else { cast_dense(cx, c, DType::Bool, op)? };
    let x = operand_as(cx, a, dtype, op)?;
    let y = operand_as(cx, b, dtype, op)?;
    let out = Dense::alloc(cx.memory, op, dtype, &shape, false)?;
    let data = if dtype == DType::Bool { DType::U8 } else { dtype };
    crate::with_dtype!(data, T => {
        let (rc, rx, ry) = (c.storage.read(op)?, x.storage.read(op)?, y.storage.read(op)?);
        let mut w = out.storage.write(op)?;
        let vc = c.view_in::<u8>(&rc, op)?;
        let vc = vc.broadcast(shape.clone()).ok_or_else(|| ArrayError::shape(op, &[&c.shape, &shape], "broadcast"))?;
        let vx = x.view_in::<T>(&rx, op)?;
        let vx = vx.broadcast(shape.clone()).ok_or_else(|| ArrayError::shape(op, &[&x.shape, &shape], "broadcast"))?;
        let vy = y.view_in::<T>(&ry, op)?;
        let vy = vy.broadcast(shape.clone()).ok_or_else(|| ArrayError::shape(op, &[&y.shape, &shape], "broadcast"))?;
        let vo = out.view_mut_in::<T>(&mut w, op)?;
        cx.check(op)?;
        // An empty result: ndarray would walk its outer lanes.
        if !vo.is_empty() { Zip::from(vo).and(&vc).and(&vx).and(&vy).for_each(|o, &c, &x, &y| *o = if c != 0 { x } else { y }); }
    }, unreachable_dtype(op)?);
    Ok(HostArray::Dense(out))
}

/// `clip(x, min, max)`: the result has `x`'s dtype (the array API's rule); NaN stays.
pub fn clip(
    cx: &Ctx<'_>,
    x: &HostArray,
    min: Option<Operand<'_>>,
    max: Option<Operand<'_>>,
) -> Result<HostArray, ArrayError> {
    let op = "clip";
    let dtype = x.dtype();
    if matches!(dtype.kind(), Kind::Complex) {
        return Err(ArrayError::dtype(op, &[dtype], "is not defined for complex numbers"));
    }
    let mut shapes = vec![x.shape()];
    shapes.extend(min.iter().chain(max.iter()).map(operand_shape));
    let shape = broadcast_shapes(op, &shapes)?;
    if shape.as_slice() != x.shape() {
        return Err(ArrayError::shape(op, &shapes, "the bounds must broadcast to the array's shape"));
    }
    let mut current = x.clone();
    if let Some(lo) = min {
        check_bound(op, dtype, lo)?;
        current = binary(cx, BinaryOp::Maximum, Operand::Array(&current), lo)?;
        if current.dtype() != dtype {
            current = astype(cx, &current, dtype)?;
        }
    }
    if let Some(hi) = max {
        check_bound(op, dtype, hi)?;
        current = binary(cx, BinaryOp::Minimum, Operand::Array(&current), hi)?;
        if current.dtype() != dtype {
            current = astype(cx, &current, dtype)?;
        }
    }
    if min.is_none() && max.is_none() {
        current = HostArray::Dense(x.dense(op)?.to_c_order(cx.memory, op)?);
    }
    Ok(current)
}

fn check_bound(op: &str, dtype: DType, bound: Operand<'_>) -> Result<(), ArrayError> {
    if let Operand::Scalar(Scalar::Float(_)) = bound
        && matches!(dtype.kind(), Kind::Unsigned | Kind::Signed)
    {
        return Err(ArrayError::dtype(op, &[dtype, DType::F64], "a float bound for an integer array"));
    }
    Ok(())
}

/// The elements of an array of type `T` (bool as `u8`) in C order (tests, small arrays).
/// The copy is not charged to any limit.
pub fn to_vec<T: bytemuck::Pod>(x: &HostArray) -> Result<Vec<T>, ArrayError> {
    let uncharged = ArrayMemory::with_limit(usize::MAX);
    Ok(bytemuck::pod_collect_to_vec(&x.to_bytes(&uncharged, "to_bytes")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The operands' values at a flat index of the result.
    type Pair<'a> = dyn Fn(usize) -> (f64, f64) + 'a;

    fn f64_array(memory: &Arc<ArrayMemory>, shape: &[usize], seed: usize) -> (HostArray, Vec<f64>) {
        let n: usize = shape.iter().product();
        let values: Vec<f64> = (0..n).map(|i| ((i * 7919 + seed * 31) % 101) as f64 / 8.0 - 6.0).collect();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        (HostArray::from_bytes(memory, DType::F64, shape, &bytes).unwrap(), values)
    }

    /// Binary functions of same-shape C-order arrays, of an array and a scalar (either
    /// side), of an array and a one-element array, and of an array and a broadcast row
    /// (the general path), against a plain loop.
    #[test]
    fn binary_functions_of_flat_and_broadcast_operands_equal_a_plain_loop() {
        let memory = ArrayMemory::with_limit(1 << 24);
        let cx = Ctx { memory: &memory, stop: &|| None };
        let (rows, cols) = (37usize, 53usize);
        let (a, av) = f64_array(&memory, &[rows, cols], 1);
        let (b, bv) = f64_array(&memory, &[rows, cols], 2);
        let (one, onev) = f64_array(&memory, &[1], 3);
        let (row, rowv) = f64_array(&memory, &[1, cols], 4);
        let at = |v: &[f64], i: usize| v[i % v.len()];
        let row_at = |i: usize| rowv[i % cols];
        let cases: Vec<(Operand<'_>, Operand<'_>, Box<Pair<'_>>, &str)> = vec![
            (Operand::Array(&a), Operand::Array(&b), Box::new(|i| (av[i], bv[i])), "array - array"),
            (Operand::Array(&a), Operand::Scalar(Scalar::Float(2.5)), Box::new(|i| (av[i], 2.5)), "array - scalar"),
            (Operand::Scalar(Scalar::Float(2.5)), Operand::Array(&b), Box::new(|i| (2.5, bv[i])), "scalar - array"),
            (Operand::Array(&one), Operand::Array(&a), Box::new(|i| (at(&onev, i), av[i])), "one element - array"),
            (Operand::Array(&a), Operand::Array(&row), Box::new(|i| (av[i], row_at(i))), "array - row"),
        ];
        for (x, y, values, what) in cases {
            let got = to_vec::<f64>(&binary(&cx, BinaryOp::Subtract, x, y).unwrap()).unwrap();
            let want: Vec<f64> = (0..rows * cols).map(&values).map(|(p, q)| p - q).collect();
            assert_eq!(got, want, "{what}");
        }
    }
}
