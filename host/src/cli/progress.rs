//! A progress bar on stderr, only when stderr is a terminal.

use crate::exec::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Polls a run's progress and draws it until dropped.
pub struct ProgressDisplay {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ProgressDisplay {
    /// Start drawing, unless `quiet` or stderr is not a terminal.
    pub fn start(progress: Progress, quiet: bool) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        if quiet || !std::io::stderr().is_terminal() {
            return ProgressDisplay { stop, thread: None };
        }
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let bar = ProgressBar::with_draw_target(Some(progress.frames_total()), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{bar:40} {pos}/{len} frames  {per_sec}  eta {eta}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            while !flag.load(Ordering::Relaxed) {
                bar.set_position(progress.frames_done());
                std::thread::sleep(Duration::from_millis(100));
            }
            bar.finish_and_clear();
        });
        ProgressDisplay { stop, thread: Some(thread) }
    }
}

impl Drop for ProgressDisplay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
