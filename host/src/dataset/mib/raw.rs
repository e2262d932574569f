//! Decoding raw (`R64`) Merlin frames: counters packed into big-endian 64-bit words.
//!
//! Within a word the counters go from the least significant bits up: with a counter
//! depth of 1 bit a word holds 64 pixels (pixel `k` is bit `k`), 6-bit counters are
//! stored in bytes (8 per word), 12-bit counters in 16-bit fields (4 per word). 24-bit
//! frames are two 12-bit frames one after the other, the first holding the upper 12
//! bits. This is what LiberTEM's `decode_r{1,6,12,24}_swap` do.
//!
//! Quad detectors (2x2 layout, 4 chips of `c × c`) store each raw row as four chip
//! rows `[chip 0 | chip 1 | chip 2 | chip 3]`. The frame of `2c × 2c` pixels is
//! assembled as
//!
//! ```text
//!   raw row r < c:  chip 3 → top left, row r        chip 2 → top right, row r
//!                   chip 1 → bottom left,  row 2c-1-r, mirrored in x
//!                   chip 0 → bottom right, row 2c-1-r, mirrored in x
//! ```
//!
//! (LiberTEM's `_mib_2x2_tile_block` and `decode_r*_swap_2x2`; 24-bit quad data is not
//! supported there either.)

use super::header::{MibHeader, MibPixel};
use crate::dataset::SigSlice;
use crate::dtype::DType;

/// The geometry of raw frames and how to unpack them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawLayout {
    /// Counter depth: 1, 6, 12 or 24 bits.
    pub bits: u32,
    /// Bits per stored counter: 1, 8 or 16.
    storage: usize,
    /// Counters per raw row.
    raw_width: usize,
    /// Bytes of one plane of counters (24-bit frames have two).
    plane_bytes: usize,
    /// Chip size `c` of a 2x2 quad.
    quad: Option<usize>,
    /// The decoded frame.
    pub height: usize,
    pub width: usize,
}

impl RawLayout {
    /// The layout of raw frames with header `header`.
    ///
    /// # Errors
    /// A message saying what is unsupported or inconsistent.
    pub fn new(header: &MibHeader) -> Result<Self, String> {
        if header.pixel != MibPixel::Raw {
            return Err("not raw data".into());
        }
        let bits = header.counter_depth.ok_or("raw (R64) data without a counter depth in the header")?;
        let storage = match bits {
            1 => 1,
            6 => 8,
            12 | 24 => 16,
            _ => return Err(format!("raw data with a counter depth of {bits} bits (supported: 1, 6, 12, 24)")),
        };
        let (w, h) = (header.width, header.height);
        if w == 0 || h == 0 {
            return Err(format!("frames of {w} x {h} pixels"));
        }
        let per_word = 64 / storage;
        let too_large = || format!("frames of {w} x {h} pixels are too large");
        let (across, down) = header.layout_dims();
        if header.chips <= 1 || (across, down) == (1, 1) {
            let raw_width = if bits == 24 {
                if !w.is_multiple_of(2) {
                    return Err(format!("24-bit raw frames need an even width (two 12-bit halves), found {w}"));
                }
                w / 2
            } else {
                w
            };
            if !raw_width.is_multiple_of(per_word) {
                return Err(format!("raw rows of {raw_width} counters of {bits} bits do not fill whole 64-bit words"));
            }
            let plane_bytes = raw_width.checked_mul(h).and_then(|n| n.checked_mul(storage)).ok_or_else(too_large)? / 8;
            return Ok(RawLayout { bits, storage, raw_width, plane_bytes, quad: None, height: h, width: raw_width });
        }
        if (across, down) == (2, 2) && header.chips == 4 {
            if bits == 24 {
                return Err("24-bit raw data from a 2x2 quad detector is not supported".into());
            }
            let c = h;
            if w != c.checked_mul(4).ok_or_else(too_large)? {
                return Err(format!("raw quad frames must be 4 chips of {c} pixels wide ({}), found width {w}", 4 * c));
            }
            if !c.is_multiple_of(per_word) {
                return Err(format!("raw chip rows of {c} counters of {bits} bits do not fill whole 64-bit words"));
            }
            let plane_bytes = w.checked_mul(h).and_then(|n| n.checked_mul(storage)).ok_or_else(too_large)? / 8;
            let side = 2 * c;
            return Ok(RawLayout {
                bits,
                storage,
                raw_width: w,
                plane_bytes,
                quad: Some(c),
                height: side,
                width: side,
            });
        }
        Err(format!(
            "raw data with {} chips in layout {} is not supported (only single chips and 2x2 quads)",
            header.chips, header.layout
        ))
    }

    /// Bytes of one frame's pixels.
    pub fn frame_bytes(&self) -> usize {
        if self.bits == 24 { 2 * self.plane_bytes } else { self.plane_bytes }
    }

    /// The dataset dtype LiberTEM reports for this depth (1 bit: `uint64`, the word it
    /// unpacks from; 24 bit: `uint32`, where LiberTEM says `uint16` and truncates).
    pub fn native_dtype(&self) -> DType {
        match self.bits {
            1 => DType::U64,
            6 => DType::U8,
            12 => DType::U16,
            _ => DType::U32,
        }
    }

