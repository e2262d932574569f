//! Quantum Detectors Merlin (Medipix3) `.mib` files, single or a numbered set, with the
//! optional `.hdr` acquisition header that gives the scan shape.
//!
//! | piece | role |
//! |-------|------|
//! | [`MibHeader`] | the `MQ1,...` header in front of every frame ([`header`]) |
//! | [`RawLayout`] | unpacking raw `R64` counters, incl. the 2x2 quad re-ordering ([`raw`]) |
//! | [`MibFile`] | one `.mib` file as a dataset |
//! | [`open`] | find the set, check it is consistent, read the `.hdr` |
//!
//! `U08`/`U16`/`U32`/`U64` frames are big-endian integers at a fixed stride (header +
//! pixels) and are read through [`MappedFrames`] with the byte swap fused into the copy.
//! A set is every `<prefix>*.mib` next to the given file, where the prefix is the file
//! name without its trailing digits (or the `.hdr` name), ordered by the sequence number
//! of each file's first frame — like LiberTEM. The files must continue each other's
//! sequence numbers and agree on the frame format.

pub mod header;
pub mod raw;

pub use header::{AcquisitionHeader, MibHeader, MibHeaderError, MibPixel};
pub use raw::RawLayout;

use super::concat::Concat;
use super::reshaped::ShapeHints;
use super::{Dataset, DatasetError, DatasetInfo, DatasetShape, MappedFrames, OpenOptions, SigSlice};
use crate::dtype::{ByteOrder, DType, StoredDType, converter};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How the pixels of each frame are stored, derived from a header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MibDecode {
    /// Big-endian integers, the frame as it is.
    Plain(StoredDType),
    /// Packed counters.
    Raw(RawLayout),
}

/// The frame geometry a header describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MibLayout {
    /// Bytes of pixels per frame.
    pub frame_bytes: usize,
    /// Header plus pixels: the distance between frames.
    pub stride: usize,
    /// Decoded frame shape `[height, width]`.
    pub sig: [usize; 2],
    /// How to decode.
    pub decode: MibDecode,
}

impl MibLayout {
    /// The layout of frames with header `header`.
    ///
    /// # Errors
    /// An unsupported pixel type/layout, or sizes that overflow.
    pub fn new(header: &MibHeader) -> Result<Self, String> {
        let (sig, frame_bytes, decode) = match header.pixel {
            MibPixel::Unsigned(size) => {
                let dtype = match size {
                    1 => DType::U8,
                    2 => DType::U16,
                    4 => DType::U32,
                    _ => DType::U64,
                };
                let bytes =
                    header.width.checked_mul(header.height).and_then(|n| n.checked_mul(size)).ok_or_else(|| {
                        format!("frames of {} x {} pixels are too large", header.width, header.height)
                    })?;
                if bytes == 0 {
                    return Err(format!("frames of {} x {} pixels", header.width, header.height));
                }
                let stored = StoredDType { dtype, order: ByteOrder::Big };
                ([header.height, header.width], bytes, MibDecode::Plain(stored))
            }
            MibPixel::Raw => {
                let raw = RawLayout::new(header)?;
                ([raw.height, raw.width], raw.frame_bytes(), MibDecode::Raw(raw))
            }
        };
        let stride = frame_bytes.checked_add(header.header_bytes).ok_or("the frame size overflows")?;
        Ok(MibLayout { frame_bytes, stride, sig, decode })
    }

    /// The stored dtype of the decoded frames.
    pub fn stored(&self) -> StoredDType {
        match &self.decode {
            MibDecode::Plain(stored) => *stored,
            MibDecode::Raw(raw) => StoredDType::le(raw.native_dtype()),
        }
    }
}

/// One `.mib` file: `frames` complete frames of one format.
pub struct MibFile {
    /// The pixels (plain) or the packed bytes (raw: `[frames, frame_bytes]` of `u8`).
    frames: MappedFrames,
    header: MibHeader,
    layout: MibLayout,
    shape: DatasetShape,
}

impl MibFile {
    /// The file's first frame header.
    pub fn header(&self) -> &MibHeader {
        &self.header
    }

    /// Check that frame `frame` starts with `MQ1,`: a file whose frames are not all the
    /// size the first header says is caught here.
    fn check_frame(&self, frame: usize) -> Result<(), DatasetError> {
        let start = self.frames.frame_offset(frame) - self.header.header_bytes;
        let head = &self.frames.bytes()[start..start + 4];
        if head == b"MQ1," {
            Ok(())
        } else {
            Err(DatasetError::invalid(
                self.frames.path(),
                format!(
                    "frame {frame} at offset {start}: expected a 'MQ1,' frame header, found {}; the frames are not \
                     all {} bytes ({} bytes of header + {} of pixels) as the first header says",
                    header::show_bytes(head),
                    self.layout.stride,
                    self.header.header_bytes,
                    self.layout.frame_bytes
                ),
            ))
        }
    }
}

