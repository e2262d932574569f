//! The native side of `udf_host.Context`: an [`Engine`] (wasm runtime and compiled-plugin
//! cache, threads, limits) that opens [`Dataset`]s and starts [`RunHandle`]s, whose results
//! are [`Buffer`]s.

use crate::DatasetError;
use crate::convert::{ndarray_from_numpy, normalise_bools, numpy_view, params_from_dict, run_error};
use numpy::PyUntypedArray;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;
use udf_host::cuda::Device;
use udf_host::dataset::{DatasetSpec, Format, OpenOptions, OpenedDataset};
use udf_host::exec::{Limits, Progress, Run, RunIter, RunOptions, RunResults, UdfLoader, UdfSpec};
use udf_host::loader::{Loader, RuntimeSetup, UDFS_PER_SHARED_RUN};
use udf_host::report::DatasetSummary;
use udf_host::roi::Roi;
use udf_host::udf::{ClassSource, Udf, UdfOrigin};
use udf_host::wasm::ComponentCache;

/// Runs UDFs in this process: one wasm runtime (limits, compile cache) and a loader that
/// keeps every compiled plugin for the next run.
#[pyclass(module = "udf_host._native", frozen)]
pub struct Engine {
    loader: Arc<Loader>,
    threads: Option<usize>,
    limits: Limits,
    /// Where built-ins with a CUDA kernel compute (docs/gpu.md).
    device: Device,
    /// The cap on a run's results in host memory (`--max-result-memory`; `None`: half the
    /// machine's memory).
    max_result_bytes: Option<u64>,
}

#[pymethods]
impl Engine {
    #[new]
    // One argument per keyword of `udf_host.Context` (the Python layer names them).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (threads=None, timeout=300.0, max_memory=4u64 << 30, max_memory_total=None, trusted=false, cache_dir=None, cache=true, device="cpu", max_result_memory=None))]
    fn new(
        threads: Option<usize>,
        timeout: f64,
        max_memory: u64,
        max_memory_total: Option<u64>,
        trusted: bool,
        cache_dir: Option<PathBuf>,
        cache: bool,
        device: &str,
        max_result_memory: Option<u64>,
    ) -> PyResult<Self> {
        let device = Device::parse(device)
            .ok_or_else(|| PyValueError::new_err(format!("device must be 'cpu', 'cuda' or 'auto', got '{device}'")))?;
        if threads == Some(0) {
            return Err(PyValueError::new_err("threads must be at least 1"));
        }
        if !(timeout.is_finite() && timeout > 0.0) {
            return Err(PyValueError::new_err(format!("timeout must be a positive number of seconds, got {timeout}")));
        }
        if max_memory == 0 || max_memory > udf_host::wasm::MAX_WASM_MEMORY as u64 {
            return Err(PyValueError::new_err(format!(
                "max_memory must be between 1 byte and 4 GiB (32-bit wasm), got {max_memory}"
            )));
        }
        if max_memory_total == Some(0) {
            return Err(PyValueError::new_err("max_memory_total must be at least 1 byte"));
        }
        let limits = Limits { timeout_seconds: timeout, max_memory, max_memory_total, trusted };
        let workers = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let cache = ComponentCache::new(if cache { cache_dir.or_else(ComponentCache::default_dir) } else { None });
        let setup = RuntimeSetup { cache, ..RuntimeSetup::new(limits, workers, UDFS_PER_SHARED_RUN) };
        let runtime = setup.build().map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(Engine {
            loader: Arc::new(Loader::new(runtime)),
            threads,
            limits,
            device,
            max_result_bytes: max_result_memory,
        })
    }

    /// Open a file: `filetype` is a `--format` name or `auto`; `options_json` the open
    /// options as JSON (the Python layer writes it).
    fn open(&self, py: Python<'_>, filetype: &str, path: PathBuf, options_json: &str) -> PyResult<Dataset> {
        let spec = file_spec(filetype, path, options_json)?;
        let opened = py.detach(|| spec.open()).map_err(|e| DatasetError::new_err(e.to_string()))?;
        Ok(Dataset { opened })
    }

