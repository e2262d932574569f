//! The scan geometry: does the plugin give the same results when the primary dataset's
//! frames are laid out as a 1-D scan instead of its own (2-D) scan?
//!
//! One run answers it, on first use. The ROI checks need the answer: the selected frames
//! of a ROI, gathered as a 1-D scan of their own, are a fair reference for a ROI run only
//! for a plugin whose results do not depend on the geometry. A plugin that records scan
//! coordinates, or computes gradients over the scan, legitimately differs, and one that
//! needs a 2-D scan refuses the 1-D one with a typed error; both are reported as such
//! (`robustness.flat_scan`), never as failures.

use super::compare::{Layout, compare_results};
use super::subject::{Ctx, Failure, classify};
use super::synthetic;
use crate::exec::RunOptions;

/// How the plugin behaves on the frames as a 1-D scan.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Geometry {
    /// The data is a 1-D scan already: gathered subsets keep its geometry.
    OneDimensional,
    /// Same results (raw layout, within tolerance) as on the data's own scan.
    Independent,
    /// Other results: they depend on the geometry (the evidence's message says where).
    Dependent(String),
    /// The plugin refused the 1-D scan with a typed error (its message).
    Refused(String),
    /// The run failed otherwise: a trap or a contract violation (the error).
    Broken(String),
    /// No baseline to compare with (the baseline run failed).
    Unknown,
}

impl Geometry {
    /// Why subsets gathered as a 1-D scan are no reference, if they are not.
    pub fn why_not_flat(&self) -> Option<String> {
        match self {
            Geometry::OneDimensional | Geometry::Independent => None,
            Geometry::Dependent(m) => Some(format!("the results depend on the scan geometry ({m})")),
            Geometry::Refused(m) => Some(format!("the plugin refused a 1-D scan ({m})")),
            Geometry::Broken(m) => Some(format!("the run on a 1-D scan failed ({m})")),
            Geometry::Unknown => Some("the baseline run failed".into()),
        }
    }
}

/// Run the primary dataset's frames as a 1-D scan (1 partition, 1 thread, like the
/// baseline) and compare with the baseline.
pub(crate) fn probe(ctx: &Ctx<'_>) -> Geometry {
    let primary = ctx.primary();
    if primary.data.shape().nav.len() < 2 {
        return Geometry::OneDimensional;
    }
    let Ok(base) = ctx.baseline() else { return Geometry::Unknown };
    let frames = ctx.frames();
    let rows: Vec<usize> = (0..frames).collect();
    let flat = match synthetic::gather("flat scan", primary.data.as_ref(), &rows, &[frames]) {
        Ok(d) => d,
        Err(e) => return Geometry::Broken(format!("cannot build the dataset: {e}")),
    };
    let options = RunOptions { partitions: Some(1), threads: Some(1), ..Default::default() };
    match ctx.subject.run(&flat.data, &ctx.subject.params_for_rows(&rows), options) {
        Ok(r) => {
            let bounds = ctx.bounds(base, primary.data.as_ref());
            let e = compare_results("1-D scan", &base.results.udfs[0], &r.udfs[0], &bounds, Layout::Raw, false);
            if e.status == super::Status::Pass { Geometry::Independent } else { Geometry::Dependent(e.message) }
        }
        Err(e) => match classify(&e) {
            Failure::Typed(m) => Geometry::Refused(m),
            Failure::Refused(m) | Failure::Broken(m) => Geometry::Broken(m),
        },
    }
}
