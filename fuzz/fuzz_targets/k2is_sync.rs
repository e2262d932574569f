//! K2IS block headers and sector synchronisation: eight sectors built from the input's
//! block headers (pixel data zero), so the fuzzer steers block counts, frame ids, flags.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use udf_host::dataset::k2is::block::{BLOCK_SIZE, BlockHeader, HEADER_SIZE, unpack12};
use udf_host::dataset::k2is::{SectorBytes, sync};

fuzz_target!(|data: &[u8]| {
    let _ = BlockHeader::parse(data);
    let mut px = [0u16; 16];
    unpack12(&data[..data.len().min(24)], &mut px);
    if data.len() < 2 + HEADER_SIZE {
        return;
    }
    let blocks = usize::from(data[0] % 72);
    let stem = data[1] & 1 == 1;
    let headers = &data[2..];
    let count = headers.len() / HEADER_SIZE;
    let mut sectors = Vec::new();
    for s in 0..8 {
        let mut bytes = vec![0u8; blocks * BLOCK_SIZE + usize::from(data[0] / 72)];
        for b in 0..blocks {
            let h = (s * blocks + b) % count;
            bytes[b * BLOCK_SIZE..b * BLOCK_SIZE + HEADER_SIZE].copy_from_slice(&headers[h * HEADER_SIZE..(h + 1) * HEADER_SIZE]);
        }
        sectors.push(bytes);
    }
    let path = Path::new("sector");
    let views: Vec<SectorBytes<'_>> = sectors.iter().map(|b| SectorBytes { path, bytes: b }).collect();
    let _ = sync(&views, stem);
});
