//! The native side of `udf_host.libertem.WasmUDF`: a wasm plugin driven call by call from
//! inside LiberTEM. LiberTEM owns the run — partitions, tiles, buffers, merge order — and
//! forwards each lifecycle call of its UDF here.
//!
//! | item | role |
//! |------|------|
//! | [`Plugin`] | a loaded plugin: describe, plan, result buffers, merge, get_results, start |
//! | [`Instance`] | one partition's instance: preprocess, process tiles, postprocess, export |
//!
//! Plugins are loaded by a process-wide [`Loader`] (one wasm runtime with the default
//! limits and compile cache), so a LiberTEM worker compiles each plugin once, checked
//! against the SHA-256 the client computed. Parameters arrive as Python values and are
//! resolved against the plugin's description (defaults, types) on every call; per-frame
//! (nav-aux) arrays arrive already cut to the frames the call concerns.

use crate::convert::{ndarray_from_numpy, normalise_bools, numpy_view, params_from_dict, run_error};
use numpy::PyUntypedArray;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use udf_host::array::NdArray;
use udf_host::dtype::DType;
use udf_host::exec::{FailurePoint, Limits, RunError, UdfLoader};
use udf_host::loader::{Loader, runtime_options};
use udf_host::udf::{
    BufferViewMut, CallError, DTypePreference, DatasetMeta, DeviceClass, InitContext, MergeContext, Method,
    NamedBuffer, ParamType, Params, PartitionMeta, PartitionRunner, ResultsContext, SigSlice, Tile, TileDepth,
    TileSize, TilingScheme, Udf, UdfOrigin,
};
use udf_host::wasm::WasmRuntime;

/// The process's plugin loader: the default limits (300 s per call, 4 GiB per instance),
/// the default compile cache (`$UDF_HOST_CACHE_DIR`, ...), warnings of plugins on stderr.
fn loader() -> PyResult<&'static Loader> {
    static LOADER: OnceLock<Loader> = OnceLock::new();
    if let Some(loader) = LOADER.get() {
        return Ok(loader);
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut options = runtime_options(&Limits::default(), ((threads + 2) * 8) as u32);
    options.logger = udf_host::log::stderr(udf_host::log::LogLevel::Warn);
    let runtime = WasmRuntime::new(options).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(LOADER.get_or_init(|| Loader::new(runtime)))
}

/// Dataset meta as the Python layer sends it (from LiberTEM's `UDFMeta`).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct DatasetArg {
    nav_shape: Vec<usize>,
    sig_shape: Vec<usize>,
    /// NumPy dtype names.
    dataset_dtype: String,
    input_dtype: String,
    roi_count: Option<usize>,
    threads_per_worker: u32,
}

impl DatasetArg {
    fn meta(self) -> PyResult<DatasetMeta> {
        let dtype = |name: &str, what: &str| {
            DType::parse(name).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "the {what} {name} is not one the plugin contract has (bool, (u)int8..64, float32/64, complex64/128)"
                ))
            })
        };
        Ok(DatasetMeta {
            dataset_dtype: dtype(&self.dataset_dtype, "dataset dtype")?,
            input_dtype: dtype(&self.input_dtype, "input dtype")?,
            nav_shape: self.nav_shape,
            sig_shape: self.sig_shape,
            roi_count: self.roi_count,
            device_class: DeviceClass::Cpu,
            threads_per_worker: self.threads_per_worker.max(1),
        })
    }
}

/// Partition meta as the Python layer sends it: `slices` are the tiling scheme's
/// `(origin, shape)` pairs (empty on the main side, where LiberTEM does not tell the UDF).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct PartitionArg {
    index: usize,
    origin: u64,
    frames: usize,
    method: String,
    slices: Vec<(Vec<usize>, Vec<usize>)>,
    depth: usize,
}

impl PartitionArg {
    fn meta(self) -> PyResult<PartitionMeta> {
        let method = parse_method(&self.method)?;
        let slices = self.slices.into_iter().map(|(origin, shape)| SigSlice { origin, shape }).collect();
        let tiling = TilingScheme { depth: self.depth, slices, intent: method };
        Ok(PartitionMeta {
            index: self.index,
            origin: self.origin,
            frames: self.frames,
            method,
            tiling: Arc::new(tiling),
        })
    }
}

