"""`map`: the sum of every row of each frame, as a frame map (LiberTEM's
`ctx.map(f=functools.partial(np.sum, axis=-1))`), in Python.

Buffer `result` (kind nav, float64, extra shape `(sig rows,)`): `result[n, y] = sum_x F_n[y, x]`.
"""

import udf_sdk as udf

Udf = udf.frame_map("row-sums", lambda frame: [float(sum(row)) for row in frame.rows()])
