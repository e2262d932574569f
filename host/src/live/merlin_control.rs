//! The Merlin control port (TCP, by default port 6341): `SET`, `GET` and `CMD` commands
//! that configure the detector and start an acquisition.
//!
//! A command is `MPX,` + a 10-digit decimal length + `,` + `TYPE,NAME,VALUE` (`VALUE` is
//! `0` for `GET` and `CMD`), where the length counts the text after the digits, its
//! leading comma included. The detector answers `MPX,<length>,SET,NAME,CODE`,
//! `MPX,<length>,CMD,NAME,CODE` or `MPX,<length>,GET,NAME,VALUE,CODE`, with `CODE` 0 (done),
//! 1 (busy), 2 (not recognised) or 3 (out of range). Some senders (LiberTEM-live's
//! simulator) count the answer's length without its leading comma; the reader accepts
//! both by reading one more byte when the answer would otherwise end in a comma.
//!
//! udf-host arms a detector as LiberTEM-live does: the data port is connected first (a
//! Merlin sends only to a connected listener), then the settings are sent, then
//! `CMD,STARTACQUISITION` and, for a detector waiting for a software trigger,
//! `CMD,SOFTTRIGGER`.

use super::LiveError;
use super::wire::connect;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The Merlin control port's default.
pub const DEFAULT_CONTROL_PORT: u16 = 6341;

/// How long the detector may take to answer one command.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest answer accepted (a `GET` of a long value, e.g. a threshold list).
const MAX_ANSWER: usize = 64 << 10;

/// What udf-host tells a Merlin through its control port before the scan: the settings
/// in order, then `STARTACQUISITION`, then `SOFTTRIGGER` if asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MerlinArming {
    /// The control port, `HOST:PORT`.
    pub address: String,
    /// `SET` commands, in order, e.g. `("NUMFRAMESTOACQUIRE", "65536")`.
    pub settings: Vec<(String, String)>,
    /// Send `CMD,SOFTTRIGGER` after `STARTACQUISITION` (a detector set to wait for a
    /// software trigger).
    pub soft_trigger: bool,
}

impl MerlinArming {
    /// Arming through `address` with no settings of its own.
    pub fn new(address: impl Into<String>) -> Self {
        MerlinArming { address: address.into(), settings: Vec::new(), soft_trigger: false }
    }

    /// The arming for a scan of `frames` frames: `NUMFRAMESTOACQUIRE` set to it first,
    /// unless a setting already names it.
    pub fn for_scan(&self, frames: u64) -> MerlinArming {
        let mut arming = self.clone();
        if !arming.settings.iter().any(|(name, _)| name.eq_ignore_ascii_case("NUMFRAMESTOACQUIRE")) {
            arming.settings.insert(0, ("NUMFRAMESTOACQUIRE".into(), frames.to_string()));
        }
        arming
    }

    /// Connect to the control port and send the settings and the start.
    ///
    /// # Errors
    /// [`LiveError::Connect`], [`LiveError::Control`] naming the command the detector
    /// refused or did not answer.
    pub fn arm(&self) -> Result<(), LiveError> {
        let mut control = MerlinControl::connect(&self.address)?;
        for (name, value) in &self.settings {
            control.set(name, value)?;
        }
        control.cmd("STARTACQUISITION")?;
        if self.soft_trigger {
            control.cmd("SOFTTRIGGER")?;
        }
        Ok(())
    }
}

/// A connection to a Merlin's control port.
pub struct MerlinControl {
    stream: TcpStream,
    endpoint: String,
}

impl MerlinControl {
    /// Connect to `address` (`HOST:PORT`).
    ///
    /// # Errors
    /// [`LiveError::Connect`].
    pub fn connect(address: &str) -> Result<Self, LiveError> {
        let endpoint = format!("the Merlin control port {address}");
        let stream = connect(address, ANSWER_TIMEOUT).map_err(|e| match e {
            LiveError::Connect { error, .. } => LiveError::Connect { endpoint: endpoint.clone(), error },
            other => other,
        })?;
        stream
            .set_read_timeout(Some(ANSWER_TIMEOUT))
            .and_then(|()| stream.set_nodelay(true))
            .map_err(|error| LiveError::Connect { endpoint: endpoint.clone(), error })?;
        Ok(MerlinControl { stream, endpoint })
    }

