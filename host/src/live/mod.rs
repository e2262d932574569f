//! Live acquisition: detectors as sources of frames that feed the executor's partitions
//! while the scan is still running (DESIGN.md §8, docs/live.md).
//!
//! | type | role |
//! |------|------|
//! | [`LiveSource`] | where frames come from: `merlin://HOST:PORT`, `dectris://HOST:PORT` |
//! | [`Receiver`] | one acquisition off the wire: [`MerlinReceiver`] (TCP), [`DectrisReceiver`] (ZeroMQ) |
//! | [`Acquisition`], [`FrameEncoding`] | what a receiver announces when the acquisition starts |
//! | [`LiveRun`] | the engine: partitions formed as frames arrive, run on a pool, merged in arrival order |
//! | [`LiveOptions`], [`LiveStats`] | nav shape, buffer limit, timeouts; what happened |
//! | [`MerlinArming`], [`MerlinControl`] | the Merlin control port: settings, start, trigger |
//! | [`FrameBudget`] | the bounded frame buffer and its back-pressure |
//! | [`sim`] | simulators replaying a file over the real protocols |
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let udfs: Vec<udf_host::exec::UdfSpec> = todo!();
//! use udf_host::live::{LiveOptions, LiveRun, LiveSource, Stop};
//! let source: LiveSource = "merlin://127.0.0.1:6342".parse()?;
//! let stop = Stop::default();
//! let options = LiveOptions::new(vec![256, 256]);
//! let mut run = LiveRun::start(&source, udfs, options, stop.clone())?;
//! for step in run.by_ref() {
//!     let step = step?; // a partition merged: run.results() has it
//! }
//! # Ok(()) }
//! ```
//!
//! Frames are never dropped: when the partitions fall behind, the receiver stops reading
//! from the detector until they catch up (back-pressure on the TCP connection, counted in
//! [`LiveStats::buffer`]). A detector that disconnects or stalls ends the scan early: the
//! frames received are processed and the run ends with [`LiveError::Ended`], its results
//! valid where frames came. A malformed message fails the run.

mod budget;
mod dectris;
mod frames;
mod merlin;
mod merlin_control;
mod run;
pub mod sim;
mod wire;

pub use budget::{BufferStats, FrameBudget, Reservation};
pub use dectris::{DectrisReceiver, StreamFormat};
pub use frames::{Acquisition, FrameEncoding};
pub use merlin::{MerlinReceiver, mpx_prefix};
pub use merlin_control::{DEFAULT_CONTROL_PORT, MerlinArming, MerlinControl};
pub use run::{DEFAULT_MAX_BUFFER, LiveOptions, LiveRun, LiveStats, LiveStep};

use crate::exec::RunError;
use bytes::Bytes;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A flag that stops a live run (or a simulator) from any thread: Ctrl-C, a server's
/// cancel button.
#[derive(Debug, Clone, Default)]
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    /// Ask everything that watches this flag to stop.
    pub fn stop(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    pub(crate) fn flag(&self) -> &AtomicBool {
        &self.0
    }
}

/// Receives one acquisition: waits for its start, then hands out frame payloads in scan
/// order. Implemented for Merlin and DECTRIS; the engine ([`LiveRun`]) needs nothing else.
pub trait Receiver: Send {
    /// Where the frames come from (`merlin://127.0.0.1:6342`), for messages.
    fn endpoint(&self) -> &str;

    /// The dataset format name in results (`merlin-live`).
    fn format(&self) -> &'static str;

    /// Wait (at most `timeout`, `None`: until stopped) for the acquisition to start and
    /// return what it will send.
    ///
    /// # Errors
    /// [`LiveError`]: stopped, no start in time, disconnected, a malformed header.
    fn start(&mut self, stop: &Stop, timeout: Option<Duration>) -> Result<Acquisition, LiveError>;

