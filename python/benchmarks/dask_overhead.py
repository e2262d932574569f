"""What running on Dask costs: the per-task overhead, the merge cost per partition, and the
1 -> 2 worker speed-up of a compute-bound plugin, with the efficiency model's prediction
for 16 and 64 workers (docs/distributed.md).

    python python/benchmarks/dask_overhead.py [--repeat 3]

Uses a LocalCluster on 127.0.0.1 (worker processes, one thread each) and the repository's
plugins (target/wasm-plugins/...; build them with `cargo test` or scripts/demo.sh).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from distributed import Client, LocalCluster

import udf_host

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "target/wasm-plugins/wasm32-wasip2/release"


def timed(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    tiny = rng.integers(0, 100, size=(64, 64, 8, 8)).astype(np.float32)  # 4096 frames, 1 MiB
    heavy = rng.integers(0, 100, size=(64, 64, 128, 128)).astype(np.float32)  # 4096 frames, 256 MiB
    masks = rng.random((64, 128, 128)).astype(np.float32)
    # On files, as on a cluster with a shared file system: the plan names the file (an
    # in-memory dataset would ship its frames inside the plan to every worker, every run).
    folder = Path(tempfile.mkdtemp())
    files = {"tiny": folder / "tiny.npy", "heavy": folder / "heavy.npy"}
    np.save(files["tiny"], tiny)
    np.save(files["heavy"], heavy)

    # Merge cost per partition, on the client: plan here, run the partitions here, time
    # only the merges (a nav-only plugin, and one with a custom merge of a sig buffer).
    local = udf_host.Context(threads=1)
    ds = local.load("memory", data=heavy)
    print("| what | value |")
    print("|---|---:|")
    merge = 0.0
    for label, udf in [("sumsig.wasm (nav, host copies rows)", udf_host.WasmUDF(PLUGINS / "sumsig.wasm")),
                       ("sum.wasm (sig buffer, plugin merge)", udf_host.WasmUDF(PLUGINS / "sum.wasm"))]:
        plan = local._engine.plan(ds._native, [udf._spec()], None, 64, None)
        outputs = [udf_host._native.run_partition(plan.json(), i) for i in plan.partitions()]
        merger = plan.merger()
        started = time.perf_counter()
        for out in outputs:
            merger.merge(out)
        per = (time.perf_counter() - started) / len(outputs)
        merge = max(merge, per)
        print(f"| merge per partition, {label} | {per * 1e3:.2f} ms |")

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        ctx = udf_host.Context(executor=udf_host.DaskExecutor(client))
        tiny_ds = ctx.load("npy", path=files["tiny"])
        cheap = udf_host.BuiltinUDF("sumsig")
        ctx.run_udf(dataset=tiny_ds, udf=cheap, partitions=8)  # warm up the workers
        n = 256
        dask_t = timed(lambda: ctx.run_udf(dataset=tiny_ds, udf=cheap, partitions=n), args.repeat)
        inproc = udf_host.Context(threads=2)
        inproc_ds = inproc.load("npy", path=files["tiny"])
        local_t = timed(lambda: inproc.run_udf(dataset=inproc_ds, udf=cheap, partitions=n), args.repeat)
        overhead = (dask_t - local_t) / n * 2  # two workers run tasks side by side
        print(f"| per-task overhead (Dask, {n} tasks of a trivial UDF, 2 workers) | {overhead * 1e3:.2f} ms |")

        # Compute-bound: 64 dense masks over 256 MiB with the wasm masks plugin, 8 tasks.
        heavy_ds = ctx.load("npy", path=files["heavy"])
        work = udf_host.WasmUDF(PLUGINS / "masks.wasm", masks=masks)
        ctx.run_udf(dataset=heavy_ds, udf=work, partitions=8)
        two = timed(lambda: ctx.run_udf(dataset=heavy_ds, udf=work, partitions=8), args.repeat)
        cluster.scale(1)
        client.wait_for_workers(1)
        while len(client.scheduler_info()["workers"]) > 1:
            time.sleep(0.1)
        one = timed(lambda: ctx.run_udf(dataset=heavy_ds, udf=work, partitions=8), args.repeat)
        print(f"| masks.wasm, 64 masks, 256 MiB, 8 tasks: 1 worker | {one * 1e3:.0f} ms |")
        print(f"| the same, 2 workers | {two * 1e3:.0f} ms ({one / two:.2f}x) |")

        # The model: a worker spends T + overhead per task, the client merges serially, so
        # efficiency = T / (T + overhead + merge) while the client keeps up, and it falls
        # as N * merge / (T + overhead) once N workers deliver faster than one thread merges.
        t_task = one / 8
        for workers in (16, 64):
            per_worker = t_task / (t_task + overhead + merge)
            client_bound = min(1.0, (t_task + overhead) / (workers * merge)) if merge > 0 else 1.0
            print(f"| predicted efficiency, {workers} workers, tasks of {t_task * 1e3:.0f} ms | {per_worker * client_bound:.0%} |")


if __name__ == "__main__":
    main()