    /// `SET,NAME,VALUE`.
    ///
    /// # Errors
    /// [`LiveError::Control`]: refused (busy, not recognised, out of range), no answer,
    /// a malformed answer.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), LiveError> {
        self.exchange("SET", name, value).map(drop)
    }

    /// `GET,NAME`: the value.
    ///
    /// # Errors
    /// As [`set`](Self::set).
    pub fn get(&mut self, name: &str) -> Result<String, LiveError> {
        self.exchange("GET", name, "0")?.ok_or_else(|| self.error("GET", name, "the answer holds no value"))
    }

    /// `CMD,NAME`, e.g. `STARTACQUISITION`, `SOFTTRIGGER`, `ABORT`.
    ///
    /// # Errors
    /// As [`set`](Self::set).
    pub fn cmd(&mut self, name: &str) -> Result<(), LiveError> {
        self.exchange("CMD", name, "0").map(drop)
    }

    fn error(&self, kind: &str, name: &str, message: impl Into<String>) -> LiveError {
        LiveError::Control {
            endpoint: self.endpoint.clone(),
            command: format!("{kind},{name}"),
            message: message.into(),
        }
    }

    /// Send one command and read its answer: the value of a `GET`.
    fn exchange(&mut self, kind: &str, name: &str, value: &str) -> Result<Option<String>, LiveError> {
        if [name, value].iter().any(|s| s.is_empty() || s.contains([',', '\r', '\n'])) {
            return Err(self.error(kind, name, format!("'{name}' = '{value}' is not a Merlin name and value")));
        }
        let body = format!("{kind},{name},{value}");
        let message = format!("MPX,{:010},{body}", body.len() + 1);
        self.stream.write_all(message.as_bytes()).map_err(|e| self.error(kind, name, format!("sending: {e}")))?;
        let answer = self.read_answer().map_err(|e| self.error(kind, name, e))?;
        parse_answer(kind, name, &answer).map_err(|e| self.error(kind, name, e))
    }

    /// One answer's text after `MPX,<length>,`.
    fn read_answer(&mut self) -> Result<String, String> {
        let mut prefix = [0u8; 15];
        self.read_exact(&mut prefix)?;
        let shown = || crate::dataset::mib::header::show_bytes(&prefix);
        let length = std::str::from_utf8(&prefix[4..14])
            .ok()
            .filter(|_| &prefix[..4] == b"MPX," && prefix[14] == b',')
            .and_then(|digits| digits.parse::<usize>().ok())
            .ok_or_else(|| format!("expected an answer 'MPX,<10 digits>,', found {}", shown()))?;
        if length > MAX_ANSWER {
            return Err(format!("the answer announces {length} bytes, more than the {MAX_ANSWER} accepted"));
        }
        let mut text = vec![0u8; length.saturating_sub(1)];
        self.read_exact(&mut text)?;
        // A length that does not count the leading comma leaves the last byte unread.
        if text.last().is_none_or(|&b| b == b',') {
            let mut last = [0u8; 1];
            self.read_exact(&mut last)?;
            text.push(last[0]);
        }
        String::from_utf8(text).map_err(|_| "the answer is not text".into())
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), String> {
        self.stream.read_exact(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                format!("no answer within {} s", ANSWER_TIMEOUT.as_secs())
            }
            std::io::ErrorKind::UnexpectedEof => "the detector closed the control connection".into(),
            _ => e.to_string(),
        })
    }
}

/// Check an answer (the text after `MPX,<length>,`) to the command `kind,name`: the value
/// of a `GET`, nothing for the others.
fn parse_answer(kind: &str, name: &str, answer: &str) -> Result<Option<String>, String> {
    let fields: Vec<&str> = answer.split(',').collect();
    let expected = if kind == "GET" { 4 } else { 3 };
    if fields.len() != expected || !fields[0].eq_ignore_ascii_case(kind) || !fields[1].eq_ignore_ascii_case(name) {
        return Err(format!("expected an answer '{kind},{name},...' of {expected} fields, found '{answer}'"));
    }
    let code = fields[expected - 1].trim_end_matches('\0');
    match code {
        "0" => Ok((kind == "GET").then(|| fields[2].to_owned())),
        "1" => Err("the detector is busy (code 1)".into()),
        "2" => Err("the detector does not recognise the command (code 2)".into()),
        "3" => Err("the value is out of range (code 3)".into()),
        other => Err(format!("unknown status code '{other}' in '{answer}'")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_checked_field_by_field() {
        assert_eq!(parse_answer("GET", "IMAGEX", "GET,IMAGEX,256,0"), Ok(Some("256".into())));
        assert_eq!(parse_answer("SET", "COUNTERDEPTH", "SET,COUNTERDEPTH,0"), Ok(None));
        assert_eq!(parse_answer("CMD", "STARTACQUISITION", "CMD,STARTACQUISITION,0"), Ok(None));
        let busy = parse_answer("CMD", "STARTACQUISITION", "CMD,STARTACQUISITION,1").unwrap_err();
        assert!(busy.contains("busy"), "{busy}");
        let range = parse_answer("SET", "NUMFRAMESTOACQUIRE", "SET,NUMFRAMESTOACQUIRE,3").unwrap_err();
        assert!(range.contains("out of range"), "{range}");
        let other = parse_answer("SET", "X", "GET,Y,1,0").unwrap_err();
        assert!(other.contains("expected an answer 'SET,X,...'"), "{other}");
    }

    #[test]
    fn a_scan_sets_its_frame_count_unless_told_otherwise() {
        let plain = MerlinArming::new("127.0.0.1:6341").for_scan(4096);
        assert_eq!(plain.settings, vec![("NUMFRAMESTOACQUIRE".to_owned(), "4096".to_owned())]);
        let mut own = MerlinArming::new("127.0.0.1:6341");
        own.settings.push(("numframestoacquire".into(), "0".into()));
        assert_eq!(own.for_scan(4096).settings, own.settings);
    }
}
