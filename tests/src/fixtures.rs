//! Seeded test datasets and writers for them, independent of the host's own code.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::io::Write;
use std::path::Path;

/// Element types the fixtures can write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    U8,
    U16,
    U32,
    I16,
    I32,
    F32,
    F64,
}

impl Ty {
    pub fn size(self) -> usize {
        match self {
            Ty::U8 => 1,
            Ty::U16 | Ty::I16 => 2,
            Ty::U32 | Ty::I32 | Ty::F32 => 4,
            Ty::F64 => 8,
        }
    }

    /// NumPy's type code without byte order.
    pub fn code(self) -> &'static str {
        match self {
            Ty::U8 => "u1",
            Ty::U16 => "u2",
            Ty::U32 => "u4",
            Ty::I16 => "i2",
            Ty::I32 => "i4",
            Ty::F32 => "f4",
            Ty::F64 => "f8",
        }
    }

    /// The value as stored in this type (what a reader must return).
    pub fn round(self, v: f64) -> f64 {
        match self {
            Ty::U8 => f64::from(v as u8),
            Ty::U16 => f64::from(v as u16),
            Ty::U32 => f64::from(v as u32),
            Ty::I16 => f64::from(v as i16),
            Ty::I32 => f64::from(v as i32),
            Ty::F32 => f64::from(v as f32),
            Ty::F64 => v,
        }
    }

    /// `v` as stored in this type, little- or big-endian.
    pub fn to_bytes(self, v: f64, big: bool) -> Vec<u8> {
        self.bytes(v, big)
    }

    fn bytes(self, v: f64, big: bool) -> Vec<u8> {
        macro_rules! b {
            ($x:expr) => {
                if big { $x.to_be_bytes().to_vec() } else { $x.to_le_bytes().to_vec() }
            };
        }
        match self {
            Ty::U8 => vec![v as u8],
            Ty::U16 => b!(v as u16),
            Ty::U32 => b!(v as u32),
            Ty::I16 => b!(v as i16),
            Ty::I32 => b!(v as i32),
            Ty::F32 => b!(v as f32),
            Ty::F64 => b!(v),
        }
    }
}

/// A dataset in memory: values in C order over `nav + sig`.
#[derive(Debug, Clone)]
pub struct Data {
    pub nav: Vec<usize>,
    pub sig: Vec<usize>,
    pub values: Vec<f64>,
}

impl Data {
    pub fn frames(&self) -> usize {
        self.nav.iter().product()
    }

    pub fn frame_len(&self) -> usize {
        self.sig.iter().product()
    }

    /// Frame `i` as a slice.
    pub fn frame(&self, i: usize) -> &[f64] {
        let n = self.frame_len();
        &self.values[i * n..(i + 1) * n]
    }

    /// The values as stored in `ty`.
    pub fn rounded(&self, ty: Ty) -> Data {
        Data {
            nav: self.nav.clone(),
            sig: self.sig.clone(),
            values: self.values.iter().map(|&v| ty.round(v)).collect(),
        }
    }
}

/// LiberTEM's `_mk_random`: values 0 or 1, plus two planted outliers (1000 and 10000, so
/// they fit every fixture type) at random positions.
pub fn mk_random(nav: &[usize], sig: &[usize], seed: u64) -> Data {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n: usize = nav.iter().chain(sig).product();
    let mut values: Vec<f64> = (0..n).map(|_| f64::from(u8::from(rng.random_bool(0.5)))).collect();
    let a = rng.random_range(0..n);
    let b = rng.random_range(0..n);
    values[a] = 1000.0;
    values[b] = 10000.0;
    Data { nav: nav.to_vec(), sig: sig.to_vec(), values }
}

/// Uniform random floats in [0, 1): non-integer values without cancellation in sums.
pub fn mk_uniform(nav: &[usize], sig: &[usize], seed: u64) -> Data {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n: usize = nav.iter().chain(sig).product();
    Data { nav: nav.to_vec(), sig: sig.to_vec(), values: (0..n).map(|_| rng.random_range(0.0..1.0)).collect() }
}

/// Write `data` as a `.npy` file of `ty` (little-endian, version 1.0).
pub fn write_npy(path: &Path, data: &Data, ty: Ty) {
    let shape: Vec<usize> = data.nav.iter().chain(&data.sig).copied().collect();
    let order = if ty.size() == 1 { '|' } else { '<' };
    let mut out = npy_header(&format!("{order}{}", ty.code()), &shape);
    for &v in &data.values {
        out.extend(ty.bytes(v, false));
    }
    std::fs::write(path, out).expect("write npy fixture");
}

