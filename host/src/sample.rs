//! Generated sample datasets: a synthetic 4D-STEM scan for demos and benchmarks, and
//! LiberTEM's test pattern (mostly 0/1 with planted outliers) for tests.

use crate::dtype::{ByteOrder, CastFrom, DType, StoredDType};
use crate::npy;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::io::{BufWriter, Write};
use std::path::Path;

/// What the frames look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// A bright disk whose position shifts across the scan, on a noisy background: sums,
    /// virtual detectors and centre of mass all show structure.
    Disk,
    /// Values 0 or 1, with two outliers planted (the sum of the dataset size and ten
    /// times that), as LiberTEM's `_mk_random`, so errors don't average out.
    Random,
}

impl Pattern {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "disk" => Some(Pattern::Disk),
            "random" => Some(Pattern::Random),
            _ => None,
        }
    }
}

/// The frames of a sample dataset, as `f64` values, in C order; `frame` is called once
/// per frame with the frame's flat nav index.
pub struct Generator {
    pattern: Pattern,
    nav: Vec<usize>,
    sig: Vec<usize>,
    rng: ChaCha8Rng,
    outliers: [(usize, f64); 2],
}

impl Generator {
    pub fn new(pattern: Pattern, nav: &[usize], sig: &[usize], seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let total = nav.iter().chain(sig).product::<usize>().max(1);
        let outliers = [(rng.random_range(0..total), total as f64), (rng.random_range(0..total), 10.0 * total as f64)];
        Generator { pattern, nav: nav.to_vec(), sig: sig.to_vec(), rng, outliers }
    }

    /// Fill `out` with frame `index`.
    pub fn frame(&mut self, index: usize, out: &mut [f64]) {
        match self.pattern {
            Pattern::Random => {
                for v in out.iter_mut() {
                    *v = f64::from(u8::from(self.rng.random_bool(0.5)));
                }
                let sig_len = out.len();
                for (position, value) in self.outliers {
                    if position / sig_len.max(1) == index {
                        out[position % sig_len] = value;
                    }
                }
            }
            Pattern::Disk => self.disk_frame(index, out),
        }
    }

    fn disk_frame(&mut self, index: usize, out: &mut [f64]) {
        let (sy, sx) = match self.sig.as_slice() {
            [.., y, x] => (*y as f64, *x as f64),
            [x] => (1.0, *x as f64),
            [] => (1.0, 1.0),
        };
        let nav_len = self.nav.iter().product::<usize>().max(1) as f64;
        let (ny, nx) = match self.nav.as_slice() {
            [.., y, x] => (*y as f64, *x as f64),
            _ => (1.0, nav_len),
        };
        let (iy, ix) = ((index as f64 / nx).floor(), index as f64 % nx);
        // The disk moves by up to 10% of the frame across the scan.
        let cy = sy / 2.0 + 0.1 * sy * (iy / ny.max(1.0) - 0.5);
        let cx = sx / 2.0 + 0.1 * sx * (ix / nx.max(1.0) - 0.5);
        let radius = sy.min(sx) / 6.0;
        let width = self.sig.last().copied().unwrap_or(1).max(1);
        for (i, v) in out.iter_mut().enumerate() {
            let (y, x) = ((i / width) as f64, (i % width) as f64);
            let d2 = (y - cy).powi(2) + (x - cx).powi(2);
            let signal: f64 = if d2 <= radius * radius { 100.0 } else { 2.0 };
            *v = (signal + self.rng.random_range(0.0..signal.sqrt())).floor();
        }
    }
}

/// What sample dataset to write.
#[derive(Debug, Clone)]
pub struct SampleSpec {
    pub pattern: Pattern,
    pub nav: Vec<usize>,
    pub sig: Vec<usize>,
    pub dtype: DType,
    /// Byte order (raw files only; `.npy` is little-endian).
    pub order: ByteOrder,
    /// `.npy` with a header, or raw binary.
    pub npy: bool,
    pub seed: u64,
}

/// Write a sample dataset.
///
/// # Errors
/// I/O errors.
pub fn write(path: &Path, spec: &SampleSpec) -> std::io::Result<()> {
    let SampleSpec { pattern, ref nav, ref sig, dtype, order, npy: npy_format, seed } = *spec;
    let mut out = BufWriter::new(std::fs::File::create(path)?);
    if npy_format {
        let mut shape = nav.to_vec();
        shape.extend_from_slice(sig);
        out.write_all(&npy::header_bytes(StoredDType { dtype, order }, &shape))?;
    }
    let mut generator = Generator::new(pattern, nav, sig, seed);
    let sig_len = sig.iter().product::<usize>();
    let mut frame = vec![0.0; sig_len];
    let mut bytes = Vec::with_capacity(sig_len * dtype.size());
    for index in 0..nav.iter().product::<usize>() {
        generator.frame(index, &mut frame);
        bytes.clear();
        for &v in &frame {
            encode(v, dtype, order == ByteOrder::Big, &mut bytes);
        }
        out.write_all(&bytes)?;
    }
    out.flush()
}

/// Append `value` as `dtype` (NumPy `astype` semantics: saturating float to int casts).
pub fn encode(value: f64, dtype: DType, big: bool, out: &mut Vec<u8>) {
    use crate::dtype::SwapBytes;
    crate::with_dtype!(dtype, T => {
        let v = T::cast_from(value);
        out.extend_from_slice(bytemuck::bytes_of(&if big { v.swap_bytes() } else { v }));
    }, out.push(u8::from(value != 0.0)))
}
