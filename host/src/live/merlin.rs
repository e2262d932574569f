//! The Merlin (Quantum Detectors MerlinEM) data port: TCP, by default port 6342.
//!
//! Every message is `MPX,` + a 10-digit decimal length + `,` + the payload, where the
//! length counts the payload and that comma. An acquisition starts with the acquisition
//! header (payload `HDR,...`, the text of a `.hdr` file); then each frame is one message
//! whose payload is the frame header (`MQ1,...`, as in a `.mib` file) followed by the
//! pixels. The frame headers and pixel formats are those of `.mib` files and are parsed
//! and decoded by [`crate::dataset::mib`].
//!
//! Every frame is checked before it is accepted: the message length, the `MQ1` header
//! (the same geometry as the first frame) and the sequence number (consecutive, so a
//! frame lost on the detector's side is an error, not a silent gap).

use super::frames::{Acquisition, FrameEncoding};
use super::wire::{self, Patience, Wire};
use super::{LiveError, Receiver, Stop};
use crate::dataset::mib::MibDecode;
use crate::dataset::mib::{AcquisitionHeader, MibHeader, MibLayout, header::MAX_HEADER_BYTES};
use bytes::Bytes;
use std::time::Duration;

/// `MPX,` + 10 digits + `,`.
const PREFIX: usize = 15;

/// The Merlin data port's default.
pub const DEFAULT_PORT: u16 = 6342;

/// Frame the MPX length field: the length counts the payload and the comma before it.
pub fn mpx_prefix(payload_len: usize) -> [u8; PREFIX] {
    let mut out = [0u8; PREFIX];
    out.copy_from_slice(format!("MPX,{:010},", payload_len + 1).as_bytes());
    out
}

/// The payload length an MPX prefix announces.
fn parse_prefix(prefix: &[u8; PREFIX]) -> Result<usize, String> {
    let shown = || crate::dataset::mib::header::show_bytes(prefix);
    if &prefix[..4] != b"MPX," || prefix[14] != b',' {
        return Err(format!("expected a message prefix 'MPX,<10 digits>,', found {}", shown()));
    }
    let digits = std::str::from_utf8(&prefix[4..14]).ok().filter(|d| d.bytes().all(|b| b.is_ascii_digit()));
    let length: usize = digits
        .and_then(|d| d.parse().ok())
        .ok_or_else(|| format!("the message length in {} is not a 10-digit number", shown()))?;
    length.checked_sub(1).ok_or_else(|| format!("message length 0 in {}", shown()))
}

/// Receives one acquisition from a Merlin data port.
pub struct MerlinReceiver {
    wire: Wire,
    /// From the first frame.
    header: Option<MibHeader>,
    layout: Option<MibLayout>,
    /// The first frame, read by `start` to learn the geometry.
    pending: Option<Bytes>,
    /// Frames handed out.
    frames: u64,
    header_buf: Vec<u8>,
}

impl MerlinReceiver {
    /// Connect to the data port at `address` (`host:port`).
    ///
    /// # Errors
    /// [`LiveError::Connect`].
    pub fn connect(address: &str) -> Result<Self, LiveError> {
        let stream = wire::connect(address, Duration::from_secs(10))?;
        Ok(MerlinReceiver {
            wire: Wire::new(stream, &format!("merlin://{address}")),
            header: None,
            layout: None,
            pending: None,
            frames: 0,
            header_buf: Vec::new(),
        })
    }

    fn malformed(&self, at: impl Into<String>, message: impl Into<String>) -> LiveError {
        LiveError::Malformed { endpoint: self.wire.endpoint().to_owned(), at: at.into(), message: message.into() }
    }

    /// Read a message prefix; the payload length.
    fn read_prefix(&mut self, stop: &Stop, patience: Patience, at: &str) -> Result<usize, LiveError> {
        let mut prefix = [0u8; PREFIX];
        self.wire.read_exact(&mut prefix, stop, patience, self.frames)?;
        parse_prefix(&prefix).map_err(|e| self.malformed(at, e))
    }

    /// Read the `MQ1` header of a frame message announcing `length` payload bytes.
    fn read_frame_header(
        &mut self,
        length: usize,
        stop: &Stop,
        patience: Patience,
        at: &str,
        already: &[u8],
    ) -> Result<MibHeader, LiveError> {
        let known = self.header.as_ref().map(|h| h.header_bytes);
        let first_read = known.unwrap_or(64).min(length).max(already.len());
        let mut buf = std::mem::take(&mut self.header_buf);
        buf.clear();
        buf.extend_from_slice(already);
        buf.resize(first_read, 0);
        let result = (|| {
            self.wire.read_exact(&mut buf[already.len()..], stop, patience, self.frames)?;
            loop {
                match MibHeader::parse(&buf) {
                    Ok(header) => return Ok(header),
                    Err(crate::dataset::mib::MibHeaderError::Truncated { needed, .. })
                        if needed <= length && needed <= MAX_HEADER_BYTES && needed > buf.len() =>
                    {
                        let have = buf.len();
                        buf.resize(needed, 0);
                        self.wire.read_exact(&mut buf[have..], stop, patience, self.frames)?;
                    }
                    Err(e) => return Err(self.malformed(at, e.to_string())),
                }
            }
        })();
        self.header_buf = buf;
        result
    }

    /// Read one frame message (its prefix included): the pixel bytes.
    fn read_frame(&mut self, stop: &Stop, patience: Patience) -> Result<Bytes, LiveError> {
        let at = format!("frame {}", self.frames);
        let length = self.read_prefix(stop, patience, &at)?;
        self.read_frame_body(length, stop, patience, &at, &[])
    }

