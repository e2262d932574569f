"""`max`: the maximum of every pixel over all frames (LiberTEM's MaxUDF), in Python, with
the buffer declared with its merge rule: no `result_buffers`, `preprocess` or `merge` here.

Buffer `maxbuf` (kind sig, input dtype): `maxbuf[y, x] = max_n F_n[y, x]` (NaN wins, as
`np.maximum`); -inf where no frame was processed.
"""

import udf_sdk as udf


class Max(udf.Udf):
    description = udf.Description("max", "0.1.0", "Maximum of all frames (LiberTEM MaxUDF), Python")
    buffers = [udf.BufferDecl.sig("maxbuf", udf.INPUT, merge="max")]

    def process_tile(self, tile, results):
        results.accumulate("maxbuf", tile, "max")


Udf = udf.export(Max)
