//! Writing results: `<dir>/<udf>/<buffer>.npy` (+ `<buffer>.valid.npy` when not every
//! element is valid), the PNG previews (`<buffer>.png`, see [`crate::preview`]),
//! `<dir>/results.json` (a [`RunSummary`]) and the report page `<dir>/index.html`
//! ([`page`]), all-or-nothing.
//!
//! Everything is written into a temporary directory next to the destination and
//! renamed into place at the end, so a failed or interrupted run never leaves a
//! half-written output directory, and an existing one is only replaced with `force`.
//! While a run goes on, [`snapshot::Snapshots`] keeps `<dir>/partial/` up to date; the
//! final rename replaces the directory with it, so finished results have no `partial/`.
//! [`record::record`] runs a planned run to its end and writes it this way.

pub mod cleanup;
pub mod page;
pub mod record;
pub mod snapshot;

use crate::exec::RunResults;
use crate::npy;
use crate::preview::Preview;
use crate::report::{self, RunSummary};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

/// Why results could not be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("output directory {} already exists; pass --force to replace it or choose another --out", .0.display())]
    Exists(PathBuf),
    #[error("cannot write results to {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> OutputError + '_ {
    move |source| OutputError::Io { path: path.to_owned(), source }
}

/// Results written into a temporary directory beside their destination, not yet in
/// place: [`commit`](Self::commit) renames them into place; dropping it deletes them. If
/// the process exits meanwhile (a second Ctrl-C), [`cleanup::undo_all`] deletes them.
#[derive(Debug)]
pub struct Staged {
    dir: PathBuf,
    staged: PathBuf,
    parent: PathBuf,
    force: bool,
    registration: Option<cleanup::Registration>,
}

/// Write `results`, their `previews`, `summary` (the content of `results.json`) and the
/// report page into a temporary directory beside `dir`; [`Staged::commit`] puts them in
/// place. `previews_on`: whether previews were asked for (the page says how to get them
/// otherwise).
///
/// # Errors
/// [`OutputError::Exists`] if `dir` exists and `force` is false; I/O errors (nothing
/// is left behind).
pub fn stage(
    dir: &Path,
    results: &RunResults,
    summary: &RunSummary,
    previews: &[Preview],
    previews_on: bool,
    force: bool,
) -> Result<Staged, OutputError> {
    if dir.exists() && !force {
        return Err(OutputError::Exists(dir.to_owned()));
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(io(&parent))?;
    // Registered before it exists, so an exit in between leaves nothing behind either.
    let staged = cleanup::with_pending(|pending| {
        let tmp = tempfile::Builder::new().prefix(".udf-host-out-").tempdir_in(&parent).map_err(io(&parent))?;
        let path = tmp.keep();
        let id = pending.add(cleanup::Undo::Remove(path.clone()));
        Ok::<_, OutputError>((path, id))
    })?;
    let registration = Some(cleanup::Registration::from_id(staged.1));
    let staged = Staged { dir: dir.to_owned(), staged: staged.0, parent, force, registration };
    let page = page::page(summary, previews, previews_on, None);
    write_tree(&staged.staged, results, summary, previews, &page, false)?;
    Ok(staged)
}

impl Staged {
    /// The temporary directory holding the results.
    pub fn path(&self) -> &Path {
        &self.staged
    }

    /// Move the results into place; an existing directory (with `force`) is moved aside
    /// first and only deleted once the new one is in place. The moves run whole or not
    /// at all as far as a second Ctrl-C is concerned ([`cleanup`]).
    ///
    /// # Errors
    /// [`OutputError::Exists`] if the destination appeared meanwhile (without `force`);
    /// I/O errors (the old directory is put back, the new one deleted).
    pub fn commit(mut self) -> Result<(), OutputError> {
        let (dir, staged, parent) = (self.dir.clone(), self.staged.clone(), self.parent.clone());
        if dir.exists() && !self.force {
            return Err(OutputError::Exists(dir));
        }
        let aside = cleanup::with_pending(|pending| {
            let mut old = None;
            if dir.exists() {
                let aside = parent.join(format!(".udf-host-old-{}", std::process::id()));
                std::fs::rename(&dir, &aside).map_err(io(&dir))?;
                let id = pending.add(cleanup::Undo::PutBack { aside: aside.clone(), dest: dir.clone() });
                old = Some((aside, id));
            }
            if let Err(source) = std::fs::rename(&staged, &dir) {
                if let Some((aside, id)) = &old {
                    let _ = std::fs::rename(aside, &dir);
                    pending.remove(*id);
                }
                return Err(OutputError::Io { path: dir.clone(), source });
            }
            // In place: the staged directory is no more; the old one is only ours to delete.
            if let Some(registration) = self.registration.take() {
                pending.remove(registration.into_id());
            }
            if let Some((aside, id)) = &old {
                pending.remove(*id);
                Ok(Some((aside.clone(), pending.add(cleanup::Undo::Remove(aside.clone())))))
            } else {
                Ok(None)
            }
        })?;
        if let Some((aside, id)) = aside {
            let _ = std::fs::remove_dir_all(&aside);
            cleanup::with_pending(|pending| pending.remove(id));
        }
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if self.registration.is_some() {
            let _ = std::fs::remove_dir_all(&self.staged);
        }
    }
}

/// Write the buffers (`.npy`, and the valid masks where not all valid or with
/// `all_masks`), the previews, `results.json` and `index.html` into the existing `dir`.
fn write_tree(
    dir: &Path,
    results: &RunResults,
    summary: &RunSummary,
    previews: &[Preview],
    page: &str,
    all_masks: bool,
) -> Result<(), OutputError> {
    for u in &results.udfs {
        let udf_dir = dir.join(&u.name);
        std::fs::create_dir(&udf_dir).map_err(io(&udf_dir))?;
        for b in &u.buffers {
            write_npy(&dir.join(report::data_file(&u.name, &b.name)), &b.data)?;
            if all_masks || !b.all_valid {
                write_npy(&dir.join(report::valid_file(&u.name, &b.name)), &b.valid)?;
            }
        }
    }
    for p in previews {
        let path = dir.join(&p.file);
        std::fs::write(&path, &p.rendered.png).map_err(io(&path))?;
    }
    let json_path = dir.join("results.json");
    let text = report::json_text(summary)
        .map_err(|e| OutputError::Io { path: json_path.clone(), source: std::io::Error::other(e) })?;
    std::fs::write(&json_path, text).map_err(io(&json_path))?;
    let page_path = dir.join("index.html");
    std::fs::write(&page_path, page).map_err(io(&page_path))?;
    Ok(())
}

fn write_npy(path: &Path, array: &crate::array::NdArray) -> Result<(), OutputError> {
    let file = File::create(path).map_err(io(path))?;
    let mut out = BufWriter::new(file);
    npy::write_array(&mut out, array).map_err(io(path))?;
    out.into_inner().map_err(|e| OutputError::Io { path: path.to_owned(), source: e.into_error() })?;
    Ok(())
}