    /// Frames in memory: `data` (C-contiguous, native byte order) is copied once; the last
    /// `sig_dims` axes are the frame.
    fn open_memory(&self, data: &Bound<'_, PyUntypedArray>, sig_dims: usize) -> PyResult<Dataset> {
        let array = ndarray_from_numpy(data)?;
        let shape = array.shape().to_vec();
        if sig_dims == 0 || sig_dims >= shape.len() {
            return Err(PyValueError::new_err(format!(
                "sig_dims={sig_dims} leaves no nav or no sig axes of an array of shape {shape:?}"
            )));
        }
        let (nav, sig) = shape.split_at(shape.len() - sig_dims);
        let spec =
            DatasetSpec::Memory { name: "memory".into(), nav: nav.to_vec(), sig: sig.to_vec(), data: Arc::new(array) };
        let opened = spec.open().map_err(|e| DatasetError::new_err(e.to_string()))?;
        Ok(Dataset { opened })
    }

    /// Start running `udfs` (a list of `(kind, source, wasm bytes or None, params dict)`)
    /// over `dataset` in one pass.
    #[pyo3(signature = (dataset, udfs, roi=None, partitions=None))]
    fn start(
        &self,
        py: Python<'_>,
        dataset: &Dataset,
        udfs: &Bound<'_, PyList>,
        roi: Option<&Bound<'_, PyUntypedArray>>,
        partitions: Option<usize>,
    ) -> PyResult<RunHandle> {
        let run = self.plan_for(py, dataset, udfs, roi, partitions, None)?;
        let nav = run.as_plan().meta.nav_shape.clone();
        let iter = run.iter();
        Ok(RunHandle { progress: iter.progress(), iter: Mutex::new(Some(iter)), nav })
    }

    /// Plan a run whose partitions run elsewhere (see `udf_host.DaskExecutor`).
    #[pyo3(signature = (dataset, udfs, roi=None, partitions=None, threads=None))]
    fn plan(
        &self,
        py: Python<'_>,
        dataset: &Dataset,
        udfs: &Bound<'_, PyList>,
        roi: Option<&Bound<'_, PyUntypedArray>>,
        partitions: Option<usize>,
        threads: Option<usize>,
    ) -> PyResult<crate::distributed::PlanHandle> {
        Ok(crate::distributed::PlanHandle::new(self.plan_for(py, dataset, udfs, roi, partitions, threads)?))
    }
}

/// What [`Buffer::preview`] draws, counted with a run's results against its result
/// memory cap: one image of a buffer at a time (its PNG, values, canvas and encoder).
fn on_demand_previews() -> udf_host::exec::ResultExtra {
    udf_host::preview::result_extra(udf_host::preview::PreviewOptions {
        max_slices: 1,
        ..udf_host::preview::PreviewOptions::default()
    })
}

impl Engine {
    /// This engine's threads, plugin limits, device and result memory cap, set in
    /// `options` (live runs).
    pub(crate) fn run_options(&self, options: &mut RunOptions) {
        options.threads = self.threads;
        options.limits = self.limits;
        options.device = self.device;
        options.max_result_bytes = self.max_result_bytes;
        options.result_extra = Some(on_demand_previews());
    }

    /// Plan a run for another engine (Dask): `threads` is the parallelism the default
    /// partition count is made for (the cluster's).
    pub fn plan_for(
        &self,
        py: Python<'_>,
        dataset: &Dataset,
        udfs: &Bound<'_, PyList>,
        roi: Option<&Bound<'_, PyUntypedArray>>,
        partitions: Option<usize>,
        threads: Option<usize>,
    ) -> PyResult<Run> {
        let specs = self.udf_specs(udfs)?;
        let nav = dataset.opened.dataset.shape().nav.clone();
        let roi = roi
            .map(|r| {
                let array = ndarray_from_numpy(r)?;
                Roi::from_array(&array, &nav).map_err(|e| PyValueError::new_err(format!("roi: {e}")))
            })
            .transpose()?;
        let options = RunOptions {
            roi,
            partitions,
            threads: threads.or(self.threads),
            limits: self.limits,
            device: self.device,
            max_result_bytes: self.max_result_bytes,
            result_extra: Some(on_demand_previews()),
            ..RunOptions::default()
        };
        let opened = dataset.opened.clone();
        py.detach(|| Run::plan(opened, specs, options)).map_err(|e| run_error(py, e))
    }

