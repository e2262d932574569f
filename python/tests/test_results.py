"""Numbers: the same as the command line's `.npy` outputs (bit for bit, same plan) and as
plain NumPy references."""

from __future__ import annotations

import numpy as np
import pytest

import udf_host

from conftest import CACHE, cli, plugin


def masks_for(sig) -> np.ndarray:
    rng = np.random.default_rng(7)
    return rng.integers(0, 3, size=(3, *sig)).astype(np.float32)


def test_builtins_and_a_plugin_match_the_cli_and_numpy(ctx, scan_file, tmp_path):
    path, data = scan_file
    masks = masks_for(data.shape[2:])
    np.save(tmp_path / "masks.npy", masks)
    out = tmp_path / "out"
    cli("run", "builtin:sum", "builtin:sumsig", "builtin:stddev", "builtin:masks", plugin("sum"), path,
        "-p", f"masks=@{tmp_path / 'masks.npy'}", "--partitions", "3", "--threads", "2",
        "--out", out, "--cache-dir", CACHE, "-q")

    ds = ctx.load("auto", path=path)
    udfs = [udf_host.BuiltinUDF("sum"), udf_host.BuiltinUDF("sumsig"), udf_host.BuiltinUDF("stddev"),
            udf_host.BuiltinUDF("masks", masks=masks), udf_host.WasmUDF(plugin("sum"))]
    results = ctx.run_udf(dataset=ds, udf=udfs, partitions=3)
    assert isinstance(results, list) and len(results) == 5

    # Bit for bit what the command line wrote (the same plan: 3 partitions) — but for
    # stddev, whose float64 pairwise merges happen in completion order: last-bit
    # differences between runs are expected there.
    for name, udf in zip(["sum", "sumsig", "stddev", "masks", "sum-2"], results):
        for buffer_name, buffer in udf.items():
            expected = np.load(out / name / f"{buffer_name}.npy")
            assert buffer.dtype == expected.dtype, (name, buffer_name)
            if name == "stddev":
                np.testing.assert_allclose(buffer.data, expected, rtol=1e-13, err_msg=f"{name}/{buffer_name}")
            else:
                np.testing.assert_array_equal(buffer.data, expected, err_msg=f"{name}/{buffer_name}")

    # And what NumPy computes.
    f = data.astype(np.float64)
    total = f.sum(axis=(0, 1))
    np.testing.assert_array_equal(results[0]["intensity"].data, total.astype(np.float32))
    np.testing.assert_array_equal(results[4]["intensity"].data, total.astype(np.float32))
    np.testing.assert_array_equal(results[1]["intensity"].data, f.sum(axis=(2, 3)).astype(np.float32))
    frames = f.reshape(-1, *data.shape[2:])
    std = results[2]
    np.testing.assert_allclose(std["var"].data, frames.var(axis=0), rtol=1e-5)
    np.testing.assert_allclose(std["std"].data, frames.std(axis=0), rtol=1e-5)
    np.testing.assert_allclose(std["mean"].data, frames.mean(axis=0), rtol=1e-5)
    assert std["num_frames"].data[0] == frames.shape[0]
    expected_masks = np.einsum("abyx,myx->abm", f, masks.astype(np.float64))
    np.testing.assert_allclose(results[3]["intensity"].data, expected_masks, rtol=1e-6)


def test_buffers_are_read_only_views_and_numpy_sees_their_data(ctx, scan_file):
    path, data = scan_file
    res = ctx.run_udf(dataset=ctx.load("npy", path=path), udf=udf_host.BuiltinUDF("sumsig"))
    buf = res["intensity"]
    assert buf.kind == "nav" and buf.extra_shape == () and buf.name == "intensity"
    assert buf.data.shape == data.shape[:2] and buf.raw_data.shape == (data.shape[0] * data.shape[1],)
    assert not buf.data.flags.writeable
    with pytest.raises(ValueError):
        buf.data[0, 0] = 1
    # No copy: the array views memory the result owns.
    assert buf.data.base is not None
    np.testing.assert_array_equal(np.asarray(buf), buf.data)
    assert np.asarray(buf, dtype=np.float64).dtype == np.float64
    assert buf.valid_mask.all() and buf.masked_data.mask.sum() == 0


