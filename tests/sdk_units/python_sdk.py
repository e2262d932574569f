"""Unit tests of guest-sdk/python/udf_sdk.py's pure helpers, run natively (python3) by
tests/all/sdk_examples.rs: the modules componentize-py generates are stubbed."""

import math
import sys
import types
from pathlib import Path


class _Names:
    """Any attribute is a distinct name (stands in for the generated enums)."""

    def __init__(self, prefix):
        self._prefix = prefix

    def __getattr__(self, name):
        return f"{self._prefix}.{name}"


def _stub(name, **attrs):
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    module.__getattr__ = lambda attr: _Names(attr)
    sys.modules[name] = module
    return module


_stub("componentize_py_types", Err=type("Err", (Exception,), {}))
_stub("wit_world")
_stub("wit_world.exports")
_stub("wit_world.imports")
_stub("wit_world.imports.host")
_stub("wit_world.imports.types")
sys.modules["wit_world"].exports = sys.modules["wit_world.exports"]
sys.modules["wit_world.imports"].host = sys.modules["wit_world.imports.host"]
sys.modules["wit_world.imports"].types = sys.modules["wit_world.imports.types"]
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "guest-sdk" / "python"))

import udf_sdk as udf  # noqa: E402


def view(fmt, values, shape, dtype):
    mem = memoryview(bytearray(len(values) * {"f": 4, "d": 8, "B": 1, "h": 2, "q": 8}[fmt])).cast(fmt)
    for i, v in enumerate(values):
        mem[i] = v
    return udf.View(mem, shape, dtype=dtype)


def test_result_type_follows_numpy():
    cases = [("bool", "uint16", "uint16"), ("uint16", "float32", "float32"), ("int32", "float32", "float64"),
             ("uint64", "float32", "float64"), ("uint8", "int8", "int16"), ("uint32", "int32", "int64"),
             ("uint64", "int64", "float64"), ("float32", "float64", "float64"), ("complex64", "float64", "complex128"),
             ("complex64", "uint16", "complex64"), ("int64", "uint8", "int64")]
    for a, b, expected in cases:
        assert udf.result_type(a, b) == expected, (a, b, udf.result_type(a, b))
        assert udf.result_type(b, a) == expected, (b, a)


def test_combine_adds_wraps_and_lets_nan_win():
    dest = view("f", [1.0, -2.0, 3.0], (3,), "float32")
    udf.combine(dest, view("f", [0.5, math.nan, -7.0], (3,), "float32"), "max")
    assert dest[0] == 1.0 and math.isnan(dest[1]) and dest[2] == 3.0
    ints = view("B", [250, 3], (2,), "uint8")
    udf.combine(ints, view("f", [10.0, 4.0], (2,), "float32"), "add")
    assert ints.tolist() == [4, 7], ints.tolist()
    signed = view("h", [32767], (1,), "int16")
    udf.combine(signed, view("h", [1], (1,), "int16"), "add")
    assert signed[0] == -32768
    udf.combine(dest, view("f", [9.0, 8.0, 7.0], (3,), "float32"), "assign")
    assert dest.tolist() == [9.0, 8.0, 7.0]
    try:
        udf.combine(dest, view("f", [1.0], (1,), "float32"), "add")
        raise AssertionError("shapes differ")
    except udf.UdfError as e:
        assert "differ" in e.message


def test_accumulate_and_identities():
    acc = view("d", [udf._identity("float64", "max")] * 2, (2,), "float64")
    udf.accumulate(acc, view("f", [1.0, -5.0, -3.0, 2.0], (2, 2), "float32"), "max")
    assert acc.tolist() == [1.0, 2.0]
    assert udf._identity("uint16", "min") == 65535 and udf._identity("int8", "max") == -128
    assert udf._identity("float32", "min") == math.inf


def test_declarations_resolve_for_a_run():
    class Meta:
        input_dtype, dataset_dtype, nav_shape = "int32", "uint16", (3, 4)

    d = udf.BufferDecl.nav("x", udf.at_least("float32"), lambda params, ds: (len(ds.nav_shape), 2), merge="add")
    r = d.resolved(None, Meta())
    assert (r.dtype, r.extra_shape, r.merge) == ("float64", (2, 2), "add")
    assert udf.BufferDecl.sig("y", udf.INPUT).resolved(None, Meta()).dtype == "int32"
    assert udf.BufferDecl.single("z", udf.DATASET).resolved(None, Meta()).dtype == "uint16"
    try:
        udf.BufferDecl.sig("w", "float32", merge="mean")
        raise AssertionError("an unknown merge rule")
    except udf.UdfError as e:
        assert "mean" in e.message


def test_frame_map_values_take_numpys_dtypes_and_shapes():
    assert udf._value_info(3.5) == ("float64", (), [3.5])
    assert udf._value_info([[1, 2, 3], [4, 5, 6]]) == ("int64", (2, 3), [1, 2, 3, 4, 5, 6])
    assert udf._value_info([True, False]) == ("bool", (2,), [1, 0])
    assert udf._value_info([1j]) == ("complex128", (1,), [0.0, 1.0])
    assert udf._value_info(view("f", [1.0, 2.0], (2,), "float32")) == ("float32", (2,), [1.0, 2.0])
    try:
        udf._value_info([[1], [2, 3]])
        raise AssertionError("ragged")
    except udf.UdfError as e:
        assert "ragged" in e.message


if __name__ == "__main__":
    tests = [f for name, f in sorted(globals().items()) if name.startswith("test_")]
    for f in tests:
        f()
        print("ok", f.__name__)
    print(f"{len(tests)} passed")
