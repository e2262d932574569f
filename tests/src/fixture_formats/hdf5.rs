//! HDF5 fixtures: small files written once by h5py/libhdf5 and hdf5plugin
//! (`tests/data/hdf5/generate.py`, committed with the files), and the formula their
//! values come from, computed here independently of both the generator and the reader.

use std::path::{Path, PathBuf};

/// The directory of the committed `.h5` fixtures.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/hdf5")
}

/// A fixture file by name (`chunked.h5`, ...).
pub fn file(name: &str) -> PathBuf {
    dir().join(name)
}

/// Element kinds of the fixtures, with the NumPy code the generator used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    U(u32),
    I(u32),
    F(u32),
    /// complex64.
    C,
}

impl Kind {
    /// From a NumPy code without byte order (`u2`, `f8`, `c8`).
    pub fn from_code(code: &str) -> Kind {
        let (k, n) = code.split_at(1);
        let bytes: u32 = n.parse().expect("size");
        match k {
            "u" => Kind::U(bytes),
            "i" => Kind::I(bytes),
            "f" => Kind::F(bytes),
            "c" => Kind::C,
            _ => panic!("kind {code}"),
        }
    }
}

/// The generator's hash of flat index `i`: 0..=65535.
fn hash(i: u64, seed: u64) -> i64 {
    ((i.wrapping_mul(2_654_435_761).wrapping_add(seed * 40503) % (1u64 << 32)) >> 16) as i64
}

/// `value(shape, seed, dtype)` of generate.py at flat index `i`, as stored (real part
/// for complex; see [`imag`]).
pub fn value(i: u64, seed: u64, kind: Kind) -> f64 {
    let h = hash(i, seed);
    match kind {
        Kind::U(bytes) => {
            let max = if bytes == 1 { 255 } else { 60000 };
            (h % (max + 1)) as f64
        }
        Kind::I(1) => ((h % 256) - 128) as f64,
        Kind::I(_) => (h - 32768) as f64,
        Kind::F(4) | Kind::C => f64::from(((h - 30000) as f64 / 8.0) as f32),
        Kind::F(_) => (h - 30000) as f64 / 8.0,
    }
}

/// The imaginary part of a complex fixture value.
pub fn imag(i: u64, seed: u64) -> f64 {
    f64::from(((hash(i, seed) % 977) as f64 / 4.0) as f32)
}

/// All `n` values of a fixture dataset.
pub fn values(n: usize, seed: u64, kind: Kind) -> Vec<f64> {
    (0..n as u64).map(|i| value(i, seed, kind)).collect()
}
