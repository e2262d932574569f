"""Runs on a Dask cluster (LocalCluster with worker processes on 127.0.0.1): the same
numbers as the command line, partial results, faults."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed", reason="Dask's distributed is not installed (pip install distributed)")

import udf_host  # noqa: E402

from conftest import CACHE, cli, plugin, scan  # noqa: E402

# Workers compile plugins into the tests' cache (and find them there the next time).
os.environ["UDF_HOST_CACHE_DIR"] = str(CACHE)


def local_cluster(workers: int):
    return distributed.LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address=":0", worker_dashboard_address=":0",
    )


@pytest.fixture(scope="module", params=[1, 2, 4], ids=lambda n: f"{n}-workers")
def client(request):
    with local_cluster(request.param) as cluster, distributed.Client(cluster) as client:
        yield client


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A 6 x 7 scan of small integers, its masks and the command line's results with and
    without a ROI."""
    folder = tmp_path_factory.mktemp("dask")
    data = scan(nav=(6, 7), sig=(16, 12), seed=3)
    path = folder / "scan.npy"
    np.save(path, data)
    masks = np.random.default_rng(5).integers(0, 3, size=(2, 16, 12)).astype(np.float32)
    np.save(folder / "masks.npy", masks)
    roi = np.random.default_rng(8).random((6, 7)) < 0.6
    np.save(folder / "roi.npy", roi)
    expected = {}
    for name, extra in [("full", []), ("roi", ["--roi", folder / "roi.npy"])]:
        out = folder / f"cli-{name}"
        cli("run", plugin("sumsig"), plugin("sum"), "builtin:masks", path, "-p", f"masks=@{folder / 'masks.npy'}",
            *extra, "--out", out, "--cache-dir", CACHE, "-q")
        expected[name] = {
            "sumsig": np.load(out / "sumsig/intensity.npy"),
            "sum": np.load(out / "sum/intensity.npy"),
            "masks": np.load(out / "masks/intensity.npy"),
        }
    return path, data, masks, roi, expected


def udfs(masks):
    # A nav-only plugin, a plugin with a custom merge of a sig buffer, and a built-in.
    return [udf_host.WasmUDF(plugin("sumsig")), udf_host.WasmUDF(plugin("sum")), udf_host.BuiltinUDF("masks", masks=masks)]


@pytest.mark.parametrize("partitions", [1, 3, 8, 17])
@pytest.mark.parametrize("with_roi", [False, True], ids=["all", "roi"])
def test_results_equal_the_clis_bit_for_bit(client, dataset, partitions, with_roi):
    path, data, masks, roi, expected = dataset
    ctx = udf_host.Context(executor=udf_host.DaskExecutor(client))
    ds = ctx.load("npy", path=path)
    res = ctx.run_udf(dataset=ds, udf=udfs(masks), roi=roi if with_roi else None, partitions=partitions)
    want = expected["roi" if with_roi else "full"]
    for name, r in zip(["sumsig", "sum", "masks"], res):
        np.testing.assert_array_equal(r["intensity"].data, want[name], err_msg=name)
    if with_roi:
        assert np.isnan(res[0]["intensity"].data[~roi]).all()
        assert (res[0]["intensity"].valid_mask == roi).all()


def test_the_same_run_again_and_again_gives_the_same_result(client):
    # Identical runs back to back ship identical plans: each run's copy must outlive the
    # previous run releasing its own (a content-hashed key was shared and lost).
    # In-memory frames (1 MiB) make the plan large enough for the race to show.
    frames = np.random.default_rng(0).integers(0, 100, size=(64, 64, 8, 8)).astype(np.float32)
    ctx = udf_host.Context(executor=udf_host.DaskExecutor(client))
    ds = ctx.load("memory", data=frames)
    for _ in range(6):
        res = ctx.run_udf(dataset=ds, udf=udf_host.BuiltinUDF("sumsig"), partitions=64)
        np.testing.assert_array_equal(res["intensity"].data, frames.sum(axis=(2, 3)))


def test_run_udf_iter_on_dask_yields_monotone_damage(client, dataset):
    path, data, masks, roi, expected = dataset
    ctx = udf_host.Context(executor=udf_host.DaskExecutor(client))
    ds = ctx.load("npy", path=path)
    seen = []
    for part in ctx.run_udf_iter(dataset=ds, udf=udfs(masks), roi=roi, partitions=8):
        seen.append(part.damage.copy())
        values = part.buffers[0]["intensity"]
        np.testing.assert_array_equal(values.data[part.damage], expected["roi"]["sumsig"][part.damage])
    assert len(seen) >= 2
    for before, after in zip(seen, seen[1:]):
        assert (after >= before).all() and after.sum() > before.sum()
    assert (seen[-1] == roi).all()


