//! The Merlin frame header (`MQ1,...`) and the acquisition header (`.hdr`).
//!
//! Every frame of a `.mib` file starts with an ASCII header of comma-separated fields:
//!
//! ```text
//! MQ1,000001,00384,01,0256,0256,U16,   1x1,01,2020-05-18 16:51:49.971626,0.000555,0,0,0,...,MQ1A,<time>,555000ns,12,
//!  |    |      |    |   |    |    |      |
//!  |    |      |    |   |    |    |      sensor layout: 1x1, 2x2, 2x2G, Nx1, Nx1G
//!  |    |      |    |   |    |    pixel type: U08, U16, U32, U64 (big-endian) or R64 (raw counter bits)
//!  |    |      |    |   |    height in pixels
//!  |    |      |    |   width in pixels
//!  |    |      |    number of chips
//!  |    |      header size in bytes (the pixels start there)
//!  |    sequence number of the frame (1 for the first frame of an acquisition)
//!  magic
//! ```
//!
//! The counter depth (1, 6, 12 or 24 bits) is the field after the `MQ1A` extension's
//! timestamp and shutter time, or else the last field (LiberTEM's rule). Raw (`R64`)
//! frames pack the counters into big-endian 64-bit words; see [`super::raw`].

use std::fmt;

/// Largest frame header accepted (real ones are 384 bytes per chip row, e.g. 768).
pub const MAX_HEADER_BYTES: usize = 1 << 16;

/// How pixels are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MibPixel {
    /// Big-endian unsigned integers of 1, 2, 4 or 8 bytes (`U08`, `U16`, `U32`, `U64`).
    Unsigned(usize),
    /// Raw counter bits (`R64`): the counter depth says how they are packed.
    Raw,
}

/// A parsed `MQ1` frame header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MibHeader {
    /// Sequence number of the frame (the first frame of an acquisition is 1).
    pub sequence: u64,
    /// Header size in bytes: the pixels start this far after the `M` of `MQ1`.
    pub header_bytes: usize,
    /// Number of chips.
    pub chips: u32,
    /// Width and height in pixels, as the header says (raw data: of the raw pixel array).
    pub width: usize,
    pub height: usize,
    /// Pixel storage.
    pub pixel: MibPixel,
    /// The pixel type field as written (`U16`, `R64`).
    pub pixel_name: String,
    /// The sensor layout as written, trimmed (`1x1`, `2x2G`, `Nx1`).
    pub layout: String,
    /// Counter depth in bits, if the header has one.
    pub counter_depth: Option<u32>,
}

/// What is wrong with a frame header; offsets are from the start of the header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MibHeaderError {
    #[error("not a Merlin frame header: expected 'MQ1,' at its start, found {found}")]
    Magic { found: String },
    #[error("the frame header is cut off after {available} bytes (it says it has {needed})")]
    Truncated { needed: usize, available: usize },
    #[error("field {index} ({name}) at byte {offset}: expected {expected}, found {found}")]
    Field { index: usize, name: &'static str, offset: usize, expected: &'static str, found: String },
    #[error("field {index} ({name}) is missing")]
    Missing { index: usize, name: &'static str },
    #[error("the header size {0} is implausible (expected 32 to {MAX_HEADER_BYTES} bytes)")]
    HeaderSize(usize),
    #[error("{0}")]
    Unsupported(String),
}

/// Printable form of a few bytes for messages.
pub(crate) fn show_bytes(bytes: &[u8]) -> String {
    let shown: String = bytes.iter().take(16).flat_map(|&b| std::ascii::escape_default(b)).map(char::from).collect();
    format!("'{shown}'")
}

const NAMES: [&str; 8] =
    ["magic", "sequence number", "header size", "chips", "width", "height", "pixel type", "layout"];

