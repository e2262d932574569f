"""The partitions of a LiberTEM UDF class's run: the Python runner's instance (the sandbox
holding the class's module) is made once per worker thread and kept for the thread's next
partition of the run, while every partition still gets a fresh instance of the class, as
LiberTEM gives each partition its own copy of the UDF. Expected values from NumPy and
from the definition of a partition (frames in order, each restarting the count)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import CACHE, cli

SOURCE = '''
import numpy as np
from udf_host import UDF


class CountUDF(UDF):
    """Per frame: how many frames this partition's instance of the class had seen before."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seen = 0

    def get_result_buffers(self):
        return {
            "before": self.buffer(kind="nav", dtype=np.int64),
            "total": self.buffer(kind="sig", dtype=np.float32),
        }

    def process_frame(self, frame):
        self.results.before[:] = self.seen
        self.seen += 1
        self.results.total[:] += frame

    def merge(self, dest, src):
        dest.before[:] = src.before
        dest.total[:] += src.total
'''


#: A memory total that holds one class's run (a main-side and a worker sandbox of ~15 MB
#: each, 2026-11-27) but not a second class's sandboxes besides the first one's kept ones:
#: with the idle sandboxes kept regardless, the second class failed to load at 30-40 MB
#: and ran at 50 MB; the first class alone needs more than 25 MB.
MEMORY_FOR_TWO_SANDBOXES = "36M"


@pytest.mark.parametrize("threads", [1, 2])
def test_a_run_makes_one_runner_instance_per_thread_and_a_fresh_class_per_partition(tmp_path, threads):
    partitions = 6
    data = np.random.default_rng(7).random((4, 12, 8, 8)).astype(np.float32)
    np.save(tmp_path / "data.npy", data)
    (tmp_path / "count.py").write_text(SOURCE)
    out = tmp_path / "out"
    cli("run", f"{tmp_path / 'count.py'}:CountUDF", tmp_path / "data.npy", "--out", out, "--cache-dir", CACHE,
        "--threads", threads, "--partitions", partitions, "-q")

    np.testing.assert_allclose(np.load(out / "CountUDF/total.npy"), data.sum(axis=(0, 1)), rtol=1e-5)
    before = np.load(out / "CountUDF/before.npy").reshape(-1)
    # Each partition's class instance starts at 0 and counts its own frames only: a count
    # carried over from another partition would never come back to 0.
    starts = np.flatnonzero(before == 0)
    assert len(starts) == partitions, before
    for start, end in zip(starts, [*starts[1:], len(before)]):
        np.testing.assert_array_equal(before[start:end], np.arange(end - start))

    resources = json.loads((out / "results.json").read_text())["udfs"][0]["resources"]
    # One runner instance per worker thread at most, not one per partition.
    assert 1 <= resources["instances"] <= threads, resources


SCALED = '''
import numpy as np
from udf_host import UDF


class ScaledSumUDF(UDF):
    def __init__(self, scale, fail_at=-1, loop_at=-1):
        super().__init__(scale=scale, fail_at=fail_at, loop_at=loop_at)

    def get_result_buffers(self):
        return {"total": self.buffer(kind="sig", dtype=np.float32),
                "frame": self.buffer(kind="nav", dtype=np.float32)}

    def process_frame(self, frame):
        index = int(self.meta.coordinates[0][-1])
        if index == self.params.fail_at:
            raise ValueError("fail_at reached")
        while index == self.params.loop_at:
            pass
        self.results.total[:] += frame * self.params.scale
        self.results.frame[:] = np.sum(frame) * self.params.scale

    def merge(self, dest, src):
        dest.total[:] += src.total
        dest.frame[:] = src.frame
'''


def test_runs_of_one_class_in_one_context_take_their_own_parameters_also_after_a_failed_run(tmp_path):
    """The runner's instances outlive a run (kept for the next run of the class): each
    run still sees its own parameters, and a run that failed (an exception, a timeout
    that stops the instance) leaves nothing behind for the next."""
    import udf_host
    from conftest import module_from_file

    module, _ = module_from_file(tmp_path, "scaled_sum", SCALED)
    data = np.random.default_rng(3).random((3, 10, 6, 5)).astype(np.float32)
    ctx = udf_host.Context(threads=2, cache_dir=CACHE, timeout=3.0)
    ds = ctx.load("memory", data=data)

    def check(scale):
        result = ctx.run_udf(dataset=ds, udf=module.ScaledSumUDF(scale=scale), partitions=4)
        np.testing.assert_allclose(result["total"].data, data.sum(axis=(0, 1)) * scale, rtol=1e-5)
        np.testing.assert_allclose(result["frame"].data, data.sum(axis=(2, 3)) * scale, rtol=1e-5)

    check(1.0)
    check(3.0)
    with pytest.raises(udf_host.UDFError, match="fail_at reached"):
        ctx.run_udf(dataset=ds, udf=module.ScaledSumUDF(scale=2.0, fail_at=4), partitions=4)
    check(-2.0)
    with pytest.raises(udf_host.UDFError, match="(?i)time"):
        ctx.run_udf(dataset=ds, udf=module.ScaledSumUDF(scale=2.0, loop_at=7), partitions=4)
    check(0.5)


def test_idle_sandboxes_of_one_class_give_way_to_another_class_under_a_tight_memory_total(tmp_path):
    """Kept runner instances hold their memory (counted in `max_memory_total`): when a
    new one does not fit, the idle ones of other classes are given up first, so a run of
    class B after class A fits where it would fit alone."""
    import udf_host
    from conftest import module_from_file

    module, _ = module_from_file(tmp_path, "scaled_sum_b", SCALED)
    other, _ = module_from_file(tmp_path, "count_b", SOURCE)
    data = np.random.default_rng(5).random((2, 6, 6, 5)).astype(np.float32)
    ctx = udf_host.Context(threads=1, cache_dir=CACHE, max_memory_total=MEMORY_FOR_TWO_SANDBOXES)
    ds = ctx.load("memory", data=data)
    ctx.run_udf(dataset=ds, udf=other.CountUDF(), partitions=2)
    result = ctx.run_udf(dataset=ds, udf=module.ScaledSumUDF(scale=2.0), partitions=2)
    np.testing.assert_allclose(result["total"].data, data.sum(axis=(0, 1)) * 2.0, rtol=1e-5)
