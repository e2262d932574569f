//! Element types, NumPy's type promotion, and the conversion kernels that fill tiles.
//!
//! [`DType`] is the element type of an array in memory (always native byte order);
//! [`StoredDType`] adds the byte order of data on disk. [`result_type`] is NumPy's
//! `np.result_type` restricted to the dtypes of the contract. [`converter`] resolves,
//! once per tile, the monomorphised loop that turns stored elements into the input dtype
//! — the one copy the data path makes.

pub use num_complex::{Complex32, Complex64};
use serde::{Deserialize, Serialize};
use std::fmt;

#[cfg(target_endian = "big")]
compile_error!("udf-host assumes a little-endian machine (the canonical ABI and .npy files are little-endian)");

/// Element type of an array in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum DType {
    Bool,
    U8,
    U16,
    U32,
    U64,
    I8,
    I16,
    I32,
    I64,
    F32,
    F64,
    /// Two `f32`: real, imaginary.
    C64,
    /// Two `f64`: real, imaginary.
    C128,
}

/// NumPy's kind character of a dtype (`b`, `u`, `i`, `f`, `c`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Bool,
    Unsigned,
    Signed,
    Float,
    Complex,
}

impl DType {
    /// Every dtype, in the order of the WIT enum.
    pub const ALL: [DType; 13] = [
        DType::Bool,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F32,
        DType::F64,
        DType::C64,
        DType::C128,
    ];

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::U16 | DType::I16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 | DType::C64 => 8,
            DType::C128 => 16,
        }
    }

    /// NumPy's name: `bool`, `uint16`, `float32`, `complex64`, ...
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::C64 => "complex64",
            DType::C128 => "complex128",
        }
    }

    /// The kind (NumPy's `dtype.kind`).
    pub fn kind(self) -> Kind {
        match self {
            DType::Bool => Kind::Bool,
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => Kind::Unsigned,
            DType::I8 | DType::I16 | DType::I32 | DType::I64 => Kind::Signed,
            DType::F32 | DType::F64 => Kind::Float,
            DType::C64 | DType::C128 => Kind::Complex,
        }
    }

    /// Parse a NumPy name (`float32`, `uint16`, `bool`, ...), a NumPy type code (`u2`,
    /// `f4`, `c8`, `i8`) or a short form (`f32`, `u16`, `c64`).
    ///
    /// NumPy's type codes win where a text is both: `u8` and `i8` are 64-bit (as
    /// `np.dtype('u8')`), not the 8-bit short forms; write `uint8` or `u1` for those.
    pub fn parse(name: &str) -> Option<DType> {
        let lower = name.trim().to_ascii_lowercase();
        from_type_code(&lower).or_else(|| DType::ALL.into_iter().find(|d| d.name() == lower || d.short_name() == lower))
    }

    fn short_name(self) -> &'static str {
        match self {
            DType::Bool => "b1",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::C64 => "c64",
            DType::C128 => "c128",
        }
    }

    /// The value NaN-like results are filled with outside the ROI, as bytes: NaN for
    /// float and complex, 0 / false otherwise (LiberTEM's `.data`).
    pub fn fill_outside_roi(self) -> Vec<u8> {
        match self {
            DType::F32 => f32::NAN.to_le_bytes().to_vec(),
            DType::F64 => f64::NAN.to_le_bytes().to_vec(),
            DType::C64 => [f32::NAN.to_le_bytes(), f32::NAN.to_le_bytes()].concat(),
            DType::C128 => [f64::NAN.to_le_bytes(), f64::NAN.to_le_bytes()].concat(),
            other => vec![0; other.size()],
        }
    }
}

impl TryFrom<String> for DType {
    type Error = String;

    /// Exactly a NumPy name (`float32`, `uint16`, ...), as [`DType::name`] writes it.
    fn try_from(name: String) -> Result<Self, String> {
        DType::ALL.into_iter().find(|d| d.name() == name).ok_or_else(|| format!("'{name}' is not a dtype name"))
    }
}

impl From<DType> for &'static str {
    fn from(d: DType) -> Self {
        d.name()
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Byte order of stored data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    Little,
    Big,
}

/// The element type of data on disk: a dtype and its byte order. Serialised as its
/// NumPy `descr` (`<u2`, `>f4`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct StoredDType {
    pub dtype: DType,
    pub order: ByteOrder,
}

impl StoredDType {
    /// Little-endian `dtype`.
    pub fn le(dtype: DType) -> Self {
        StoredDType { dtype, order: ByteOrder::Little }
    }

