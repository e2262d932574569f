//! What the page asks for, and the run of built-ins or plugins that computes it.
//!
//! | request (`kind`) | run |
//! |------------------|-----|
//! | `pattern` (`stat`: mean, std) | `builtin:stddev` over every frame; `sum`, `max`: `builtin:sum`, `builtin:max` |
//! | `disk`, `ring`, `point` | the built-in of that name with the geometry as its params |
//! | `rectangle` | `builtin:masks` with a mask of ones over rows `y0..y1`, columns `x0..x1` |
//! | `frame` | `builtin:pick` with a ROI of the one scan position `(y, x)` |
//! | `region` | `builtin:sum` with a ROI of scan rows `y0..y1`, columns `x0..x1` |
//! | `com` | `builtin:com` (field, divergence, curl, ...) with the centre and radii |
//! | `plugin` | a `.wasm` or a `FILE.py:Class` under the root, its params given as text as `--param` takes them |
//! | `live` (`stat`, `detector`) | the live lane's acquisition: the pattern's run and the detector's (`builtin:sumsig` without one) together |

use super::catalog::{Catalog, CatalogError};
use crate::array::NdArray;
use crate::dataset::{DatasetShape, OpenedDataset};
use crate::exec::{RunOptions, UdfSpec};
use crate::roi::Roi;
use crate::udf::{ParamValue, Params, Udf};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One request of the page.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Analysis {
    Pattern {
        stat: String,
    },
    Disk {
        cx: f64,
        cy: f64,
        r: f64,
    },
    Ring {
        cx: f64,
        cy: f64,
        ri: f64,
        ro: f64,
    },
    Point {
        cx: f64,
        cy: f64,
    },
    Rectangle {
        y0: usize,
        y1: usize,
        x0: usize,
        x1: usize,
    },
    Frame {
        y: usize,
        x: usize,
    },
    Region {
        y0: usize,
        y1: usize,
        x0: usize,
        x1: usize,
    },
    Com {
        cx: f64,
        cy: f64,
        r: f64,
        ri: f64,
    },
    Plugin {
        path: String,
        params: BTreeMap<String, String>,
    },
    /// A live acquisition (the live lane): the pattern `stat` and the scan image — the
    /// virtual `detector` (disk, ring, point or rectangle), or each frame's sum
    /// (`builtin:sumsig`) without one.
    Live {
        stat: String,
        detector: Option<Box<Analysis>>,
    },
}

/// Why a request cannot be run.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("{0}")]
    Invalid(String),
}

/// A request made into a run: what to plan, and which result buffers the page shows.
pub struct Job {
    pub dataset: OpenedDataset,
    pub specs: Vec<UdfSpec>,
    pub roi: Option<Roi>,
    /// The buffers sent to the page (`None`: all of them).
    pub show: Option<Vec<String>>,
}

/// The UDFs of a request, for a dataset of a given shape (a file's, or a live
/// acquisition's once it has started).
pub struct Udfs {
    pub specs: Vec<UdfSpec>,
    pub roi: Option<Roi>,
    /// The buffers sent to the page (`None`: all of them).
    pub show: Option<Vec<String>>,
}

/// What the server gives every run: its threads and its result memory cap.
#[derive(Debug, Clone, Copy)]
pub struct RunDefaults {
    pub threads: usize,
    /// `None`: the default cap (half the machine's memory).
    pub max_result_bytes: Option<u64>,
}

impl RunDefaults {
    /// Give `options` the server's threads and result memory cap, with the page's images
    /// and the export's previews counted with the results against the cap: what every run
    /// of the page (files and live acquisitions) has.
    pub fn apply(self, options: &mut RunOptions) {
        options.threads = Some(self.threads);
        options.max_result_bytes = self.max_result_bytes;
        options.result_extra = Some(crate::preview::result_extra_drawn(vec![
            super::wire::page_preview_options(),
            crate::preview::PreviewOptions::default(),
        ]));
    }
}

