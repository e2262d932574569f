//! A Merlin data port replaying a `.mib` file (or set): the acquisition header (the
//! `.hdr` next to it, or one made from the frame count and the nav shape), then every
//! frame, header and pixels as recorded, each framed as an `MPX` message.

use super::{Faults, Pacer, SimError, SimOptions, SimReport};
use crate::dataset::mib::{self, MibHeader, MibLayout};
use crate::dataset::{Access, map_file};
use crate::live::{Stop, mpx_prefix};
use memmap2::Mmap;
use std::io::{IoSlice, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The frames of a `.mib` file or set, ready to send.
pub struct MibReplay {
    files: Vec<Mmap>,
    /// (file, byte offset of the frame header) per frame.
    frames: Vec<(usize, usize)>,
    stride: usize,
    header: MibHeader,
    acquisition_header: Vec<u8>,
}

impl MibReplay {
    /// The frames of the `.mib` set `path` belongs to. `nav`: the scan shape for the
    /// acquisition header (default: the `.hdr` file's, else one line of all frames).
    ///
    /// # Errors
    /// [`SimError::Input`] naming the file: unreadable, not a `.mib`, inconsistent.
    pub fn open(path: &Path, nav: Option<&[usize]>) -> Result<Self, SimError> {
        let input = |p: &Path, message: String| SimError::Input { path: p.display().to_string(), message };
        let (paths, hdr) = mib::find_set(path).map_err(|e| input(path, e.to_string()))?;
        let mut parts = Vec::new();
        for p in &paths {
            let map = map_file(p, Access::Sequential).map_err(|e| input(p, e.to_string()))?;
            let header = MibHeader::parse(&map[..map.len().min(mib::header::MAX_HEADER_BYTES)])
                .map_err(|e| input(p, format!("offset 0: {e}")))?;
            parts.push((header, map, p.clone()));
        }
        parts.sort_by_key(|(h, _, _)| h.sequence);
        let header = parts[0].0.clone();
        let layout = MibLayout::new(&header).map_err(|e| input(&parts[0].2, e))?;
        let mut files = Vec::new();
        let mut frames = Vec::new();
        for (f, (h, map, p)) in parts.into_iter().enumerate() {
            if MibLayout::new(&h).ok().as_ref() != Some(&layout) {
                return Err(input(&p, format!("its frames ({h}) differ from the first file's ({header})")));
            }
            let count = map.len() / layout.stride;
            frames.extend((0..count).map(|i| (f, i * layout.stride)));
            files.push(map);
        }
        if frames.is_empty() {
            return Err(input(path, "no complete frame".into()));
        }
        let acquisition_header = match (nav, hdr) {
            (None, Some(hdr)) => std::fs::read(&hdr).map_err(|e| input(&hdr, e.to_string()))?,
            (nav, _) => {
                let n = frames.len();
                let per_line = nav.and_then(|s| s.last().copied()).unwrap_or(n);
                let depth = header.counter_depth.unwrap_or(12);
                format!(
                    "HDR,\r\nFrames in Acquisition (Number):\t{n}\r\nFrames per Trigger (Number):\t{per_line}\r\n\
                     Counter Depth (number):\t{depth}\r\nEnd\t"
                )
                .into_bytes()
            }
        };
        Ok(MibReplay { files, frames, stride: layout.stride, header, acquisition_header })
    }

    /// Frames in the file(s).
    pub fn frames(&self) -> u64 {
        self.frames.len() as u64
    }

    /// Header and pixels of frame `i`.
    pub fn frame(&self, i: usize) -> &[u8] {
        let (f, at) = self.frames[i];
        &self.files[f][at..at + self.stride]
    }

    /// The first frame's header.
    pub fn header(&self) -> &MibHeader {
        &self.header
    }
}

/// A simulated Merlin data port, serving on a thread of its own.
pub struct MerlinSim {
    address: SocketAddr,
    stop: Stop,
    thread: Option<JoinHandle<Result<SimReport, SimError>>>,
}

impl MerlinSim {
    /// Listen on `address` (`127.0.0.1:6342`; port 0: any free port) and serve `replay`.
    ///
    /// # Errors
    /// [`SimError::Listen`].
    pub fn start(replay: MibReplay, address: &str, options: SimOptions) -> Result<Self, SimError> {
        let listen_error = |error| SimError::Listen { address: address.to_owned(), error };
        let listener = TcpListener::bind(address).map_err(listen_error)?;
        listener.set_nonblocking(true).map_err(listen_error)?;
        let bound = listener.local_addr().map_err(listen_error)?;
        let stop = Stop::default();
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("udf-host-merlin-sim".into())
                .spawn(move || serve(&listener, &replay, &options, &stop))
                .map_err(|e| SimError::Other(format!("cannot start the simulator thread: {e}")))?
        };
        Ok(MerlinSim { address: bound, stop, thread: Some(thread) })
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// A handle that stops it.
    pub fn stopper(&self) -> Stop {
        self.stop.clone()
    }

    /// Wait until it has served its acquisitions (or is stopped); what it sent.
    ///
    /// # Errors
    /// A connection failed while sending.
    pub fn wait(mut self) -> Result<SimReport, SimError> {
        self.join()
    }

    /// Stop it now; what it sent.
    ///
    /// # Errors
    /// A connection failed while sending.
    pub fn stop(mut self) -> Result<SimReport, SimError> {
        self.stop.stop();
        self.join()
    }

    fn join(&mut self) -> Result<SimReport, SimError> {
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(SimError::Other("the simulator thread panicked".into())),
            None => Ok(SimReport::default()),
        }
    }
}

