//! DECTRIS detectors (ARINA, QUADRO, EIGER2): the ZeroMQ stream, and the SIMPLON REST API
//! to arm the detector ([`Simplon`]).
//!
//! The detector PUSHes, this receiver PULLs (a pure-Rust ZeroMQ, the `zeromq` crate).
//! Two message formats, told apart by their first byte:
//!
//! - **Stream V2** (`cbor`, port 31001, firmware 2022.1 on): one CBOR map per message,
//!   `type` = `start` (image size and dtype, number of images, series id), `image`
//!   (`image_id`, `data`: channel → a row-major multi-dimensional array (tag 40) of a
//!   typed array (tags 64–87) whose bytes are plain or compressed (DECTRIS tag 56500:
//!   `["bslz4", element size, bytes]` or `["lz4", 0, bytes]`)), `end`.
//! - **Stream V1** (`legacy`, port 9999): JSON parts `dheader-1.0` (+ the detector
//!   configuration), per image `dimage-1.0` (`frame`), `dimage_d-1.0` (`shape` [x, y],
//!   `type`, `encoding` such as `bs16-lz4<`), the data, `dconfig-1.0`; `dseries_end-1.0`.
//!   Parts are read in order whether they come as one multipart message or several.
//!
//! Compressed frames are kept as they came and decoded in the partitions by the HDF5
//! reader's bitshuffle-LZ4 decoder. Image numbers must be consecutive and the series the
//! one that started: a lost image is an error, never a silent gap.

use super::frames::{Acquisition, FrameEncoding};
use super::wire::POLL;
use super::{LiveError, Receiver, Stop};
use crate::dtype::{ByteOrder, DType, StoredDType};
use bytes::Bytes;
use std::collections::VecDeque;
use std::time::{Duration, Instant};
use zeromq::{Socket, SocketRecv};

/// The stream's default port (Stream V2).
pub const DEFAULT_PORT: u16 = 31001;

/// Which message format a DECTRIS stream uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamFormat {
    /// Stream V2: one CBOR message per image.
    Cbor,
    /// Stream V1 ("legacy"): JSON headers and binary data parts.
    Legacy,
}

/// The SIMPLON REST API of a detector control unit (`http://HOST:PORT`): arm and disarm.
pub struct Simplon {
    base: String,
    agent: ureq::Agent,
}

impl Simplon {
    /// The API at `base` (`http://127.0.0.1:8910`).
    pub fn new(base: &str) -> Self {
        let config = ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(30))).build();
        Simplon { base: base.trim_end_matches('/').to_owned(), agent: config.into() }
    }

    fn error(&self, message: impl Into<String>) -> LiveError {
        LiveError::Api { api: self.base.clone(), message: message.into() }
    }

    /// `PUT detector/api/1.8.0/command/{command}`; the JSON answer (may be empty).
    ///
    /// # Errors
    /// [`LiveError::Api`]: unreachable, an HTTP error, not JSON.
    pub fn command(&self, command: &str) -> Result<serde_json::Value, LiveError> {
        let url = format!("{}/detector/api/1.8.0/command/{command}", self.base);
        let mut response = self
            .agent
            .put(&url)
            .header("Content-Type", "application/json")
            .send("")
            .map_err(|e| self.error(format!("PUT {url}: {e}")))?;
        let text = response.body_mut().read_to_string().map_err(|e| self.error(format!("PUT {url}: {e}")))?;
        if text.trim().is_empty() {
            return Ok(serde_json::Value::Null);
        }
        serde_json::from_str(&text).map_err(|e| self.error(format!("PUT {url} answered {text:?}, not JSON: {e}")))
    }

    /// Arm the detector: the series id it answers with.
    ///
    /// # Errors
    /// As [`command`](Self::command).
    pub fn arm(&self) -> Result<Option<u64>, LiveError> {
        Ok(self.command("arm")?.get("sequence id").and_then(serde_json::Value::as_u64))
    }
}

