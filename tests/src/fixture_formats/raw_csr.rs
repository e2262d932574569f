//! Raw CSR fixtures (LiberTEM's sparse format): a TOML file and three raw files written
//! from a dense [`Data`], keeping only the non-zero values.

use crate::fixtures::{Data, Ty};
use std::path::{Path, PathBuf};

/// Integer types for the index files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Index {
    I32,
    I64,
    U16,
    U32,
}

impl Index {
    fn code(self) -> &'static str {
        match self {
            Index::I32 => "<i4",
            Index::I64 => "<i8",
            Index::U16 => "<u2",
            Index::U32 => "<u4",
        }
    }

    fn bytes(self, v: u64) -> Vec<u8> {
        match self {
            Index::I32 => (v as i32).to_le_bytes().to_vec(),
            Index::I64 => (v as i64).to_le_bytes().to_vec(),
            Index::U16 => (v as u16).to_le_bytes().to_vec(),
            Index::U32 => (v as u32).to_le_bytes().to_vec(),
        }
    }
}

/// How to write the fixture.
#[derive(Debug, Clone, Copy)]
pub struct CsrLayout {
    pub indptr: Index,
    pub indices: Index,
    pub data: Ty,
    pub big_endian_data: bool,
}

/// The TOML text for the given file names and dtypes.
pub fn toml_text(nav: &[usize], sig: &[usize], layout: &CsrLayout, prefix: &str) -> String {
    let order = if layout.big_endian_data { '>' } else { '<' };
    format!(
        "[params]\nfiletype = \"raw_csr\"\nnav_shape = {nav:?}\nsig_shape = {sig:?}\n\n[raw_csr]\n\
         indptr_file = \"{prefix}_indptr.raw\"\nindptr_dtype = \"{}\"\n\
         indices_file = \"{prefix}_indices.raw\"\nindices_dtype = \"{}\"\n\
         data_file = \"{prefix}_data.raw\"\ndata_dtype = \"{order}{}\"\n",
        layout.indptr.code(),
        layout.indices.code(),
        layout.data.code()
    )
}

/// Write `data` (its non-zero values, as `layout.data`) as `<dir>/<prefix>.toml` plus the
/// three raw files; returns the TOML path. `extra` adds (frame, flat sig index, value)
/// entries after each frame's own (duplicates add up when read).
pub fn write(dir: &Path, prefix: &str, data: &Data, layout: &CsrLayout, extra: &[(usize, usize, f64)]) -> PathBuf {
    let mut indptr = layout.indptr.bytes(0);
    let mut indices = Vec::new();
    let mut values = Vec::new();
    let mut count = 0u64;
    for f in 0..data.frames() {
        for (p, &v) in data.frame(f).iter().enumerate() {
            if layout.data.round(v) != 0.0 {
                indices.extend(layout.indices.bytes(p as u64));
                values.extend(layout.data.to_bytes(v, layout.big_endian_data));
                count += 1;
            }
        }
        for &(ef, p, v) in extra {
            if ef == f {
                indices.extend(layout.indices.bytes(p as u64));
                values.extend(layout.data.to_bytes(v, layout.big_endian_data));
                count += 1;
            }
        }
        indptr.extend(layout.indptr.bytes(count));
    }
    std::fs::write(dir.join(format!("{prefix}_indptr.raw")), indptr).expect("write indptr");
    std::fs::write(dir.join(format!("{prefix}_indices.raw")), indices).expect("write indices");
    std::fs::write(dir.join(format!("{prefix}_data.raw")), values).expect("write data");
    let toml = dir.join(format!("{prefix}.toml"));
    std::fs::write(&toml, toml_text(&data.nav, &data.sig, layout, prefix)).expect("write toml");
    toml
}
