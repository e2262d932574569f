"""udf_host.libertem.WasmUDF: the repository's plugins inside LiberTEM 0.16's own Context
(inline and Dask executors, with and without a ROI, a file format, corrections,
run_udf_iter) agree with LiberTEM's own UDFs; the adapter's lifecycle paths (per-frame aux
data, the three processing methods, main-side preprocess, custom merge, custom valid
masks, true coordinates, errors, pickling) agree with NumPy.

LiberTEM is optional: where it is not installed these tests skip (scripts/python-tests.sh
installs libertem==0.16.0 into its venv)."""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pytest

import udf_host

from conftest import CACHE, ROOT, plugin, scan

NOT_INSTALLED = "LiberTEM is not installed here (scripts/python-tests.sh installs libertem==0.16.0)"
RTOL = 1e-5  # float32


@pytest.fixture(scope="module")
def lt():
    """LiberTEM's modules, or a skip saying why."""
    pytest.importorskip("libertem", reason=NOT_INSTALLED)
    from libertem import api
    from libertem.udf import com, masks, stddev, sum, sumsigudf

    return api, sum.SumUDF, sumsigudf.SumSigUDF, stddev.StdDevUDF, masks.ApplyMasksUDF, com.CoMUDF


@pytest.fixture(scope="module", autouse=True)
def compile_cache():
    """Plugins compile into the tests' cache (Dask workers inherit the variable)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("UDF_HOST_CACHE_DIR", str(CACHE))
    yield
    mp.undo()


@pytest.fixture(scope="module")
def inline(lt):
    ctx = lt[0].Context.make_with("inline")
    yield ctx
    ctx.close()


@pytest.fixture(scope="module")
def dask(lt):
    """A LiberTEM Dask executor with two worker processes, everything bound to 127.0.0.1."""
    from distributed import Scheduler
    from libertem.executor.dask import DaskJobExecutor, cluster_spec

    spec = cluster_spec(cpus=2, cudas=(), has_cupy=False, num_service=1, options={"host": "127.0.0.1"})
    scheduler = {"cls": Scheduler, "options": {"host": "127.0.0.1", "dashboard": False}}
    executor = DaskJobExecutor.make_local(spec=spec, cluster_kwargs={"scheduler": scheduler})
    ctx = lt[0].Context(executor=executor)
    yield ctx
    ctx.close()


@pytest.fixture(scope="module")
def threads(lt):
    """LiberTEM's thread-pool executor: partitions of one run at the same time in this process."""
    ctx = lt[0].Context.make_with("threads", cpus=2)
    yield ctx
    ctx.close()


@pytest.fixture(params=["inline", "dask"])
def context(request):
    return request.getfixturevalue(request.param)


def wasm(name, **params):
    from udf_host.libertem import WasmUDF

    return WasmUDF(plugin(name), **params)


DATA = scan(nav=(6, 7), sig=(16, 12))
ROI = np.random.default_rng(7).random((6, 7)) < 0.6
MASKS = np.stack(
    [
        np.ones((16, 12), np.float32),
        (np.indices((16, 12)).sum(axis=0) % 3 == 0).astype(np.float32),
        np.random.default_rng(3).random((16, 12)).astype(np.float32),
    ]
)
COM = dict(cy=7.5, cx=5.0, r=6.0)


def pairs(lt):
    """(plugin, LiberTEM's UDF) pairs that must agree."""
    _, SumUDF, SumSigUDF, StdDevUDF, ApplyMasksUDF, CoMUDF = lt
    return [
        (wasm("sum"), SumUDF()),
        (wasm("sumsig"), SumSigUDF()),
        (wasm("stddev"), StdDevUDF()),
        (wasm("masks", masks=MASKS), ApplyMasksUDF(mask_factories=lambda: MASKS)),
        (wasm("com", regression=np.array([1.0]), **COM), CoMUDF.with_params(regression=1, **COM)),
    ]


def assert_agree(ours: dict, theirs: dict, what: str):
    """Every result LiberTEM's UDF has, ours has, with the same dtype kind and values."""
    assert set(theirs) <= set(ours), f"{what}: missing {set(theirs) - set(ours)}"
    for name, buffer in theirs.items():
        mine = ours[name]
        assert mine.data.shape == buffer.data.shape, f"{what} {name}"
        assert mine.data.dtype.kind == buffer.data.dtype.kind, f"{what} {name}: {mine.data.dtype} {buffer.data.dtype}"
        np.testing.assert_allclose(mine.data, buffer.data, rtol=RTOL, atol=1e-6, err_msg=f"{what} {name}")
        # Flat and ROI-compressed; CoMUDF's field_y/field_x come back as (N, 1) there.
        assert mine.raw_data.size == buffer.raw_data.size, f"{what} {name}"
        np.testing.assert_allclose(
            mine.raw_data.ravel(), buffer.raw_data.ravel(), rtol=RTOL, atol=1e-6, err_msg=f"{what} {name}"
        )
        np.testing.assert_array_equal(mine.valid_mask, buffer.valid_mask, err_msg=f"{what} {name}")


