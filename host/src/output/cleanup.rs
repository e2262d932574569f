//! What to undo when the process is stopped while it has output in flight: a
//! temporary directory to delete, an old output directory moved aside to put back, live
//! snapshots to remove.
//!
//! Writing results registers each such step here and unregisters it once done; the
//! command line's second Ctrl-C calls [`undo_all`] before it exits, so an interrupted
//! write leaves neither a hidden temporary directory (which can hold hundreds of MiB)
//! nor a missing `--out`. The steps that move directories run under the same lock
//! ([`with_pending`]), so [`undo_all`] never sees half a step.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// One thing to undo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undo {
    /// A directory of ours (a staged output): delete it.
    Remove(PathBuf),
    /// An existing output directory moved aside while the new one is renamed into
    /// place: put it back if the new one is not in place, else delete it.
    PutBack { aside: PathBuf, dest: PathBuf },
    /// Live snapshots in `out` (`partial`, `.partial-<n>`); `out` itself too if the
    /// snapshots made it and it is empty then.
    Snapshots { out: PathBuf, made_out: bool },
}

/// The registered steps, with their ids.
#[derive(Debug, Default)]
pub struct Pending {
    next: u64,
    steps: Vec<(u64, Undo)>,
}

impl Pending {
    /// Register `undo`; its id, to [`remove`](Self::remove) it once done.
    pub fn add(&mut self, undo: Undo) -> u64 {
        self.next += 1;
        self.steps.push((self.next, undo));
        self.next
    }

    /// The step `id` is done (or undone): forget it.
    pub fn remove(&mut self, id: u64) {
        self.steps.retain(|(i, _)| *i != id);
    }

    /// What is registered now.
    pub fn steps(&self) -> impl Iterator<Item = &Undo> {
        self.steps.iter().map(|(_, u)| u)
    }
}

static PENDING: Mutex<Pending> = Mutex::new(Pending { next: 0, steps: Vec::new() });

fn pending() -> MutexGuard<'static, Pending> {
    // The steps stay meaningful even if a holder panicked.
    PENDING.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Run `f` with the registry locked: a step that moves directories and updates the
/// registry runs whole before (or after) an [`undo_all`].
pub fn with_pending<R>(f: impl FnOnce(&mut Pending) -> R) -> R {
    f(&mut pending())
}

/// Undo everything registered (the process is about to exit): delete temporary
/// directories, put moved-aside outputs back, remove snapshots. Errors are ignored:
/// there is nobody left to tell.
pub fn undo_all() {
    let mut pending = pending();
    for (_, undo) in pending.steps.drain(..).rev() {
        undo_one(&undo);
    }
}

fn undo_one(undo: &Undo) {
    match undo {
        Undo::Remove(dir) => {
            let _ = std::fs::remove_dir_all(dir);
        }
        Undo::PutBack { aside, dest } => {
            if dest.exists() || std::fs::rename(aside, dest).is_err() {
                let _ = std::fs::remove_dir_all(aside);
            }
        }
        Undo::Snapshots { out, made_out } => remove_snapshots(out, *made_out),
    }
}

/// Remove the snapshots in `out`: the `partial` link (or directory) and every
/// `.partial-*` entry; then `out` itself if `made_out` and it is empty.
pub(crate) fn remove_snapshots(out: &Path, made_out: bool) {
    let partial = out.join("partial");
    if std::fs::remove_file(&partial).is_err() {
        let _ = std::fs::remove_dir_all(&partial);
    }
    if let Ok(entries) = std::fs::read_dir(out) {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(".partial-") {
                let path = entry.path();
                if std::fs::remove_file(&path).is_err() {
                    let _ = std::fs::remove_dir_all(&path);
                }
            }
        }
    }
    if made_out {
        // Only when empty: whatever else is there is not ours.
        let _ = std::fs::remove_dir(out);
    }
}

/// A registered step that is forgotten when dropped (the normal paths clean up after
/// themselves).
#[derive(Debug)]
pub struct Registration(u64);

impl Registration {
    /// Register `undo` until the returned value is dropped.
    pub fn new(undo: Undo) -> Registration {
        Registration(with_pending(|p| p.add(undo)))
    }

    /// The registration of a step added with [`Pending::add`].
    pub fn from_id(id: u64) -> Registration {
        Registration(id)
    }

    /// Its id, no longer removed when dropped (for [`Pending::remove`] under the lock).
    pub fn into_id(self) -> u64 {
        let id = self.0;
        std::mem::forget(self);
        id
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        with_pending(|p| p.remove(self.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undo_deletes_staged_directories_and_puts_outputs_back() {
        let dir = tempfile::tempdir().unwrap();
        let staged = dir.path().join(".udf-host-out-x");
        std::fs::create_dir(&staged).unwrap();
        std::fs::write(staged.join("big.npy"), b"data").unwrap();
        let dest = dir.path().join("out");
        let aside = dir.path().join(".udf-host-old-1");
        std::fs::create_dir(&aside).unwrap();
        std::fs::write(aside.join("precious.txt"), b"keep").unwrap();
        // Registered the way a write registers them; nothing else is (tests share the
        // registry, so only the steps made here are undone here).
        let ids = with_pending(|p| {
            [p.add(Undo::Remove(staged.clone())), p.add(Undo::PutBack { aside: aside.clone(), dest: dest.clone() })]
        });
        let mine: Vec<Undo> = with_pending(|p| {
            let steps = p.steps.iter().filter(|(i, _)| ids.contains(i)).map(|(_, u)| u.clone()).collect();
            p.steps.retain(|(i, _)| !ids.contains(i));
            steps
        });
        for undo in mine.iter().rev() {
            undo_one(undo);
        }
        assert!(!staged.exists(), "the staged output is gone");
        assert_eq!(std::fs::read_to_string(dest.join("precious.txt")).unwrap(), "keep", "the old output is back");
        assert!(!aside.exists());
    }

    #[test]
    fn registrations_are_forgotten_when_dropped() {
        let path = PathBuf::from("/nonexistent/udf-host-registration-test");
        let registration = Registration::new(Undo::Remove(path.clone()));
        assert!(with_pending(|p| p.steps().any(|u| *u == Undo::Remove(path.clone()))));
        drop(registration);
        assert!(!with_pending(|p| p.steps().any(|u| *u == Undo::Remove(path.clone()))));
    }
}
