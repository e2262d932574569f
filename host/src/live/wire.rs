//! A TCP connection to a detector, read with short timeouts so that a waiting receiver
//! can be stopped (Ctrl-C, a server's cancel) and a detector that stops sending is
//! noticed (`--stall-timeout`).

use super::{LiveError, Stop};
use std::io::{BufReader, ErrorKind, Read};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// How often a blocked read wakes up to look at the stop flag.
pub(crate) const POLL: Duration = Duration::from_millis(50);

/// Connect to `address` (`host:port`), trying every address it resolves to.
///
/// # Errors
/// [`LiveError::Connect`] naming the address and why.
pub(crate) fn connect(address: &str, timeout: Duration) -> Result<TcpStream, LiveError> {
    let connect_error = |error| LiveError::Connect { endpoint: address.to_owned(), error };
    let addrs = address.to_socket_addrs().map_err(connect_error)?;
    let mut last = std::io::Error::new(ErrorKind::NotFound, "the host name resolves to no address");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(stream) => {
                stream.set_read_timeout(Some(POLL)).map_err(connect_error)?;
                return Ok(stream);
            }
            Err(e) => last = e,
        }
    }
    Err(connect_error(last))
}

/// The read-ahead buffer: the small reads of message prefixes and frame headers are
/// served from it, while a frame's pixels (larger than it) go from the socket straight
/// into the frame's own buffer — `BufReader` bypasses an empty buffer for reads larger
/// than its capacity — so the pixels are copied once, by the kernel. A buffer of
/// several frames would copy every pixel twice (measured in docs/benchmarks.md, "Live
/// acquisition").
const READ_AHEAD: usize = 16 << 10;

/// A stream of bytes from a detector.
pub(crate) struct Wire {
    stream: BufReader<TcpStream>,
    endpoint: String,
    /// Bytes read so far.
    pub bytes: u64,
}

/// How long a read may wait for the next byte, and what it means when it waits longer.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Patience {
    /// Waiting for an acquisition to start: up to this long, or forever.
    Start(Option<Duration>),
    /// Inside an acquisition: a stall after this long.
    Stall(Duration),
}

impl Wire {
    pub fn new(stream: TcpStream, endpoint: &str) -> Self {
        Wire { stream: BufReader::with_capacity(READ_AHEAD, stream), endpoint: endpoint.to_owned(), bytes: 0 }
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Fill `buf`. `frames` (received so far) goes into the errors.
    ///
    /// # Errors
    /// [`LiveError::Stopped`], [`LiveError::Disconnected`] (end of stream, also in the
    /// middle of `buf`), [`LiveError::Stalled`] / [`LiveError::NoStart`] when nothing
    /// came for longer than `patience` allows, [`LiveError::Io`].
    pub fn read_exact(
        &mut self,
        buf: &mut [u8],
        stop: &Stop,
        patience: Patience,
        frames: u64,
    ) -> Result<(), LiveError> {
        let mut filled = 0;
        let mut last_byte = Instant::now();
        while filled < buf.len() {
            if stop.is_stopped() {
                return Err(LiveError::Stopped);
            }
            match self.stream.read(&mut buf[filled..]) {
                Ok(0) => {
                    return Err(LiveError::Disconnected {
                        endpoint: self.endpoint.clone(),
                        frames,
                        during: if filled > 0 || frames > 0 { "in the middle of a message" } else { "" }.into(),
                    });
                }
                Ok(n) => {
                    filled += n;
                    self.bytes += n as u64;
                    last_byte = Instant::now();
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {
                    let idle = last_byte.elapsed();
                    match patience {
                        Patience::Stall(limit) if idle >= limit => {
                            return Err(LiveError::Stalled {
                                endpoint: self.endpoint.clone(),
                                seconds: limit.as_secs_f64(),
                                frames,
                            });
                        }
                        Patience::Start(Some(limit)) if idle >= limit => {
                            return Err(LiveError::NoStart {
                                endpoint: self.endpoint.clone(),
                                seconds: limit.as_secs_f64(),
                            });
                        }
                        _ => {}
                    }
                }
                Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                    return Err(LiveError::Disconnected {
                        endpoint: self.endpoint.clone(),
                        frames,
                        during: "(connection reset)".into(),
                    });
                }
                Err(error) => return Err(LiveError::Io { endpoint: self.endpoint.clone(), error }),
            }
        }
        Ok(())
    }
}
