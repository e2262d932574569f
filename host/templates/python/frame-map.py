"""`{{name}}`: the mean of each frame, one value per scan position.

Buffer `mean`: kind nav, float32, `mean[n] = sum_{y,x} F_n[y, x] / (frame pixels)`. Frame
method: each call sees one whole frame; nav buffers are merged by the host. With
`host_arrays=True` the frame and the buffers are `xp` arrays that live in the host
(src/xp.py: NumPy's names): `np.mean` runs at the host's speed. Started from
`udf-host new --template frame-map`; src/udf_sdk.py documents the SDK.
"""

import udf_sdk as udf
import xp as np


{{float32_input}}

class {{Type}}(udf.Udf):
    description = udf.Description("{{name}}", "0.1.0", "Mean of each frame", methods=["frame"], host_arrays=True)

    @staticmethod
    def result_buffers(params, dataset):
        float32_input(dataset)
        return [udf.BufferDecl.nav("mean", "float32")]

    def process_frame(self, frame, results):
        results.mean[:] = np.mean(frame.data)  # this frame's entry: shape (1,)


Udf = udf.export({{Type}})  # componentize-py looks for `Udf`
