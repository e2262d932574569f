//! HDF5 filter pipelines, decoded in our own code: deflate (1), shuffle (2), fletcher32
//! (3), the HDF5 LZ4 filter (32004) and bitshuffle (32008, with or without LZ4), the
//! filters 4D-STEM files use (DECTRIS writes bitshuffle-LZ4, h5py users gzip).
//!
//! A chunk is decoded by running the filters of the pipeline in reverse order, skipping
//! those whose bit is set in the chunk's filter mask.

use std::io::Read;

/// `H5Z_FILTER_DEFLATE`.
pub const DEFLATE: u16 = 1;
/// `H5Z_FILTER_SHUFFLE`.
pub const SHUFFLE: u16 = 2;
/// `H5Z_FILTER_FLETCHER32`.
pub const FLETCHER32: u16 = 3;
/// The registered HDF5 LZ4 filter.
pub const LZ4: u16 = 32004;
/// The registered bitshuffle filter (DECTRIS, hdf5plugin).
pub const BITSHUFFLE: u16 = 32008;

/// One filter of a dataset's pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    pub id: u16,
    pub name: Option<String>,
    pub client_data: Vec<u32>,
}

impl Filter {
    /// A name for messages: the registered name, or the one stored in the file.
    pub fn describe(&self) -> String {
        let known = match self.id {
            DEFLATE => "deflate",
            SHUFFLE => "shuffle",
            FLETCHER32 => "fletcher32",
            4 => "szip",
            5 => "nbit",
            6 => "scaleoffset",
            LZ4 => "lz4",
            BITSHUFFLE => "bitshuffle",
            32001 => "blosc",
            32015 => "zstd",
            _ => self.name.as_deref().unwrap_or("unknown"),
        };
        format!("{known} (id {})", self.id)
    }

    /// Whether [`decode`] can undo this filter.
    pub fn supported(&self) -> Result<(), String> {
        match self.id {
            DEFLATE | SHUFFLE | FLETCHER32 | LZ4 => Ok(()),
            BITSHUFFLE => match self.client_data.get(4).copied().unwrap_or(0) {
                0 | 2 => Ok(()),
                3 => Err("bitshuffle with zstd compression is not supported (only lz4 or none)".into()),
                other => Err(format!("bitshuffle compression code {other} is unknown")),
            },
            _ => Err(format!(
                "filter {} is not supported (supported: deflate/gzip, shuffle, fletcher32, lz4, bitshuffle-lz4)",
                self.describe()
            )),
        }
    }
}

/// Check the parameters a file gives its filters against the dataset's elements: the
/// shuffle and bitshuffle element sizes are the type's size (what HDF5's `set_local`
/// writes), a bitshuffle block is a whole number of 8-element groups. The parameters come
/// from the file, and decoding sizes its buffers by them.
///
/// # Errors
/// A message naming the filter and the parameter.
pub fn check_params(filters: &[Filter], elem_size: usize) -> Result<(), String> {
    for filter in filters {
        let element = match filter.id {
            SHUFFLE => filter.client_data.first(),
            BITSHUFFLE => filter.client_data.get(2),
            _ => None,
        };
        if let Some(&size) = element
            && size as usize != elem_size
        {
            return Err(format!(
                "{}: the file gives an element size of {size} bytes, but the dataset's elements are {elem_size} bytes",
                filter.describe()
            ));
        }
        if filter.id == BITSHUFFLE
            && let Some(&block) = filter.client_data.get(3)
            && !block.is_multiple_of(8)
        {
            return Err(format!("{}: block of {block} elements is not a multiple of 8", filter.describe()));
        }
    }
    Ok(())
}