    /// Whether reading needs more than a byte copy to produce `dtype`.
    pub fn needs_conversion_to(self, dtype: DType) -> bool {
        self.dtype != dtype || (self.order == ByteOrder::Big && self.dtype.size() > 1)
    }

    /// Parse `float32`, `>u2`, `<f4`, `uint16be`, `>uint16`, `u16le`...
    ///
    /// A leading `>`/`<`/`=`/`|` or a trailing `be`/`le` gives the byte order (default
    /// little-endian); the rest is a NumPy type code (`u2`, `f4`, `c8`, `u8` = uint64),
    /// a NumPy name or a short name, as [`DType::parse`].
    pub fn parse(text: &str) -> Option<Self> {
        // NumPy's codes are case-sensitive: `<U8`, `S10`, `V4`, `M8`, `O` are strings,
        // voids, datetimes and objects, not numbers.
        let code = text.trim().trim_start_matches(['<', '>', '=', '|']);
        if code.starts_with(['U', 'S', 'V', 'M', 'O']) && code[1..].chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let mut s = text.trim().to_ascii_lowercase();
        let mut order = ByteOrder::Little;
        if let Some(rest) = s.strip_prefix('>') {
            order = ByteOrder::Big;
            s = rest.to_owned();
        } else if let Some(rest) = s.strip_prefix(['<', '=', '|']) {
            s = rest.to_owned();
        } else if let Some(rest) = s.strip_suffix("be") {
            order = ByteOrder::Big;
            s = rest.trim_end_matches(['-', '_']).to_owned();
        } else if let Some(rest) = s.strip_suffix("le") {
            s = rest.trim_end_matches(['-', '_']).to_owned();
        }
        let dtype = DType::parse(&s)?;
        Some(StoredDType { dtype, order })
    }

    /// Parse a NumPy `descr` exactly as `.npy` headers write it: a byte-order character
    /// and a type code (`<f4`, `>u2`, `|b1`). Case matters: `<U8` is a string type.
    pub fn from_descr(descr: &str) -> Option<Self> {
        let (order, code) = match descr.split_at_checked(1)? {
            (">", code) => (ByteOrder::Big, code),
            ("<" | "|" | "=", code) => (ByteOrder::Little, code),
            _ => return None,
        };
        from_type_code(code).map(|dtype| StoredDType { dtype, order })
    }

    /// The NumPy `descr` string, e.g. `<f4`, `>u2`, `|u1`.
    pub fn descr(self) -> String {
        let code = type_code(self.dtype);
        let order = if self.dtype.size() == 1 {
            '|'
        } else if self.order == ByteOrder::Big {
            '>'
        } else {
            '<'
        };
        format!("{order}{code}")
    }
}

impl From<StoredDType> for String {
    fn from(d: StoredDType) -> Self {
        d.descr()
    }
}

impl TryFrom<String> for StoredDType {
    type Error = String;

    fn try_from(descr: String) -> Result<Self, String> {
        StoredDType::from_descr(&descr).ok_or_else(|| format!("'{descr}' is not a NumPy dtype descr"))
    }
}

impl fmt::Display for StoredDType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.order {
            ByteOrder::Big if self.dtype.size() > 1 => write!(f, "{} (big-endian)", self.dtype),
            _ => write!(f, "{}", self.dtype),
        }
    }
}

fn type_code(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "b1",
        DType::U8 => "u1",
        DType::U16 => "u2",
        DType::U32 => "u4",
        DType::U64 => "u8",
        DType::I8 => "i1",
        DType::I16 => "i2",
        DType::I32 => "i4",
        DType::I64 => "i8",
        DType::F32 => "f4",
        DType::F64 => "f8",
        DType::C64 => "c8",
        DType::C128 => "c16",
    }
}

fn from_type_code(code: &str) -> Option<DType> {
    DType::ALL.into_iter().find(|&d| type_code(d) == code)
}

/// NumPy's `np.result_type(a, b)` for the dtypes of the contract.
///
/// `bool` is neutral; integers of mixed signedness go to the next wider signed type
/// (`uint64` with any signed integer to `float64`); integers up to 16 bits fit `float32`,
/// wider ones need `float64`; complex is a pair of floats of the wider precision.
pub fn result_type(a: DType, b: DType) -> DType {
    use Kind::*;
    if a == b {
        return a;
    }
    match (a.kind(), b.kind()) {
        (Bool, _) => b,
        (_, Bool) => a,
        (Unsigned | Signed, Unsigned | Signed) => promote_integers(a, b),
        (Unsigned | Signed, Float | Complex) => with_min_float_size(b, int_float_size(a)),
        (Float | Complex, Unsigned | Signed) => with_min_float_size(a, int_float_size(b)),
        (Float | Complex, Float | Complex) => {
            let size = component_size(a).max(component_size(b));
            float_like(a.kind() == Complex || b.kind() == Complex, size)
        }
    }
}

