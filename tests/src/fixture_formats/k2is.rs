//! K2IS fixtures: eight sector files of 12-bit packed blocks and a `.gtg` file, written
//! independently of the reader, with the ways real captures start and end out of step.

use crate::fixture_formats::dm::{self, Tag};
use std::io::Write;
use std::path::{Path, PathBuf};

pub const BLOCK_SIZE: usize = 0x5758;
pub const FRAME_H: usize = 1860;
pub const FRAME_W: usize = 2048;

/// What to write.
#[derive(Debug, Clone)]
pub struct K2Options {
    /// Whole frames written (frame ids 1000, 1001, ...).
    pub frames: usize,
    /// Leading frames with the shutter-active flag clear.
    pub inactive: usize,
    /// Per sector: blocks of an earlier, incomplete frame before the first whole frame.
    pub skew: [usize; 8],
    /// Blocks of an incomplete frame after the last whole one (all sectors).
    pub trailing: usize,
    /// Scan shape written to the `.gtg` file (`None`: a time series without one).
    pub scan: Option<(usize, usize)>,
    pub seed: u64,
}

/// The 12-bit value of pixel (y, x) of written frame `frame`.
pub fn pixel(frame: usize, y: usize, x: usize, seed: u64) -> u16 {
    let i = ((frame * FRAME_H + y) * FRAME_W + x) as u64;
    ((i.wrapping_mul(2_654_435_761).wrapping_add(seed * 97) >> 7) % 4096) as u16
}

/// Sector file `s` (0-based) is `<prefix>_<s+1>.bin`.
pub fn sector_path(dir: &Path, prefix: &str, s: usize) -> PathBuf {
    dir.join(format!("{prefix}_{}.bin", s + 1))
}

/// Write one block: header then 930 x 16 pixels of the frame at sector `s`, block `idx`.
fn block(out: &mut Vec<u8>, s: usize, idx: usize, frame: isize, flags: u8, seed: u64) {
    let count = (5000 + (frame + 1) * 32 + idx as isize) as u32;
    let frame_id = (1000 + frame) as u32;
    let (y0, x0) = (930 * (idx / 16), 16 * (15 - idx % 16));
    let mut h = [0u8; 40];
    h[..4].copy_from_slice(&0xFFFF_0055u32.to_be_bytes());
    h[8] = 1;
    h[9] = flags;
    h[16..20].copy_from_slice(&count.to_be_bytes());
    h[20..22].copy_from_slice(&256u16.to_be_bytes());
    h[22..24].copy_from_slice(&1860u16.to_be_bytes());
    h[24..28].copy_from_slice(&frame_id.to_be_bytes());
    h[28..30].copy_from_slice(&(x0 as u16).to_be_bytes());
    h[30..32].copy_from_slice(&(y0 as u16).to_be_bytes());
    h[32..34].copy_from_slice(&((x0 + 15) as u16).to_be_bytes());
    h[34..36].copy_from_slice(&((y0 + 929) as u16).to_be_bytes());
    h[36..40].copy_from_slice(&(BLOCK_SIZE as u32).to_be_bytes());
    out.extend(h);
    for r in 0..930 {
        for c in (0..16).step_by(2) {
            let (y, x) = (y0 + r, s * 256 + x0 + c);
            let (a, b) = if frame < 0 {
                (0xFFF, 0xFFF)
            } else {
                (pixel(frame as usize, y, x, seed), pixel(frame as usize, y, x + 1, seed))
            };
            out.push((a & 0xFF) as u8);
            out.push(((a >> 8) as u8 & 0x0F) | ((b & 0x0F) as u8) << 4);
            out.push((b >> 4) as u8);
        }
    }
}

/// The `.gtg` metadata file: a DM4 tag tree with the scan size, if any.
pub fn gtg_bytes(scan: Option<(usize, usize)>) -> Vec<u8> {
    let u32_tag = |v: usize| Tag::Data(vec![5], (v as u32).to_le_bytes().to_vec());
    let mut root = vec![("Acquisition".to_owned(), Tag::Group(vec![("Frame Rate".into(), u32_tag(400))]))];
    if let Some((y, x)) = scan {
        root.push((
            "SI Dimensions".into(),
            Tag::Group(vec![("Size X".into(), u32_tag(x)), ("Size Y".into(), u32_tag(y))]),
        ));
    }
    dm::file_bytes(&Tag::Group(root), 4, false)
}

/// Write the dataset; returns the `.gtg` path.
pub fn write(dir: &Path, prefix: &str, o: &K2Options) -> PathBuf {
    for s in 0..8 {
        let mut out = Vec::new();
        let file = std::fs::File::create(sector_path(dir, prefix, s)).expect("create sector");
        let mut file = std::io::BufWriter::new(file);
        for idx in 32 - o.skew[s]..32 {
            block(&mut out, s, idx, -1, 0, o.seed);
        }
        for f in 0..o.frames {
            let flags = u8::from(f >= o.inactive);
            for idx in 0..32 {
                block(&mut out, s, idx, f as isize, flags, o.seed);
            }
            file.write_all(&out).expect("write");
            out.clear();
        }
        for idx in 0..o.trailing {
            block(&mut out, s, idx, o.frames as isize, 1, o.seed);
        }
        file.write_all(&out).expect("write");
        file.flush().expect("flush");
    }
    let gtg = dir.join(format!("{prefix}_.gtg"));
    std::fs::write(&gtg, gtg_bytes(o.scan)).expect("write gtg");
    gtg
}
