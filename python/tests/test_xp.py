"""The host's array executor (`udf_host.xp` over `udf_host._native.arrays`) against NumPy
and array-api-strict, computed in the test: operations x dtypes x shapes x broadcasting x
axes, empty arrays, NaN, integer overflow, non-contiguous views, and the typed errors."""

import itertools

import numpy as np
import pytest

import udf_host.xp as xp
from udf_host._native import arrays as native

strict = pytest.importorskip("array_api_strict")

RNG = np.random.default_rng(7)
DTYPES = ["bool", "uint8", "uint16", "int16", "int32", "int64", "uint64", "float32", "float64", "complex64",
          "complex128"]
SHAPES = [(), (0,), (5,), (3, 4), (2, 3, 4), (4, 0, 3)]


def sample(shape, dtype):
    if dtype == "bool":
        return RNG.integers(0, 2, shape).astype(bool)
    if dtype.startswith("complex"):
        return (RNG.normal(size=shape) + 1j * RNG.normal(size=shape)).astype(dtype)
    if dtype.startswith("float"):
        return RNG.normal(size=shape).astype(dtype) * 3
    info = np.iinfo(dtype)
    return RNG.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True).astype(dtype)


def host(a):
    return xp.asarray(np.ascontiguousarray(a))


def close(got, expected, rtol=1e-5, atol=1e-6):
    got_np = np.asarray(got)
    expected = np.asarray(expected)
    assert got_np.shape == expected.shape, (got_np.shape, expected.shape)
    assert got_np.dtype == expected.dtype, (got_np.dtype, expected.dtype)
    if expected.dtype.kind in "fc":
        np.testing.assert_allclose(got_np, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got_np, expected)


def test_every_operation_of_the_table_is_in_xp():
    for kind, names in native.operations():
        for name in names:
            if kind == "fft":
                assert hasattr(xp.fft, name), name
            elif kind == "functions":
                continue
            else:
                assert callable(getattr(xp, name, None)), f"xp lacks {kind} operation {name}"


UNARY_FLOAT = ["sqrt", "exp", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "arctan", "sinh",
               "cosh", "tanh", "arcsinh"]


@pytest.mark.parametrize("name", UNARY_FLOAT + ["abs", "negative", "square", "sign", "floor", "ceil", "trunc",
                                                "round", "isnan", "isinf", "isfinite"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int16", "int32", "uint8"])
def test_unary_matches_numpy(name, dtype):
    a = sample((3, 5), dtype)
    if name in ("sqrt", "log", "log2", "log10"):
        a = np.abs(a) + (1 if dtype.startswith(("int", "uint")) else 0.5)
    if name in ("negative", "abs", "sign") and dtype.startswith("uint"):
        pytest.skip("NumPy wraps unsigned negation the same way; covered by the int case")
    if dtype.startswith(("int", "uint")) and name in ("floor", "ceil", "trunc", "round"):
        expected = a  # the array API: integers stay integers
    elif dtype == "uint8" and name in UNARY_FLOAT:
        expected = getattr(np, name)(a.astype("float32"))  # NumPy gives float16; the host float32
    else:
        expected = getattr(np, name)(a)
    with np.errstate(all="ignore"):
        close(getattr(xp, name)(host(a)), expected, rtol=2e-5)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "maximum", "minimum", "floor_divide",
                                  "remainder", "equal", "less", "greater_equal", "atan2", "hypot"])
@pytest.mark.parametrize("pair", [("float32", "float32"), ("float32", "float64"), ("int16", "uint8"),
                                  ("int32", "float32"), ("uint16", "int16"), ("uint8", "uint8"),
                                  ("int64", "int64")])
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((0, 4), (4,))])
def test_binary_matches_numpy_with_promotion_and_broadcasting(name, pair, shapes):
    a, b = sample(shapes[0], pair[0]), sample(shapes[1], pair[1])
    if name in ("floor_divide", "remainder", "divide"):
        b = np.where(b == 0, 1, b).astype(b.dtype)
    np_name = {"atan2": "arctan2"}.get(name, name)
    with np.errstate(all="ignore"):
        expected = getattr(np, np_name)(a, b)
    if name in ("atan2", "hypot") and np.asarray(expected).dtype == np.float16:
        # NumPy computes 8-bit integers in float16, which the host does not have.
        expected = getattr(np, np_name)(a.astype("float32"), b.astype("float32"))
    close(getattr(xp, name)(host(a), host(b)), expected, rtol=2e-5)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64", "complex64"])
