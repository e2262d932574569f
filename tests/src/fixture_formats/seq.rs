//! NorPix `.seq` fixtures: the 1024-byte header and images at `true_image_size` steps
//! (pixels plus a timestamp footer).

use crate::fixtures::Data;
use std::path::Path;

/// Write `data` as a SEQ file of `bits` (8 or 16) per pixel, header version `version`
/// (images at 8192 from version 5, else 1024), with `footer` bytes after each image.
pub fn write_seq(path: &Path, data: &Data, bits: u32, version: i32, footer: usize) {
    let (h, w) = (data.sig[0], data.sig[1]);
    let image_bytes = w * h * bits as usize / 8;
    let true_size = image_bytes + footer;
    let mut b = vec![0u8; 1024];
    let put = |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    put(&mut b, 0, 0xFEED);
    for (i, c) in "Norpix seq".encode_utf16().enumerate() {
        b[4 + 2 * i..6 + 2 * i].copy_from_slice(&c.to_le_bytes());
    }
    put(&mut b, 28, version as u32);
    put(&mut b, 32, 1024);
    put(&mut b, 548, w as u32);
    put(&mut b, 552, h as u32);
    put(&mut b, 556, bits);
    put(&mut b, 560, bits);
    put(&mut b, 564, image_bytes as u32);
    put(&mut b, 568, 100);
    put(&mut b, 572, data.frames() as u32);
    put(&mut b, 580, true_size as u32);
    b[584..592].copy_from_slice(&400.0f64.to_le_bytes());
    let offset = if version >= 5 { 8192 } else { 1024 };
    b.resize(offset, 0);
    for i in 0..data.frames() {
        for &v in data.frame(i) {
            if bits == 8 {
                b.push(v as u8);
            } else {
                b.extend_from_slice(&(v as u16).to_le_bytes());
            }
        }
        b.extend((0..footer).map(|k| (k as u8) ^ 0x5A));
    }
    std::fs::write(path, b).expect("write seq fixture");
}