impl Dataset for MibFile {
    fn shape(&self) -> &DatasetShape {
        &self.shape
    }

    fn stored_dtype(&self) -> StoredDType {
        self.layout.stored()
    }

    fn info(&self) -> DatasetInfo {
        DatasetInfo { format: "mib", path: self.frames.path().to_owned(), details: details(&self.header, &self.layout) }
    }

    fn read_tile(&self, frames: &[u64], sig: &SigSlice, dtype: DType, out: &mut [u8]) -> Result<(), DatasetError> {
        let nav_len = self.shape.nav_len() as u64;
        if let Some(&bad) = frames.iter().find(|&&f| f >= nav_len) {
            return Err(DatasetError::invalid(
                self.frames.path(),
                format!("frame {bad} is outside the file ({nav_len} frames)"),
            ));
        }
        for &f in frames {
            self.check_frame(f as usize)?;
        }
        let MibDecode::Raw(raw) = &self.layout.decode else {
            return self.frames.read_tile(frames, sig, dtype, out);
        };
        let frame_out = sig.len() * dtype.size();
        if out.len() != frames.len() * frame_out {
            return Err(DatasetError::invalid(
                self.frames.path(),
                format!("internal: tile buffer of {} bytes for {}", out.len(), frames.len() * frame_out),
            ));
        }
        let convert = converter(StoredDType::le(DType::U32), dtype);
        let mut values = vec![0u32; sig.len()];
        for (&f, dst) in frames.iter().zip(out.chunks_exact_mut(frame_out)) {
            raw.decode(self.frames.frame_bytes(f as usize), sig, &mut values);
            convert(bytemuck::cast_slice(&values), dst);
        }
        Ok(())
    }

    fn direct_frames(&self, frames: std::ops::Range<u64>, dtype: DType) -> Option<&[u8]> {
        // Headers sit between frames, so only single frames could be handed out; the
        // per-frame magic check comes first.
        let _ = (frames, dtype);
        None
    }
}

fn details(header: &MibHeader, layout: &MibLayout) -> Vec<(String, String)> {
    let mut d = vec![
        ("pixel_type".into(), header.pixel_name.clone()),
        ("header_bytes".into(), header.header_bytes.to_string()),
        ("chips".into(), header.chips.to_string()),
        ("layout".into(), header.layout.clone()),
        ("header_size_px".into(), format!("{} x {}", header.width, header.height)),
    ];
    if let Some(depth) = header.counter_depth {
        d.push(("counter_depth".into(), depth.to_string()));
    }
    if let MibDecode::Raw(raw) = &layout.decode {
        d.push(("raw_bits".into(), raw.bits.to_string()));
    }
    d
}

/// Frames whose timestamps are read to find the scan's lines.
const TIMED_FRAMES: usize = 4096;

/// The acquisition times of frames with headers `headers`, as far as they all have one.
fn frame_times(headers: &[Vec<u8>]) -> Vec<i128> {
    headers.iter().map_while(|h| header::frame_time_ns(h)).collect()
}

/// Bytes read to find a file's first header.
const HEAD_BYTES: u64 = header::MAX_HEADER_BYTES as u64;

/// What one file of a set holds.
struct Scanned {
    path: PathBuf,
    header: MibHeader,
    layout: MibLayout,
    frames: usize,
    /// Bytes of an incomplete last frame.
    rest: usize,
}

fn scan_file(path: &Path) -> Result<Scanned, DatasetError> {
    let open_err = |source| DatasetError::Open { path: path.to_owned(), source };
    let file = std::fs::File::open(path).map_err(open_err)?;
    let len = file.metadata().map_err(open_err)?.len();
    let mut head = Vec::new();
    file.take(HEAD_BYTES).read_to_end(&mut head).map_err(open_err)?;
    let header = MibHeader::parse(&head).map_err(|e| DatasetError::invalid(path, format!("offset 0: {e}")))?;
    let layout = MibLayout::new(&header).map_err(|e| DatasetError::invalid(path, format!("offset 0: {e}")))?;
    let stride = layout.stride as u64;
    let frames = usize::try_from(len / stride).map_err(|_| DatasetError::invalid(path, "the file is too large"))?;
    let rest = (len % stride) as usize;
    Ok(Scanned { path: path.to_owned(), header, layout, frames, rest })
}

