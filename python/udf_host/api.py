"""The `Context`: open datasets and run UDFs over them, as with `libertem.api.Context`."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Iterator, Sequence

import numpy as np

from . import _native
from .buffers import Buffer
from .udf import BuiltinUDF, WasmUDF
from .udf_class import UDF

__all__ = ["Context", "DataSet", "UDFResults", "ResultIterator"]

# How long one wait for the next merged partition lasts: Ctrl-C is noticed between waits.
_POLL_SECONDS = 0.05


def _parse_size(size: int | str) -> int:
    if isinstance(size, int):
        return size
    text = size.strip().upper().removesuffix("B").removesuffix("I")
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(float(text))


class DataSet:
    """An opened dataset (`Context.load`). Pickles as how to open it again (the file and
    options — the path must be readable where it is unpickled — or, for in-memory data,
    the frames themselves)."""

    def __init__(self, native):
        self._native = native

    @property
    def nav_shape(self) -> tuple:
        return self._native.nav_shape

    @property
    def sig_shape(self) -> tuple:
        return self._native.sig_shape

    @property
    def shape(self) -> tuple:
        return self.nav_shape + self.sig_shape

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self._native.dtype)

    @property
    def format(self) -> str:
        return self._native.format

    @property
    def path(self) -> str:
        return self._native.path

    def info(self, threads: int | None = None) -> str:
        """What `udf-host info` prints: format, shapes, dtype, details, default partitions
        and tile shape."""
        return self._native.info(threads)[0]

    def info_dict(self, threads: int | None = None) -> dict:
        """`info()` as a dict (what `udf-host info --json` prints)."""
        return json.loads(self._native.info(threads)[1])

    def __repr__(self) -> str:
        return f"<DataSet {self.format} {self.path!r} nav={self.nav_shape} sig={self.sig_shape} dtype={self.dtype}>"


def _open_options(options: dict[str, Any]) -> str:
    """The keyword options of `Context.load` as the JSON the native side reads."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key == "ds_path":  # LiberTEM's name for the HDF5 dataset
            key = "dataset_path"
        if value is None:
            continue
        if key == "dtype":
            value = np.dtype(value).str
        elif key in ("nav_shape", "sig_shape", "sig_axes"):
            value = [int(v) for v in value]
        elif key in ("offset", "sync_offset"):
            value = int(value)
        elif key in ("dark", "gain", "dataset_path"):
            value = os.fspath(value)
        elif key == "excluded_pixels":
            if isinstance(value, (str, os.PathLike)):
                value = {"mask": os.fspath(value)}
            else:
                value = {"coordinates": [[int(c) for c in coords] for coords in value]}
        out[key] = value
    return json.dumps(out)


def _native_array(data: Any) -> np.ndarray:
    array = np.ascontiguousarray(data)
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("="))
    return array


class UDFResults:
    """The results of a run so far (what `run_udf_iter` yields): `buffers` as `run_udf`
    returns them (a dict of name -> Buffer, or a list of such dicts for a list of UDFs)
    and `damage`, the merged scan positions (bool, nav-shaped)."""

    def __init__(self, buffers, damage: np.ndarray):
        self.buffers = buffers
        self.damage = damage

    def __repr__(self) -> str:
        return f"<UDFResults {self.damage.sum()} of {self.damage.size} positions merged>"


class _ProgressBar:
    """`progress=True`: tqdm's bar when tqdm is installed, else a line on stderr."""

    def __init__(self, handle, enabled: bool):
        self.handle = handle
        self.bar = None
        self.enabled = enabled
        if not enabled:
            return
        try:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=handle.frames_total, unit="frames")
        except ImportError:
            self.bar = None

    def update(self) -> None:
        if not self.enabled:
            return
        done, total = self.handle.frames_done, self.handle.frames_total
        if self.bar is not None:
            self.bar.update(done - self.bar.n)
        else:
            width = 40
            filled = width * done // max(total, 1)
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} frames")
            sys.stderr.flush()

    def close(self) -> None:
        if not self.enabled:
            return
        self.update()
        if self.bar is not None:
            self.bar.close()
        else:
            sys.stderr.write("\n")


