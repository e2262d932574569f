//! MRC2014 fixtures: header (little- or big-endian), extended header, image stack.

use crate::fixtures::{Data, Ty};
use std::path::Path;

/// Write `data` (frames of `[ny, nx]`) as an MRC stack of `ty` (I16 → mode 1, F32 → 2,
/// U16 → 6), with `extended` bytes of extended header, in big-endian if `big`.
pub fn write_mrc(path: &Path, data: &Data, ty: Ty, extended: usize, big: bool) {
    let (ny, nx) = (data.sig[0], data.sig[1]);
    let mode: i32 = match ty {
        Ty::I16 => 1,
        Ty::F32 => 2,
        Ty::U16 => 6,
        other => panic!("no MRC mode for {other:?}"),
    };
    let word = |v: i32| if big { v.to_be_bytes() } else { v.to_le_bytes() };
    let float = |v: f32| if big { v.to_be_bytes() } else { v.to_le_bytes() };
    let mut b = vec![0u8; 1024];
    for (i, v) in
        [nx as i32, ny as i32, data.frames() as i32, mode, 0, 0, 0, nx as i32, ny as i32, 1].iter().enumerate()
    {
        b[4 * i..4 * i + 4].copy_from_slice(&word(*v));
    }
    for i in 10..13 {
        b[4 * i..4 * i + 4].copy_from_slice(&float(1.0));
    }
    b[92..96].copy_from_slice(&word(extended as i32));
    b[104..108].copy_from_slice(b"FEI1");
    b[108..112].copy_from_slice(&word(20140));
    b[208..212].copy_from_slice(b"MAP ");
    b[212..214].copy_from_slice(if big { &[0x11, 0x11] } else { &[0x44, 0x44] });
    b.extend((0..extended).map(|i| (i % 256) as u8));
    for &v in &data.values {
        match ty {
            Ty::I16 => b.extend_from_slice(&(if big { (v as i16).to_be_bytes() } else { (v as i16).to_le_bytes() })),
            Ty::U16 => b.extend_from_slice(&(if big { (v as u16).to_be_bytes() } else { (v as u16).to_le_bytes() })),
            _ => b.extend_from_slice(&float(v as f32)),
        }
    }
    std::fs::write(path, b).expect("write mrc fixture");
}
