"""Wasm plugins inside LiberTEM: `udf_host.libertem.WasmUDF(path, **params)` is a
`libertem.udf.UDF`, so a plugin runs in LiberTEM's own `Context` — its executors (inline,
Dask, ...), file formats, corrections, ROIs and `run_udf_iter`:

    from libertem.api import Context
    from udf_host.libertem import WasmUDF

    ctx = Context.make_with("inline")
    ds = ctx.load("auto", path="scan.mib")
    res = ctx.run_udf(dataset=ds, udf=WasmUDF("com.wasm", r=20.0))

LiberTEM drives the run; each lifecycle method forwards to the plugin:

| LiberTEM | plugin |
|---|---|
| `get_preferred_input_dtype`, `get_method`, `get_tiling_preferences` | `plan` |
| `get_result_buffers` | `result-buffers` → `self.buffer(kind, extra_shape, dtype, use)` |
| `get_task_data` (worker) | a fresh instance: `init` with the partition meta |
| `preprocess` | `preprocess` (main side: `init` + `preprocess` + export, with `main-preprocess`) |
| `process_tile` / `process_frame` / `process_partition` | `process` |
| `postprocess` | `postprocess`, then `export-buffers` into the partition's buffers |
| `merge` | the plugin's `merge` if it has one, else LiberTEM's nav copy |
| `get_results` | `get-results` (valid masks via `self.with_mask`), else the buffers |

LiberTEM is optional: importing `udf_host` does not import it, and importing this module
without it raises an ImportError that says how to install it. See docs/python.md.
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
from typing import Any

import numpy as np

try:
    from libertem.common.buffers import AuxBufferWrapper
    from libertem.udf.base import UDF, UDFMethod
except ImportError as e:  # pragma: no cover - exercised where LiberTEM is missing
    raise ImportError(
        "udf_host.libertem needs LiberTEM (0.16 or newer): pip install 'libertem>=0.16' "
        f"(or pip install 'udf-host[libertem]'); importing it failed: {e}"
    ) from e

from . import _native
from ._native import UDFError
from .udf import _params as _native_params

__all__ = ["WasmUDF", "ClassUDF"]

# LiberTEM re-creates a UDF from its keyword arguments (`cls(**kwargs)`) on every worker
# and for every partition: the plugin travels among them under these names.
_WASM = "_udf_host_wasm"
_SOURCE = "_udf_host_source"
_SHA256 = "_udf_host_sha256"
_CLASS = "_udf_host_class"  # a udf_host.UDF class's document (the plugin is then the runner)
_RESERVED = (_WASM, _SOURCE, _SHA256, _CLASS)

# The hidden parameter with the ROI that the runner gives a class as `self.meta.roi`
# (python/udf_host/_runner/app.py's ROI_PARAM).
_ROI_PARAM = "udf_host_roi"

# Loaded plugins of this process, by SHA-256: a worker loads (and compiles, or reads from
# the compile cache) each plugin once, however many partitions it runs.
_PLUGINS: dict[str, Any] = {}
_DESCRIPTIONS: dict[str, dict] = {}
_PLUGINS_LOCK = threading.Lock()

# The processing methods by the plugin contract's names.
_METHODS = {"tile": UDFMethod.TILE, "frame": UDFMethod.FRAME, "partition": UDFMethod.PARTITION}


def _runner_here(sha256: str) -> bytes:
    """This process's own runner, when it is the one with `sha256` (a `ClassUDF` travels
    with the runner's identity, not its 20 MB, unless made with `send_runner=True`)."""
    from .class_spec import RunnerBuildError, runner_identity

    try:
        path, wasm, found = runner_identity()
    except (FileNotFoundError, RunnerBuildError) as e:
        raise RuntimeError(f"ClassUDF: {e}; or make it with ClassUDF(udf, send_runner=True)") from None
    if found != sha256:
        raise RuntimeError(
            f"ClassUDF: the Python runner here ({path}) has SHA-256 {found}, but the UDF was made with {sha256}: "
            "use the same runner file here as where the UDF was made (a worker on the same machine shares its cache; "
            "on another machine set UDF_HOST_RUNNER to a copy of it: two builds of the runner differ), or make it "
            "with ClassUDF(udf, send_runner=True) to send the runner's bytes along"
        )
    return wasm