    /// The next frame's payload (see [`Acquisition::encoding`]), waiting at most `stall`
    /// for data; `None` when the detector says the acquisition is over.
    ///
    /// # Errors
    /// [`LiveError`]: stopped, stalled, disconnected, a malformed message.
    fn next_frame(&mut self, stop: &Stop, stall: Duration) -> Result<Option<Bytes>, LiveError>;

    /// Bytes received so far (headers included).
    fn bytes_received(&self) -> u64;

    /// The scan is over (all frames, or ended early): tell the detector where it needs
    /// to be told (DECTRIS: disarm if this receiver armed it).
    fn finish(&mut self) {}
}

/// Where frames come from, as the command line and Python name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiveSource {
    /// A Merlin data port, `merlin://HOST:PORT` (default port 6342), and, to configure
    /// and start the acquisition, its control port (see [`MerlinArming`]).
    Merlin { address: String, control: Option<MerlinArming> },
    /// A DECTRIS ZeroMQ stream, `dectris://HOST:PORT` (default port 31001; 9999 for the
    /// legacy stream), and, to arm the detector, its SIMPLON API (`http://HOST:PORT`).
    Dectris { address: String, api: Option<String> },
}

impl LiveSource {
    /// Connect and return a receiver for the next acquisition.
    ///
    /// # Errors
    /// [`LiveError::Connect`] (Merlin; a ZeroMQ socket connects in the background).
    pub fn connect(&self) -> Result<Box<dyn Receiver>, LiveError> {
        Ok(match self {
            LiveSource::Merlin { address, control } => {
                // The data port first: a Merlin sends only to a connected listener.
                let receiver = MerlinReceiver::connect(address)?;
                if let Some(arming) = control {
                    arming.arm()?;
                }
                Box::new(receiver)
            }
            LiveSource::Dectris { address, api } => Box::new(DectrisReceiver::connect(address, api.as_deref())?),
        })
    }

    /// This source for a scan of `frames` frames: a Merlin armed through its control
    /// port is told the frame count (`NUMFRAMESTOACQUIRE`, unless set explicitly).
    pub fn for_scan(&self, frames: u64) -> LiveSource {
        match self {
            LiveSource::Merlin { address, control: Some(arming) } => {
                LiveSource::Merlin { address: address.clone(), control: Some(arming.for_scan(frames)) }
            }
            other => other.clone(),
        }
    }

    /// Arm the detector through `api` before the scan: DECTRIS, the SIMPLON API's URL;
    /// Merlin, the control port `HOST[:PORT]` with `settings` (`NAME=VALUE`, sent as
    /// `SET` in order) and `soft_trigger`.
    ///
    /// # Errors
    /// [`LiveError::Invalid`]: settings or a trigger without a Merlin control port, a
    /// setting that is not `NAME=VALUE`.
    pub fn set_api(&mut self, api: Option<&str>, settings: &[String], soft_trigger: bool) -> Result<(), LiveError> {
        let merlin_only = !settings.is_empty() || soft_trigger;
        match (self, api) {
            (LiveSource::Dectris { .. }, _) if merlin_only => {
                Err(LiveError::Invalid("Merlin settings and the soft trigger are for merlin:// sources".into()))
            }
            (LiveSource::Dectris { api: slot, .. }, Some(url)) => {
                *slot = Some(url.to_owned());
                Ok(())
            }
            (LiveSource::Merlin { control, .. }, Some(address)) => {
                let text = address.strip_prefix("tcp://").unwrap_or(address);
                let address = host_port(text, DEFAULT_CONTROL_PORT).map_err(|why| {
                    LiveError::Invalid(format!("'{text}' is not a Merlin control port: {why} (HOST or HOST:PORT)"))
                })?;
                let mut arming = MerlinArming::new(address);
                for setting in settings {
                    let (name, value) = setting
                        .split_once('=')
                        .map(|(n, v)| (n.trim(), v.trim()))
                        .filter(|(n, v)| !n.is_empty() && !v.is_empty())
                        .ok_or_else(|| {
                            LiveError::Invalid(format!("Merlin setting '{setting}': expected NAME=VALUE"))
                        })?;
                    arming.settings.push((name.to_ascii_uppercase(), value.to_owned()));
                }
                arming.soft_trigger = soft_trigger;
                *control = Some(arming);
                Ok(())
            }
            (LiveSource::Merlin { .. }, None) if merlin_only => Err(LiveError::Invalid(
                "Merlin settings and the soft trigger need the control port (--api HOST:PORT, api=)".into(),
            )),
            (_, None) => Ok(()),
        }
    }

