//! The element types a mask dot product is computed in, and the dot product itself.

use std::ops::{Add, AddAssign, Mul};
use udf_sdk::simd::PackedVectors;
use udf_sdk::{Complex32, Complex64, DType, Element};

/// An element of the result dtype `D` (float32, float64, complex64, complex128).
pub trait Value: Element + Add<Output = Self> + Mul<Output = Self> + AddAssign {
    /// A real mask value (imaginary part 0).
    fn from_f64(value: f64) -> Self;
    /// A complex mask value; only complex `D` accept one.
    fn from_complex(value: Complex64) -> Self;
    /// Whether the value is zero (dropped from sparse masks).
    fn is_zero(self) -> bool;
    /// The masks over one run of pixels, as the dense product of this dtype reads them.
    type Run;
    /// The `count` masks `b[j * stride ..][..len]` of one run, prepared once.
    fn run(b: &[Self], stride: usize, count: usize, len: usize) -> Self::Run;
}

impl Value for f32 {
    fn from_f64(value: f64) -> Self {
        value as f32
    }
    fn from_complex(value: Complex64) -> Self {
        value.re as f32
    }
    fn is_zero(self) -> bool {
        self == 0.0
    }
    /// Packed for the SDK's SIMD kernel.
    type Run = PackedVectors;
    fn run(b: &[Self], stride: usize, count: usize, len: usize) -> PackedVectors {
        PackedVectors::new(b, stride, count, len)
    }
}

impl Value for f64 {
    type Run = Rows<Self>;
    fn run(b: &[Self], stride: usize, count: usize, len: usize) -> Rows<Self> {
        Rows::new(b, stride, count, len)
    }
    fn from_f64(value: f64) -> Self {
        value
    }
    fn from_complex(value: Complex64) -> Self {
        value.re
    }
    fn is_zero(self) -> bool {
        self == 0.0
    }
}

impl Value for Complex32 {
    type Run = Rows<Self>;
    fn run(b: &[Self], stride: usize, count: usize, len: usize) -> Rows<Self> {
        Rows::new(b, stride, count, len)
    }
    fn from_f64(value: f64) -> Self {
        Complex32::new(value as f32, 0.0)
    }
    fn from_complex(value: Complex64) -> Self {
        Complex32::new(value.re as f32, value.im as f32)
    }
    fn is_zero(self) -> bool {
        self.re == 0.0 && self.im == 0.0
    }
}

impl Value for Complex64 {
    type Run = Rows<Self>;
    fn run(b: &[Self], stride: usize, count: usize, len: usize) -> Rows<Self> {
        Rows::new(b, stride, count, len)
    }
    fn from_f64(value: f64) -> Self {
        Complex64::new(value, 0.0)
    }
    fn from_complex(value: Complex64) -> Self {
        value
    }
    fn is_zero(self) -> bool {
        self.re == 0.0 && self.im == 0.0
    }
}

/// Conversion of an input element (the tile's dtype) to the result dtype `D`, and the
/// dense product of tiles of it with masks of `D`.
pub trait Widen<D: Value>: Element {
    fn widen(self) -> D;

    /// `out[i * m + j] += Σ_p a[i * a_stride + p] · mask_j[p]` for the `out.len() / m`
    /// rows of `a` (frames) and the `m` masks of one run of pixels.
    fn dot_products(a: &[Self], a_stride: usize, masks: &D::Run, out: &mut [D]);
}

/// The masks of one run of pixels, row `j` at `values[j * len..][..len]`.
pub struct Rows<D> {
    values: Vec<D>,
    count: usize,
    len: usize,
}

impl<D: Value> Rows<D> {
    fn new(b: &[D], stride: usize, count: usize, len: usize) -> Self {
        let values = (0..count).flat_map(|j| b[j * stride..][..len].iter().copied()).collect();
        Rows { values, count, len }
    }