fn parse_method(name: &str) -> PyResult<Method> {
    [Method::Tile, Method::Frame, Method::Partition]
        .into_iter()
        .find(|m| m.name() == name)
        .ok_or_else(|| PyValueError::new_err(format!("'{name}' is not a processing method (tile, frame, partition)")))
}

/// A bool array (C-contiguous) as a list of bools.
fn bools(array: &Bound<'_, PyUntypedArray>, what: &str) -> PyResult<Vec<bool>> {
    ndarray_from_numpy(array)?.to_bools().ok_or_else(|| PyValueError::new_err(format!("{what} must be a bool array")))
}

/// Each `name -> array` of a dict as a named buffer (a copy).
fn named_buffers(dict: &Bound<'_, PyDict>) -> PyResult<Vec<NamedBuffer>> {
    dict.iter()
        .map(|(name, array)| {
            let name: String = name.extract()?;
            let array = ndarray_from_numpy(array.cast::<PyUntypedArray>()?)
                .map_err(|e| PyValueError::new_err(format!("buffer '{name}': {}", e.value(dict.py()))))?;
            Ok(NamedBuffer { name, array })
        })
        .collect()
}

/// An array a plugin returned, handed to Python without a copy: the NumPy array is a
/// view of this object's memory.
#[pyclass(module = "udf_host._native", frozen)]
struct ReturnedArray {
    array: NdArray,
}

fn to_numpy(py: Python<'_>, mut array: NdArray) -> PyResult<Bound<'_, PyAny>> {
    normalise_bools(&mut array);
    let owner = Bound::new(py, ReturnedArray { array })?;
    numpy_view(&owner.get().array, owner.clone().into_any())
}

/// A dict of buffer name -> NumPy array.
fn buffers_to_dict(py: Python<'_>, buffers: Vec<NamedBuffer>) -> PyResult<Bound<'_, PyDict>> {
    let dict = PyDict::new(py);
    for buffer in buffers {
        dict.set_item(buffer.name, to_numpy(py, buffer.array)?)?;
    }
    Ok(dict)
}

/// Where a plugin call failed, for `UDFError`.
struct CallSite<'a> {
    udf: &'a str,
    source: &'a str,
    at: FailurePoint,
}

impl CallSite<'_> {
    fn error(self, py: Python<'_>, error: CallError) -> PyErr {
        run_error(
            py,
            RunError::Udf { udf: self.udf.to_owned(), source_path: self.source.to_owned(), at: self.at, error },
        )
    }
}

