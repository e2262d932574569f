//! Live snapshots of a running run (`udf-host run --snapshot-every SECONDS`): the
//! results merged so far in `<out>/partial/`, for a person, a notebook or an image viewer
//! to watch while a long run goes on.
//!
//! A snapshot holds what the final results hold — each buffer's `.npy`, its valid mask
//! (always, so a reader sees what is merged), a PNG preview of every image, a
//! `results.json` with `"status": "running"`, the snapshot number and the partitions
//! merged, and an `index.html` that reloads itself.
//!
//! **Atomic replacement.** Each snapshot is written into a fresh `<out>/.partial-<n>/`;
//! `<out>/partial` is a symbolic link to the newest one, replaced by renaming a new link
//! over it (atomic on POSIX), after which the previous snapshot is deleted. A reader
//! that resolves `partial/` sees one whole snapshot, never a half-written one. (Where
//! there are no symbolic links, `partial/` is a directory replaced by two renames, with
//! a moment in between when it is missing.)
//!
//! **And the final results.** `<out>` is made for the snapshots when it does not exist;
//! the final results are still written into a temporary directory and renamed into
//! place, replacing `<out>` with its `partial/` in one step: a finished run's directory
//! has no `partial/`. With `--force` and an existing `<out>`, the old results stay (with
//! the new run's `partial/` beside them) until the new ones replace them. If the run
//! ends without writing results (an error before the end), the snapshots are removed
//! again, and `<out>` too when they made it — also when the process exits on a second
//! Ctrl-C ([`super::cleanup`]).

use super::cleanup::{self, Registration, Undo};
use super::{OutputError, io, write_tree};
use crate::exec::{RunIter, RunResults};
use crate::preview::{self, PreviewOptions};
use crate::report::RunSummary;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Writes snapshots of a run at most every so often; removes them when dropped before
/// [`Snapshots::finish`].
pub struct Snapshots {
    out: PathBuf,
    every: Duration,
    /// What `results.json` says before the first merge (dataset, plan, plugins).
    base: RunSummary,
    options: PreviewOptions,
    started: Instant,
    last: Instant,
    /// Merged frames at the last snapshot.
    merged_frames: usize,
    count: u64,
    made_out: bool,
    warned: bool,
    finished: bool,
    /// Registered for [`cleanup::undo_all`] once there is something to remove.
    registration: Option<Registration>,
}

impl Snapshots {
    /// Snapshots into `out/partial/` every `every`; `base` is the run's summary as
    /// planned (dataset, plan, plugins, ...).
    pub fn new(out: &Path, every: Duration, base: RunSummary) -> Snapshots {
        let now = Instant::now();
        Snapshots {
            out: out.to_owned(),
            every,
            base,
            options: PreviewOptions::default(),
            started: now,
            last: now,
            merged_frames: 0,
            count: 0,
            made_out: false,
            warned: false,
            finished: false,
            registration: None,
        }
    }

    /// Whether `out` was made for the snapshots (so the final results may replace it).
    pub fn made_output_dir(&self) -> bool {
        self.made_out
    }

    /// Snapshots written so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Call after each step of the run: writes a snapshot when `every` has passed since
    /// the last one and more frames have been merged. A snapshot that cannot be written is
    /// reported once, as a warning; the run goes on.
    pub fn tick(&mut self, iter: &RunIter) {
        let merged = iter.damage().iter().filter(|&&d| d).count();
        if merged == self.merged_frames || self.last.elapsed() < self.every {
            return;
        }
        self.merged_frames = merged;
        self.last = Instant::now();
        let written = iter.results().map_err(|e| e.to_string()).and_then(|r| self.write(&r).map_err(|e| e.to_string()));
        if let Err(e) = written
            && !std::mem::replace(&mut self.warned, true)
        {
            eprintln!(
                "warning: cannot write a snapshot to {}: {e}; the run goes on",
                self.out.join("partial").display()
            );
        }
    }

    /// Write `results` as the next snapshot.
    ///
    /// # Errors
    /// I/O errors; preview encoding errors (as I/O errors).
    pub fn write(&mut self, results: &RunResults) -> Result<(), OutputError> {
        if !self.out.exists() {
            std::fs::create_dir_all(&self.out).map_err(io(&self.out))?;
            self.made_out = true;
        }
        if self.registration.is_none() {
            self.registration =
                Some(Registration::new(Undo::Snapshots { out: self.out.clone(), made_out: self.made_out }));
        }
        let previews = preview::run_previews(results, &self.options)
            .map_err(|e| OutputError::Io { path: self.out.clone(), source: std::io::Error::other(e) })?;
        let n = self.count + 1;
        let mut summary = self.base.snapshot(n, self.started.elapsed().as_secs_f64());
        summary.record_results(results, &previews);
        let refresh = self.every.as_secs_f64().ceil().max(1.0) as u64;
        let page = super::page::page(&summary, &previews, true, Some(refresh));
        let dir = self.out.join(format!(".partial-{n}"));
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(io(&dir))?;
        }
        std::fs::create_dir(&dir).map_err(io(&dir))?;
        if let Err(e) = write_tree(&dir, results, &summary, &previews, &page, true) {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
        self.publish(n)?;
        if n > 1 {
            let _ = std::fs::remove_dir_all(self.out.join(format!(".partial-{}", n - 1)));
        }
        self.count = n;
        Ok(())
    }

    /// Point `partial` at `.partial-<n>`.
    #[cfg(unix)]
    fn publish(&self, n: u64) -> Result<(), OutputError> {
        let link = self.out.join(format!(".partial-link-{n}"));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(format!(".partial-{n}"), &link).map_err(io(&link))?;
        let partial = self.out.join("partial");
        std::fs::rename(&link, &partial).map_err(io(&partial))
    }

    /// Move `.partial-<n>` to `partial` (the previous one moved aside first).
    #[cfg(not(unix))]
    fn publish(&self, n: u64) -> Result<(), OutputError> {
        let partial = self.out.join("partial");
        if partial.exists() {
            std::fs::rename(&partial, self.out.join(format!(".partial-{}", n - 1))).map_err(io(&partial))?;
        }
        std::fs::rename(self.out.join(format!(".partial-{n}")), &partial).map_err(io(&partial))
    }

    /// The final results are in place (they replaced `out` and its `partial/`): nothing
    /// is left to clean up.
    pub fn finish(mut self) {
        self.finished = true;
    }
}

impl Drop for Snapshots {
    fn drop(&mut self) {
        if self.finished || self.count == 0 && !self.made_out {
            return;
        }
        cleanup::remove_snapshots(&self.out, self.made_out);
    }
}
