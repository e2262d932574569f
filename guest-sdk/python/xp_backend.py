"""xp_backend: the backend of ``xp`` (``python/udf_host/xp.py``) inside a Python plugin.

``xp`` is one file that runs in two places. In a Python process it computes with
``udf_host._native.arrays`` (the host's executor linked into the extension); inside a
plugin built with componentize-py it imports this module instead, which maps the same
small API onto the contract's ``arrays`` interface (``wit/udf.wit``): every array is a
handle to an array in the host, every operation one host call.

The API (the same names and arguments as ``python/src/arrays.rs``):

- ``HostArray``: ``shape`` (a list), ``dtype`` (a NumPy name), ``to_bytes()``,
  ``getitem(items)``, ``select(mask)``, ``take(indices, axis)``, ``reshape(shape)``,
  ``permute_dims(axes)``, ``broadcast_to(shape)``, ``expand_dims(axis)``,
  ``squeeze(axes)``, ``astype(name)``, ``set(items, value)``, ``add_at(items, value)``;
- functions ``from_bytes``, ``zeros``, ``full``, ``arange``, ``linspace``, ``eye``,
  ``unary``, ``binary``, ``reduce``, ``sum_var``, ``where_``, ``clip``, ``matmul``, ``tensordot``,
  ``vecdot``, ``fft``, ``concat``, ``stack``, ``operations``; here also ``tile()`` (the tile of the
  current ``process`` call) and ``use_host_tiles()``.

Index items are tuples: ``("slice", start, stop, step)``, ``("at", i)``,
``("newaxis",)``, ``("ellipsis",)``; an operand is a ``HostArray`` or a Python scalar
(weak in type promotion, as in NumPy 2). A failed operation raises the exception the
array API asks for (``IndexError`` for indices and axes, ``TypeError`` for dtypes,
``MemoryError`` past the plugin's limits, ``ValueError`` for shapes and values) with
the host's message, which names the operation and the shapes.
"""

from componentize_py_types import Err
from wit_world.imports import arrays as _w
from wit_world.imports import types as _t

_DTYPES = {
    "bool": _t.Dtype.BOOLEAN,
    "uint8": _t.Dtype.UINT8,
    "uint16": _t.Dtype.UINT16,
    "uint32": _t.Dtype.UINT32,
    "uint64": _t.Dtype.UINT64,
    "int8": _t.Dtype.INT8,
    "int16": _t.Dtype.INT16,
    "int32": _t.Dtype.INT32,
    "int64": _t.Dtype.INT64,
    "float32": _t.Dtype.FLOAT32,
    "float64": _t.Dtype.FLOAT64,
    "complex64": _t.Dtype.COMPLEX64,
    "complex128": _t.Dtype.COMPLEX128,
}
_NAMES = {v: k for k, v in _DTYPES.items()}
_ITEMSIZE = {"bool": 1, "uint8": 1, "int8": 1, "uint16": 2, "int16": 2, "uint32": 4, "int32": 4, "float32": 4,
             "uint64": 8, "int64": 8, "float64": 8, "complex64": 8, "complex128": 16}


def _ops(enum):
    """An operation enum of the contract by the array API's names (``LOGICAL_NOT`` ->
    ``logical_not``)."""
    return {op.name.lower(): op for op in enum}


_UNARY = _ops(_w.UnaryOp)
_BINARY = _ops(_w.BinaryOp)
_REDUCE = _ops(_w.ReduceOp)
_FFT = _ops(_w.FftOp)

_ERRORS = {
    _w.ArrayErrorKind.INDEX: IndexError,
    _w.ArrayErrorKind.AXIS: IndexError,
    _w.ArrayErrorKind.DTYPE: TypeError,
    _w.ArrayErrorKind.MEMORY: MemoryError,
    _w.ArrayErrorKind.EXPIRED: RuntimeError,
}


def _error(e):
    """The Python exception of the host's ``array-error``."""
    error = e.value
    return _ERRORS.get(error.kind, ValueError)(error.message)


def _dtype(name):
    try:
        return _DTYPES[name]
    except KeyError:
        raise TypeError(f"unknown dtype '{name}'") from None


def _op(table, name):
    try:
        return table[name]
    except KeyError:
        raise ValueError(f"unknown operation '{name}'") from None


_I64 = (-(1 << 63), (1 << 63) - 1)


