//! LZ4 block decoding, as HDF5's LZ4 filter and bitshuffle-LZ4 store blocks. Safe code,
//! every length and offset checked. Written here rather than taken from `lz4_flex` (whose
//! safe decoder we used before): that one copies a match that overlaps its own output one
//! byte at a time, and sparse detector frames, bit-shuffled, are mostly such matches
//! (runs of zero bit planes). Here an overlapping match fills by doubling copies.
//! Measured in docs/benchmarks.md ("Python, Dask and compressed HDF5").

/// Decode one LZ4 block from `input` into the start of `out`; the number of bytes
/// written. The block may end after its last literals (as the format asks) or after a
/// match.
///
/// # Errors
/// A message naming what does not fit: literals or a match past the end of the input or
/// of `out`, an offset of 0 or reaching before the start of the output.
pub fn decompress_into(input: &[u8], out: &mut [u8]) -> Result<usize, String> {
    let mut i = 0usize; // read position in `input`
    let mut o = 0usize; // write position in `out`
    while i < input.len() {
        let token = input[i];
        i += 1;
        let mut literals = usize::from(token >> 4);
        if literals == 15 {
            literals += length(input, &mut i)?;
        }
        let source = i
            .checked_add(literals)
            .and_then(|end| input.get(i..end))
            .ok_or_else(|| format!("{literals} literals at byte {i} run past the end of the block"))?;
        let expected = out.len();
        let dest = o
            .checked_add(literals)
            .and_then(|end| out.get_mut(o..end))
            .ok_or_else(|| format!("{literals} literals run past the {expected} bytes expected"))?;
        dest.copy_from_slice(source);
        i += literals;
        o += literals;
        if i == input.len() {
            break;
        }
        let offset = match input.get(i..i + 2) {
            Some(&[lo, hi]) => usize::from(u16::from_le_bytes([lo, hi])),
            _ => return Err(format!("the block ends inside the match offset at byte {i}")),
        };
        i += 2;
        if offset == 0 || offset > o {
            return Err(format!("match offset {offset} at output byte {o} is out of range"));
        }
        let mut len = usize::from(token & 15) + 4;
        if token & 15 == 15 {
            len += length(input, &mut i)?;
        }
        if o.checked_add(len).is_none_or(|end| end > out.len()) {
            return Err(format!("a match of {len} bytes runs past the {} bytes expected", out.len()));
        }
        let start = o - offset;
        if offset >= len {
            out.copy_within(start..start + len, o);
        } else if offset == 1 {
            let byte = out[start];
            out[o..o + len].fill(byte);
        } else {
            // The `offset` bytes before `o` repeat: copy them, then the doubled pattern,
            // and so on (each copy's source lies wholly before its destination).
            let mut done = 0;
            while done < len {
                let n = (o + done - start).min(len - done);
                out.copy_within(start..start + n, o + done);
                done += n;
            }
        }
        o += len;
    }
    Ok(o)
}

/// An extended length: bytes added up while they are 255.
fn length(input: &[u8], i: &mut usize) -> Result<usize, String> {
    let mut sum = 0usize;
    loop {
        let byte = *input.get(*i).ok_or_else(|| format!("the block ends inside a length at byte {i}"))?;
        *i += 1;
        sum += usize::from(byte);
        if byte != 255 {
            return Ok(sum);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inputs of the shapes that matter: random bytes (literals), zeros (offset-1 runs),
    /// short periodic patterns (overlapping matches of every small offset), sparse data
    /// and a mix.
    fn samples() -> Vec<Vec<u8>> {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut random = |n: usize| -> Vec<u8> {
            (0..n)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect()
        };
        let mut out = vec![Vec::new(), vec![7], random(3), random(5000), vec![0; 70_000]];
        for period in 2..24 {
            let pattern = random(period);
            out.push(pattern.iter().cycle().take(9000 + period).copied().collect());
        }
        let sparse: Vec<u8> = random(50_000).into_iter().map(|b| if b < 8 { b } else { 0 }).collect();
        out.push(sparse.clone());
        let mut mix = random(1000);
        mix.extend(vec![0; 3000]);
        mix.extend(sparse.iter().take(4000));
        mix.extend(b"abcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabc".iter().cycle().take(777));
        out.push(mix);
        out
    }

    #[test]
    fn decodes_what_lz4_flex_encodes() {
        for data in samples() {
            let packed = lz4_flex::block::compress(&data);
            let mut back = vec![0xAA; data.len()];
            let n = decompress_into(&packed, &mut back).unwrap();
            assert_eq!(n, data.len());
            assert_eq!(back, data, "{} bytes", data.len());
        }
    }

    #[test]
    fn cut_or_damaged_blocks_are_errors_not_panics() {
        for data in samples().into_iter().filter(|d| d.len() > 100) {
            let packed = lz4_flex::block::compress(&data);
            let mut back = vec![0; data.len()];
            for cut in (0..packed.len()).step_by(7) {
                // A cut block either fails or decodes fewer bytes than the whole.
                if let Ok(n) = decompress_into(&packed[..cut], &mut back) {
                    assert!(n < data.len());
                }
            }
            for at in (0..packed.len()).step_by(11) {
                let mut damaged = packed.clone();
                damaged[at] ^= 0xFF;
                let _ = decompress_into(&damaged, &mut back);
            }
            // Too small an output is an error, never a write past it.
            let mut short = vec![0; data.len() / 2];
            assert!(decompress_into(&packed, &mut short).is_err());
        }
    }

    #[test]
    fn offsets_out_of_range_are_refused() {
        // Token: 1 literal, match length 4; offset 2 reaches before the start.
        let err = decompress_into(&[0x10, b'x', 2, 0], &mut [0; 16]).unwrap_err();
        assert!(err.contains("offset 2"), "{err}");
        let err = decompress_into(&[0x10, b'x', 0, 0], &mut [0; 16]).unwrap_err();
        assert!(err.contains("offset 0"), "{err}");
    }
}
