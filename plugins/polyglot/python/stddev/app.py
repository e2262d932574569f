"""`stddev`: per-pixel sum, variance, standard deviation and mean over all frames
(LiberTEM's StdDevUDF), in Python with host arrays; the buffers and numbers of the Rust
`plugins/stddev`.

Over the `N` processed frames: `mean = sum / N`, `var = varsum / N` (population variance),
`std = sqrt(var)`. Buffers: `varsum` (sig, base dtype), `num_frames` (single, int64),
`sum` (sig, `result_type(input, base)`); results `var`, `std` (base) and `mean` (sum's
dtype). Param `dtype` (float32 or float64, default float64): the base dtype.

Per tile: `S1, V1 / n1 = sum_var(tile, axis=0)` (one host call, one pass over the tile;
in the sum's dtype, the variance then cast to the base dtype), merged into the buffers with the pairwise formula of Chan et al.:
`V = V0 + V1 + |S1/n1 - S0/n0|^2 * n0 * n1 / (n0 + n1)`, `S = S0 + S1`. Frames are counted
per signal slice of the tiling scheme, as LiberTEM keys them by `tiling_scheme_idx`.
"""

import udf_sdk as udf
import xp as np


def _base(params):
    base = params.text("dtype")
    if base not in ("float32", "float64"):
        raise udf.UdfError.bad_param(f"stddev: parameter 'dtype' must be float32 or float64, found '{base}'")
    return base


def _pairwise(s0, v0, n0, s1, v1, n1):
    """Merge `(sum, varsum, count)` of `(s1, v1, n1)` into the views `s0`, `v0` (count `n0`)."""
    if n1 == 0:
        return
    if n0 == 0:
        s0[...] = s1
        v0[...] = v1
        return
    delta = s1 / n1 - s0 / n0
    v0[...] += v1 + np.real(delta * np.conj(delta)) * (n0 * n1 / (n0 + n1))
    s0[...] += s1


class StdDev(udf.Udf):
    description = udf.Description(
        "stddev", "0.1.0", "Per-pixel sum, variance, standard deviation and mean (LiberTEM StdDevUDF), Python",
        params=[udf.ParamSpec.text("dtype", "base dtype of varsum/var/std: float32 or float64", default="float64")],
        custom_merge=True, custom_results=True, host_arrays=True,
    )

    @staticmethod
    def result_buffers(params, dataset):
        base = _base(params)
        if dataset.input_dtype not in ("float32", "float64", "complex64", "complex128"):
            raise udf.UdfError.invalid_data(f"stddev needs float or complex input, got {dataset.input_dtype}")
        total = udf.result_type(dataset.input_dtype, base)
        return [
            udf.BufferDecl.sig("varsum", base),
            udf.BufferDecl.single("num_frames", "int64"),
            udf.BufferDecl.sig("sum", total),
            udf.BufferDecl.sig("var", base, use="result_only"),
            udf.BufferDecl.sig("std", base, use="result_only"),
            udf.BufferDecl.sig("mean", total, use="result_only"),
        ]

    def __init__(self, ctx):
        slices = len(ctx.partition.tiling_scheme) if ctx.partition else 1
        self.seen = [0] * max(slices, 1)

    def process_tile(self, tile, results):
        i = tile.scheme_index
        if i >= len(self.seen):
            self.seen += [0] * (i + 1 - len(self.seen))
        n0, n1 = self.seen[i], tile.frames
        data = tile.data
        s1, v = np.sum_var(data, axis=0, dtype=results.sum.dtype)
        v1 = (v if v.dtype == results.varsum.dtype else v.astype(results.varsum.dtype)) * n1
        _pairwise(results.sum, results.varsum, n0, s1, v1, n1)
        self.seen[i] = n0 + n1

    def postprocess(self, ctx, results):
        n = self.seen[0]
        if any(m != n for m in self.seen):
            raise udf.UdfError.internal(f"stddev: signal slices of the partition saw different frame counts {self.seen}")
        results.num_frames[...] = n

    @staticmethod
    def merge(ctx, dest, src):
        n0, n1 = int(dest.num_frames.item()), int(src.num_frames.item())
        _pairwise(dest.sum, dest.varsum, n0, src.sum, src.varsum, n1)
        dest.num_frames[...] = n0 + n1

    @staticmethod
    def get_results(ctx, buffers):
        n = int(buffers.num_frames.item())  # 0 (an all-false ROI): NaN, as NumPy's 0 / 0
        var = buffers.varsum / n
        return [
            udf.Result.from_array("var", var),
            udf.Result.from_array("std", np.sqrt(var)),
            udf.Result.from_array("mean", buffers.sum / n),
        ]

Udf = udf.export(StdDev)
