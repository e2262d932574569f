"""`{{name}}`: the dot product of each frame with each mask of a stack — virtual detectors
(LiberTEM's ApplyMasksUDF, dense masks).

Param `masks`: an array `(M, *frame shape)` of any real dtype. Buffer `intensity`: kind nav,
extra shape `(M,)`, float32, `intensity[n, m] = sum_{y,x} F_n[y, x] * mask_m[y, x]`. Frame
method; nav buffers are merged by the host. Started from `udf-host new --template masks`;
src/udf_sdk.py documents the SDK.
"""

import udf_sdk as udf


{{float32_input}}

def mask_count(params, dataset):
    """The number of masks of the `masks` param, checked against the frame shape."""
    masks = params.array("masks")
    if len(masks.shape) != len(dataset.sig_shape) + 1 or masks.shape[1:] != dataset.sig_shape or not masks.shape[0]:
        raise udf.UdfError.bad_param(
            f"masks must be a stack of at least one mask of the frame shape, (M, *{dataset.sig_shape}), "
            f"found the shape {masks.shape}")
    if udf.is_complex(masks.dtype):
        raise udf.UdfError.bad_param(f"masks must be real, found {masks.dtype}")
    return masks.shape[0]


class {{Type}}(udf.Udf):
    description = udf.Description(
        "{{name}}", "0.1.0", "Dot products of each frame with a mask stack",
        params=[udf.ParamSpec.array("masks", "mask stack (M, *frame shape)")],
        methods=["frame"],
    )

    @staticmethod
    def result_buffers(params, dataset):
        float32_input(dataset)
        return [udf.BufferDecl.nav("intensity", "float32", extra_shape=(mask_count(params, dataset),))]

    def __init__(self, ctx):
        # Task data, once per partition: the masks as lists of numbers.
        count = mask_count(ctx.params, ctx.dataset)
        values = ctx.params.floats("masks")
        n = len(values) // count
        self.masks = [values[m * n:(m + 1) * n] for m in range(count)]

    def process_frame(self, frame, results):
        pixels = frame.flat()
        intensity = results["intensity"]  # this frame's M values
        for m, mask in enumerate(self.masks):
            intensity[m] = sum(v * w for v, w in zip(pixels, mask))


Udf = udf.export({{Type}})  # componentize-py looks for `Udf`
