//! What the kernels need of an element type, with NumPy's arithmetic: integers wrap,
//! integer division by zero gives 0, floats follow IEEE 754, `floor_divide` and
//! `remainder` take the sign of the divisor, `maximum`/`minimum` propagate NaN.

use crate::dtype::{CastFrom, Complex32, Complex64, Element};

/// Element types every element can be cast to (`astype`).
pub trait CastAll:
    CastFrom<u8>
    + CastFrom<u16>
    + CastFrom<u32>
    + CastFrom<u64>
    + CastFrom<i8>
    + CastFrom<i16>
    + CastFrom<i32>
    + CastFrom<i64>
    + CastFrom<f32>
    + CastFrom<f64>
    + CastFrom<Complex32>
    + CastFrom<Complex64>
{
}

impl<T> CastAll for T where
    T: CastFrom<u8>
        + CastFrom<u16>
        + CastFrom<u32>
        + CastFrom<u64>
        + CastFrom<i8>
        + CastFrom<i16>
        + CastFrom<i32>
        + CastFrom<i64>
        + CastFrom<f32>
        + CastFrom<f64>
        + CastFrom<Complex32>
        + CastFrom<Complex64>
{
}

/// A value cast to any element type (`astype` semantics), for generic kernels.
pub trait CastTo: Copy {
    fn cast_to<D: CastAll>(self) -> D;
}

macro_rules! cast_to {
    ($($t:ty),*) => {$(
        impl CastTo for $t {
            #[inline(always)]
            fn cast_to<D: CastAll>(self) -> D {
                D::cast_from(self)
            }
        }
    )*};
}
cast_to!(u8, u16, u32, u64, i8, i16, i32, i64, f32, f64, Complex32, Complex64);

/// Every numeric element type (integers, floats, complex).
pub trait Elem: Element + Default + PartialEq + CastAll + CastTo {
    /// Whether the value is non-zero (`bool(x)`).
    fn truthy(self) -> bool;
    fn add(self, other: Self) -> Self;
    fn sub(self, other: Self) -> Self;
    fn mul(self, other: Self) -> Self;
    fn neg(self) -> Self;
    fn is_nan(self) -> bool;
    fn is_inf(self) -> bool;
    /// The real part as `f64` (sums of squares, means of integers).
    fn re_f64(self) -> f64;
    /// `|x|²` as `f64`.
    fn abs2_f64(self) -> f64;
}

