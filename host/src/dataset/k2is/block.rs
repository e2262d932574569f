//! One K2IS data block: a 40-byte big-endian header and 930 x 16 pixels of 12 bits,
//! packed little-endian (two pixels in three bytes).
//!
//! | offset | field |
//! |--------|-------|
//! | 0 | sync word `u32` = `0xFFFF0055` |
//! | 8 | version `u8` |
//! | 9 | flags `u8` (bit 0: shutter active) |
//! | 16 | block count `u32` (the same in all sectors for blocks of one frame) |
//! | 20 | sector width `u16` = 256, 22: sector height `u16` = 1860 |
//! | 24 | frame id `u32` |
//! | 28 | x start, 30: y start, 32: x end, 34: y end (`u16`, inclusive, within the sector) |
//! | 36 | block size `u32` = `0x5758` |

/// Bytes per block.
pub const BLOCK_SIZE: usize = 0x5758;
/// Bytes of the block header.
pub const HEADER_SIZE: usize = 40;
/// Pixels of a block: rows, columns.
pub const BLOCK_SHAPE: (usize, usize) = (930, 16);
/// Blocks per sector per frame (2 rows of 16 blocks).
pub const BLOCKS_PER_FRAME: usize = 32;
/// Sector files.
pub const SECTORS: usize = 8;
/// Width of one sector in pixels.
pub const SECTOR_WIDTH: usize = 256;
/// Frame shape.
pub const FRAME_SHAPE: (usize, usize) = (2 * 930, SECTORS * SECTOR_WIDTH);
/// The sync word of a valid block.
pub const SYNC: u32 = 0xFFFF_0055;

/// A parsed block header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    pub sync: u32,
    pub version: u8,
    pub flags: u8,
    pub block_count: u32,
    pub width: u16,
    pub height: u16,
    pub frame_id: u32,
    pub x_start: u16,
    pub y_start: u16,
    pub x_end: u16,
    pub y_end: u16,
    pub block_size: u32,
}

impl BlockHeader {
    /// Parse the first 40 bytes of `bytes`; `None` if there are fewer.
    pub fn parse(bytes: &[u8]) -> Option<BlockHeader> {
        let b = bytes.get(..HEADER_SIZE)?;
        let u16_at = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Some(BlockHeader {
            sync: u32_at(0),
            version: b[8],
            flags: b[9],
            block_count: u32_at(16),
            width: u16_at(20),
            height: u16_at(22),
            frame_id: u32_at(24),
            x_start: u16_at(28),
            y_start: u16_at(30),
            x_end: u16_at(32),
            y_end: u16_at(34),
            block_size: u32_at(36),
        })
    }

    /// Sync word and sector geometry as LiberTEM checks them.
    pub fn is_valid(&self) -> bool {
        self.sync == SYNC && self.width as usize == SECTOR_WIDTH && self.height as usize == FRAME_SHAPE.0
    }

    /// The shutter-active flag: set on frames taken during the scan.
    pub fn shutter_active(&self) -> bool {
        self.flags & 1 == 1
    }
}

/// Where block `index` (0..32) of a sector's frame lies in that sector: (row, column) of
/// its first pixel. Blocks run right to left, top half first.
pub fn block_origin(index: usize) -> (usize, usize) {
    (BLOCK_SHAPE.0 * (index / 16), BLOCK_SHAPE.1 * (15 - index % 16))
}

/// Decode 12-bit packed pixels: bytes `a b c` hold `a | (b & 0xF) << 8` and
/// `b >> 4 | c << 4`.
pub fn unpack12(packed: &[u8], out: &mut [u16]) {
    for (three, two) in packed.chunks_exact(3).zip(out.chunks_exact_mut(2)) {
        let (a, b, c) = (u16::from(three[0]), u16::from(three[1]), u16::from(three[2]));
        two[0] = a | (b & 0x0F) << 8;
        two[1] = (b >> 4) | c << 4;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpacks_two_pixels_from_three_bytes() {
        let mut out = [0u16; 4];
        unpack12(&[0xAB, 0xCD, 0xEF, 0x01, 0x20, 0x03], &mut out);
        assert_eq!(out, [0xDAB, 0xEFC, 0x001, 0x032]);
    }

    #[test]
    fn block_geometry() {
        assert_eq!(block_origin(0), (0, 240));
        assert_eq!(block_origin(15), (0, 0));
        assert_eq!(block_origin(16), (930, 240));
        assert_eq!(BLOCK_SIZE, HEADER_SIZE + 930 * 16 * 3 / 2);
    }

    #[test]
    fn header_fields() {
        let mut b = [0u8; 40];
        b[..4].copy_from_slice(&SYNC.to_be_bytes());
        b[9] = 1;
        b[20..22].copy_from_slice(&256u16.to_be_bytes());
        b[22..24].copy_from_slice(&1860u16.to_be_bytes());
        b[24..28].copy_from_slice(&77u32.to_be_bytes());
        let h = BlockHeader::parse(&b).unwrap();
        assert!(h.is_valid() && h.shutter_active());
        assert_eq!(h.frame_id, 77);
        assert!(BlockHeader::parse(&b[..39]).is_none());
    }
}