/// Receives one series from a DECTRIS stream.
pub struct DectrisReceiver {
    address: String,
    endpoint: String,
    connected: bool,
    runtime: tokio::runtime::Runtime,
    socket: zeromq::PullSocket,
    /// Whether the socket's monitor reported the detector's connection gone (ZeroMQ
    /// would otherwise wait quietly for it to come back: a stall).
    disconnected: Box<dyn FnMut() -> bool + Send>,
    api: Option<Simplon>,
    armed: bool,
    /// Parts received and not yet consumed.
    parts: VecDeque<Bytes>,
    format: Option<StreamFormat>,
    series: Option<u64>,
    /// The first image's geometry, checked against every other.
    image: Option<ImageGeometry>,
    pending: Option<Bytes>,
    frames: u64,
    bytes: u64,
    /// Stream V2: the channel read (the first of the start message's).
    channel: Option<String>,
}

/// What each image must look like.
#[derive(Debug, Clone, PartialEq)]
struct ImageGeometry {
    sig: [usize; 2],
    stored: StoredDType,
    encoding: FrameEncoding,
}

impl DectrisReceiver {
    /// A PULL socket for the stream at `address` (`host:port`), connected when the
    /// receiver starts; with `api` (`http://HOST:PORT`), the detector is armed through its
    /// SIMPLON API then.
    ///
    /// # Errors
    /// [`LiveError::Connect`] if the network runtime cannot start.
    pub fn connect(address: &str, api: Option<&str>) -> Result<Self, LiveError> {
        let endpoint = format!("dectris://{address}");
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| {
            LiveError::Connect { endpoint: endpoint.clone(), error: std::io::Error::other(e.to_string()) }
        })?;
        let mut socket = zeromq::PullSocket::new();
        let mut monitor = socket.monitor();
        let disconnected = Box::new(move || {
            std::iter::from_fn(|| monitor.try_recv().ok())
                .any(|event| matches!(event, zeromq::SocketEvent::Disconnected(_)))
        });
        Ok(DectrisReceiver {
            address: address.to_owned(),
            endpoint,
            runtime,
            socket,
            disconnected,
            connected: false,
            api: api.map(Simplon::new),
            armed: false,
            parts: VecDeque::new(),
            format: None,
            series: None,
            image: None,
            pending: None,
            frames: 0,
            bytes: 0,
            channel: None,
        })
    }

    /// Connect, trying until `limit` (a ZeroMQ sender may bind only once armed).
    fn connect_within(&mut self, stop: &Stop, limit: Option<Duration>) -> Result<bool, LiveError> {
        let url = format!("tcp://{}", self.address);
        let started = Instant::now();
        while !self.connected {
            if stop.is_stopped() {
                return Err(LiveError::Stopped);
            }
            if limit.is_some_and(|l| started.elapsed() >= l) {
                return Ok(false);
            }
            let socket = &mut self.socket;
            let attempt = self.runtime.block_on(async { tokio::time::timeout(4 * POLL, socket.connect(&url)).await });
            match attempt {
                Ok(Ok(())) => self.connected = true,
                Ok(Err(_)) => std::thread::sleep(POLL),
                Err(_elapsed) => {}
            }
        }
        Ok(true)
    }

    fn malformed(&self, at: impl Into<String>, message: impl Into<String>) -> LiveError {
        LiveError::Malformed { endpoint: self.endpoint.clone(), at: at.into(), message: message.into() }
    }

    /// The next part, waiting as `patience` allows.
    fn next_part(&mut self, stop: &Stop, patience: Patience) -> Result<Bytes, LiveError> {
        let waiting = Instant::now();
        loop {
            if let Some(part) = self.parts.pop_front() {
                return Ok(part);
            }
            if stop.is_stopped() {
                return Err(LiveError::Stopped);
            }
            let socket = &mut self.socket;
            match self.runtime.block_on(async { tokio::time::timeout(POLL, socket.recv()).await }) {
                Ok(Ok(message)) => {
                    for part in message.into_vecdeque() {
                        self.bytes += part.len() as u64;
                        self.parts.push_back(part);
                    }
                }
                Ok(Err(e)) => {
                    return Err(LiveError::Disconnected {
                        endpoint: self.endpoint.clone(),
                        frames: self.frames,
                        during: format!("({e})"),
                    });
                }
                Err(_elapsed) if (self.disconnected)() => {
                    return Err(LiveError::Disconnected {
                        endpoint: self.endpoint.clone(),
                        frames: self.frames,
                        during: String::new(),
                    });
                }
                Err(_elapsed) => match patience {
                    Patience::Stall(limit) if waiting.elapsed() >= limit => {
                        return Err(LiveError::Stalled {
                            endpoint: self.endpoint.clone(),
                            seconds: limit.as_secs_f64(),
                            frames: self.frames,
                        });
                    }
                    Patience::Start(Some(limit)) if waiting.elapsed() >= limit => {
                        return Err(LiveError::NoStart {
                            endpoint: self.endpoint.clone(),
                            seconds: limit.as_secs_f64(),
                        });
                    }
                    _ => {}
                },
            }
        }
    }

    /// A legacy JSON part (an object), or a malformed-input error naming `at`.
    fn json(&self, part: &[u8], at: &str) -> Result<serde_json::Map<String, serde_json::Value>, LiveError> {
        match serde_json::from_slice::<serde_json::Value>(part) {
            Ok(serde_json::Value::Object(map)) => Ok(map),
            Ok(_) => Err(self.malformed(at, "expected a JSON object")),
            Err(e) => Err(self.malformed(at, format!("not JSON ({e}): {}", shown(part)))),
        }
    }

    /// Stream V1: read an image's parts after its `dimage-1.0` part: the data.
    fn legacy_image(
        &mut self,
        dimage: serde_json::Map<String, serde_json::Value>,
        stop: &Stop,
        stall: Duration,
    ) -> Result<Bytes, LiveError> {
        let at = format!("image {}", self.frames);
        let series = dimage.get("series").and_then(serde_json::Value::as_u64);
        let frame = dimage.get("frame").and_then(serde_json::Value::as_u64);
        self.check_numbers(&at, series, frame)?;
        let part = self.next_part(stop, Patience::Stall(stall))?;
        let dimage_d = self.json(&part, &at)?;
        if htype(&dimage_d) != Some("dimage_d-1.0") {
            return Err(self.malformed(&at, format!("expected the dimage_d-1.0 part, found {}", shown(&part))));
        }
        let geometry = legacy_geometry(&dimage_d).map_err(|e| self.malformed(&at, e))?;
        self.check_geometry(&at, geometry)?;
        let data = self.next_part(stop, Patience::Stall(stall))?;
        // The dconfig-1.0 part (times) closes the image.
        let footer = self.next_part(stop, Patience::Stall(stall))?;
        if self.json(&footer, &at).ok().as_ref().and_then(htype) != Some("dconfig-1.0") {
            return Err(self.malformed(&at, format!("expected the dconfig-1.0 part, found {}", shown(&footer))));
        }
        Ok(data)
    }

    /// Series and image numbers: the series that started, images consecutive from 0.
    fn check_numbers(&self, at: &str, series: Option<u64>, image: Option<u64>) -> Result<(), LiveError> {
        if let (Some(expected), Some(got)) = (self.series, series)
            && expected != got
        {
            return Err(self.malformed(at, format!("an image of series {got} inside series {expected}")));
        }
        match image {
            Some(n) if n == self.frames => Ok(()),
            Some(n) => Err(self.malformed(
                at,
                format!("image number {n}, expected {}: the detector skipped or repeated images", self.frames),
            )),
            None => Err(self.malformed(at, "the image has no number")),
        }
    }

    fn check_geometry(&mut self, at: &str, geometry: ImageGeometry) -> Result<(), LiveError> {
        match &self.image {
            None => {
                self.image = Some(geometry);
                Ok(())
            }
            Some(first) if *first == geometry => Ok(()),
            Some(first) => Err(self.malformed(
                at,
                format!(
                    "{}x{} {} {} pixels, but the series started with {}x{} {} {}",
                    geometry.sig[0],
                    geometry.sig[1],
                    geometry.stored,
                    geometry.encoding.name(),
                    first.sig[0],
                    first.sig[1],
                    first.stored,
                    first.encoding.name()
                ),
            )),
        }
    }

    /// Stream V2: an image message's pixel bytes.
    fn cbor_image(&mut self, message: &Bytes, image: cbor::Image) -> Result<Bytes, LiveError> {
        let at = format!("image {}", self.frames);
        self.check_numbers(&at, image.series_id, image.image_id)?;
        let channel = match &self.channel {
            Some(name) => image.data.iter().find(|(n, _)| n == name),
            None => image.data.first(),
        }
        .ok_or_else(|| self.malformed(&at, "the image has no data for the channel read"))?;
        let array = &channel.1;
        let geometry = ImageGeometry { sig: array.dims, stored: array.stored, encoding: array.encoding.clone() };
        self.check_geometry(&at, geometry)?;
        Ok(message.slice(array.bytes.clone()))
    }
}