    /// Each `(kind, source, bytes, params[, class[, sha256]])` as a UDF of this engine with
    /// its params. With the bytes' SHA-256 given, bytes this engine has already are
    /// neither copied nor hashed again (the runner is 20 MB: that was most of a small run).
    pub(crate) fn udf_specs(&self, udfs: &Bound<'_, PyList>) -> PyResult<Vec<UdfSpec>> {
        udfs.iter()
            .map(|item| {
                let tuple = item.cast::<PyTuple>()?;
                let kind: String = tuple.get_item(0)?.extract()?;
                let source: String = tuple.get_item(1)?.extract()?;
                let params = params_from_dict(tuple.get_item(3)?.cast::<PyDict>()?)?;
                let class: Option<String> = if tuple.len() > 4 { tuple.get_item(4)?.extract()? } else { None };
                let known: Option<String> = if tuple.len() > 5 { tuple.get_item(5)?.extract()? } else { None };
                let sha256 = match known {
                    Some(sha256) if self.loader.has(&sha256) => Some(sha256),
                    known => {
                        let bytes: Option<Vec<u8>> = tuple.get_item(2)?.extract()?;
                        let added = bytes.map(|b| self.loader.add_bytes(b));
                        if let (Some(given), Some(found)) = (&known, &added)
                            && given != found
                        {
                            return Err(PyValueError::new_err(format!(
                                "{source}: the bytes hash to {found}, not to the SHA-256 given with them ({given})"
                            )));
                        }
                        added
                    }
                };
                let udf = self.load_udf(&kind, &source, sha256, class)?;
                Ok(UdfSpec { udf, params })
            })
            .collect()
    }

    fn load_udf(
        &self,
        kind: &str,
        source: &str,
        sha256: Option<String>,
        class: Option<String>,
    ) -> PyResult<Arc<dyn Udf>> {
        let origin = match (kind, sha256) {
            ("class", Some(runner_sha256)) => {
                let document = class.ok_or_else(|| PyValueError::new_err("a class UDF without its source"))?;
                let class = ClassSource::from_json(document).map_err(|e| PyValueError::new_err(e.to_string()))?;
                UdfOrigin::PythonClass { runner: PathBuf::from(source), runner_sha256, class }
            }
            ("builtin", _) => UdfOrigin::Builtin { name: source.to_owned() },
            ("wasm", Some(sha256)) => UdfOrigin::Wasm { path: PathBuf::from(source), sha256 },
            _ => return Err(PyValueError::new_err(format!("not a UDF: ({kind:?}, {source:?})"))),
        };
        self.loader.load(&origin).map_err(PyValueError::new_err)
    }
}

/// A `DatasetSpec` for a file from the Python layer's arguments: `filetype` a format
/// name or `auto`, the options as JSON keyed by their names.
fn file_spec(filetype: &str, path: PathBuf, options_json: &str) -> PyResult<DatasetSpec> {
    let value: serde_json::Value =
        serde_json::from_str(options_json).map_err(|e| PyValueError::new_err(format!("options: {e}")))?;
    let format = match filetype.to_ascii_lowercase().as_str() {
        "auto" => None,
        name => Some(Format::parse(name).ok_or_else(|| {
            PyValueError::new_err(format!("unknown filetype '{filetype}' (auto, {}, memory)", Format::NAMES))
        })?),
    };
    let options = OpenOptions::from_named(value).map_err(PyValueError::new_err)?;
    Ok(DatasetSpec::file(path, OpenOptions { format, ..options }))
}