impl Drop for MerlinSim {
    fn drop(&mut self) {
        self.stop.stop();
        let _ = self.join();
    }
}

/// Accept connections, one acquisition each, until stopped or done.
fn serve(listener: &TcpListener, replay: &MibReplay, options: &SimOptions, stop: &Stop) -> Result<SimReport, SimError> {
    let mut report = SimReport::default();
    while options.acquisitions.is_none_or(|n| report.acquisitions < n) && !stop.is_stopped() {
        let (stream, peer) = match listener.accept() {
            Ok(connection) => connection,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(error) => return Err(SimError::Listen { address: "the listening socket".into(), error }),
        };
        let send_error = |error| SimError::Send { peer: peer.to_string(), error };
        stream.set_nonblocking(false).map_err(send_error)?;
        match send_acquisition(stream, replay, options, stop, &mut report) {
            Ok(()) => report.acquisitions += 1,
            // A receiver that hangs up (it has what it wanted, or failed) ends its
            // acquisition, not the simulator.
            Err(e) if is_hangup(&e) => report.acquisitions += 1,
            Err(e) => return Err(send_error(e)),
        }
    }
    Ok(report)
}

pub(crate) fn is_hangup(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), BrokenPipe | ConnectionReset | ConnectionAborted)
}

/// Send one acquisition on `stream`, with the faults asked for.
fn send_acquisition(
    mut stream: TcpStream,
    replay: &MibReplay,
    options: &SimOptions,
    stop: &Stop,
    report: &mut SimReport,
) -> std::io::Result<()> {
    let started = Instant::now();
    let hdr = &replay.acquisition_header;
    stream.write_all(&mpx_prefix(hdr.len()))?;
    stream.write_all(hdr)?;
    report.bytes += (hdr.len() + 15) as u64;
    let pacer = Pacer::new(options.fps);
    let Faults { disconnect_after, stall_after, corrupt_frame, .. } = &options.faults;
    let prefix = mpx_prefix(replay.stride);
    // Frames go out in batches (one system call for many frames) unless paced.
    let batch = if options.fps.is_some() { 1 } else { 64 };
    let mut i = 0u64;
    let n = replay.frames();
    while i < n {
        if stop.is_stopped() {
            break;
        }
        if disconnect_after.is_some_and(|k| i >= k) {
            break;
        }
        if stall_after.is_some_and(|k| i >= k) {
            while !stop.is_stopped() {
                std::thread::sleep(Duration::from_millis(20));
            }
            break;
        }
        pacer.wait(i);
        let mut end = (i + batch).min(n);
        for limit in [*disconnect_after, *stall_after, corrupt_frame.map(|c| if c > i { c } else { c + 1 })] {
            if let Some(k) = limit.filter(|&k| k > i) {
                end = end.min(k);
            }
        }
        if corrupt_frame == &Some(i) {
            let mut frame = replay.frame(i as usize).to_vec();
            frame[..4].copy_from_slice(b"MQ9,");
            stream.write_all(&prefix)?;
            stream.write_all(&frame)?;
            end = i + 1;
        } else {
            let mut slices = Vec::with_capacity(2 * (end - i) as usize);
            for k in i..end {
                slices.push(IoSlice::new(&prefix));
                slices.push(IoSlice::new(replay.frame(k as usize)));
            }
            write_all_vectored(&mut stream, &mut slices)?;
        }
        report.frames += end - i;
        report.bytes += (end - i) * (replay.stride as u64 + 15);
        i = end;
    }
    stream.flush()?;
    report.seconds += started.elapsed().as_secs_f64();
    Ok(())
}

/// `Write::write_all_vectored` (unstable in std): write every slice, however the kernel
/// splits them.
pub(crate) fn write_all_vectored(out: &mut impl Write, mut slices: &mut [IoSlice<'_>]) -> std::io::Result<()> {
    IoSlice::advance_slices(&mut slices, 0);
    while !slices.is_empty() {
        match out.write_vectored(slices) {
            Ok(0) => return Err(std::io::Error::new(std::io::ErrorKind::WriteZero, "the receiver takes no more")),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
