//! Plain, obviously-correct references (BUILTINS.md definitions) and comparisons.

use crate::fixtures::Data;
use udf_host::array::NdArray;
use udf_host::dtype::DType;

/// `intensity[y, x] = Σ_n F_n[y, x]` (SumUDF), over the frames `selected` (all if `None`).
pub fn sum_frames(data: &Data, selected: Option<&[bool]>) -> Vec<f64> {
    let mut out = vec![0.0; data.frame_len()];
    for i in 0..data.frames() {
        if selected.is_some_and(|s| !s[i]) {
            continue;
        }
        for (o, v) in out.iter_mut().zip(data.frame(i)) {
            *o += v;
        }
    }
    out
}

/// `intensity[n] = Σ_{y,x} F_n[y, x]` (SumSigUDF), one per frame.
pub fn sum_sig(data: &Data) -> Vec<f64> {
    (0..data.frames()).map(|i| data.frame(i).iter().sum()).collect()
}

/// The elements of a real array as `f64`.
pub fn to_f64(array: &NdArray) -> Vec<f64> {
    let b = array.bytes();
    macro_rules! conv {
        ($t:ty) => {
            bytemuck::cast_slice::<u8, $t>(b).iter().map(|&x| x as f64).collect()
        };
    }
    match array.dtype() {
        DType::Bool | DType::U8 => b.iter().map(|&x| f64::from(x)).collect(),
        DType::U16 => conv!(u16),
        DType::U32 => conv!(u32),
        DType::U64 => conv!(u64),
        DType::I8 => conv!(i8),
        DType::I16 => conv!(i16),
        DType::I32 => conv!(i32),
        DType::I64 => conv!(i64),
        DType::F32 => conv!(f32),
        DType::F64 => conv!(f64),
        DType::C64 | DType::C128 => panic!("complex array; use to_complex"),
    }
}

/// The elements of a complex array as `(re, im)` pairs of `f64`.
pub fn to_complex(array: &NdArray) -> Vec<(f64, f64)> {
    let b = array.bytes();
    match array.dtype() {
        DType::C64 => {
            bytemuck::cast_slice::<u8, f32>(b).chunks_exact(2).map(|c| (f64::from(c[0]), f64::from(c[1]))).collect()
        }
        DType::C128 => bytemuck::cast_slice::<u8, f64>(b).chunks_exact(2).map(|c| (c[0], c[1])).collect(),
        other => panic!("{other} array is not complex; use to_f64"),
    }
}

/// Assert `actual` equals `expected` within `rtol` (NumPy `allclose`, atol 1e-8);
/// NaN equals NaN.
#[track_caller]
pub fn assert_close(actual: &[f64], expected: &[f64], rtol: f64, what: &str) {
    assert_eq!(actual.len(), expected.len(), "{what}: length");
    for (i, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        let ok = (a.is_nan() && e.is_nan()) || (a - e).abs() <= 1e-8 + rtol * e.abs();
        assert!(ok, "{what}: element {i}: got {a}, expected {e} (rtol {rtol})");
    }
}