impl MibHeader {
    /// Parse the header at the start of `bytes` (which may hold more: the pixels).
    ///
    /// # Errors
    /// [`MibHeaderError`] naming the field and its byte offset.
    pub fn parse(bytes: &[u8]) -> Result<Self, MibHeaderError> {
        if !bytes.starts_with(b"MQ1,") {
            return Err(MibHeaderError::Magic { found: show_bytes(&bytes[..bytes.len().min(8)]) });
        }
        // The header size is field 2; read it first, then split the header proper.
        let head = &bytes[..bytes.len().min(64)];
        let fields0 = split_fields(head);
        let (offset2, text2) = *fields0.get(2).ok_or(MibHeaderError::Missing { index: 2, name: NAMES[2] })?;
        let header_bytes: usize = number(2, offset2, text2)?;
        if !(32..=MAX_HEADER_BYTES).contains(&header_bytes) {
            return Err(MibHeaderError::HeaderSize(header_bytes));
        }
        if bytes.len() < header_bytes {
            return Err(MibHeaderError::Truncated { needed: header_bytes, available: bytes.len() });
        }
        // The header is padded with NULs or spaces.
        let mut header = &bytes[..header_bytes];
        if let Some(nul) = header.iter().position(|&b| b == 0) {
            header = &header[..nul];
        }
        let fields = split_fields(header);
        let field = |i: usize| fields.get(i).copied().ok_or(MibHeaderError::Missing { index: i, name: NAMES[i] });
        let (o, t) = field(1)?;
        let sequence: u64 = number(1, o, t)?;
        let (o, t) = field(3)?;
        let chips: u32 = number(3, o, t)?;
        let (o, t) = field(4)?;
        let width: usize = number(4, o, t)?;
        let (o, t) = field(5)?;
        let height: usize = number(5, o, t)?;
        let (o, t) = field(6)?;
        let pixel_name = t.trim().to_owned();
        let pixel = match pixel_name.as_str() {
            "U08" => MibPixel::Unsigned(1),
            "U16" => MibPixel::Unsigned(2),
            "U32" => MibPixel::Unsigned(4),
            "U64" => MibPixel::Unsigned(8),
            "R64" => MibPixel::Raw,
            _ => {
                return Err(MibHeaderError::Field {
                    index: 6,
                    name: NAMES[6],
                    offset: o,
                    expected: "U08, U16, U32, U64 or R64",
                    found: show_bytes(t.as_bytes()),
                });
            }
        };
        let (o, t) = field(7)?;
        let layout = t.trim().to_owned();
        if parse_layout(&layout, chips).is_none() {
            return Err(MibHeaderError::Field {
                index: 7,
                name: NAMES[7],
                offset: o,
                expected: "a layout like 1x1, 2x2, 2x2G, Nx1",
                found: show_bytes(t.as_bytes()),
            });
        }
        let counter_depth = counter_depth(&fields);
        Ok(MibHeader { sequence, header_bytes, chips, width, height, pixel, pixel_name, layout, counter_depth })
    }

    /// Chips across and down, from the layout (`Nx1` means all chips in a row).
    pub fn layout_dims(&self) -> (u32, u32) {
        parse_layout(&self.layout, self.chips).unwrap_or((1, 1))
    }
}

/// Fields of a header with the byte offset of each.
fn split_fields(bytes: &[u8]) -> Vec<(usize, &str)> {
    let mut fields = Vec::new();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b',' {
            fields.push((start, &bytes[start..i]));
            start = i + 1;
        }
    }
    fields.push((start, &bytes[start..]));
    fields.into_iter().map(|(o, f)| (o, std::str::from_utf8(f).unwrap_or("\u{fffd}"))).collect()
}

fn number<T: std::str::FromStr>(index: usize, offset: usize, text: &str) -> Result<T, MibHeaderError> {
    text.trim().parse().map_err(|_| MibHeaderError::Field {
        index,
        name: NAMES[index],
        offset,
        expected: "a decimal number",
        found: show_bytes(text.as_bytes()),
    })
}

/// `AxB` or `AxBG` with `A` a number or `N` (= all chips).
fn parse_layout(layout: &str, chips: u32) -> Option<(u32, u32)> {
    let text = layout.strip_suffix('G').unwrap_or(layout);
    let (a, b) = text.split_once('x')?;
    let a = if a == "N" { chips } else { a.parse().ok()? };
    let b = b.parse().ok()?;
    (a > 0 && b > 0).then_some((a, b))
}

fn counter_depth(fields: &[(usize, &str)]) -> Option<u32> {
    if let Some(i) = fields.iter().position(|(_, f)| f.trim() == "MQ1A") {
        return fields.get(i + 3).and_then(|(_, f)| f.trim().parse().ok());
    }
    fields.iter().rev().map(|(_, f)| f.trim()).find(|f| !f.is_empty()).and_then(|f| f.parse().ok())
}

impl fmt::Display for MibHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}x{} px, {} chip(s) in layout {}, header {} bytes",
            self.pixel_name, self.width, self.height, self.chips, self.layout, self.header_bytes
        )?;
        if let Some(depth) = self.counter_depth {
            write!(f, ", counter depth {depth}")?;
        }
        Ok(())
    }
}

