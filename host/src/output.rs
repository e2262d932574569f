//! Writing results: `<dir>/<udf>/<buffer>.npy` (+ `<buffer>.valid.npy` when not every
//! element is valid), the PNG previews (`<buffer>.png`, see [`crate::preview`]),
//! `<dir>/results.json` and the report page `<dir>/index.html` ([`report`]), all-or-nothing.
//!
//! Everything is written into a temporary directory next to the destination and
//! renamed into place at the end, so a failed or interrupted run never leaves a
//! half-written output directory, and an existing one is only replaced with `force`.
//! While a run goes on, [`snapshot::Snapshots`] keeps `<dir>/partial/` up to date; the
//! final rename replaces the directory with it, so finished results have no `partial/`.

pub mod cleanup;
pub mod report;
pub mod snapshot;

use crate::exec::{ResultBuffer, RunResults, UdfResults};
use crate::npy;
use crate::preview::Preview;
use serde_json::{Value, json};
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

/// The relative file names of each UDF's buffers: `(udf, buffer, data file, valid file)`.
pub fn file_names(results: &RunResults) -> Vec<(String, String, String, Option<String>)> {
    results
        .udfs
        .iter()
        .flat_map(|u| {
            u.buffers.iter().map(move |b| {
                let (data, valid) = buffer_files(u, b);
                (u.name.clone(), b.name.clone(), data, valid)
            })
        })
        .collect()
}

/// The relative data file of a buffer and its valid mask's (when not all valid).
fn buffer_files(u: &UdfResults, b: &ResultBuffer) -> (String, Option<String>) {
    let data = format!("{}/{}.npy", u.name, b.name);
    let valid = (!b.all_valid).then(|| format!("{}/{}.valid.npy", u.name, b.name));
    (data, valid)
}

/// The per-UDF part of `results.json`: params, method, and every buffer with kind,
/// dtype, shape, file names, the fraction of valid elements, and its `previews`.
pub fn udfs_json(results: &RunResults, previews: &[Preview]) -> Value {
    let udfs: Vec<Value> = results
        .udfs
        .iter()
        .map(|u| {
            let params: serde_json::Map<String, Value> =
                u.params.iter().map(|p| (p.name.clone(), p.value.to_json())).collect();
            let buffers: Vec<Value> = u
                .buffers
                .iter()
                .map(|b| {
                    let (data, valid) = buffer_files(u, b);
                    json!({
                        "name": b.name,
                        "kind": b.kind,
                        "dtype": b.dtype().name(),
                        "shape": b.data.shape(),
                        "raw_shape": b.raw.shape(),
                        "file": data,
                        "valid_file": valid,
                        "all_valid": b.all_valid,
                        "valid_fraction": valid_fraction(&b.valid),
                        "previews": previews
                            .iter()
                            .filter(|p| p.udf == u.name && p.buffer == b.name)
                            .map(preview_json)
                            .collect::<Vec<_>>(),
                    })
                })
                .collect();
            let resources = (!u.instances.is_empty()).then(|| {
                let process_calls: u64 = u.instances.iter().map(|(_, s)| s.process_calls).sum();
                let process_seconds: f64 = u.instances.iter().map(|(_, s)| s.process_seconds).sum();
                json!({
                    "peak_memory_bytes": u.instances.iter().map(|(_, s)| s.peak_memory).max(),
                    "calls": u.instances.iter().map(|(_, s)| s.calls).sum::<u64>(),
                    "call_seconds": u.instances.iter().map(|(_, s)| s.call_seconds).sum::<f64>(),
                    "process_calls": process_calls,
                    "seconds_per_process_call": if process_calls > 0 { process_seconds / process_calls as f64 } else { 0.0 },
                })
            });
            json!({
                "name": u.name,
                "source": u.source,
                "resources": resources,
                "version": u.version,
                "method": u.method.name(),
                "params": params,
                "buffers": buffers,
            })
        })
        .collect();
    Value::Array(udfs)
}

/// The fraction of `true` elements of a valid mask (1 for an empty one).
fn valid_fraction(valid: &crate::array::NdArray) -> f64 {
    let bytes = valid.bytes();
    if bytes.is_empty() { 1.0 } else { bytes.iter().filter(|&&b| b != 0).count() as f64 / bytes.len() as f64 }
}

/// A preview's entry in `results.json`.
fn preview_json(p: &Preview) -> Value {
    let r = &p.rendered;
    json!({
        "file": p.file,
        "slice": (!p.index.is_empty()).then_some(&p.index),
        "slices": p.slices,
        "width": r.width,
        "height": r.height,
        "image_shape": r.image_shape,
        "upscale": r.upscale,
        "scale": r.scale,
        "colormap": r.colormap,
        "range": r.range,
        "extent": r.extent,
        "invalid_pixels": r.invalid,
    })
}

/// Add the fields of the JSON object `more` to the object `summary` (replacing those
/// with the same name).
pub fn extend_summary(summary: &mut Value, more: Value) {
    if let (Some(into), Value::Object(from)) = (summary.as_object_mut(), more) {
        into.extend(from);
    }
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
    summary: &Value,
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
    let page = report::page(summary, previews, previews_on, None);
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
    summary: &Value,
    previews: &[Preview],
    page: &str,
    all_masks: bool,
) -> Result<(), OutputError> {
    for u in &results.udfs {
        let udf_dir = dir.join(&u.name);
        std::fs::create_dir(&udf_dir).map_err(io(&udf_dir))?;
        for b in &u.buffers {
            write_npy(&udf_dir.join(format!("{}.npy", b.name)), &b.data)?;
            if all_masks || !b.all_valid {
                write_npy(&udf_dir.join(format!("{}.valid.npy", b.name)), &b.valid)?;
            }
        }
    }
    for p in previews {
        let path = dir.join(&p.file);
        std::fs::write(&path, &p.rendered.png).map_err(io(&path))?;
    }
    let json_path = dir.join("results.json");
    let text = serde_json::to_string_pretty(summary)
        .map_err(|e| OutputError::Io { path: json_path.clone(), source: std::io::Error::other(e) })?;
    std::fs::write(&json_path, text + "\n").map_err(io(&json_path))?;
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
