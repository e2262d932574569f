//! The planning step that refuses a run whose results would not fit in host memory
//! (`--max-result-memory`), and what a front end adds to them ([`ResultExtra`]).

use super::{PlannedUdf, RunError};
use crate::udf::{BufferDecl, BufferKind, BufferUse, DatasetMeta};
use std::sync::Arc;

/// Memory a front end takes per result buffer beyond the results themselves while it
/// holds them — the previews it draws — counted with the results when a run is planned
/// ([`RunOptions::max_result_bytes`](super::RunOptions::max_result_bytes)).
#[derive(Clone)]
pub struct ResultExtra {
    /// What it is, for the message ("previews").
    pub what: &'static str,
    pub bytes: ExtraBytes,
}

/// The bytes of a [`ResultExtra`] for one buffer: the buffer's kind, its result shape (a
/// nav buffer's starts with the scan's shape) and its extra shape.
pub type ExtraBytes = Arc<dyn Fn(BufferKind, &[usize], &[usize]) -> u64 + Send + Sync>;

impl std::fmt::Debug for ResultExtra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResultExtra").field("what", &self.what).finish_non_exhaustive()
    }
}

/// Check that the results fit in `cap` bytes of host memory, counting what is really
/// allocated (`exec::results`), not only the merged state: per declared buffer the
/// merged state (not for result-only buffers), the results' raw copy and its valid mask
/// (one byte per element, held twice while it is built), nav buffers expanded to the
/// whole scan with the ROI (data and valid mask), and what the front end makes of them
/// (`extra`: previews). A run over the cap is refused before it starts, naming the
/// largest buffer and the sizes.
pub(super) fn check(
    planned: &[PlannedUdf],
    meta: &DatasetMeta,
    roi: bool,
    extra: Option<&ResultExtra>,
    cap: u64,
) -> Result<(), RunError> {
    let frames = meta.frames();
    let scan: u64 = meta.nav_shape.iter().map(|&d| d as u64).fold(1, u64::saturating_mul);
    let bytes = |d: &BufferDecl| {
        let elements =
            d.storage_shape(frames, &meta.sig_shape).iter().map(|&n| n as u64).fold(1u64, u64::saturating_mul);
        let item = d.dtype.size() as u64;
        let merged = if d.usage == BufferUse::ResultOnly { 0 } else { elements.saturating_mul(item) };
        // Raw results and their valid mask (built as a Vec<bool>, then an array).
        let raw = elements.saturating_mul(item).saturating_add(elements.saturating_mul(2));
        let expanded = if d.kind == BufferKind::Nav && roi {
            let full = scan.saturating_mul(d.extra_shape.iter().map(|&n| n as u64).fold(1, u64::saturating_mul));
            full.saturating_mul(item + 1)
        } else {
            // Reshaped copies of the raw data and mask.
            elements.saturating_mul(item + 1)
        };
        let extra = extra.map_or(0, |extra| {
            let mut shape = match d.kind {
                BufferKind::Nav => meta.nav_shape.clone(),
                BufferKind::Sig => meta.sig_shape.clone(),
                BufferKind::Single => Vec::new(),
            };
            shape.extend_from_slice(&d.extra_shape);
            (extra.bytes)(d.kind, &shape, &d.extra_shape)
        });
        merged.saturating_add(raw).saturating_add(expanded).saturating_add(extra)
    };
    let all = || planned.iter().flat_map(|p| p.decls.iter().map(move |d| (p, d)));
    let total = all().map(|(_, d)| bytes(d)).fold(0u64, u64::saturating_add);
    if total <= cap {
        return Ok(());
    }
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let largest = all()
        .max_by_key(|(_, d)| bytes(d))
        .map(|(p, d)| {
            format!("'{}' of '{}', {} {:?}: {:.1} GiB", d.name, p.name, d.dtype, d.extra_shape, gib(bytes(d)))
        })
        .unwrap_or_default();
    Err(RunError::Invalid(format!(
        "the results would need {:.1} GiB of memory (merged buffers, results, valid masks{}{}), more than the limit \
         of {:.1} GiB (largest buffer: {largest}); process fewer frames (a ROI), ask for fewer results{}, or raise \
         the limit (--max-result-memory of run and live, max_result_memory= in Python; serve keeps the default)",
        gib(total),
        if roi { ", nav buffers expanded to the whole scan" } else { "" },
        extra.map(|e| format!(", {}", e.what)).unwrap_or_default(),
        gib(cap),
        extra.map(|e| format!(" or no {}", e.what)).unwrap_or_default(),
    )))
}
