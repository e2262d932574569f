//! The planning step that refuses a run whose results would not fit in host memory
//! (`--max-result-memory`).

use super::{PlannedUdf, RunError};
use crate::udf::{BufferDecl, BufferKind, BufferUse, DatasetMeta};

/// Check that the results fit in `cap` bytes of host memory, counting what is really
/// allocated (`exec::results`), not only the merged state: per declared buffer the
/// merged state (not for result-only buffers), the results' raw copy and its valid mask
/// (one byte per element, held twice while it is built), and nav buffers expanded to
/// the whole scan with the ROI (data and valid mask). A run over the cap is refused
/// before it starts, naming the largest buffer and the sizes.
pub(super) fn check(planned: &[PlannedUdf], meta: &DatasetMeta, roi: bool, cap: u64) -> Result<(), RunError> {
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
        merged.saturating_add(raw).saturating_add(expanded)
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
        "the results would need {:.1} GiB of memory (merged buffers, results, valid masks{}), more than the limit of \
         {:.1} GiB (largest buffer: {largest}); process fewer frames (a ROI), ask for fewer results, or raise \
         --max-result-memory",
        gib(total),
        if roi { ", nav buffers expanded to the whole scan" } else { "" },
        gib(cap)
    )))
}
