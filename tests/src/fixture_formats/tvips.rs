//! TVIPS fixtures: a series of `<name>_NNN.tvips` files, the 256-byte series header in
//! the first, version-2 image headers with counters and scan positions.

use crate::fixtures::Data;
use std::path::{Path, PathBuf};

/// How to write a series.
#[derive(Debug, Clone, Copy)]
pub struct TvipsSeries {
    /// 8 or 16 bits per pixel.
    pub bits: u32,
    /// 1 (12-byte image headers) or 2.
    pub version: i32,
    /// Image header bytes (version 2).
    pub image_header_bytes: usize,
    /// Frames per file (the last file takes the rest).
    pub frames_per_file: usize,
    /// Frames recorded before the scan starts (their scan position is (0, 0)).
    pub lead_in: usize,
    /// Scan width, for the scan positions in the image headers.
    pub scan_width: usize,
}

/// Write `data` as a series `<dir>/<name>_000.tvips`, ...; frame `i` gets the scan
/// position of scan index `i - lead_in` (`(0, 0)` before). Returns the paths.
pub fn write_tvips(dir: &Path, name: &str, data: &Data, s: TvipsSeries) -> Vec<PathBuf> {
    let (h, w) = (data.sig[0], data.sig[1]);
    let mut series = vec![0u8; 256];
    let fields: [i32; 13] =
        [256, s.version, w as i32, h as i32, s.bits as i32, 0, 0, 1, 1, 5, 300, 100_000, s.image_header_bytes as i32];
    for (i, v) in fields.iter().enumerate() {
        series[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
    }
    let header_bytes = if s.version == 1 { 12 } else { s.image_header_bytes };
    let n = data.frames();
    let mut paths = Vec::new();
    let mut i = 0;
    let mut k = 0;
    while i < n {
        let end = (i + s.frames_per_file).min(n);
        let mut b = if k == 0 { series.clone() } else { Vec::new() };
        for f in i..end {
            let mut head = vec![0u8; header_bytes];
            head[..4.min(header_bytes)].copy_from_slice(&(f as u32 + 100).to_le_bytes()[..4.min(header_bytes)]);
            if header_bytes >= 76 {
                let (y, x) = if f < s.lead_in {
                    (0, 0)
                } else {
                    ((f - s.lead_in) / s.scan_width, (f - s.lead_in) % s.scan_width)
                };
                head[68..72].copy_from_slice(&(x as f32).to_le_bytes());
                head[72..76].copy_from_slice(&(y as f32).to_le_bytes());
            }
            b.extend(head);
            for &v in data.frame(f) {
                if s.bits == 8 {
                    b.push(v as u8);
                } else {
                    b.extend_from_slice(&(v as u16).to_le_bytes());
                }
            }
        }
        let path = dir.join(format!("{name}_{k:03}.tvips"));
        std::fs::write(&path, b).expect("write tvips fixture");
        paths.push(path);
        i = end;
        k += 1;
    }
    paths
}