/// How long a wait may last.
#[derive(Debug, Clone, Copy)]
enum Patience {
    Start(Option<Duration>),
    Stall(Duration),
}

fn htype(map: &serde_json::Map<String, serde_json::Value>) -> Option<&str> {
    map.get("htype").and_then(serde_json::Value::as_str)
}

/// The first bytes of a part, printable.
fn shown(part: &[u8]) -> String {
    crate::dataset::mib::header::show_bytes(&part[..part.len().min(16)])
}

/// The geometry a `dimage_d-1.0` part describes.
fn legacy_geometry(d: &serde_json::Map<String, serde_json::Value>) -> Result<ImageGeometry, String> {
    let shape: Vec<usize> = d
        .get("shape")
        .and_then(serde_json::Value::as_array)
        .map(|s| s.iter().filter_map(|v| v.as_u64().map(|v| v as usize)).collect())
        .unwrap_or_default();
    let [x, y] = shape[..] else { return Err(format!("'shape' is {:?}, expected [x, y]", d.get("shape"))) };
    let dtype = match d.get("type").and_then(serde_json::Value::as_str) {
        Some("uint8") => DType::U8,
        Some("uint16") => DType::U16,
        Some("uint32") => DType::U32,
        other => return Err(format!("pixel type {other:?}, expected uint8, uint16 or uint32")),
    };
    let encoding = d.get("encoding").and_then(serde_json::Value::as_str).unwrap_or("");
    let (order, body) = match encoding.strip_suffix('<') {
        Some(body) => (ByteOrder::Little, body),
        None => (ByteOrder::Big, encoding.strip_suffix('>').ok_or_else(|| format!("encoding '{encoding}'"))?),
    };
    let encoding = match body {
        "" => FrameEncoding::Plain,
        "lz4" => FrameEncoding::Lz4,
        "bs8-lz4" => FrameEncoding::BitshuffleLz4 { elem_size: 1 },
        "bs16-lz4" => FrameEncoding::BitshuffleLz4 { elem_size: 2 },
        "bs32-lz4" => FrameEncoding::BitshuffleLz4 { elem_size: 4 },
        _ => return Err(format!("encoding '{encoding}' (supported: <, lz4<, bs8/bs16/bs32-lz4<)")),
    };
    if order == ByteOrder::Big && encoding != FrameEncoding::Plain {
        return Err(format!("compressed big-endian frames ('{encoding:?}') are not supported"));
    }
    Ok(ImageGeometry { sig: [y, x], stored: StoredDType { dtype, order }, encoding })
}

