"""`ctx.load("merlin-live" | "dectris-live", ...)` and `run_udf_iter` yielding as frames
arrive, against `udf-host simulate` (Merlin TCP, DECTRIS ZeroMQ) on 127.0.0.1; results
equal NumPy; a scan that ends early raises after its last results and keeps what came."""

from __future__ import annotations

import re
import subprocess
import time

import numpy as np
import pytest

import udf_host

from conftest import CLI, scan
from test_live_simulators import write_mib


def start_simulator(*args: str) -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen([str(CLI), "simulate", *args, "--port", "0", "--acquisitions", "1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = process.stderr.readline()
    found = re.search(r"127\.0\.0\.1:(\d+)", line)
    if found is None:
        process.kill()
        pytest.fail(f"the simulator did not start: {line}{process.stderr.read()}")
    return process, int(found.group(1))


def finish(process: subprocess.Popen) -> None:
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def test_run_udf_iter_yields_as_merlin_frames_arrive(ctx, tmp_path):
    nav = (6, 8)
    frames = scan(nav=nav, sig=(16, 16), seed=7)
    path = tmp_path / "scan.mib"
    write_mib(path, frames, "U16")
    process, port = start_simulator("merlin", str(path), "--nav-shape", "6,8")
    try:
        ds = ctx.load("merlin-live", host="127.0.0.1", port=port, nav_shape=nav, partition_frames=8, start_timeout=30)
        steps = list(ctx.run_udf_iter(ds, [udf_host.BuiltinUDF("sum"), udf_host.BuiltinUDF("sumsig")]))
    finally:
        finish(process)
    assert len(steps) == 6  # one per partition of 8 frames
    assert steps[0].damage.sum() == 8 and steps[-1].damage.all()
    total, per_frame = steps[-1].buffers
    np.testing.assert_array_equal(total["intensity"].data, frames.astype(np.float64).sum(axis=(0, 1)).astype(np.float32))
    np.testing.assert_array_equal(per_frame["intensity"].data, frames.astype(np.float64).sum(axis=(2, 3)).astype(np.float32))


def test_a_dectris_series_that_ends_early_raises_and_keeps_what_came(ctx, tmp_path):
    nav = (5, 6)
    frames = scan(nav=nav, sig=(16, 20), seed=8)
    path = tmp_path / "scan.npy"
    np.save(path, frames)
    process, port = start_simulator("dectris", str(path), "--stall-after", "17")
    try:
        ds = ctx.load("dectris-live", port=port, nav_shape=nav, partition_frames=5, stall_timeout=0.5, start_timeout=30)
        it = ctx.run_udf_iter(ds, udf_host.BuiltinUDF("sumsig"))
        with pytest.raises(udf_host.DatasetError, match="ended early after 17 of 30 frames"):
            for _ in it:
                pass
        results = it.results()
    finally:
        process.terminate()
        finish(process)
    valid = results.damage.reshape(-1)
    assert valid[:17].all() and not valid[17:].any()
    expected = frames.astype(np.float64).sum(axis=(2, 3)).astype(np.float32).reshape(-1)
    np.testing.assert_array_equal(results.buffers["intensity"].raw_data[:17], expected[:17])


def test_live_options_are_checked(ctx):
    with pytest.raises(ValueError, match="nav_shape"):
        ctx.load("merlin-live", host="127.0.0.1")
    with pytest.raises(ValueError, match="unknown option"):
        ctx.load("merlin-live", nav_shape=(2, 2), colour="red")
    ds = ctx.load("merlin-live", port=1, nav_shape=(2, 2), start_timeout=1)
    assert ds.source == "merlin://127.0.0.1:1"
    with pytest.raises(udf_host.DatasetError, match="cannot connect"):
        ctx.run_udf(ds, udf_host.BuiltinUDF("sum"))
