"""`map`: the sum of every row of each frame, as a frame map (LiberTEM's
`ctx.map(f=functools.partial(np.sum, axis=-1))`), in Python with host arrays.

Buffer `result` (kind nav, the frame's dtype, extra shape `(sig rows,)`):
`result[n, y] = sum_x F_n[y, x]`.
"""

import udf_sdk as udf
import xp as np

Udf = udf.frame_map("row-sums", lambda frame: np.sum(frame, axis=-1), host_arrays=True)
