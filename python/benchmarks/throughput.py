"""Throughput from Python against the command line, on the same files (issue: within 5 %).

    python python/benchmarks/throughput.py [--repeat 5] [--dir /tmp]

Writes the benchmark datasets when missing (a 2 GiB float32 and a 1 GiB uint16 `.npy`, as
`cargo bench --bench builtins` uses), then times each case with `udf-host run` (the release
binary, target/release/udf-host) and with `udf_host.Context.run_udf`, the two taking turns
(one run each per round, best of --repeat), and prints a Markdown table of GB/s. Build both
in release first: `cargo build --release -p udf-host` and `pip install ./python`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

import udf_host

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "target/release/udf-host"
PLUGINS = ROOT / "target/wasm-plugins/wasm32-wasip2/release"


def dataset(folder: Path, name: str, dtype, nav, sig) -> Path:
    path = folder / name
    if not path.exists():
        rng = np.random.default_rng(0)
        out = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=nav + sig)
        for i in range(nav[0]):
            out[i] = rng.integers(0, 1000, size=nav[1:] + sig).astype(dtype)
        out.flush()
        del out
    return path


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", default=os.environ.get("UDF_BENCH_DIR", tempfile.gettempdir()))
    args = parser.parse_args()
    folder = Path(args.dir)
    files = {
        "float32": dataset(folder, "udf-host-bench-float32-py.npy", np.float32, (128, 128), (128, 256)),
        "uint16": dataset(folder, "udf-host-bench-uint16-py.npy", np.uint16, (128, 128), (128, 256)),
    }
    cases = [
        ("builtin:sum", lambda: udf_host.BuiltinUDF("sum")),
        ("builtin:sumsig", lambda: udf_host.BuiltinUDF("sumsig")),
        ("sum.wasm", lambda: udf_host.WasmUDF(PLUGINS / "sum.wasm")),
    ]
    ctx = udf_host.Context()
    out = Path(tempfile.mkdtemp())
    print("| case | dtype | CLI GB/s | Python GB/s | Python / CLI |")
    print("|---|---|---:|---:|---:|")
    for label, make in cases:
        for dtype, path in files.items():
            size = path.stat().st_size
            source = label if label.startswith("builtin:") else str(PLUGINS / label)
            ds = ctx.load("npy", path=path)
            udf = make()
            ctx.run_udf(dataset=ds, udf=udf)  # warm up: page cache, compile cache
            cli_times, py_times = [], []
            for _ in range(args.repeat):
                cli_times.append(best(lambda: subprocess.run(
                    [str(CLI), "run", source, str(path), "--out", str(out / "r"), "--force", "-q"], check=True), 1))
                py_times.append(best(lambda: ctx.run_udf(dataset=ds, udf=udf), 1))
            c, p = size / min(cli_times) / 1e9, size / min(py_times) / 1e9
            print(f"| {label} | {dtype} | {c:.2f} | {p:.2f} | {p / c:.0%} |")


if __name__ == "__main__":
    main()