@pytest.mark.parametrize("roi", [None, ROI], ids=["all", "roi"])
@pytest.mark.parametrize("executor", ["inline", "dask", "threads"])
def test_the_plugins_agree_with_libertems_udfs(lt, request, executor, roi):
    context = request.getfixturevalue(executor)
    ds = context.load("memory", data=DATA, sig_dims=2, num_partitions=3)
    udfs = [udf for pair in pairs(lt) for udf in pair]
    results = context.run_udf(dataset=ds, udf=udfs, roi=roi)
    for k in range(0, len(udfs), 2):
        assert_agree(results[k], results[k + 1], type(udfs[k + 1]).__name__)
    if roi is not None:
        # Outside the ROI, nav results hold NaN (LiberTEM's `.data`), inside the frame sums.
        sums = results[2]["intensity"].data
        assert np.isnan(sums[~roi]).all()
        np.testing.assert_allclose(sums[roi], DATA.sum(axis=(2, 3))[roi], rtol=RTOL)


def test_a_file_format_and_corrections_are_libertems(lt, inline, tmp_path):
    from libertem.corrections import CorrectionSet

    path = tmp_path / "scan.npy"
    np.save(path, DATA)
    ds = inline.load("npy", path=path)
    dark = np.random.default_rng(5).integers(0, 3, size=(16, 12)).astype(np.float32)
    _, SumUDF, SumSigUDF, *_ = lt
    udfs = [wasm("sum"), SumUDF(), wasm("sumsig"), SumSigUDF()]
    results = inline.run_udf(dataset=ds, udf=udfs, corrections=CorrectionSet(dark=dark), roi=ROI)
    assert_agree(results[0], results[1], "SumUDF")
    assert_agree(results[2], results[3], "SumSigUDF")
    # And both are what NumPy says the corrected data sums to.
    corrected = DATA.astype(np.float64) - dark
    np.testing.assert_allclose(results[0]["intensity"].data, corrected[ROI].sum(axis=0), rtol=RTOL)


def test_run_udf_iter_grows_damage_and_ends_at_libertems_result(lt, inline):
    ds = inline.load("memory", data=DATA, sig_dims=2, num_partitions=4)
    merged = []
    for part in inline.run_udf_iter(dataset=ds, udf=[wasm("sumsig"), lt[2]()], roi=ROI):
        damage = part.damage.data.copy()
        ours = part.buffers[0]["intensity"]
        # Merged positions are valid and hold their sums; the rest is not valid yet.
        np.testing.assert_array_equal(ours.valid_mask, damage)
        np.testing.assert_allclose(ours.data[damage], DATA.sum(axis=(2, 3))[damage], rtol=RTOL)
        merged.append(damage)
    assert len(merged) >= 3
    for before, after in zip(merged, merged[1:]):
        assert (after >= before).all()
    assert (merged[-1] == ROI).all()
    assert_agree(part.buffers[0], part.buffers[1], "SumSigUDF")


@pytest.mark.parametrize("method", ["tile", "frame", "partition"])
def test_per_frame_aux_data_reaches_every_method(lt, context, method):
    aux = np.random.default_rng(11).random((6, 7, 2)).astype(np.float32)
    ds = context.load("memory", data=DATA, sig_dims=2, num_partitions=3)
    res = context.run_udf(dataset=ds, udf=wasm("probe_aux", aux=aux, method=method), roi=ROI)
    np.testing.assert_array_equal(res["echo"].raw_data, aux[ROI])
    np.testing.assert_array_equal(res["echo"].data[ROI], aux[ROI])


def test_frames_see_their_true_coordinates(lt, inline):
    ds = inline.load("memory", data=DATA, sig_dims=2, num_partitions=3)
    res = inline.run_udf(dataset=ds, udf=wasm("doc_coords"), roi=ROI)
    np.testing.assert_array_equal(res["coords"].raw_data, np.argwhere(ROI))


def test_main_side_preprocess_initialises_the_merged_buffers(lt, context):
    # minmax starts its sig buffers at +-inf on the main side; a zero start would give
    # max(0, ...) and min(0, ...) instead.
    data = DATA.astype(np.float32) + 5
    ds = context.load("memory", data=data, sig_dims=2, num_partitions=3)
    res = context.run_udf(dataset=ds, udf=wasm("probe_minmax"), roi=ROI)
    np.testing.assert_array_equal(res["min"].data, data[ROI].min(axis=0))
    np.testing.assert_array_equal(res["max"].data, data[ROI].max(axis=0))


def test_custom_merge_and_valid_masks_of_get_results(lt, inline):
    # A frame-method plugin with a custom merge of a single buffer and its own valid mask.
    ds = inline.load("memory", data=DATA, sig_dims=2, num_partitions=3)
    seen = 0
    for part in inline.run_udf_iter(dataset=ds, udf=[wasm("doc_valid_mask")]):
        custom = part.buffers[0]["custom_2d"]
        damage = part.damage.data
        np.testing.assert_array_equal(custom.valid_mask, damage)
        np.testing.assert_allclose(custom.data[damage], DATA.sum(axis=(2, 3))[damage], rtol=RTOL)
        seen += 1
    assert seen >= 3 and damage.all()


