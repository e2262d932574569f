//! The HDF5 filter decoders (deflate, shuffle, fletcher32, LZ4, bitshuffle with and
//! without LZ4) on arbitrary chunk bytes and filter parameters.
#![no_main]

use libfuzzer_sys::fuzz_target;
use udf_host::dataset::hdf5::filters::{BITSHUFFLE, DEFLATE, FLETCHER32, Filter, LZ4, SHUFFLE, decode};

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let ids = [DEFLATE, SHUFFLE, FLETCHER32, LZ4, BITSHUFFLE];
    let elem = [1usize, 2, 4, 8][usize::from(data[1] % 4)];
    let filters: Vec<Filter> = (0..usize::from(data[0] % 3) + 1)
        .map(|i| {
            let id = ids[usize::from(data[2].wrapping_add(i as u8 * 3)) % ids.len()];
            let client_data = match id {
                BITSHUFFLE => vec![0, 4, elem as u32, u32::from(data[3]) * 8, if data[3] & 1 == 1 { 2 } else { 0 }],
                SHUFFLE => vec![elem as u32],
                _ => vec![],
            };
            Filter { id, name: None, client_data }
        })
        .collect();
    let expected = (usize::from(data[3]) + 1) * 64;
    let _ = decode(&filters, 0, &data[4..], elem, expected);
});
