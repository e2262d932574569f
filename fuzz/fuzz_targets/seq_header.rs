//! The SEQ header parser and the sizes derived from it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use udf_host::dataset::seq::SeqHeader;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = SeqHeader::parse(data) {
        let _ = (h.frame_bytes(), h.image_offset(), h.dtype());
    }
});
