"""The host's array operations that LiberTEM-style classes lean on, against NumPy, on one
thread (docs/benchmarks.md, "LiberTEM UDF classes", "Profiled, then three costs removed").

    python python/benchmarks/host_array_ops.py [--frames 1024] [--repeat 5]

A float32 tile of `frames × 256 × 256` (and its uint16 and float64 forms), as
`udf_host.xp` arrays (the same kernels the runner's NumPy calls) and as NumPy arrays;
each operation's best time of `--repeat`, a fresh result each time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import udf_host.xp as xp


def best(f, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = f()
        times.append(time.perf_counter() - started)
        del result
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    a = np.random.default_rng(1).random((args.frames, 256, 256)).astype(np.float32)
    a64, u16 = a.astype(np.float64), (a * 1000).astype(np.uint16)
    h, h64, hu = xp.asarray(a), xp.asarray(a64), xp.asarray(u16)
    cases = [
        ("tile.astype(float64)", lambda: h.astype(xp.float64), lambda: a.astype(np.float64)),
        ("t * t (float64)", lambda: h64 * h64, lambda: a64 * a64),
        ("sum(t, axis=0) (float64)", lambda: xp.sum(h64, axis=0), lambda: np.sum(a64, axis=0)),
        ("sum(tile, axis=0) (float32)", lambda: xp.sum(h, axis=0), lambda: np.sum(a, axis=0)),
        ("sum(tile_u16, axis=0)", lambda: xp.sum(hu, axis=0), lambda: np.sum(u16, axis=0)),
    ]
    print(f"# load average {open('/proc/loadavg').read().split()[:3]}; {args.frames} frames of 256 x 256")
    print("| operation | udf_host.xp ms | NumPy ms | xp / NumPy |")
    print("|---|---:|---:|---:|")
    for name, host, numpy in cases:
        th, tn = best(host, args.repeat), best(numpy, args.repeat)
        print(f"| {name} | {th * 1e3:.2f} | {tn * 1e3:.2f} | {th / tn:.2f} |")


if __name__ == "__main__":
    main()
