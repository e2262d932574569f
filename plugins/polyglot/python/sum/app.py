"""`sum`: the sum of all frames (LiberTEM's SumUDF), in Python with host arrays.

Buffer `intensity`: kind sig, dtype = input dtype, `intensity[y, x] = sum_n F_n[y, x]`.
Param `dtype` (default float32) is the preferred input dtype. The tile stays in the host
(`host_arrays=True`): one reduction and one add per tile, at the host's speed.
"""

import udf_sdk as udf
import xp as np


class Sum(udf.Udf):
    description = udf.Description(
        "sum", "0.1.0", "Sum of all frames (LiberTEM SumUDF), Python",
        params=[udf.ParamSpec.text("dtype", "preferred input dtype (NumPy name)", default="float32")],
        custom_merge=True, host_arrays=True,
    )

    @classmethod
    def plan(cls, params, dataset):
        dtype = params.text("dtype")
        if dtype not in udf.DTYPES:
            raise udf.UdfError.bad_param(f"dtype '{dtype}' is not a NumPy dtype name")
        plan = udf.RunPlan.from_description(cls.description)
        plan.input_dtype = dtype
        return plan

    @staticmethod
    def result_buffers(params, dataset):
        return [udf.BufferDecl.sig("intensity", dataset.input_dtype)]

    def process_tile(self, tile, results):
        results.intensity[:] += np.sum(tile.data, axis=0)  # the tile's part of the frame

    @staticmethod
    def merge(ctx, dest, src):
        dest.intensity[:] += src.intensity


Udf = udf.export(Sum)
