//! The plugin under test and how the checks run it: executions with chosen options,
//! parameters adapted to derived datasets, and what a failed run means.

use super::Config;
use super::compare::Bounds;
use super::geometry::Geometry;
use super::report::Evidence;
use super::synthetic::Named;
use crate::array::NdArray;
use crate::dataset::{Dataset, Partition, TilingScheme};
use crate::dtype::DType;
use crate::exec::{Run, RunError, RunOptions, RunResults, UdfSpec};
use crate::udf::{BufferDecl, CallError, Method, NamedBuffer, ParamType, ParamValue, Params, Udf};
use std::cell::OnceCell;
use std::sync::Arc;

/// The plugin and the parameters it is checked with.
pub(crate) struct Subject {
    pub udf: Arc<dyn Udf>,
    /// The parameters given by the user (defaults are filled in by the executor).
    pub params: Params,
    /// Nav shape of the primary dataset (nav aux parameters are shaped like it).
    pub nav: Vec<usize>,
}

/// A finished run with what the checks need besides the results.
pub(crate) struct Executed {
    pub results: RunResults,
    /// `results()` called a second time (if asked for).
    pub again: Option<Result<RunResults, RunError>>,
    /// Each partition's exported buffers (with `keep_partition_buffers`).
    pub kept: Vec<(usize, Vec<NamedBuffer>)>,
    pub partitions: Vec<Partition>,
    pub decls: Vec<BufferDecl>,
    /// The resolved parameters (nav aux arrays flattened).
    pub params: Params,
    pub input_dtype: DType,
    pub tiling: TilingScheme,
}

impl Subject {
    /// Run with `params` and `options`; the results.
    pub fn run(&self, data: &Arc<dyn Dataset>, params: &Params, options: RunOptions) -> Result<RunResults, RunError> {
        let spec = UdfSpec { udf: self.udf.clone(), params: params.clone() };
        Run::plan(data.clone(), vec![spec], options)?.execute()
    }

    /// Run and keep what the checks need; with `twice`, ask for the results twice.
    pub fn execute(
        &self,
        data: &Arc<dyn Dataset>,
        params: &Params,
        options: RunOptions,
        twice: bool,
    ) -> Result<Executed, RunError> {
        let spec = UdfSpec { udf: self.udf.clone(), params: params.clone() };
        let run = Run::plan(data.clone(), vec![spec], options)?;
        let partitions = run.partitions().to_vec();
        let decls = run.udfs().next().map(|(_, _, d)| d.to_vec()).unwrap_or_default();
        let resolved = run.params().into_iter().next().unwrap_or_default();
        let input_dtype = run.input_dtype();
        let tiling = run.tiling().clone();
        let mut iter = run.iter();
        for step in iter.by_ref() {
            step?;
        }
        let results = iter.results()?;
        let again = twice.then(|| iter.results());
        let kept = iter.partition_buffers(0).to_vec();
        Ok(Executed { results, again, kept, partitions, decls, params: resolved, input_dtype, tiling })
    }

    /// The given parameters for a dataset whose frame `i` is frame `rows[i]` of the
    /// primary dataset: nav aux arrays keep those rows (flattened).
    pub fn params_for_rows(&self, rows: &[usize]) -> Params {
        let mut params = self.params.clone();
        let nav_len: usize = self.nav.iter().product();
        for spec in self.udf.description().params.iter().filter(|s| s.nav_aux) {
            let Some(ParamValue::Array(array)) = self.params.get(&spec.name) else { continue };
            let shape = array.shape();
            let extra = if shape.len() >= self.nav.len() && shape[..self.nav.len()] == self.nav[..] {
                shape[self.nav.len()..].to_vec()
            } else if shape.first() == Some(&nav_len) {
                shape[1..].to_vec()
            } else {
                continue;
            };
            let mut flat = vec![nav_len];
            flat.extend(extra);
            let Ok(reshaped) = (**array).clone().reshape(&flat) else { continue };
            params.set(&spec.name, ParamValue::Array(Arc::new(reshaped.select_rows(rows.iter().copied()))));
        }
        params
    }

