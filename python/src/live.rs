//! Live acquisition for Python: `Context.load("merlin-live", ...)` /
//! `load("dectris-live", ...)` and `run_udf_iter` over it. [`start_live`] waits for the
//! acquisition and returns a [`LiveHandle`], which `udf_host.ResultIterator` drives like a
//! file run's handle.

use crate::DatasetError;
use crate::convert::run_error;
use crate::engine::{Engine, results_to_python};
use numpy::PyUntypedArray;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::sync::Mutex;
use std::task::Poll;
use std::time::Duration;
use udf_host::live::{LiveError, LiveOptions, LiveRun, LiveSource, Stop};
use udf_host::roi::Roi;

fn live_error(py: Python<'_>, error: LiveError) -> PyErr {
    match error {
        LiveError::Run(e) => run_error(py, e),
        LiveError::Invalid(message) => PyValueError::new_err(message),
        other => DatasetError::new_err(other.to_string()),
    }
}

/// Connect to `source` (`merlin://HOST:PORT`, `dectris://HOST:PORT`), wait for the
/// acquisition and start running `udfs` over it (see `Engine.start`).
#[pyfunction]
#[pyo3(signature = (engine, source, nav_shape, udfs, roi=None, api=None, merlin_settings=Vec::new(), soft_trigger=false, partition_frames=None, max_buffer=None, stall_timeout=10.0, start_timeout=None))]
#[allow(clippy::too_many_arguments)]
pub fn start_live(
    py: Python<'_>,
    engine: &Engine,
    source: &str,
    nav_shape: Vec<usize>,
    udfs: &Bound<'_, PyList>,
    roi: Option<&Bound<'_, PyUntypedArray>>,
    api: Option<String>,
    merlin_settings: Vec<String>,
    soft_trigger: bool,
    partition_frames: Option<usize>,
    max_buffer: Option<u64>,
    stall_timeout: f64,
    start_timeout: Option<f64>,
) -> PyResult<LiveHandle> {
    let mut source: LiveSource = source.parse().map_err(|e: LiveError| PyValueError::new_err(e.to_string()))?;
    source
        .set_api(api.as_deref(), &merlin_settings, soft_trigger)
        .map_err(|e: LiveError| PyValueError::new_err(e.to_string()))?;
    let seconds = |name: &str, s: f64| {
        Duration::try_from_secs_f64(s)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| PyValueError::new_err(format!("{name} must be a positive number of seconds, got {s}")))
    };
    let mut options = LiveOptions::new(nav_shape.clone());
    engine.run_options(&mut options.run);
    options.partition_frames = partition_frames;
    if let Some(bytes) = max_buffer {
        options.max_buffer = bytes;
    }
    options.stall_timeout = seconds("stall_timeout", stall_timeout)?;
    options.start_timeout = start_timeout.map(|s| seconds("start_timeout", s)).transpose()?;
    options.run.roi = match roi {
        Some(array) => {
            let array = crate::convert::ndarray_from_numpy(array)?;
            Some(Roi::from_array(&array, &nav_shape).map_err(|e| PyValueError::new_err(format!("roi: {e}")))?)
        }
        None => None,
    };
    let specs = engine.udf_specs(udfs)?;
    let stop = Stop::default();
    let waiting = stop.clone();
    // Waiting for the acquisition without the GIL; Ctrl-C is checked every 100 ms.
    let run = py.detach(|| {
        std::thread::scope(|scope| {
            let started = scope.spawn(|| LiveRun::start(&source, specs, options, waiting));
            while !started.is_finished() {
                if Python::attach(|py| py.check_signals()).is_err() {
                    stop.stop();
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            started.join().unwrap_or_else(|_| Err(LiveError::Invalid("the live run's start panicked".into())))
        })
    });
    if stop.is_stopped() {
        return Err(pyo3::exceptions::PyKeyboardInterrupt::new_err("interrupted while waiting for the acquisition"));
    }
    let run = run.map_err(|e| live_error(py, e))?;
    Ok(LiveHandle { run: Mutex::new(run), stop, nav: nav_shape })
}

/// A live run: poll it with [`next`](Self::next), take results at any point (also after
/// it ended, early or not).
#[pyclass(module = "udf_host._native", frozen)]
pub struct LiveHandle {
    run: Mutex<LiveRun>,
    stop: Stop,
    nav: Vec<usize>,
}

impl LiveHandle {
    fn with_run<R>(&self, f: impl FnOnce(&mut LiveRun) -> PyResult<R>) -> PyResult<R> {
        let mut guard = self.run.lock().map_err(|_| PyValueError::new_err("live run lock poisoned"))?;
        f(&mut guard)
    }
}

#[pymethods]
impl LiveHandle {
    /// As `RunHandle.next`: `None` (nothing yet), `True` (a merge), `False` (over).
    /// Raises `DatasetError` when the scan ended early (the results keep what came).
    fn next(&self, py: Python<'_>, timeout: f64) -> PyResult<Option<bool>> {
        let timeout = Duration::try_from_secs_f64(timeout.max(0.0)).unwrap_or(Duration::from_millis(100));
        let polled = self.with_run(|run| Ok(py.detach(|| run.next_timeout(timeout))))?;
        match polled {
            Poll::Pending => Ok(None),
            Poll::Ready(None) => Ok(Some(false)),
            Poll::Ready(Some(Ok(_))) => Ok(Some(true)),
            Poll::Ready(Some(Err(e))) => Err(live_error(py, e)),
        }
    }

    /// The results merged so far: per UDF a dict of buffer name -> `Buffer`.
    fn results<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        // `get_results` may call into plugins: without the GIL (moving the `&mut` in makes
        // the closure Send without asking `LiveRun` to be Sync).
        let results = self.with_run(|run| py.detach(move || run.results()).map_err(|e| run_error(py, e)))?;
        results_to_python(py, results)
    }

    /// The merged positions, nav-shaped (false outside the ROI).
    fn damage(&self) -> PyResult<(Vec<usize>, Vec<bool>)> {
        Ok((self.nav.clone(), self.with_run(|run| Ok(run.nav_damage()))?))
    }

    /// What happened: frames received, bytes, buffer and back-pressure (a dict).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let stats = self.with_run(|run| Ok(run.stats()))?;
        let json = serde_json::to_string(&stats).map_err(|e| PyValueError::new_err(e.to_string()))?;
        py.import("json")?.call_method1("loads", (json,))
    }

    #[getter]
    fn frames_done(&self) -> u64 {
        self.with_run(|run| Ok(run.frames_received())).unwrap_or(0)
    }

    #[getter]
    fn frames_total(&self) -> u64 {
        self.nav.iter().product::<usize>() as u64
    }

    /// Stop reading from the detector; running partitions stop.
    fn interrupt(&self) {
        self.stop.stop();
    }

    fn update_params(&self, _index: usize, _params: &Bound<'_, PyDict>) -> PyResult<()> {
        Err(PyValueError::new_err("parameters cannot be changed during a live run"))
    }

    /// Stop the run (its results stay available).
    fn close(&self) {
        self.stop.stop();
        let _ = self.with_run(|run| {
            run.stop();
            Ok(())
        });
    }
}