@pytest.mark.parametrize("scalar", [2, 2.5, True, -1])
def test_python_scalars_are_weak_nep50(dtype, scalar):
    a = sample((4,), dtype)
    if dtype == "uint8" and scalar == -1:
        with pytest.raises(ValueError, match="out of bounds"):
            xp.add(host(a), scalar)
        return
    expected = np.add(a, scalar)
    close(xp.add(host(a), scalar), expected)
    close(host(a) * scalar, np.multiply(a, scalar))


def test_integer_overflow_wraps_like_numpy():
    a = np.array([250, 100, 7], dtype="uint8")
    close(host(a) + host(a), a + a)
    b = np.array([-128, 127], dtype="int8")
    close(-host(b), -b)
    close(host(b) * 3, b * np.int8(3))


@pytest.mark.parametrize("name", ["sum", "prod", "mean", "min", "max", "var", "std", "any", "all", "argmin",
                                  "argmax", "count_nonzero", "nansum", "nanmean", "nanmin", "nanmax", "nanvar",
                                  "nanstd"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint16", "bool"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), (1, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_match_numpy(name, dtype, axis, keepdims):
    if dtype == "bool" and name not in ("any", "all", "count_nonzero", "sum"):
        pytest.skip("bool reductions beyond any/all/count/sum differ by design of the array API")
    if name.startswith("nan") and dtype not in ("float32", "float64"):
        pytest.skip("NaN forms are for floats")
    if name in ("argmin", "argmax") and isinstance(axis, tuple):
        pytest.skip("argmin/argmax take one axis")
    a = sample((3, 4, 5), dtype)
    if name.startswith("nan"):
        a = a.copy()
        a[0, 1, 2] = np.nan
        a[1, :, 3] = np.nan
    kwargs = {"axis": axis, "keepdims": keepdims}
    with np.errstate(all="ignore"), pytest.warns(None) if False else _nowarn():
        expected = getattr(np, name)(a, **kwargs)
    expected = np.asarray(expected)
    if name in ("mean", "var", "std") and dtype in ("int32", "uint16"):
        expected = expected.astype("float64") if dtype == "int32" else expected.astype("float32")
    if name == "count_nonzero":
        expected = expected.astype("int64")
    got = getattr(xp, name)(host(a), **kwargs)
    close(got, expected, rtol=1e-4)


class _nowarn:
    def __enter__(self):
        import warnings

        self.w = warnings.catch_warnings()
        self.w.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *exc):
        self.w.__exit__(*exc)


def test_sum_with_dtype_converts_in_one_pass():
    tile = sample((8, 16, 16), "uint16")
    close(xp.sum(host(tile), axis=0, dtype=xp.float32), np.sum(tile, axis=0, dtype=np.float32))
    close(xp.sum(host(tile), axis=(1, 2), dtype="float64"), np.sum(tile, axis=(1, 2), dtype=np.float64))
    close(xp.var(host(tile.astype("float32")), axis=0, dtype="float64"),
          np.var(tile.astype("float32"), axis=0, dtype=np.float64))


def test_empty_reductions():
    a = np.zeros((0, 3), "float32")
    close(xp.sum(host(a), axis=0), np.sum(a, axis=0))
    close(xp.sum(host(a), axis=1), np.sum(a, axis=1))
    with pytest.raises(ValueError, match="no identity"):
        xp.max(host(a), axis=0)


@pytest.mark.parametrize("key", [
    (slice(None, None, -1),), (slice(1, None, 2), slice(None, None, -2)), (Ellipsis, 1), (None, 2, Ellipsis),
    (1, slice(3, 0, -1), None), (-1,), (slice(-2, None), Ellipsis, slice(None, 1)), (slice(10, 20),),
])
def test_views_follow_numpy_basic_indexing(key):
    a = sample((4, 5, 6), "int32")
    v = host(a)[key]
    close(v, a[key])
    # Operations on non-contiguous views.
    close(xp.sum(v * 2, axis=-1) if v.ndim else v * 2, np.sum(a[key] * 2, axis=-1) if a[key].ndim else a[key] * 2)


def test_transposed_and_broadcast_views():
    a = sample((3, 4), "float32")
    close(host(a).T @ host(a), a.T @ a)
    close(xp.broadcast_to(host(a[:, :1]), (3, 4)) + host(a), np.broadcast_to(a[:, :1], (3, 4)) + a)
    close(xp.reshape(host(a).T, (2, 6)), np.reshape(a.T, (2, 6)))
    close(xp.expand_dims(host(a), 1), np.expand_dims(a, 1))
    close(xp.squeeze(xp.expand_dims(host(a), 0), 0), a)


def test_boolean_mask_and_take():
    a = sample((6, 7), "float32")
    m = a > 0
    close(host(a)[host(m)], a[m])
    close(xp.std(host(a)[host(m)]), np.std(a[m]))
    close(xp.take(host(a), [4, 0, -1], axis=1), np.take(a, [4, 0, -1], axis=1))


def test_writes_into_buffers_like_results():
    buf = np.zeros((4, 6), "float32")
    hbuf = host(buf)
    tile = sample((3, 6), "float32")
    for step in range(2):
        hbuf[1:4] += host(tile)
        buf[1:4] += tile
        hbuf[0, ::2] = 7
        buf[0, ::2] = 7
    close(hbuf, buf)
    view = hbuf[::-1]
    view += 1
    buf[::-1] += 1
    close(hbuf, buf)
    with pytest.raises(TypeError, match="same_kind"):
        ints = xp.zeros((3,), dtype=xp.int32)
        ints += xp.asarray([0.5, 1.5, 2.5])


class SetSpy:
    """A host array that records the `set` calls made on it."""

    def __init__(self, native):
        self.native, self.sets = native, []

    def set(self, items, value):
        self.sets.append(items)
        return self.native.set(items, value)

    def __getattr__(self, name):
        return getattr(self.native, name)


def test_augmented_assignment_into_views_follows_numpy():
    """`x[k] op= y` writes through the view; its last step `x[k] = x[k]` is skipped (a
    copy of the region onto itself), any other assignment is not."""
    buf = sample((5, 6), "float64")
    hbuf = host(buf)
    hbuf._a = spy = SetSpy(hbuf._a)
    sets = spy.sets
    hbuf[1:4] += 2.5
    buf[1:4] += 2.5
    hbuf[:, ::2] *= 3
    buf[:, ::2] *= 3
    hbuf[-1] -= hbuf[0]
    buf[-1] -= buf[0]
    close(hbuf, buf, rtol=1e-12, atol=1e-12)
    assert sets == [], "the views were written in place; no copy of a region onto itself"
    hbuf[0:2] = hbuf[2:4]  # another region: copied
    buf[0:2] = buf[2:4]
    hbuf[1] = hbuf[1]
    close(hbuf, buf, rtol=1e-12, atol=1e-12)
    assert len(sets) == 1


def test_a_chain_of_views_does_not_keep_its_parents_alive():
    """`x = x[1:]` in a loop: each view's record of its parent (for `x[k] += y`) is weak,
    so the dropped parents' handles are freed (the host caps live arrays at 4096)."""
    import gc
    import weakref

    x = host(np.arange(6000, dtype=np.float64))
    first = weakref.ref(x)
    for _ in range(5000):
        x = x[1:]
    gc.collect()
    assert first() is None
    np.testing.assert_array_equal(np.asarray(x), np.arange(5000, 6000, dtype=np.float64))


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "int32"])
def test_matmul_and_tensordot_against_a_stack_of_masks(dtype):
    tile = sample((5, 4, 6), dtype)
    masks = sample((3, 4, 6), dtype)
    flat = tile.reshape(5, -1)
    close(xp.reshape(host(tile), (5, -1)) @ xp.reshape(host(masks), (3, -1)).T, flat @ masks.reshape(3, -1).T,
          rtol=1e-4, atol=1e-4)
    close(xp.tensordot(host(tile), host(masks), axes=((1, 2), (1, 2))),
          np.tensordot(tile, masks, axes=((1, 2), (1, 2))), rtol=1e-4, atol=1e-4)
    a, b = sample((2, 3, 4), dtype), sample((4, 5), dtype)
    close(host(a) @ host(b), a @ b, rtol=1e-4, atol=1e-4)
    v = sample((4,), dtype)
    close(host(a) @ host(v), a @ v, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["uint16", "int32", "float32", "float64", "complex128"])