def _udf_results(source, single: bool) -> UDFResults:
    """The results merged so far by `source` (a native run handle or merger: `results()`
    per UDF, `damage()` as (nav shape, flat mask)); one UDF's dict when `single`."""
    per_udf = [{name: Buffer(b) for name, b in udf.items()} for udf in source.results()]
    nav, damage = source.damage()
    return UDFResults(per_udf[0] if single else per_udf, np.array(damage, dtype=bool).reshape(nav))


def _specs(udfs: list, roi=None) -> list:
    """What the native engine takes for each UDF, refusing anything else. A `udf_host.UDF`
    class also gets the ROI (for `self.meta.roi`)."""
    for udf in udfs:
        if not isinstance(udf, (WasmUDF, BuiltinUDF, UDF)):
            raise TypeError(
                f"expected a udf_host.UDF subclass, udf_host.WasmUDF or udf_host.BuiltinUDF, got {type(udf).__name__}"
            )
    roi = _roi_array(roi)
    return [udf._spec(roi) if isinstance(udf, UDF) else udf._spec() for udf in udfs]


def _roi_array(roi) -> np.ndarray | None:
    """A ROI as the native engine takes it: a C-contiguous boolean array (nonzero = in)."""
    if roi is None:
        return None
    array = np.ascontiguousarray(roi)
    return array if array.dtype == bool else array != 0


class _ResultIteratorBase:
    """What every `run_udf_iter` result iterator shares (in-process here, on Dask in
    `udf_host.dask`): iterate it for a `UDFResults` after each merged partition;
    `results()` gives the results merged so far, `update_parameters_experimental` changes
    parameters for the partitions that start afterwards, and `close()` (or leaving a
    `with` block, or dropping it) stops the run. A failure or Ctrl-C
    (KeyboardInterrupt) while waiting stops the run, then raises.

    A subclass says how its engine advances (`_advance`: True after a merge, False when
    the run is over), takes new parameters (`_update_params`) and stops (`_stop`);
    `source` is the native object with `results()` and `damage()`."""

    def __init__(self, source, progress_source, single: bool, progress: bool):
        self._source = source
        self._single = single
        self._progress = _ProgressBar(progress_source, progress)
        self._done = False

    def _advance(self) -> bool:
        raise NotImplementedError

    def _update_params(self, index: int, params: dict) -> None:
        raise NotImplementedError

    def _stop(self) -> None:
        raise NotImplementedError

    def __iter__(self) -> Iterator[UDFResults]:
        return self

    def __next__(self) -> UDFResults:
        if self._done:
            raise StopIteration
        try:
            merged = self._advance()
        except BaseException:
            self._finish()
            raise
        if not merged:
            self._finish()
            raise StopIteration
        return self.results()

    def results(self) -> UDFResults:
        """The results merged so far."""
        return _udf_results(self._source, self._single)

    def _drain(self) -> UDFResults:
        """Merge every partition, then take the results once: what `run_udf` needs (the
        iteration takes them after every partition, which for a UDF class is a call into
        its sandbox each time, serialised with the merges)."""
        try:
            while self._advance():
                pass
            return self.results()
        finally:
            self._finish()

    def update_parameters_experimental(self, parameters: dict | Sequence[dict]) -> None:
        """New parameters for partitions started from now on: a dict (one UDF) or a list
        of dicts, one per UDF (LiberTEM's `update_parameters_experimental`)."""
        from .udf import _params

        if isinstance(parameters, dict):
            parameters = [parameters]
        for index, params in enumerate(parameters):
            if params:
                self._update_params(index, _params(params))

    def close(self) -> None:
        if not self._done:
            self._finish()

    def _finish(self) -> None:
        self._done = True
        self._progress.close()
        self._stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - half-made, or the interpreter is shutting down
            pass