/// The header of a version 1.0 `.npy` file with dtype `descr` (e.g. `<f4`) and `shape`.
pub fn npy_header(descr: &str, shape: &[usize]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let shape = if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let total = (10 + dict.len() + 1).div_ceil(64) * 64;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&((total - 10) as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.resize(total - 1, b' ');
    out.push(b'\n');
    out
}

/// Write float32 values of shape `nav + sig` as a `.npy` file (fast path for big fixtures).
pub fn write_npy_f32(path: &Path, nav: &[usize], sig: &[usize], values: &[f32]) {
    let shape: Vec<usize> = nav.iter().chain(sig).copied().collect();
    assert_eq!(shape.iter().product::<usize>(), values.len(), "values for shape {shape:?}");
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).expect("create npy fixture"));
    file.write_all(&npy_header("<f4", &shape)).expect("write");
    for v in values {
        file.write_all(&v.to_le_bytes()).expect("write");
    }
    file.flush().expect("flush");
}

/// A complex dataset in memory: `(re, im)` pairs in C order over `nav + sig`.
#[derive(Debug, Clone)]
pub struct ComplexData {
    pub nav: Vec<usize>,
    pub sig: Vec<usize>,
    pub values: Vec<(f64, f64)>,
}

impl ComplexData {
    pub fn frames(&self) -> usize {
        self.nav.iter().product()
    }

    pub fn frame_len(&self) -> usize {
        self.sig.iter().product()
    }

    /// Frame `i` as a slice.
    pub fn frame(&self, i: usize) -> &[(f64, f64)] {
        let n = self.frame_len();
        &self.values[i * n..(i + 1) * n]
    }

    /// The values as stored in complex64 (both parts rounded to float32).
    pub fn rounded_c64(&self) -> ComplexData {
        let values = self.values.iter().map(|&(re, im)| (f64::from(re as f32), f64::from(im as f32))).collect();
        ComplexData { nav: self.nav.clone(), sig: self.sig.clone(), values }
    }
}

/// Complex values with real and imaginary parts uniform in [-1, 1), plus an offset of
/// `3 + 2i` (so means are far from zero).
pub fn mk_complex(nav: &[usize], sig: &[usize], seed: u64) -> ComplexData {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n: usize = nav.iter().chain(sig).product();
    let values = (0..n).map(|_| (3.0 + rng.random_range(-1.0..1.0), 2.0 + rng.random_range(-1.0..1.0))).collect();
    ComplexData { nav: nav.to_vec(), sig: sig.to_vec(), values }
}

/// Write `data` as a `.npy` file of complex64 (`double == false`) or complex128.
pub fn write_npy_complex(path: &Path, data: &ComplexData, double: bool) {
    let shape: Vec<usize> = data.nav.iter().chain(&data.sig).copied().collect();
    let mut out = npy_header(if double { "<c16" } else { "<c8" }, &shape);
    for &(re, im) in &data.values {
        if double {
            out.extend_from_slice(&re.to_le_bytes());
            out.extend_from_slice(&im.to_le_bytes());
        } else {
            out.extend_from_slice(&(re as f32).to_le_bytes());
            out.extend_from_slice(&(im as f32).to_le_bytes());
        }
    }
    std::fs::write(path, out).expect("write npy fixture");
}

/// A seeded random ROI over `len` positions, each selected with probability `p`.
pub fn random_roi(len: usize, p: f64, seed: u64) -> Vec<bool> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..len).map(|_| rng.random_bool(p)).collect()
}

/// Write `data` as raw binary of `ty`, after `offset` bytes of 0xAB.
pub fn write_raw(path: &Path, data: &Data, ty: Ty, big_endian: bool, offset: usize) {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).expect("create raw fixture"));
    file.write_all(&vec![0xAB; offset]).expect("write");
    for &v in &data.values {
        file.write_all(&ty.bytes(v, big_endian)).expect("write");
    }
    file.flush().expect("flush");
}

/// A complex dataset: real and imaginary parts with the same shapes.
#[derive(Debug, Clone)]
pub struct ComplexParts {
    pub re: Data,
    pub im: Data,
}

/// Complex values from LiberTEM's small complex set (`{0, 1, 1j, 1+1j}`-like parts from
/// `mk_random`), with independent seeds for the two parts.
pub fn mk_complex_parts(nav: &[usize], sig: &[usize], seed: u64) -> ComplexParts {
    ComplexParts { re: mk_random(nav, sig, seed), im: mk_random(nav, sig, seed.wrapping_add(1_000_003)) }
}

/// Write `data` as a little-endian complex64 `.npy` (`<c8`, pairs of float32).
pub fn write_npy_complex64(path: &Path, data: &ComplexParts) {
    let re = &data.re;
    let shape: Vec<String> = re.nav.iter().chain(&re.sig).map(usize::to_string).collect();
    let shape = if shape.len() == 1 { format!("({},)", shape[0]) } else { format!("({})", shape.join(", ")) };
    let dict = format!("{{'descr': '<c8', 'fortran_order': False, 'shape': {shape}, }}");
    let total = (10 + dict.len() + 1).div_ceil(64) * 64;
    let mut out = Vec::new();
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&((total - 10) as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.resize(total - 1, b' ');
    out.push(b'\n');
    for (&r, &i) in re.values.iter().zip(&data.im.values) {
        out.extend_from_slice(&(r as f32).to_le_bytes());
        out.extend_from_slice(&(i as f32).to_le_bytes());
    }
    std::fs::write(path, out).expect("write complex npy fixture");
}
