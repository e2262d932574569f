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