class ResultIterator(_ResultIteratorBase):
    """What `Context.run_udf_iter` returns for a run in this process (see
    `_ResultIteratorBase` for what it offers): partitions run on this process's threads
    and are merged as they finish."""

    def __init__(self, handle, single: bool, progress: bool):
        self._handle = handle
        super().__init__(handle, handle, single, progress)

    def _advance(self) -> bool:
        while True:
            step = self._handle.next(_POLL_SECONDS)
            self._progress.update()
            if step is not None:  # None: nothing merged yet; Python sees Ctrl-C in between
                return step

    def _update_params(self, index: int, params: dict) -> None:
        self._handle.update_params(index, params)

    def _stop(self) -> None:
        self._handle.close()


class LiveDataSet:
    """A detector to run UDFs on while it scans (`Context.load("merlin-live", ...)`,
    `load("dectris-live", ...)`): nothing is connected until `run_udf` / `run_udf_iter`,
    which wait for the acquisition to start and yield results as frames arrive
    (docs/live.md)."""

    def __init__(self, source: str, nav_shape: tuple, options: dict):
        self.source = source
        self.nav_shape = tuple(nav_shape)
        self._options = options

    def __repr__(self) -> str:
        return f"LiveDataSet({self.source!r}, nav_shape={self.nav_shape})"


_LIVE_FORMATS = {"merlin-live": ("merlin", 6342), "dectris-live": ("dectris", 31001)}
_LIVE_OPTIONS = {"api", "merlin_settings", "soft_trigger", "partition_frames", "max_buffer", "stall_timeout", "start_timeout"}


def _load_live(filetype: str, host: str, port: int | None, nav_shape, options: dict) -> LiveDataSet:
    scheme, default_port = _LIVE_FORMATS[filetype]
    if nav_shape is None:
        raise ValueError(f'load("{filetype}", ...) needs nav_shape=(rows, columns): the detector sends frames, not a shape')
    unknown = set(options) - _LIVE_OPTIONS
    if unknown:
        raise ValueError(f"unknown option(s) for {filetype}: {', '.join(sorted(unknown))} (known: {', '.join(sorted(_LIVE_OPTIONS))})")
    if "max_buffer" in options:
        options["max_buffer"] = _parse_size(options["max_buffer"])
    if (options.get("merlin_settings") or options.get("soft_trigger")) and (scheme != "merlin" or not options.get("api")):
        raise ValueError("merlin_settings= and soft_trigger= are for merlin-live with the control port (api=\"HOST:6341\")")
    if "merlin_settings" in options:
        settings = options["merlin_settings"]
        if not isinstance(settings, dict):
            raise ValueError(f"merlin_settings must be a dict of NAME: value, got {type(settings).__name__}")
        options["merlin_settings"] = [f"{name}={value}" for name, value in settings.items()]
    return LiveDataSet(f"{scheme}://{host}:{port or default_port}", tuple(int(n) for n in nav_shape), options)