/// Integers and real floats: ordered.
pub trait RealElem: Elem + PartialOrd {
    fn floor_div(self, other: Self) -> Self;
    fn rem(self, other: Self) -> Self;
    /// NumPy's `maximum`: NaN if either is NaN.
    fn maximum(self, other: Self) -> Self {
        if self.is_nan() || other.is_nan() {
            return if self.is_nan() { self } else { other };
        }
        if other > self { other } else { self }
    }
    /// NumPy's `minimum`: NaN if either is NaN.
    fn minimum(self, other: Self) -> Self {
        if self.is_nan() || other.is_nan() {
            return if self.is_nan() { self } else { other };
        }
        if other < self { other } else { self }
    }
    fn abs(self) -> Self;
    fn sign(self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    fn trunc(self) -> Self;
    /// Half to even, as NumPy rounds.
    fn round(self) -> Self;
}

/// Integers.
pub trait IntElem: RealElem {
    fn bit_and(self, other: Self) -> Self;
    fn bit_or(self, other: Self) -> Self;
    fn bit_xor(self, other: Self) -> Self;
    fn bit_not(self) -> Self;
    /// `self << other`; 0 when shifted by the width or more, or by a negative count.
    fn shl(self, other: Self) -> Self;
    /// `self >> other` (arithmetic for signed types); saturating at the width.
    fn shr(self, other: Self) -> Self;
    /// `self ** other`, wrapping; `None` for a negative exponent (NumPy raises).
    fn pow(self, other: Self) -> Option<Self>;
}

macro_rules! int_elems {
    ($($t:ty, $signed:expr);*) => {$(
        impl Elem for $t {
            #[inline(always)] fn truthy(self) -> bool { self != 0 }
            #[inline(always)] fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)] fn sub(self, o: Self) -> Self { self.wrapping_sub(o) }
            #[inline(always)] fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            #[inline(always)] fn neg(self) -> Self { (0 as $t).wrapping_sub(self) }
            #[inline(always)] fn is_nan(self) -> bool { false }
            #[inline(always)] fn is_inf(self) -> bool { false }
            #[inline(always)] fn re_f64(self) -> f64 { self as f64 }
            #[inline(always)] fn abs2_f64(self) -> f64 { (self as f64) * (self as f64) }
        }
        impl RealElem for $t {
            #[inline(always)]
            fn floor_div(self, o: Self) -> Self {
                if o == 0 { return 0; }
                let q = self.wrapping_div(o);
                // `wrapping_rem`: `MIN % -1` overflows (NumPy: `MIN // -1` wraps to MIN).
                if $signed && (self.wrapping_rem(o) != 0) && ((self < (0 as $t)) != (o < (0 as $t))) { q.wrapping_sub(1) } else { q }
            }
            #[inline(always)]
            fn rem(self, o: Self) -> Self {
                if o == 0 { return 0; }
                let r = self.wrapping_rem(o);
                if $signed && r != 0 && ((r < (0 as $t)) != (o < (0 as $t))) { r.wrapping_add(o) } else { r }
            }
            #[inline(always)] fn abs(self) -> Self { if self < (0 as $t) { self.neg() } else { self } }
            #[inline(always)] fn sign(self) -> Self { if self > 0 { 1 } else if self == 0 { 0 } else { (0 as $t).wrapping_sub(1) } }
            #[inline(always)] fn floor(self) -> Self { self }
            #[inline(always)] fn ceil(self) -> Self { self }
            #[inline(always)] fn trunc(self) -> Self { self }
            #[inline(always)] fn round(self) -> Self { self }
        }
        impl IntElem for $t {
            #[inline(always)] fn bit_and(self, o: Self) -> Self { self & o }
            #[inline(always)] fn bit_or(self, o: Self) -> Self { self | o }
            #[inline(always)] fn bit_xor(self, o: Self) -> Self { self ^ o }
            #[inline(always)] fn bit_not(self) -> Self { !self }
            #[inline(always)]
            fn shl(self, o: Self) -> Self {
                if o < (0 as $t) || (o as u64) >= <$t>::BITS as u64 { 0 } else { self << (o as u32) }
            }
            #[inline(always)]
            fn shr(self, o: Self) -> Self {
                if o < (0 as $t) || (o as u64) >= <$t>::BITS as u64 {
                    if self < (0 as $t) { (0 as $t).wrapping_sub(1) } else { 0 }
                } else {
                    self >> (o as u32)
                }
            }
            #[inline(always)]
            fn pow(self, o: Self) -> Option<Self> {
                if o < (0 as $t) { return None; }
                let mut exp = o as u64;
                let mut base = self;
                let mut acc: $t = 1;
                while exp > 0 {
                    if exp & 1 == 1 { acc = acc.wrapping_mul(base); }
                    base = base.wrapping_mul(base);
                    exp >>= 1;
                }
                Some(acc)
            }
        }
    )*};
}

#[allow(unused_comparisons)]
mod ints {
    use super::*;
    int_elems!(u8, false; u16, false; u32, false; u64, false; i8, true; i16, true; i32, true; i64, true);
}

macro_rules! float_elems {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            #[inline(always)] fn truthy(self) -> bool { self != 0.0 }
            #[inline(always)] fn add(self, o: Self) -> Self { self + o }
            #[inline(always)] fn sub(self, o: Self) -> Self { self - o }
            #[inline(always)] fn mul(self, o: Self) -> Self { self * o }
            #[inline(always)] fn neg(self) -> Self { -self }
            #[inline(always)] fn is_nan(self) -> bool { <$t>::is_nan(self) }
            #[inline(always)] fn is_inf(self) -> bool { <$t>::is_infinite(self) }
            #[inline(always)] fn re_f64(self) -> f64 { self as f64 }
            #[inline(always)] fn abs2_f64(self) -> f64 { (self as f64) * (self as f64) }
        }
        impl RealElem for $t {
            /// NumPy's `npy_divmod`.
            #[inline(always)]
            fn floor_div(self, o: Self) -> Self {
                if o == 0.0 { return self / o; }
                let m = self % o;
                let mut div = (self - m) / o;
                if m != 0.0 && ((o < 0.0) != (m < 0.0)) { div -= 1.0; }
                if div != 0.0 {
                    let f = div.floor();
                    if div - f > 0.5 { f + 1.0 } else { f }
                } else {
                    (0.0 as $t).copysign(self / o)
                }
            }
            #[inline(always)]
            fn rem(self, o: Self) -> Self {
                if o == 0.0 { return <$t>::NAN; }
                let m = self % o;
                if m != 0.0 { if (o < 0.0) != (m < 0.0) { m + o } else { m } } else { (0.0 as $t).copysign(o) }
            }
            #[inline(always)] fn abs(self) -> Self { <$t>::abs(self) }
            #[inline(always)]
            fn sign(self) -> Self { if self.is_nan() { self } else if self > 0.0 { 1.0 } else if self < 0.0 { -1.0 } else { 0.0 } }
            #[inline(always)] fn floor(self) -> Self { <$t>::floor(self) }
            #[inline(always)] fn ceil(self) -> Self { <$t>::ceil(self) }
            #[inline(always)] fn trunc(self) -> Self { <$t>::trunc(self) }
            #[inline(always)] fn round(self) -> Self { <$t>::round_ties_even(self) }
        }
    )*};
}