impl Receiver for DectrisReceiver {
    fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn format(&self) -> &'static str {
        "dectris-live"
    }

    fn start(&mut self, stop: &Stop, timeout: Option<Duration>) -> Result<Acquisition, LiveError> {
        // Connect first, as a receiver should; a sender that binds only once armed (as
        // LiberTEM-rs's simulator does) is connected to after arming.
        let connected = self.connect_within(stop, Some(Duration::from_secs(2)))?;
        if let Some(api) = &self.api {
            let series = api.arm()?;
            self.armed = true;
            self.series = series;
        }
        if !connected && !self.connect_within(stop, timeout)? {
            return Err(LiveError::NoStart {
                endpoint: self.endpoint.clone(),
                seconds: timeout.map_or(0.0, |t| t.as_secs_f64()),
            });
        }
        let mut details = Vec::new();
        let mut frames = None;
        let at = "the series header";
        // Skip what precedes the start of a series (the end of an earlier one).
        let first_image = loop {
            let part = self.next_part(stop, Patience::Start(timeout))?;
            let format = if part.first() == Some(&b'{') { StreamFormat::Legacy } else { StreamFormat::Cbor };
            match format {
                StreamFormat::Legacy => {
                    let map = self.json(&part, at)?;
                    match htype(&map) {
                        Some("dheader-1.0") => {
                            self.format = Some(StreamFormat::Legacy);
                            let series = map.get("series").and_then(serde_json::Value::as_u64);
                            if self.series.is_some() && series != self.series {
                                continue; // a series armed before ours
                            }
                            self.series = series;
                            details.push(("stream".to_owned(), "legacy (V1)".to_owned()));
                            if let Some(detail) = map.get("header_detail").and_then(serde_json::Value::as_str) {
                                details.push(("header_detail".into(), detail.into()));
                            }
                        }
                        Some("dimage-1.0") if self.format.is_some() => {
                            let stall = Duration::from_secs(60);
                            break self.legacy_image(map, stop, stall)?;
                        }
                        None if self.format.is_some() => {
                            // The detector configuration.
                            frames = legacy_frames(&map);
                            for key in ["description", "detector_number", "trigger_mode", "nimages", "ntrigger"] {
                                if let Some(v) = map.get(key) {
                                    details.push((key.into(), v.to_string().trim_matches('"').to_owned()));
                                }
                            }
                        }
                        _ => {}
                    }
                }
                StreamFormat::Cbor => {
                    let message = cbor::parse(&part).map_err(|e| self.malformed(at, e))?;
                    match message {
                        cbor::Message::Start(start) => {
                            if self.series.is_some() && start.series_id != self.series {
                                continue;
                            }
                            self.format = Some(StreamFormat::Cbor);
                            self.series = start.series_id;
                            self.channel = start.channels.first().cloned();
                            frames = start.number_of_images;
                            details.push(("stream".into(), "cbor (V2)".into()));
                            if let Some(channel) = &self.channel {
                                details.push(("channel".into(), channel.clone()));
                            }
                        }
                        cbor::Message::Image(image) if self.format.is_some() => {
                            break self.cbor_image(&part, image)?;
                        }
                        _ => {}
                    }
                }
            }
        };
        self.pending = Some(first_image);
        let geometry = self.image.clone().ok_or_else(|| self.malformed(at, "no image geometry"))?;
        let payload_bytes = (geometry.encoding == FrameEncoding::Plain)
            .then(|| geometry.sig[0] * geometry.sig[1] * geometry.stored.dtype.size());
        if let Some(series) = self.series {
            details.push(("series".into(), series.to_string()));
        }
        Ok(Acquisition {
            sig: geometry.sig.to_vec(),
            stored: if geometry.encoding == FrameEncoding::Plain {
                geometry.stored
            } else {
                StoredDType::le(geometry.stored.dtype)
            },
            encoding: geometry.encoding,
            payload_bytes,
            frames,
            details,
        })
    }

    fn next_frame(&mut self, stop: &Stop, stall: Duration) -> Result<Option<Bytes>, LiveError> {
        if let Some(first) = self.pending.take() {
            self.frames += 1;
            return Ok(Some(first));
        }
        let at = format!("image {}", self.frames);
        let part = self.next_part(stop, Patience::Stall(stall))?;
        let data = match self.format {
            Some(StreamFormat::Legacy) => {
                let map = self.json(&part, &at)?;
                match htype(&map) {
                    Some("dimage-1.0") => self.legacy_image(map, stop, stall)?,
                    Some("dseries_end-1.0") => return Ok(None),
                    _ => return Err(self.malformed(&at, format!("expected dimage-1.0, found {}", shown(&part)))),
                }
            }
            _ => match cbor::parse(&part).map_err(|e| self.malformed(&at, e))? {
                cbor::Message::Image(image) => self.cbor_image(&part, image)?,
                cbor::Message::End => return Ok(None),
                cbor::Message::Start(_) => return Err(self.malformed(&at, "a new series started inside the series")),
                cbor::Message::Other(kind) => return Err(self.malformed(&at, format!("unexpected '{kind}' message"))),
            },
        };
        if let Some(expected) = self.image.as_ref().filter(|g| g.encoding == FrameEncoding::Plain) {
            let n = expected.sig[0] * expected.sig[1] * expected.stored.dtype.size();
            if data.len() != n {
                return Err(self.malformed(&at, format!("{} bytes of pixels, expected {n}", data.len())));
            }
        }
        self.frames += 1;
        Ok(Some(data))
    }

    fn bytes_received(&self) -> u64 {
        self.bytes
    }

    fn finish(&mut self) {
        if self.armed
            && let Some(api) = &self.api
        {
            // Best effort: a detector that already finished the series ignores it.
            let _ = api.command("disarm");
            self.armed = false;
        }
    }
}