def _load(sha256: str, source: str, wasm: bytes | None, class_document: str | None = None):
    """The loaded plugin and its description (loaded on first use in this process); with
    `class_document`, the runner with that class (`wasm` None: this process's runner)."""
    key = sha256 if class_document is None else sha256 + ":" + hashlib.sha256(class_document.encode()).hexdigest()
    with _PLUGINS_LOCK:
        if key not in _PLUGINS:
            if wasm is None:
                wasm = _runner_here(sha256)
            plugin = _native.Plugin(source, wasm, sha256, class_document)
            _DESCRIPTIONS[key] = plugin.describe()
            _PLUGINS[key] = plugin
        return _PLUGINS[key], _DESCRIPTIONS[key]


class WasmUDF(UDF):
    """A wasm plugin as a LiberTEM UDF: `WasmUDF("com.wasm", cy=64.0, cx=64.0, r=20.0)`.

    `path_or_bytes` is the plugin's file or its bytes; `params` are the plugin's parameters
    (`udf-host inspect plugin.wasm` lists them) as Python values: bool, int, float, str or
    arrays. Array parameters the plugin declares per-frame (nav-aux) take an array whose
    leading axes are the nav shape (or the flat nav length); each partition sees its
    frames. The object carries the plugin's bytes, so it pickles and runs on Dask workers
    that do not have the file; each process loads the plugin once (by its SHA-256).
    """

    def __init__(self, path_or_bytes: str | os.PathLike | bytes | None = None, /, **params: Any):
        if _WASM in params:
            # Re-created by LiberTEM from the keyword arguments below.
            if path_or_bytes is not None:
                raise TypeError("WasmUDF: give either a plugin or LiberTEM's keyword arguments, not both")
            super().__init__(**params)
            return
        if path_or_bytes is None:
            raise TypeError("WasmUDF needs a plugin: WasmUDF('plugin.wasm', **params) or WasmUDF(wasm_bytes, ...)")
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            wasm, source = bytes(path_or_bytes), "<bytes>"
        else:
            source = os.fspath(path_or_bytes)
            with open(source, "rb") as f:
                wasm = f.read()
        class_document = params.pop(_CLASS, None)
        for name, value in params.items():
            if name.startswith("_udf_host_"):
                raise ValueError(f"WasmUDF: parameter names starting with '_udf_host_' are reserved ({name!r})")
            if isinstance(value, AuxBufferWrapper):
                raise TypeError(
                    f"WasmUDF: parameter {name!r}: pass the array itself, not UDF.aux_data(...); "
                    "the plugin declares which array parameters are per-frame, and WasmUDF slices them"
                )
        sha256 = hashlib.sha256(wasm).hexdigest()
        if class_document is not None:
            params[_CLASS] = class_document
        super().__init__(**{_WASM: wasm, _SOURCE: source, _SHA256: sha256}, **params)

    # --- the plugin and what it is given ------------------------------------------------

    def _loaded(self):
        kw = self._kwargs
        return _load(kw[_SHA256], kw[_SOURCE], kw[_WASM], kw.get(_CLASS))

    @property
    def _plugin(self):
        return self._loaded()[0]

    @property
    def _description(self) -> dict:
        return self._loaded()[1]

    def describe(self) -> str:
        """What `udf-host inspect` prints for the plugin."""
        wasm = self._kwargs[_WASM]
        return _native.describe_wasm(self._kwargs[_SOURCE], _runner_here(self._kwargs[_SHA256]) if wasm is None else wasm)

    def _user_params(self) -> dict[str, Any]:
        # `self.params`, not `self._kwargs`: `update_parameters_experimental` patches it.
        return {k: v for k, v in self.params.items() if k not in _RESERVED}

    def _params(self, rows: np.ndarray | None = None) -> dict[str, Any]:
        """The parameters as the native side takes them. Per-frame arrays are flattened to
        `(nav_len, *extra)`; with `rows` (true flat nav indices), cut to those frames."""
        params = self._user_params()
        nav = tuple(self.meta.dataset_shape.nav)
        nav_len = math.prod(nav)
        if _CLASS in self._kwargs and self.meta.roi is not None:
            params[_ROI_PARAM] = np.ascontiguousarray(self.meta.roi, dtype=bool).reshape(-1)
        for spec in self._description["params"]:
            name = spec["name"]
            if not spec["nav_aux"] or name not in params:
                continue
            array = np.asarray(params[name])
            if array.shape[: len(nav)] == nav:
                extra = array.shape[len(nav) :]
            elif array.ndim >= 1 and array.shape[0] == nav_len:
                extra = array.shape[1:]
            else:
                raise ValueError(
                    f"aux parameter {name!r} of '{self._description['name']}' has shape {array.shape}; "
                    f"its leading axes must be the nav shape {nav} (or {nav_len})"
                )
            array = array.reshape((nav_len, *extra))
            params[name] = array if rows is None else array[rows]
        return _native_params(params)

    def _dataset_meta(self) -> dict[str, Any]:
        meta = self.meta
        roi = meta.roi
        return {
            "nav_shape": tuple(meta.dataset_shape.nav),
            "sig_shape": tuple(meta.dataset_shape.sig),
            "dataset_dtype": np.dtype(meta.dataset_dtype).name,
            "input_dtype": np.dtype(meta.input_dtype).name,
            "roi_count": None if roi is None else int(np.count_nonzero(roi)),
            "threads_per_worker": meta.threads_per_worker or 1,
        }

    def _plan(self) -> dict:
        # Cached while the parameters and the meta are the same objects (LiberTEM asks
        # several times per run and replaces both when they change).
        cached = getattr(self, "_plan_cache", None)
        if cached is not None and cached[0] is self.params and cached[1] is self.meta:
            return cached[2]
        plan = self._plugin.plan(self._params(), self._dataset_meta())
        self._plan_cache = (self.params, self.meta, plan)
        return plan

    def _partition_meta(self, index: int, compressed: Any, method: str) -> dict[str, Any]:
        """`compressed`: the partition's slice, flat nav, ROI-compressed."""
        scheme = self.meta.tiling_scheme
        slices = [] if scheme is None else [(tuple(s.origin), tuple(s.shape)) for s in scheme]
        return {
            "index": index,
            "origin": compressed.origin[0],
            "frames": compressed.shape[0],
            "method": method,
            "slices": slices,
            "depth": 0 if scheme is None else scheme.depth,
        }

    # --- what LiberTEM asks the UDF -----------------------------------------------------

    def get_preferred_input_dtype(self):
        # LiberTEM asks before it tells the UDF about the dataset (self.meta is not set,
        # or is the previous run's), so the plugin's plan sees a provisional meta here;
        # a plan that cannot work without the dataset gets its description's default.
        provisional = {
            "nav_shape": (),
            "sig_shape": (),
            "dataset_dtype": "float32",
            "input_dtype": "float32",
            "roi_count": None,
            "threads_per_worker": 1,
        }
        try:
            preference = self._plugin.plan(_native_params(self._user_params()), provisional)["input_dtype"]
        except (UDFError, ValueError):
            preference = self._description["input_dtype"]
        return UDF.USE_NATIVE_DTYPE if preference == "native" else np.dtype(preference)

    def get_method(self) -> UDFMethod:
        return _METHODS[self._plan()["method"]]

    def get_tiling_preferences(self) -> dict:
        plan = self._plan()
        depth = {"default": UDF.TILE_DEPTH_DEFAULT, "max": UDF.TILE_DEPTH_MAX}.get(plan["depth"], plan["depth"])
        size = {"best-fit": UDF.TILE_SIZE_BEST_FIT, "max": UDF.TILE_SIZE_MAX}.get(
            plan["total_size"], plan["total_size"]
        )
        return {"depth": depth, "total_size": size}

    def get_result_buffers(self) -> dict:
        uses = {"normal": None, "private": "private", "result-only": "result_only"}
        return {
            name: self.buffer(kind=kind, extra_shape=tuple(extra), dtype=dtype, use=uses[use])
            for name, kind, dtype, extra, use in self._plugin.result_buffers(self._params(), self._dataset_meta())
        }

    # --- worker side: one plugin instance per partition --------------------------------

    @classmethod
    def new_for_partition(cls, kwargs, partition, roi):
        udf = super().new_for_partition(kwargs, partition, roi)
        # LiberTEM numbers partitions (`set_idx`) but tells the UDF only the slice.
        udf._partition_index = getattr(partition, "_idx", None) or 0
        return udf

    def get_task_data(self) -> dict:
        self._start()
        return {}

    def _start(self):
        """Start the partition's instance: `init` with the partition's meta and its frames'
        per-frame parameters."""
        meta = self.meta
        compressed = meta.slice  # the partition (LiberTEM sets it before get_task_data)
        nav = tuple(meta.dataset_shape.nav)
        self._true_nav = np.ravel_multi_index(tuple(meta.coordinates.T), nav).astype(np.uint64)
        self._partition_origin = compressed.origin[0]
        partition = self._partition_meta(getattr(self, "_partition_index", 0), compressed, self._plan()["method"])
        self._instance = self._plugin.start(self._params(rows=self._true_nav), self._dataset_meta(), partition)

    def preprocess(self):
        if self.meta.tiling_scheme is None:
            self._main_preprocess()
            return
        if getattr(self, "_instance", None) is None:
            self._start()
        self._instance.preprocess()

    def _main_preprocess(self):
        """LiberTEM calls `preprocess` on the main side too: there the plugin initialises
        the merged buffers if it asks for that (`main-preprocess`); otherwise they stay zero."""
        if not self._description["main_preprocess"]:
            return
        roi = self.meta.roi
        nav_len = math.prod(tuple(self.meta.dataset_shape.nav))
        rows = np.arange(nav_len) if roi is None else np.flatnonzero(roi.reshape(-1))
        instance = self._plugin.start(self._params(rows=rows), self._dataset_meta(), None)
        instance.preprocess()
        self._store(instance.export())

    def _process(self, data: np.ndarray):
        compressed = self.meta.slice
        origin = compressed.origin[0]
        frames = compressed.shape[0]
        start = origin - self._partition_origin
        self._instance.process(
            np.ascontiguousarray(data),
            origin,
            tuple(compressed.origin[1:]),
            tuple(compressed.shape.sig),
            self._true_nav[start : start + frames].tolist(),
            self.meta.tiling_scheme_idx,
        )

    def process_tile(self, tile):
        self._process(tile)

    def process_frame(self, frame):
        self._process(frame[np.newaxis])

    def process_partition(self, partition):
        self._process(partition)

    def postprocess(self):
        self._instance.postprocess()
        self._store(self._instance.export())

    def _store(self, exported: dict[str, np.ndarray]):
        """Copy a plugin's exported buffers into LiberTEM's (whole-partition or, on the
        main side, whole-dataset buffers: views are cleared here)."""
        for name, array in exported.items():
            target = getattr(self.results, name)
            if target.shape != array.shape:
                raise UDFError(
                    f"'{self._description['name']}' exported buffer '{name}' of shape {array.shape}, "
                    f"but LiberTEM allocated {target.shape}"
                )
            target[...] = array

    def cleanup(self):
        instance = getattr(self, "_instance", None)
        if instance is not None:
            instance.close()
            self._instance = None

    # --- main side: merge and results ---------------------------------------------------

    def set_views_for_partition(self, partition):
        # Before each merge LiberTEM points the views at the partition being merged; the
        # plugin's merge is told which partition that is.
        super().set_views_for_partition(partition)
        self._merging = partition

    def merge(self, dest, src):
        if not self._description["custom_merge"]:
            return super().merge(dest, src)
        partition = self._merging
        compressed = partition.slice.adjust_for_roi(self.meta.roi)
        pmeta = self._partition_meta(getattr(partition, "_idx", None) or 0, compressed, self._plan()["method"])
        merged = self._plugin.merge(
            self._params(),
            self._dataset_meta(),
            pmeta,
            np.ascontiguousarray(self.meta.get_valid_nav_mask(), dtype=bool),
            {k: np.ascontiguousarray(getattr(dest, k)) for k in dest},
            {k: np.ascontiguousarray(getattr(src, k)) for k in src},
        )
        for name, array in merged.items():
            setattr(dest, name, array)

    def get_results(self) -> dict:
        if not self._description["custom_results"]:
            return super().get_results()
        decls = self.get_result_buffers()
        buffers = {
            name: np.ascontiguousarray(getattr(self.results, name))
            for name, decl in decls.items()
            if decl.use != "result_only"
        }
        roi = self.meta.roi
        entries = self._plugin.get_results(
            self._params(),
            self._dataset_meta(),
            np.ascontiguousarray(self.meta.get_valid_nav_mask(), dtype=bool),
            None if roi is None else np.ascontiguousarray(roi.reshape(-1), dtype=bool),
            buffers,
        )
        results = {}
        for name, array, valid in entries:
            results[name] = array if valid is None else self.with_mask(array, self._mask(name, decls, array, valid))
        return results

    def _mask(self, name: str, decls: dict, array: np.ndarray, valid: list[bool]) -> np.ndarray:
        """A plugin's valid mask (one value, one per nav position, one per element) in the
        shape of `array`."""
        mask = np.asarray(valid, dtype=bool)
        if mask.size == 1:
            return np.broadcast_to(mask.reshape((1,) * array.ndim), array.shape)
        if mask.size == array.size:
            return mask.reshape(array.shape)
        if name in decls and decls[name].kind == "nav" and array.ndim >= 1 and mask.size == array.shape[0]:
            return np.broadcast_to(mask.reshape((-1,) + (1,) * (array.ndim - 1)), array.shape)
        raise UDFError(
            f"'{self._description['name']}' returned a valid mask of {mask.size} values for result '{name}' "
            f"of shape {array.shape} (one value, one per nav position or one per element expected)"
        )

    # --- pickling -----------------------------------------------------------------------

    def __getstate__(self):
        # Native handles stay in the process that made them; a pickled UDF carries the
        # plugin's bytes and parameters (its keyword arguments) and loads it where it runs.
        state = self.__dict__.copy()
        for name in ("_instance", "_plan_cache", "_merging"):
            state.pop(name, None)
        return state

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self._user_params().items())
        return f"WasmUDF({self._kwargs[_SOURCE]!r}{', ' if params else ''}{params})"


def ClassUDF(udf, *, send_runner: bool = False) -> WasmUDF:  # noqa: N802 - reads as a class, as WasmUDF
    """A `udf_host.UDF` instance as a LiberTEM UDF: `ctx.run_udf(dataset=ds,
    udf=ClassUDF(MyUDF(param=...)))` in LiberTEM's own `Context` runs the class sandboxed in
    udf-host's Python runner (the class travels as its source; the keyword arguments as
    the runner's parameters).

    LiberTEM pickles the UDF into every task: it carries the runner's SHA-256, and each
    worker uses its own installed runner when that matches (an error naming both hashes
    when not). `send_runner=True` sends the runner's bytes (20 MB) along instead, for
    workers with another udf-host or none."""
    from .udf_class import UDF as HostUDF

    if not isinstance(udf, HostUDF):
        raise TypeError(f"ClassUDF takes a udf_host.UDF instance (from udf_host import UDF), not {type(udf).__name__}")
    _, path, wasm, params, document, sha256 = udf._spec()
    if send_runner:
        return WasmUDF(path, **params, **{_CLASS: document})
    return WasmUDF(**{_WASM: None, _SOURCE: path, _SHA256: sha256, _CLASS: document}, **params)