/// A buffer declaration for Python: `(name, kind, dtype, extra_shape, use)`.
type DeclTuple = (String, &'static str, &'static str, Vec<usize>, &'static str);

/// A loaded wasm plugin, for `udf_host.libertem.WasmUDF`.
#[pyclass(module = "udf_host._native", frozen)]
pub struct Plugin {
    udf: Arc<dyn Udf>,
    name: String,
}

impl Plugin {
    fn site(&self, method: &'static str) -> CallSite<'_> {
        CallSite { udf: &self.name, source: self.udf.source(), at: FailurePoint::main(method) }
    }

    /// Python parameters checked against the description, with defaults filled in.
    fn resolve(&self, params: &Bound<'_, PyDict>) -> PyResult<Params> {
        let given = params_from_dict(params)?;
        udf_host::params::resolve(&self.name, &self.udf.description().params, &given).map_err(PyValueError::new_err)
    }
}

#[pymethods]
impl Plugin {
    /// Load the plugin `wasm` (its file `path`, for messages), whose SHA-256 the caller
    /// computed: a second `Plugin` with the same hash in this process reuses the
    /// compiled plugin.
    #[new]
    fn new(py: Python<'_>, path: PathBuf, wasm: Vec<u8>, sha256: &str) -> PyResult<Self> {
        let loader = loader()?;
        let found = loader.add_bytes(wasm);
        if found != sha256 {
            return Err(PyValueError::new_err(format!(
                "{}: the plugin's bytes have SHA-256 {found}, but {sha256} was expected",
                path.display()
            )));
        }
        let origin = UdfOrigin::Wasm { path, sha256: found };
        let udf = py.detach(|| loader.load(&origin)).map_err(PyValueError::new_err)?;
        Ok(Plugin { name: udf.description().name.clone(), udf })
    }

    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    #[getter]
    fn source(&self) -> &str {
        self.udf.source()
    }

    /// The description: `name`, `version`, `methods`, `input_dtype` (`"native"` or a
    /// NumPy name), `custom_merge`, `custom_results`, `main_preprocess`, and `params`
    /// (a list of dicts with `name`, `type`, `nav_aux`).
    fn describe<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = self.udf.description();
        let out = PyDict::new(py);
        out.set_item("name", &d.name)?;
        out.set_item("version", &d.version)?;
        out.set_item("methods", d.methods.iter().map(|m| m.name()).collect::<Vec<_>>())?;
        out.set_item("input_dtype", preference_name(d.input_dtype))?;
        out.set_item("custom_merge", d.custom_merge)?;
        out.set_item("custom_results", d.custom_results)?;
        out.set_item("main_preprocess", d.main_preprocess)?;
        let params = PyList::empty(py);
        for p in &d.params {
            let spec = PyDict::new(py);
            spec.set_item("name", &p.name)?;
            spec.set_item("type", p.ty.name())?;
            spec.set_item("nav_aux", p.nav_aux && p.ty == ParamType::Array)?;
            params.append(spec)?;
        }
        out.set_item("params", params)?;
        Ok(out)
    }

    /// The plugin's choices for a run: `method`, `input_dtype` (`"native"` or a NumPy
    /// name), `depth` (`"default"`, `"max"` or frames) and `total_size` (`"best-fit"`,
    /// `"max"` or bytes).
    fn plan<'py>(
        &self,
        py: Python<'py>,
        params: &Bound<'py, PyDict>,
        dataset: DatasetArg,
    ) -> PyResult<Bound<'py, PyDict>> {
        let params = self.resolve(params)?;
        let meta = dataset.meta()?;
        let plan = py.detach(|| self.udf.plan(&params, &meta)).map_err(|e| self.site("plan").error(py, e))?;
        if !self.udf.description().methods.contains(&plan.method) {
            return Err(PyValueError::new_err(format!(
                "'{}' chose the {} method, but does not implement it",
                self.name,
                plan.method.name()
            )));
        }
        let out = PyDict::new(py);
        out.set_item("method", plan.method.name())?;
        out.set_item("input_dtype", preference_name(plan.input_dtype))?;
        match plan.tiling.depth {
            TileDepth::Default => out.set_item("depth", "default")?,
            TileDepth::Max => out.set_item("depth", "max")?,
            TileDepth::Frames(n) => out.set_item("depth", n)?,
        }
        match plan.tiling.total_size {
            TileSize::BestFit => out.set_item("total_size", "best-fit")?,
            TileSize::Max => out.set_item("total_size", "max")?,
            TileSize::Bytes(n) => out.set_item("total_size", n)?,
        }
        Ok(out)
    }

    /// The result buffers for a run: `(name, kind, dtype, extra_shape, use)` with kind
    /// `nav`/`sig`/`single`, a NumPy dtype name and use `normal`/`private`/`result-only`.
    fn result_buffers(
        &self,
        py: Python<'_>,
        params: &Bound<'_, PyDict>,
        dataset: DatasetArg,
    ) -> PyResult<Vec<DeclTuple>> {
        let params = self.resolve(params)?;
        let meta = dataset.meta()?;
        let decls = py
            .detach(|| self.udf.result_buffers(&params, &meta))
            .map_err(|e| self.site("result_buffers").error(py, e))?;
        Ok(decls.into_iter().map(|d| (d.name, d.kind.name(), d.dtype.name(), d.extra_shape, d.usage.name())).collect())
    }

    /// Start an instance: `init` with the params, dataset meta and partition meta
    /// (`None`: the main side's instance for `main_preprocess`, buffers dataset-sized).
    #[pyo3(signature = (params, dataset, partition=None))]
    fn start(
        &self,
        py: Python<'_>,
        params: &Bound<'_, PyDict>,
        dataset: DatasetArg,
        partition: Option<PartitionArg>,
    ) -> PyResult<Instance> {
        let params = self.resolve(params)?;
        let dataset = dataset.meta()?;
        let partition = partition.map(PartitionArg::meta).transpose()?;
        let index = partition.as_ref().map(|p| p.index);
        let started = py.detach(|| {
            Running::try_new(self.udf.clone(), |udf| {
                udf.start(InitContext { params: &params, dataset: &dataset, partition: partition.as_ref() })
            })
        });
        let site = CallSite { udf: &self.name, source: self.udf.source(), at: at("init", index, None) };
        let running = started.map_err(|e| site.error(py, e))?;
        Ok(Instance {
            running: Mutex::new(Some(running)),
            udf: self.name.clone(),
            source: self.udf.source().to_owned(),
            partition: index,
        })
    }

    /// Merge a partition's buffers `src` into `dest` (nav buffers: the partition's rows;
    /// others whole) with the plugin's custom merge; returns the new `dest` arrays.
    fn merge<'py>(
        &self,
        params: &Bound<'py, PyDict>,
        dataset: DatasetArg,
        partition: PartitionArg,
        valid_nav_mask: &Bound<'py, PyUntypedArray>,
        dest: &Bound<'py, PyDict>,
        src: &Bound<'py, PyDict>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let py = params.py();
        let params = self.resolve(params)?;
        let dataset = dataset.meta()?;
        let partition = partition.meta()?;
        let valid = bools(valid_nav_mask, "valid_nav_mask")?;
        let mut dest = named_buffers(dest)?;
        let src = named_buffers(src)?;
        let merged = py.detach(|| {
            let mut views: Vec<BufferViewMut<'_>> = dest
                .iter_mut()
                .map(|NamedBuffer { name, array }| {
                    let (dtype, shape) = (array.dtype(), array.shape().to_vec());
                    BufferViewMut { name, dtype, shape, bytes: array.bytes_mut() }
                })
                .collect();
            let ctx =
                MergeContext { params: &params, dataset: &dataset, partition: &partition, valid_nav_mask: &valid };
            self.udf.merge(ctx, &mut views, &src)
        });
        let site =
            CallSite { udf: &self.name, source: self.udf.source(), at: at("merge", Some(partition.index), None) };
        merged.map_err(|e| site.error(py, e))?;
        buffers_to_dict(py, dest)
    }

    /// Final results from the merged `buffers` (nav buffers flat and ROI-compressed):
    /// a list of `(name, array, valid)`, `valid` a list of bools or `None`.
    fn get_results<'py>(
        &self,
        py: Python<'py>,
        params: &Bound<'py, PyDict>,
        dataset: DatasetArg,
        valid_nav_mask: &Bound<'py, PyUntypedArray>,
        roi: Option<&Bound<'py, PyUntypedArray>>,
        buffers: &Bound<'py, PyDict>,
    ) -> PyResult<Bound<'py, PyList>> {
        let params = self.resolve(params)?;
        let dataset = dataset.meta()?;
        let valid = bools(valid_nav_mask, "valid_nav_mask")?;
        let roi = roi.map(|r| bools(r, "roi")).transpose()?;
        let buffers = named_buffers(buffers)?;
        let entries = py
            .detach(|| {
                let ctx =
                    ResultsContext { params: &params, dataset: &dataset, valid_nav_mask: &valid, roi: roi.as_deref() };
                self.udf.get_results(ctx, &buffers)
            })
            .map_err(|e| self.site("get_results").error(py, e))?;
        let out = PyList::empty(py);
        for entry in entries {
            let array = to_numpy(py, entry.array)?;
            out.append(PyTuple::new(
                py,
                [entry.name.into_pyobject(py)?.into_any(), array, entry.valid.into_pyobject(py)?],
            )?)?;
        }
        Ok(out)
    }
}