/// Decode one chunk: undo `filters` (in reverse) except those masked out, producing
/// exactly `expected` bytes of `elem_size`-byte elements (anything a filter produces
/// beyond them is dropped).
///
/// # Errors
/// A message describing the filter and what was wrong (parameters that do not fit the
/// elements: [`check_params`]); the caller adds file and offset.
pub fn decode(filters: &[Filter], mask: u32, raw: &[u8], elem_size: usize, expected: usize) -> Result<Vec<u8>, String> {
    check_params(filters, elem_size)?;
    let mut data: Option<Vec<u8>> = None;
    for (i, filter) in filters.iter().enumerate().rev() {
        if i < 32 && mask & (1 << i) != 0 {
            continue;
        }
        let input: &[u8] = data.as_deref().unwrap_or(raw);
        let output = match filter.id {
            DEFLATE => inflate(input, expected)?,
            SHUFFLE => {
                let size = filter.client_data.first().map_or(elem_size, |&s| s as usize);
                unshuffle(input, size)
            }
            FLETCHER32 => {
                let n = input.len().checked_sub(4).ok_or("fletcher32: chunk shorter than its checksum")?;
                input[..n].to_vec()
            }
            LZ4 => hdf5_lz4(input, expected)?,
            BITSHUFFLE => {
                let size = filter.client_data.get(2).map_or(elem_size, |&s| s as usize);
                let compressed = filter.client_data.get(4).copied().unwrap_or(0) == 2;
                let block = filter.client_data.get(3).map_or(0, |&b| b as usize);
                bitshuffle(input, size, compressed, block, expected)?
            }
            _ => return Err(filter.supported().err().unwrap_or_default()),
        };
        data = Some(output);
    }
    let mut out = data.unwrap_or_else(|| raw.to_vec());
    if out.len() < expected {
        return Err(format!("decoded chunk has {} bytes, expected {expected}", out.len()));
    }
    out.truncate(expected);
    Ok(out)
}

/// [`decode`] into `out` (cleared first), reusing its allocation: one-filter pipelines
/// (bitshuffle-LZ4 as DECTRIS writes it, plain deflate) decode straight into it.
///
/// # Errors
/// As [`decode`].
pub fn decode_into(
    filters: &[Filter],
    mask: u32,
    raw: &[u8],
    elem_size: usize,
    expected: usize,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    check_params(filters, elem_size)?;
    let active: Vec<&Filter> =
        filters.iter().enumerate().filter(|&(i, _)| i >= 32 || mask & (1 << i) == 0).map(|(_, f)| f).collect();
    match active.as_slice() {
        [f] if f.id == BITSHUFFLE => {
            let size = f.client_data.get(2).map_or(elem_size, |&s| s as usize);
            let lz4 = f.client_data.get(4).copied().unwrap_or(0) == 2;
            let block = f.client_data.get(3).map_or(0, |&b| b as usize);
            bitshuffle_into(raw, size, lz4, block, expected, out)?;
        }
        [f] if f.id == DEFLATE => {
            out.clear();
            flate2::read::ZlibDecoder::new(raw)
                .take(expected as u64 + 1)
                .read_to_end(out)
                .map_err(|e| format!("deflate: {e}"))?;
        }
        _ => *out = decode(filters, mask, raw, elem_size, expected)?,
    }
    if out.len() < expected {
        return Err(format!("decoded chunk has {} bytes, expected {expected}", out.len()));
    }
    out.truncate(expected);
    Ok(())
}

/// zlib-wrapped deflate (what HDF5's deflate filter writes), at most `limit` bytes
/// plus a little, so a lying chunk cannot blow up memory.
fn inflate(input: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(limit.min(input.len().saturating_mul(8)));
    flate2::read::ZlibDecoder::new(input)
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("deflate: {e}"))?;
    Ok(out)
}

/// Undo HDF5's byte shuffle: byte `j` of element `i` was stored at `j * n + i`.
fn unshuffle(input: &[u8], size: usize) -> Vec<u8> {
    if size <= 1 {
        return input.to_vec();
    }
    let n = input.len() / size;
    let mut out = vec![0u8; input.len()];
    for j in 0..size {
        let plane = &input[j * n..(j + 1) * n];
        for (i, &b) in plane.iter().enumerate() {
            out[i * size + j] = b;
        }
    }
    // Trailing bytes that do not make an element are stored as they are.
    out[n * size..].copy_from_slice(&input[n * size..]);
    out
}

