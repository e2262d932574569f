//! The TVIPS header parser and the sizes derived from it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use udf_host::dataset::tvips::TvipsHeader;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = TvipsHeader::parse(data) {
        let _ = (h.frame_bytes(), h.stride());
    }
});
