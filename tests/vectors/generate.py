#!/usr/bin/env python3
"""Write the conformance test vectors: datasets, run specs and expected results.

The expected values are computed here with NumPy, from the definitions of the UDFs
(LiberTEM's SumUDF and SumSigUDF, shared/reference/libertem/BUILTINS.md), independently
of udf-host. Run from anywhere; it rewrites tests/vectors/datasets and tests/vectors/cases
deterministically:

    python3 tests/vectors/generate.py

The format is described in tests/vectors/README.md.
"""

import json
import shutil
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
FORMAT = "udf-conformance-vector/1"

# Partition counts and tile shapes every case of a (4, 5, 6, 7) dataset runs with:
# the host's choice, one to seven partitions; negotiated tiles, depth-1 full frames,
# odd tiles that divide neither frame axis, and tiles deeper than a partition.
PARTITIONS = [None, 1, 2, 3, 7]
TILES = [None, [1, 6, 7], [3, 4, 5], [20, 6, 7]]


def mk_random(shape, dtype, seed):
    """LiberTEM's _mk_random: values 0 or 1 with two planted outliers."""
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 2, size=shape).astype(np.float64)
    flat = data.reshape(-1)
    flat[rng.integers(0, flat.size)] = 1000.0
    flat[rng.integers(0, flat.size)] = 10000.0
    return data.astype(dtype)


def uniform(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    return rng.random(size=shape).astype(dtype)


def save(path, array):
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, array)


def sum_frames(data, nav_dims, roi, out_dtype):
    """SumUDF: intensity[y, x] = sum over (selected) frames, accumulated in float64."""
    frames = data.reshape((-1,) + data.shape[nav_dims:]).astype(np.float64)
    if roi is not None:
        frames = frames[roi.reshape(-1)]
    return frames.sum(axis=0).astype(out_dtype)


def sum_sig(data, nav_dims, roi, out_dtype):
    """SumSigUDF: intensity[n] = sum over each frame; NaN outside the ROI."""
    nav_shape = data.shape[:nav_dims]
    sums = data.reshape(nav_shape + (-1,)).astype(np.float64).sum(axis=-1).astype(out_dtype)
    if roi is not None:
        sums = np.where(roi, sums, np.nan).astype(out_dtype)
    return sums


def case(name, description, plugin, dataset, nav_dims, expected, *, params=None, roi=None,
         input_dtype, rtol=1e-5, atol=1e-8, partitions=PARTITIONS, tiles=TILES):
    directory = ROOT / "cases" / name
    directory.mkdir(parents=True)
    spec = {
        "format": FORMAT,
        "description": description,
        "plugin": plugin,
        "params": params or {},
        "dataset": {"path": f"../../datasets/{dataset}.npy", "nav_shape": None, "sig_shape": None},
        "roi": None,
        "partitions": partitions,
        "tile_shapes": tiles,
        "tolerance": {"rtol": rtol, "atol": atol},
        "input_dtype": input_dtype,
        "expected": {},
    }
    if roi is not None:
        save(directory / "roi.npy", roi)
        spec["roi"] = "roi.npy"
    for buffer, array in expected.items():
        save(directory / f"{buffer}.npy", array)
        spec["expected"][buffer] = f"{buffer}.npy"
    (directory / "case.json").write_text(json.dumps(spec, indent=2) + "\n")


def main():
    for sub in ("datasets", "cases"):
        shutil.rmtree(ROOT / sub, ignore_errors=True)
    datasets = {
        "random_f32": mk_random((4, 5, 6, 7), np.float32, 1),
        "random_u16": mk_random((4, 5, 6, 7), np.uint16, 2),
        "uniform_f32": uniform((4, 5, 6, 7), np.float32, 3),
        "uniform_f64_flat": uniform((7, 3, 5), np.float64, 4),
    }
    for name, data in datasets.items():
        save(ROOT / "datasets" / f"{name}.npy", data)

    rng = np.random.default_rng(5)
    roi = rng.random((4, 5)) < 0.5
    roi[0, 0] = True
    none = np.zeros((4, 5), dtype=bool)
    one = np.zeros((4, 5), dtype=bool)
    one[2, 3] = True

    d = datasets["random_f32"]
    case("sum_random_f32", "SumUDF of 0/1 float32 data with outliers", "sum", "random_f32", 2,
         {"intensity": sum_frames(d, 2, None, np.float32)}, input_dtype="float32")
    case("sum_random_f32_roi", "SumUDF with a random ROI", "sum", "random_f32", 2,
         {"intensity": sum_frames(d, 2, roi, np.float32)}, roi=roi, input_dtype="float32")
    case("sum_all_false_roi", "SumUDF with a ROI selecting nothing: zeros", "sum", "random_f32", 2,
         {"intensity": sum_frames(d, 2, none, np.float32)}, roi=none, input_dtype="float32",
         partitions=[1, 3], tiles=[None])
    d = datasets["random_u16"]
    case("sum_u16", "SumUDF of uint16 data: float32 input and result", "sum", "random_u16", 2,
         {"intensity": sum_frames(d, 2, None, np.float32)}, input_dtype="float32")
    d = datasets["uniform_f64_flat"]
    case("sum_f64_flat_nav", "SumUDF of float64 data with a flat nav axis: float64 result", "sum",
         "uniform_f64_flat", 1, {"intensity": sum_frames(d, 1, None, np.float64)}, input_dtype="float64",
         rtol=1e-12, partitions=[None, 1, 2, 7], tiles=[None, [1, 3, 5], [2, 2, 3]])
    d = datasets["uniform_f32"]
    case("sum_uniform_f32_params", "SumUDF asked for float64 input: float64 result", "sum", "uniform_f32", 2,
         {"intensity": sum_frames(d, 2, None, np.float64)}, params={"dtype": "float64"},
         input_dtype="float64", rtol=1e-12)

    d = datasets["random_f32"]
    case("sumsig_random_f32", "SumSigUDF of 0/1 float32 data with outliers", "sumsig", "random_f32", 2,
         {"intensity": sum_sig(d, 2, None, np.float32)}, input_dtype="float32")
    case("sumsig_random_f32_roi", "SumSigUDF with a random ROI: NaN outside", "sumsig", "random_f32", 2,
         {"intensity": sum_sig(d, 2, roi, np.float32)}, roi=roi, input_dtype="float32")
    d = datasets["uniform_f32"]
    case("sumsig_uniform_one_frame_roi", "SumSigUDF with a one-frame ROI", "sumsig", "uniform_f32", 2,
         {"intensity": sum_sig(d, 2, one, np.float32)}, roi=one, input_dtype="float32")
    d = datasets["random_u16"]
    case("sumsig_u16", "SumSigUDF of uint16 data", "sumsig", "random_u16", 2,
         {"intensity": sum_sig(d, 2, None, np.float32)}, input_dtype="float32")
    d = datasets["uniform_f64_flat"]
    case("sumsig_f64_flat_nav", "SumSigUDF of float64 data with a flat nav axis", "sumsig", "uniform_f64_flat", 1,
         {"intensity": sum_sig(d, 1, None, np.float64)}, input_dtype="float64", rtol=1e-12,
         partitions=[None, 1, 2, 7], tiles=[None, [1, 3, 5], [2, 2, 3]])


if __name__ == "__main__":
    main()