fn be_u64(input: &[u8], at: usize) -> Result<u64, String> {
    let bytes: [u8; 8] = input.get(at..at + 8).and_then(|b| b.try_into().ok()).ok_or("header cut short")?;
    Ok(u64::from_be_bytes(bytes))
}

fn be_u32(input: &[u8], at: usize) -> Result<u32, String> {
    let bytes: [u8; 4] = input.get(at..at + 4).and_then(|b| b.try_into().ok()).ok_or("header cut short")?;
    Ok(u32::from_be_bytes(bytes))
}

/// The HDF5 LZ4 filter (32004): 8-byte big-endian total size, 4-byte block size, then
/// blocks of (4-byte compressed size, LZ4 block); a block stored with its full size is
/// stored uncompressed.
fn hdf5_lz4(input: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    let total = usize::try_from(be_u64(input, 0).map_err(|e| format!("lz4: {e}"))?).unwrap_or(usize::MAX);
    let block = be_u32(input, 8).map_err(|e| format!("lz4: {e}"))? as usize;
    if total > limit || block == 0 {
        return Err(format!("lz4: header says {total} bytes in blocks of {block}, expected {limit}"));
    }
    let mut out = vec![0u8; total];
    let mut at = 12;
    let mut done = 0;
    while done < total {
        let n = (total - done).min(block);
        let size = be_u32(input, at).map_err(|e| format!("lz4: block at {at}: {e}"))? as usize;
        at += 4;
        let src = input.get(at..at + size).ok_or_else(|| format!("lz4: block at {at} of {size} bytes is cut short"))?;
        if size == n {
            out[done..done + n].copy_from_slice(src);
        } else {
            let got = super::lz4::decompress_into(src, &mut out[done..done + n])
                .map_err(|e| format!("lz4: block at {at}: {e}"))?;
            if got != n {
                return Err(format!("lz4: block at {at} decoded to {got} bytes, expected {n}"));
            }
        }
        at += size;
        done += n;
    }
    Ok(out)
}

/// Bitshuffle's default block size in elements (`bshuf_default_block_size`).
fn default_block(elem_size: usize) -> usize {
    let block = 8192 / elem_size.max(1);
    (block / 8 * 8).max(128)
}

/// The bitshuffle filter (32008). With LZ4: an 8-byte big-endian decoded size and a
/// 4-byte block size in bytes, then blocks of `block` elements, each bit-transposed and
/// stored as (4-byte big-endian compressed size, LZ4 block). Without compression there is
/// no header, the blocks (of `block_param` elements, or the default) are stored as they
/// are. The last partial block is rounded down to a multiple of 8 elements; the remaining
/// elements are stored untransposed.
pub fn bitshuffle(
    input: &[u8],
    elem_size: usize,
    lz4: bool,
    block_param: usize,
    limit: usize,
) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    bitshuffle_into(input, elem_size, lz4, block_param, limit, &mut out)?;
    Ok(out)
}

