//! Hostile headers: sizes that overflow, fields that lie, garbage after magic numbers.
//! Each must give an error (or a consistent layout), never a panic. Inputs that the fuzz
//! targets (`fuzz/`) found are kept in `tests/fuzz_regressions/<target>/` and replayed
//! here through the same calls as the targets.

use std::path::Path;
use udf_host::dataset::blo::BloHeader;
use udf_host::dataset::mib::{AcquisitionHeader, MibDecode, MibHeader, MibLayout};
use udf_host::dataset::mrc::MrcHeader;
use udf_host::dataset::seq::SeqHeader;
use udf_host::dataset::tvips::TvipsHeader;
use udf_host::dataset::{self, Format, OpenOptions, SigSlice};
use udf_host::dtype::DType;

/// What the `mib_header` fuzz target does.
fn mib_header(data: &[u8]) {
    if let Ok(hdr) = AcquisitionHeader::parse(data) {
        let _ = hdr.nav_shape();
    }
    let Ok(header) = MibHeader::parse(data) else { return };
    let _ = header.to_string();
    let Ok(layout) = MibLayout::new(&header) else { return };
    if let MibDecode::Raw(raw) = &layout.decode {
        let payload = &data[header.header_bytes.min(data.len())..];
        if payload.len() >= raw.frame_bytes() && raw.height * raw.width <= 1 << 16 {
            let full = SigSlice::full(&layout.sig);
            let mut out = vec![0u32; full.len()];
            raw.decode(payload, &full, &mut out);
        }
    }
}

/// What the `open_file` fuzz target does.
fn open_file(data: &[u8]) {
    let Some((&which, file)) = data.split_first() else { return };
    let formats = [
        (Format::Mib, "f.mib"),
        (Format::Blo, "f.blo"),
        (Format::Seq, "f.seq"),
        (Format::Mrc, "f.mrc"),
        (Format::Tvips, "x_000.tvips"),
    ];
    let (format, name) = formats[usize::from(which) % formats.len()];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, file).unwrap();
    let Ok(ds) = dataset::open(&path, &OpenOptions { format: Some(format), ..Default::default() }) else { return };
    let n = ds.shape().nav_len() as u64;
    if n == 0 || ds.shape().sig_len() > 1 << 20 {
        return;
    }
    let full = SigSlice::full(&ds.shape().sig);
    let mut out = vec![0u8; full.len() * 4];
    for frame in [0, n - 1] {
        let _ = ds.read_tile(&[frame], &full, DType::F32, &mut out);
    }
}

fn replay(target: &str, run: &dyn Fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz_regressions").join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else { return 0 };
    let mut n = 0;
    for entry in entries.filter_map(Result::ok) {
        run(&std::fs::read(entry.path()).unwrap());
        n += 1;
    }
    n
}

