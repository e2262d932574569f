//! The format registry: one table row per format, with its `--format` names, file
//! extensions, content test and opener. [`Format::parse`], [`Format::NAMES`],
//! [`Format::detect`] and [`open`](super::open) are all derived from [`FORMATS`].
//!
//! Detection reads the file head once ([`FileHead`]): a format claiming the file's
//! extension wins, then the first format (in table order) whose content test accepts the
//! head; anything else is raw data.

use super::reshaped::ShapeHints;
use super::{Dataset, DatasetError, OpenOptions};
use super::{blo, dm, empad, hdf5, k2is, mib, mrc, npy, raw, raw_csr, seq, tvips};
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

/// Bytes read from the start of a file for detection. Large enough for an EMPAD XML
/// whose `<raw_file>` element comes after a long list of reconstructions.
pub const HEAD_BYTES: usize = 64 << 10;

/// Dataset formats (each a row of [`FORMATS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Headerless binary, C order; needs dtype and shapes.
    Raw,
    /// NumPy `.npy`.
    Npy,
    /// Quantum Detectors Merlin `.mib` (+ `.hdr`).
    Mib,
    /// EMPAD `.xml` + `.raw`.
    Empad,
    /// NanoMegas `.blo`.
    Blo,
    /// NorPix `.seq`.
    Seq,
    /// MRC `.mrc`.
    Mrc,
    /// TVIPS `_NNN.tvips` series.
    Tvips,
    /// HDF5 (`.h5`, `.hdf5`, `.nxs`, `.emd`, `.hspy`).
    Hdf5,
    /// LiberTEM's raw CSR sparse format (`.toml` + three raw files).
    RawCsr,
    /// Gatan DigitalMicrograph `.dm3` / `.dm4`.
    Dm,
    /// Gatan K2 IS raw data: 8 sector `.bin` files and a `.gtg` file.
    K2is,
}

/// The start of a file and its extension (lower case), read once for detection.
#[derive(Debug, Clone, Default)]
pub struct FileHead {
    pub ext: Option<String>,
    /// Up to [`HEAD_BYTES`] bytes (fewer for a short or unreadable file).
    pub bytes: Vec<u8>,
}

impl FileHead {
    /// Read the head of `path` (an unreadable file has an empty head).
    pub fn read(path: &Path) -> Self {
        let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
        let mut bytes = Vec::new();
        if let Ok(file) = crate::dataset::mapped::open_file(path) {
            let _ = file.take(HEAD_BYTES as u64).read_to_end(&mut bytes);
        }
        FileHead { ext, bytes }
    }

    fn ext_is(&self, ext: &str) -> bool {
        self.ext.as_deref() == Some(ext)
    }
}

/// What a format's opener returns: the frames found, and what the metadata says about
/// the shape (applied by [`reshaped::apply`](super::reshaped::apply)).
pub type Opened = (Arc<dyn Dataset>, ShapeHints);

/// One format: names, extensions, content test, opener.
pub struct FormatSpec {
    pub format: Format,
    /// The `--format` name, also used in messages and `info`.
    pub name: &'static str,
    /// Other accepted `--format` values.
    pub aliases: &'static [&'static str],
    /// File extensions (lower case) that select the format without looking inside.
    pub extensions: &'static [&'static str],
    /// Whether a file's head looks like this format.
    pub sniff: fn(&FileHead) -> bool,
    /// Open a file of this format.
    pub open: fn(&Path, &OpenOptions) -> Result<Opened, DatasetError>,
    /// One line for `--help` and the docs.
    pub description: &'static str,
}

fn never(_: &FileHead) -> bool {
    false
}

/// A reader that applies `--nav-shape`/`--sig-shape` itself, wrapped as a table opener.
fn reshaped<D: Dataset + 'static>(data: D, nav_source: &str) -> Result<Opened, DatasetError> {
    let hints = ShapeHints { nav_source: Some(nav_source.to_owned()), ..ShapeHints::reshaped() };
    Ok((Arc::new(data), hints))
}