fn preference_name(preference: DTypePreference) -> &'static str {
    match preference {
        DTypePreference::Native => "native",
        DTypePreference::Prefer(dtype) => dtype.name(),
    }
}

fn at(method: &'static str, partition: Option<usize>, frames: Option<(u64, u64)>) -> FailurePoint {
    FailurePoint { method, partition, frames }
}

/// A partition's instance together with the plugin it runs (the runner borrows it).
type Runner<'a> = Box<dyn PartitionRunner + 'a>;

self_cell::self_cell!(
    struct Running {
        owner: Arc<dyn Udf>,
        #[not_covariant]
        dependent: Runner,
    }
);

/// One partition's instance of a plugin: `preprocess`, `process` for every tile,
/// `postprocess`, `export`. Closed after `export` or `close`.
#[pyclass(module = "udf_host._native", frozen)]
pub struct Instance {
    running: Mutex<Option<Running>>,
    udf: String,
    source: String,
    partition: Option<usize>,
}

impl Instance {
    /// Call into the runner without the GIL; a failure names `method` and the `frames`.
    fn call<R: Send>(
        &self,
        py: Python<'_>,
        method: &'static str,
        frames: Option<(u64, u64)>,
        f: impl FnOnce(&mut dyn PartitionRunner) -> Result<R, CallError> + Send,
    ) -> PyResult<R> {
        let outcome = py.detach(|| {
            let mut guard = self.running.lock().map_err(|_| None)?;
            let running = guard.as_mut().ok_or(None)?;
            running.with_dependent_mut(|_, runner| f(runner.as_mut())).map_err(Some)
        });
        outcome.map_err(|e| match e {
            Some(error) => CallSite { udf: &self.udf, source: &self.source, at: at(method, self.partition, frames) }
                .error(py, error),
            None => PyValueError::new_err(format!("the instance of '{}' is closed (exported or failed)", self.udf)),
        })
    }
}

