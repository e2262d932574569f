"""LiberTEM UDF classes in plain NumPy: udf-host against LiberTEM 0.16 (issue 27, item 4).

    python python/benchmarks/libertem_classes.py [--rounds 3] [--dir /tmp] [--executors inline,threads,dask]

(scripts/bench-libertem-classes.sh builds the release wheel, makes a venv with LiberTEM
0.16 and runs this.) The classes are python/tests/libertem_classes/classes.py's `SumUDF`,
`SumSigUDF`, `StdDevUDF` and `ApplyMasksUDF` (16 masks): loaded twice, as written (`from
libertem.udf import UDF`, run by LiberTEM) and with that import changed to `from udf_host
import UDF` (run by udf-host, sandboxed in its Python runner). Datasets: a 1 GiB float32
and a 512 MiB uint16 `.npy` of 64 × 64 frames of 256 × 256 (written when missing, read
from the page cache). Each round runs every case once on udf-host and once on each
LiberTEM executor (Context.make_with("inline"), "threads", and the default
DaskJobExecutor `Context()`), in turn; the table gives the best of the rounds, LiberTEM's
best executor, and checks that both give the same numbers. Then the first run of a class
no process has seen, in a fresh process, against its second run (the runner compiled once
per machine; the class travels as data).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import udf_host

ROOT = Path(__file__).resolve().parents[2]
CLASSES = ROOT / "python/tests/libertem_classes/classes.py"
LIBERTEM_IMPORT = "from libertem.udf import UDF"
UDF_HOST_IMPORT = "from udf_host import UDF"
NAV, SIG = (64, 64), (256, 256)
CASES = ["SumUDF", "SumSigUDF", "StdDevUDF", "ApplyMasksUDF"]
MASKS = 16


def dataset(folder: Path, dtype) -> Path:
    """The benchmark's `.npy` (written as python/benchmarks/throughput.py writes its own)."""
    from throughput import dataset as write

    return write(folder, f"udf-host-bench-classes-{np.dtype(dtype).name}-{NAV[0]}x{NAV[1]}.npy", dtype, NAV, SIG)


def load_classes(folder: Path):
    """classes.py as LiberTEM runs it and with the import changed for udf-host."""
    text = CLASSES.read_text()
    out = []
    for name, source in (("bench_lt_classes", text), ("bench_uh_classes", text.replace(LIBERTEM_IMPORT, UDF_HOST_IMPORT))):
        path = folder / f"{name}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        out.append(module)
    return out


def make(module, name: str):
    cls = getattr(module, name)
    if name == "ApplyMasksUDF":
        masks = np.random.default_rng(16).random((MASKS, *SIG)).astype(np.float32)
        return cls(masks=masks)
    return cls()


def timed(fn) -> tuple[float, object]:
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def results_of(result, name: str) -> dict:
    """The buffers each backend returns, as NumPy arrays."""
    keys = {"StdDevUDF": ("mean", "var", "std")}.get(name, ("intensity",))
    return {k: np.asarray(result[k].data) for k in keys}


def agree(a: dict, b: dict) -> bool:
    return all(np.allclose(a[k], b[k], rtol=1e-4, atol=1e-3) for k in a)


FIRST_RUN = r"""
import json, sys, time, numpy as np
t0 = time.perf_counter()
import udf_host
from udf_host import UDF
t_import = time.perf_counter() - t0
src = '''
import numpy as np
from udf_host import UDF
class FreshUDF{tag}(UDF):
    def get_result_buffers(self):
        return {{"s": self.buffer(kind="sig", dtype=np.float32)}}
    def process_tile(self, tile):
        self.results.s[:] += np.sum(tile, axis=0) * {tag}
    def merge(self, dest, src):
        dest.s[:] += src.s
'''
path = sys.argv[1]
open(path, "w").write(src.format(tag=sys.argv[2]))
import importlib.util
spec = importlib.util.spec_from_file_location("fresh", path)
m = importlib.util.module_from_spec(spec); sys.modules["fresh"] = m; spec.loader.exec_module(m)
cls = getattr(m, "FreshUDF" + sys.argv[2])
kw = {} if sys.argv[3] == "-" else {"cache_dir": sys.argv[3]}
ctx = udf_host.Context(**kw)
ds = ctx.load("memory", data=np.ones((16, 16, 64, 64), dtype=np.float32))
times = []
for _ in range(3):
    t0 = time.perf_counter(); ctx.run_udf(dataset=ds, udf=cls()); times.append(time.perf_counter() - t0)
print(json.dumps({"import": t_import, "runs": times}))
"""


