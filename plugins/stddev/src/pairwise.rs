//! The arithmetic of the one-pass variance: per-tile moments and the pairwise merge of
//! Chan, Golub & LeVeque / Schubert & Gertz (2018), generic over the element types.
//!
//! A running state per pixel is `(n, S, V)`: frame count, sum and sum of squared
//! deviations from the mean (`varsum`). Two states combine as
//!
//! ```text
//! n     = n0 + n1
//! mean0 = S0 / n0;  mean1 = S1 / n1
//! delta = mean1 - mean0
//! mean  = mean0 + n1 * delta / n
//! S     = S0 + S1
//! V     = V0 + V1 + n1 * |delta| * |mean1 - mean|      (= V0 + V1 + n0*n1/n * |delta|^2)
//! ```
//!
//! with the two empty cases `n0 == 0 → (n1, S1, V1)` and `n1 == 0 → (n0, S0, V0)`.
//! Unlike `Σx² − (Σx)²/n` this never subtracts two large, nearly equal numbers, so it
//! stays accurate in float32 over millions of frames.

use std::ops::{Add, AddAssign, Div, Mul, Sub};
use udf_sdk::{Complex32, Complex64, Element};

/// A real floating-point element: the dtype of `varsum`, `var`, `std`.
pub trait Real:
    Element + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Div<Output = Self> + AddAssign
{
    /// A frame count as this type.
    fn from_count(n: u64) -> Self;
    /// Widen to `f64` (exact).
    fn to_f64(self) -> f64;
    /// Round from `f64` (NumPy's `astype`).
    fn from_f64(value: f64) -> Self;
    /// Square root.
    fn sqrt(self) -> Self;
    /// Convert to another real type (exact when widening, rounded when narrowing).
    fn cast<R: Real>(self) -> R {
        R::from_f64(self.to_f64())
    }
}

impl Real for f32 {
    fn from_count(n: u64) -> Self {
        n as f32
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn from_f64(value: f64) -> Self {
        value as f32
    }
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
}

impl Real for f64 {
    fn from_count(n: u64) -> Self {
        n as f64
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(value: f64) -> Self {
        value
    }
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
}

/// A sum element (dtype of `sum` and `mean`): real or complex.
pub trait Acc: Element + Add<Output = Self> + Sub<Output = Self> + AddAssign {
    /// The real type of the same precision (for `|x|`).
    type Real: Real;
    /// `self * r`.
    fn mul_real(self, r: Self::Real) -> Self;
    /// `self / r`.
    fn div_real(self, r: Self::Real) -> Self;
    /// `|self|`.
    fn norm(self) -> Self::Real;
    /// `|self|²`.
    fn norm_sqr(self) -> Self::Real;
}

macro_rules! real_acc {
    ($($t:ty),*) => {$(
        impl Acc for $t {
            type Real = $t;
            fn mul_real(self, r: $t) -> Self {
                self * r
            }
            fn div_real(self, r: $t) -> Self {
                self / r
            }
            fn norm(self) -> $t {
                self.abs()
            }
            fn norm_sqr(self) -> $t {
                self * self
            }
        }
    )*};
}

real_acc!(f32, f64);

macro_rules! complex_acc {
    ($($t:ty => $r:ty),*) => {$(
        impl Acc for $t {
            type Real = $r;
            fn mul_real(self, r: $r) -> Self {
                self * r
            }
            fn div_real(self, r: $r) -> Self {
                self / r
            }
            fn norm(self) -> $r {
                // hypot, like NumPy's abs of a complex number
                <$t>::norm(self)
            }
            fn norm_sqr(self) -> $r {
                <$t>::norm_sqr(&self)
            }
        }
    )*};
}

complex_acc!(Complex32 => f32, Complex64 => f64);

/// Conversion of an input element to the sum type (`result_type(input, base)`).
pub trait Widen<S>: Element {
    fn widen(self) -> S;
}

impl Widen<f32> for f32 {
    fn widen(self) -> f32 {
        self
    }
}
impl Widen<f64> for f32 {
    fn widen(self) -> f64 {
        f64::from(self)
    }
}
impl Widen<f64> for f64 {
    fn widen(self) -> f64 {
        self
    }
}
impl Widen<Complex32> for Complex32 {
    fn widen(self) -> Complex32 {
        self
    }
}
impl Widen<Complex64> for Complex32 {
    fn widen(self) -> Complex64 {
        Complex64::new(f64::from(self.re), f64::from(self.im))
    }
}
impl Widen<Complex64> for Complex64 {
    fn widen(self) -> Complex64 {
        self
    }
}

/// Per-pixel scratch space for one tile, reused from tile to tile.
pub struct Moments<S: Acc> {
    /// `S1[p] = Σ_f x[f, p]`.
    pub sum: Vec<S>,
    /// `S1[p] / n1`.
    mean: Vec<S>,
    /// `V1[p] = Σ_f |x[f, p] − mean[p]|²`.
    pub varsum: Vec<S::Real>,
}

impl<S: Acc> Default for Moments<S> {
    fn default() -> Self {
        Moments { sum: Vec::new(), mean: Vec::new(), varsum: Vec::new() }
    }
}

impl<S: Acc> Moments<S> {
    /// Compute the sum and varsum of every pixel over the frames of a tile.
    /// `data` is `[frames, px]` in C order; `px > 0`.
    pub fn compute<I: Widen<S>>(&mut self, data: &[I], px: usize) {
        let frames = data.len() / px;
        self.sum.clear();
        self.sum.resize(px, S::default());
        for frame in data.chunks_exact(px) {
            for (acc, &x) in self.sum.iter_mut().zip(frame) {
                *acc += x.widen();
            }
        }
        let n = S::Real::from_count(frames as u64);
        self.mean.clear();
        self.mean.extend(self.sum.iter().map(|&s| s.div_real(n)));
        self.varsum.clear();
        self.varsum.resize(px, S::Real::default());
        for frame in data.chunks_exact(px) {
            for ((acc, &m), &x) in self.varsum.iter_mut().zip(&self.mean).zip(frame) {
                *acc += (x.widen() - m).norm_sqr();
            }
        }
    }
}

/// Combine the states `(n0, s0, v0)` and `(n1, s1, v1)` of one pixel (module docs).
pub fn combine<S: Acc>(n0: u64, s0: S, v0: S::Real, n1: u64, s1: S, v1: S::Real) -> (S, S::Real) {
    if n0 == 0 {
        return (s1, v1);
    }
    if n1 == 0 {
        return (s0, v0);
    }
    let n0r = S::Real::from_count(n0);
    let n1r = S::Real::from_count(n1);
    let n = S::Real::from_count(n0 + n1);
    let mean0 = s0.div_real(n0r);
    let mean1 = s1.div_real(n1r);
    let delta = mean1 - mean0;
    let mean = mean0 + delta.mul_real(n1r).div_real(n);
    (s0 + s1, v0 + v1 + n1r * delta.norm() * (mean1 - mean).norm())
}
