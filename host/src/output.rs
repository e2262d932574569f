//! Writing results: `<dir>/<udf>/<buffer>.npy` (+ `<buffer>.valid.npy` when not every
//! element is valid) and `<dir>/results.json`, all-or-nothing.
//!
//! Everything is written into a temporary directory next to the destination and
//! renamed into place at the end, so a failed or interrupted run never leaves a
//! half-written output directory, and an existing one is only replaced with `force`.

use crate::exec::RunResults;
use crate::npy;
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
                let data = format!("{}/{}.npy", u.name, b.name);
                let valid = (!b.all_valid).then(|| format!("{}/{}.valid.npy", u.name, b.name));
                (u.name.clone(), b.name.clone(), data, valid)
            })
        })
        .collect()
}

/// The per-UDF part of `results.json`: params, method, and every buffer with kind,
/// dtype, shape and file names.
pub fn udfs_json(results: &RunResults) -> Value {
    let files = file_names(results);
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
                    let (_, _, data, valid) =
                        files.iter().find(|(un, bn, _, _)| *un == u.name && *bn == b.name).cloned().unwrap_or_default();
                    json!({
                        "name": b.name,
                        "kind": b.kind,
                        "dtype": b.dtype().name(),
                        "shape": b.data.shape(),
                        "raw_shape": b.raw.shape(),
                        "file": data,
                        "valid_file": valid,
                        "all_valid": b.all_valid,
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

/// Write `results` and `summary` (the content of `results.json`) to `dir`.
///
/// # Errors
/// [`OutputError::Exists`] if `dir` exists and `force` is false; I/O errors.
pub fn write_results(dir: &Path, results: &RunResults, summary: &Value, force: bool) -> Result<(), OutputError> {
    if dir.exists() && !force {
        return Err(OutputError::Exists(dir.to_owned()));
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(io(&parent))?;
    let tmp = tempfile::Builder::new().prefix(".udf-host-out-").tempdir_in(&parent).map_err(io(&parent))?;
    for u in &results.udfs {
        let udf_dir = tmp.path().join(&u.name);
        std::fs::create_dir(&udf_dir).map_err(io(&udf_dir))?;
        for b in &u.buffers {
            write_npy(&udf_dir.join(format!("{}.npy", b.name)), &b.data)?;
            if !b.all_valid {
                write_npy(&udf_dir.join(format!("{}.valid.npy", b.name)), &b.valid)?;
            }
        }
    }
    let json_path = tmp.path().join("results.json");
    let text = serde_json::to_string_pretty(summary)
        .map_err(|e| OutputError::Io { path: json_path.clone(), source: std::io::Error::other(e) })?;
    std::fs::write(&json_path, text + "\n").map_err(io(&json_path))?;

    // Move into place; an existing directory (with --force) is moved aside first and
    // only deleted once the new one is in place.
    let staged = tmp.keep();
    let mut old = None;
    if dir.exists() {
        let aside = parent.join(format!(".udf-host-old-{}", std::process::id()));
        std::fs::rename(dir, &aside).map_err(io(dir))?;
        old = Some(aside);
    }
    if let Err(source) = std::fs::rename(&staged, dir) {
        if let Some(aside) = &old {
            let _ = std::fs::rename(aside, dir);
        }
        let _ = std::fs::remove_dir_all(&staged);
        return Err(OutputError::Io { path: dir.to_owned(), source });
    }
    if let Some(aside) = old {
        let _ = std::fs::remove_dir_all(aside);
    }
    Ok(())
}

fn write_npy(path: &Path, array: &crate::array::NdArray) -> Result<(), OutputError> {
    let file = File::create(path).map_err(io(path))?;
    let mut out = BufWriter::new(file);
    npy::write_array(&mut out, array).map_err(io(path))?;
    out.into_inner().map_err(|e| OutputError::Io { path: path.to_owned(), source: e.into_error() })?;
    Ok(())
}
