//! Whole files: the first byte picks the format, the rest is the file. Opening must
//! succeed or fail with an error, and reading the first and last frame must not panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use udf_host::dataset::{self, Format, OpenOptions, SigSlice};
use udf_host::dtype::DType;

const FORMATS: [(Format, &str); 5] =
    [(Format::Mib, "mib"), (Format::Blo, "blo"), (Format::Seq, "seq"), (Format::Mrc, "mrc"), (Format::Tvips, "x_000.tvips")];

fuzz_target!(|data: &[u8]| {
    let Some((&which, file)) = data.split_first() else { return };
    let (format, name) = FORMATS[usize::from(which) % FORMATS.len()];
    let Ok(dir) = tempfile::tempdir() else { return };
    let path = dir.path().join(format!("f.{name}").replace("f.x_", "x_"));
    if std::fs::write(&path, file).is_err() {
        return;
    }
    let options = OpenOptions { format: Some(format), nav_shape: None, ..Default::default() };
    let Ok(ds) = dataset::open(&path, &options) else { return };
    let shape = ds.shape().clone();
    let n = shape.nav_len() as u64;
    if n == 0 || shape.sig_len() > 1 << 20 {
        return;
    }
    let full = SigSlice::full(&shape.sig);
    let mut out = vec![0u8; full.len() * 4];
    for frame in [0, n - 1] {
        let _ = ds.read_tile(&[frame], &full, DType::F32, &mut out);
    }
});