/// The acquisition header (`.hdr`): `Key:\tValue` lines between `HDR` and `End`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AcquisitionHeader {
    /// Keys and values in file order.
    pub entries: Vec<(String, String)>,
}

impl AcquisitionHeader {
    /// Parse the text of a `.hdr` file.
    ///
    /// # Errors
    /// The text does not start with `HDR`.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let text = String::from_utf8_lossy(bytes);
        let mut lines = text.lines();
        match lines.next() {
            Some(first) if first.starts_with("HDR") => {}
            _ => return Err("not a Merlin acquisition header: the first line does not start with 'HDR'".into()),
        }
        let mut entries = Vec::new();
        for line in lines {
            let line = line.trim_end_matches(['\r', '\0']);
            if line.trim() == "End" || line.starts_with("End\t") {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                entries.push((k.trim().to_owned(), v.trim().to_owned()));
            }
        }
        Ok(AcquisitionHeader { entries })
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The scan shape the header records, and the keys it came from: `(ScanY, ScanX)`
    /// if given, else (frames in acquisition / frames per trigger, frames per trigger)
    /// when a trigger starts each scan line (more than one frame per trigger). `None`
    /// when it records neither (one frame per trigger says nothing about the lines).
    ///
    /// # Errors
    /// A value that is not a number, or an impossible combination.
    pub fn nav_shape(&self) -> Result<Option<(Vec<usize>, &'static str)>, String> {
        let num = |key: &str| -> Result<Option<usize>, String> {
            match self.get(key) {
                None => Ok(None),
                Some(v) => v.parse().map(Some).map_err(|_| format!("'{key}' is '{v}', not a number")),
            }
        };
        if let (Some(x), Some(y)) = (num("ScanX")?, num("ScanY")?) {
            if x == 0 || y == 0 {
                return Err(format!("the scan is {x} x {y} (ScanX x ScanY)"));
            }
            return Ok(Some((vec![y, x], "ScanY, ScanX")));
        }
        match (num("Frames in Acquisition (Number)")?, num("Frames per Trigger (Number)")?) {
            (Some(n), Some(per)) if per > 1 && n >= per => {
                Ok(Some((vec![n / per, per], "Frames in Acquisition / Frames per Trigger")))
            }
            (Some(n), Some(per)) if per > 1 => {
                Err(format!("{n} frames in the acquisition with {per} frames per trigger"))
            }
            _ => Ok(None),
        }
    }
}

/// The acquisition time of a frame in nanoseconds (since 1970, UTC where the header says
/// so), from the header's `MQ1A` extension (`2021-05-07T16:51:10.905800928Z`, ns) or else
/// its timestamp field (`2021-05-07 18:51:10.905800`, µs). `None` if there is neither.
pub fn frame_time_ns(header: &[u8]) -> Option<i128> {
    let text = std::str::from_utf8(header.get(..header.len().min(2048))?).ok()?;
    let fields: Vec<&str> = text.split(',').collect();
    let iso = fields.iter().position(|f| *f == "MQ1A").and_then(|i| fields.get(i + 1)).copied();
    iso.and_then(parse_time).or_else(|| fields.get(9).copied().and_then(parse_time))
}

/// `YYYY-MM-DD[T ]HH:MM:SS[.fraction][Z]` in nanoseconds since 1970-01-01.
fn parse_time(text: &str) -> Option<i128> {
    let text = text.trim().trim_end_matches('Z');
    let (date, time) = text.split_once(['T', ' '])?;
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.split(':').map(|p| p.parse::<i64>().ok());
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || frac.len() > 9 || !frac.chars().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    // A clock's fields (an hour of 10**15 overflowed `hh * 3600`; found by the
    // acquisition_text fuzz target), and a year the day count holds.
    if !(0..=9999).contains(&y) || !(0..=23).contains(&hh) || !(0..=59).contains(&mm) || !(0..=60).contains(&ss) {
        return None;
    }
    let nanos: i64 = if frac.is_empty() { 0 } else { frac.parse::<i64>().ok()? * 10i64.pow(9 - frac.len() as u32) };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let seconds = i128::from(days) * 86_400 + i128::from(hh * 3600 + mm * 60 + ss);
    Some(seconds * 1_000_000_000 + i128::from(nanos))
}

