"""`{{name}}`: the sum of all frames (LiberTEM's SumUDF).

Buffer `intensity`: kind sig, float32, `intensity[y, x] = sum_n F_n[y, x]`. Tile method: each
call adds a tile's frames into its part of the frame; the host merges partitions with `merge`.
With `host_arrays=True` the tile and the buffers are `xp` arrays that live in the host
(src/xp.py: NumPy's names, the array API standard): `np.sum` runs at the host's speed and
the tile is never copied into the plugin. Started from `udf-host new --template sum`;
src/udf_sdk.py documents the SDK.
"""

import udf_sdk as udf
import xp as np


{{float32_input}}

class {{Type}}(udf.Udf):
    description = udf.Description("{{name}}", "0.1.0", "Sum of all frames", custom_merge=True, host_arrays=True)

    @staticmethod
    def result_buffers(params, dataset):
        float32_input(dataset)
        return [udf.BufferDecl.sig("intensity", "float32")]

    def process_tile(self, tile, results):
        # tile.data: [frames, *part of the frame]; results.intensity: the tile's part of the frame
        results.intensity[:] += np.sum(tile.data, axis=0)

    @staticmethod
    def merge(ctx, dest, src):
        dest.intensity[:] += src.intensity


Udf = udf.export({{Type}})  # componentize-py looks for `Udf`
