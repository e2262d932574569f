"""`{{name}}`: the dot product of each frame with each mask of a stack — virtual detectors
(LiberTEM's ApplyMasksUDF, dense masks).

Param `masks`: an array `(M, *frame shape)` of any real dtype. Buffer `intensity`: kind nav,
extra shape `(M,)`, float32, `intensity[n, m] = sum_{y,x} F_n[y, x] * mask_m[y, x]`. Frame
method; nav buffers are merged by the host. With `host_arrays=True` the frame, the masks
and the buffers are `xp` arrays that live in the host (src/xp.py: NumPy's names): one
matrix product per frame at the host's speed. Started from `udf-host new --template
masks`; src/udf_sdk.py documents the SDK.
"""

import udf_sdk as udf
import xp as np


{{float32_input}}

def mask_count(params, dataset):
    """The number of masks of the `masks` param, checked against the frame shape."""
    masks = params.array("masks")
    shape, frame = tuple(masks.shape), tuple(dataset.sig_shape)
    if len(shape) != len(frame) + 1 or shape[1:] != frame or not shape[0]:
        raise udf.UdfError.bad_param(
            f"masks must be a stack of at least one mask of the frame shape, (M, *{frame}), found the shape {shape}")
    if udf.is_complex(masks.dtype.name):
        raise udf.UdfError.bad_param(f"masks must be real, found {masks.dtype.name}")
    return shape[0]


class {{Type}}(udf.Udf):
    description = udf.Description(
        "{{name}}", "0.1.0", "Dot products of each frame with a mask stack",
        params=[udf.ParamSpec.array("masks", "mask stack (M, *frame shape)")],
        methods=["frame"], host_arrays=True,
    )

    @staticmethod
    def result_buffers(params, dataset):
        float32_input(dataset)
        return [udf.BufferDecl.nav("intensity", "float32", extra_shape=(mask_count(params, dataset),))]

    def __init__(self, ctx):
        # Task data, once per partition: the masks as a (pixels, M) matrix in the host.
        count = mask_count(ctx.params, ctx.dataset)
        masks = ctx.params.array("masks").astype("float32")
        self.matrix = np.reshape(masks, (count, -1)).T.copy()

    def process_frame(self, frame, results):
        results.intensity[:] = np.reshape(frame.data, (-1,)) @ self.matrix  # this frame's M values


Udf = udf.export({{Type}})  # componentize-py looks for `Udf`
