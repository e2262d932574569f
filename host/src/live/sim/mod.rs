//! Simulators: replay a dataset file over a detector's real protocol on this machine,
//! for tests, demos and users without a detector (`udf-host simulate merlin|dectris`).
//!
//! | type | role |
//! |------|------|
//! | [`MerlinSim`] | a Merlin data port serving a `.mib` file's frames, as recorded |
//! | [`DectrisSim`] | a DECTRIS ZeroMQ stream (CBOR or legacy JSON) with its SIMPLON API, serving frames bitshuffle-LZ4 compressed |
//! | [`SimOptions`], [`Faults`] | pacing (`fps`), how many acquisitions, and faults to inject |
//! | [`SimReport`] | what was sent |
//!
//! Each simulator listens on the address it is given (`127.0.0.1:PORT`; port 0 picks a
//! free one, see `address()`), serves acquisitions on a thread of its own and stops when
//! asked ([`Stop`](super::Stop)) or after the acquisitions it was told to serve.

mod dectris;
mod merlin;

pub use dectris::{DectrisSim, DectrisSource};
pub use merlin::{MerlinSim, MibReplay};

/// The Merlin data port's default port.
pub const MERLIN_PORT: u16 = super::merlin::DEFAULT_PORT;
/// The DECTRIS Stream V2 default port.
pub const DECTRIS_PORT: u16 = super::dectris::DEFAULT_PORT;

use serde::Serialize;
use std::time::{Duration, Instant};

/// How a simulator serves.
#[derive(Debug, Clone, Default)]
pub struct SimOptions {
    /// Frames per second (`None`: as fast as the receiver takes them).
    pub fps: Option<f64>,
    /// Acquisitions to serve, one per connection, then end (`None`: until stopped).
    pub acquisitions: Option<u64>,
    /// Faults to inject, for tests and demos.
    pub faults: Faults,
}

/// Faults a simulator can inject into each acquisition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Faults {
    /// Close the connection after this many frames.
    pub disconnect_after: Option<u64>,
    /// Stop sending after this many frames, keeping the connection open.
    pub stall_after: Option<u64>,
    /// Send this frame with a broken header.
    pub corrupt_frame: Option<u64>,
    /// DECTRIS: end the series (its end message) after this many images, as a detector
    /// stopped early does.
    pub end_after: Option<u64>,
}

/// What a simulator sent.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SimReport {
    pub acquisitions: u64,
    pub frames: u64,
    pub bytes: u64,
    /// Seconds spent sending (from each acquisition's first byte to its last).
    pub seconds: f64,
}

impl SimReport {
    /// Bytes sent per second of sending, in GB/s.
    pub fn gbps(&self) -> f64 {
        if self.seconds > 0.0 { self.bytes as f64 / self.seconds / 1e9 } else { 0.0 }
    }
}

/// What went wrong in a simulator.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("{path}: {message}")]
    Input { path: String, message: String },
    #[error("cannot listen on {address}: {error}")]
    Listen { address: String, error: std::io::Error },
    #[error("sending to {peer}: {error}")]
    Send { peer: String, error: std::io::Error },
    #[error("{0}")]
    Other(String),
}

/// Paces frames at `fps`: waits until frame `i` is due.
pub(crate) struct Pacer {
    fps: Option<f64>,
    start: Instant,
}

impl Pacer {
    pub fn new(fps: Option<f64>) -> Self {
        Pacer { fps: fps.filter(|f| *f > 0.0 && f.is_finite()), start: Instant::now() }
    }

    /// Sleep until frame `i` is due.
    pub fn wait(&self, i: u64) {
        if let Some(fps) = self.fps {
            let due = self.start + Duration::from_secs_f64(i as f64 / fps);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
        }
    }
}
