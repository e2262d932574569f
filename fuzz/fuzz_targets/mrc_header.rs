//! The MRC header parser and the sizes derived from it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use udf_host::dataset::mrc::MrcHeader;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = MrcHeader::parse(data) {
        let _ = (h.frame_bytes(), h.data_offset());
    }
});