/// [`bitshuffle`] into `out`, reusing its allocation.
fn bitshuffle_into(
    input: &[u8],
    elem_size: usize,
    lz4: bool,
    block_param: usize,
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    if elem_size == 0 {
        return Err("bitshuffle: element size 0".into());
    }
    let (total, mut block, mut at) = if lz4 {
        let total = usize::try_from(be_u64(input, 0).map_err(|e| format!("bitshuffle: {e}"))?).unwrap_or(usize::MAX);
        let block_bytes = be_u32(input, 8).map_err(|e| format!("bitshuffle: {e}"))? as usize;
        (total, block_bytes / elem_size, 12)
    } else {
        (input.len(), block_param, 0)
    };
    if total > limit {
        return Err(format!("bitshuffle: header says {total} decoded bytes, expected at most {limit}"));
    }
    if block == 0 {
        block = default_block(elem_size);
    }
    if !block.is_multiple_of(8) {
        return Err(format!("bitshuffle: block of {block} elements is not a multiple of 8"));
    }
    let elems = total / elem_size;
    out.clear();
    out.resize(total, 0);
    // A block never holds more than the chunk's elements: the scratch is bounded by the
    // decoded size, whatever block size the file claims.
    let mut scratch = vec![0u8; if lz4 { block.min(elems) * elem_size } else { 0 }];
    let mut done = 0; // elements
    let full = elems / block;
    let last = (elems % block) / 8 * 8;
    let blocks = (0..full).map(|_| block).chain((last > 0).then_some(last));
    for n in blocks {
        let bytes = n * elem_size;
        let shuffled: &[u8] = if lz4 {
            let size = be_u32(input, at).map_err(|e| format!("bitshuffle: block at {at}: {e}"))? as usize;
            at += 4;
            let src = input
                .get(at..at + size)
                .ok_or_else(|| format!("bitshuffle: block at {at} of {size} bytes is cut short"))?;
            let got = super::lz4::decompress_into(src, &mut scratch[..bytes])
                .map_err(|e| format!("bitshuffle: lz4 block at {at}: {e}"))?;
            if got != bytes {
                return Err(format!("bitshuffle: lz4 block at {at} decoded to {got} bytes, expected {bytes}"));
            }
            at += size;
            &scratch[..bytes]
        } else {
            let src = input.get(at..at + bytes).ok_or_else(|| format!("bitshuffle: block at {at} is cut short"))?;
            at += bytes;
            src
        };
        bit_untranspose(shuffled, &mut out[done * elem_size..done * elem_size + bytes], n, elem_size);
        done += n;
    }
    let rest = (elems - done) * elem_size + total % elem_size;
    let src =
        input.get(at..at + rest).ok_or_else(|| format!("bitshuffle: {rest} trailing bytes at {at} are missing"))?;
    out[done * elem_size..].copy_from_slice(src);
    Ok(())
}

/// Undo the bit transpose of one block of `n` elements (`n` a multiple of 8): bit `k` of
/// byte `j` of element `i` is stored in bit row `8 j + k`, byte `i / 8`, bit `i % 8`.
fn bit_untranspose(input: &[u8], out: &mut [u8], n: usize, elem_size: usize) {
    let row = n / 8;
    // SAFETY: SSE2 is part of the x86-64 baseline: every CPU this code runs on has it.
    #[cfg(target_arch = "x86_64")]
    let done = unsafe { untranspose_sse2(input, out, row, elem_size) };
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    untranspose_scalar(input, out, row, elem_size, done);
}

/// [`bit_untranspose`] of the groups of 8 elements from `first` on, one 8x8 bit
/// transpose per byte of the groups.
fn untranspose_scalar(input: &[u8], out: &mut [u8], row: usize, elem_size: usize, first: usize) {
    for j in 0..elem_size {
        let rows = &input[j * 8 * row..(j + 1) * 8 * row];
        for g in first..row {
            let mut x = 0u64;
            for k in 0..8 {
                x |= u64::from(rows[k * row + g]) << (8 * k);
            }
            let x = transpose8(x).to_le_bytes();
            let base = 8 * g * elem_size + j;
            for (m, &b) in x.iter().enumerate() {
                out[base + m * elem_size] = b;
            }
        }
    }
}

