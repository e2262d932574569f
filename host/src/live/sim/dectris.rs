//! A DECTRIS detector: a ZeroMQ PUSH stream of a dataset's frames (Stream V2 CBOR or V1
//! legacy JSON), bitshuffle-LZ4 compressed as the detector sends them, and the part of
//! the SIMPLON REST API that arms it (`PUT /detector/api/1.8.0/command/arm`).
//!
//! Every message is built before the first client connects, so sending is only the
//! network's work: the simulator is not the bottleneck of a benchmark.

use super::{Faults, Pacer, SimError, SimOptions, SimReport};
use crate::dataset::{self, OpenOptions, SigSlice};
use crate::dtype::DType;
use crate::live::{Stop, StreamFormat};
use bytes::Bytes;
use rayon::prelude::*;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use zeromq::{Socket, SocketSend, ZmqMessage};

/// The frames of a dataset, encoded as a DECTRIS detector sends them.
pub struct DectrisSource {
    /// Per image: the parts of its message(s).
    images: Vec<Vec<Bytes>>,
    start: Vec<Vec<Bytes>>,
    end: Vec<Bytes>,
    format: StreamFormat,
}

/// How long the simulator keeps its socket after the last series, for the messages
/// still queued in it to go out.
const LINGER: Duration = Duration::from_secs(5);

/// The series id the simulator reports.
const SERIES: u64 = 7;

impl DectrisSource {
    /// Read every frame of the dataset `path` (any format udf-host opens, with
    /// `options`), of unsigned 8-, 16- or 32-bit pixels, and encode them in `format`,
    /// bitshuffle-LZ4 compressed when `compress`.
    ///
    /// # Errors
    /// [`SimError::Input`]: unreadable, or pixels of another type.
    pub fn open(path: &Path, options: &OpenOptions, format: StreamFormat, compress: bool) -> Result<Self, SimError> {
        let input = |message: String| SimError::Input { path: path.display().to_string(), message };
        let data = dataset::open(path, options).map_err(|e| input(e.to_string()))?;
        let dtype = data.stored_dtype().dtype;
        if !matches!(dtype, DType::U8 | DType::U16 | DType::U32) {
            return Err(input(format!("{dtype} pixels; a DECTRIS detector sends uint8, uint16 or uint32")));
        }
        let sig = data.shape().sig.clone();
        let [height, width] = sig[..] else { return Err(input(format!("frames of shape {sig:?}, not 2-D"))) };
        let frames = data.shape().nav_len();
        let frame_bytes = width * height * dtype.size();
        let full = SigSlice::full(&sig);
        let encoded: Vec<Result<Bytes, String>> = (0..frames)
            .into_par_iter()
            .map(|i| {
                let mut pixels = vec![0u8; frame_bytes];
                data.read_tile(&[i as u64], &full, dtype, &mut pixels).map_err(|e| e.to_string())?;
                Ok(if compress { Bytes::from(bitshuffle_lz4(&pixels, dtype.size())) } else { Bytes::from(pixels) })
            })
            .collect();
        let mut images = Vec::with_capacity(frames);
        for (i, frame) in encoded.into_iter().enumerate() {
            let frame = frame.map_err(input)?;
            images.push(match format {
                StreamFormat::Cbor => vec![Bytes::from(cbor_image(i as u64, [height, width], dtype, compress, &frame))],
                StreamFormat::Legacy => legacy_image(i as u64, [height, width], dtype, compress, frame),
            });
        }
        let (start, end) = match format {
            StreamFormat::Cbor => {
                (vec![vec![Bytes::from(cbor_start(frames as u64, [height, width], dtype))]], cbor_end())
            }
            StreamFormat::Legacy => legacy_header(frames as u64, [height, width], dtype, compress),
        };
        Ok(DectrisSource { images, start, end, format })
    }

    /// Images in the series.
    pub fn frames(&self) -> u64 {
        self.images.len() as u64
    }

    /// The stream format.
    pub fn format(&self) -> StreamFormat {
        self.format
    }
}