#[test]
fn mib_headers_with_absurd_sizes_are_errors() {
    let mut header = b"MQ1,000001,00384,01,4294967295,4294967295,U64,   1x1,01,x,0,0,0,0,12,".to_vec();
    header.resize(384, 0);
    let parsed = MibHeader::parse(&header).unwrap();
    assert!(MibLayout::new(&parsed).is_err(), "w x h x 8 overflows");
    let mut raw = b"MQ1,000001,00384,04,99999999999,3,R64,   2x2,0F,x,0,0,0,0,12,".to_vec();
    raw.resize(384, 0);
    assert!(MibLayout::new(&MibHeader::parse(&raw).unwrap()).is_err());
    for bad in [&b"MQ1,"[..], b"MQ1,1,", b"MQ1,1,00031,", b"MQ1,1,99999999999999999999999,", b"MQ1,1,70000,"] {
        assert!(MibHeader::parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
    }
    mib_header(&raw);
    replay("mib_header", &mib_header);
}

#[test]
fn huge_dimensions_in_fixed_headers_are_errors_not_overflows() {
    // MRC: NX = NY = NZ = i32::MAX of complex64.
    let mut mrc = vec![0u8; 1100];
    for i in 0..3 {
        mrc[4 * i..4 * i + 4].copy_from_slice(&i32::MAX.to_le_bytes());
    }
    mrc[12..16].copy_from_slice(&4i32.to_le_bytes());
    mrc[208..212].copy_from_slice(b"MAP ");
    let h = MrcHeader::parse(&mrc).unwrap();
    assert_eq!(h.frame_bytes(), u64::MAX, "saturates instead of overflowing");
    let mut with_format = vec![3u8];
    with_format.extend_from_slice(&mrc);
    open_file(&with_format);
    // SEQ: 2^32-1 x 2^32-1 x 32 bits.
    let mut seq = vec![0u8; 1024];
    seq[..4].copy_from_slice(&0xFEEDu32.to_le_bytes());
    for o in [548, 552, 580] {
        seq[o..o + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    }
    seq[556..560].copy_from_slice(&32u32.to_le_bytes());
    seq[568..572].copy_from_slice(&100u32.to_le_bytes());
    assert!(SeqHeader::parse(&seq).is_err(), "true_image_size below the image size");
    let mut with_format = vec![2u8];
    with_format.extend_from_slice(&seq);
    open_file(&with_format);
    // TVIPS: i32::MAX x i32::MAX x 16 bits, header bytes i32::MAX.
    let mut tvips = vec![0u8; 300];
    for (i, v) in [256, 2, i32::MAX, i32::MAX, 16].iter().enumerate() {
        tvips[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
    }
    tvips[48..52].copy_from_slice(&i32::MAX.to_le_bytes());
    let h = TvipsHeader::parse(&tvips).unwrap();
    assert!(h.stride() > h.frame_bytes());
    let mut with_format = vec![4u8];
    with_format.extend_from_slice(&tvips);
    open_file(&with_format);
    // BLO: the largest u16 sizes, Data_offset_2 beyond the file.
    let mut blo = vec![0u8; 300];
    blo[..6].copy_from_slice(b"IMGBLO");
    blo[6..8].copy_from_slice(&259u16.to_le_bytes());
    blo[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    blo[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    for o in [20, 24, 26] {
        blo[o..o + 2].copy_from_slice(&u16::MAX.to_le_bytes());
    }
    assert!(BloHeader::parse(&blo).is_ok());
    let mut with_format = vec![1u8];
    with_format.extend_from_slice(&blo);
    open_file(&with_format);
    for (target, run) in [("open_file", &open_file as &dyn Fn(&[u8])), ("mib_header", &mib_header)] {
        replay(target, run);
    }
    for target in ["blo_header", "seq_header", "mrc_header", "tvips_header"] {
        replay(target, &|d| {
            let _ = (BloHeader::parse(d), SeqHeader::parse(d), MrcHeader::parse(d), TvipsHeader::parse(d));
        });
    }
}

/// What the `hdf5_open` fuzz target does: open arbitrary bytes as HDF5, read a tile.
fn hdf5_open(data: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("input.h5");
    std::fs::write(&path, data).unwrap();
    let options = OpenOptions { format: Some(Format::Hdf5), ..OpenOptions::default() };
    if let Ok(ds) = dataset::open(&path, &options) {
        let shape = ds.shape().clone();
        if shape.nav_len() > 0 && shape.sig_len() > 0 && shape.sig_len() < (1 << 22) {
            let sig = SigSlice::full(&shape.sig);
            let mut out = vec![0u8; sig.len() * 8];
            let _ = ds.read_tile(&[0], &sig, DType::F64, &mut out);
        }
    }
}

#[test]
fn hdf5_npy_and_parameter_fuzz_finds_are_errors_not_panics() {
    // An HDF5 dataspace whose dimensions overflow when multiplied (reshape's products).
    assert!(replay("hdf5_open", &hdf5_open) >= 1);
    // `--roi-rect` with a single index of usize::MAX (its + 1 overflowed).
    assert!(replay("params_roi", &udf_host::fuzzing::params_and_roi) >= 1);
    // An empty big-endian .npy array converted into an unaligned buffer; a header with
    // a non-ASCII space (U+00A0) that the parser stepped into by one byte.
    assert!(replay("npy_header", &udf_host::fuzzing::npy) >= 2);
}