/// [`bit_untranspose`] of the groups of 8 elements in runs of 16 groups with SSE2 (part of
/// every x86-64 CPU): the 8 bit rows of a byte plane are loaded 16 bytes at a time,
/// byte-transposed so that the 8 row bytes of a group sit side by side, and each
/// `movemask` then gathers one bit position of two groups: byte `j` of two elements.
/// Returns how many groups it did (the rest, fewer than 16, are for the scalar code).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn untranspose_sse2(input: &[u8], out: &mut [u8], row: usize, elem_size: usize) -> usize {
    use std::arch::x86_64::{
        __m128i, _mm_add_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_unpackhi_epi8, _mm_unpackhi_epi16,
        _mm_unpackhi_epi32, _mm_unpacklo_epi8, _mm_unpacklo_epi16, _mm_unpacklo_epi32,
    };
    let groups = row / 16 * 16;
    for j in 0..elem_size {
        let plane = &input[j * 8 * row..(j + 1) * 8 * row];
        for g in (0..groups).step_by(16) {
            let v: [__m128i; 8] = std::array::from_fn(|k| {
                let bytes: &[u8; 16] = plane[k * row + g..k * row + g + 16].try_into().expect("16 bytes");
                // SAFETY: `bytes` is 16 readable bytes; an unaligned load needs no alignment.
                unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
            });
            // Byte transpose in three rounds of interleaving: w[p] holds the 8 row bytes
            // of group g + 2p, then those of group g + 2p + 1.
            let a = [
                _mm_unpacklo_epi8(v[0], v[1]),
                _mm_unpackhi_epi8(v[0], v[1]),
                _mm_unpacklo_epi8(v[2], v[3]),
                _mm_unpackhi_epi8(v[2], v[3]),
                _mm_unpacklo_epi8(v[4], v[5]),
                _mm_unpackhi_epi8(v[4], v[5]),
                _mm_unpacklo_epi8(v[6], v[7]),
                _mm_unpackhi_epi8(v[6], v[7]),
            ];
            let b = [
                _mm_unpacklo_epi16(a[0], a[2]),
                _mm_unpackhi_epi16(a[0], a[2]),
                _mm_unpacklo_epi16(a[1], a[3]),
                _mm_unpackhi_epi16(a[1], a[3]),
            ];
            let c = [
                _mm_unpacklo_epi16(a[4], a[6]),
                _mm_unpackhi_epi16(a[4], a[6]),
                _mm_unpacklo_epi16(a[5], a[7]),
                _mm_unpackhi_epi16(a[5], a[7]),
            ];
            let w = [
                _mm_unpacklo_epi32(b[0], c[0]),
                _mm_unpackhi_epi32(b[0], c[0]),
                _mm_unpacklo_epi32(b[1], c[1]),
                _mm_unpackhi_epi32(b[1], c[1]),
                _mm_unpacklo_epi32(b[2], c[2]),
                _mm_unpackhi_epi32(b[2], c[2]),
                _mm_unpacklo_epi32(b[3], c[3]),
                _mm_unpackhi_epi32(b[3], c[3]),
            ];
            for (p, &pair) in w.iter().enumerate() {
                let first = 8 * (g + 2 * p);
                let mut x = pair;
                // Bit 7 of every byte first (elements first + 7 and first + 15), then
                // each doubling moves the next lower bit up to bit 7.
                for m in (0..8).rev() {
                    let mask = _mm_movemask_epi8(x) as u32;
                    out[(first + m) * elem_size + j] = mask as u8;
                    out[(first + 8 + m) * elem_size + j] = (mask >> 8) as u8;
                    x = _mm_add_epi8(x, x);
                }
            }
        }
    }
    groups
}

