//! `udf-host serve`: the command line's door to [`crate::serve`] (the browser front end).

use crate::serve::{ServeError, ServeOptions, Server};
use clap::Args;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

/// `udf-host serve [DATA...] [--root DIR] [--port N]`.
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
}

/// Run `udf-host serve`: start, print the URL, serve until Ctrl-C.
///
/// # Errors
/// The server cannot start ([`ServeError`]).
pub fn main(args: ServeArgs) -> Result<(), ServeError> {
    let server = Server::start(ServeOptions {
        root: args.root,
        data: args.data,
        address: SocketAddr::new(args.bind, args.port),
        threads: args.threads,
        stop_on_ctrl_c: true,
        ..ServeOptions::default()
    })?;
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "udf-host serve: open {}", server.url());
    let _ = writeln!(out, "  serving the files under {} (and nothing else); Ctrl-C stops", server.root().display());
    let _ = out.flush();
    drop(out);
    server.wait();
    Ok(())
}
