"""`sumsig`: the sum over each frame (LiberTEM's SumSigUDF), in Python.

Buffer `intensity`: kind nav, dtype = input dtype, `intensity[n] = sum_{y,x} F_n[y, x]`.
Merged natively by the host.
"""

import udf_sdk as udf


class SumSig(udf.Udf):
    description = udf.Description("sumsig", "0.1.0", "Sum over each frame (LiberTEM SumSigUDF), Python")

    @staticmethod
    def result_buffers(params, dataset):
        return [udf.BufferDecl.nav("intensity", dataset.input_dtype)]

    def process_tile(self, tile, results):
        intensity = results["intensity"]  # (frames in tile,)
        data = tile.data.flat()  # the tile is contiguous: [frames, *sig slice]
        n = tile.frame_len
        # A tile may hold only part of each frame: accumulate the partial sums.
        if udf.is_complex(tile.dtype):  # interleaved (real, imaginary) pairs
            for i in range(tile.frames):
                intensity[i, 0] += sum(data[2 * i * n : 2 * (i + 1) * n : 2])
                intensity[i, 1] += sum(data[2 * i * n + 1 : 2 * (i + 1) * n : 2])
        else:
            for i in range(tile.frames):
                intensity[i] += sum(data[i * n : (i + 1) * n])


Udf = udf.export(SumSig)