fn promote_integers(a: DType, b: DType) -> DType {
    let (ka, kb) = (a.kind(), b.kind());
    if ka == kb {
        return if a.size() >= b.size() { a } else { b };
    }
    let (unsigned, signed) = if ka == Kind::Unsigned { (a, b) } else { (b, a) };
    if signed.size() > unsigned.size() {
        return signed;
    }
    match unsigned.size() {
        1 => DType::I16,
        2 => DType::I32,
        4 => DType::I64,
        _ => DType::F64,
    }
}

/// Bytes of float needed to hold an integer dtype exactly enough (NumPy's rule).
fn int_float_size(int: DType) -> usize {
    if int.size() <= 2 { 4 } else { 8 }
}

fn component_size(d: DType) -> usize {
    if d.kind() == Kind::Complex { d.size() / 2 } else { d.size() }
}

fn with_min_float_size(d: DType, min: usize) -> DType {
    float_like(d.kind() == Kind::Complex, component_size(d).max(min))
}

fn float_like(complex: bool, component: usize) -> DType {
    match (complex, component) {
        (false, 4) => DType::F32,
        (false, _) => DType::F64,
        (true, 4) => DType::C64,
        (true, _) => DType::C128,
    }
}

/// A Rust type that is the in-memory element of a [`DType`] (every dtype but `bool`,
/// whose elements are handled as `u8` 0/1).
pub trait Element: bytemuck::Pod + Send + Sync + fmt::Debug {
    /// The dtype of this element type.
    const DTYPE: DType;

    /// `self + other` as NumPy adds: wrapping for integers.
    fn numpy_add(self, other: Self) -> Self;
}

macro_rules! elements {
    ($($t:ty => $d:ident, $add:ident);* $(;)?) => {$(
        impl Element for $t {
            const DTYPE: DType = DType::$d;

            #[inline(always)]
            fn numpy_add(self, other: Self) -> Self {
                elements!(@add $add, self, other)
            }
        }
    )*};
    (@add wrapping, $a:expr, $b:expr) => { $a.wrapping_add($b) };
    (@add plus, $a:expr, $b:expr) => { $a + $b };
}

elements! {
    u8 => U8, wrapping; u16 => U16, wrapping; u32 => U32, wrapping; u64 => U64, wrapping;
    i8 => I8, wrapping; i16 => I16, wrapping; i32 => I32, wrapping; i64 => I64, wrapping;
    f32 => F32, plus; f64 => F64, plus; Complex32 => C64, plus; Complex64 => C128, plus;
}

/// Run `$body` with the type alias `$T` set to the element type of a run-time dtype:
/// the one dispatch from [`DType`] to monomorphised code. The family:
///
/// | macro | dtypes |
/// |---|---|
/// | [`with_dtype!`](crate::with_dtype) | every dtype but `bool` (which takes `$otherwise`) |
/// | [`with_inexact!`](crate::with_inexact) | `float32`, `float64`, `complex64`, `complex128` |
/// | [`with_real!`](crate::with_real) | `float32`, `float64` |
/// | [`with_fused_stored!`](crate::with_fused_stored) | the stored integers of [`crate::udf::FUSED_STORED`] |
/// | [`with_converting!`](crate::with_converting) | a real accumulator `$T` and a stored integer `$S` together |
///
/// ```
/// use udf_host::dtype::{DType, Element};
/// let size = udf_host::with_dtype!(DType::C64, T => std::mem::size_of::<T>(), 1);
/// assert_eq!(size, 8);
/// let name = udf_host::with_real!(DType::U16, T => T::DTYPE.name(), "not a real float");
/// assert_eq!(name, "not a real float");
/// ```
#[macro_export]
#[doc(hidden)]
macro_rules! dtype_dispatch {
    ($dtype:expr, $T:ident => $body:expr, $otherwise:expr; $($d:ident => $t:ty),*) => {{
        #[allow(unreachable_patterns)]
        match $dtype {
            $($crate::dtype::DType::$d => {
                type $T = $t;
                $body
            })*
            _ => $otherwise,
        }
    }};
}

