//! `udf-host serve`: explore datasets in the browser — the third front end, beside the
//! command line and the Python package. Like them it calls the library (open a dataset,
//! plan a run, iterate it with [`RunIter::next_timeout`](crate::exec::RunIter::next_timeout)
//! and interrupt it through its [`Progress`](crate::exec::Progress) handle, draw results
//! with [`crate::preview`], write them with [`crate::output`]); it imports nothing of the
//! others.
//!
//! | module | role |
//! |--------|------|
//! | [`access`] | the token, `Host` and `Origin` checks, and the root folder |
//! | [`catalog`] | the datasets and plugins under the root, opened once |
//! | [`analysis`] | what the page asks for, made into runs of built-ins or plugins |
//! | [`lane`] | a thread per kind of request: the newest request interrupts the run in flight; partial results stream out |
//! | [`live`] | the live source (`--live merlin://…`) and its lane: one acquisition per request, results as frames arrive |
//! | [`wire`] | the binary messages that carry results (JSON header, raw arrays, PNG images) |
//! | [`export`] | the last results as `.npy`, PNG and the `index.html` report |
//! | `http` | routes, the guard in front of them, the WebSocket session |
//! | `page/` | the page: plain JavaScript modules compiled into the binary, no build step |
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use udf_host::serve::{ServeOptions, Server};
//! let server = Server::start(ServeOptions { root: "data".into(), ..ServeOptions::default() })?;
//! println!("open {}", server.url());
//! server.wait();
//! # Ok(()) }
//! ```
//!
//! The server listens on 127.0.0.1 unless told otherwise, refuses requests without its
//! random token, for other host names or from other origins, and opens only files under
//! the root (docs/serve.md).

pub mod access;
pub mod analysis;
pub mod catalog;
pub mod export;
mod http;
pub mod lane;
pub mod live;
pub mod wire;

pub use access::{Access, Refusal};
pub use analysis::Analysis;
pub use live::ServeLive;

use crate::dataset::OpenOptions;
use crate::exec::Limits;
use crate::loader::{RuntimeSetup, UDFS_PER_SHARED_RUN};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Only files under this folder are listed and opened.
    pub root: PathBuf,
    /// Datasets to offer first (they must lie under the root).
    pub data: Vec<PathBuf>,
    /// Where to listen; port 0 picks a free one.
    pub address: SocketAddr,
    /// Worker threads per run (default: all cores).
    pub threads: Option<usize>,
    /// How datasets are opened (format, shapes, corrections).
    pub open_options: OpenOptions,
    /// The limits plugins run under (the runtime is set up from them, the threads and
    /// [`UDFS_PER_SHARED_RUN`] by [`RuntimeSetup`]).
    pub limits: Limits,
    /// Stop when the process gets Ctrl-C (the command line); otherwise only
    /// [`Server::stop`] stops it.
    pub stop_on_ctrl_c: bool,
    /// A live source offered beside the files (the page starts its acquisitions).
    pub live: Option<ServeLive>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            root: PathBuf::from("."),
            data: Vec::new(),
            address: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            threads: None,
            open_options: OpenOptions::default(),
            limits: Limits::default(),
            stop_on_ctrl_c: false,
            live: None,
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot serve the folder {}: {source}", path.display())]
    Root { path: PathBuf, source: std::io::Error },
    #[error("cannot listen on {address}: {source}")]
    Listen { address: SocketAddr, source: std::io::Error },
    #[error("cannot start the server's threads: {0}")]
    Runtime(std::io::Error),
    #[error(transparent)]
    Refused(#[from] Refusal),
}

/// A running server.
pub struct Server {
    address: SocketAddr,
    access: Access,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Listen and serve in a thread of its own.
    ///
    /// # Errors
    /// The root cannot be read, a named dataset is outside it, or the address cannot be
    /// listened on.
    pub fn start(options: ServeOptions) -> Result<Server, ServeError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("udf-host-serve-http")
            .enable_all()
            .build()
            .map_err(ServeError::Runtime)?;
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind(options.address))
            .map_err(|source| ServeError::Listen { address: options.address, source })?;
        let address =
            listener.local_addr().map_err(|source| ServeError::Listen { address: options.address, source })?;
        let access = Access::new(Access::random_token(), address, &options.root)
            .map_err(|source| ServeError::Root { path: options.root.clone(), source })?;
        let named = options.data.iter().map(|p| access.resolve(&p.to_string_lossy())).collect::<Result<Vec<_>, _>>()?;
        let threads =
            options.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
        let setup = RuntimeSetup::new(options.limits, threads, UDFS_PER_SHARED_RUN);
        let catalog = Arc::new(catalog::Catalog::new(access.clone(), named, options.open_options, setup));
        let live = options.live.map(|mut config| {
            config.options.run.limits = options.limits;
            Arc::new(live::LiveSetup::new(config))
        });
        let app = http::router(Arc::new(http::Shared { catalog, threads, live }));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let stop_on_ctrl_c = options.stop_on_ctrl_c;
        let thread = std::thread::Builder::new()
            .name("udf-host-serve".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let ctrl_c = async {
                        if stop_on_ctrl_c {
                            let _ = tokio::signal::ctrl_c().await;
                        } else {
                            std::future::pending::<()>().await;
                        }
                    };
                    tokio::select! {
                        _ = axum::serve(listener, app) => {}
                        _ = stopped => {}
                        () = ctrl_c => {}
                    }
                });
                // Open WebSockets are dropped with the runtime; their lanes stop.
                runtime.shutdown_background();
            })
            .map_err(ServeError::Runtime)?;
        Ok(Server { address, access, stop: Some(stop), thread: Some(thread) })
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The token every request must carry.
    pub fn token(&self) -> &str {
        self.access.token()
    }

    /// The root folder (canonical).
    pub fn root(&self) -> &std::path::Path {
        self.access.root()
    }

    /// The address of the page, with the token: what to open in a browser.
    pub fn url(&self) -> String {
        format!("{}/?token={}", self.base_url(), self.token())
    }

    /// `http://127.0.0.1:PORT` (no token).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Wait until the server stops (Ctrl-C, with [`ServeOptions::stop_on_ctrl_c`]).
    pub fn wait(mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }

    /// Stop serving: open pages lose their connection, runs in flight are interrupted.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shut_down();
    }
}
