"""`merge_all` of a LiberTEM UDF class (issue 27) against LiberTEM 0.16.

LiberTEM calls `merge_all(ordered_results)` only in its DelayedJobExecutor; its other
executors call `merge` (by default: copy the nav rows) and refuse a class that has a sig
or single buffer and no `merge`. udf-host does what those executors do where they work
and what the DelayedJobExecutor does where they refuse: so a class is compared with
LiberTEM's inline executor, or with its delayed one where the inline executor refuses it.
"""

from __future__ import annotations

import numpy as np
import pytest

import udf_host
from test_libertem_classes import _compare, _data, _roi, classes, contexts, dask_client  # noqa: F401 (fixtures)


@pytest.fixture(scope="module")
def delayed():
    pytest.importorskip("libertem")
    from libertem.api import Context

    ctx = Context.make_with("delayed")
    yield ctx
    ctx.close()


def _both(lt_ctx, uh_ctx, lt_cls, uh_cls, dtype, roi, **run):
    data = _data(dtype)
    lt_ds = lt_ctx.load("memory", data=data, sig_dims=2, num_partitions=3)
    expected = lt_ctx.run_udf(dataset=lt_ds, udf=lt_cls(), roi=roi)
    uh_ds = uh_ctx.load("memory", data=data, sig_dims=2)
    found = uh_ctx.run_udf(dataset=uh_ds, udf=uh_cls(), roi=roi, **run)
    return expected, found


@pytest.mark.parametrize("dtype", [np.float32, np.uint16])
@pytest.mark.parametrize("with_roi", [False, True])
def test_a_class_with_only_merge_all_gives_libertems_delayed_results(classes, contexts, delayed, dtype, with_roi):
    lt_mod, uh_mod, _ = classes
    roi = _roi() if with_roi else None
    expected, found = _both(delayed, contexts[1], lt_mod.MergeAllSumUDF, uh_mod.MergeAllSumUDF, dtype, roi,
                            partitions=3)
    _compare("MergeAllSumUDF", expected, found)
    # and the inline executor refuses it: merge_all is what made the numbers
    lt_ds = contexts[0].load("memory", data=_data(dtype), sig_dims=2, num_partitions=3)
    with pytest.raises(NotImplementedError):
        contexts[0].run_udf(dataset=lt_ds, udf=lt_mod.MergeAllSumUDF())


@pytest.mark.parametrize("name", ["MergeAndMergeAllUDF", "MergeAllRescalesNavUDF"])
@pytest.mark.parametrize("with_roi", [False, True])
def test_merge_or_the_default_merge_wins_over_merge_all_as_in_libertems_executors(classes, contexts, name, with_roi):
    lt_mod, uh_mod, _ = classes
    roi = _roi() if with_roi else None
    expected, found = _both(contexts[0], contexts[1], getattr(lt_mod, name), getattr(uh_mod, name), np.float32, roi,
                            partitions=3)
    _compare(name, expected, found)


def test_a_merge_all_that_rewrites_earlier_partitions_nav_rows_is_an_error_naming_it(classes, contexts):
    _, uh_mod, _ = classes
    ds = contexts[1].load("memory", data=_data(np.float32), sig_dims=2)
    with pytest.raises(udf_host.UDFError, match="merge_all changed the rows .* of the nav buffer 'frame_sum'"):
        contexts[1].run_udf(dataset=ds, udf=uh_mod.MergeAllRescalesSigAndNavUDF(), partitions=3)


def test_merge_all_on_a_two_worker_dask_cluster_gives_libertems_delayed_results(classes, delayed, dask_client):
    lt_mod, uh_mod, _ = classes
    ctx = udf_host.Context(executor=udf_host.DaskExecutor(dask_client))
    expected, found = _both(delayed, ctx, lt_mod.MergeAllSumUDF, uh_mod.MergeAllSumUDF, np.float32, _roi(),
                            partitions=4)
    # LiberTEM's delayed results are Dask arrays: computed here, not on the cluster the
    # client made the default scheduler (their graph does not travel there).
    import dask

    with dask.config.set(scheduler="synchronous"):
        _compare("MergeAllSumUDF", expected, found)