/// Transpose an 8x8 bit matrix held in a `u64` (bit `8 r + c` to bit `8 c + r`).
fn transpose8(mut x: u64) -> u64 {
    let t = (x ^ (x >> 7)) & 0x00AA_00AA_00AA_00AA;
    x ^= t ^ (t << 7);
    let t = (x ^ (x >> 14)) & 0x0000_CCCC_0000_CCCC;
    x ^= t ^ (t << 14);
    let t = (x ^ (x >> 28)) & 0x0000_0000_F0F0_F0F0;
    x ^ t ^ (t << 28)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The obvious bit-by-bit transpose, as bitshuffle defines it.
    fn bit_transpose_reference(input: &[u8], n: usize, size: usize) -> Vec<u8> {
        let mut out = vec![0u8; n * size];
        for i in 0..n {
            for j in 0..size {
                for k in 0..8 {
                    let bit = (input[i * size + j] >> k) & 1;
                    let row = j * 8 + k;
                    out[row * n / 8 + i / 8] |= bit << (i % 8);
                }
            }
        }
        out
    }

    #[test]
    fn untranspose_inverts_the_reference_transpose() {
        // Blocks shorter than the SIMD run of 128 elements, exactly one, and runs with a
        // scalar tail.
        for (size, n) in [1, 2, 4, 8].into_iter().flat_map(|s| [64, 128, 136, 2048, 2056].map(move |n| (s, n))) {
            let data: Vec<u8> = (0..n * size).map(|i| (i * 37 + i / 3) as u8).collect();
            let shuffled = bit_transpose_reference(&data, n, size);
            let mut back = vec![0u8; n * size];
            bit_untranspose(&shuffled, &mut back, n, size);
            assert_eq!(back, data, "size {size}, {n} elements");
        }
    }

    #[test]
    fn transpose8_is_an_involution_and_moves_bits() {
        assert_eq!(transpose8(1 << 1), 1 << 8);
        assert_eq!(transpose8(transpose8(0x0123_4567_89AB_CDEF)), 0x0123_4567_89AB_CDEF);
    }

    #[test]
    fn shuffle_round_trip() {
        let data: Vec<u8> = (0..21).collect();
        // 5 elements of 4 bytes, one trailing byte.
        let mut shuffled = vec![0u8; 21];
        for i in 0..5 {
            for j in 0..4 {
                shuffled[j * 5 + i] = data[i * 4 + j];
            }
        }
        shuffled[20] = 20;
        assert_eq!(unshuffle(&shuffled, 4), data);
    }

    /// Issue 33, finding 4: a 5 KiB file gave bitshuffle an element size of 2^32 - 1 and
    /// the decoder asked for a 512 GiB scratch buffer (the process aborted).
    #[test]
    fn filter_parameters_that_do_not_fit_the_elements_are_refused() {
        let bitshuffle = |params: Vec<u32>| Filter { id: BITSHUFFLE, name: None, client_data: params };
        let mut chunk = 64u64.to_be_bytes().to_vec();
        chunk.extend(0u32.to_be_bytes());
        let huge = [bitshuffle(vec![0, 4, u32::MAX, 0, 2])];
        let msg = decode(&huge, 0, &chunk, 2, 64).unwrap_err();
        assert!(msg.contains("element size of 4294967295") && msg.contains("2 bytes"), "{msg}");
        let mut out = Vec::new();
        assert!(decode_into(&huge, 0, &chunk, 2, 64, &mut out).is_err());
        let odd_block = [bitshuffle(vec![0, 4, 2, 12, 0])];
        assert!(decode(&odd_block, 0, &[0; 64], 2, 64).unwrap_err().contains("multiple of 8"));
        let shuffle = [Filter { id: SHUFFLE, name: None, client_data: vec![u32::MAX] }];
        assert!(decode(&shuffle, 0, &[0; 64], 4, 64).unwrap_err().contains("element size"));
        // A block larger than the chunk needs no more scratch than the chunk.
        let mut big_block = 64u64.to_be_bytes().to_vec();
        big_block.extend(u32::MAX.to_be_bytes());
        assert!(bitshuffle_into(&big_block, 2, true, 0, 64, &mut out).is_err());
    }

    #[test]
    fn lying_headers_are_errors_not_panics() {
        assert!(bitshuffle(&[0; 5], 2, true, 0, 100).is_err());
        let mut head = 1000u64.to_be_bytes().to_vec();
        head.extend(16u32.to_be_bytes());
        assert!(bitshuffle(&head, 2, true, 0, 100).unwrap_err().contains("expected at most"));
        let mut head = 64u64.to_be_bytes().to_vec();
        head.extend(64u32.to_be_bytes());
        head.extend(9999u32.to_be_bytes());
        assert!(bitshuffle(&head, 2, true, 0, 64).unwrap_err().contains("cut short"));
        assert!(hdf5_lz4(&head, 64).is_err());
        assert!(inflate(&[1, 2, 3], 10).is_err());
    }
}