def _scalar(v):
    if isinstance(v, bool):
        return _w.Scalar_Boolean(v)
    if isinstance(v, int):
        if not _I64[0] <= v <= _I64[1]:
            raise OverflowError("Python int too large for the host's arrays")
        return _w.Scalar_Int(int(v))
    if isinstance(v, float):
        return _w.Scalar_Float(float(v))
    if isinstance(v, complex):
        return _w.Scalar_Complex((v.real, v.imag))
    raise TypeError(f"expected a host array or a Python scalar, got {type(v).__name__}")


def _operand(v):
    if type(v) is HostArray:
        return _w.Operand_Array(v.r)
    return _w.Operand_Scalar(_scalar(v))


_NEW_AXIS = _w.IndexItem_NewAxis()
_ELLIPSIS = _w.IndexItem_Ellipsis()


def _index(items):
    out = []
    for item in items:
        kind = item[0]
        if kind == "slice":
            out.append(_w.IndexItem_Slice(_w.Slice(item[1], item[2], item[3])))
        elif kind == "at":
            out.append(_w.IndexItem_At(item[1]))
        elif kind == "newaxis":
            out.append(_NEW_AXIS)
        elif kind == "ellipsis":
            out.append(_ELLIPSIS)
        else:
            raise ValueError(f"unknown index item '{kind}'")
    return out


class HostArray:
    """A handle to an array in the host; freed there when the last reference goes."""

    __slots__ = ("r", "_shape")

    def __init__(self, resource):
        self.r = resource
        self._shape = None

    @property
    def shape(self):
        shape = self._shape  # an array's shape never changes: one host call at most
        if shape is None:
            shape = self._shape = self.r.shape()
        return shape

    @property
    def dtype(self):
        return _NAMES[self.r.dtype()]

    def to_bytes(self):
        try:
            return self.r.to_bytes()
        except Err as e:
            raise _error(e) from None

    def getitem(self, items):
        try:
            return HostArray(self.r.get(_index(items)))
        except Err as e:
            raise _error(e) from None

    def select(self, mask):
        try:
            return HostArray(self.r.select(mask.r))
        except Err as e:
            raise _error(e) from None

    def take(self, indices, axis):
        try:
            return HostArray(self.r.take(list(indices), axis))
        except Err as e:
            raise _error(e) from None

    def reshape(self, shape):
        try:
            return HostArray(self.r.reshape(list(shape)))
        except Err as e:
            raise _error(e) from None

    def permute_dims(self, axes):
        try:
            return HostArray(self.r.permute_dims(None if axes is None else list(axes)))
        except Err as e:
            raise _error(e) from None

    def broadcast_to(self, shape):
        try:
            return HostArray(self.r.broadcast_to(list(shape)))
        except Err as e:
            raise _error(e) from None

    def expand_dims(self, axis):
        try:
            return HostArray(self.r.expand_dims(axis))
        except Err as e:
            raise _error(e) from None

    def squeeze(self, axes):
        try:
            return HostArray(self.r.squeeze(None if axes is None else list(axes)))
        except Err as e:
            raise _error(e) from None

    def astype(self, dtype_name):
        try:
            return HostArray(self.r.astype(_dtype(dtype_name)))
        except Err as e:
            raise _error(e) from None

    def set(self, items, value):
        try:
            self.r.set(_index(items), _operand(value))
        except Err as e:
            raise _error(e) from None

    def add_at(self, items, value):
        try:
            self.r.add_at(_index(items), _operand(value))
        except Err as e:
            raise _error(e) from None


def use_host_tiles():
    """From now on ``process`` gets tiles without data; ``tile()`` is the tile."""
    _w.use_host_tiles()


def tile():
    """The tile of the current ``process`` call: a read-only view ``[frames, *sig]``."""
    try:
        return HostArray(_w.tile())
    except Err as e:
        raise _error(e) from None


#: The most bytes one call hands the host (the host takes at most 1 MiB of data from a
#: plugin per call during ``init`` and ``process``): larger arrays go in pieces.
CHUNK_BYTES = 1 << 19