    /// Why frame shapes other than `sig` cannot be used, if they cannot: an array
    /// parameter (given or default) whose trailing axes are the frame shape.
    pub fn sig_tied(&self, sig: &[usize]) -> Option<String> {
        for spec in &self.udf.description().params {
            if spec.ty != ParamType::Array || spec.nav_aux {
                continue;
            }
            let value = self.params.get(&spec.name).or(spec.default.as_ref());
            let Some(ParamValue::Array(array)) = value else { continue };
            let shape = array.shape();
            if shape.len() >= sig.len() && shape[shape.len() - sig.len()..] == *sig {
                return Some(format!(
                    "parameter '{}' has shape {:?}, tied to the frame shape {sig:?}",
                    spec.name, shape
                ));
            }
        }
        None
    }
}

/// What a failed run means for a check.
pub(crate) enum Failure {
    /// The plugin returned a typed error (allowed where bad input is expected).
    Typed(String),
    /// The host refused the run before calling the plugin's code (bad params, shapes).
    Refused(String),
    /// A trap, a contract violation, a data error: a failure of the plugin (or host).
    Broken(String),
}

/// Classify a run error.
pub(crate) fn classify(e: &RunError) -> Failure {
    match e {
        RunError::Udf { error: CallError::Returned { .. }, .. } => Failure::Typed(e.to_string()),
        RunError::Invalid(_) => Failure::Refused(e.to_string()),
        _ => Failure::Broken(e.to_string()),
    }
}

/// Evidence for a run that may end in success or a typed error, but must not trap or
/// break the contract.
pub(crate) fn survives(variant: &str, outcome: Result<RunResults, RunError>, ok: &str) -> Evidence {
    match outcome {
        Ok(_) => Evidence::pass(variant, ok),
        Err(e) => match classify(&e) {
            Failure::Typed(m) => Evidence::pass(variant, format!("rejected with a typed error: {m}")),
            Failure::Refused(m) => Evidence::pass(variant, format!("refused by the host: {m}")),
            Failure::Broken(m) => Evidence::fail(variant, m),
        },
    }
}

/// Everything the checks share.
pub(crate) struct Ctx<'a> {
    pub subject: Subject,
    pub config: &'a Config,
    /// The datasets; the first is the primary one.
    pub datasets: Vec<Named>,
    /// The baseline run of each dataset (1 partition, 1 thread).
    pub baselines: Vec<Result<Executed, RunError>>,
    /// Whether the results depend on the scan geometry (run on first use).
    geometry: OnceCell<Geometry>,
}

impl<'a> Ctx<'a> {
    pub fn new(
        subject: Subject,
        config: &'a Config,
        datasets: Vec<Named>,
        baselines: Vec<Result<Executed, RunError>>,
    ) -> Self {
        Ctx { subject, config, datasets, baselines, geometry: OnceCell::new() }
    }

    /// How the plugin behaves on the primary dataset's frames as a 1-D scan (one run,
    /// on first use).
    pub fn geometry(&self) -> &Geometry {
        self.geometry.get_or_init(|| super::geometry::probe(self))
    }

    /// The tolerance model for runs like `base` on `data` (every frame processed), scaled
    /// by `base`'s results.
    pub fn bounds(&self, base: &Executed, data: &dyn Dataset) -> Bounds {
        let shape = data.shape();
        Bounds::new(&self.config.tolerance, &base.decls, base.input_dtype, shape.nav_len(), shape.sig_len())
            .with_scale(&base.results.udfs[0])
    }

    /// The primary dataset.
    pub fn primary(&self) -> &Named {
        &self.datasets[0]
    }

    /// The primary dataset's baseline.
    pub fn baseline(&self) -> Result<&Executed, &RunError> {
        self.baselines[0].as_ref()
    }

    /// Frames of the primary dataset.
    pub fn frames(&self) -> usize {
        self.primary().data.shape().nav_len()
    }

    /// The method of the baseline run.
    pub fn method(&self) -> Method {
        self.baseline().map_or(Method::Tile, |b| b.results.udfs[0].method)
    }

    /// Threads for ordinary variants: 2 (or fewer if asked).
    pub fn threads(&self) -> usize {
        self.config.threads.min(2)
    }
}

/// A float64 array of `shape` filled with `value`.
pub(crate) fn filled(shape: &[usize], value: f64) -> NdArray {
    let n: usize = shape.iter().product();
    NdArray::from_vec(shape, vec![value; n]).unwrap_or_else(|_| NdArray::zeros(DType::F64, &[0]))
}