def test_preview_is_the_png_the_cli_writes(ctx, scan_file, tmp_path):
    path, _ = scan_file
    out = tmp_path / "out"
    cli("run", "builtin:sum", "builtin:sumsig", path, "--preview", "--out", out, "-q")
    res = ctx.run_udf(dataset=ctx.load("auto", path=path), udf=[udf_host.BuiltinUDF("sum"), udf_host.BuiltinUDF("sumsig")])
    for name, udf in zip(["sum", "sumsig"], res):
        png = udf["intensity"].preview()
        assert png.startswith(b"\x89PNG\r\n\x1a\n")
        assert png == (out / name / "intensity.png").read_bytes()
        assert udf["intensity"]._repr_png_() == png


def test_the_previews_python_draws_count_against_the_result_memory_cap():
    """Review of issue 33: `Buffer.preview()` drew its image outside the result memory
    cap. A 64 x 64 frame sum is 16 KiB of results, but its preview (upscaled to 256 x 256,
    with a colour bar) takes more than 1 MiB to draw: the run is refused before it starts,
    naming the previews, as `udf-host run --preview --max-result-memory 1M` is."""
    data = np.ones((4, 4, 64, 64), dtype=np.float32)
    tight = udf_host.Context(threads=2, cache_dir=CACHE, max_result_memory="1M")
    with pytest.raises(Exception, match="previews") as refused:
        tight.run_udf(dataset=tight.load("memory", data=data), udf=udf_host.BuiltinUDF("sum"))
    assert "more than the limit" in str(refused.value)
    roomy = udf_host.Context(threads=2, cache_dir=CACHE, max_result_memory="16M")
    result = roomy.run_udf(dataset=roomy.load("memory", data=data), udf=udf_host.BuiltinUDF("sum"))
    assert result["intensity"].preview().startswith(b"\x89PNG")


def test_result_views_are_read_only_and_bool_masks_stay_bool(ctx, scan_file):
    """Issue 33, finding 7: result arrays were writeable views of memory Rust holds as
    immutable (writing 2 into a bool mask made a later Rust `&[bool]` invalid). Views are
    read-only; bool masks are NumPy's view of bytes Rust reads only as bytes."""
    path, data = scan_file
    ds = ctx.load("auto", path=path)
    roi = np.zeros(data.shape[:2], dtype=bool)
    roi[1, 2] = True
    result = ctx.run_udf(dataset=ds, udf=udf_host.BuiltinUDF("sumsig"), roi=roi)
    buffer = result["intensity"]
    native = buffer._native
    arrays = (buffer.data, buffer.raw_data, buffer.valid_mask, native.data, native.raw_data, native.valid_mask)
    for array in arrays:
        assert not array.flags.writeable
        with pytest.raises(ValueError):
            array[...] = 2
    mask = buffer.valid_mask
    assert mask.dtype == np.bool_
    assert mask.sum() == 1 and mask[1, 2]


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int16", "uint16", "int32", "uint64", "float32", "float64",
                                   "complex64"])
def test_builtin_max_is_numpys_max_over_the_scan(ctx, dtype):
    """`builtin:max` in the data's own dtype, as `data.max(axis=nav)` (with a ROI:
    `data[roi].max(axis=0)`), over several partitions; NaN wins as in NumPy."""
    rng = np.random.default_rng(11)
    shape = (5, 7, 6, 9)
    if dtype == "bool":
        data = rng.random(size=shape) < 0.05
    elif dtype == "complex64":
        data = (rng.normal(size=shape) * 300 + 1j * rng.normal(size=shape) * 300).astype(np.complex64)
        data[1, 2, 0, 0], data[2, 3, 0, 0] = 5000 + 7j, 5000 + 1j  # equal real parts: the imaginary decides
    else:
        data = (rng.normal(size=shape) * 300).astype(dtype)
    if dtype == "float64":
        data[3, 1, 2, 2] = np.nan
    ds = ctx.load("memory", data=data, sig_dims=2)
    result = ctx.run_udf(dataset=ds, udf=udf_host.BuiltinUDF("max"), partitions=3)
    got = result["intensity"].data
    assert got.dtype == data.dtype
    np.testing.assert_array_equal(got, data.max(axis=(0, 1)))
    roi = rng.random(size=(5, 7)) < 0.3
    roi[0, 0] = True
    result = ctx.run_udf(dataset=ds, udf=udf_host.BuiltinUDF("max"), roi=roi, partitions=4)
    np.testing.assert_array_equal(result["intensity"].data, data[roi].max(axis=0))