/// The scan width told by frame times: a line ends where the gap to the next frame is
/// longer than the others (the beam's flyback). Returns the width when every line of the
/// frames given shows the longer gap at the same place, and there are at least two
/// lines; `None` when the gaps show no lines.
pub fn flyback_width(times: &[i128]) -> Option<usize> {
    if times.len() < 4 {
        return None;
    }
    let gaps: Vec<i128> = times.windows(2).map(|w| w[1] - w[0]).collect();
    let median = |v: &[i128]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v[v.len() / 2]
    };
    let typical = median(&gaps);
    let spread = median(&gaps.iter().map(|g| (g - typical).abs()).collect::<Vec<_>>());
    // Longer by more than the jitter and the microsecond resolution of older headers.
    let threshold = (10 * spread).max(2_000);
    let long: Vec<usize> = gaps.iter().enumerate().filter(|(_, g)| **g - typical > threshold).map(|(i, _)| i).collect();
    let width = long.first()? + 1;
    let expected: Vec<usize> = (1..).map(|k| k * width - 1).take_while(|&i| i < gaps.len()).collect();
    (width >= 2 && long == expected).then_some(width)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `acquisition_text` fuzz target: a Merlin timestamp with an hour of
    /// `000010` digits past i64 / 3600 overflowed `hh * 3600`. Fields out of a clock's
    /// range are no time.
    #[test]
    fn timestamps_with_fields_out_of_range_are_no_time() {
        assert_eq!(parse_time("2026-11-27T1000000000000000:00:00"), None);
        assert_eq!(parse_time("2026-11-27T24:00:00"), None);
        assert_eq!(parse_time("9223372036854775807-11-27T10:00:00"), None);
        let crash = include_bytes!(
            "../../../../tests/fuzz_regressions/acquisition_text/crash-27527f42b32581889dfd5abe3e6a6530e4188aed"
        );
        for line in crash.split(|b| *b == b'\n') {
            let _ = frame_time_ns(line);
        }
        assert!(parse_time("2026-11-27T10:00:00").is_some());
    }

    const QUAD: &str = "MQ1,000001,00768,04,0514,0514,U16,  2x2G,0F,2024-06-14 11:31:30.060732,0.001000,0,0,0,\
        3.500000E+1,5.110000E+2,0.000000E+0,0.000000E+0,0.000000E+0,0.000000E+0,0.000000E+0,0.000000E+0,3RX,052,\
        MQ1A,2024-06-14T09:31:30.060732865Z,1000000ns,12,";

    fn padded(text: &str, size: usize, pad: u8) -> Vec<u8> {
        let mut b = text.as_bytes().to_vec();
        b.resize(size, pad);
        b
    }

    #[test]
    fn parses_real_headers() {
        let single = "MQ1,000001,00384,01,0256,0256,U08,   1x1,01,2020-05-18 16:51:49.971626,0.000555,0,0,0,\
            1.200000E+2,5.110000E+2,MQ1A,2020-05-18T14:51:49.971626178Z,555000ns,6,";
        let h = MibHeader::parse(&padded(single, 384, 0)).unwrap();
        assert_eq!(
            (h.sequence, h.header_bytes, h.chips, h.width, h.height, h.pixel, h.counter_depth),
            (1, 384, 1, 256, 256, MibPixel::Unsigned(1), Some(6))
        );
        assert_eq!(h.layout, "1x1");
        let q = MibHeader::parse(&padded(QUAD, 768, b' ')).unwrap();
        assert_eq!((q.chips, q.width, q.layout.as_str(), q.layout_dims()), (4, 514, "2x2G", (2, 2)));
        assert_eq!(q.counter_depth, Some(12));
        let raw = "MQ1,000001,00384,01,0256,0256,R64,   1x1,01,2018-01-02 15:55:15.323401,0.100000,0,0,0,,MQ1A,\
            2018-01-02T15:55:15.323401404Z,100000000ns,12,";
        let r = MibHeader::parse(&padded(raw, 384, 0)).unwrap();
        assert_eq!((r.pixel, r.counter_depth), (MibPixel::Raw, Some(12)));
        let nx1 = "MQ1,000001,00768,04,1024,0256,U08,   Nx1,0F,x,0,0,0,0,1";
        assert_eq!(MibHeader::parse(&padded(nx1, 768, 0)).unwrap().layout_dims(), (4, 1));
    }

    #[test]
    fn names_the_bad_field() {
        let bad = padded("MQ1,000001,00384,01,02x6,0256,U08,   1x1,01,6", 384, 0);
        let e = MibHeader::parse(&bad).unwrap_err();
        assert!(matches!(e, MibHeaderError::Field { index: 4, offset: 20, .. }), "{e}");
        assert!(matches!(MibHeader::parse(b"MQ2,"), Err(MibHeaderError::Magic { .. })));
        let short = padded("MQ1,000001,00384,01,0256,0256,U08,   1x1,01,6", 100, 0);
        assert_eq!(MibHeader::parse(&short), Err(MibHeaderError::Truncated { needed: 384, available: 100 }));
        let dtype = padded("MQ1,000001,00384,01,0256,0256,F32,   1x1,01,6", 384, 0);
        assert!(matches!(MibHeader::parse(&dtype), Err(MibHeaderError::Field { index: 6, .. })));
    }

    #[test]
    fn acquisition_header_gives_the_scan() {
        let hdr = b"HDR,\t\r\nTime and Date Stamp (day, mnth, yr, hr, min, s):\t18/05/2020 16:51:48\r\n\
            Frames in Acquisition (Number):\t16384\r\nFrames per Trigger (Number):\t128\r\nEnd\t";
        let h = AcquisitionHeader::parse(hdr).unwrap();
        assert_eq!(h.nav_shape(), Ok(Some((vec![128, 128], "Frames in Acquisition / Frames per Trigger"))));
        let scan = AcquisitionHeader::parse(b"HDR,\nScanX:\t7\nScanY:\t5\nEnd\t").unwrap();
        assert_eq!(scan.nav_shape(), Ok(Some((vec![5, 7], "ScanY, ScanX"))));
        assert_eq!(AcquisitionHeader::parse(b"HDR\nFoo:\t1\n").unwrap().nav_shape(), Ok(None));
        let per_frame = b"HDR\nFrames in Acquisition (Number):\t9\nFrames per Trigger (Number):\t1\n";
        assert_eq!(AcquisitionHeader::parse(per_frame).unwrap().nav_shape(), Ok(None));
        assert!(AcquisitionHeader::parse(b"HDR\nScanX:\tx\nScanY:\t1\n").unwrap().nav_shape().is_err());
        assert!(AcquisitionHeader::parse(b"MQ1,").is_err());
    }

    #[test]
    fn frame_times_from_either_timestamp() {
        let ns = frame_time_ns(b"MQ1,000001,00384,01,0256,0256,U08,   1x1,01,2021-05-07 18:51:10.905800,0.1,MQ1A,2021-05-07T16:51:10.905800928Z,1ns,6,").unwrap();
        let us =
            frame_time_ns(b"MQ1,000001,00384,01,0256,0256,U08,   1x1,01,2021-05-07 16:51:10.905800,0.1,0").unwrap();
        assert_eq!(ns - us, 928);
        // 2021-05-07 is day 18754 since 1970 (date -d 2021-05-07 +%s / 86400).
        assert_eq!(us / 1_000_000_000 / 86_400, 18_754);
        assert_eq!(frame_time_ns(b"MQ1,000001,00384,01,0256,0256,U08,   1x1,01,not a time,"), None);
    }

    #[test]
    fn flyback_gaps_give_the_scan_width() {
        // The frame times of rosettasciio's 001_4x2_6bit.mib (ns): a 21 us longer gap
        // after the 4th frame of each line.
        let t =
            [905800928i128, 1007800918, 1109800898, 1211800898 + 20, 1313821718, 1415821718, 1517821718, 1619821708];
        let t: Vec<i128> = t.iter().map(|&x| x + 1_000_000_000 * 60).collect();
        assert_eq!(flyback_width(&t), Some(4));
        // Quad_9_Frame_CounterDepth_24: 2095240..2095250 ns apart, jitter only.
        let jitter: Vec<i128> = (0..9).map(|i| i * 2_095_245 + (i % 2) * 10).collect();
        assert_eq!(flyback_width(&jitter), None);
        // Regular lines of 3 over 4 lines; an irregular long gap breaks the pattern.
        let lines: Vec<i128> = (0..12).map(|i: i128| i * 1_000_000 + (i / 3) * 50_000).collect();
        assert_eq!(flyback_width(&lines), Some(3));
        let mut odd = lines.clone();
        for t in &mut odd[5..] {
            *t += 70_000;
        }
        assert_eq!(flyback_width(&odd), None);
        assert_eq!(flyback_width(&[0; 9]), None);
    }
}