    /// The URL form.
    pub fn url(&self) -> String {
        match self {
            LiveSource::Merlin { address, .. } => format!("merlin://{address}"),
            LiveSource::Dectris { address, .. } => format!("dectris://{address}"),
        }
    }
}

impl std::str::FromStr for LiveSource {
    type Err = LiveError;

    /// `merlin://HOST[:PORT]` or `dectris://HOST[:PORT]`.
    fn from_str(text: &str) -> Result<Self, LiveError> {
        let invalid = |why: &str| {
            LiveError::Invalid(format!(
                "'{text}' is not a live source: {why} (merlin://HOST:PORT or dectris://HOST:PORT)"
            ))
        };
        let (scheme, rest) = text.split_once("://").ok_or_else(|| invalid("no scheme"))?;
        let with_port = |default: u16| host_port(rest, default).map_err(|why| invalid(&why));
        match scheme.to_ascii_lowercase().as_str() {
            "merlin" => Ok(LiveSource::Merlin { address: with_port(merlin::DEFAULT_PORT)?, control: None }),
            "dectris" => Ok(LiveSource::Dectris { address: with_port(dectris::DEFAULT_PORT)?, api: None }),
            other => Err(invalid(&format!("unknown detector '{other}'"))),
        }
    }
}

/// `HOST[:PORT]` (a trailing `/` ignored) as `HOST:PORT`, `default` when no port is given:
/// live sources and the Merlin control port are named this way.
fn host_port(text: &str, default: u16) -> Result<String, String> {
    let text = text.trim_end_matches('/');
    if text.is_empty() || text.contains('/') {
        return Err("expected HOST or HOST:PORT".into());
    }
    match text.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && !host.ends_with(':') => {
            port.parse::<u16>().map_err(|_| format!("port '{port}' is not a number"))?;
            Ok(text.to_owned())
        }
        _ => Ok(format!("{text}:{default}")),
    }
}

/// What went wrong with a live acquisition.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("cannot connect to {endpoint}: {error}")]
    Connect { endpoint: String, error: std::io::Error },
    #[error("{endpoint} closed the connection after {frames} frames{}", if during.is_empty() { String::new() } else { format!(" {during}") })]
    Disconnected { endpoint: String, frames: u64, during: String },
    #[error("{endpoint} sent nothing for {seconds} s after {frames} frames (the stall timeout)")]
    Stalled { endpoint: String, seconds: f64, frames: u64 },
    #[error("no acquisition started on {endpoint} within {seconds} s (the start timeout)")]
    NoStart { endpoint: String, seconds: f64 },
    #[error("{endpoint}: {at}: {message}")]
    Malformed { endpoint: String, at: String, message: String },
    #[error("reading from {endpoint}: {error}")]
    Io { endpoint: String, error: std::io::Error },
    #[error("{endpoint}: {command}: {message}")]
    Control { endpoint: String, command: String, message: String },
    #[error("the SIMPLON API at {api}: {message}")]
    Api { api: String, message: String },
    #[error("the live run was stopped")]
    Stopped,
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Run(#[from] RunError),
    /// The scan ended before every frame came (the detector disconnected or stalled);
    /// what came was processed and the results are valid there.
    #[error(
        "the scan ended early after {received} of {expected} frames: {reason}; the results hold the frames received"
    )]
    Ended { received: u64, expected: u64, reason: Box<LiveError> },
}

impl LiveError {
    /// Whether the scan ended early but what came can be kept (a disconnect or stall).
    pub fn ends_scan(&self) -> bool {
        matches!(self, LiveError::Disconnected { .. } | LiveError::Stalled { .. })
    }
}