/// [`dtype_dispatch!`](crate::dtype_dispatch) over every dtype but `bool`.
#[macro_export]
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr, $otherwise:expr) => {
        $crate::dtype_dispatch!($dtype, $T => $body, $otherwise;
            U8 => u8, U16 => u16, U32 => u32, U64 => u64, I8 => i8, I16 => i16, I32 => i32, I64 => i64,
            F32 => f32, F64 => f64, C64 => $crate::dtype::Complex32, C128 => $crate::dtype::Complex64)
    };
}

/// [`dtype_dispatch!`](crate::dtype_dispatch) over the float and complex dtypes (NumPy's "inexact").
#[macro_export]
macro_rules! with_inexact {
    ($dtype:expr, $T:ident => $body:expr, $otherwise:expr) => {
        $crate::dtype_dispatch!($dtype, $T => $body, $otherwise;
            F32 => f32, F64 => f64, C64 => $crate::dtype::Complex32, C128 => $crate::dtype::Complex64)
    };
}

/// [`dtype_dispatch!`](crate::dtype_dispatch) over the real floats.
#[macro_export]
macro_rules! with_real {
    ($dtype:expr, $T:ident => $body:expr, $otherwise:expr) => {
        $crate::dtype_dispatch!($dtype, $T => $body, $otherwise; F32 => f32, F64 => f64)
    };
}

/// [`dtype_dispatch!`](crate::dtype_dispatch) over the stored integer dtypes a UDF that converts on read must
/// accept ([`crate::udf::FUSED_STORED`]).
#[macro_export]
macro_rules! with_fused_stored {
    ($dtype:expr, $S:ident => $body:expr, $otherwise:expr) => {
        $crate::dtype_dispatch!($dtype, $S => $body, $otherwise;
            U8 => u8, U16 => u16, U32 => u32, I8 => i8, I16 => i16, I32 => i32)
    };
}

/// The dispatch of a built-in that converts on read: `$T` the real accumulator dtype
/// ([`with_real!`](crate::with_real)), `$S` the tile's stored integer dtype ([`with_fused_stored!`](crate::with_fused_stored)).
#[macro_export]
macro_rules! with_converting {
    ($acc:expr, $stored:expr, $T:ident, $S:ident => $body:expr, $otherwise:expr) => {
        $crate::with_real!($acc, $T => $crate::with_fused_stored!($stored, $S => $body, $otherwise), $otherwise)
    };
}

/// Value conversion with NumPy's `astype` semantics (`as` casts; real to complex with a
/// zero imaginary part; complex to real keeps the real part).
pub trait CastFrom<S> {
    fn cast_from(s: S) -> Self;
}

macro_rules! real_casts {
    ($($s:ty),*) => {
        $(real_casts!(@to $s; u8, u16, u32, u64, i8, i16, i32, i64, f32, f64);)*
    };
    (@to $s:ty; $($d:ty),*) => {$(
        impl CastFrom<$s> for $d {
            #[inline(always)]
            fn cast_from(s: $s) -> Self {
                s as $d
            }
        }
    )*
        impl CastFrom<$s> for Complex32 {
            #[inline(always)]
            fn cast_from(s: $s) -> Self {
                Complex32::new(s as f32, 0.0)
            }
        }
        impl CastFrom<$s> for Complex64 {
            #[inline(always)]
            fn cast_from(s: $s) -> Self {
                Complex64::new(s as f64, 0.0)
            }
        }
    };
}

real_casts!(u8, u16, u32, u64, i8, i16, i32, i64, f32, f64);

macro_rules! complex_casts {
    ($($s:ty => $f:ty),*) => {$(
        impl CastFrom<$s> for Complex32 {
            #[inline(always)]
            fn cast_from(s: $s) -> Self {
                Complex32::new(s.re as f32, s.im as f32)
            }
        }
        impl CastFrom<$s> for Complex64 {
            #[inline(always)]
            fn cast_from(s: $s) -> Self {
                Complex64::new(s.re as f64, s.im as f64)
            }
        }
        complex_casts!(@real $s; u8, u16, u32, u64, i8, i16, i32, i64, f32, f64);
    )*};
    (@real $s:ty; $($d:ty),*) => {$(
        impl CastFrom<$s> for $d {
            #[inline(always)]
            fn cast_from(s: $s) -> Self {
                s.re as $d
            }
        }
    )*};
}

