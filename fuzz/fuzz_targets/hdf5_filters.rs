//! The HDF5 filter decoders (deflate, shuffle, fletcher32, LZ4, bitshuffle with and
//! without LZ4) on arbitrary chunk bytes, pipelines and filter parameters: the element
//! size, the expected size, the filter mask and every filter's client data come from the
//! input, as they come from a file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use udf_host::dataset::hdf5::filters::{BITSHUFFLE, DEFLATE, FLETCHER32, Filter, LZ4, SHUFFLE, decode, decode_into};

/// The filters we decode and one we do not (szip).
const IDS: [u16; 6] = [DEFLATE, SHUFFLE, FLETCHER32, LZ4, BITSHUFFLE, 4];

fuzz_target!(|data: &[u8]| {
    let Some((head, mut rest)) = data.split_first_chunk::<5>() else { return };
    let elem = usize::from(head[0] % 17);
    let expected = usize::from(u16::from_le_bytes([head[1], head[2]]));
    let mask = u32::from(head[3]);
    let mut filters = Vec::new();
    for _ in 0..head[4] % 4 {
        let Some((&[select, count], after)) = rest.split_first_chunk::<2>() else { break };
        let count = usize::from(count % 6);
        let Some((params, after)) = after.split_at_checked(4 * count) else { break };
        let client_data = params.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        filters.push(Filter { id: IDS[usize::from(select) % IDS.len()], name: None, client_data });
        rest = after;
    }
    let _ = decode(&filters, mask, rest, elem, expected);
    let mut out = Vec::new();
    let _ = decode_into(&filters, mask, rest, elem, expected, &mut out);
});