impl Job {
    /// The run's options: the ROI, partitions small enough that the first one is merged
    /// soon (see [`partitions_for`]), and the server's [`RunDefaults`].
    pub fn options(&self, defaults: RunDefaults) -> RunOptions {
        let shape = self.dataset.dataset.shape();
        let bytes = (shape.nav_len() * shape.sig_len() * self.dataset.dataset.stored_dtype().dtype.size()) as u64;
        let mut options = RunOptions {
            roi: self.roi.clone(),
            partitions: Some(partitions_for(bytes, shape.nav_len(), defaults.threads)),
            ..RunOptions::default()
        };
        defaults.apply(&mut options);
        options
    }
}

/// Stored bytes per partition the server aims for: small enough that the first
/// partitions are merged (and drawn) within a few tens of milliseconds, large enough
/// that the per-partition costs (instances, merges) stay small.
pub const PARTITION_BYTES: u64 = 32 << 20;

/// Partitions for a dataset of `bytes` and `frames`: about [`PARTITION_BYTES`] each, at
/// least two per thread, at most one per frame.
pub fn partitions_for(bytes: u64, frames: usize, threads: usize) -> usize {
    let by_size = bytes.div_ceil(PARTITION_BYTES) as usize;
    by_size.max(2 * threads).min(frames.max(1))
}

fn builtin(name: &str) -> Result<Arc<dyn Udf>, AnalysisError> {
    crate::builtins::get(name).ok_or_else(|| AnalysisError::Invalid(format!("internal: no built-in '{name}'")))
}

fn floats(values: &[(&str, f64)]) -> Params {
    let mut params = Params::default();
    for (name, value) in values {
        params.set(name, ParamValue::Float(*value));
    }
    params
}

/// The scan as a 2-D grid, for requests that name scan positions.
fn nav_2d(shape: &DatasetShape) -> Result<(usize, usize), AnalysisError> {
    match shape.nav.as_slice() {
        [h, w] => Ok((*h, *w)),
        [n] => Ok((1, *n)),
        other => Err(AnalysisError::Invalid(format!(
            "picking scan positions needs a 1-D or 2-D scan; this dataset's nav shape is {other:?}"
        ))),
    }
}

/// Rows `y0..y1`, columns `x0..x1` of a `height` x `width` grid, clipped and checked.
fn rectangle(
    what: &str,
    (y0, y1, x0, x1): (usize, usize, usize, usize),
    (height, width): (usize, usize),
) -> Result<(usize, usize, usize, usize), AnalysisError> {
    let (y1, x1) = (y1.min(height), x1.min(width));
    if y0 >= y1 || x0 >= x1 {
        return Err(AnalysisError::Invalid(format!(
            "the {what} rows {y0}..{y1}, columns {x0}..{x1} select nothing of the {height} x {width} grid"
        )));
    }
    Ok((y0, y1, x0, x1))
}

impl Analysis {
    /// The run for this request over `dataset`.
    ///
    /// # Errors
    /// Positions outside the data, an unknown statistic, a plugin that cannot be loaded
    /// or a parameter it does not take.
    pub fn job(&self, dataset: OpenedDataset, catalog: &Catalog) -> Result<Job, AnalysisError> {
        if matches!(self, Analysis::Live { .. }) {
            return Err(AnalysisError::Invalid("a live acquisition runs in the live lane, on the live source".into()));
        }
        let Udfs { specs, roi, show } = self.udfs(dataset.dataset.shape(), catalog)?;
        Ok(Job { dataset, specs, roi, show })
    }

