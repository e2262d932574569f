"""The runner travels by identity (issue 27): a `ClassUDF` that LiberTEM pickles into every
task carries the runner's SHA-256, not its 20 MB, and a worker runs it with its own
installed runner when the hashes match; with another runner it says so, naming both."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from conftest import CACHE
from test_libertem_classes import _compare, _data, classes, contexts  # noqa: F401 (fixtures)

WORKER = """
import pickle, sys
import numpy as np
sys.path.insert(0, sys.argv[2])
import uh_classes  # the class's module, as a LiberTEM worker would import it
from libertem.api import Context
udf = pickle.loads(open(sys.argv[1], "rb").read())
ctx = Context.make_with("inline")
data = np.load(sys.argv[3])
ds = ctx.load("memory", data=data, sig_dims=2, num_partitions=3)
result = ctx.run_udf(dataset=ds, udf=udf)
np.save(sys.argv[4], np.asarray(result["intensity"].data))
"""


def _worker(tmp_path, udf, env=None):
    """Unpickle `udf` in a fresh process (a LiberTEM worker) and run it there."""
    where = tmp_path / "udf.pickle"
    where.write_bytes(pickle.dumps(udf))
    np.save(tmp_path / "data.npy", _data(np.float32))
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    return subprocess.run(
        [sys.executable, str(script), str(where), str(tmp_path.parent), str(tmp_path / "data.npy"),
         str(tmp_path / "out.npy")], capture_output=True, text=True, env={**os.environ, "UDF_HOST_CACHE_DIR": str(CACHE), **(env or {})})


def test_a_pickled_class_udf_carries_the_runners_hash_not_its_bytes(classes):
    from udf_host.libertem import ClassUDF

    _, uh_mod, _ = classes
    by_identity = len(pickle.dumps(ClassUDF(uh_mod.SumUDF())))
    with_bytes = len(pickle.dumps(ClassUDF(uh_mod.SumUDF(), send_runner=True)))
    assert by_identity < 100_000, by_identity
    assert with_bytes > 10_000_000, with_bytes


def test_a_worker_runs_the_class_with_its_own_runner(classes, contexts):
    from udf_host.libertem import ClassUDF

    lt_mod, uh_mod, where = classes
    (where / "identity").mkdir()
    done = _worker(where / "identity", ClassUDF(uh_mod.SumUDF()))
    assert done.returncode == 0, done.stderr
    lt_ds = contexts[0].load("memory", data=_data(np.float32), sig_dims=2, num_partitions=3)
    expected = contexts[0].run_udf(dataset=lt_ds, udf=lt_mod.SumUDF())
    np.testing.assert_allclose(np.load(where / "identity/out.npy"), expected["intensity"].data, rtol=1e-5)


def test_a_worker_with_another_runner_names_both_hashes(classes, tmp_path):
    from udf_host.class_spec import runner_identity
    from udf_host.libertem import ClassUDF

    _, uh_mod, where = classes
    other = tmp_path / "other-runner.wasm"
    other.write_bytes(b"\0asm not the runner")
    (where / "other").mkdir()
    done = _worker(where / "other", ClassUDF(uh_mod.SumUDF()), env={"UDF_HOST_RUNNER": str(other)})
    assert done.returncode != 0
    assert runner_identity()[2] in done.stderr, done.stderr
    assert "send_runner=True" in done.stderr, done.stderr
