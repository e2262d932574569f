//! The BLO header parser and the sizes derived from it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use udf_host::dataset::blo::BloHeader;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = BloHeader::parse(data) {
        let _ = (h.frame_bytes(), h.frames());
    }
});
