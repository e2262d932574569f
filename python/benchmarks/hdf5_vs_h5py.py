"""Compressed HDF5: udf-host against h5py + hdf5plugin on the same files (issue 22).

    python python/benchmarks/hdf5_vs_h5py.py [--repeat 3] [--dir /tmp]   # needs h5py, hdf5plugin

Writes (when missing) 1 GiB of uint32 frames, 128 x 128 scan positions of 128 x 128 pixels,
Poisson counts (mean 0.5, a sparse 4D-STEM scan), as bitshuffle-LZ4 (one frame per chunk,
as DECTRIS detectors write it) and as gzip (level 1, one frame per chunk). Then times the
sum of all frames, best of --repeat, warm page cache:

- h5py: `dataset[k:k + 256]` slabs decompressed by HDF5 with hdf5plugin's filters, summed
  with NumPy (one core: HDF5 decompresses on the calling thread);
- udf-host: `BuiltinUDF("sum")` with `threads=1` and with every core.

Prints a Markdown table of seconds and GB/s (uncompressed bytes). Build the package in
release first (`pip install ./python`).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import h5py
import hdf5plugin
import numpy as np

import udf_host

NAV = (128, 128)
SIG = (128, 128)
DATASET = "/entry/data/data"


def write(folder: Path, name: str, options: dict) -> Path:
    path = folder / f"udf-host-bench-{name}-u32.h5"
    if path.exists():
        return path
    rng = np.random.default_rng(0)
    part = path.with_suffix(".part")
    with h5py.File(part, "w") as f:
        d = f.create_dataset(DATASET, shape=NAV + SIG, dtype="<u4", chunks=(1, 1) + SIG, **options)
        for row in range(NAV[0]):
            d[row] = rng.poisson(0.5, size=NAV[1:] + SIG).astype("<u4")
    part.rename(path)
    return path


def h5py_sum(path: Path) -> np.ndarray:
    total = np.zeros(SIG, np.float64)
    with h5py.File(path, "r") as f:
        d = f[DATASET]
        flat = NAV[0] * NAV[1]
        step = 256
        for start in range(0, flat, step):
            rows = slice(start // NAV[1], (start + step) // NAV[1])
            block = d[rows]
            total += block.sum(axis=(0, 1), dtype=np.float64)
    return total


def best(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=os.environ.get("UDF_BENCH_DIR", tempfile.gettempdir()))
    args = parser.parse_args()
    folder = Path(args.dir)
    files = {
        "bitshuffle-LZ4": write(folder, "bslz4", dict(**hdf5plugin.Bitshuffle(nelems=0, cname="lz4"))),
        "gzip 1": write(folder, "gzip", dict(compression="gzip", compression_opts=1)),
    }
    raw_bytes = np.prod(NAV + SIG) * 4
    cores = os.cpu_count() or 1
    one = udf_host.Context(threads=1)
    every = udf_host.Context()
    print(f"| file | compressed | h5py + hdf5plugin (1 core) | udf-host, 1 thread | udf-host, {cores} threads |")
    print("|---|---:|---:|---:|---:|")
    for label, path in files.items():
        reference = h5py_sum(path)  # warm-up (page cache) and the expected result
        cells = []
        t, _ = best(lambda: h5py_sum(path), args.repeat)
        cells.append(t)
        for ctx in (one, every):
            ds = ctx.load("hdf5", path=path, dataset_path=DATASET)
            t, result = best(lambda: ctx.run_udf(dataset=ds, udf=udf_host.BuiltinUDF("sum")), args.repeat)
            np.testing.assert_allclose(result["intensity"].data, reference, rtol=1e-6)
            cells.append(t)
        text = " | ".join(f"{t:.2f} s ({raw_bytes / t / 1e9:.2f} GB/s)" for t in cells)
        print(f"| {label} | {path.stat().st_size / 1e6:.0f} MB | {text} |")


if __name__ == "__main__":
    main()
