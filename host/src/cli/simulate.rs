//! `udf-host simulate merlin|dectris FILE`: replay a dataset over a detector's protocol
//! on this machine (docs/live.md), until Ctrl-C or the acquisitions asked for.

use super::{Failure, Shape};
use crate::dataset::OpenOptions;
use crate::live::StreamFormat;
use crate::live::sim::{DectrisSim, DectrisSource, Faults, MerlinSim, MibReplay, SimOptions, SimReport};
use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Args)]
pub struct SimulateArgs {
    #[command(subcommand)]
    detector: Detector,
}

#[derive(Subcommand)]
enum Detector {
    /// A Merlin data port (TCP) serving a .mib file or set, frames as recorded.
    Merlin {
        /// The .mib file (its set and .hdr are found beside it).
        file: PathBuf,
        /// Data port.
        #[arg(long, default_value_t = crate::live::sim::MERLIN_PORT)]
        port: u16,
        /// The scan shape for the acquisition header [default: the .hdr's].
        #[arg(long)]
        nav_shape: Option<Shape>,
        #[command(flatten)]
        common: Common,
    },
    /// A DECTRIS detector: a ZeroMQ stream of any dataset udf-host reads (uint8/16/32
    /// frames), bitshuffle-LZ4 compressed, with the SIMPLON API's arm command.
    Dectris {
        /// The dataset (any format `udf-host run` reads).
        file: PathBuf,
        /// Stream port (ZeroMQ PUSH).
        #[arg(long, default_value_t = crate::live::sim::DECTRIS_PORT)]
        port: u16,
        /// SIMPLON API port: each series then waits for an arm [default: a series starts
        /// when a receiver connects].
        #[arg(long)]
        api_port: Option<u16>,
        /// Message format: cbor (Stream V2) or legacy (V1 JSON).
        #[arg(long, value_enum, default_value_t = FormatArg::Cbor)]
        stream_format: FormatArg,
        /// Send pixels uncompressed.
        #[arg(long)]
        no_compression: bool,
        /// Nav shape to read the dataset with.
        #[arg(long)]
        nav_shape: Option<Shape>,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum FormatArg {
    Cbor,
    Legacy,
}

#[derive(Args)]
struct Common {
    /// Address to listen on (the loopback by default: nothing outside this machine).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Frames per second [default: as fast as the receiver takes them].
    #[arg(long)]
    fps: Option<f64>,
    /// Serve this many acquisitions, then exit [default: until Ctrl-C].
    #[arg(long)]
    acquisitions: Option<u64>,
    /// Fault: close the connection after N frames.
    #[arg(long, value_name = "N")]
    disconnect_after: Option<u64>,
    /// Fault: stop sending after N frames, keeping the connection open.
    #[arg(long, value_name = "N")]
    stall_after: Option<u64>,
}

impl Common {
    fn options(&self) -> anyhow::Result<SimOptions> {
        if let Some(fps) = self.fps {
            anyhow::ensure!(fps.is_finite() && fps > 0.0, "--fps must be a positive number, got {fps}");
        }
        Ok(SimOptions {
            fps: self.fps,
            acquisitions: self.acquisitions,
            faults: Faults {
                disconnect_after: self.disconnect_after,
                stall_after: self.stall_after,
                ..Faults::default()
            },
        })
    }
}

pub fn simulate(args: SimulateArgs) -> Result<(), Failure> {
    let report = match args.detector {
        Detector::Merlin { file, port, nav_shape, common } => {
            let replay = MibReplay::open(&file, nav_shape.as_ref().map(|s| s.0.as_slice()))?;
            let frames = replay.frames();
            let sim = MerlinSim::start(replay, &format!("{}:{port}", common.host), common.options()?)?;
            let stop = sim.stopper();
            let serving = format!(
                "serving {} ({frames} frames) as a Merlin data port on {} (Ctrl-C to stop)",
                file.display(),
                sim.address()
            );
            until_ctrl_c(move || stop.stop(), &serving, || sim.wait())?
        }
        Detector::Dectris { file, port, api_port, stream_format, no_compression, nav_shape, common } => {
            let format = match stream_format {
                FormatArg::Cbor => StreamFormat::Cbor,
                FormatArg::Legacy => StreamFormat::Legacy,
            };
            let open = OpenOptions { nav_shape: nav_shape.map(|s| s.0), ..OpenOptions::default() };
            let source = DectrisSource::open(&file, &open, format, !no_compression)?;
            let frames = source.frames();
            let api = api_port.map(|p| format!("{}:{p}", common.host));
            let sim = DectrisSim::start(source, &format!("{}:{port}", common.host), api.as_deref(), common.options()?)?;
            let api_text = sim.api_address().map(|a| format!(", SIMPLON API on http://{a}")).unwrap_or_default();
            let stop = sim.stopper();
            let serving = format!(
                "serving {} ({frames} frames) as a DECTRIS stream on tcp://{}{api_text} (Ctrl-C to stop)",
                file.display(),
                sim.address()
            );
            until_ctrl_c(move || stop.stop(), &serving, || sim.wait())?
        }
    };
    print_report(&report);
    Ok(())
}

/// Serve until the replay ends (`wait`) or Ctrl-C stops it (`stop`). `serving` is
/// printed once Ctrl-C is routed to `stop`: a press right after it (a script waits for
/// it) must find the route, not Ctrl-C's default effect.
fn until_ctrl_c<R>(stop: impl Fn() + Send + Sync + 'static, serving: &str, wait: impl FnOnce() -> R) -> R {
    crate::output::interrupt::listen_to_ctrl_c();
    // Nothing is merged or written here: a press only stops the serving.
    let _routing = crate::output::interrupt::Routing::saying("stopping the simulator", Arc::new(stop));
    eprintln!("{serving}");
    wait()
}

fn print_report(report: &SimReport) {
    let fps = if report.seconds > 0.0 { report.frames as f64 / report.seconds } else { 0.0 };
    eprintln!(
        "sent {} acquisition(s), {} frames, {:.1} MB in {:.2} s ({:.2} GB/s, {fps:.0} frames/s)",
        report.acquisitions,
        report.frames,
        report.bytes as f64 / 1e6,
        report.seconds,
        report.gbps()
    );
}
