//! The DM3/DM4 tag-tree parser and the image lookup on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use udf_host::dataset::dm::{find_image, tags};

fuzz_target!(|data: &[u8]| {
    if let Ok(file) = tags::parse(data) {
        let _ = find_image(&file, data);
    }
});