def test_plugins_travel_as_bytes_and_failures_raise_udferror(client, dataset):
    path, data, masks, roi, expected = dataset
    ctx = udf_host.Context(executor=udf_host.DaskExecutor(client))
    ds = ctx.load("npy", path=path)
    # From bytes: no worker can read a file at "<bytes>".
    res = ctx.run_udf(dataset=ds, udf=udf_host.WasmUDF(plugin("sumsig").read_bytes()), partitions=5)
    np.testing.assert_array_equal(res["intensity"].data, expected["full"]["sumsig"])
    started = time.perf_counter()
    with pytest.raises(udf_host.UDFError) as caught:
        ctx.run_udf(dataset=ds, udf=udf_host.WasmUDF(plugin("probe_trap"), mode="panic", frame=20), partitions=6)
    e = caught.value
    assert e.plugin == "trap" and e.call == "process" and e.frames[0] <= 20 <= e.frames[1]
    assert any("probe panics at frame 20" in line for line in e.log)
    assert time.perf_counter() - started < 60, "a plugin failure must not be retried in a loop"
    # Anything but a udf_host UDF is refused before planning, as in-process.
    with pytest.raises(TypeError, match=r"expected a udf_host\.UDF subclass, udf_host\.WasmUDF or udf_host\.BuiltinUDF, got object"):
        ctx.run_udf(dataset=ds, udf=object())


def test_an_unreadable_dataset_path_is_named_in_the_error(client, tmp_path):
    data = scan(nav=(2, 3), sig=(4, 4))
    path = tmp_path / "gone.npy"
    np.save(path, data)
    ctx = udf_host.Context(executor=udf_host.DaskExecutor(client))
    ds = ctx.load("npy", path=path)
    path.rename(tmp_path / "moved.npy")  # the client has it open; the workers will not find it
    with pytest.raises(udf_host.DatasetError, match="readable at the same path on every worker"):
        ctx.run_udf(dataset=ds, udf=udf_host.BuiltinUDF("sum"))


def test_a_worker_killed_mid_run_still_gives_the_exact_result(dataset):
    path, data, masks, roi, expected = dataset
    with local_cluster(2) as cluster, distributed.Client(cluster) as client:
        ctx = udf_host.Context(executor=udf_host.DaskExecutor(client, retries=1))
        ds = ctx.load("npy", path=path)
        # A slow companion plugin makes every partition take a while.
        work = udfs(masks) + [udf_host.WasmUDF(plugin("probe_slow"), spin=3_000_000)]
        pids = client.run(os.getpid)
        victim = sorted(pids.values())[0]
        last = None
        killed = False
        for last in ctx.run_udf_iter(dataset=ds, udf=work, partitions=12):
            if not killed:
                os.kill(victim, signal.SIGKILL)
                killed = True
        assert killed and last is not None and last.damage.all()
        for name, r in zip(["sumsig", "sum", "masks"], last.buffers):
            np.testing.assert_array_equal(r["intensity"].data, expected["full"][name], err_msg=name)
        assert victim not in client.run(os.getpid).values(), "the killed worker process was replaced"


def test_the_worker_cache_is_keyed_by_the_plans_content(ctx, scan_file):
    """Issue 33, finding 9: a worker process kept its workers by a caller-supplied id;
    a task of another plan under the same id ran the first plan's worker. The cache is
    keyed by the plan's content; each output names its plan and the merger checks it."""
    from udf_host import _native
    from udf_host.api import _specs

    path, data = scan_file
    ds = ctx.load("auto", path=path)
    plan_a = ctx._engine.plan(ds._native, _specs([udf_host.BuiltinUDF("sum")]), None, 2, 1)
    plan_b = ctx._engine.plan(ds._native, _specs([udf_host.BuiltinUDF("sumsig")]), None, 2, 1)
    _native.run_partition(plan_a.json(), 0, None, plan_a.id())
    merger = plan_b.merger()
    for index in plan_b.partitions():
        merger.merge(_native.run_partition(plan_b.json(), index, None, plan_a.id()), index)
    assert merger.is_complete()
    intensity = merger.results()[0]["intensity"].data
    np.testing.assert_allclose(intensity, data.astype(np.float64).sum(axis=(2, 3)), rtol=1e-5)


def test_a_worker_checks_the_data_before_it_builds_a_plans_partitions(ctx, scan_file, tmp_path):
    """Issue 33, finding 6: a Dask worker built a plan from its JSON (partitions, their
    frames) before it opened the dataset, so a small plan claiming 2^40 frames over a
    6 x 7 file allocated until the process died. The worker opens the data and checks the
    plan's shape against it first (in a child process under a 4 GiB address-space limit,
    which is what the old order ran into)."""
    import json
    import subprocess
    import sys

    from udf_host.api import _specs

    path, _ = scan_file
    ds = ctx.load("auto", path=path)
    plan = json.loads(ctx._engine.plan(ds._native, _specs([udf_host.BuiltinUDF("sum")]), None, 2, 1).json())
    huge = [1 << 40]
    plan["shape"]["nav"] = huge
    plan["meta"]["nav_shape"] = huge
    plan["partitions"] = [[0, 0, 1 << 40]]
    plan_path = tmp_path / "huge.json"
    plan_path.write_text(json.dumps(plan))
    child = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
        "from udf_host import _native\n"
        "try:\n"
        "    _native.run_partition(open(sys.argv[1]).read(), 0)\n"
        "except Exception as e:\n"
        "    print(type(e).__name__, e)\n"
        "    sys.exit(0)\n"
        "sys.exit('the plan ran')\n"
    )
    done = subprocess.run([sys.executable, "-c", child, str(plan_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"the worker died ({done.returncode}): {done.stderr[:1000]}"
    assert "opens here as nav [6, 7]" in done.stdout and "1099511627776" in done.stdout, done.stdout