/// Frames a legacy detector configuration announces.
fn legacy_frames(config: &serde_json::Map<String, serde_json::Value>) -> Option<u64> {
    let get = |k: &str| config.get(k).and_then(serde_json::Value::as_u64);
    let (nimages, ntrigger) = (get("nimages").unwrap_or(1), get("ntrigger").unwrap_or(1));
    match config.get("trigger_mode").and_then(serde_json::Value::as_str) {
        Some("exte" | "inte") => Some(ntrigger),
        _ => Some(nimages * ntrigger),
    }
}

pub(crate) mod cbor {
    //! The Stream V2 messages, decoded with `minicbor` without copying the pixels: an
    //! image's data is a byte range of the message.

    use super::FrameEncoding;
    use crate::dtype::{ByteOrder, DType, StoredDType};
    use minicbor::Decoder;
    use minicbor::data::{Tag, Type};
    use std::ops::Range;

    /// CBOR's self-describe tag, which may precede a message.
    const SELF_DESCRIBE: u64 = 55799;
    const MULTI_DIM_ROW_MAJOR: u64 = 40;
    const DECTRIS_COMPRESSION: u64 = 56500;

    pub enum Message {
        Start(Start),
        Image(Image),
        End,
        Other(String),
    }

    #[derive(Default)]
    pub struct Start {
        pub series_id: Option<u64>,
        pub number_of_images: Option<u64>,
        pub channels: Vec<String>,
    }

