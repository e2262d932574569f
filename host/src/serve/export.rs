//! Export: the last complete results of a lane as the files `udf-host run --preview`
//! writes — `<udf>/<buffer>.npy`, `<udf>/<buffer>.png` (with colour bar) and the
//! self-contained `index.html` report — sent to the page, which offers them as
//! downloads. Nothing is written on the server.

use super::lane::Finished;
use super::wire::Message;
use crate::exec::PartitionFailure;
use crate::output::page;
use crate::preview::{PreviewOptions, run_previews};
use crate::report::RunStatus;
use serde_json::{Value, json};

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("cannot draw the previews: {0}")]
    Preview(#[from] crate::preview::PreviewError),
    #[error("cannot write the .npy file: {0}")]
    Npy(#[from] std::io::Error),
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
    // The run's summary (the library's, as results.json has it) with these results.
    let mut summary = finished.summary.clone();
    summary.record_results(results, &previews);
    // A live scan that ended early holds what came: partial, and why.
    let (status, failures) = match &finished.ended_early {
        None => (RunStatus::Complete, Vec::new()),
        Some(why) => {
            let failure = PartitionFailure { partition: None, frames: None, udf: None, at: None, error: why.clone() };
            (RunStatus::Partial, vec![failure])
        }
    };
    summary.finish(status, &failures, 0, &results.stats, finished.started);
    let page = page::page(&summary, &previews, true, None);
    files.push(json!({"name": "index.html", "part": message.part(page.as_bytes())}));
    *message.header_mut() = json!({"type": "export", "lane": lane, "id": id, "files": files});
    Ok(message.finish())
}
