//! Merlin frame headers and acquisition headers: parse, then derive the frame layout
//! (sizes, raw unpacking geometry) and decode a frame's worth of bytes if they are there.
#![no_main]

use libfuzzer_sys::fuzz_target;
use udf_host::dataset::SigSlice;
use udf_host::dataset::mib::{AcquisitionHeader, MibDecode, MibHeader, MibLayout};

fuzz_target!(|data: &[u8]| {
    if let Ok(hdr) = AcquisitionHeader::parse(data) {
        let _ = hdr.nav_shape();
    }
    let Ok(header) = MibHeader::parse(data) else { return };
    let _ = header.to_string();
    let _ = header.layout_dims();
    let Ok(layout) = MibLayout::new(&header) else { return };
    let _ = layout.stored();
    if let MibDecode::Raw(raw) = &layout.decode {
        let payload = &data[header.header_bytes.min(data.len())..];
        if payload.len() >= raw.frame_bytes() && raw.height * raw.width <= 1 << 16 {
            let full = SigSlice::full(&layout.sig);
            let mut out = vec![0u32; full.len()];
            raw.decode(payload, &full, &mut out);
        }
    }
});
