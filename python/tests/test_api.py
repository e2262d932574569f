"""The API around the numbers: loading, describing, ROIs, partial results, errors,
interruption and pickling."""

from __future__ import annotations

import _thread
import json
import os
import pickle
import signal
import sys
import threading
import time

import numpy as np
import pytest

import udf_host

from conftest import CACHE, CLI, cli, plugin, scan


def test_load_reads_every_option_the_cli_has(ctx, tmp_path):
    data = scan(nav=(4, 5), sig=(8, 6), dtype=np.dtype(">u2"))
    raw = tmp_path / "scan.raw"
    raw.write_bytes(b"\0" * 32 + data.tobytes())
    ds = ctx.load("raw", path=raw, dtype=">u2", nav_shape=(4, 5), sig_shape=(8, 6), offset=32)
    assert ds.shape == (4, 5, 8, 6) and ds.nav_shape == (4, 5) and ds.sig_shape == (8, 6)
    assert ds.dtype == np.dtype(">u2") and ds.format == "raw"
    res = ctx.run_udf(dataset=ds, udf=udf_host.BuiltinUDF("sum"))
    np.testing.assert_array_equal(res["intensity"].data, data.astype(np.float64).sum(axis=(0, 1)))
    # sync_offset skips leading frames (the last two are blank).
    shifted = ctx.load("raw", path=raw, dtype=">u2", nav_shape=(4, 5), sig_shape=(8, 6), offset=32, sync_offset=2)
    sums = ctx.run_udf(dataset=shifted, udf=udf_host.BuiltinUDF("sumsig"))["intensity"].data.ravel()
    np.testing.assert_array_equal(sums[:-2], data.astype(np.float64).sum(axis=(2, 3)).ravel()[2:])
    assert (sums[-2:] == 0).all()


def test_info_and_describe_print_what_the_cli_prints(ctx, scan_file):
    path, _ = scan_file
    ds = ctx.load("auto", path=path)
    assert ds.info(threads=2) == cli("info", path, "--threads", "2").stdout
    assert ds.info_dict(threads=2)["nav_shape"] == [6, 7]
    assert udf_host.BuiltinUDF("ring").describe() == cli("inspect", "builtin:ring").stdout
    described = udf_host.WasmUDF(plugin("sum")).describe().splitlines()
    inspected = cli("inspect", plugin("sum")).stdout.splitlines()
    # The same but for the load time.
    assert [line for line in described if "loaded in" not in line] == [line for line in inspected if "loaded in" not in line]
    assert udf_host.builtins()[:2] == ["sum", "sumsig"] and "com" in udf_host.builtins()
    assert udf_host.CONTRACT.startswith("udf:plugin@")


def test_bad_input_raises_the_cli_messages(ctx, tmp_path):
    with pytest.raises(udf_host.DatasetError, match="cannot open"):
        ctx.load("npy", path=tmp_path / "missing.npy")
    np.save(tmp_path / "s.npy", scan(nav=(2, 2), sig=(4, 4)))
    with pytest.raises(ValueError, match="unknown dataset option 'nav_shap'"):
        ctx.load("npy", path=tmp_path / "s.npy", nav_shap=(4,))
    with pytest.raises(ValueError, match="unknown filetype 'mibb'"):
        ctx.load("mibb", path=tmp_path / "s.npy")
    ds = ctx.load("npy", path=tmp_path / "s.npy")
    with pytest.raises(ValueError, match="has no parameter 'radius'"):
        ctx.run_udf(dataset=ds, udf=udf_host.BuiltinUDF("sum", radius=3))
    with pytest.raises(ValueError, match="must be float"):
        ctx.run_udf(dataset=ds, udf=udf_host.BuiltinUDF("ring", cx="middle", cy=2, ri=1, ro=2))
    with pytest.raises(ValueError, match="the ROI has shape"):
        ctx.run_udf(dataset=ds, udf=udf_host.BuiltinUDF("sum"), roi=np.ones(5, bool))
    with pytest.raises(ValueError, match="there is no built-in 'summ'"):
        udf_host.BuiltinUDF("summ")
    with pytest.raises(TypeError, match=r"expected a udf_host\.UDF subclass, udf_host\.WasmUDF or udf_host\.BuiltinUDF, got object"):
        ctx.run_udf(dataset=ds, udf=object())


