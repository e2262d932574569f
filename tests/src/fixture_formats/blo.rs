//! NanoMegas `.blo` fixtures: header, metadata text (bit depth), virtual bright field
//! block, patterns with 6-byte frame headers.

use crate::fixtures::Data;
use std::path::Path;

/// Write `data` (nav `[ny, nx]`, square frames) as a BLO file; `bits` 8 or 16 (16 is
/// announced in the metadata, which needs `MAGIC` 259).
pub fn write_blo(path: &Path, data: &Data, bits: u32) {
    let (ny, nx) = (data.nav[0], data.nav[1]);
    let dp = data.sig[0];
    assert_eq!(data.sig, vec![dp, dp]);
    let magic: u16 = if bits == 8 { 258 } else { 259 };
    let metadata = format!("Version: 1.0\r\nBlo Bit Depth: {bits} bits\r\nAcquisition: fixture\r\n");
    let offset_1 = 240 + if magic == 259 { metadata.len() + 16 } else { 0 };
    let vbf = nx * ny; // one byte per scan position
    let offset_2 = offset_1 + vbf;
    let mut b = vec![0u8; 240];
    b[..6].copy_from_slice(b"IMGBLO");
    b[6..8].copy_from_slice(&magic.to_le_bytes());
    b[8..12].copy_from_slice(&(offset_1 as u32).to_le_bytes());
    b[12..16].copy_from_slice(&(offset_2 as u32).to_le_bytes());
    b[20..22].copy_from_slice(&(dp as u16).to_le_bytes());
    b[22..24].copy_from_slice(&1234u16.to_le_bytes()); // DP rotation
    b[24..26].copy_from_slice(&(nx as u16).to_le_bytes());
    b[26..28].copy_from_slice(&(ny as u16).to_le_bytes());
    b[30..38].copy_from_slice(&1.5f64.to_le_bytes()); // SX
    b[46..50].copy_from_slice(&200_000u32.to_le_bytes()); // beam energy
    if magic == 259 {
        b.extend_from_slice(metadata.as_bytes());
        b.resize(offset_1, 0);
    }
    b.extend((0..vbf).map(|i| (i % 251) as u8));
    assert_eq!(b.len(), offset_2);
    for i in 0..data.frames() {
        b.extend_from_slice(&[0xAA, 0x55]);
        b.extend_from_slice(&(i as u32).to_le_bytes());
        for &v in data.frame(i) {
            if bits == 8 {
                b.push(v as u8);
            } else {
                b.extend_from_slice(&(v as u16).to_le_bytes());
            }
        }
    }
    std::fs::write(path, b).expect("write blo fixture");
}