/// An open dataset; pickles as its open spec (a file path and options, or the frames).
#[pyclass(module = "udf_host._native", frozen)]
pub struct Dataset {
    pub(crate) opened: OpenedDataset,
}

#[pymethods]
impl Dataset {
    #[getter]
    fn nav_shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.opened.dataset.shape().nav)
    }

    #[getter]
    fn sig_shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.opened.dataset.shape().sig)
    }

    /// The stored dtype as a NumPy `descr` (`<u2`, `>f4`).
    #[getter]
    fn dtype(&self) -> String {
        self.opened.dataset.stored_dtype().descr()
    }

    #[getter]
    fn format(&self) -> &'static str {
        self.opened.dataset.info().format
    }

    #[getter]
    fn path(&self) -> String {
        self.opened.dataset.info().path.display().to_string()
    }

    /// What `udf-host info` prints for this dataset, and the same as JSON.
    #[pyo3(signature = (threads=None))]
    fn info(&self, threads: Option<usize>) -> PyResult<(String, String)> {
        let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let summary = DatasetSummary::of(self.opened.dataset.as_ref(), threads);
        let json = udf_host::report::json_line(&summary).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok((summary.to_text(), json))
    }

    /// How to open it again, as JSON.
    fn spec_json(&self) -> PyResult<String> {
        let spec = self.opened.spec.as_ref().ok_or_else(|| PyValueError::new_err("this dataset has no open spec"))?;
        serde_json::to_string(spec).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// Open a dataset from [`spec_json`](Self::spec_json)'s output.
    #[staticmethod]
    fn from_spec_json(py: Python<'_>, json: &str) -> PyResult<Dataset> {
        let spec: DatasetSpec =
            serde_json::from_str(json).map_err(|e| PyValueError::new_err(format!("not a dataset spec: {e}")))?;
        let opened = py.detach(|| spec.open()).map_err(|e| DatasetError::new_err(e.to_string()))?;
        Ok(Dataset { opened })
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (String,))> {
        let from = slf.get_type().getattr("from_spec_json")?;
        Ok((from, (slf.get().spec_json()?,)))
    }
}

/// A running run: poll it with [`next`](Self::next), take results at any point.
#[pyclass(module = "udf_host._native", frozen)]
pub struct RunHandle {
    iter: Mutex<Option<RunIter>>,
    progress: Progress,
    nav: Vec<usize>,
}

impl RunHandle {
    fn with_iter<R>(&self, f: impl FnOnce(&mut RunIter) -> PyResult<R>) -> PyResult<R> {
        let mut guard = self.iter.lock().map_err(|_| PyValueError::new_err("run lock poisoned"))?;
        let iter = guard.as_mut().ok_or_else(|| PyValueError::new_err("the run is closed"))?;
        f(iter)
    }
}

#[pymethods]
impl RunHandle {
    /// Wait up to `timeout` seconds for the next merged partition: `None` if none came (call
    /// again; Python handles Ctrl-C in between), `True` after a merge, `False` when the run
    /// is over. Raises the run's error.
    fn next(&self, py: Python<'_>, timeout: f64) -> PyResult<Option<bool>> {
        let timeout = Duration::try_from_secs_f64(timeout.max(0.0)).unwrap_or(Duration::from_millis(100));
        let polled = self.with_iter(|iter| Ok(py.detach(|| iter.next_timeout(timeout))))?;
        match polled {
            Poll::Pending => Ok(None),
            Poll::Ready(None) => {
                // Never a finished run with a partition neither merged nor failed.
                self.with_iter(|iter| iter.check_accounted().map_err(|e| run_error(py, e)))?;
                Ok(Some(false))
            }
            Poll::Ready(Some(Ok(_))) => Ok(Some(true)),
            Poll::Ready(Some(Err(e))) => Err(run_error(py, e)),
        }
    }