/// Bitshuffle + LZ4 with the HDF5 filter's framing (what DECTRIS detectors send, and
/// what `dataset::hdf5::filters` decodes): big-endian decoded size and block size in
/// bytes, then per block of 8192 bytes' worth of elements (a multiple of 8) the 4-byte
/// big-endian size of its LZ4 block and the block; trailing elements that do not fill
/// a multiple of 8 are stored as they are.
pub fn bitshuffle_lz4(data: &[u8], elem_size: usize) -> Vec<u8> {
    let block = (8192 / elem_size / 8 * 8).max(128);
    let elems = data.len() / elem_size;
    let mut out = Vec::with_capacity(data.len() / 2 + 64);
    out.extend_from_slice(&(data.len() as u64).to_be_bytes());
    out.extend_from_slice(&((block * elem_size) as u32).to_be_bytes());
    let mut shuffled = vec![0u8; block * elem_size];
    let mut done = 0;
    while done < elems {
        let n = (elems - done).min(block) / 8 * 8;
        if n == 0 {
            break;
        }
        let src = &data[done * elem_size..(done + n) * elem_size];
        let dst = &mut shuffled[..n * elem_size];
        bit_transpose(src, dst, n, elem_size);
        let compressed = lz4_flex::block::compress(dst);
        out.extend_from_slice(&(compressed.len() as u32).to_be_bytes());
        out.extend_from_slice(&compressed);
        done += n;
    }
    out.extend_from_slice(&data[done * elem_size..]);
    out
}

/// Bitshuffle's transpose of `n` elements (`n` a multiple of 8): bit `k` of byte `j` of
/// element `i` goes to bit row `8 j + k`, byte `i / 8`, bit `i % 8`.
fn bit_transpose(src: &[u8], dst: &mut [u8], n: usize, elem_size: usize) {
    dst.fill(0);
    let row = n / 8;
    for i in 0..n {
        for j in 0..elem_size {
            let byte = src[i * elem_size + j];
            if byte == 0 {
                continue;
            }
            for k in 0..8 {
                if byte >> k & 1 == 1 {
                    dst[(8 * j + k) * row + i / 8] |= 1 << (i % 8);
                }
            }
        }
    }
}

fn dtype_name(dtype: DType) -> &'static str {
    match dtype {
        DType::U8 => "uint8",
        DType::U16 => "uint16",
        _ => "uint32",
    }
}

fn cbor_start(frames: u64, [height, width]: [usize; 2], dtype: DType) -> Vec<u8> {
    let mut e = minicbor::Encoder::new(Vec::new());
    let ok: Result<_, minicbor::encode::Error<std::convert::Infallible>> = (|| {
        e.tag(minicbor::data::Tag::new(55799))?.map(8)?;
        e.str("type")?.str("start")?;
        e.str("series_id")?.u64(SERIES)?;
        e.str("series_unique_id")?.str("udf-host-simulator")?;
        e.str("number_of_images")?.u64(frames)?;
        e.str("image_size_x")?.u64(width as u64)?;
        e.str("image_size_y")?.u64(height as u64)?;
        e.str("image_dtype")?.str(dtype_name(dtype))?;
        e.str("channels")?.array(1)?.str("threshold_1")?;
        Ok(())
    })();
    let _ = ok;
    e.into_writer()
}

fn cbor_image(id: u64, [height, width]: [usize; 2], dtype: DType, compressed: bool, frame: &[u8]) -> Vec<u8> {
    let mut e = minicbor::Encoder::new(Vec::with_capacity(frame.len() + 256));
    let typed = match dtype {
        DType::U8 => 64,
        DType::U16 => 69,
        _ => 70,
    };
    let ok: Result<_, minicbor::encode::Error<std::convert::Infallible>> = (|| {
        e.tag(minicbor::data::Tag::new(55799))?.map(5)?;
        e.str("type")?.str("image")?;
        e.str("series_id")?.u64(SERIES)?;
        e.str("series_unique_id")?.str("udf-host-simulator")?;
        e.str("image_id")?.u64(id)?;
        e.str("data")?.map(1)?.str("threshold_1")?;
        e.tag(minicbor::data::Tag::new(40))?.array(2)?.array(2)?.u64(height as u64)?.u64(width as u64)?;
        e.tag(minicbor::data::Tag::new(typed))?;
        if compressed {
            e.tag(minicbor::data::Tag::new(56500))?.array(3)?.str("bslz4")?.u64(dtype.size() as u64)?;
        }
        e.bytes(frame)?;
        Ok(())
    })();
    let _ = ok;
    e.into_writer()
}