@pytest.mark.parametrize("shapes, axis", [(((4, 5), (4, 5)), 0), (((2, 3, 4), (4,)), -1), (((4, 3), (4, 1)), 0),
                                          (((3, 1, 4), (2, 4)), -1), (((0, 3), (0, 3)), 0)])
def test_vecdot_matches_numpy(dtype, shapes, axis):
    a, b = sample(shapes[0], dtype), sample(shapes[1], dtype)
    close(xp.vecdot(host(a), host(b), axis=axis), np.vecdot(a, b, axis=axis), rtol=1e-5, atol=1e-5)
    if dtype not in ("complex128",):
        close(xp.vecdot(host(a), host(b), axis=axis, dtype="float64"),
              np.vecdot(a, b, axis=axis, dtype=np.float64), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("call, error", [
    (lambda: xp.vecdot(xp.zeros((3, 4)), xp.zeros((3, 5)), axis=-1), ValueError),
    (lambda: xp.vecdot(xp.zeros((3, 4)), xp.zeros((3, 4)), axis=2), IndexError),
    (lambda: xp.vecdot(xp.zeros((2,), dtype=xp.bool), xp.zeros((2,), dtype=xp.bool)), TypeError),
])
def test_vecdot_bad_input_gets_typed_errors(call, error):
    with pytest.raises(error, match="vecdot"):
        call()


@pytest.mark.parametrize("dtype", ["uint16", "int32", "float32", "float64", "complex64"])
@pytest.mark.parametrize("axis, keepdims", [(0, False), ((0, 1), True), (-1, False), (None, False)])
@pytest.mark.parametrize("ddof", [0, 1])
def test_sum_var_is_numpys_sum_and_var(dtype, axis, keepdims, ddof):
    """`xp.sum_var` (one host call) against NumPy's `sum` and `var` in the result dtype."""
    x = sample((6, 5, 7), dtype)
    # `var`'s dtype; for complex input the sum keeps it, the variance is real.
    out = np.dtype(str(xp.var(host(x)).dtype)) if dtype != "complex64" else np.dtype("complex64")
    total, variance = xp.sum_var(host(x), axis=axis, keepdims=keepdims, ddof=ddof)
    close(total, np.sum(x.astype(out), axis=axis, keepdims=keepdims), rtol=1e-5, atol=1e-4)
    close(variance, np.var(x.astype(out), axis=axis, keepdims=keepdims, ddof=ddof), rtol=1e-5, atol=1e-4)
    # A float64 `dtype`: both in float64, to the last bits.
    if dtype != "complex64":
        total, variance = xp.sum_var(host(x), axis=axis, keepdims=keepdims, ddof=ddof, dtype="float64")
        wide = x.astype(np.float64)
        close(total, np.sum(wide, axis=axis, keepdims=keepdims), rtol=1e-12, atol=1e-9)
        close(variance, np.var(wide, axis=axis, keepdims=keepdims, ddof=ddof), rtol=1e-12, atol=1e-9)


def test_sum_var_of_a_converted_tile_reads_the_tile_and_refuses_integer_dtypes():
    tile = sample((8, 16, 16), "uint16")
    converted = host(tile).astype(xp.float64)
    total, variance = xp.sum_var(converted, axis=0)
    close(total, np.sum(tile.astype(np.float64), axis=0), rtol=1e-12)
    close(variance, np.var(tile.astype(np.float64), axis=0), rtol=1e-12)
    with pytest.raises(TypeError, match="sum_var"):
        xp.sum_var(host(tile), axis=0, dtype="int64")


@pytest.mark.parametrize("name", ["fft2", "ifft2", "rfft2", "fftshift", "ifftshift"])
@pytest.mark.parametrize("shape", [(4, 6), (2, 5, 7)])
def test_fft_matches_numpy(name, shape):
    a = sample(shape, "float64")
    expected = getattr(np.fft, name)(a)
    close(getattr(xp.fft, name)(host(a)), expected, rtol=1e-9, atol=1e-9)
    f = np.fft.rfft2(a)
    close(xp.fft.irfft2(host(f)), np.fft.irfft2(f), rtol=1e-9, atol=1e-9)


def test_where_clip_astype_and_constructors():
    a = sample((3, 4), "float32")
    close(xp.where(host(a) > 0, host(a), 0.0), np.where(a > 0, a, np.float32(0)))
    close(xp.clip(host(a), -1.0, 1.0), np.clip(a, -1, 1))
    close(host(a).astype(xp.int16), a.astype("int16"))
    close(xp.arange(2, 11, 3, dtype=xp.int32), np.arange(2, 11, 3, dtype="int32"))
    close(xp.linspace(0, 1, 5), np.linspace(0, 1, 5))
    close(xp.eye(3, 4, k=1, dtype=xp.float32), np.eye(3, 4, k=1, dtype="float32"))
    close(xp.full((2, 2), 3.5, dtype="float32"), np.full((2, 2), 3.5, dtype="float32"))
    close(xp.concat([host(a), host(a)], axis=1), np.concatenate([a, a], axis=1))
    close(xp.stack([host(a), host(a)], axis=0), np.stack([a, a]))
    close(xp.asarray([[1, 2], [3, 4]], dtype=xp.uint16), np.array([[1, 2], [3, 4]], "uint16"))


def test_against_array_api_strict_promotion():
    # array-api-strict is the standard's reference for dtype promotion of arrays.
    for left, right in itertools.product(["int8", "int16", "uint8", "uint16", "float32", "float64"], repeat=2):
        sl = getattr(strict, left)
        sr = getattr(strict, right)
        try:
            expected = strict.result_type(sl, sr)
        except TypeError:
            continue
        got = (xp.zeros((1,), dtype=left) + xp.zeros((1,), dtype=right)).dtype
        assert got.name == str(expected).split(".")[-1].replace("'>", ""), (left, right, got, expected)


def test_result_type_takes_bools_like_numpy():
    # Issue 32's array-api-tests triage: result_type(bool, bool) raised ("add: needs
    # numeric dtypes"), as it promoted by adding probes.
    cases = [("bool", "bool"), ("bool", "int8"), ("uint16", "bool"), ("bool", "float32"), ("bool", "bool", "uint8")]
    for dtypes in cases:
        assert xp.result_type(*dtypes).name == np.result_type(*dtypes).name, dtypes
    for mixed in [(np.array([True]), 1), (True, "float32"), (np.array([True]), np.array([False]), True)]:
        got = xp.result_type(*[xp.asarray(m) if isinstance(m, np.ndarray) else m for m in mixed])
        assert got.name == np.result_type(*mixed).name, mixed
    assert xp.isdtype(dtype=xp.float32, kind="real floating")


@pytest.mark.parametrize("call, error, match", [
    (lambda: xp.zeros((3, 4)) + xp.zeros((5,)), ValueError, r"add: shapes \(3, 4\) and \(5,\) do not fit"),
    (lambda: xp.sum(xp.zeros((3, 4)), axis=2), IndexError, r"sum: axis 2 is out of bounds for an array of 2"),
    (lambda: xp.sum(xp.zeros((3, 4)), axis=(0, 0)), IndexError, "given twice"),
    (lambda: xp.zeros((3, 4))[5], IndexError, "index 5 is out of bounds for axis 0 with size 3"),
    (lambda: xp.zeros((3, 4))[1, 2, 3], IndexError, "too many indices"),
    (lambda: xp.zeros((3, 4)) @ xp.zeros((3, 4)), ValueError, "matmul: shapes"),
    (lambda: xp.reshape(xp.zeros((3, 4)), (5, -1)), ValueError, "reshape"),
    (lambda: xp.bitwise_and(xp.zeros((3,)), xp.zeros((3,))), TypeError, "bitwise_and: needs integer"),
    (lambda: xp.zeros((1 << 40, 1 << 30)), MemoryError, "zeros"),
])
def test_bad_input_gets_typed_errors_naming_the_operation(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_memory_is_given_back():
    before = native.memory_in_use()[0]
    for _ in range(50):
        a = xp.zeros((256, 256), dtype=xp.float64)
        b = a + 1
        del a, b
    # Up to the few buffers kept for reuse (POOL_BUFFERS = 8) stay charged.
    assert native.memory_in_use()[0] - before <= 8 * 256 * 256 * 8 + 4096


def test_fill_and_in_place_add_follow_numpy():
    a = xp.zeros((2, 3), dtype=xp.float32)
    a.fill(2.5)
    close(a, np.full((2, 3), 2.5, np.float32))
    # `+=` of an array is one host call (add_at): the result must still be NumPy's.
    f, nf = xp.zeros((2, 3), dtype=xp.float32), np.zeros((2, 3), np.float32)
    f += xp.asarray([1.0, 2.0, 3.0])  # float64 into float32: same_kind, broadcast
    nf += np.asarray([1.0, 2.0, 3.0])
    f[1] += 0.5
    nf[1] += 0.5
    close(f, nf)
    i, ni = xp.asarray([120, -5], dtype=xp.int8), np.asarray([120, -5], np.int8)
    i += xp.asarray([10, 3], dtype=xp.int16)  # wraps as NumPy's int16 sum cast back
    ni += np.asarray([10, 3], np.int16)
    close(i, ni)
    with pytest.raises((OverflowError, ValueError), match="1000"):  # NumPy 2: OverflowError
        small = xp.zeros((2,), dtype=xp.int8)
        small += 1000
    with pytest.raises(ValueError):
        row = xp.zeros((3,), dtype=xp.float32)
        row += xp.zeros((2, 3), dtype=xp.float32)


def test_asarray_of_a_list_of_zero_dimensional_arrays():
    """`np.array([np.count_nonzero(m)])` in a UDF's get_results: a 0-d array inside a list
    is one element (it raised "'int' object is not iterable")."""
    count = xp.count_nonzero(xp.asarray([True, False, True]))
    both = xp.asarray([count, xp.asarray(5)])
    np.testing.assert_array_equal(np.asarray(both.tolist()), np.array([2, 5]))


@pytest.mark.parametrize(
    "shape, key, value",
    [
        ((5, 7), [[1, 3]], 2.5),  # CustomValidMask's `buf[self.meta.coordinates] = v`
        ((6,), [[1, 3]], 7.0),
        ((4, 3), [0, 2], [1.0, 2.0, 3.0]),
        ((4, 3), [-1, 0], [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]),
        ((4,), [1, 1], [5.0, 6.0]),
    ],
)
def test_setitem_with_an_integer_array_follows_numpy(shape, key, value):
    expected = np.zeros(shape)
    expected[np.asarray(key)] = np.asarray(value)
    got = xp.zeros(shape, dtype=xp.float64)
    got[xp.asarray(key)] = value if np.isscalar(value) else xp.asarray(value)
    close(got, expected)
