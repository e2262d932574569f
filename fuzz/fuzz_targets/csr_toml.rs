//! The raw CSR TOML descriptor parser on arbitrary text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use udf_host::dataset::raw_csr::parse_descriptor;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_descriptor(text, std::path::Path::new("/nonexistent"));
    }
});