def from_bytes(dtype_name, shape, data):
    dtype = _dtype(dtype_name)
    try:
        if len(data) <= CHUNK_BYTES:
            return HostArray(_w.from_bytes(dtype, list(shape), data))
        # A flat array filled a piece at a time, then given its shape.
        itemsize = _ITEMSIZE[dtype_name]
        count = len(data) // itemsize
        flat = _w.zeros([count], dtype)
        step = CHUNK_BYTES // itemsize
        view = memoryview(data)
        for start in range(0, count, step):
            stop = min(start + step, count)
            piece = _w.from_bytes(dtype, [stop - start], bytes(view[start * itemsize : stop * itemsize]))
            flat.set([_w.IndexItem_Slice(_w.Slice(start, stop, None))], _w.Operand_Array(piece))
        return HostArray(flat.reshape(list(shape)))
    except Err as e:
        raise _error(e) from None


def zeros(shape, dtype_name):
    try:
        return HostArray(_w.zeros(list(shape), _dtype(dtype_name)))
    except Err as e:
        raise _error(e) from None


def full(shape, fill, dtype_name=None):
    try:
        return HostArray(_w.full(list(shape), _scalar(fill), None if dtype_name is None else _dtype(dtype_name)))
    except Err as e:
        raise _error(e) from None


def arange(start, stop, step, dtype_name):
    try:
        return HostArray(_w.arange(start, stop, step, _dtype(dtype_name)))
    except Err as e:
        raise _error(e) from None


def linspace(start, stop, num, endpoint, dtype_name):
    try:
        return HostArray(_w.linspace(start, stop, num, endpoint, _dtype(dtype_name)))
    except Err as e:
        raise _error(e) from None


def eye(rows, cols, k, dtype_name):
    try:
        return HostArray(_w.eye(rows, cols, k, _dtype(dtype_name)))
    except Err as e:
        raise _error(e) from None


def unary(name, x):
    try:
        return HostArray(_w.unary(_op(_UNARY, name), x.r))
    except Err as e:
        raise _error(e) from None


def binary(name, a, b):
    try:
        return HostArray(_w.binary(_op(_BINARY, name), _operand(a), _operand(b)))
    except Err as e:
        raise _error(e) from None


def reduce(name, x, axes=None, keepdims=False, dtype_name=None, correction=0.0):
    options = _w.ReduceOptions(None if axes is None else list(axes), keepdims,
                               None if dtype_name is None else _dtype(dtype_name), float(correction))
    try:
        return HostArray(_w.reduce(_op(_REDUCE, name), x.r, options))
    except Err as e:
        raise _error(e) from None


def sum_var(x, axes=None, keepdims=False, dtype_name=None, correction=0.0):
    options = _w.ReduceOptions(None if axes is None else list(axes), keepdims,
                               None if dtype_name is None else _dtype(dtype_name), float(correction))
    try:
        total, variance = _w.sum_var(x.r, options)
    except Err as e:
        raise _error(e) from None
    return HostArray(total), HostArray(variance)


def where_(condition, a, b):
    try:
        return HostArray(_w.where(condition.r, _operand(a), _operand(b)))
    except Err as e:
        raise _error(e) from None


def clip(x, lo=None, hi=None):
    try:
        return HostArray(_w.clip(x.r, None if lo is None else _operand(lo), None if hi is None else _operand(hi)))
    except Err as e:
        raise _error(e) from None


def matmul(a, b):
    try:
        return HostArray(_w.matmul(a.r, b.r))
    except Err as e:
        raise _error(e) from None


def tensordot(a, b, axes_a, axes_b):
    try:
        return HostArray(_w.tensordot(a.r, b.r, list(axes_a), list(axes_b)))
    except Err as e:
        raise _error(e) from None


def vecdot(a, b, axis, dtype_name=None):
    try:
        return HostArray(_w.vecdot(a.r, b.r, int(axis), None if dtype_name is None else _dtype(dtype_name)))
    except Err as e:
        raise _error(e) from None


def fft(name, x, axes=None):
    try:
        return HostArray(_w.fft(_op(_FFT, name), x.r, None if axes is None else list(axes)))
    except Err as e:
        raise _error(e) from None


def concat(xs, axis=0):
    try:
        return HostArray(_w.concat([x.r for x in xs], axis))
    except Err as e:
        raise _error(e) from None


def stack(xs, axis):
    try:
        return HostArray(_w.stack([x.r for x in xs], axis))
    except Err as e:
        raise _error(e) from None


def operations():
    """The operations of the contract, by kind (what ``xp`` defines its functions from)."""
    return [
        ("unary", list(_UNARY)),
        ("binary", list(_BINARY)),
        ("reduce", list(_REDUCE)),
        ("fft", list(_FFT)),
    ]