/// The files of the set `path` belongs to, and the `.hdr` file if there is one.
///
/// A numbered file `<prefix><digits>.mib` (or `<prefix>.hdr`) belongs to the set of
/// every `<prefix><digits>.mib` in its directory; `X.mib` next to `XRAW.mib` or
/// `X_other1.mib` are separate acquisitions. An unnumbered `.mib` is a set of one.
pub(crate) fn find_set(path: &Path) -> Result<(Vec<PathBuf>, Option<PathBuf>), DatasetError> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let (stem, ext) = match name.rsplit_once('.') {
        Some((s, e)) => (s, e.to_ascii_lowercase()),
        None => (name, String::new()),
    };
    let (prefix, hdr) = if ext == "hdr" {
        (stem.to_owned(), Some(path.to_owned()))
    } else {
        let prefix = stem.trim_end_matches(|c: char| c.is_ascii_digit()).to_owned();
        let candidates = [dir.join(format!("{stem}.hdr")), dir.join(format!("{prefix}.hdr"))];
        (prefix, candidates.into_iter().find(|p| p.is_file()))
    };
    let numbered = ext == "hdr" || prefix.len() < stem.len();
    if ext != "hdr" && (ext != "mib" || !numbered) {
        // Detected by content, or not numbered: just this file.
        return Ok((vec![path.to_owned()], hdr));
    }
    let is_member = |n: &str| {
        let Some(body) = n.len().checked_sub(4).and_then(|cut| {
            n[cut..].eq_ignore_ascii_case(".mib").then(|| n[..cut].strip_prefix(prefix.as_str())).flatten()
        }) else {
            return false;
        };
        // `<prefix>.mib` belongs to the set of `<prefix>.hdr`.
        body.chars().all(|c| c.is_ascii_digit()) && (!body.is_empty() || ext == "hdr")
    };
    let entries = std::fs::read_dir(&dir).map_err(|source| DatasetError::Open { path: dir.clone(), source })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(is_member) && p.is_file())
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(DatasetError::invalid(
            path,
            format!("no .mib files named {prefix}<number>.mib or {prefix}.mib in {}", dir.display()),
        ));
    }
    Ok((files, hdr))
}

/// Check that the files (sorted by first sequence number) continue each other and
/// share the frame format; only the last may end in a cut-off frame.
fn check_set(scanned: &[Scanned]) -> Result<(), DatasetError> {
    let first = &scanned[0];
    let mut expected = first.header.sequence;
    let count = scanned.len();
    for (k, s) in scanned.iter().enumerate() {
        if s.layout != first.layout || s.header.header_bytes != first.header.header_bytes {
            return Err(DatasetError::invalid(
                &s.path,
                format!(
                    "inconsistent set: this file has frames of {}, but {} has {}",
                    s.header,
                    first.path.display(),
                    first.header
                ),
            ));
        }
        if s.header.sequence != expected {
            let previous = if k == 0 { String::new() } else { format!(" after {}", scanned[k - 1].path.display()) };
            return Err(DatasetError::invalid(
                &s.path,
                format!(
                    "inconsistent set: the file starts at frame sequence number {}, expected {expected}{previous} \
                     (a file of the set is missing, or files of another acquisition match the name)",
                    s.header.sequence
                ),
            ));
        }
        expected += s.frames as u64;
        if (s.rest != 0 && k + 1 < count) || s.frames == 0 {
            return Err(DatasetError::invalid(
                &s.path,
                format!(
                    "{} is truncated: frame {} at offset {} has {} of {} bytes",
                    s.path.display(),
                    s.frames,
                    s.frames * s.layout.stride,
                    s.rest,
                    s.layout.stride
                ),
            ));
        }
    }
    Ok(())
}

