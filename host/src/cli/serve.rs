//! `udf-host serve`: the command line's door to [`crate::serve`] (the browser front end).

use super::Shape;
use super::live::LiveSourceArgs;
use crate::serve::{ServeLive, ServeOptions, Server};
use clap::Args;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

/// `udf-host serve [DATA...] [--root DIR] [--port N] [--live SOURCE --nav-shape Y,X]`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Datasets to offer first on the page (they must lie under --root); the page lists
    /// every other dataset under --root too.
    #[arg(value_name = "DATA")]
    data: Vec<PathBuf>,
    /// Only files under this folder are listed and opened.
    #[arg(long, value_name = "DIR", default_value = ".")]
    root: PathBuf,
    /// Port to listen on [default: a free one].
    #[arg(long, default_value_t = 0, hide_default_value = true)]
    port: u16,
    /// Address to listen on. Anything but a loopback address lets other machines reach
    /// the page (they still need the token).
    #[arg(long, value_name = "ADDRESS", default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Worker threads per run [default: all cores].
    #[arg(long)]
    threads: Option<usize>,
    /// A live source offered on the page beside the files: merlin://HOST[:PORT] or
    /// dectris://HOST[:PORT]; choosing it starts an acquisition (docs/serve.md).
    #[arg(long, value_name = "SOURCE", requires = "nav_shape")]
    live: Option<String>,
    /// The live source's scan shape, e.g. 256,256.
    #[arg(long, requires = "live")]
    nav_shape: Option<Shape>,
    #[command(flatten)]
    live_source: LiveSourceArgs,
}

/// Run `udf-host serve`: start, print the URL, serve until Ctrl-C.
///
/// # Errors
/// The live source or its options are malformed, or the server cannot start
/// ([`crate::serve::ServeError`]).
pub fn main(args: ServeArgs) -> anyhow::Result<()> {
    let live = match (&args.live, &args.nav_shape) {
        (Some(text), Some(nav)) => {
            let (source, options) = args.live_source.source(text, nav.0.clone())?;
            Some(ServeLive { source, options })
        }
        _ => {
            anyhow::ensure!(
                !args.live_source.any_given(),
                "--api, --merlin-set, --soft-trigger, --partition-frames, --max-buffer, --stall-timeout and \
                 --start-timeout are options of the live source: give it with --live SOURCE --nav-shape Y,X"
            );
            None
        }
    };
    let live_url = live.as_ref().map(|l| l.source.url());
    let server = Server::start(ServeOptions {
        root: args.root,
        data: args.data,
        address: SocketAddr::new(args.bind, args.port),
        threads: args.threads,
        stop_on_ctrl_c: true,
        live,
        ..ServeOptions::default()
    })?;
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "udf-host serve: open {}", server.url());
    let _ = writeln!(out, "  serving the files under {} (and nothing else); Ctrl-C stops", server.root().display());
    if let Some(url) = live_url {
        let _ = writeln!(out, "  and the live source {url}: choose it on the page to start an acquisition");
    }
    let _ = out.flush();
    drop(out);
    server.wait();
    Ok(())
}
