"""Result buffers, as LiberTEM's `BufferWrapper` presents results."""

from __future__ import annotations

import numpy as np

__all__ = ["Buffer"]


class Buffer:
    """One result of a UDF.

    - `data`: nav buffers in the nav shape, NaN (floats) / 0 / False outside the ROI;
      sig and single buffers as they are (LiberTEM's `.data`);
    - `raw_data`: nav buffers flat and compressed to the ROI (LiberTEM's `.raw_data`);
    - `valid_mask`: where `data` is valid (partial results, custom masks);
    - `masked_data`: `data` as a NumPy masked array, invalid elements masked;
    - `dtype`, `kind` (`"nav"`, `"sig"`, `"single"`), `extra_shape`, `name`.

    The arrays are read-only views of memory the result owns: no copies are made. Copy
    one (`buf.data.copy()`) to change it. `np.asarray(buf)` is `buf.data`; in a notebook a
    buffer that is an image shows as its PNG preview.
    """

    __slots__ = ("_native",)

    def __init__(self, native):
        self._native = native

    @property
    def name(self) -> str:
        return self._native.name

    @property
    def kind(self) -> str:
        return self._native.kind

    @property
    def extra_shape(self) -> tuple:
        return self._native.extra_shape

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self._native.dtype_name)

    @property
    def data(self) -> np.ndarray:
        return _readonly(self._native.data)

    @property
    def raw_data(self) -> np.ndarray:
        return _readonly(self._native.raw_data)

    @property
    def valid_mask(self) -> np.ndarray:
        return _readonly(self._native.valid_mask)

    @property
    def masked_data(self) -> np.ma.MaskedArray:
        return np.ma.masked_array(self.data, mask=~self.valid_mask)

    @property
    def shape(self) -> tuple:
        return self.data.shape

    def preview(self, index: int = 0) -> bytes:
        """The PNG that `udf-host run --preview` writes for this buffer (slice `index` of
        an extra shape): viridis or a diverging map, robust range, log scale for sig
        images, invalid positions grey, a colour bar."""
        return self._native.preview(index)

    def _repr_png_(self):
        try:
            return self.preview()
        except ValueError:  # not an image
            return None

    def __array__(self, dtype=None, copy=None):
        data = self.data
        if dtype is not None and np.dtype(dtype) != data.dtype:
            return data.astype(dtype)
        if copy:
            return data.copy()
        return data

    def __repr__(self) -> str:
        return f"<Buffer {self.name!r} kind={self.kind} dtype={self.dtype} shape={self.shape}>"


def _readonly(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array