def test_roi_fills_nav_results_outside_it_like_libertem(ctx, scan_file):
    path, data = scan_file
    roi = np.zeros(data.shape[:2], bool)
    roi[1:3, 2:6] = True
    ds = ctx.load("auto", path=path)
    res = ctx.run_udf(dataset=ds, udf=[udf_host.WasmUDF(plugin("probe_contract")), udf_host.BuiltinUDF("sum")], roi=roi)
    visits, scaled = res[0]["visits"], res[0]["scaled"]
    assert visits.dtype == np.uint32 and scaled.dtype == np.float64
    assert (visits.data[roi] == 1).all() and (visits.data[~roi] == 0).all()
    assert np.isnan(scaled.data[~roi]).all() and not np.isnan(scaled.data[roi]).any()
    assert (visits.valid_mask == roi).all()
    assert visits.raw_data.shape == (roi.sum(),)
    assert visits.masked_data.mask.tolist() == (~roi).tolist()
    np.testing.assert_array_equal(res[1]["intensity"].data, data[roi].astype(np.float64).sum(axis=0))
    # A flat ROI works as well.
    flat = ctx.run_udf(dataset=ds, udf=udf_host.BuiltinUDF("sum"), roi=roi.ravel())
    np.testing.assert_array_equal(flat["intensity"].data, res[1]["intensity"].data)


def test_run_udf_iter_yields_growing_damage_until_all_is_merged(ctx, scan_file):
    path, data = scan_file
    ds = ctx.load("auto", path=path)
    seen = []
    for part in ctx.run_udf_iter(dataset=ds, udf=udf_host.BuiltinUDF("sumsig"), partitions=5):
        assert part.damage.shape == data.shape[:2] and part.damage.dtype == bool
        # Merged positions hold their values; the others keep the initial zeros and are
        # invalid (as in LiberTEM), so the masked data hides them.
        buf = part.buffers["intensity"]
        expected = data.astype(np.float64).sum(axis=(2, 3))
        np.testing.assert_array_equal(buf.data[part.damage], expected[part.damage])
        assert (buf.data[~part.damage] == 0).all()
        assert (buf.valid_mask == part.damage).all() and (buf.masked_data.mask == ~part.damage).all()
        seen.append(part.damage.copy())
    assert len(seen) == 5
    for before, after in zip(seen, seen[1:]):
        assert (after >= before).all() and after.sum() > before.sum()
    assert seen[-1].all()


def test_update_parameters_changes_later_partitions(scan_file):
    path, data = scan_file
    # One thread and a slow companion plugin: partitions run one after the other, each
    # long enough that the update (made right after the first merge) reaches every
    # partition but the one or two that started before it.
    ctx = udf_host.Context(threads=1)
    ds = ctx.load("auto", path=path)
    udfs = [udf_host.WasmUDF(plugin("probe_contract"), scale=1.0), udf_host.WasmUDF(plugin("probe_slow"), spin=2_000_000)]
    with ctx.run_udf_iter(dataset=ds, udf=udfs, partitions=7) as it:
        first = next(it)
        it.update_parameters_experimental([{"scale": 3.0}, {}])
        last = None
        for last in it:
            pass
    scaled = last.buffers[0]["scaled"].data.ravel()
    before = first.damage.ravel()
    assert (scaled[before] == 1.0).all(), "the first partition ran with the first value"
    assert set(np.unique(scaled)) <= {1.0, 3.0}
    # One thread runs the partitions in order: once a partition saw the new value, every
    # later one did. How many started before the update depends on the machine's load;
    # the last (frames 36..41 of 42 in 7 partitions of 6) starts long after it.
    changed = np.flatnonzero(scaled == 3.0)
    assert changed.size and (scaled[changed[0]:] == 3.0).all(), scaled
    assert (scaled[36:] == 3.0).all(), scaled