/// Every format, in the order content tests are tried.
pub static FORMATS: &[FormatSpec] = &[
    FormatSpec {
        format: Format::Npy,
        name: "npy",
        aliases: &[],
        extensions: &["npy"],
        sniff: |h| h.bytes.starts_with(b"\x93NUMPY"),
        open: |p, o| reshaped(npy::open(p, o)?, "the .npy header"),
        description: "NumPy .npy: dtype and shape from the header",
    },
    FormatSpec {
        format: Format::Mib,
        name: "mib",
        aliases: &["merlin"],
        extensions: &["mib", "hdr"],
        sniff: |h| mib::sniff(&h.bytes),
        open: mib::open,
        description: "Quantum Detectors Merlin .mib (single file or numbered set) + .hdr",
    },
    FormatSpec {
        format: Format::Empad,
        name: "empad",
        aliases: &[],
        extensions: &[],
        sniff: |h| h.ext_is("xml") && empad::sniff_xml(&h.bytes),
        open: empad::open,
        description: "EMPAD .xml + .raw (128 x 128 float32 frames with a 2-row footer)",
    },
    FormatSpec {
        format: Format::Blo,
        name: "blo",
        aliases: &[],
        extensions: &["blo"],
        sniff: |h| blo::sniff(&h.bytes),
        open: blo::open,
        description: "NanoMegas .blo",
    },
    FormatSpec {
        format: Format::Seq,
        name: "seq",
        aliases: &[],
        extensions: &["seq"],
        sniff: |h| seq::sniff(&h.bytes),
        open: seq::open,
        description: "NorPix .seq",
    },
    FormatSpec {
        format: Format::Mrc,
        name: "mrc",
        aliases: &[],
        extensions: &["mrc", "mrcs"],
        sniff: |h| mrc::sniff(&h.bytes),
        open: mrc::open,
        description: "MRC2014 .mrc/.mrcs (+ DE's _info.txt for the scan shape)",
    },
    FormatSpec {
        format: Format::Tvips,
        name: "tvips",
        aliases: &[],
        extensions: &["tvips"],
        sniff: |h| tvips::sniff(&h.bytes),
        open: tvips::open,
        description: "TVIPS <name>_NNN.tvips series",
    },
    FormatSpec {
        format: Format::Hdf5,
        name: "hdf5",
        aliases: &["h5"],
        extensions: &["h5", "hdf5", "nxs", "emd", "hspy"],
        sniff: |h| hdf5::sniff(&h.bytes),
        open: hdf5::open,
        description: "HDF5 (.h5 .hdf5 .nxs .emd .hspy; DECTRIS master files, Velox and EMD stacks)",
    },
    FormatSpec {
        format: Format::RawCsr,
        name: "raw_csr",
        aliases: &["csr"],
        extensions: &["toml"],
        sniff: never,
        open: |p, o| reshaped(raw_csr::open(p, o)?, "the TOML file's nav_shape"),
        description: "LiberTEM's raw CSR sparse format (.toml + three raw files)",
    },
    FormatSpec {
        format: Format::Dm,
        name: "dm",
        aliases: &["dm3", "dm4"],
        extensions: &["dm3", "dm4"],
        sniff: never,
        open: |p, o| reshaped(dm::open(p, o)?, "the image's Dimensions"),
        description: "Gatan DigitalMicrograph .dm3/.dm4 (one image, C order)",
    },
    FormatSpec {
        format: Format::K2is,
        name: "k2is",
        aliases: &["k2"],
        extensions: &["gtg"],
        sniff: |h| h.ext_is("bin") && h.bytes.len() >= 4 && h.bytes[..4] == k2is::block::SYNC.to_be_bytes(),
        open: |p, o| {
            let data = k2is::open(p, o)?;
            let source = data.nav_source().to_owned();
            reshaped(data, &source)
        },
        description: "Gatan K2 IS: 8 sector .bin files + .gtg",
    },
    FormatSpec {
        format: Format::Raw,
        name: "raw",
        aliases: &["bin"],
        extensions: &[],
        sniff: never,
        open: |p, o| reshaped(raw::open(p, o)?, "the file size"),
        description: "headerless binary, C order (needs --dtype and --sig-shape)",
    },
];

