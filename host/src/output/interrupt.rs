//! Interrupting a run from outside (Ctrl-C): the first press stops the current run
//! cleanly — or, while its results are being written, lets the writing finish — and a
//! second one removes what is half-written ([`super::cleanup`]) and exits at once.
//!
//! [`Routing`] sends presses to a run while it is alive; [`writing`] switches to "let the
//! writing finish"; [`press`] is one press, from whatever source. With the `ctrl-c`
//! feature (part of `cli`), [`listen_to_ctrl_c`] makes Ctrl-C call [`press`]; the Python
//! package leaves Ctrl-C to Python (`KeyboardInterrupt`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What a first press does now.
type Stop = Arc<dyn Fn() + Send + Sync>;

static CURRENT: Mutex<Option<Stop>> = Mutex::new(None);
static PRESSES: AtomicUsize = AtomicUsize::new(0);

/// Routes presses to a run while alive: a first press says what happens now and calls
/// `stop`.
pub struct Routing;

/// What a first press says during a run that writes its results: [`Routing::to`].
const WRITING_WHAT_IS_MERGED: &str = "writing what is merged so far";

impl Routing {
    /// Route presses to a run's `stop` from now on (and count presses from zero): a first
    /// press says that the results merged so far are written.
    pub fn to(stop: Stop) -> Routing {
        Routing::saying(WRITING_WHAT_IS_MERGED, stop)
    }

    /// Route presses to `stop` from now on (and count presses from zero): a first press
    /// prints `interrupted: {what_happens}` (the caller knows what stopping means: a run
    /// writes what is merged, a simulator just stops serving).
    pub fn saying(what_happens: &'static str, stop: Stop) -> Routing {
        PRESSES.store(0, Ordering::SeqCst);
        set(Arc::new(move || {
            eprintln!("\ninterrupted: {what_happens} (Ctrl-C again to quit now)");
            stop();
        }));
        Routing
    }
}

impl Drop for Routing {
    fn drop(&mut self) {
        if let Ok(mut current) = CURRENT.lock() {
            *current = None;
        }
    }
}

fn set(stop: Stop) {
    if let Ok(mut current) = CURRENT.lock() {
        *current = Some(stop);
    }
}

/// The run is over and its results are being written: a first press now only says that
/// the writing goes on.
pub fn writing() {
    set(Arc::new(|| {
        eprintln!("\ninterrupted: finishing writing the results (Ctrl-C again to quit and discard them)");
    }));
}

/// One press: the first (while something is routed) stops it; any other — or one while
/// nothing is routed — undoes what is half-written and ends the process (exit code 130,
/// as a shell reports a process ended by SIGINT).
pub fn press() {
    let current = CURRENT.lock().ok().and_then(|c| c.clone());
    match current {
        Some(stop) if PRESSES.fetch_add(1, Ordering::SeqCst) == 0 => stop(),
        _ => {
            super::cleanup::undo_all();
            std::process::exit(130);
        }
    }
}

/// Make Ctrl-C call [`press`] for the rest of the process (once; later calls do
/// nothing). If the handler cannot be installed, Ctrl-C keeps its default effect.
#[cfg(feature = "ctrl-c")]
pub fn listen_to_ctrl_c() {
    static HANDLER: std::sync::Once = std::sync::Once::new();
    HANDLER.call_once(|| {
        let _ = ctrlc::set_handler(press);
    });
}
