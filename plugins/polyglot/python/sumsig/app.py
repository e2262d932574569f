"""`sumsig`: the sum over each frame (LiberTEM's SumSigUDF), in Python with host arrays.

Buffer `intensity`: kind nav, dtype = input dtype, `intensity[n] = sum_{y,x} F_n[y, x]`.
Merged natively by the host.
"""

import udf_sdk as udf
import xp as np


class SumSig(udf.Udf):
    description = udf.Description("sumsig", "0.1.0", "Sum over each frame (LiberTEM SumSigUDF), Python",
                                  host_arrays=True)

    @staticmethod
    def result_buffers(params, dataset):
        return [udf.BufferDecl.nav("intensity", dataset.input_dtype)]

    def process_tile(self, tile, results):
        # A tile may hold only part of each frame: accumulate the partial sums.
        data = tile.data  # [frames, *sig slice]
        results.intensity[:] += np.sum(data, axis=tuple(range(1, data.ndim)))


Udf = udf.export(SumSig)
