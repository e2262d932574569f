"""LiberTEM UDF classes that cannot run as they are in udf-host's sandbox, and classes that
fail while running (issue 27).

What cannot travel to the sandbox — a closure over a live object, a module other than
NumPy and the standard library's pure-Python parts, a NumPy function udf-host's NumPy
does not have — is refused before any data is read, with an error naming it. A class
that raises is reported with the class, the method, the partition and frames, and the
Python traceback with the user's own file and line numbers; a class that loops forever
is stopped by `timeout=`.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import udf_host
from udf_host.capture import CaptureError

from conftest import module_from_file

_MODULES = 0


def _classes(tmp_path: Path, source: str):
    """`source` as a module in a file of its own (a class's source must be readable)."""
    global _MODULES
    _MODULES += 1
    name = f"class_errors_{_MODULES}"
    return module_from_file(tmp_path, name, source)


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.fixture(scope="module")
def ctx():
    return udf_host.Context(threads=2)


@pytest.fixture(scope="module")
def dataset(ctx):
    data = np.arange(4 * 5 * 6 * 7, dtype=np.float32).reshape((4, 5, 6, 7))
    return ctx.load("memory", data=data, sig_dims=2)


def test_a_closure_over_a_live_object_is_refused_naming_it(ctx, dataset, tmp_path):
    module, _ = _classes(
        tmp_path,
        """
        import threading
        from udf_host import UDF

        def make_scaler():
            lock = threading.Lock()
            def scale(x):
                with lock:
                    return x * 2
            return scale

        scale = make_scaler()

        class ScaledSumUDF(UDF):
            def get_result_buffers(self):
                return {"s": self.buffer(kind="nav")}

            def process_frame(self, frame):
                self.results.s[:] = scale(frame.sum())
        """,
    )
    with pytest.raises(CaptureError) as error:
        ctx.run_udf(dataset=dataset, udf=module.ScaledSumUDF())
    message = str(error.value)
    assert "scale is a closure over lock" in message


@pytest.mark.parametrize(
    "imports, use, named",
    [
        ("import threading", "threading.get_ident()", "'threading'"),
        ("from os.path import join", "join('a', 'b')", "'join'"),
    ],
)
def test_a_module_outside_numpy_and_the_pure_stdlib_is_refused_naming_it(ctx, dataset, tmp_path, imports, use, named):
    module, _ = _classes(
        tmp_path,
        f"""
        {imports}
        from udf_host import UDF

        class ImportingUDF(UDF):
            def get_result_buffers(self):
                return {{"s": self.buffer(kind="nav")}}

            def process_frame(self, frame):
                self.results.s[:] = len(str({use}))
        """,
    )
    with pytest.raises(CaptureError, match=named):
        ctx.run_udf(dataset=dataset, udf=module.ImportingUDF())


@pytest.mark.parametrize(
    "call, named",
    [
        ("np.einsum('ij->', frame)", "numpy.einsum"),
        ("np.linalg.svd(frame)[1][0]", "numpy.linalg"),
    ],
)
def test_an_unsupported_numpy_function_is_refused_at_load_naming_it_and_its_line(
    ctx, dataset, tmp_path, call, named
):
    module, path = _classes(
        tmp_path,
        f"""
        import numpy as np
        from udf_host import UDF

        class UnsupportedNumpyUDF(UDF):
            def get_result_buffers(self):
                return {{"s": self.buffer(kind="nav")}}

            def process_frame(self, frame):
                self.results.s[:] = {call}
        """,
    )
    with pytest.raises((udf_host.UDFError, ValueError)) as error:
        ctx.run_udf(dataset=dataset, udf=module.UnsupportedNumpyUDF())
    message = str(error.value)
    assert named in message and "not supported by udf-host's NumPy" in message
    assert f"line {_line_of(path, call)} of {path}" in message


def test_an_exception_in_the_class_carries_its_traceback_with_the_users_lines(ctx, dataset, tmp_path):
    module, path = _classes(
        tmp_path,
        """
        import numpy as np
        from udf_host import UDF

        def check(value):
            if value > 1000:
                raise ValueError(f"frame sum {value} is too large")
            return value

        class RaisingUDF(UDF):
            def get_result_buffers(self):
                return {"s": self.buffer(kind="nav")}

            def process_frame(self, frame):
                self.results.s[:] = check(float(np.sum(frame)))
        """,
    )
    with pytest.raises(udf_host.UDFError) as error:
        ctx.run_udf(dataset=dataset, udf=module.RaisingUDF())
    message = str(error.value)
    assert re.search(r"RaisingUDF.process_frame \(partition \d+, frame \d+\)", message), message
    assert "ValueError: frame sum" in message
    assert f'File "{path}", line {_line_of(path, "raise ValueError")}, in check' in message
    assert f'File "{path}", line {_line_of(path, "check(float(")}, in process_frame' in message


def test_a_class_that_loops_forever_is_stopped_by_the_timeout(dataset, tmp_path):
    module, _ = _classes(
        tmp_path,
        """
        from udf_host import UDF

        class LoopingUDF(UDF):
            def get_result_buffers(self):
                return {"s": self.buffer(kind="nav")}

            def process_frame(self, frame):
                while True:
                    pass
        """,
    )
    ctx = udf_host.Context(threads=1, timeout=2.0)
    with pytest.raises(udf_host.UDFError, match="(?i)time"):
        ctx.run_udf(dataset=dataset, udf=module.LoopingUDF())
