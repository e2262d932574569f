"""Deferred conversions of a tile (`udf_host.xp._Deferred`): `tile.astype(float)` and the
product of two such are not computed where a reduction can read the tile instead
(`np.sum(t, axis=0)` with `dtype=`, `np.sum(t * t, axis=0)` as `vecdot`), and are computed
— as NumPy's copies — wherever else they are used, also after the tile's call ended.
Expected values from NumPy, computed in the test."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

import udf_host
import udf_host.xp as xp

RNG = np.random.default_rng(11)


def tile_of(values):
    """`values` as the runner presents a tile (read-only memory ending with its call)."""
    return xp._tile(xp.asarray(np.ascontiguousarray(values))._a)


def data(dtype, shape=(6, 5, 7)):
    if np.dtype(dtype).kind == "f":
        return RNG.normal(size=shape).astype(dtype) * 100
    return RNG.integers(0, np.iinfo(dtype).max, shape, endpoint=True).astype(dtype)


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int16", "float32"])
@pytest.mark.parametrize("to", ["float32", "float64"])
def test_reductions_of_a_deferred_conversion_read_the_tile(dtype, to, monkeypatch):
    values = data(dtype)
    if np.dtype(dtype).itemsize >= np.dtype(to).itemsize and dtype != "float32":
        pytest.skip("not an exact conversion")
    calls = []
    vecdot = xp._b.vecdot
    monkeypatch.setattr(xp._b, "vecdot", lambda *a: calls.append(a[2:]) or vecdot(*a))
    t = tile_of(values).astype(to)
    assert type(t) is xp._Deferred and t.shape == values.shape and t.dtype == xp._dtype(to) and t.ndim == 3
    want = values.astype(to)
    rtol = 1e-6 if to == "float32" else 1e-12
    np.testing.assert_allclose(np.asarray(xp.sum(t, axis=0)), want.sum(axis=0), rtol=rtol)
    np.testing.assert_allclose(np.asarray(t.mean(axis=(1, 2))), want.mean(axis=(1, 2)), rtol=rtol)
    np.testing.assert_allclose(np.asarray(xp.var(t, axis=0)), want.var(axis=0), rtol=1e-5)
    for product in (t * t, t ** 2, xp.square(t)):
        assert type(product) is xp._Deferred
        got = xp.sum(product, axis=0)
        assert got.dtype == xp._dtype(to)
        np.testing.assert_allclose(np.asarray(got), (want * want).sum(axis=0), rtol=1e-5 if to == "float32" else 1e-12)
    assert [c[0] for c in calls] == [0, 0, 0], "np.sum(t * t, axis=0) is one vecdot of the tile"
    assert t._how is not None, "nothing above computed the conversion"
    # Any other use computes it, once, as NumPy's copy.
    np.testing.assert_array_equal(np.asarray(xp.max(t, axis=0)), want.max(axis=0))
    assert t._how is None
    np.testing.assert_array_equal(np.asarray(t), want)


def test_a_deferred_copy_is_writable_and_does_not_write_the_tile():
    values = data("uint16")
    tile = tile_of(values)
    t = tile.astype(np.float64)
    t += 1.0
    t[0] = -1.0
    want = values.astype(np.float64) + 1.0
    want[0] = -1.0
    np.testing.assert_array_equal(np.asarray(t), want)
    np.testing.assert_array_equal(np.asarray(tile), values)


def test_settle_computes_the_deferred_arrays_still_alive_and_forgets_them():
    values = data("uint16")
    kept = tile_of(values).astype(np.float64)
    product = kept * kept
    tile_of(values).astype(np.float32)  # dropped at once
    xp._settle()
    assert kept._how is None and product._how is None and not xp._DEFERRED
    np.testing.assert_array_equal(np.asarray(product), values.astype(np.float64) ** 2)
    failed = tile_of(values).astype(np.float64)
    xp._settle(compute=False)
    assert failed._how is not None and not xp._DEFERRED


def test_only_tiles_and_exact_conversions_are_deferred():
    values = data("uint16")
    assert type(xp.asarray(values).astype(np.float64)) is xp.ndarray  # a writable array: copied now
    assert type(tile_of(values).astype(np.int32)) is xp.ndarray  # not a float dtype
    assert type(tile_of(data("int32")).astype(np.float32)) is xp.ndarray  # float32 cannot hold every int32
    assert type(tile_of(values)[1:3, ::2].astype(np.float64)) is xp._Deferred  # a basic view of a tile
    assert type(tile_of(values)[[0, 2]].astype(np.float64)) is xp.ndarray  # a copy (advanced indexing)
    t = tile_of(values).astype(np.float64)
    assert type(t * tile_of(values).astype(np.float32)) is xp.ndarray  # dtypes differ
    assert type(t * 2.0) is xp.ndarray
    xp._settle(compute=False)


SOURCE = '''
import numpy as np
from udf_host import UDF


class KeepUDF(UDF):
    """Squares summed from deferred conversions, a deferred copy written into, and frames'
    deferred copies kept past their call and read in `postprocess`."""

    def get_result_buffers(self):
        return {
            "sum": self.buffer(kind="sig", dtype=np.float64),
            "sumsq": self.buffer(kind="sig", dtype=np.float64),
            "plus": self.buffer(kind="sig", dtype=np.float64),
            "kept": self.buffer(kind="nav", dtype=np.float64),
        }

    def get_tiling_preferences(self):
        return {"depth": 2, "total_size": 4096}

    def process_tile(self, tile):
        t = tile.astype(np.float64)
        self.results.sum[:] += np.sum(t, axis=0)
        self.results.sumsq[:] += np.sum(t * t, axis=0)
        w = tile.astype(np.float64)
        w += 1.0
        self.results.plus[:] += np.sum(w, axis=0)

    def merge(self, dest, src):
        dest.sum[:] += src.sum
        dest.sumsq[:] += src.sumsq
        dest.plus[:] += src.plus
        dest.kept[:] = src.kept


class KeepFramesUDF(UDF):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.frames = []

    def get_result_buffers(self):
        return {"kept": self.buffer(kind="nav", dtype=np.float64)}

    def process_frame(self, frame):
        self.frames.append(frame.astype(np.float64))

    def postprocess(self):
        for i, f in enumerate(self.frames):
            self.results.kept[i] = np.sum(f * f)
'''


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    path = tmp_path_factory.mktemp("deferred") / "keep_udfs.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("keep_udfs", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["keep_udfs"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("dtype", ["uint16", "float32"])
def test_a_class_gets_numpys_numbers_from_deferred_conversions_in_the_runner(classes, dtype):
    values = data(dtype, (3, 4, 16, 16))
    ctx = udf_host.Context()
    ds = ctx.load("memory", data=values)
    result = ctx.run_udf(dataset=ds, udf=classes.KeepUDF())
    frames = values.reshape(12, 16, 16).astype(np.float64)
    np.testing.assert_allclose(np.asarray(result["sum"].data), frames.sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(result["sumsq"].data), (frames * frames).sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(result["plus"].data), (frames + 1).sum(axis=0), rtol=1e-12)
    kept = ctx.run_udf(dataset=ds, udf=classes.KeepFramesUDF())
    np.testing.assert_allclose(np.asarray(kept["kept"].data).reshape(-1), (frames ** 2).sum(axis=(1, 2)), rtol=1e-12)