fn cbor_end() -> Vec<Bytes> {
    let mut e = minicbor::Encoder::new(Vec::new());
    let ok: Result<_, minicbor::encode::Error<std::convert::Infallible>> = (|| {
        e.tag(minicbor::data::Tag::new(55799))?.map(3)?;
        e.str("type")?.str("end")?;
        e.str("series_id")?.u64(SERIES)?;
        e.str("series_unique_id")?.str("udf-host-simulator")?;
        Ok(())
    })();
    let _ = ok;
    vec![Bytes::from(e.into_writer())]
}

fn json(value: serde_json::Value) -> Bytes {
    Bytes::from(value.to_string())
}

/// The legacy header (dheader-1.0 + the detector configuration) and end.
fn legacy_header(
    frames: u64,
    [height, width]: [usize; 2],
    dtype: DType,
    compress: bool,
) -> (Vec<Vec<Bytes>>, Vec<Bytes>) {
    let header = json(serde_json::json!({"htype": "dheader-1.0", "header_detail": "basic", "series": SERIES}));
    let config = json(serde_json::json!({
        "description": "udf-host simulator",
        "trigger_mode": "exte",
        "nimages": 1,
        "ntrigger": frames,
        "x_pixels_in_detector": width,
        "y_pixels_in_detector": height,
        "bit_depth_image": dtype.size() * 8,
        "compression": if compress { "bslz4" } else { "none" },
    }));
    let end = json(serde_json::json!({"htype": "dseries_end-1.0", "series": SERIES}));
    (vec![vec![header, config]], vec![end])
}

fn legacy_image(id: u64, [height, width]: [usize; 2], dtype: DType, compressed: bool, frame: Bytes) -> Vec<Bytes> {
    let encoding = if compressed { format!("bs{}-lz4<", dtype.size() * 8) } else { "<".to_owned() };
    vec![
        json(serde_json::json!({"htype": "dimage-1.0", "series": SERIES, "frame": id, "hash": ""})),
        json(serde_json::json!({
            "htype": "dimage_d-1.0", "shape": [width, height], "type": dtype_name(dtype),
            "encoding": encoding, "size": frame.len(),
        })),
        frame,
        json(serde_json::json!({"htype": "dconfig-1.0", "start_time": 0, "stop_time": 0, "real_time": 0})),
    ]
}

/// A simulated DECTRIS detector, serving on threads of its own.
pub struct DectrisSim {
    address: SocketAddr,
    api: Option<SocketAddr>,
    stop: Stop,
    thread: Option<JoinHandle<Result<SimReport, SimError>>>,
    api_thread: Option<JoinHandle<()>>,
}

