//! Merlin `.mib` fixtures: frame headers, big-endian `U` frames, raw `R64` frames of
//! 1/6/12/24 bits (single chip and 2x2 quad), multi-file sets and `.hdr` files.
//!
//! The raw encoders follow LiberTEM's test encoders (`encode_r1`, `encode_r6`,
//! `encode_r12`, `encode_quad` in `tests/utils`): written per output byte from the
//! pixel array, independently of the host's word-wise decoder.

use crate::fixtures::Data;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::{Path, PathBuf};

/// Pixel formats of the fixtures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MibKind {
    U8,
    U16,
    U32,
    /// Raw, 1-bit counters.
    R1,
    /// Raw, 6-bit counters.
    R6,
    /// Raw, 12-bit counters.
    R12,
    /// Raw, 24-bit counters (two 12-bit frames).
    R24,
}

impl MibKind {
    pub const ALL: [MibKind; 7] =
        [MibKind::U8, MibKind::U16, MibKind::U32, MibKind::R1, MibKind::R6, MibKind::R12, MibKind::R24];

    /// Largest counter value.
    pub fn max(self) -> u64 {
        match self {
            MibKind::U8 => 255,
            MibKind::U16 => 65535,
            MibKind::U32 => 1 << 31,
            MibKind::R1 => 1,
            MibKind::R6 => 63,
            MibKind::R12 => 4095,
            MibKind::R24 => (1 << 24) - 1,
        }
    }

    /// Counter depth written in the header.
    pub fn depth(self) -> u32 {
        match self {
            MibKind::U8 => 6,
            MibKind::U16 => 12,
            MibKind::U32 => 24,
            MibKind::R1 => 1,
            MibKind::R6 => 6,
            MibKind::R12 => 12,
            MibKind::R24 => 24,
        }
    }

    fn is_raw(self) -> bool {
        matches!(self, MibKind::R1 | MibKind::R6 | MibKind::R12 | MibKind::R24)
    }

    fn type_field(self) -> &'static str {
        match self {
            MibKind::U8 => "U08",
            MibKind::U16 => "U16",
            MibKind::U32 => "U32",
            _ => "R64",
        }
    }
}

/// Random counters in `0..=max` (seeded).
pub fn counts(nav: &[usize], sig: &[usize], max: u64, seed: u64) -> Data {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n: usize = nav.iter().chain(sig).product();
    let values = (0..n).map(|_| rng.random_range(0..=max) as f64).collect();
    Data { nav: nav.to_vec(), sig: sig.to_vec(), values }
}

/// A frame header padded with NULs to `header_bytes`, in the format of Merlin 0.77.
#[allow(clippy::too_many_arguments)]
pub fn frame_header(
    sequence: u64,
    header_bytes: usize,
    chips: u32,
    width: usize,
    height: usize,
    type_field: &str,
    layout: &str,
    depth: u32,
) -> Vec<u8> {
    let text = format!(
        "MQ1,{sequence:06},{header_bytes:05},{chips:02},{width:04},{height:04},{type_field},{layout:>6},0F,\
         2021-10-04 12:57:48.710465,0.001000,0,0,0,5.700000E+1,5.110000E+2,0.000000E+0,0.000000E+0,0.000000E+0,\
         0.000000E+0,0.000000E+0,0.000000E+0,3RX,114,511,000,000,000,000,000,000,100,255,200,125,100,100,098,100,\
         104,050,128,004,255,084,128,135,125,511,511,MQ1A,2021-10-04T16:57:48.710465438Z,1000000ns,{depth},"
    );
    let mut bytes = text.into_bytes();
    assert!(bytes.len() <= header_bytes, "header text longer than {header_bytes}");
    bytes.resize(header_bytes, 0);
    bytes
}

/// LiberTEM's `encode_r1` for one row: 64 pixels per 8 bytes, byte order reversed.
fn encode_r1(row: &[u64], out: &mut Vec<u8>) {
    for stripe in 0..row.len() / 64 {
        let mut bytes = [0u8; 8];
        for byte in 0..8 {
            let mut b = 0u8;
            for bit in 0..8 {
                b |= ((row[64 * stripe + 8 * byte + bit] & 1) as u8) << bit;
            }
            bytes[8 - (byte + 1)] = b;
        }
        out.extend_from_slice(&bytes);
    }
}

/// LiberTEM's `encode_r6`: bytes reversed in groups of 8.
fn encode_r6(row: &[u64], out: &mut Vec<u8>) {
    for i in 0..row.len() {
        let (col, pos) = (i % 8, i / 8);
        out.push(row[(pos + 1) * 8 - col - 1] as u8);
    }
}

/// LiberTEM's `encode_r12`: big-endian u16 reversed in groups of 4.
fn encode_r12(row: &[u64], out: &mut Vec<u8>) {
    for i in 0..row.len() {
        let (col, pos) = (i % 4, i / 4);
        out.extend_from_slice(&(row[(pos + 1) * 4 - col - 1] as u16).to_be_bytes());
    }
}

fn encode_raw_rows(kind: MibKind, rows: &[Vec<u64>], out: &mut Vec<u8>) {
    for row in rows {
        match kind {
            MibKind::R1 => encode_r1(row, out),
            MibKind::R6 => encode_r6(row, out),
            MibKind::R12 => encode_r12(row, out),
            _ => unreachable!("not a single-plane raw kind"),
        }
    }
}

