"""udf_host: run sandboxed WebAssembly UDFs and native built-ins over 4D-STEM datasets from
Python, with LiberTEM's API (`Context.load`, `run_udf`, `run_udf_iter`, buffers with
`.data`, `.raw_data`, `.valid_mask`).

    import udf_host
    ctx = udf_host.Context()
    ds = ctx.load("auto", path="scan.mib")
    results = ctx.run_udf(dataset=ds, udf=[udf_host.BuiltinUDF("sum"), udf_host.WasmUDF("com.wasm")])

See docs/python.md.
"""

from ._native import DatasetError, UDFError, __version__
from ._native import contract_version as _contract_version
from .api import Context, DataSet, LiveDataSet, ResultIterator, UDFResults
from .buffers import Buffer
from .udf import BuiltinUDF, WasmUDF, builtins
from .udf_class import UDF, UDFException, UDFRunCancelled

#: The plugin contract this host implements (`udf:plugin@x.y.z`).
CONTRACT = _contract_version()


def __getattr__(name: str):
    # DaskExecutor imports Dask's distributed, an optional dependency: only when asked for.
    if name == "DaskExecutor":
        from .dask import DaskExecutor

        return DaskExecutor
    raise AttributeError(f"module 'udf_host' has no attribute {name!r}")

__all__ = [
    "Buffer",
    "BuiltinUDF",
    "CONTRACT",
    "Context",
    "DaskExecutor",
    "DataSet",
    "DatasetError",
    "LiveDataSet",
    "ResultIterator",
    "UDF",
    "UDFError",
    "UDFException",
    "UDFRunCancelled",
    "UDFResults",
    "WasmUDF",
    "builtins",
    "__version__",
]