def first_run(folder: Path, cache: str) -> dict:
    tag = str(int(time.time() * 1000) % 100000 + 1)
    script = folder / "first_run.py"
    script.write_text(FIRST_RUN)
    started = time.perf_counter()
    out = subprocess.run([sys.executable, str(script), str(folder / f"fresh_{tag}.py"), tag, cache],
                         check=True, capture_output=True, text=True).stdout
    total = time.perf_counter() - started
    data = json.loads(out.strip().splitlines()[-1])
    data["process"] = total
    return data


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=os.environ.get("UDF_BENCH_DIR", tempfile.gettempdir()))
    parser.add_argument("--executors", default="inline,threads",
                        help="LiberTEM executors to compare: inline, threads, dask (its default DaskJobExecutor; "
                        "its workers failed to import the classes' module here)")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--dtypes", default="float32,uint16")
    parser.add_argument("--nav", default="64,64", help="scan shape (frames of 256 × 256)")
    parser.add_argument("--settle", type=float, default=0.3,
                        help="seconds of rest before each timed run, so that each starts on an idle machine "
                        "(OpenBLAS's threads keep spinning for a while after LiberTEM's NumPy products)")
    args = parser.parse_args()
    global NAV
    NAV = tuple(int(n) for n in args.nav.split(","))
    from libertem.api import Context as LiberTEMContext

    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-classes-"))
    lt_mod, uh_mod = load_classes(work)
    # LiberTEM's Dask workers must import the classes' module.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(work), os.environ.get("PYTHONPATH")) if p)
    files = {d: dataset(folder, d) for d in args.dtypes.split(",")}
    cases = args.cases.split(",")
    uh = udf_host.Context()
    lts = {}
    for name in args.executors.split(","):
        lts[name] = LiberTEMContext() if name == "dask" else LiberTEMContext.make_with(name)
    print(f"# load average before: {open('/proc/loadavg').read().split()[:3]}", flush=True)
    print(f"# udf-host {udf_host.__version__ if hasattr(udf_host, '__version__') else ''} threads=all; "
          f"LiberTEM executors: {', '.join(lts)}", flush=True)
    best: dict = {}
    checked: dict = {}
    for dtype, path in files.items():
        uh_ds = uh.load("npy", path=path)
        lt_ds = {name: ctx.load("npy", path=str(path)) for name, ctx in lts.items()}
        for case in cases:
            uh_udf, lt_udf = make(uh_mod, case), make(lt_mod, case)
            # warm-up: page cache, the runner's compile cache, LiberTEM's numba/JIT caches
            _, ref = timed(lambda: uh.run_udf(dataset=uh_ds, udf=uh_udf))
            for name, ctx in lts.items():
                _, other = timed(lambda: ctx.run_udf(dataset=lt_ds[name], udf=lt_udf))
                checked[(case, dtype, name)] = agree(results_of(ref, case), results_of(other, case))
            for r in range(args.rounds):
                time.sleep(args.settle)
                t, _ = timed(lambda: uh.run_udf(dataset=uh_ds, udf=uh_udf))
                best.setdefault((case, dtype, "udf-host"), []).append(t)
                for name, ctx in lts.items():
                    time.sleep(args.settle)
                    t, _ = timed(lambda: ctx.run_udf(dataset=lt_ds[name], udf=lt_udf))
                    best.setdefault((case, dtype, name), []).append(t)
            line = ", ".join(f"{k[2]} {min(v):.3f}s" for k, v in best.items() if k[:2] == (case, dtype))
            print(f"# {case} {dtype}: {line}", flush=True)
    print(f"# load average after: {open('/proc/loadavg').read().split()[:3]}")
    print()
    print("| class | dtype | size | udf-host s (GB/s) | LiberTEM best s (GB/s), executor | udf-host / LiberTEM | same numbers |")
    print("|---|---|---:|---:|---:|---:|---|")
    for dtype, path in files.items():
        size = path.stat().st_size
        for case in cases:
            u = min(best[(case, dtype, "udf-host")])
            lt_name = min(lts, key=lambda n: min(best[(case, dtype, n)]))
            lt_t = min(best[(case, dtype, lt_name)])
            ok = all(checked[(case, dtype, n)] for n in lts)
            print(f"| {case} | {dtype} | {size / 2**20:.0f} MiB | {u:.3f} ({size / u / 1e9:.2f}) | "
                  f"{lt_t:.3f} ({size / lt_t / 1e9:.2f}), {lt_name} | {lt_t / u:.2f}× | {'yes' if ok else 'NO'} |")
    for ctx in lts.values():
        ctx.close()
    print()
    cold_cache = tempfile.mkdtemp(prefix="udf-host-cold-cache-")
    cold = first_run(work, cold_cache)
    fresh = first_run(work, "-")
    print("| first run of a new class (16 × 16 frames of 64 × 64, float32) | first run | second run | import udf_host | whole process |")
    print("|---|---:|---:|---:|---:|")
    for label, d in (("fresh process, empty compile cache (the runner compiled)", cold),
                     ("fresh process, runner in the compile cache", fresh)):
        print(f"| {label} | {d['runs'][0]:.3f} s | {min(d['runs'][1:]):.3f} s | {d['import']:.3f} s | {d['process']:.2f} s |")


if __name__ == "__main__":
    main()
