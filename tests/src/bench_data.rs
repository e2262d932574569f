//! The benchmark datasets shared by `cargo bench --bench builtins` and `--bench
//! languages`: `$UDF_BENCH_DIR` (default `/tmp`) `udf-host-bench-float32.npy` (2 GiB) and
//! `udf-host-bench-uint16.npy` (1 GiB), 128 × 64 frames of 256 × 256 pseudo-random counts
//! 0..=1023, written once; and the mask stack of the masks cases.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use udf_host::array::NdArray;
use udf_host::udf::ParamValue;

/// Scan shape.
pub const NAV: [usize; 2] = [128, 64];
/// Frame shape.
pub const SIG: [usize; 2] = [256, 256];

/// The dtypes benchmarked: (name, NumPy descr, bytes per element).
pub const DTYPES: [(&str, &str, usize); 2] = [("float32", "<f4", 4), ("uint16", "<u2", 2)];

/// The dataset file of `dtype` (`float32` or `uint16`).
pub fn data_path(dtype: &str) -> PathBuf {
    let dir = std::env::var_os("UDF_BENCH_DIR").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    dir.join(format!("udf-host-bench-{dtype}.npy"))
}

fn header(descr: &str) -> Vec<u8> {
    let dict = format!(
        "{{'descr': '{descr}', 'fortran_order': False, 'shape': ({}, {}, {}, {}), }}",
        NAV[0], NAV[1], SIG[0], SIG[1]
    );
    let total = (10 + dict.len() + 1).div_ceil(64) * 64;
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&((total - 10) as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.resize(total - 1, b' ');
    out.push(b'\n');
    out
}

/// Write the dataset unless a file of the right size is there: pseudo-random counts
/// 0..=1023 (as uint16, or the same values as float32).
pub fn ensure_data(path: &Path, descr: &str, size: usize) -> u64 {
    let frames = NAV[0] * NAV[1];
    let frame_len = SIG[0] * SIG[1];
    let header = header(descr);
    let len = (header.len() + frames * frame_len * size) as u64;
    if std::fs::metadata(path).is_ok_and(|m| m.len() == len) {
        return len;
    }
    eprintln!("writing {} ({:.2} GiB)...", path.display(), len as f64 / (1u64 << 30) as f64);
    let mut file = std::io::BufWriter::with_capacity(1 << 24, std::fs::File::create(path).expect("create data"));
    file.write_all(&header).expect("write");
    let mut frame = vec![0u16; frame_len];
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..frames {
        for v in frame.iter_mut() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            *v = (state >> 54) as u16;
        }
        if size == 2 {
            file.write_all(bytemuck::cast_slice(&frame)).expect("write");
        } else {
            let values: Vec<f32> = frame.iter().map(|&v| f32::from(v)).collect();
            file.write_all(bytemuck::cast_slice(&values)).expect("write");
        }
    }
    file.flush().expect("flush");
    len
}

/// `count` masks of the frame: rings of random-ish weights.
pub fn masks(count: usize) -> ParamValue {
    let len = SIG[0] * SIG[1];
    let values: Vec<f32> = (0..count * len).map(|i| ((i * 7919) % 1000) as f32 / 1000.0).collect();
    let array = NdArray::from_vec(&[count, SIG[0], SIG[1]], values).expect("masks");
    ParamValue::Array(Arc::new(array))
}
