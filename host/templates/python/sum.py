"""`{{name}}`: the sum of all frames (LiberTEM's SumUDF).

Buffer `intensity`: kind sig, float32, `intensity[y, x] = sum_n F_n[y, x]`. Tile method: each
call adds a tile's frames into its part of the frame; the host merges partitions with `merge`.
Started from `udf-host new --template sum`; src/udf_sdk.py documents the SDK.
"""

import udf_sdk as udf


{{float32_input}}

class {{Type}}(udf.Udf):
    description = udf.Description("{{name}}", "0.1.0", "Sum of all frames", custom_merge=True)

    @staticmethod
    def result_buffers(params, dataset):
        float32_input(dataset)
        return [udf.BufferDecl.sig("intensity", "float32")]

    def process_tile(self, tile, results):
        intensity = results["intensity"]  # the tile's part of the frame
        for frame in tile.data:  # tile.data: [frames, *part of the frame]
            udf.iadd(intensity, frame)

    @staticmethod
    def merge(ctx, dest, src):
        udf.iadd(dest["intensity"], src["intensity"])


Udf = udf.export({{Type}})  # componentize-py looks for `Udf`
