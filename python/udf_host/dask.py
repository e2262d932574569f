"""Running partitions on a Dask cluster: `Context(executor=DaskExecutor(client))`.

The run is planned once on the client (`udf_host` made the plan: partitions, tiling,
parameters, plugin hashes); the plan's JSON is scattered to the workers once; each task
runs one partition on a worker (`_native.run_partition`, which keeps the opened dataset and
the compiled plugins per worker process) and returns its output as bytes; the client merges
them in completion order with the host's merger, so partial results, damage and ROIs work
as in-process. Plugins travel as bytes once per worker (a Dask worker plugin, checked by
hash), never per task.

Only the client needs this module's imports to succeed; workers need `udf_host` installed
and the dataset readable at the same path.
"""

from __future__ import annotations

import uuid
from typing import Any

from . import _native
from .api import _ResultIteratorBase, _roi_array, _specs
from .udf import WasmUDF

__all__ = ["DaskExecutor"]

try:  # distributed is an optional dependency
    from distributed import as_completed
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError as e:  # pragma: no cover - exercised only without distributed
    raise ImportError(
        "udf_host.DaskExecutor needs Dask's distributed package: pip install distributed "
        "(or pip install './python[dask]')"
    ) from e


class _Plugins(WorkerPlugin):
    """Installs plugin bytes in every worker process, once (and in workers that join
    later): what `run_partition` loads plugins from, by hash."""

    def __init__(self, plugins: dict[str, bytes]):
        self.plugins = plugins

    def setup(self, worker) -> None:
        for sha256, wasm in self.plugins.items():
            if _native.install_plugin(wasm) != sha256:
                raise ValueError(f"plugin bytes do not hash to {sha256}")


def _run_partition(plan_json: str, plan_id: str, index: int, params_json: str | None) -> bytes:
    """A Dask task: one partition of the plan, on this worker."""
    try:
        return _native.run_partition(plan_json, index, params_json, plan_id)
    except _native.DatasetError as e:
        try:
            from distributed import get_worker

            where = f"on worker {get_worker().address}"
        except Exception:  # noqa: BLE001 - outside a worker (tests)
            where = "on a worker"
        raise _native.DatasetError(
            f"{where}: {e}. The dataset must be readable at the same path on every worker "
            "(a shared file system)"
        ) from None


def _infrastructure_failure(error: BaseException) -> bool:
    """Whether a task failed because of the cluster (a worker died, a connection broke)
    rather than because of the data or a plugin: such tasks are retried."""
    names = {type(error).__name__, *(c.__name__ for c in type(error).__mro__)}
    return bool(names & {"KilledWorker", "CommClosedError", "FutureCancelledError", "StreamClosedError"})


class DaskExecutor:
    """Runs partitions on a Dask cluster (`distributed.Client`).

    `retries`: how often a partition whose worker died is run again (a failing plugin or
    unreadable data is never retried: it raises as in-process). `window`: tasks in flight
    (default: twice the cluster's threads), which bounds the memory of outputs waiting to
    be merged.
    """

    def __init__(self, client, retries: int = 1, window: int | None = None):
        self.client = client
        self.retries = int(retries)
        self.window = window
        self._installed: set[str] = set()

    def threads(self) -> int:
        workers = self.client.scheduler_info()["workers"]
        return max(1, sum(w.get("nthreads", 1) for w in workers.values()))

    def _install_plugins(self, udfs: list) -> None:
        wasm = {}
        for udf in udfs:
            if isinstance(udf, WasmUDF) and udf.sha256 not in self._installed:
                wasm[udf.sha256] = udf.wasm
        if wasm:
            name = "udf-host-plugins-" + "-".join(sorted(h[:16] for h in wasm))
            self.client.register_plugin(_Plugins(wasm), name=name)
            self._installed.update(wasm)

    def run_udf_iter(self, ctx, dataset, udfs: list, single: bool, roi, progress: bool, partitions):
        threads = self.threads()
        plan = ctx._engine.plan(dataset._native, _specs(udfs, roi), _roi_array(roi), partitions, threads)
        self._install_plugins(udfs)
        return DaskResultIterator(self, plan, single, progress, self.window or 2 * threads)


class _Progress:
    """What `_ProgressBar` reads: frames merged of frames to do."""

    def __init__(self, merger, total: int):
        self.merger = merger
        self.frames_total = total

    @property
    def frames_done(self) -> int:
        return self.merger.frames_merged


class DaskResultIterator(_ResultIteratorBase):
    """`run_udf_iter` on Dask (see `udf_host.api._ResultIteratorBase` for what it
    offers): a `UDFResults` after each merged partition, in completion order. New
    parameters apply to tasks submitted afterwards; `close()` cancels the outstanding
    tasks."""

    def __init__(self, executor: DaskExecutor, plan, single: bool, progress: bool, window: int):
        self._executor = executor
        self._client = executor.client
        self._merger = plan.merger()
        self._frames_total = plan.frames_total
        # A key of its own per run: with the content hash as key, a run that releases
        # the plan while the next identical run scatters it again loses the next run's copy.
        self._plan = self._client.scatter(plan.json(), broadcast=True, hash=False)
        self._plan_id = plan.id()
        self._params: str | None = None
        self._todo = list(plan.partitions())
        self._attempts: dict[int, int] = {}
        self._window = max(1, window)
        self._run = uuid.uuid4().hex[:12]
        self._flight: dict[Any, int] = {}
        self._completed = as_completed()
        super().__init__(self._merger, _Progress(self._merger, self._frames_total), single, progress)
        self._fill()

    def _submit(self, index: int) -> None:
        attempt = self._attempts.get(index, 0)
        future = self._client.submit(
            _run_partition, self._plan, self._plan_id, index, self._params,
            key=f"udf-host-{self._run}-{index}-{attempt}", pure=False, retries=0,
        )
        self._flight[future] = index
        self._completed.add(future)

    def _fill(self) -> None:
        while self._todo and len(self._flight) < self._window:
            self._submit(self._todo.pop(0))

    def _retry(self, index: int) -> bool:
        """Submit partition `index` again if it has attempts left."""
        attempts = self._attempts.get(index, 0)
        if attempts >= self._executor.retries:
            return False
        self._attempts[index] = attempts + 1
        self._submit(index)
        return True

    def _advance(self) -> bool:
        while self._flight:
            future = next(self._completed)
            index = self._flight.pop(future)
            if future.status == "error":
                error = future.exception()
                if _infrastructure_failure(error) and self._retry(index):
                    continue
                raise error
            if future.status == "cancelled":
                if self._retry(index):
                    continue
                raise RuntimeError(f"partition {index} was cancelled")
            output = future.result()
            future.release()
            self._merger.merge(output, index)
            self._fill()
            self._progress.update()
            return True
        if not self._merger.is_complete():
            # Every task ended, each merged or raised: never a finished run with a
            # partition missing.
            raise RuntimeError(
                f"the run ended with {self._merger.frames_merged} of {self._frames_total} frames merged: "
                "a partition neither merged nor failed (a bug in udf-host; please report it)"
            )
        return False

    def _update_params(self, index: int, params: dict) -> None:
        self._params = self._merger.update_params(index, params)

    def _stop(self) -> None:
        if self._flight:
            self._client.cancel(list(self._flight))
            self._flight.clear()
        self._todo.clear()