#[pymethods]
impl Instance {
    fn preprocess(&self, py: Python<'_>) -> PyResult<()> {
        self.call(py, "preprocess", None, |r| r.preprocess())
    }

    /// Process a tile: `tile` holds `len(true_nav_indices)` frames of the signal slice
    /// `sig_origin`/`sig_shape` (C-contiguous, the input dtype); `origin` is the
    /// compressed flat nav index of its first frame, `true_nav_indices` the true flat nav
    /// index of every frame, `scheme_index` the slice's index in the tiling scheme.
    fn process(
        &self,
        tile: &Bound<'_, PyUntypedArray>,
        origin: u64,
        sig_origin: Vec<usize>,
        sig_shape: Vec<usize>,
        true_nav_indices: Vec<u64>,
        scheme_index: usize,
    ) -> PyResult<()> {
        let py = tile.py();
        let data = ndarray_from_numpy(tile)?;
        let sig = SigSlice { origin: sig_origin, shape: sig_shape };
        let frames = true_nav_indices.len();
        if data.len() != frames * sig.len() {
            return Err(PyValueError::new_err(format!(
                "a tile of {frames} frames of the signal slice {:?} has {} elements, not {} (shape {:?})",
                sig.shape,
                frames * sig.len(),
                data.len(),
                data.shape()
            )));
        }
        let first_last = true_nav_indices.first().copied().zip(true_nav_indices.last().copied());
        self.call(py, "process", first_last, |runner| {
            let tile = Tile {
                origin,
                frames,
                scheme_index,
                sig: &sig,
                true_nav_indices: &true_nav_indices,
                dtype: data.dtype(),
                data: data.bytes(),
            };
            runner.process(&tile)
        })
    }

    fn postprocess(&self, py: Python<'_>) -> PyResult<()> {
        self.call(py, "postprocess", None, |r| r.postprocess())
    }

    /// The instance's buffers (dict of name -> NumPy array); closes the instance.
    fn export<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let buffers = self.call(py, "export", None, |r| r.export());
        self.close(py);
        buffers_to_dict(py, buffers?)
    }

    /// Drop the instance (and its memory).
    fn close(&self, py: Python<'_>) {
        let taken = self.running.lock().ok().and_then(|mut guard| guard.take());
        py.detach(move || drop(taken));
    }
}
