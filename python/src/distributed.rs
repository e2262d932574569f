//! What another engine (Dask) needs: a [`PlanHandle`] made on the client (its JSON goes to
//! the workers), [`run_partition`] on a worker (a [`Worker`] per plan, cached per process;
//! plugins installed once per process by [`install_plugin`]), and a [`MergerHandle`] on the
//! client that merges the partitions' outputs in completion order.

use crate::DatasetError;
use crate::convert::{params_from_dict, run_error};
use crate::engine::results_to_python;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use udf_host::exec::{Control, Limits, Merger, PartitionOutput, Plan, Run, RunError, Worker};
use udf_host::loader::{Loader, runtime_options};
use udf_host::udf::Params;
use udf_host::wasm::{ComponentCache, WasmRuntime};

/// A plan made on the client, with the UDFs it was made from (for the merger).
#[pyclass(module = "udf_host._native", frozen)]
pub struct PlanHandle {
    run: Run,
    json: String,
}

impl PlanHandle {
    pub fn new(run: Run) -> Self {
        let json = run.as_plan().to_json();
        PlanHandle { run, json }
    }
}

#[pymethods]
impl PlanHandle {
    /// The plan as JSON: what the workers run partitions from.
    fn json(&self) -> &str {
        &self.json
    }

    /// The SHA-256 of the JSON: the plan's name in the workers' caches.
    fn id(&self) -> String {
        udf_host::wasm::sha256_hex(self.json.as_bytes())
    }

    /// The indices of the partitions to run, in order.
    fn partitions(&self) -> Vec<usize> {
        self.run.as_plan().partition_indices().collect()
    }

    /// The SHA-256 of every wasm plugin of the plan (the bytes the workers need).
    fn plugin_hashes(&self) -> Vec<String> {
        self.run.as_plan().udfs.iter().filter_map(|u| u.origin.component_sha256().map(str::to_owned)).collect()
    }

    #[getter]
    fn frames_total(&self) -> usize {
        self.run.as_plan().meta.frames()
    }

    /// A merger for this plan's partition outputs (calls a main-side `preprocess`).
    fn merger(&self, py: Python<'_>) -> PyResult<MergerHandle> {
        let merger = self.run.merger().map_err(|e| run_error(py, e))?;
        let plan = self.run.as_plan();
        Ok(MergerHandle {
            merger: Mutex::new(merger),
            nav: plan.meta.nav_shape.clone(),
            roi: plan.roi.as_ref().map(|r| r.mask().to_vec()),
        })
    }
}

/// Merges partition outputs (the bytes [`run_partition`] returns) in any order.
#[pyclass(module = "udf_host._native", frozen)]
pub struct MergerHandle {
    merger: Mutex<Merger>,
    nav: Vec<usize>,
    roi: Option<Vec<bool>>,
}

impl MergerHandle {
    fn with<R>(&self, f: impl FnOnce(&mut Merger) -> PyResult<R>) -> PyResult<R> {
        let mut guard = self.merger.lock().map_err(|_| PyValueError::new_err("merger lock poisoned"))?;
        f(&mut guard)
    }
}

#[pymethods]
impl MergerHandle {
    /// Merge one partition's output; returns `(merged so far, partitions in the plan)`.
    fn merge(&self, py: Python<'_>, output: &[u8]) -> PyResult<(usize, usize)> {
        let output = PartitionOutput::from_bytes(output).map_err(|e| PyValueError::new_err(e.to_string()))?;
        self.with(|merger| {
            let step = py.detach(move || merger.merge(output)).map_err(|e| run_error(py, e))?;
            Ok((step.merged, step.total))
        })
    }

    /// The results merged so far: per UDF a dict of buffer name -> Buffer.
    fn results<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let results = self.with(|merger| {
            let merger: &Merger = merger;
            py.detach(move || merger.results()).map_err(|e| run_error(py, e))
        })?;
        results_to_python(py, results)
    }

    /// The merged positions, nav-shaped (false outside the ROI).
    fn damage(&self) -> PyResult<(Vec<usize>, Vec<bool>)> {
        let compressed = self.with(|merger| Ok(merger.damage().to_vec()))?;
        let full = match &self.roi {
            None => compressed,
            Some(mask) => {
                let mut full = vec![false; mask.len()];
                let selected = mask.iter().enumerate().filter(|(_, s)| **s).map(|(i, _)| i);
                for (position, merged) in selected.zip(compressed) {
                    full[position] = merged;
                }
                full
            }
        };
        Ok((self.nav.clone(), full))
    }

    #[getter]
    fn frames_merged(&self) -> PyResult<u64> {
        self.with(|merger| Ok(merger.stats().frames))
    }

    fn is_complete(&self) -> PyResult<bool> {
        self.with(|merger| Ok(merger.is_complete()))
    }

    /// New parameters for UDF `index`, for partitions merged from now on; returns every
    /// UDF's current parameters as JSON, which new tasks must run with.
    fn update_params(&self, py: Python<'_>, index: usize, params: &Bound<'_, PyDict>) -> PyResult<String> {
        let updates = params_from_dict(params)?;
        self.with(|merger| {
            merger.update_params(index, &updates).map_err(|e| run_error(py, e))?;
            serde_json::to_string(merger.params()).map_err(|e| PyValueError::new_err(e.to_string()))
        })
    }
}