def test_a_failing_plugin_raises_udferror_with_where_and_its_log(ctx, scan_file):
    path, _ = scan_file
    ds = ctx.load("auto", path=path)
    with pytest.raises(udf_host.UDFError) as caught:
        ctx.run_udf(dataset=ds, udf=udf_host.WasmUDF(plugin("probe_trap"), mode="panic", frame=9))
    e = caught.value
    assert e.plugin == "trap" and e.source.endswith("probe_trap.wasm")
    assert e.call == "process" and isinstance(e.partition, int)
    first, last = e.frames
    assert first <= 9 <= last
    assert e.kind == "trap"
    assert any("probe panics at frame 9" in line for line in e.log), e.log
    with pytest.raises(udf_host.UDFError) as caught:
        ctx.run_udf(dataset=ds, udf=udf_host.WasmUDF(plugin("probe_trap"), mode="error", frame=3))
    assert caught.value.kind == "invalid data" and "probe rejects frame 3" in str(caught.value)


def test_ctrl_c_stops_a_long_run_promptly(ctx):
    """Ctrl-C (KeyboardInterrupt) during `run_udf` stops the run: the plugin call in flight
    is interrupted and no new partition starts, so `run_udf` raises long before the run
    could have finished.

    It failed as "DID NOT RAISE" when pytest was started in the background by a
    non-interactive shell (`cmd &`, nohup), which starts it with SIGINT ignored: Python
    then keeps it ignored and `interrupt_main` does nothing. The test installs Python's
    own handler for its duration. The run takes over a minute (256 frames of ~0.35 s on
    one thread, more under load); the deadline from the interrupt to the raise is 30 s,
    generous for a stop that takes one epoch tick."""
    data = scan(nav=(16, 16), sig=(4, 4))
    ds = ctx.load("memory", data=data)
    slow = udf_host.WasmUDF(plugin("probe_slow"), spin=1_000_000_000)
    single = udf_host.Context(threads=1)
    fired = []

    def press():
        fired.append(time.perf_counter())
        _thread.interrupt_main()

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, press)
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            single.run_udf(dataset=ds, udf=slow, partitions=16)
        stopped = time.perf_counter()
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert fired, "the run ended before Ctrl-C was pressed"
    assert stopped - fired[0] < 30, f"the run went on for {stopped - fired[0]:.1f} s after Ctrl-C"


def test_udfs_datasets_and_results_pickle(ctx, scan_file, tmp_path):
    path, data = scan_file
    ds = ctx.load("auto", path=path)
    mem = ctx.load("memory", data=data[:2, :3])
    wasm = udf_host.WasmUDF(plugin("sum"))
    masks = udf_host.BuiltinUDF("masks", masks=np.ones((2, *data.shape[2:]), np.float32))
    ds2, mem2, wasm2, masks2 = pickle.loads(pickle.dumps((ds, mem, wasm, masks)))
    assert ds2.shape == ds.shape and ds2.dtype == ds.dtype and ds2.path == ds.path
    assert mem2.shape == (2, 3, *data.shape[2:])
    assert wasm2.wasm == wasm.wasm and wasm2.path == wasm.path
    np.testing.assert_array_equal(masks2.params["masks"], masks.params["masks"])
    a = ctx.run_udf(dataset=ds2, udf=[wasm2, masks2])
    b = ctx.run_udf(dataset=ds, udf=[wasm, masks])
    for x, y in zip(a, b):
        for name in x:
            np.testing.assert_array_equal(x[name].data, y[name].data)
    np.testing.assert_array_equal(
        ctx.run_udf(dataset=mem2, udf=udf_host.BuiltinUDF("sum"))["intensity"].data,
        data[:2, :3].astype(np.float64).sum(axis=(0, 1)),
    )
    # A plugin given as bytes needs no file.
    raw = udf_host.WasmUDF(plugin("sumsig").read_bytes())
    assert raw.path == "<bytes>" and "sumsig" in raw.describe()