    #[derive(Default)]
    pub struct Image {
        pub series_id: Option<u64>,
        pub image_id: Option<u64>,
        pub data: Vec<(String, PixelArray)>,
    }

    /// A channel's pixels: where they are in the message and how they decode.
    pub struct PixelArray {
        pub dims: [usize; 2],
        pub stored: StoredDType,
        pub encoding: FrameEncoding,
        pub bytes: Range<usize>,
    }

    type Result<T> = std::result::Result<T, String>;

    fn err(e: impl std::fmt::Display) -> String {
        format!("not a valid CBOR message: {e}")
    }

    /// Decode a message.
    ///
    /// # Errors
    /// Not CBOR, not a map with a `type`, or an image whose data is not an array of a
    /// supported type.
    pub fn parse(bytes: &[u8]) -> Result<Message> {
        let mut d = Decoder::new(bytes);
        if d.datatype().map_err(err)? == Type::Tag {
            let tag = d.tag().map_err(err)?;
            if tag != Tag::new(SELF_DESCRIBE) {
                return Err(format!("a message must be a map, found tag {}", tag.as_u64()));
            }
        }
        let len = d.map().map_err(err)?.ok_or("indefinite-length maps are not supported")?;
        let mut kind = None;
        let mut start = Start::default();
        let mut image = Image::default();
        for _ in 0..len {
            let key = d.str().map_err(err)?;
            match key {
                "type" => kind = Some(d.str().map_err(err)?.to_owned()),
                "series_id" => {
                    let v = Some(d.u64().map_err(err)?);
                    start.series_id = v;
                    image.series_id = v;
                }
                "image_id" => image.image_id = Some(d.u64().map_err(err)?),
                "number_of_images" => start.number_of_images = Some(d.u64().map_err(err)?),
                "channels" => {
                    let n = d.array().map_err(err)?.ok_or("indefinite-length arrays are not supported")?;
                    for _ in 0..n {
                        start.channels.push(d.str().map_err(err)?.to_owned());
                    }
                }
                "data" => {
                    let n = d.map().map_err(err)?.ok_or("indefinite-length maps are not supported")?;
                    for _ in 0..n {
                        let name = d.str().map_err(err)?.to_owned();
                        let array = pixel_array(&mut d).map_err(|e| format!("channel '{name}': {e}"))?;
                        image.data.push((name, array));
                    }
                }
                _ => d.skip().map_err(err)?,
            }
        }
        Ok(match kind.as_deref() {
            Some("start") => Message::Start(start),
            Some("image") => Message::Image(image),
            Some("end") => Message::End,
            Some(other) => Message::Other(other.to_owned()),
            None => return Err("the message has no 'type'".into()),
        })
    }