/// The stored bytes and header geometry `(width, height, chips, layout)` of one frame.
pub fn encode_frame(
    kind: MibKind,
    quad: bool,
    frame: &[f64],
    sig: &[usize],
) -> (Vec<u8>, usize, usize, u32, &'static str) {
    let (h, w) = (sig[0], sig[1]);
    let px = |y: usize, x: usize| frame[y * w + x] as u64;
    let mut out = Vec::new();
    if !kind.is_raw() {
        for &v in frame {
            match kind {
                MibKind::U8 => out.push(v as u8),
                MibKind::U16 => out.extend_from_slice(&(v as u16).to_be_bytes()),
                MibKind::U32 => out.extend_from_slice(&(v as u32).to_be_bytes()),
                _ => unreachable!(),
            }
        }
        return if quad { (out, w, h, 4, "2x2G") } else { (out, w, h, 1, "1x1") };
    }
    if quad {
        assert_eq!(h, w, "quad frames are square");
        let c = h / 2;
        // LiberTEM's encode_quad: raw row r = [q4 | q3 | q2 | q1] with q3, q4 flipped in x and y.
        let rows: Vec<Vec<u64>> = (0..c)
            .map(|r| {
                let mut row = Vec::with_capacity(4 * c);
                let bottom = 2 * c - 1 - r;
                row.extend((0..c).map(|x| px(bottom, 2 * c - 1 - x))); // q4 flipped
                row.extend((0..c).map(|x| px(bottom, c - 1 - x))); // q3 flipped
                row.extend((0..c).map(|x| px(r, c + x))); // q2
                row.extend((0..c).map(|x| px(r, x))); // q1
                row
            })
            .collect();
        encode_raw_rows(kind, &rows, &mut out);
        return (out, 4 * c, c, 4, "2x2");
    }
    let rows =
        |f: &dyn Fn(u64) -> u64| -> Vec<Vec<u64>> { (0..h).map(|y| (0..w).map(|x| f(px(y, x))).collect()).collect() };
    if kind == MibKind::R24 {
        encode_raw_rows(MibKind::R12, &rows(&|v| v >> 12), &mut out);
        encode_raw_rows(MibKind::R12, &rows(&|v| v & 0xFFF), &mut out);
        return (out, 2 * w, h, 1, "1x1");
    }
    encode_raw_rows(kind, &rows(&|v| v), &mut out);
    (out, w, h, 1, "1x1")
}

/// How to write a set.
#[derive(Debug, Clone, Copy)]
pub struct MibSet {
    pub kind: MibKind,
    /// A 2x2 quad detector (raw: the quad re-ordering; U: an assembled 2x2G frame).
    pub quad: bool,
    /// Number of files the frames are split into (named `<prefix>1.mib`, ... when > 1).
    pub files: usize,
    /// Sequence number of the first frame.
    pub first_sequence: u64,
}

impl MibSet {
    pub fn new(kind: MibKind) -> Self {
        MibSet { kind, quad: false, files: 1, first_sequence: 1 }
    }
}

/// Write `data` as `.mib` file(s) `<dir>/<prefix>[k].mib`; returns the paths in order.
pub fn write_mib(dir: &Path, prefix: &str, data: &Data, set: MibSet) -> Vec<PathBuf> {
    let n = data.frames();
    let header_bytes = if set.quad { 768 } else { 384 };
    let mut paths = Vec::new();
    for k in 0..set.files {
        let (a, b) = (k * n / set.files, (k + 1) * n / set.files);
        let name = if set.files == 1 { format!("{prefix}.mib") } else { format!("{prefix}{}.mib", k + 1) };
        let path = dir.join(name);
        let mut bytes = Vec::new();
        for i in a..b {
            let (payload, w, h, chips, layout) = encode_frame(set.kind, set.quad, data.frame(i), &data.sig);
            let seq = set.first_sequence + i as u64;
            bytes.extend(frame_header(seq, header_bytes, chips, w, h, set.kind.type_field(), layout, set.kind.depth()));
            bytes.extend(payload);
        }
        std::fs::write(&path, bytes).expect("write mib fixture");
        paths.push(path);
    }
    paths
}

/// Write a `.hdr` acquisition header giving `nav` (`[y, x]`), with `ScanX`/`ScanY` or
/// with frames per trigger.
pub fn write_hdr(path: &Path, nav: &[usize], scan_keys: bool) {
    let frames: usize = nav.iter().product();
    let mut text = String::from("HDR,\t\r\nTime and Date Stamp (day, mnth, yr, hr, min, s):\t04/10/2021 12:57:48\r\n");
    text.push_str("Chip ID:\tW530_L8,-,-,-\r\n");
    text.push_str(&format!("Frames in Acquisition (Number):\t{frames}\r\n"));
    if scan_keys {
        text.push_str(&format!("ScanX:\t{}\r\nScanY:\t{}\r\n", nav[1], nav[0]));
        text.push_str("Frames per Trigger (Number):\t1\r\n");
    } else {
        text.push_str(&format!("Frames per Trigger (Number):\t{}\r\n", nav[1]));
    }
    text.push_str("End\t");
    std::fs::write(path, text).expect("write hdr fixture");
}
