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
use std::sync::{Arc, Mutex, OnceLock};
use udf_host::exec::{Control, Merger, PartitionOutput, Plan, Run, RunError, Worker};
use udf_host::udf::{Params, UdfOrigin};

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
        self.run
            .as_plan()
            .udfs
            .iter()
            .filter_map(|u| match &u.origin {
                UdfOrigin::Wasm { sha256, .. } => Some(sha256.clone()),
                _ => None,
            })
            .collect()
    }

    #[getter]
    fn frames_total(&self) -> usize {
        self.run.as_plan().meta.frames()
    }

    /// A merger for this plan's partition outputs (calls a main-side `preprocess`).
    fn merger(&self, py: Python<'_>) -> PyResult<MergerHandle> {
        let merger = self.run.merger().map_err(|e| run_error(py, e))?;
        let plan = self.run.as_plan();
        Ok(MergerHandle { merger: Mutex::new(merger), nav: plan.meta.nav_shape.clone() })
    }
}

/// Merges partition outputs (the bytes [`run_partition`] returns) in any order.
#[pyclass(module = "udf_host._native", frozen)]
pub struct MergerHandle {
    merger: Mutex<Merger>,
    nav: Vec<usize>,
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
    /// `index`: the partition the task that returned it was asked for; an output of
    /// another partition is refused.
    #[pyo3(signature = (output, index=None))]
    fn merge(&self, py: Python<'_>, output: &[u8], index: Option<usize>) -> PyResult<(usize, usize)> {
        let output = PartitionOutput::from_bytes(output).map_err(|e| PyValueError::new_err(e.to_string()))?;
        if let Some(index) = index
            && output.index != index
        {
            return Err(PyValueError::new_err(format!(
                "the task for partition {index} returned the output of partition {}",
                output.index
            )));
        }
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
        Ok((self.nav.clone(), self.with(|merger| Ok(merger.nav_damage()))?))
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

/// Per worker process: plugin bytes sent by clients (by SHA-256) and a worker per plan
/// (plugins are loaded by the process's shared loaders, which keep them compiled).
struct Process {
    /// Installed plugin bytes by SHA-256, oldest first; at most [`KEPT_PLUGIN_BYTES`].
    plugins: Vec<(String, Arc<Vec<u8>>)>,
    /// `(SHA-256 of the plan's JSON, worker)`, most recent last; a few are kept.
    workers: Vec<(String, Arc<Worker>)>,
}

fn process() -> &'static Mutex<Process> {
    static PROCESS: OnceLock<Mutex<Process>> = OnceLock::new();
    PROCESS.get_or_init(|| Mutex::new(Process { plugins: Vec::new(), workers: Vec::new() }))
}

impl Process {
    fn plugin(&self, sha256: &str) -> Option<&Arc<Vec<u8>>> {
        self.plugins.iter().find(|(h, _)| h == sha256).map(|(_, b)| b)
    }
}

/// Plans kept per process (a worker holds its dataset's mapping and loaded plugins).
const KEPT_PLANS: usize = 4;
/// Installed plugin bytes kept per process (a long-lived worker serves many clients):
/// the oldest go first; a plan whose plugin was dropped loads it from its path.
const KEPT_PLUGIN_BYTES: usize = 1 << 30;

/// Keep a plugin's bytes in this process, for the plans that name its SHA-256; returns it.
#[pyfunction]
pub fn install_plugin(wasm: Vec<u8>) -> PyResult<String> {
    let hash = udf_host::wasm::sha256_hex(&wasm);
    let mut process = process().lock().map_err(|_| PyValueError::new_err("process lock poisoned"))?;
    if process.plugin(&hash).is_none() {
        process.plugins.push((hash.clone(), Arc::new(wasm)));
        while process.plugins.len() > 1
            && process.plugins.iter().map(|(_, b)| b.len()).sum::<usize>() > KEPT_PLUGIN_BYTES
        {
            process.plugins.remove(0);
        }
    }
    Ok(hash)
}

/// Whether this process has the plugin with this SHA-256.
#[pyfunction]
pub fn has_plugin(sha256: &str) -> bool {
    process().lock().is_ok_and(|p| p.plugin(sha256).is_some())
}

/// The worker for `plan_json` in this process, made on first use: the dataset opened, the
/// plugins loaded (from installed bytes, else their paths), both checked against the plan.
fn worker_for(plan_json: &str, plan_id: Option<&str>) -> Result<Arc<Worker>, RunError> {
    // Keyed by content: a caller-supplied id naming another plan must not get this
    // plan's worker (or another plan's worker run this one).
    let _ = plan_id;
    let key = udf_host::wasm::sha256_hex(plan_json.as_bytes());
    let poisoned = || RunError::Internal("process lock poisoned".into());
    if let Some((_, worker)) = process().lock().map_err(|_| poisoned())?.workers.iter().find(|(k, _)| *k == key) {
        return Ok(worker.clone());
    }
    let plan = Arc::new(Plan::from_json(plan_json)?);
    let loader = {
        let process = process().lock().map_err(|_| poisoned())?;
        // Never trusted here, whatever the plan says: a plan does not turn the timeout off
        // where it runs.
        let loader = crate::runtime::shared_loader(plan.limits.untrusted()).map_err(RunError::Invalid)?;
        for u in &plan.udfs {
            if let UdfOrigin::Wasm { sha256, .. } = &u.origin
                && let Some(bytes) = process.plugin(sha256)
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
/// updated after planning (`MergerHandle.update_params`), else the plan's. `plan_id` is
/// accepted for compatibility and ignored: the per-process cache is keyed by the
/// SHA-256 of the JSON itself.
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