float_elems!(f32, f64);

macro_rules! complex_elems {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            #[inline(always)] fn truthy(self) -> bool { self.re != 0.0 || self.im != 0.0 }
            #[inline(always)] fn add(self, o: Self) -> Self { self + o }
            #[inline(always)] fn sub(self, o: Self) -> Self { self - o }
            #[inline(always)] fn mul(self, o: Self) -> Self { self * o }
            #[inline(always)] fn neg(self) -> Self { -self }
            #[inline(always)] fn is_nan(self) -> bool { self.re.is_nan() || self.im.is_nan() }
            #[inline(always)] fn is_inf(self) -> bool { self.re.is_infinite() || self.im.is_infinite() }
            #[inline(always)] fn re_f64(self) -> f64 { self.re as f64 }
            #[inline(always)] fn abs2_f64(self) -> f64 { (self.re as f64).powi(2) + (self.im as f64).powi(2) }
        }
    )*};
}

complex_elems!(Complex32, Complex64);

/// Run `$body` with `$T` the element type of an integer dtype, else `$otherwise`.
#[macro_export]
#[doc(hidden)]
macro_rules! with_int {
    ($dtype:expr, $T:ident => $body:expr, $otherwise:expr) => {
        $crate::dtype_dispatch!($dtype, $T => $body, $otherwise;
            U8 => u8, U16 => u16, U32 => u32, U64 => u64, I8 => i8, I16 => i16, I32 => i32, I64 => i64)
    };
}

/// Run `$body` with `$T` the element type of an integer or real float dtype.
#[macro_export]
#[doc(hidden)]
macro_rules! with_real_numeric {
    ($dtype:expr, $T:ident => $body:expr, $otherwise:expr) => {
        $crate::dtype_dispatch!($dtype, $T => $body, $otherwise;
            U8 => u8, U16 => u16, U32 => u32, U64 => u64, I8 => i8, I16 => i16, I32 => i32, I64 => i64,
            F32 => f32, F64 => f64)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_division_follows_python() {
        // Python: -7 // 2 == -4, -7 % 2 == 1, 7 % -2 == -1.
        assert_eq!((-7i32).floor_div(2), -4);
        assert_eq!((-7i32).rem(2), 1);
        assert_eq!(7i32.rem(-2), -1);
        assert_eq!(5u8.floor_div(0), 0);
        // Python: -7.0 // 2.0 == -4.0, -7.0 % 2.0 == 1.0, 7.0 % -2.0 == -1.0.
        assert_eq!((-7.0f64).floor_div(2.0), -4.0);
        assert_eq!((-7.0f64).rem(2.0), 1.0);
        assert_eq!(7.0f64.rem(-2.0), -1.0);
        assert_eq!(RealElem::round(2.5f32), 2.0);
        assert_eq!(IntElem::pow(3i8, 5), Some(-13), "243 wraps to -13 in int8");
        assert!(RealElem::maximum(f32::NAN, 1.0).is_nan());
    }

    /// Found reading the arrays for the `host_arrays` fuzz target: `MIN // -1` took
    /// `MIN % -1`, which overflows (a panic in Rust). NumPy:
    /// `np.array([-128], np.int8) // np.int8(-1)` wraps to -128; `% -1` is 0.
    #[test]
    fn the_smallest_integer_divided_by_minus_one_wraps() {
        assert_eq!(i8::MIN.floor_div(-1), i8::MIN);
        assert_eq!(i64::MIN.floor_div(-1), i64::MIN);
        assert_eq!(i64::MIN.rem(-1), 0);
    }
}