    /// The rest of a frame message of `length` bytes whose first bytes `already` were read.
    fn read_frame_body(
        &mut self,
        length: usize,
        stop: &Stop,
        patience: Patience,
        at: &str,
        already: &[u8],
    ) -> Result<Bytes, LiveError> {
        let header = self.read_frame_header(length, stop, patience, at, already)?;
        let first_layout = match (&self.header, &self.layout) {
            (Some(first), Some(_)) => {
                let same = header.header_bytes == first.header_bytes
                    && header.pixel == first.pixel
                    && (header.width, header.height, header.chips) == (first.width, first.height, first.chips)
                    && header.layout == first.layout;
                if !same {
                    return Err(
                        self.malformed(at, format!("the frame header says {header}, the first frame's {first}"))
                    );
                }
                let expected = first.sequence + self.frames;
                if header.sequence != expected {
                    return Err(self.malformed(
                        at,
                        format!(
                            "frame sequence number {}, expected {expected}: the detector skipped or repeated frames",
                            header.sequence
                        ),
                    ));
                }
                None
            }
            _ => Some(MibLayout::new(&header).map_err(|e| self.malformed(at, e))?),
        };
        // The first frame's layout, or the one every later frame was just checked to share
        // (not cloned per frame: this runs for every frame of the scan).
        let Some(layout) = first_layout.as_ref().or(self.layout.as_ref()) else {
            return Err(LiveError::Invalid("internal: a frame without a layout".into()));
        };
        let (stride, frame_bytes) = (layout.stride, layout.frame_bytes);
        if length != stride {
            return Err(self.malformed(
                at,
                format!(
                    "the message holds {length} bytes, but a frame of {header} needs {stride} ({} of header + \
                     {frame_bytes} of pixels)",
                    header.header_bytes
                ),
            ));
        }
        let mut pixels = vec![0u8; frame_bytes];
        self.wire.read_exact(&mut pixels, stop, patience, self.frames)?;
        if let Some(layout) = first_layout {
            self.header = Some(header);
            self.layout = Some(layout);
        }
        Ok(Bytes::from(pixels))
    }
}

impl Receiver for MerlinReceiver {
    fn endpoint(&self) -> &str {
        self.wire.endpoint()
    }

    fn format(&self) -> &'static str {
        "merlin-live"
    }

    fn start(&mut self, stop: &Stop, timeout: Option<Duration>) -> Result<Acquisition, LiveError> {
        let at = "the acquisition header";
        let length = self.read_prefix(stop, Patience::Start(timeout), at)?;
        let mut details = Vec::new();
        let mut frames = None;
        // The acquisition header, or (when the detector sends none) the first frame.
        let mut head = vec![0u8; length.min(4)];
        self.wire.read_exact(&mut head, stop, Patience::Stall(STARTUP_STALL), 0)?;
        let first = if head.starts_with(b"HDR") {
            let mut text = head;
            text.resize(length, 0);
            self.wire.read_exact(&mut text[4.min(length)..], stop, Patience::Stall(STARTUP_STALL), 0)?;
            let parsed = AcquisitionHeader::parse(&text).map_err(|e| self.malformed(at, e))?;
            if let Some(n) = parsed.get("Frames in Acquisition (Number)") {
                let n: u64 = n.parse().map_err(|_| {
                    self.malformed(at, format!("'Frames in Acquisition (Number)' is '{n}', not a number"))
                })?;
                // Continuous acquisitions announce 0.
                frames = (n > 0).then_some(n);
            }
            details.extend(parsed.entries.iter().filter(|(k, _)| !k.is_empty()).take(64).cloned());
            self.read_frame(stop, Patience::Stall(STARTUP_STALL))?
        } else if head.starts_with(b"MQ1,") {
            self.read_frame_body(length, stop, Patience::Stall(STARTUP_STALL), "frame 0", &head)?
        } else {
            return Err(self.malformed(
                at,
                format!(
                    "expected an acquisition header (HDR) or a frame (MQ1), found {}",
                    crate::dataset::mib::header::show_bytes(&head)
                ),
            ));
        };
        self.pending = Some(first);
        let (header, layout) = match (&self.header, &self.layout) {
            (Some(h), Some(l)) => (h.clone(), l.clone()),
            _ => return Err(LiveError::Invalid("internal: the first frame was read without its header".into())),
        };
        let encoding = match &layout.decode {
            MibDecode::Plain(_) => FrameEncoding::Plain,
            MibDecode::Raw(raw) => FrameEncoding::MerlinRaw(raw.clone()),
        };
        details.insert(0, ("frame_header".into(), header.to_string()));
        Ok(Acquisition {
            sig: layout.sig.to_vec(),
            stored: layout.stored(),
            encoding,
            payload_bytes: Some(layout.frame_bytes),
            frames,
            details,
        })
    }

    fn next_frame(&mut self, stop: &Stop, stall: Duration) -> Result<Option<Bytes>, LiveError> {
        let frame = match self.pending.take() {
            Some(first) => first,
            None => self.read_frame(stop, Patience::Stall(stall))?,
        };
        self.frames += 1;
        Ok(Some(frame))
    }

    fn bytes_received(&self) -> u64 {
        self.wire.bytes
    }
}

/// How long the first frame may take after the acquisition header.
const STARTUP_STALL: Duration = Duration::from_secs(60);