/// The `--format` names, for messages: `Display`s as `raw, npy, mib, ...`.
#[derive(Debug, Clone, Copy)]
pub struct FormatNames;

impl std::fmt::Display for FormatNames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&str> = FORMATS.iter().map(|s| s.name).collect();
        // raw first: the format of last resort is the one most people pass by hand.
        names.rotate_right(1);
        f.write_str(&names.join(", "))
    }
}

impl Format {
    /// The `--format` names, for messages.
    pub const NAMES: FormatNames = FormatNames;

    /// The table row of this format.
    pub fn spec(self) -> &'static FormatSpec {
        FORMATS.iter().find(|s| s.format == self).unwrap_or(&FORMATS[FORMATS.len() - 1])
    }

    /// Parse a `--format` value (a name or an alias, any case).
    pub fn parse(name: &str) -> Option<Self> {
        let name = name.trim().to_ascii_lowercase();
        FORMATS.iter().find(|s| s.name == name || s.aliases.contains(&name.as_str())).map(|s| s.format)
    }

    /// The name used by `--format` and in messages.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// Guess from the file name, then the first bytes.
    pub fn detect(path: &Path) -> Self {
        Self::detect_head(&FileHead::read(path))
    }

    /// Guess from a file head read once: extension, then content, else raw.
    pub fn detect_head(head: &FileHead) -> Self {
        if let Some(ext) = head.ext.as_deref()
            && let Some(spec) = FORMATS.iter().find(|s| s.extensions.contains(&ext))
        {
            return spec.format;
        }
        FORMATS.iter().find(|s| (s.sniff)(head)).map_or(Format::Raw, |s| s.format)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_aliases_and_extensions_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for spec in FORMATS {
            for name in std::iter::once(&spec.name).chain(spec.aliases) {
                assert!(seen.insert(*name), "--format {name} twice");
                assert_eq!(Format::parse(&name.to_ascii_uppercase()), Some(spec.format));
            }
            assert_eq!(spec.format.name(), spec.name);
        }
        let mut exts = std::collections::HashSet::new();
        for ext in FORMATS.iter().flat_map(|s| s.extensions) {
            assert!(exts.insert(*ext), "extension {ext} claimed twice");
        }
        assert_eq!(FORMATS.len(), 12);
        assert!(Format::NAMES.to_string().starts_with("raw, npy, mib, empad"));
    }

    #[test]
    fn detection_by_extension_then_content() {
        let head = |ext: &str, bytes: &[u8]| FileHead { ext: Some(ext.into()), bytes: bytes.to_vec() };
        assert_eq!(Format::detect_head(&head("h5", b"")), Format::Hdf5);
        assert_eq!(Format::detect_head(&head("dat", b"\x89HDF\r\n\x1a\n")), Format::Hdf5);
        assert_eq!(Format::detect_head(&head("x", b"\x93NUMPY\x01\x00")), Format::Npy);
        assert_eq!(Format::detect_head(&head("x", b"MQ1,000001")), Format::Mib);
        assert_eq!(Format::detect_head(&head("bin", &[0xff, 0xff, 0, 0x55])), Format::K2is);
        assert_eq!(Format::detect_head(&head("raw", &[0xff, 0xff, 0, 0x55])), Format::Raw);
        assert_eq!(Format::detect_head(&head("xml", b"<root><raw_file filename='a.raw'/></root>")), Format::Empad);
        assert_eq!(Format::detect_head(&head("xml", b"<root/>")), Format::Raw);
        assert_eq!(Format::detect_head(&FileHead::default()), Format::Raw);
    }
}