class Context:
    """Runs UDFs — wasm plugins (`WasmUDF`) and native built-ins (`BuiltinUDF`) — over
    datasets, like `libertem.api.Context`:

    >>> ctx = udf_host.Context()
    >>> ds = ctx.load("auto", path="scan.mib")
    >>> res = ctx.run_udf(dataset=ds, udf=udf_host.BuiltinUDF("sum"))
    >>> res["intensity"].data

    `threads`: worker threads (default: every core). `executor`: where partitions run
    (default: this process; `udf_host.DaskExecutor(client)` for a Dask cluster).
    `timeout` (seconds per call into a plugin), `max_memory` (per plugin instance, e.g.
    "512M"), `max_memory_total` (all instances together and what their calls return;
    default half the machine's memory) and `trusted` (no timeout checks) are the limits
    plugins run under; `max_result_memory` caps a run's results in host memory with the
    images `Buffer.preview()` draws of them, as `udf-host run --max-result-memory` (default
    half the machine's memory; a run over it is refused before it starts);
    `cache_dir` holds compiled plugins (default ~/.cache/udf-host). `device`: where the
    built-ins with a CUDA kernel compute, as `udf-host run --device`: "cpu" (default),
    "cuda" (a `ValueError` when run without a usable GPU or a package built without CUDA)
    or "auto" (the GPU when there is one); docs/gpu.md.
    """

    def __init__(
        self,
        threads: int | None = None,
        executor=None,
        *,
        timeout: float = 300.0,
        max_memory: int | str = "4G",
        max_memory_total: int | str | None = None,
        trusted: bool = False,
        cache_dir: str | os.PathLike | None = None,
        device: str = "cpu",
        max_result_memory: int | str | None = None,
    ):
        self.threads = threads
        self.executor = executor
        self._engine = _native.Engine(
            threads=threads,
            timeout=float(timeout),
            max_memory=_parse_size(max_memory),
            max_memory_total=None if max_memory_total is None else _parse_size(max_memory_total),
            trusted=trusted,
            cache_dir=None if cache_dir is None else os.fspath(cache_dir),
            device=device,
            max_result_memory=None if max_result_memory is None else _parse_size(max_result_memory),
        )

    def load(self, filetype: str, path: str | os.PathLike | None = None, *, data=None, sig_dims: int = 2, **options) -> DataSet:
        """Open a dataset. `filetype` is a format name (`mib`, `hdf5`, `raw`, `npy`, `empad`,
        `blo`, `seq`, `mrc`, `tvips`, `dm`, `k2is`, `raw_csr`, ...) or `"auto"` to detect it;
        options as on the command line: `dtype`, `nav_shape`, `sig_shape`, `offset`,
        `sync_offset`, `dataset_path` (or LiberTEM's `ds_path`), `sig_axes`, `dark`, `gain`
        (`.npy` paths) and `excluded_pixels` (a `.npy` path or a list of coordinates).

        `load("memory", data=array, sig_dims=2)` runs over an array: it is copied once, and
        the last `sig_dims` axes are the frame.

        `load("merlin-live", host=..., port=6342, nav_shape=(256, 256))` and
        `load("dectris-live", host=..., port=31001, nav_shape=..., api="http://HOST:80")`
        name a detector; `api` arms it before the scan (DECTRIS: the SIMPLON API; Merlin:
        the control port "HOST:6341", with `merlin_settings={"NAME": value}` sent as SET
        commands and `soft_trigger=True` for a detector waiting for a software trigger): `run_udf_iter` over it waits for the acquisition and yields as
        frames arrive (options `partition_frames`, `max_buffer`, `stall_timeout`,
        `start_timeout`; docs/live.md). A scan that ends early raises `DatasetError`
        after the last results; `results()` of the iterator keeps what came.

        Raises `DatasetError` when the data cannot be opened, `ValueError` for bad options.
        """
        if filetype in _LIVE_FORMATS:
            host = options.pop("host", "127.0.0.1")
            port = options.pop("port", None)
            return _load_live(filetype, host, port, options.pop("nav_shape", None), options)
        if filetype == "memory":
            if data is None:
                raise ValueError('load("memory", ...) needs data=array')
            if path is not None or options:
                raise ValueError('load("memory", ...) takes only data= and sig_dims=')
            return DataSet(self._engine.open_memory(_native_array(data), int(sig_dims)))
        if data is not None:
            raise ValueError(f"data= is for filetype 'memory', not {filetype!r}")
        if path is None:
            raise ValueError("give the dataset's path=")
        return DataSet(self._engine.open(filetype, os.fspath(path), _open_options(options)))

    def _start(self, dataset: DataSet, udfs: list, roi, partitions):
        return self._engine.start(dataset._native, _specs(udfs, roi), _roi_array(roi), partitions)

    def run_udf(
        self,
        dataset: DataSet,
        udf,
        roi=None,
        progress: bool = False,
        partitions: int | None = None,
        plots=None,
        sync: bool = True,
    ):
        """Run one UDF (or a list of UDFs, in one pass over the data) and return its results:
        a dict of buffer name -> `Buffer` (a list of such dicts for a list).

        `roi`: a boolean array of the nav shape (or flat) selecting scan positions.
        `partitions`: how many (default: ~512 MiB each, at least two per thread).
        `plots`: `True` draws every image-shaped result and redraws it as partitions merge
        (matplotlib; in a notebook, in place); a list of buffer names, or one list per UDF,
        draws those (LiberTEM's `plots=`; `udf_host.plots`).
        `sync=False`: return an awaitable instead (`await ctx.run_udf(..., sync=False)`);
        the event loop stays free while the run goes on.
        Raises `UDFError` when a UDF fails, `DatasetError` when the data cannot be read,
        `ValueError` for bad parameters or ROI; Ctrl-C stops the run (KeyboardInterrupt).
        """
        it = self.run_udf_iter(dataset, udf, roi=roi, progress=progress, partitions=partitions)
        live = _live_plots(plots, udf)
        if not sync:
            from .asynchronous import run_to_end

            return run_to_end(it, live)
        last = None
        with it:
            if live is None:
                last = it._drain()
            else:
                for last in it:
                    live.update(last)
            if last is None:  # nothing to merge (an empty ROI): the zero results
                last = it.results()
        if live is not None:
            live.finish(last)
        return last.buffers

    def run_udf_iter(
        self,
        dataset: DataSet,
        udf,
        roi=None,
        progress: bool = False,
        partitions: int | None = None,
        plots=None,
        sync: bool = True,
    ):
        """Like `run_udf`, yielding a `UDFResults` (`.buffers`, `.damage`) after each merged
        partition. Returns a `ResultIterator` (`update_parameters_experimental`, `close`);
        with `sync=False` an asynchronous iterator
        (`async for part in ctx.run_udf_iter(..., sync=False)`). `plots` as for `run_udf`."""
        single = not isinstance(udf, (list, tuple))
        udfs = [udf] if single else list(udf)
        if not udfs:
            raise ValueError("no UDF to run")
        if isinstance(dataset, LiveDataSet):
            handle = _native.start_live(
                self._engine, dataset.source, list(dataset.nav_shape), _specs(udfs, roi), _roi_array(roi), **dataset._options
            )
            return ResultIterator(handle, single, progress)
        if self.executor is not None:
            it = self.executor.run_udf_iter(self, dataset, udfs, single, roi, progress, partitions)
        else:
            it = ResultIterator(self._start(dataset, udfs, roi, partitions), single, progress)
        live = _live_plots(plots, udf)
        if not sync:
            from .asynchronous import AsyncResultIterator

            return AsyncResultIterator(it, live)
        if live is None:
            return it
        return _Plotted(it, live)


def _live_plots(plots, udf):
    """`plots=` as a `LivePlots`, or None."""
    if plots is None or plots is False:
        return None
    from .plots import LivePlots

    udfs = list(udf) if isinstance(udf, (list, tuple)) else [udf]
    names = [getattr(u, "name", None) or os.path.basename(str(getattr(u, "path", type(u).__name__))) for u in udfs]
    return LivePlots(plots, names)


class _Plotted:
    """A result iterator that redraws its plots after each merge."""

    def __init__(self, iterator, live):
        self._iterator = iterator
        self._live = live
        self._last = None

    def __iter__(self):
        return self

    def __next__(self):
        try:
            self._last = next(self._iterator)
        except StopIteration:
            if self._last is not None:
                self._live.finish(self._last)
            raise
        self._live.update(self._last)
        return self._last

    def __getattr__(self, name):
        return getattr(self._iterator, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._iterator.close()