/// Per worker process: plugin bytes sent by clients (by SHA-256), a loader per set of
/// limits (it keeps compiled plugins), and a worker per plan.
struct Process {
    plugins: HashMap<String, Arc<Vec<u8>>>,
    loaders: Vec<(Limits, Arc<Loader>)>,
    /// `(SHA-256 of the plan's JSON, worker)`, most recent last; a few are kept.
    workers: Vec<(String, Arc<Worker>)>,
}

fn process() -> &'static Mutex<Process> {
    static PROCESS: OnceLock<Mutex<Process>> = OnceLock::new();
    PROCESS.get_or_init(|| Mutex::new(Process { plugins: HashMap::new(), loaders: Vec::new(), workers: Vec::new() }))
}

/// Plans kept per process (a worker holds its dataset's mapping and loaded plugins).
const KEPT_PLANS: usize = 4;

/// Keep a plugin's bytes in this process, for the plans that name its SHA-256; returns it.
#[pyfunction]
pub fn install_plugin(wasm: Vec<u8>) -> PyResult<String> {
    let hash = udf_host::wasm::sha256_hex(&wasm);
    let mut process = process().lock().map_err(|_| PyValueError::new_err("process lock poisoned"))?;
    process.plugins.entry(hash.clone()).or_insert_with(|| Arc::new(wasm));
    Ok(hash)
}

/// Whether this process has the plugin with this SHA-256.
#[pyfunction]
pub fn has_plugin(sha256: &str) -> bool {
    process().lock().is_ok_and(|p| p.plugins.contains_key(sha256))
}

/// The worker for `plan_json` in this process, made on first use: the dataset opened, the
/// plugins loaded (from installed bytes, else their paths), both checked against the plan.
fn worker_for(plan_json: &str, plan_id: Option<&str>) -> Result<Arc<Worker>, RunError> {
    let key = plan_id.map_or_else(|| udf_host::wasm::sha256_hex(plan_json.as_bytes()), str::to_owned);
    let poisoned = || RunError::Internal("process lock poisoned".into());
    if let Some((_, worker)) = process().lock().map_err(|_| poisoned())?.workers.iter().find(|(k, _)| *k == key) {
        return Ok(worker.clone());
    }
    let plan = Arc::new(Plan::from_json(plan_json)?);
    let loader = {
        let mut process = process().lock().map_err(|_| poisoned())?;
        let existing = process.loaders.iter().find(|(l, _)| *l == plan.limits).map(|(_, loader)| loader.clone());
        let loader = match existing {
            Some(loader) => loader,
            None => {
                let mut options = runtime_options(&plan.limits, ((plan.threads + 2) * 8) as u32);
                options.cache = ComponentCache::new(ComponentCache::default_dir());
                options.logger = udf_host::log::stderr(udf_host::log::LogLevel::Warn);
                let runtime = WasmRuntime::new(options).map_err(|e| RunError::Invalid(e.to_string()))?;
                let loader = Arc::new(Loader::new(runtime));
                process.loaders.push((plan.limits, loader.clone()));
                loader
            }
        };
        for u in &plan.udfs {
            if let Some(sha256) = u.origin.component_sha256()
                && let Some(bytes) = process.plugins.get(sha256)
                && !loader.has(sha256)
            {
                loader.add_bytes(bytes.to_vec());
            }
        }
        loader
    };
    let worker = Arc::new(Worker::load(plan, loader.as_ref())?);
    let mut process = process().lock().map_err(|_| poisoned())?;
    process.workers.push((key, worker.clone()));
    if process.workers.len() > KEPT_PLANS {
        process.workers.remove(0);
    }
    Ok(worker)
}

/// Run partition `index` of the plan `plan_json` in this process and return its output as
/// bytes (for `MergerHandle.merge`). `params_json`: every UDF's parameters when they were
/// updated after planning (`MergerHandle.update_params`), else the plan's. `plan_id`
/// names the plan for the per-process cache (the client's hash of the JSON, so workers
/// need not hash a large plan for every task); default: the SHA-256 of the JSON.
#[pyfunction]
#[pyo3(signature = (plan_json, index, params_json=None, plan_id=None))]
pub fn run_partition<'py>(
    py: Python<'py>,
    plan_json: &str,
    index: usize,
    params_json: Option<&str>,
    plan_id: Option<&str>,
) -> PyResult<Bound<'py, PyBytes>> {
    let params: Option<Vec<Params>> = params_json
        .map(|j| serde_json::from_str(j).map_err(|e| PyValueError::new_err(format!("parameters: {e}"))))
        .transpose()?;
    let outcome = py.detach(|| {
        let worker = worker_for(plan_json, plan_id)?;
        let params = params.unwrap_or_else(|| worker.plan().udfs.iter().map(|u| u.params.clone()).collect());
        worker.run_partition_with(index, &params, &Control::default())
    });
    match outcome {
        Ok(output) => Ok(PyBytes::new(py, &output.to_bytes())),
        Err(RunError::Dataset(e)) => Err(DatasetError::new_err(e.to_string())),
        Err(e) => Err(run_error(py, e)),
    }
}