    /// The UDFs for this request over a dataset of `shape`.
    ///
    /// # Errors
    /// As [`job`](Self::job); a live request whose detector is not a disk, ring, point
    /// or rectangle.
    pub fn udfs(&self, shape: &DatasetShape, catalog: &Catalog) -> Result<Udfs, AnalysisError> {
        let one = |udf: Arc<dyn Udf>, params: Params| vec![UdfSpec { udf, params }];
        let (specs, roi, show): (Vec<UdfSpec>, Option<Roi>, Option<Vec<String>>) = match self {
            Analysis::Pattern { stat } => match stat.as_str() {
                "mean" | "std" => (one(builtin("stddev")?, Params::default()), None, Some(vec![stat.clone()])),
                "sum" | "max" => (one(builtin(stat)?, Params::default()), None, None),
                other => {
                    return Err(AnalysisError::Invalid(format!(
                        "unknown pattern statistic '{other}': mean, max, std or sum"
                    )));
                }
            },
            Analysis::Disk { cx, cy, r } => {
                (one(builtin("disk")?, floats(&[("cx", *cx), ("cy", *cy), ("r", *r)])), None, None)
            }
            Analysis::Ring { cx, cy, ri, ro } => {
                let params = floats(&[("cx", *cx), ("cy", *cy), ("ri", *ri), ("ro", *ro)]);
                (one(builtin("ring")?, params), None, None)
            }
            Analysis::Point { cx, cy } => (one(builtin("point")?, floats(&[("cx", *cx), ("cy", *cy)])), None, None),
            Analysis::Rectangle { y0, y1, x0, x1 } => {
                let sig = &shape.sig;
                let [height, width] = sig[..] else {
                    return Err(AnalysisError::Invalid(format!(
                        "a rectangle detector needs 2-D frames; this dataset's frames are {sig:?}"
                    )));
                };
                let (y0, y1, x0, x1) = rectangle("rectangle detector", (*y0, *y1, *x0, *x1), (height, width))?;
                let mut mask = vec![0f32; height * width];
                for y in y0..y1 {
                    mask[y * width + x0..y * width + x1].fill(1.0);
                }
                let mask =
                    NdArray::from_vec(&[height, width], mask).map_err(|e| AnalysisError::Invalid(e.to_string()))?;
                let mut params = Params::default();
                params.set("masks", ParamValue::Array(Arc::new(mask)));
                (one(builtin("masks")?, params), None, None)
            }
            Analysis::Frame { y, x } => {
                let grid = nav_2d(shape)?;
                let (y0, y1, x0, x1) = rectangle("frame", (*y, y + 1, *x, x + 1), grid)?;
                let roi = scan_roi(shape, (y0, y1, x0, x1))?;
                (one(builtin("pick")?, Params::default()), Some(roi), None)
            }
            Analysis::Region { y0, y1, x0, x1 } => {
                let grid = nav_2d(shape)?;
                let rect = rectangle("region", (*y0, *y1, *x0, *x1), grid)?;
                (one(builtin("sum")?, Params::default()), Some(scan_roi(shape, rect)?), None)
            }
            Analysis::Com { cx, cy, r, ri } => {
                let params = floats(&[("cx", *cx), ("cy", *cy), ("r", *r), ("ri", *ri)]);
                let show = ["field_y", "field_x", "magnitude", "divergence", "curl"].map(String::from).to_vec();
                (one(builtin("com")?, params), None, Some(show))
            }
            Analysis::Plugin { path, params } => {
                let udf = catalog.plugin(path)?;
                let params = plugin_params(udf.as_ref(), params, catalog)?;
                (one(udf, params), None, None)
            }
            Analysis::Live { stat, detector } => {
                let pattern = Analysis::Pattern { stat: stat.clone() }.udfs(shape, catalog)?;
                let scan = match detector.as_deref() {
                    None => Udfs { specs: one(builtin("sumsig")?, Params::default()), roi: None, show: None },
                    Some(
                        d @ (Analysis::Disk { .. }
                        | Analysis::Ring { .. }
                        | Analysis::Point { .. }
                        | Analysis::Rectangle { .. }),
                    ) => d.udfs(shape, catalog)?,
                    Some(other) => {
                        return Err(AnalysisError::Invalid(format!(
                            "a live scan image comes from a disk, ring, point or rectangle detector, not {other:?}"
                        )));
                    }
                };
                // The pattern's buffer (mean, std) and every buffer of the detector's run.
                let show = pattern.show.map(|mut names| {
                    names.push("intensity".to_owned());
                    names
                });
                (pattern.specs.into_iter().chain(scan.specs).collect(), None, show)
            }
        };
        Ok(Udfs { specs, roi, show })
    }
}