impl DectrisSim {
    /// Bind the stream to `address` (`127.0.0.1:31001`; port 0: any free port) and, with
    /// `api` (`127.0.0.1:8910`), the SIMPLON API: then each series waits for an `arm`;
    /// without, a series starts when a receiver connects.
    ///
    /// # Errors
    /// [`SimError::Listen`].
    pub fn start(
        source: DectrisSource,
        address: &str,
        api: Option<&str>,
        options: SimOptions,
    ) -> Result<Self, SimError> {
        let listen_error = |error| SimError::Listen { address: address.to_owned(), error };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| listen_error(std::io::Error::other(e)))?;
        let mut socket = zeromq::PushSocket::new();
        let bound = runtime
            .block_on(socket.bind(&format!("tcp://{address}")))
            .map_err(|e| listen_error(std::io::Error::other(e)))?;
        let bound: SocketAddr = match bound {
            zeromq::Endpoint::Tcp(host, port) => format!("{host}:{port}").parse().map_err(|_| {
                listen_error(std::io::Error::other(format!("bound to an unusable address {host}:{port}")))
            })?,
            other => return Err(listen_error(std::io::Error::other(format!("bound to {other}")))),
        };
        let stop = Stop::default();
        let arms = Arc::new(Mutex::new(0u64));
        let (api_address, api_thread) = match api {
            Some(api) => {
                let server = tiny_http::Server::http(api).map_err(|e| SimError::Listen {
                    address: api.to_owned(),
                    error: std::io::Error::other(e.to_string()),
                })?;
                let addr =
                    server.server_addr().to_ip().ok_or_else(|| SimError::Other("the API has no IP address".into()))?;
                let (stop, arms) = (stop.clone(), arms.clone());
                let thread = std::thread::Builder::new()
                    .name("udf-host-simplon-sim".into())
                    .spawn(move || serve_api(&server, &stop, &arms))
                    .map_err(|e| SimError::Other(format!("cannot start the API thread: {e}")))?;
                (Some(addr), Some(thread))
            }
            None => (None, None),
        };
        let thread = {
            let stop = stop.clone();
            let wait_for_arm = api.is_some();
            std::thread::Builder::new()
                .name("udf-host-dectris-sim".into())
                .spawn(move || {
                    runtime.block_on(serve(socket, &source, &options, &stop, wait_for_arm.then_some(&*arms)))
                })
                .map_err(|e| SimError::Other(format!("cannot start the simulator thread: {e}")))?
        };
        Ok(DectrisSim { address: bound, api: api_address, stop, thread: Some(thread), api_thread })
    }

    /// The stream's address.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The SIMPLON API's address, if it serves one.
    pub fn api_address(&self) -> Option<SocketAddr> {
        self.api
    }

    /// A handle that stops it.
    pub fn stopper(&self) -> Stop {
        self.stop.clone()
    }

    /// Wait until it has served its series (or is stopped); what it sent.
    ///
    /// # Errors
    /// Sending failed.
    pub fn wait(mut self) -> Result<SimReport, SimError> {
        self.join()
    }

    fn join(&mut self) -> Result<SimReport, SimError> {
        let result = match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(SimError::Other("the simulator thread panicked".into())),
            None => Ok(SimReport::default()),
        };
        self.stop.stop();
        if let Some(api) = self.api_thread.take() {
            let _ = api.join();
        }
        result
    }
}

impl Drop for DectrisSim {
    fn drop(&mut self) {
        self.stop.stop();
        let _ = self.join();
    }
}

/// The SIMPLON API: `arm` counts an arm (the stream thread waits for one per series);
/// `disarm`, `trigger` and the rest answer success.
fn serve_api(server: &tiny_http::Server, stop: &Stop, arms: &Mutex<u64>) {
    while !stop.is_stopped() {
        let Ok(Some(request)) = server.recv_timeout(Duration::from_millis(50)) else { continue };
        let url = request.url().to_owned();
        let body = if url.ends_with("/command/arm") {
            *arms.lock().unwrap_or_else(|p| p.into_inner()) += 1;
            serde_json::json!({ "sequence id": SERIES }).to_string()
        } else if url.contains("/command/") {
            "{}".to_owned()
        } else if url.ends_with("/api/version/") {
            serde_json::json!({ "value": "1.8.0", "value_type": "string" }).to_string()
        } else {
            let _ = request.respond(tiny_http::Response::from_string("not simulated").with_status_code(404));
            continue;
        };
        let _ = request.respond(tiny_http::Response::from_string(body));
    }
}