complex_casts!(Complex32 => f32, Complex64 => f64);

/// Reverse the byte order of an element (each component for complex numbers).
pub trait SwapBytes: Copy {
    fn swap_bytes(self) -> Self;
}

macro_rules! swap_ints {
    ($($t:ty),*) => {$(
        impl SwapBytes for $t {
            #[inline(always)]
            fn swap_bytes(self) -> Self {
                <$t>::swap_bytes(self)
            }
        }
    )*};
}

swap_ints!(u8, u16, u32, u64, i8, i16, i32, i64);

impl SwapBytes for f32 {
    #[inline(always)]
    fn swap_bytes(self) -> Self {
        f32::from_bits(self.to_bits().swap_bytes())
    }
}

impl SwapBytes for f64 {
    #[inline(always)]
    fn swap_bytes(self) -> Self {
        f64::from_bits(self.to_bits().swap_bytes())
    }
}

impl SwapBytes for Complex32 {
    #[inline(always)]
    fn swap_bytes(self) -> Self {
        Complex32::new(self.re.swap_bytes(), self.im.swap_bytes())
    }
}

impl SwapBytes for Complex64 {
    #[inline(always)]
    fn swap_bytes(self) -> Self {
        Complex64::new(self.re.swap_bytes(), self.im.swap_bytes())
    }
}

/// A conversion kernel: reads `dst.len() / dst_size` stored elements from `src` and
/// writes them, converted, to `dst` (both byte slices; `dst` aligned for its dtype).
pub type ConvertFn = fn(src: &[u8], dst: &mut [u8]);

/// The kernel turning `from` into `to`, resolved once per tile so the inner loop is
/// monomorphic. Plain copies (same dtype, little-endian) are `copy_from_slice`.
pub fn converter(from: StoredDType, to: DType) -> ConvertFn {
    if !from.needs_conversion_to(to) {
        return |src, dst| dst.copy_from_slice(src);
    }
    let big = from.order == ByteOrder::Big;
    // `bool` is stored as bytes 0/1: converted like `u8`, in both directions.
    macro_rules! to_dest {
        ($S:ty) => {
            match big {
                false => crate::with_dtype!(to, D => convert::<$S, D, false> as ConvertFn, convert::<$S, u8, false>),
                true => crate::with_dtype!(to, D => convert::<$S, D, true> as ConvertFn, convert::<$S, u8, true>),
            }
        };
    }
    crate::with_dtype!(from.dtype, S => to_dest!(S), to_dest!(u8))
}

/// The conversion loop, with AVX2 where the CPU has it (the same code, vectorised 8
/// lanes wide instead of the baseline's 4: uint16 → float32 is the conversion every
/// wasm plugin reading detector data pays).
fn convert<S, D, const BIG: bool>(src: &[u8], dst: &mut [u8])
where
    S: bytemuck::Pod + SwapBytes,
    D: bytemuck::Pod + CastFrom<S>,
{
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { convert_avx2::<S, D, BIG>(src, dst) };
    }
    convert_portable::<S, D, BIG>(src, dst);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn convert_avx2<S, D, const BIG: bool>(src: &[u8], dst: &mut [u8])
where
    S: bytemuck::Pod + SwapBytes,
    D: bytemuck::Pod + CastFrom<S>,
{
    convert_portable::<S, D, BIG>(src, dst);
}