    /// `40([[rows, cols], typed array])`.
    fn pixel_array(d: &mut Decoder<'_>) -> Result<PixelArray> {
        let tag = d.tag().map_err(err)?.as_u64();
        if tag != MULTI_DIM_ROW_MAJOR {
            return Err(format!("expected a row-major multi-dimensional array (tag 40), found tag {tag}"));
        }
        if d.array().map_err(err)? != Some(2) {
            return Err("a multi-dimensional array is [dimensions, data]".into());
        }
        if d.array().map_err(err)? != Some(2) {
            return Err("only 2-dimensional images are supported".into());
        }
        let dims = [d.u64().map_err(err)? as usize, d.u64().map_err(err)? as usize];
        let typed = d.tag().map_err(err)?.as_u64();
        let dtype = match typed {
            64 | 68 => StoredDType::le(DType::U8),
            65 => StoredDType { dtype: DType::U16, order: ByteOrder::Big },
            66 => StoredDType { dtype: DType::U32, order: ByteOrder::Big },
            69 => StoredDType::le(DType::U16),
            70 => StoredDType::le(DType::U32),
            other => return Err(format!("typed array tag {other} (supported: unsigned 8, 16, 32 bit, 64-70)")),
        };
        let (encoding, bytes) = if d.datatype().map_err(err)? == Type::Tag {
            let tag = d.tag().map_err(err)?.as_u64();
            if tag != DECTRIS_COMPRESSION {
                return Err(format!("expected pixel bytes or DECTRIS compression (tag 56500), found tag {tag}"));
            }
            if d.array().map_err(err)? != Some(3) {
                return Err("compressed data is [algorithm, element size, bytes]".into());
            }
            let algorithm = d.str().map_err(err)?.to_owned();
            let elem_size = d.u64().map_err(err)? as usize;
            let encoding = match algorithm.as_str() {
                "bslz4" => FrameEncoding::BitshuffleLz4 { elem_size },
                "lz4" => FrameEncoding::Lz4,
                other => return Err(format!("compression '{other}' (supported: bslz4, lz4)")),
            };
            if dtype.order == ByteOrder::Big && dtype.dtype != DType::U8 {
                return Err("compressed big-endian pixels are not supported".into());
            }
            (encoding, byte_range(d)?)
        } else {
            (FrameEncoding::Plain, byte_range(d)?)
        };
        Ok(PixelArray { dims, stored: dtype, encoding, bytes })
    }

    /// The range of the next byte string in the input.
    fn byte_range(d: &mut Decoder<'_>) -> Result<Range<usize>> {
        let input = d.input();
        let base = input.as_ptr() as usize;
        let bytes = d.bytes().map_err(err)?;
        let start = bytes.as_ptr() as usize - base;
        Ok(start..start + bytes.len())
    }
}