    /// Decode the pixels of `sig` (a slice of the `height × width` frame) from the raw
    /// bytes `frame` (at least [`frame_bytes`](Self::frame_bytes) long) into `out`
    /// (`sig.len()` values, C order).
    pub fn decode(&self, frame: &[u8], sig: &SigSlice, out: &mut [u32]) {
        let (y0, x0) = (sig.origin[0], sig.origin[1]);
        let (rows, cols) = (sig.shape[0], sig.shape[1]);
        for (r, dst) in out.chunks_exact_mut(cols).take(rows).enumerate() {
            let y = y0 + r;
            match self.quad {
                None => {
                    let p = y * self.raw_width + x0;
                    if self.bits == 24 {
                        self.extract(&frame[..self.plane_bytes], p, dst);
                        for v in dst.iter_mut() {
                            *v <<= 12;
                        }
                        let mut low = [0u32; 64];
                        let mut done = 0;
                        while done < dst.len() {
                            let n = (dst.len() - done).min(low.len());
                            self.extract(&frame[self.plane_bytes..2 * self.plane_bytes], p + done, &mut low[..n]);
                            for (d, l) in dst[done..done + n].iter_mut().zip(&low[..n]) {
                                *d += l;
                            }
                            done += n;
                        }
                    } else {
                        self.extract(frame, p, dst);
                    }
                }
                Some(c) => {
                    let plane = &frame[..self.plane_bytes];
                    let (raw_row, flipped) = if y < c { (y, false) } else { (2 * c - 1 - y, true) };
                    let row_start = raw_row * self.raw_width;
                    // Left half [x0, min(x1, c)), right half [max(x0, c), x1).
                    let x1 = x0 + cols;
                    for (half_start, half_end, chip_top, chip_bottom) in [(0, c, 3, 1), (c, 2 * c, 2, 0)] {
                        let (a, b) = (x0.max(half_start), x1.min(half_end));
                        if a >= b {
                            continue;
                        }
                        let dst = &mut dst[a - x0..b - x0];
                        let (xa, xb) = (a - half_start, b - half_start);
                        if flipped {
                            self.extract(plane, row_start + chip_bottom * c + (c - xb), dst);
                            dst.reverse();
                        } else {
                            self.extract(plane, row_start + chip_top * c + xa, dst);
                        }
                    }
                }
            }
        }
    }

    /// Counters `p .. p + dst.len()` of a plane, in storage order.
    fn extract(&self, plane: &[u8], p: usize, dst: &mut [u32]) {
        let sb = self.storage;
        let per_word = 64 / sb;
        let mask = (1u64 << sb) - 1;
        let (mut p, mut i) = (p, 0);
        while i < dst.len() {
            let (w, k) = (p / per_word, p % per_word);
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&plane[w * 8..w * 8 + 8]);
            let word = u64::from_be_bytes(bytes);
            let take = (per_word - k).min(dst.len() - i);
            for (j, d) in dst[i..i + take].iter_mut().enumerate() {
                *d = ((word >> ((k + j) * sb)) & mask) as u32;
            }
            i += take;
            p += take;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(pixel_width: usize, height: usize, chips: u32, layout: &str, depth: u32) -> MibHeader {
        MibHeader {
            sequence: 1,
            header_bytes: 384,
            chips,
            width: pixel_width,
            height,
            pixel: MibPixel::Raw,
            pixel_name: "R64".into(),
            layout: layout.into(),
            counter_depth: Some(depth),
        }
    }

    #[test]
    fn one_bit_pixels_are_bits_of_big_endian_words() {
        let layout = RawLayout::new(&header(64, 1, 1, "1x1", 1)).unwrap();
        // Word 0x8000_0000_0000_0001: pixel 0 and pixel 63 are set.
        let mut frame = [0u8; 8];
        frame[0] = 0x80;
        frame[7] = 0x01;
        let mut out = [9u32; 64];
        layout.decode(&frame, &SigSlice::full(&[1, 64]), &mut out);
        assert_eq!((out[0], out[1], out[62], out[63]), (1, 0, 0, 1));
        assert_eq!(out.iter().sum::<u32>(), 2);
    }

    #[test]
    fn twelve_bit_counters_are_reversed_in_groups_of_four() {
        let layout = RawLayout::new(&header(4, 1, 1, "1x1", 12)).unwrap();
        let frame: Vec<u8> = [4u16, 3, 2, 1].iter().flat_map(|v| v.to_be_bytes()).collect();
        let mut out = [0u32; 4];
        layout.decode(&frame, &SigSlice::full(&[1, 4]), &mut out);
        assert_eq!(out, [1, 2, 3, 4]);
        let mut part = [0u32; 2];
        layout.decode(&frame, &SigSlice { origin: vec![0, 1], shape: vec![1, 2] }, &mut part);
        assert_eq!(part, [2, 3]);
    }

    #[test]
    fn rejects_what_libertem_cannot_read_either() {
        assert!(RawLayout::new(&header(1024, 256, 4, "2x2", 24)).is_err());
        assert!(RawLayout::new(&header(1024, 256, 4, "Nx1", 12)).is_err());
        assert!(RawLayout::new(&header(60, 4, 1, "1x1", 1)).is_err());
        assert!(RawLayout::new(&header(64, 4, 1, "1x1", 7)).is_err());
        let quad = RawLayout::new(&header(1024, 256, 4, "2x2", 12)).unwrap();
        assert_eq!((quad.height, quad.width, quad.frame_bytes()), (512, 512, 512 * 512 * 2));
    }
}