/// A ROI of scan rows `y0..y1`, columns `x0..x1` (of a 1-D scan: positions `x0..x1`).
fn scan_roi(shape: &DatasetShape, (y0, y1, x0, x1): (usize, usize, usize, usize)) -> Result<Roi, AnalysisError> {
    let nav = &shape.nav;
    let spec = if nav.len() == 1 { format!("{x0}:{x1}") } else { format!("{y0}:{y1},{x0}:{x1}") };
    Roi::from_rect(&spec, nav).map_err(AnalysisError::Invalid)
}

/// A plugin's params from the form's text values (`--param` syntax; empty: the
/// default). `@file.npy` must name a file under the root.
fn plugin_params(udf: &dyn Udf, given: &BTreeMap<String, String>, catalog: &Catalog) -> Result<Params, AnalysisError> {
    let desc = udf.description();
    let mut params = Params::default();
    for (name, text) in given {
        if text.trim().is_empty() {
            continue;
        }
        let spec = desc
            .params
            .iter()
            .find(|s| &s.name == name)
            .ok_or_else(|| AnalysisError::Invalid(format!("plugin '{}' has no parameter '{name}'", desc.name)))?;
        let text = match text.trim().strip_prefix('@') {
            Some(file) => {
                let resolved = catalog.resolve(file).map_err(|e| AnalysisError::Catalog(e.into()))?;
                format!("@{}", resolved.display())
            }
            None => text.clone(),
        };
        let value = crate::params::parse_value(spec, &text).map_err(AnalysisError::Invalid)?;
        params.set(name, value);
    }
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_aim_at_a_size_and_keep_every_thread_busy() {
        assert_eq!(partitions_for(1 << 30, 8192, 2), 32);
        assert_eq!(partitions_for(1 << 20, 256, 2), 4);
        assert_eq!(partitions_for(1 << 30, 3, 2), 3);
    }

    /// Review of issue 33: the page's images (drawn for every result message) and the
    /// export's previews were drawn outside the result memory cap. A 64 x 64 frame sum
    /// is 16 KiB of results, but its images take more than 1 MiB to draw.
    #[test]
    fn the_pages_images_and_the_exports_previews_count_against_the_result_memory_cap() {
        use crate::array::NdArray;
        use crate::dataset::MemoryDataset;
        use crate::exec::{Run, RunError, UdfSpec};
        let data = NdArray::from_vec(&[4, 4, 64, 64], vec![1.0f32; 4 * 4 * 64 * 64]).unwrap();
        let dataset = MemoryDataset::new("scan", data, &[4, 4], &[64, 64]).unwrap();
        let job = Job {
            dataset: std::sync::Arc::new(dataset).into(),
            specs: vec![UdfSpec { udf: crate::builtins::get("sum").unwrap(), params: Default::default() }],
            roi: None,
            show: None,
        };
        let plan = |cap: u64| {
            let options = job.options(RunDefaults { threads: 2, max_result_bytes: Some(cap) });
            Run::plan(job.dataset.clone(), job.specs.clone(), options)
        };
        match plan(1 << 20) {
            Err(e @ RunError::Invalid(_)) => assert!(e.to_string().contains("previews"), "{e}"),
            Err(e) => panic!("refused for another reason: {e}"),
            Ok(_) => panic!("planned although its images do not fit in 1 MiB"),
        }
        assert!(plan(16 << 20).is_ok(), "16 MiB hold the results and their images");
    }

    #[test]
    fn requests_are_read_from_the_pages_json() {
        let ring: Analysis = serde_json::from_str(r#"{"kind":"ring","cx":1,"cy":2.5,"ri":3,"ro":4}"#).unwrap();
        assert_eq!(ring, Analysis::Ring { cx: 1.0, cy: 2.5, ri: 3.0, ro: 4.0 });
        assert!(serde_json::from_str::<Analysis>(r#"{"kind":"ring","cx":1}"#).is_err());
        assert!(serde_json::from_str::<Analysis>(r#"{"kind":"shell"}"#).is_err());
    }
}