#[inline(always)]
fn convert_portable<S, D, const BIG: bool>(src: &[u8], dst: &mut [u8])
where
    S: bytemuck::Pod + SwapBytes,
    D: bytemuck::Pod + CastFrom<S>,
{
    let dst: &mut [D] = bytemuck::cast_slice_mut(dst);
    let load = |s: S| if BIG { s.swap_bytes() } else { s };
    match bytemuck::try_cast_slice::<u8, S>(src) {
        Ok(src) => {
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = D::cast_from(load(s));
            }
        }
        // The file offset may leave elements unaligned in the mapping.
        Err(_) => {
            for (d, s) in dst.iter_mut().zip(src.chunks_exact(size_of::<S>())) {
                *d = D::cast_from(load(bytemuck::pod_read_unaligned(s)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_type_matches_numpy_table() {
        // Pairs from NumPy's promotion table (np.result_type), incl. LiberTEM's dtype tests.
        let cases = [
            (DType::F32, DType::U16, DType::F32),
            (DType::F32, DType::U8, DType::F32),
            (DType::F32, DType::I16, DType::F32),
            (DType::F32, DType::I32, DType::F64),
            (DType::F32, DType::U32, DType::F64),
            (DType::F32, DType::I64, DType::F64),
            (DType::F32, DType::F64, DType::F64),
            (DType::F32, DType::C64, DType::C64),
            (DType::F32, DType::C128, DType::C128),
            (DType::F32, DType::Bool, DType::F32),
            (DType::Bool, DType::U16, DType::U16),
            (DType::I16, DType::U16, DType::I32),
            (DType::I8, DType::U8, DType::I16),
            (DType::I32, DType::U32, DType::I64),
            (DType::I64, DType::U64, DType::F64),
            (DType::I32, DType::U16, DType::I32),
            (DType::C64, DType::F64, DType::C128),
            (DType::C64, DType::I32, DType::C128),
            (DType::C64, DType::U16, DType::C64),
            (DType::U8, DType::U32, DType::U32),
        ];
        for (a, b, expected) in cases {
            assert_eq!(result_type(a, b), expected, "result_type({a}, {b})");
            assert_eq!(result_type(b, a), expected, "result_type({b}, {a})");
        }
    }

    #[test]
    fn parses_numpy_descr_and_names() {
        assert_eq!(StoredDType::parse(">u2"), Some(StoredDType { dtype: DType::U16, order: ByteOrder::Big }));
        assert_eq!(StoredDType::parse("<f4"), Some(StoredDType::le(DType::F32)));
        assert_eq!(StoredDType::parse("uint16be"), Some(StoredDType { dtype: DType::U16, order: ByteOrder::Big }));
        assert_eq!(StoredDType::parse("float32"), Some(StoredDType::le(DType::F32)));
        assert_eq!(StoredDType::parse("|b1"), Some(StoredDType::le(DType::Bool)));
        assert_eq!(StoredDType::parse("c16"), Some(StoredDType::le(DType::C128)));
        assert_eq!(StoredDType::parse("float33"), None);
        // NumPy's codes win over the short forms: `u8`/`i8` are 64-bit, with or without
        // a byte-order character (issue 22, item 1).
        for (text, dtype, order) in [
            ("<i8", DType::I64, ByteOrder::Little),
            ("i8", DType::I64, ByteOrder::Little),
            (">u8", DType::U64, ByteOrder::Big),
            ("u8", DType::U64, ByteOrder::Little),
            ("u1", DType::U8, ByteOrder::Little),
            ("uint8", DType::U8, ByteOrder::Little),
            ("u16", DType::U16, ByteOrder::Little),
            ("c16", DType::C128, ByteOrder::Little),
        ] {
            assert_eq!(StoredDType::parse(text), Some(StoredDType { dtype, order }), "{text}");
        }
        assert_eq!(DType::parse("i8"), Some(DType::I64));
        assert_eq!(StoredDType::parse("<U8"), None);
        assert_eq!(StoredDType::parse("S8"), None);
        assert_eq!(DType::parse("int8"), Some(DType::I8));
        assert_eq!(StoredDType { dtype: DType::U16, order: ByteOrder::Big }.descr(), ">u2");
        assert_eq!(StoredDType::le(DType::U8).descr(), "|u1");
        assert_eq!(StoredDType::from_descr("<U8"), None);
        assert_eq!(StoredDType::from_descr(">c8"), Some(StoredDType { dtype: DType::C64, order: ByteOrder::Big }));
    }

    #[test]
    fn converts_big_endian_and_unaligned() {
        let values: [u16; 3] = [1, 258, 65535];
        let mut stored = vec![0u8]; // one byte of padding: elements are unaligned
        for v in values {
            stored.extend_from_slice(&v.to_be_bytes());
        }
        let kernel = converter(StoredDType { dtype: DType::U16, order: ByteOrder::Big }, DType::F32);
        let mut out = [0f32; 3];
        kernel(&stored[1..], bytemuck::cast_slice_mut(&mut out));
        assert_eq!(out, [1.0, 258.0, 65535.0]);
    }

    #[test]
    fn converts_real_to_complex() {
        let src: [f32; 2] = [1.5, -2.0];
        let mut out = [Complex64::new(9.0, 9.0); 2];
        converter(StoredDType::le(DType::F32), DType::C128)(
            bytemuck::cast_slice(&src),
            bytemuck::cast_slice_mut(&mut out),
        );
        assert_eq!(out, [Complex64::new(1.5, 0.0), Complex64::new(-2.0, 0.0)]);
    }
}