async fn serve(
    mut socket: zeromq::PushSocket,
    source: &DectrisSource,
    options: &SimOptions,
    stop: &Stop,
    arms: Option<&Mutex<u64>>,
) -> Result<SimReport, SimError> {
    let mut report = SimReport::default();
    let mut armed_before = 0;
    let mut monitor = socket.monitor();
    let mut peers = 0i64;
    let mut count_peers = |peers: &mut i64| {
        while let Ok(event) = monitor.try_recv() {
            match event {
                zeromq::SocketEvent::Accepted(..) => *peers += 1,
                zeromq::SocketEvent::Disconnected(_) => *peers -= 1,
                _ => {}
            }
        }
    };
    while options.acquisitions.is_none_or(|n| report.acquisitions < n) && !stop.is_stopped() {
        if let Some(arms) = arms {
            let now = *arms.lock().unwrap_or_else(|p| p.into_inner());
            if now == armed_before {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            armed_before = now;
        }
        match send_series(&mut socket, source, options, stop, &mut report).await? {
            Series::Sent => report.acquisitions += 1,
            Series::NotStarted => {}
            Series::Disconnect => {
                // Closing the socket drops the receiver's connection (after a moment for
                // the queued images to go out: ZeroMQ sockets have no flush); serving
                // more would need a new bind: a fault test serves one series.
                tokio::time::sleep(Duration::from_millis(300)).await;
                report.acquisitions += 1;
                socket.close().await;
                return Ok(report);
            }
        }
    }
    // Dropping the socket would discard what is still queued for the receiver (the
    // socket queues up to 100000 messages): keep it until the receiver hangs up, the
    // simulator is stopped, or — a PUSH socket does not always see its peer leave — the
    // queue had time to drain at 0.5 GB/s, plus a few seconds.
    count_peers(&mut peers);
    let lingering = Instant::now();
    let series_bytes: usize = source.images.iter().flatten().map(Bytes::len).sum();
    let linger = LINGER + Duration::from_secs_f64(series_bytes as f64 / 0.5e9);
    while peers > 0 && !stop.is_stopped() && lingering.elapsed() < linger {
        tokio::time::sleep(Duration::from_millis(20)).await;
        count_peers(&mut peers);
    }
    Ok(report)
}

/// How sending a series ended.
enum Series {
    Sent,
    /// Stopped before a receiver connected.
    NotStarted,
    /// The disconnect fault: close the socket.
    Disconnect,
}

/// Send one series.
async fn send_series(
    socket: &mut zeromq::PushSocket,
    source: &DectrisSource,
    options: &SimOptions,
    stop: &Stop,
    report: &mut SimReport,
) -> Result<Series, SimError> {
    let send_error =
        |e: zeromq::ZmqError| SimError::Send { peer: "the stream".into(), error: std::io::Error::other(e.to_string()) };
    // The first message waits for a receiver.
    let mut first = true;
    let started = Instant::now();
    let Faults { disconnect_after, stall_after, corrupt_frame, end_after } = &options.faults;
    let pacer = Pacer::new(options.fps);
    let mut messages: Vec<(Option<u64>, Vec<Bytes>)> = source.start.iter().map(|m| (None, m.clone())).collect();
    let images = end_after.map_or(source.images.len(), |n| (n as usize).min(source.images.len()));
    messages.extend(source.images[..images].iter().enumerate().map(|(i, m)| (Some(i as u64), m.clone())));
    messages.push((None, source.end.clone()));
    for (image, parts) in messages {
        if stop.is_stopped() {
            return Ok(if first { Series::NotStarted } else { Series::Sent });
        }
        if let Some(i) = image {
            if disconnect_after.is_some_and(|k| i >= k) {
                return Ok(Series::Disconnect);
            }
            if stall_after.is_some_and(|k| i >= k) {
                while !stop.is_stopped() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                return Ok(Series::Sent);
            }
            pacer.wait(i);
        }
        let parts = if image.is_some() && image == *corrupt_frame {
            vec![Bytes::from_static(b"{\"htype\": \"garbage")]
        } else {
            parts
        };
        let bytes: usize = parts.iter().map(Bytes::len).sum();
        let mut message = ZmqMessage::from(parts[0].clone());
        for part in &parts[1..] {
            message.push_back(part.clone());
        }
        loop {
            match socket.send(message).await {
                Ok(()) => break,
                Err(zeromq::ZmqError::ReturnToSender { message: back, .. }) if first => {
                    if stop.is_stopped() {
                        return Ok(Series::NotStarted);
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    message = back;
                }
                Err(e) => return Err(send_error(e)),
            }
        }
        first = false;
        report.bytes += bytes as u64;
        report.frames += u64::from(image.is_some());
    }
    report.seconds += started.elapsed().as_secs_f64();
    Ok(Series::Sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitshuffle_lz4_frames_decode_with_the_hdf5_filter() {
        // Element counts with and without a partial block and a tail of < 8 elements.
        for (elem_size, count) in [(1usize, 9000usize), (2, 4096), (2, 4099), (4, 3000), (4, 5)] {
            let data: Vec<u8> = (0..elem_size * count).map(|i| ((i * 7919) % 251) as u8 & 0x3f).collect();
            let encoded = bitshuffle_lz4(&data, elem_size);
            let decoded = crate::dataset::hdf5::filters::bitshuffle(&encoded, elem_size, true, 0, data.len()).unwrap();
            assert_eq!(decoded, data, "{elem_size}-byte elements x {count}");
        }
    }
}