    /// [`Widen::dot_products`] for tiles of `I`.
    fn dot_products<I: Widen<D>>(&self, a: &[I], a_stride: usize, out: &mut [D]) {
        let (count, len) = (self.count, self.len);
        for (i, acc) in out.chunks_exact_mut(count).enumerate() {
            let row = &a[i * a_stride..][..len];
            for (o, mask) in acc.iter_mut().zip(self.values.chunks_exact(len.max(1))) {
                *o += dot(row, mask);
            }
        }
    }
}

/// Float32, uint16 and uint8 tiles with float32 masks, the common cases: the SDK's
/// blocked kernel on the packed masks (converting integers as it reads them).
macro_rules! packed_kernel {
    ($($from:ty),*) => {$(
        impl Widen<f32> for $from {
            #[inline(always)]
            fn widen(self) -> f32 {
                f32::from(self)
            }

            fn dot_products(a: &[$from], a_stride: usize, masks: &PackedVectors, out: &mut [f32]) {
                masks.dot_products(a, a_stride, out);
            }
        }
    )*};
}

packed_kernel!(f32, u16, u8);

macro_rules! widen {
    ($($from:ty => $to:ty: |$x:ident| $e:expr),* $(,)?) => {$(
        impl Widen<$to> for $from {
            #[inline(always)]
            fn widen(self) -> $to {
                let $x = self;
                $e
            }

            fn dot_products(a: &[$from], a_stride: usize, masks: &Rows<$to>, out: &mut [$to]) {
                masks.dot_products(a, a_stride, out);
            }
        }
    )*};
}

widen! {
    f32 => f64: |x| f64::from(x),
    f32 => Complex32: |x| Complex32::new(x, 0.0),
    f32 => Complex64: |x| Complex64::new(f64::from(x), 0.0),
    f64 => f64: |x| x,
    f64 => Complex64: |x| Complex64::new(x, 0.0),
    Complex32 => Complex32: |x| x,
    Complex32 => Complex64: |x| Complex64::new(f64::from(x.re), f64::from(x.im)),
    Complex64 => Complex64: |x| x,
}

/// `Σ a[i] · b[i]` over two slices of equal length, with eight independent accumulators
/// so that the compiler can vectorise the loop (float addition is not associative, so a
/// single accumulator would force a sequential chain).
#[inline]
pub fn dot<I: Widen<D>, D: Value>(a: &[I], b: &[D]) -> D {
    let (a_chunks, a_rest) = a.as_chunks::<8>();
    let (b_chunks, b_rest) = b.as_chunks::<8>();
    let mut acc = [D::default(); 8];
    for (x, y) in a_chunks.iter().zip(b_chunks) {
        for lane in 0..8 {
            acc[lane] += x[lane].widen() * y[lane];
        }
    }
    let mut rest = D::default();
    for (&x, &y) in a_rest.iter().zip(b_rest) {
        rest += x.widen() * y;
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + rest
}

/// NumPy's `result_type(input, mask)` for a float or complex `input` and any `mask`
/// dtype: complex if either is, with the wider component; integers need float32 up to
/// 16 bits and float64 above, booleans nothing.
pub fn result_type(input: DType, mask: DType) -> DType {
    let component = |d: DType| match d {
        DType::Boolean => 0,
        DType::Uint8 | DType::Int8 | DType::Uint16 | DType::Int16 | DType::Float32 | DType::Complex64 => 4,
        _ => 8,
    };
    let complex = |d: DType| matches!(d, DType::Complex64 | DType::Complex128);
    let size = component(input).max(component(mask));
    match (complex(input) || complex(mask), size) {
        (false, 4) => DType::Float32,
        (false, _) => DType::Float64,
        (true, 4) => DType::Complex64,
        (true, _) => DType::Complex128,
    }
}

/// Whether `dtype` is float32/64 or complex64/128.
pub fn is_float(dtype: DType) -> bool {
    matches!(dtype, DType::Float32 | DType::Float64 | DType::Complex64 | DType::Complex128)
}

/// Whether `dtype` is complex.
pub fn is_complex(dtype: DType) -> bool {
    matches!(dtype, DType::Complex64 | DType::Complex128)
}