    /// The results merged so far: per UDF a dict of buffer name -> [`Buffer`].
    fn results<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        // `get_results` may call into plugins: without the GIL (moving the `&mut` in
        // makes the closure Send without asking `RunIter` to be Sync).
        let results = self.with_iter(|iter| py.detach(move || iter.results()).map_err(|e| run_error(py, e)))?;
        results_to_python(py, results)
    }

    /// The merged positions, nav-shaped (false outside the ROI).
    fn damage(&self) -> PyResult<(Vec<usize>, Vec<bool>)> {
        Ok((self.nav.clone(), self.with_iter(|iter| Ok(iter.nav_damage()))?))
    }

    #[getter]
    fn frames_done(&self) -> u64 {
        self.progress.frames_done()
    }

    #[getter]
    fn frames_total(&self) -> u64 {
        self.progress.frames_total()
    }

    /// Stop the run: no new partitions, running calls into plugins interrupted.
    fn interrupt(&self) {
        self.progress.interrupt();
    }

    /// New parameters for UDF `index`, for the partitions that start from now on.
    fn update_params(&self, py: Python<'_>, index: usize, params: &Bound<'_, PyDict>) -> PyResult<()> {
        let updates = params_from_dict(params)?;
        self.with_iter(|iter| iter.update_params(index, &updates).map_err(|e| run_error(py, e)))
    }

    /// Stop and release the run (waits for running partitions to stop).
    fn close(&self, py: Python<'_>) {
        self.progress.interrupt();
        let taken = self.iter.lock().ok().and_then(|mut guard| guard.take());
        py.detach(move || drop(taken));
    }
}

/// Per UDF a dict of buffer name -> [`Buffer`] (arrays handed over without a copy).
pub fn results_to_python(py: Python<'_>, results: RunResults) -> PyResult<Bound<'_, PyList>> {
    let list = PyList::empty(py);
    for udf in results.udfs {
        let dict = PyDict::new(py);
        for mut buffer in udf.buffers {
            normalise_bools(&mut buffer.data);
            normalise_bools(&mut buffer.raw);
            let name = buffer.name.clone();
            dict.set_item(name, Bound::new(py, Buffer { inner: buffer })?)?;
        }
        list.append(dict)?;
    }
    Ok(list)
}

/// One result buffer (LiberTEM's `BufferWrapper` as results): its arrays are NumPy views of
/// memory this object owns. `udf_host.Buffer` adds `masked_data` and NumPy protocols.
#[pyclass(module = "udf_host._native", frozen, subclass)]
pub struct Buffer {
    inner: udf_host::exec::ResultBuffer,
}

#[pymethods]
impl Buffer {
    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }

    /// `nav`, `sig` or `single`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.kind.name()
    }

    #[getter]
    fn extra_shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.extra_shape)
    }

    /// NumPy's dtype name (`float32`, ...).
    #[getter]
    fn dtype_name(&self) -> &'static str {
        self.inner.dtype().name()
    }

    /// Nav buffers in the nav shape, NaN / 0 / False outside the ROI (LiberTEM's `.data`).
    #[getter]
    fn data<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        numpy_view(&slf.get().inner.data, slf.clone().into_any())
    }

    /// Flat and ROI-compressed for nav buffers (LiberTEM's `.raw_data`).
    #[getter]
    fn raw_data<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        numpy_view(&slf.get().inner.raw, slf.clone().into_any())
    }

    /// Where `data` is valid (bool, the shape of `data`).
    #[getter]
    fn valid_mask<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        numpy_view(&slf.get().inner.valid, slf.clone().into_any())
    }

    /// The PNG preview `udf-host run --preview` writes for this buffer (slice `index` of an
    /// extra shape).
    #[pyo3(signature = (index=0))]
    fn preview<'py>(&self, py: Python<'py>, index: usize) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        let options = udf_host::preview::PreviewOptions::default();
        let png = udf_host::preview::png_bytes(&self.inner, index, &options)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(pyo3::types::PyBytes::new(py, &png))
    }

    fn __repr__(&self) -> String {
        format!(
            "<Buffer '{}' kind={} dtype={} shape={:?}>",
            self.inner.name,
            self.kind(),
            self.inner.dtype(),
            self.inner.data.shape()
        )
    }
}