/// Open the `.mib` set that `path` (a `.mib` or `.hdr` file) belongs to.
///
/// # Errors
/// [`DatasetError`] naming the file and offset: no files, a bad header, files that do
/// not continue each other, a truncated file in the middle of a set, frames whose
/// headers are not where the first header says, a bad `.hdr`.
pub(crate) fn open(path: &Path, options: &OpenOptions) -> Result<(Arc<dyn Dataset>, ShapeHints), DatasetError> {
    let _ = options;
    let (paths, hdr) = find_set(path)?;
    let mut hints = ShapeHints::default();
    let mut scanned = paths.iter().map(|p| scan_file(p)).collect::<Result<Vec<_>, _>>()?;
    scanned.sort_by_key(|s| s.header.sequence);
    let asked = scanned.iter().find(|s| s.path.file_name() == path.file_name()).map(|s| s.header.sequence);
    // Another file starting at the same frame number is another acquisition (numbers are
    // unique within one); anything else wrong with the set is an error below.
    let clash = asked.is_some_and(|a| scanned.iter().filter(|s| s.header.sequence == a).count() > 1);
    if clash && let Err(e) = check_set(&scanned) {
        // Files that share the name but do not continue each other: other
        // acquisitions. Read the file that was asked for, and say why.
        let others: Vec<String> = scanned
            .iter()
            .filter(|s| s.path.file_name() != path.file_name())
            .map(|s| s.path.display().to_string())
            .collect();
        hints.warnings.push(format!(
            "read only {}: the files named like it ({}) do not form one set with it ({e})",
            path.display(),
            others.join(", ")
        ));
        scanned.retain(|s| s.path.file_name() == path.file_name());
    }
    check_set(&scanned)?;

    let count = scanned.len();
    if let Some(s) = scanned.last()
        && s.rest != 0
    {
        hints.incomplete = Some(format!(
            "{} is truncated: frame {} at offset {} has {} of {} bytes",
            s.path.display(),
            s.frames,
            s.frames * s.layout.stride,
            s.rest,
            s.layout.stride
        ));
    }
    let mut first_frames: Vec<Vec<u8>> = Vec::new();
    let mut parts: Vec<Arc<dyn Dataset>> = Vec::with_capacity(count);
    for s in scanned {
        let (stored, frame_sig) = match &s.layout.decode {
            MibDecode::Plain(stored) => (*stored, s.layout.sig.to_vec()),
            MibDecode::Raw(_) => (StoredDType::le(DType::U8), vec![s.layout.frame_bytes]),
        };
        let frames = MappedFrames::open(
            &s.path,
            s.header.header_bytes,
            s.layout.stride,
            stored,
            DatasetShape { nav: vec![s.frames], sig: frame_sig },
        )?;
        let file = MibFile {
            frames,
            shape: DatasetShape { nav: vec![s.frames], sig: s.layout.sig.to_vec() },
            header: s.header,
            layout: s.layout,
        };
        // Cheap checks that the header sizes hold through the file.
        file.check_frame(s.frames - 1)?;
        if s.frames > 1 {
            file.check_frame(1)?;
        }
        // The frame headers of the start of the scan, for its timestamps.
        let bytes = file.frames.bytes();
        for f in 0..s.frames.min(TIMED_FRAMES.saturating_sub(first_frames.len())) {
            let at = file.frames.frame_offset(f) - file.header.header_bytes;
            first_frames.push(bytes[at..at + file.header.header_bytes].to_vec());
        }
        parts.push(Arc::new(file));
    }
    let data: Arc<dyn Dataset> = if parts.len() == 1 {
        parts.pop().ok_or_else(|| DatasetError::invalid(path, "no files"))?
    } else {
        let mut info = parts[0].info();
        info.path = path.to_owned();
        info.details.insert(0, ("files".into(), parts.len().to_string()));
        Arc::new(Concat::new(parts, info)?)
    };

    let mut recorded = None;
    if let Some(hdr) = &hdr {
        let bytes = std::fs::read(hdr).map_err(|source| DatasetError::Open { path: hdr.clone(), source })?;
        let parsed = AcquisitionHeader::parse(&bytes).map_err(|e| DatasetError::invalid(hdr, e))?;
        recorded = parsed
            .nav_shape()
            .map_err(|e| DatasetError::invalid(hdr, format!("cannot tell the scan shape: {e}; give --nav-shape")))?
            .map(|(nav, keys)| (nav, format!("{} ({keys})", hdr.display())));
    }
    if recorded.is_none() {
        let times = frame_times(&first_frames);
        let frames = data.shape().nav_len();
        recorded = header::flyback_width(&times).map(|width| {
            (
                vec![frames / width, width],
                format!("the frame timestamps (a longer gap after every {width} frames: the line flyback)"),
            )
        });
        if let (None, Some(hdr)) = (&recorded, &hdr) {
            hints
                .warnings
                .push(format!("{} records no scan shape (no ScanX/ScanY, one frame per trigger)", hdr.display()));
        }
    }
    if let Some((nav, source)) = recorded {
        hints.nav = Some(nav);
        hints.nav_source = Some(source);
    }
    Ok((data, hints))
}

/// Whether `bytes` (the start of a file) look like a Merlin frame or acquisition header.
pub fn sniff(bytes: &[u8]) -> bool {
    bytes.starts_with(b"MQ1,")
}
