"""UDFs to run: wasm plugins (`WasmUDF`) and the native built-ins (`BuiltinUDF`).

Both are plain values (the plugin's bytes or the built-in's name, and the parameters), so
they pickle and can be sent to other processes; they are loaded where they run.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import numpy as np

from . import _native

__all__ = ["WasmUDF", "BuiltinUDF", "builtins"]


def builtins() -> list[str]:
    """The names of the native built-ins (`udf-host list` shows them with their parameters;
    `BuiltinUDF(name).describe()` shows one)."""
    return list(_native.builtin_names())


def _param(name: str, value: Any) -> Any:
    """A parameter value as the native side takes it: bool, int, float, str or a
    C-contiguous, native-endian NumPy array."""
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple, np.ndarray)):
        array = np.ascontiguousarray(value)
        if array.dtype.byteorder == ">":
            array = array.astype(array.dtype.newbyteorder("="))
        if array.dtype == object:
            raise TypeError(f"parameter {name!r}: cannot make a numeric array of {value!r}")
        return array
    raise TypeError(
        f"parameter {name!r} must be a bool, int, float, str or array (numpy array, list), "
        f"not {type(value).__name__}"
    )


def _params(params: dict[str, Any]) -> dict[str, Any]:
    return {name: _param(name, value) for name, value in params.items()}


class WasmUDF:
    """A UDF compiled to a WebAssembly component (a `.wasm` file built with one of the SDKs),
    with its parameters: `WasmUDF("sum.wasm")`, `WasmUDF(path, masks=array, radius=8)`.

    The plugin's bytes are read here, so the object is self-contained: it pickles and runs
    on machines that do not have the file.
    """

    def __init__(self, path_or_bytes: str | os.PathLike | bytes, **params: Any):
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            self.wasm = bytes(path_or_bytes)
            self.path = "<bytes>"
        else:
            self.path = os.fspath(path_or_bytes)
            with open(self.path, "rb") as f:
                self.wasm = f.read()
        self.sha256 = hashlib.sha256(self.wasm).hexdigest()
        self.params = dict(params)

    def describe(self) -> str:
        """What `udf-host inspect` prints: name, version, methods, preferences, parameters."""
        return _native.describe_wasm(self.path, self.wasm)

    def _spec(self) -> tuple:
        return ("wasm", self.path, self.wasm, _params(self.params), None, self.sha256)

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"WasmUDF({self.path!r}{', ' if params else ''}{params})"


class BuiltinUDF:
    """A native built-in (LiberTEM's built-in UDFs, run natively): `BuiltinUDF("sum")`,
    `BuiltinUDF("ring", ri=10, ro=40)`. `udf_host.builtins()` lists the names."""

    def __init__(self, name: str, **params: Any):
        if name not in _native.builtin_names():
            raise ValueError(
                f"there is no built-in {name!r}; built-ins are: {', '.join(_native.builtin_names())}"
            )
        self.name = name
        self.params = dict(params)

    def describe(self) -> str:
        """What `udf-host inspect builtin:NAME` prints."""
        return _native.describe_builtin(self.name)

    def _spec(self) -> tuple:
        return ("builtin", self.name, None, _params(self.params))

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"BuiltinUDF({self.name!r}{', ' if params else ''}{params})"
