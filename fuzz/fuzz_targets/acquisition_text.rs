//! The acquisition records read for a scan shape: EMPAD's XML, Direct Electron's
//! `_info.txt`, and Merlin frame timestamps with the line-flyback detection built on them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use udf_host::dataset::empad::EmpadXml;
use udf_host::dataset::mib::header::{flyback_width, frame_time_ns};
use udf_host::dataset::mrc::de_scan_shape;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = EmpadXml::parse(text);
        let _ = de_scan_shape(text);
    }
    // Frame headers separated by newlines: their times, then the flyback search over them.
    let times: Vec<i128> = data.split(|b| *b == b'\n').filter_map(frame_time_ns).collect();
    let _ = flyback_width(&times);
});
