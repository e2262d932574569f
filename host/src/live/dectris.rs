//! DECTRIS detectors: the ZeroMQ stream (not yet: the next commit).

use super::frames::Acquisition;
use super::{LiveError, Receiver, Stop};
use bytes::Bytes;
use std::time::Duration;

/// The stream's default port (Stream V2).
pub const DEFAULT_PORT: u16 = 31001;

/// Which message format a DECTRIS stream uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamFormat {
    /// Stream V2: one CBOR message per image.
    Cbor,
    /// Stream V1 ("legacy"): multipart JSON headers and binary data.
    Legacy,
}

/// Receives one series from a DECTRIS stream.
pub struct DectrisReceiver {
    endpoint: String,
}

impl DectrisReceiver {
    /// Connect to the stream at `address`.
    ///
    /// # Errors
    /// Not yet.
    pub fn connect(address: &str, api: Option<&str>) -> Result<Self, LiveError> {
        let _ = api;
        Err(LiveError::Invalid(format!("dectris://{address}: not implemented yet")))
    }
}

impl Receiver for DectrisReceiver {
    fn endpoint(&self) -> &str {
        &self.endpoint
    }
    fn format(&self) -> &'static str {
        "dectris-live"
    }
    fn start(&mut self, _stop: &Stop, _timeout: Option<Duration>) -> Result<Acquisition, LiveError> {
        Err(LiveError::Invalid("not implemented".into()))
    }
    fn next_frame(&mut self, _stop: &Stop, _stall: Duration) -> Result<Option<Bytes>, LiveError> {
        Ok(None)
    }
    fn bytes_received(&self) -> u64 {
        0
    }
}
