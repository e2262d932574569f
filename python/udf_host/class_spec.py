"""How a `udf_host.UDF` instance reaches the engine: the runner component, the class as
data and the keyword arguments as the contract's parameters.

Nothing of the class runs here. Its source is captured (`udf_host.capture`), put in a JSON
document with the NumPy constants it names, and handed with the runner's bytes to the
engine, which loads the runner and gives it the document before any other call. The
keyword arguments travel as parameters: numbers, strings and bools as themselves, NumPy
arrays as arrays, `UDF.aux_data(...)` as per-frame aux arrays, and other plain data
(tuples, lists, dicts, None) as their Python literal.
"""

from __future__ import annotations

import ast
import base64
import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ._runner.build import RUNNER_FILE, RunnerBuildError, ensure_runner
from .capture import CaptureError, capture
from .udf_class import AuxData

__all__ = ["RUNNER_FILE", "RunnerBuildError", "runner_path", "runner_identity", "class_spec", "class_document"]

#: The hidden parameter with the ROI (_runner/app.py's ROI_PARAM).
ROI_PARAM = "udf_host_roi"


def runner_path() -> str:
    """Where udf-host's Python runner is: `$UDF_HOST_RUNNER`, else the user's cache, where
    the first use builds it from the sources the package carries (`_runner/build.py`;
    `RunnerBuildError` when it cannot)."""
    env = os.environ.get("UDF_HOST_RUNNER")
    if env:
        if not Path(env).is_file():
            raise FileNotFoundError(f"UDF_HOST_RUNNER is {env}, which is not a file (udf-host's Python runner, {RUNNER_FILE})")
        return env
    return str(ensure_runner())


@functools.lru_cache(maxsize=4)
def _runner_bytes(path: str, mtime: float) -> bytes:
    with open(path, "rb") as f:
        return f.read()


@functools.lru_cache(maxsize=4)
def _runner_sha256(path: str, mtime: float) -> str:
    return hashlib.sha256(_runner_bytes(path, mtime)).hexdigest()


def runner_identity() -> tuple[str, bytes, str]:
    """The runner's path, bytes and SHA-256 (read and hashed once per file version)."""
    path = runner_path()
    mtime = os.path.getmtime(path)
    return path, _runner_bytes(path, mtime), _runner_sha256(path, mtime)


def _array_json(array: np.ndarray) -> dict:
    array = np.ascontiguousarray(array)
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("="))
    return {"dtype": array.dtype.name, "shape": list(array.shape), "data": base64.b64encode(array.tobytes()).decode()}


def _kwarg(name: str, value: Any) -> tuple[str, Any]:
    """`(type, parameter value)` of one keyword argument."""
    if isinstance(value, AuxData):
        return "aux", np.ascontiguousarray(value.data)
    if isinstance(value, bool):
        return "bool", value
    if isinstance(value, int) and not isinstance(value, bool):
        return "int", value
    if isinstance(value, float):
        return "float", value
    if isinstance(value, str):
        return "text", value
    if isinstance(value, np.generic):
        return _kwarg(name, value.item())
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject or value.dtype.fields is not None:
            raise CaptureError(f"parameter {name!r} is an array of {value.dtype}; only numeric arrays travel")
        array = np.ascontiguousarray(value)
        if array.dtype.byteorder == ">":
            array = array.astype(array.dtype.newbyteorder("="))
        return "array", array
    try:
        text = repr(value)
        if ast.literal_eval(text) == value:
            return "literal", text
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    raise CaptureError(
        f"parameter {name!r} is a {type(value).__module__}.{type(value).__qualname__}; parameters travel to "
        "the sandbox as numbers, strings, bools, NumPy arrays, aux data or plain Python literals "
        "(tuples, lists, dicts, None)"
    )


def class_document(cls: type, kwargs_spec: dict | None = None) -> str:
    """The JSON document the runner's `load` takes for `cls` (_runner/app.py)."""
    captured = capture(cls)
    doc = {
        "class_name": captured.class_name,
        "file": captured.origin,
        "text": captured.text,
        "pieces": [list(p) for p in captured.pieces],
        "constants": {name: _array_json(a) for name, a in captured.arrays.items()},
        "kwargs": kwargs_spec or {},
    }
    return json.dumps(doc, sort_keys=True)


def class_spec(udf, roi=None) -> tuple:
    """`("class", runner path, runner bytes, params, document, runner SHA-256)` for the
    native engine (which takes the bytes only when it has not got them yet)."""
    spec, params = {}, {}
    for name, value in udf._kwargs.items():
        kind, param = _kwarg(name, value)
        spec[name] = {"type": kind}
        params[name] = param
    if roi is not None:
        params[ROI_PARAM] = np.ascontiguousarray(roi, dtype=bool).reshape(-1)
    document = class_document(type(udf), spec)
    path, wasm, sha256 = runner_identity()
    return ("class", path, wasm, params, document, sha256)
