//! Export: the last complete results of a lane as the files `udf-host run --preview`
//! writes — `<udf>/<buffer>.npy`, `<udf>/<buffer>.png` (with colour bar) and the
//! self-contained `index.html` report — sent to the page, which offers them as
//! downloads. Nothing is written on the server.

use super::lane::Finished;
use super::wire::Message;
use crate::output::report;
use crate::preview::{PreviewOptions, run_previews};
use serde_json::{Value, json};

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("cannot draw the previews: {0}")]
    Preview(#[from] crate::preview::PreviewError),
    #[error("cannot write the .npy file: {0}")]
    Npy(#[from] std::io::Error),
}

/// What `index.html` says about the run (the fields of `results.json` the report page
/// shows).
fn summary(finished: &Finished, previews: &[crate::preview::Preview]) -> Value {
    let data = &finished.dataset.dataset;
    let info = data.info();
    let shape = data.shape();
    let results = &finished.results;
    let stats = &results.stats;
    let (major, minor, patch) = crate::wasm::WIT_VERSION;
    json!({
        "udf_host_version": env!("CARGO_PKG_VERSION"),
        "contract": format!("{}@{major}.{minor}.{patch}", crate::wasm::WIT_PACKAGE),
        "status": "complete",
        "dataset": {
            "path": info.path.display().to_string(),
            "format": info.format,
            "nav_shape": shape.nav,
            "sig_shape": shape.sig,
            "dtype": data.stored_dtype().descr(),
            "details": info.details.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
        },
        "input_dtype": results.input_dtype.name(),
        "threads": stats.threads,
        "partitions": {"count": stats.partitions, "merged": stats.partitions_merged, "failed": stats.partitions_failed},
        "udfs": crate::output::udfs_json(results, previews),
        "frames": stats.frames,
        "bytes_read": stats.bytes_read,
        "throughput_gb_per_s": stats.throughput_gbps(),
        "timings": {
            "process_seconds": stats.process_seconds,
            "merge_seconds": stats.merge_seconds,
            "results_seconds": stats.results_seconds,
        },
        "failures": [],
    })
}

/// An `export` message (see [`super::wire`]): `files`, each `{name, part}`.
///
/// # Errors
/// A preview or `.npy` cannot be made.
pub fn export_message(lane: &str, id: u64, finished: &Finished) -> Result<Vec<u8>, ExportError> {
    let results = &finished.results;
    let previews = run_previews(results, &PreviewOptions::default())?;
    let mut message = Message::new(Value::Null);
    let mut files = Vec::new();
    for udf in &results.udfs {
        for buffer in &udf.buffers {
            if !finished.show.as_ref().is_none_or(|names| names.contains(&buffer.name)) {
                continue;
            }
            let mut npy = Vec::new();
            crate::npy::write_array(&mut npy, &buffer.data)?;
            files.push(json!({"name": format!("{}/{}.npy", udf.name, buffer.name), "part": message.part(&npy)}));
            for preview in previews.iter().filter(|p| p.udf == udf.name && p.buffer == buffer.name) {
                files.push(json!({"name": preview.file, "part": message.part(&preview.rendered.png)}));
            }
        }
    }
    let page = report::page(&summary(finished, &previews), &previews, true, None);
    files.push(json!({"name": "index.html", "part": message.part(page.as_bytes())}));
    *message.header_mut() = json!({"type": "export", "lane": lane, "id": id, "files": files});
    Ok(message.finish())
}
