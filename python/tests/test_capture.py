"""`udf_host.capture`: a UDF class and what it uses, as one self-contained module.

Each test defines code the way a user does — in a module file, or in a notebook cell
(compiled under a cell's name that only `linecache` knows, as IPython does) — captures a
class, and checks the captured text by running it in a fresh namespace with real NumPy:
what it defines must behave as the original does. Refusals must name what cannot travel.
"""

from __future__ import annotations

import linecache
import textwrap
import types

import numpy as np
import pytest

from conftest import module_from_file
from udf_host.capture import CaptureError, capture


def _module_from_file(tmp_path, name: str, source: str) -> types.ModuleType:
    return module_from_file(tmp_path, name, source)[0]


_CELL = 0


def _notebook_cell(source: str, namespace: dict | None = None) -> dict:
    """Run `source` as IPython runs a cell: compiled under a name only linecache knows,
    in the notebook's shared namespace (`__name__ == '__main__'`)."""
    global _CELL
    _CELL += 1
    filename = f"<ipython-input-{_CELL}-0123456789ab>"
    text = textwrap.dedent(source)
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    namespace = {"__name__": "__main__"} if namespace is None else namespace
    exec(compile(text, filename, "exec"), namespace)
    return namespace


def _run_captured(captured) -> dict:
    """Execute the captured text the way the runner does: its arrays bound first."""
    namespace: dict = {"__name__": "udf_module", **captured.arrays}
    exec(compile(captured.text, captured.origin, "exec"), namespace)
    return namespace


def test_a_class_in_a_file_travels_with_its_helpers_constants_and_imports(tmp_path):
    module = _module_from_file(
        tmp_path,
        "capture_file_case",
        """
        import math
        import numpy as np
        from numpy import maximum as np_max

        SCALE = 2.5
        NAMES = ("a", "b")
        WEIGHTS = np.arange(6, dtype=np.float32).reshape(2, 3)
        DTYPE = np.dtype("uint16")
        UNUSED = object()

        def helper(x):
            return recursive(3) * x * SCALE

        def recursive(n):
            return 1 if n == 0 else n * recursive(n - 1)

        class Base:
            offset = 1

        class MyUDF(Base):
            def compute(self, frame):
                # a local that shares a module name must not pull the module's value in
                UNUSED = 0
                return np_max(helper(frame) + math.pi * WEIGHTS.sum(), UNUSED) + self.offset

            def names(self):
                return NAMES, DTYPE
        """,
    )
    captured = capture(module.MyUDF)
    assert captured.class_name == "MyUDF"
    assert captured.origin.endswith("capture_file_case.py")
    assert set(captured.arrays) == {"WEIGHTS"}
    np.testing.assert_array_equal(captured.arrays["WEIGHTS"], module.WEIGHTS)
    assert "UNUSED = " not in captured.text.split("class MyUDF")[0]

    namespace = _run_captured(captured)
    frame = np.array([1.0, -4.0])
    expected = module.MyUDF().compute(frame)
    np.testing.assert_array_equal(namespace["MyUDF"]().compute(frame), expected)
    assert namespace["MyUDF"]().names() == (("a", "b"), np.dtype("uint16"))


def test_a_class_in_a_notebook_cell_travels_with_names_from_earlier_cells():
    namespace = _notebook_cell(
        """
        import numpy as np
        THRESHOLD = 0.5

        def above(frame):
            return np.count_nonzero(frame > THRESHOLD)
        """
    )
    _notebook_cell(
        """
        class CountUDF:
            def count(self, frame):
                return above(frame)
        """,
        namespace,
    )
    cls = namespace["CountUDF"]
    captured = capture(cls)
    assert captured.origin.startswith("<ipython-input-")
    result = _run_captured(captured)["CountUDF"]().count(np.array([0.1, 0.6, 0.9]))
    assert result == 2


def test_values_round_trip_exactly():
    namespace = _notebook_cell(
        """
        VALUES = {"nan": float("nan"), "inf": -float("inf"), "third": 1 / 3, "c": 1 + 2j,
                  "nested": [(1,), {2, 3}, None, b"x"], "big": 2**80}

        class ValuesUDF:
            def values(self):
                return VALUES
        """
    )
    original = namespace["VALUES"]
    copied = _run_captured(capture(namespace["ValuesUDF"]))["VALUES"]
    assert np.isnan(copied["nan"]) and copied["inf"] == original["inf"]
    assert copied["third"] == original["third"] and copied["c"] == original["c"]
    assert copied["nested"] == original["nested"] and copied["big"] == original["big"]


@pytest.mark.parametrize(
    "cell, names",
    [
        (
            """
            import os
            class UsesOs:
                def f(self):
                    return os.getcwd()
            """,
            ["'os'"],
        ),
        (
            """
            from os.path import join
            class UsesJoin:
                def f(self):
                    return join("a", "b")
            """,
            ["'join'", "posixpath"],
        ),
        (
            """
            HANDLE = open(__import__("os").devnull)
            class UsesFile:
                def f(self):
                    return HANDLE.read()
            """,
            ["'HANDLE'", "TextIOWrapper", "parameter"],
        ),
        (
            """
            def make():
                live = object()
                def inner(x):
                    return (x, live)
                return inner
            helper = make()
            class UsesClosure:
                def f(self, x):
                    return helper(x)
            """,
            ["closure", "live"],
        ),
        (
            """
            square = lambda x: x * x
            class UsesLambda:
                def f(self, x):
                    return square(x)
            """,
            ["square", "lambda"],
        ),
        (
            """
            class UsesNothingDefined:
                def f(self, x):
                    return not_defined_anywhere(x)
            """,
            ["'not_defined_anywhere'", "not defined"],
        ),
        (
            """
            import functools
            import numpy as np
            summed = functools.partial(np.sum, axis=-1)
            class UsesPartial:
                def f(self, x):
                    return summed(x)
            """,
            ["'summed'", "functools.partial"],
        ),
    ],
)
def test_what_cannot_travel_is_refused_by_name(cell, names):
    namespace = _notebook_cell(cell)
    cls = next(v for k, v in namespace.items() if k.startswith("Uses"))
    with pytest.raises(CaptureError) as error:
        capture(cls)
    for name in names:
        assert name in str(error.value)


def test_a_class_inside_a_function_is_refused():
    def make():
        class Inner:
            def f(self):
                return 1

        return Inner

    with pytest.raises(CaptureError, match="top level"):
        capture(make())


def test_a_large_array_constant_must_be_a_parameter():
    namespace = _notebook_cell(
        """
        import numpy as np
        BIG = np.zeros(65 << 20, dtype=np.uint8)
        class UsesBig:
            def f(self):
                return BIG
        """
    )
    with pytest.raises(CaptureError, match="'BIG'.*parameter"):
        capture(namespace["UsesBig"])


def test_numpy_functions_are_imported_from_numpy():
    namespace = _notebook_cell(
        """
        from numpy import sum as npsum, maximum
        class UsesNumpyNames:
            def f(self, x):
                return maximum(npsum(x), 0)
        """
    )
    captured = capture(namespace["UsesNumpyNames"])
    assert "from numpy import sum as npsum" in captured.text
    assert "from numpy import maximum" in captured.text
    assert _run_captured(captured)["UsesNumpyNames"]().f(np.array([1, 2])) == 3
