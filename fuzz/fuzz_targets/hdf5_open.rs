//! Opening an HDF5 file (superblock, object headers, groups, datatypes, layouts, chunk
//! indexes) and reading one tile, from arbitrary bytes. Seed with tests/data/hdf5/*.h5.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::Write;
use udf_host::dataset::{self, Format, OpenOptions, SigSlice};
use udf_host::dtype::DType;

fuzz_target!(|data: &[u8]| {
    let mut file = tempfile_in_shm();
    if file.1.write_all(data).is_err() {
        return;
    }
    let options = OpenOptions { format: Some(Format::Hdf5), ..OpenOptions::default() };
    if let Ok(ds) = dataset::open(&file.0, &options) {
        let shape = ds.shape().clone();
        if shape.nav_len() > 0 && shape.sig_len() > 0 && shape.sig_len() < (1 << 22) {
            let sig = SigSlice::full(&shape.sig);
            let mut out = vec![0u8; sig.len() * 8];
            let _ = ds.read_tile(&[0], &sig, DType::F64, &mut out);
        }
    }
    let _ = std::fs::remove_file(&file.0);
});

fn tempfile_in_shm() -> (std::path::PathBuf, std::fs::File) {
    let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/tmp" };
    let path = std::path::PathBuf::from(format!("{dir}/fuzz-hdf5-{}.h5", std::process::id()));
    let file = std::fs::File::create(&path).expect("temp file");
    (path, file)
}
