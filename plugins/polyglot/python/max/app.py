"""`max`: the maximum of every pixel over all frames (LiberTEM's MaxUDF), in Python with
host arrays, the buffer declared with its merge rule: no `result_buffers`, `preprocess` or
`merge` here.

Buffer `maxbuf` (kind sig, input dtype): `maxbuf[y, x] = max_n F_n[y, x]` (NaN wins, as
`np.maximum`); -inf where no frame was processed.
"""

import udf_sdk as udf
import xp as np


class Max(udf.Udf):
    description = udf.Description("max", "0.1.0", "Maximum of all frames (LiberTEM MaxUDF), Python",
                                  host_arrays=True)
    buffers = [udf.BufferDecl.sig("maxbuf", udf.INPUT, merge="max")]

    def process_tile(self, tile, results):
        results.maxbuf[:] = np.maximum(results.maxbuf, np.max(tile.data, axis=0))


Udf = udf.export(Max)