def test_plugin_failures_are_udferrors_and_bad_params_valueerrors(lt, inline):
    ds = inline.load("memory", data=DATA, sig_dims=2, num_partitions=3)
    with pytest.raises(udf_host.UDFError) as caught:
        inline.run_udf(dataset=ds, udf=wasm("probe_trap", mode="panic", frame=9))
    e = caught.value
    assert e.plugin == "trap" and e.source.endswith("probe_trap.wasm")
    assert e.call == "process" and e.frames == (9, 9) and e.kind == "trap"
    assert any("probe panics at frame 9" in line for line in e.log), e.log
    with pytest.raises(udf_host.UDFError, match="probe rejects frame 3") as caught:
        inline.run_udf(dataset=ds, udf=wasm("probe_trap", mode="error", frame=3))
    assert caught.value.kind == "invalid data"
    with pytest.raises(udf_host.UDFError, match="spiral") as caught:
        inline.run_udf(dataset=ds, udf=wasm("probe_trap", mode="spiral"))
    assert caught.value.call == "init" and caught.value.kind == "bad parameter"
    with pytest.raises(ValueError, match="'sum' has no parameter 'radius'"):
        inline.run_udf(dataset=ds, udf=wasm("sum", radius=3))
    with pytest.raises(ValueError, match=r"aux parameter 'aux' of 'aux' has shape \(5, 2\)"):
        inline.run_udf(dataset=ds, udf=wasm("probe_aux", aux=np.zeros((5, 2), np.float32)))


def test_the_udf_pickles_with_the_plugins_bytes(lt, inline, tmp_path):
    from udf_host.libertem import WasmUDF

    path = tmp_path / "elsewhere.wasm"
    path.write_bytes(plugin("masks").read_bytes())
    udf = WasmUDF(path, masks=MASKS)
    path.unlink()  # the bytes travel with the object, not the path
    copy = pickle.loads(pickle.dumps(udf))
    assert len(pickle.dumps(udf)) > plugin("masks").stat().st_size
    ds = inline.load("memory", data=DATA, sig_dims=2, num_partitions=3)
    a, b, ref = inline.run_udf(dataset=ds, udf=[udf, copy, lt[4](mask_factories=lambda: MASKS)])
    np.testing.assert_array_equal(a["intensity"].data, b["intensity"].data)
    np.testing.assert_allclose(a["intensity"].data, ref["intensity"].data, rtol=RTOL)


def test_udf_host_does_not_import_libertem_and_says_what_is_missing():
    code = "import sys, udf_host; assert 'libertem' not in sys.modules, 'imported libertem'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    hidden = (
        "import sys; sys.modules['libertem'] = None\n"
        "try:\n    import udf_host.libertem\nexcept ImportError as e:\n    print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", hidden], check=True, cwd=ROOT, capture_output=True, text=True)
    assert "udf_host.libertem needs LiberTEM" in done.stdout and "pip install" in done.stdout, done.stdout


def test_dask_workers_load_each_plugin_once_by_its_hash(lt, dask):
    from udf_host import libertem as adapter

    udf = wasm("sumsig")
    sha = udf._kwargs["_udf_host_sha256"]
    ds = dask.load("memory", data=DATA, sig_dims=2, num_partitions=4)

    def loaded():
        return {sha: id(p) for sha, p in adapter._PLUGINS.items()}

    client = dask.executor.client
    dask.run_udf(dataset=ds, udf=udf)
    first = client.run(loaded)
    assert any(sha in plugins for plugins in first.values()), first
    res = dask.run_udf(dataset=ds, udf=wasm("sumsig"))
    np.testing.assert_allclose(res["intensity"].data, DATA.sum(axis=(2, 3)), rtol=RTOL)
    # Each worker process keeps the plugin it loaded: the same object in the next run.
    again = client.run(loaded)
    for worker, plugins in first.items():
        if sha in plugins:
            assert again[worker][sha] == plugins[sha], worker


def test_a_failure_on_a_dask_worker_reaches_the_client_as_udferror(lt, dask):
    ds = dask.load("memory", data=DATA, sig_dims=2, num_partitions=3)
    with pytest.raises(udf_host.UDFError, match="probe panics at frame 9") as caught:
        dask.run_udf(dataset=ds, udf=wasm("probe_trap", mode="panic", frame=9))
    e = caught.value
    assert (e.plugin, e.call, e.frames, e.kind) == ("trap", "process", (9, 9), "trap")


def test_the_adapter_runs_the_hosts_contract_checks(lt, inline):
    """Issue 33, finding 8: the LiberTEM adapter skipped the host's contract checks
    (declarations, exported buffers, get_results) that the CLI and Dask paths run, so a
    plugin returning a private buffer from get_results passed. The same checks run."""
    ds = inline.load("memory", data=DATA, sig_dims=2, num_partitions=3)
    with pytest.raises(udf_host.UDFError, match="private buffer 'pixels'") as caught:
        inline.run_udf(dataset=ds, udf=wasm("broken_private_result"))
    assert caught.value.call == "get_results"
