"""`masks`: the dot product of every frame with each of a stack of masks — virtual
detectors (LiberTEM's ApplyMasksUDF), in Python with host arrays.

`intensity[n, m] = sum_{y,x} F_n[y, x] * mask_m[y, x]` (no complex conjugation). Param
`masks` (array, required): a stack `(M, *sig)` or one mask `(*sig)`. Buffer `intensity`:
kind nav, extra shape `(M,)`, dtype `result_type(input, mask dtype)`.

Per partition the masks are cut once for each signal slice of the tiling scheme into a
`(pixels, M)` matrix; per tile one matrix product `tile (frames, pixels) @ (pixels, M)`
in the host.
"""

import udf_sdk as udf
import xp as np


def _count(params, dataset):
    shape = tuple(params.array("masks").shape)
    sig = tuple(dataset.sig_shape)
    if shape == sig:
        return 1
    if len(shape) == len(sig) + 1 and shape[1:] == sig:
        return shape[0]
    raise udf.UdfError.bad_param(f"masks: expected a stack (M, {', '.join(map(str, sig))}) or one mask {sig}, "
                                 f"found shape {shape}")


class Masks(udf.Udf):
    description = udf.Description(
        "masks", "0.1.0", "Dot product of each frame with a stack of masks (LiberTEM ApplyMasksUDF), Python",
        params=[udf.ParamSpec.array("masks", "a stack of masks (M, *sig) or one mask (*sig)")],
        host_arrays=True,
    )

    @staticmethod
    def result_buffers(params, dataset):
        count = _count(params, dataset)
        dtype = udf.result_type(dataset.input_dtype, params.array("masks").dtype.name)
        return [udf.BufferDecl.nav("intensity", dtype, (count,))]

    def __init__(self, ctx):
        count = _count(ctx.params, ctx.dataset)
        masks = ctx.params.array("masks").reshape((count,) + tuple(ctx.dataset.sig_shape))
        self.dtype = udf.result_type(ctx.dataset.input_dtype, masks.dtype.name)
        self.masks = masks.astype(self.dtype)
        self.count = count
        self.by_slice = {}

    def _matrix(self, tile):
        """The masks under the tile's signal slice as a `(pixels, M)` matrix, once per slice."""
        matrix = self.by_slice.get(tile.scheme_index)
        if matrix is None:
            part = tile.sig_part(self.masks)  # (M, *slice)
            matrix = np.reshape(part, (self.count, -1)).T.copy()
            self.by_slice[tile.scheme_index] = matrix
        return matrix

    def process_tile(self, tile, results):
        flat = np.reshape(tile.data, (tile.frames, -1))
        results.intensity[:] += flat @ self._matrix(tile)


Udf = udf.export(Masks)