def test_the_readme_example_runs(scan_file, monkeypatch):
    """The README's "From Python" snippet, run as written (the plugin path pointed at the
    test build of the same plugin)."""
    from conftest import ROOT

    path, data = scan_file
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## From Python") :]
    code = section[section.index("```python") + len("```python") : section.index("```", section.index("```python") + 9)]
    code = code.replace("target/wasm32-wasip2/release/sumsig.wasm", str(plugin("sumsig")))
    monkeypatch.chdir(path.parent)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    np.testing.assert_array_equal(namespace["total"]["intensity"].data, data.astype(np.float64).sum(axis=(2, 3)))
    assert namespace["ring"]["intensity"].data.shape == data.shape[:2]


def test_limits_and_device_reach_the_engine(scan_file):
    path, data = scan_file
    with pytest.raises(ValueError, match="device must be 'cpu', 'cuda' or 'auto', got 'tpu'"):
        udf_host.Context(device="tpu")
    with pytest.raises(ValueError, match="max-memory-total must be at least 16 MiB"):
        udf_host.Context(max_memory_total="1M")
    # `auto` computes on the CPU where there is no GPU (or no CUDA in this build) and gives
    # the same numbers as NumPy.
    auto = udf_host.Context(threads=2, cache_dir=CACHE, device="auto")
    ds = auto.load("auto", path=path)
    total = auto.run_udf(dataset=ds, udf=udf_host.BuiltinUDF("sum"))["intensity"].data
    np.testing.assert_array_equal(total, data.sum(axis=(0, 1), dtype=np.float64).astype(total.dtype))
    # `cuda` without a usable GPU is an error naming the cause, not a silent CPU run.
    if not os.environ.get("UDF_HOST_EXPECT_GPU"):
        cuda = udf_host.Context(threads=2, cache_dir=CACHE, device="cuda")
        with pytest.raises(ValueError, match="asks for the CUDA device"):
            cuda.run_udf(dataset=cuda.load("auto", path=path), udf=udf_host.BuiltinUDF("sum"))
    # A total memory budget smaller than what one instance may grow to stops a plugin that
    # hoards memory with a message naming the budget.
    small = udf_host.Context(threads=1, cache_dir=CACHE, max_memory="1G", max_memory_total="24M")
    with pytest.raises(udf_host.UDFError, match="total memory budget of 24 MiB"):
        small.run_udf(
            dataset=small.load("auto", path=path),
            udf=udf_host.WasmUDF(plugin("probe_hostile"), attack="allocate", at="process"),
        )


def test_the_readmes_libertem_class_runs(scan_file, monkeypatch, tmp_path):
    """The README's LiberTEM class snippet (the second Python block of "From Python"), as a
    module of its own (a class's source must be readable to travel)."""
    import importlib.util

    from conftest import ROOT

    path, data = scan_file
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## From Python") : readme.index("## Live acquisition")]
    blocks = section.split("```python")[1:]
    code = blocks[1][: blocks[1].index("```")]
    module_file = tmp_path / "readme_class.py"
    module_file.write_text(code)
    monkeypatch.chdir(path.parent)
    spec = importlib.util.spec_from_file_location("readme_class", module_file)
    module = importlib.util.module_from_spec(spec)
    sys.modules["readme_class"] = module
    spec.loader.exec_module(module)
    np.testing.assert_array_equal(module.res["maxbuf"].data, data.max(axis=(0, 1)).astype(np.float32))
