"""`fem`: fluctuation electron microscopy (LiberTEM's FEMUDF), in Python with host arrays.

Per frame the population standard deviation of the pixels in a ring:
`intensity[n] = std(F_n[m])`, `m = [d <= rad_out] - [d <= rad_in] == 1`, `d^2 = (y - center[0])^2 + (x - center[1])^2`
(`center[0]` is the row, as in LiberTEM). Buffer `intensity`: kind nav, float32. Frame
method, as LiberTEM's. An empty ring gives NaN (NumPy's std of an empty selection).
"""

import udf_sdk as udf
import xp as np


class Fem(udf.Udf):
    description = udf.Description(
        "fem", "0.1.0", "Std. dev. of the pixels in a ring per frame (LiberTEM FEMUDF), Python",
        params=[
            udf.ParamSpec.array("center", "ring centre (y, x) in pixels"),
            udf.ParamSpec.float("rad_in", "inner radius (exclusive)"),
            udf.ParamSpec.float("rad_out", "outer radius (inclusive)"),
        ],
        methods=["frame"],
        host_arrays=True,
    )

    @staticmethod
    def result_buffers(params, dataset):
        return [udf.BufferDecl.nav("intensity", "float32")]

    def __init__(self, ctx):
        # Task data: the ring as a boolean mask, computed once per partition.
        center = ctx.params.floats("center")
        if len(center) != 2:
            raise udf.UdfError.bad_param(f"center must have 2 values (y, x), found {len(center)}")
        if len(ctx.dataset.sig_shape) != 2:
            raise udf.UdfError.invalid_data(f"fem needs 2-D frames, found sig shape {ctx.dataset.sig_shape}")
        cy, cx = center
        r_in, r_out = ctx.params.float("rad_in"), ctx.params.float("rad_out")
        sy, sx = ctx.dataset.sig_shape
        y = np.arange(sy, dtype=np.float64)[:, None]
        x = np.arange(sx, dtype=np.float64)[None, :]
        d2 = (y - cy) ** 2 + (x - cx) ** 2
        self.ring = (d2 <= r_out**2) & ~(d2 <= r_in**2)

    def process_frame(self, frame, results):
        results.intensity[:] = np.std(frame.data[self.ring])


Udf = udf.export(Fem)
