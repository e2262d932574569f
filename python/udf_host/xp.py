"""`xp`: a NumPy-like namespace over the host's arrays.

Arrays live in udf-host (its executor, `host/src/arrays/`); this module is the Python face
of them, written so that it can be presented as `numpy` inside a UDF: operators, slicing,
`.shape` / `.dtype` / `.ndim`, `xp.sum(a, axis=...)`, `a[...] += b` into result buffers,
`astype`, `asarray`. Names and semantics follow the Python array API standard (NumPy 2's),
with NumPy's aliases (`arcsin`, `concatenate`, `ddof=`, ...).

The same file runs in two places, with two backends of the same shape:

- in this process: `udf_host.xp` over `udf_host._native.arrays` (tests, notebooks);
- inside a Python plugin (componentize-py): `xp` over the contract's `arrays` interface
  (`guest-sdk/python/xp_backend.py`), where a tile is a view of the host's memory.

    import udf_host.xp as np
    a = np.asarray([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    np.sum(a * 2, axis=0)            # array([ 8., 12.], dtype=float32)

The list of operations is the host's one table (`udf_host::arrays::ops`); a test checks
that every operation there is here.
"""

from __future__ import annotations

import builtins as _builtins
import math as _math
import struct as _struct
import weakref as _weakref

try:  # in this process
    from ._native import arrays as _b
except ImportError:  # inside a plugin: the contract's arrays interface
    import xp_backend as _b  # type: ignore[no-redef]

__array_api_version__ = "2024.12"


# -- dtypes -------------------------------------------------------------------------------


class dtype:
    """An element type: compares equal to itself, its name and the NumPy-style type object."""

    __slots__ = ("name", "kind", "itemsize", "_fmt")

    def __init__(self, name, kind, itemsize, fmt):
        self.name = name
        self.kind = kind
        self.itemsize = itemsize
        self._fmt = fmt

    def __eq__(self, other):
        if isinstance(other, dtype):
            return self.name == other.name
        if isinstance(other, str):
            return self.name == other
        name = getattr(other, "name", None) or getattr(getattr(other, "dtype", None), "name", None)
        return name == self.name

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f"dtype('{self.name}')"

    __str__ = lambda self: self.name  # noqa: E731

    @property
    def type(self):
        return self


bool = dtype("bool", "b", 1, "?")
int8 = dtype("int8", "i", 1, "b")
int16 = dtype("int16", "i", 2, "h")
int32 = dtype("int32", "i", 4, "i")
int64 = dtype("int64", "i", 8, "q")
uint8 = dtype("uint8", "u", 1, "B")
uint16 = dtype("uint16", "u", 2, "H")
uint32 = dtype("uint32", "u", 4, "I")
uint64 = dtype("uint64", "u", 8, "Q")
float32 = dtype("float32", "f", 4, "f")
float64 = dtype("float64", "f", 8, "d")
complex64 = dtype("complex64", "c", 8, "f")
complex128 = dtype("complex128", "c", 16, "d")

_DTYPES = {d.name: d for d in (bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                               float32, float64, complex64, complex128)}
_ALIASES = {"float": "float64", "int": "int64", "complex": "complex128", "double": "float64",
            "single": "float32", "f4": "float32", "f8": "float64", "u1": "uint8", "u2": "uint16",
            "u4": "uint32", "u8": "uint64", "i1": "int8", "i2": "int16", "i4": "int32", "i8": "int64",
            "c8": "complex64", "c16": "complex128", "<f4": "float32", "<f8": "float64", "<u2": "uint16"}


def _dtype(d):
    """Any dtype spelling (a dtype, its name, a NumPy dtype or type, Python's types)."""
    if d is None or isinstance(d, dtype):
        return d
    if d is _builtins.bool:
        return bool
    if d is int:
        return int64
    if d is float:
        return float64
    if d is complex:
        return complex128
    name = d if isinstance(d, str) else getattr(d, "name", None) or getattr(d, "__name__", None)
    if name is None and hasattr(d, "dtype"):
        name = d.dtype.name
    name = _ALIASES.get(name, name)
    if name in _DTYPES:
        return _DTYPES[name]
    raise TypeError(f"unsupported dtype {d!r}")


newaxis = None
pi = _math.pi
e = _math.e
inf = float("inf")
nan = float("nan")


class _Info:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def finfo(d):
    d = _dtype(d.dtype if isinstance(d, ndarray) else d)
    if d in (float32, complex64):
        return _Info(bits=32, eps=2.0**-23, max=3.4028234663852886e38, min=-3.4028234663852886e38,
                     smallest_normal=1.1754943508222875e-38, dtype=float32)
    if d in (float64, complex128):
        return _Info(bits=64, eps=2.0**-52, max=1.7976931348623157e308, min=-1.7976931348623157e308,
                     smallest_normal=2.2250738585072014e-308, dtype=float64)
    raise TypeError(f"finfo: {d} is not a floating dtype")


def iinfo(d):
    d = _dtype(d.dtype if isinstance(d, ndarray) else d)
    if d.kind not in "iu":
        raise TypeError(f"iinfo: {d} is not an integer dtype")
    bits = d.itemsize * 8
    if d.kind == "u":
        return _Info(bits=bits, min=0, max=2**bits - 1, dtype=d)
    return _Info(bits=bits, min=-(2 ** (bits - 1)), max=2 ** (bits - 1) - 1, dtype=d)


_KINDS = {"bool": "b", "signed integer": "i", "unsigned integer": "u", "integral": "iu",
          "real floating": "f", "complex floating": "c", "numeric": "iufc"}


def isdtype(dtype, kind):
    d = _dtype(dtype)
    if isinstance(kind, tuple):
        return _builtins.any(isdtype(d, k) for k in kind)
    if isinstance(kind, str):
        return d.kind in _KINDS[kind]
    return d == _dtype(kind)


def result_type(*arrays_and_dtypes):
    out = None
    for x in arrays_and_dtypes:
        if isinstance(x, ndarray):
            probe = x[(0,) * x.ndim] if x.size else zeros((), dtype=x.dtype)
        elif isinstance(x, (dtype, str, type)) or hasattr(x, "name"):
            probe = zeros((), dtype=_dtype(x))
        else:
            probe = x
        out = probe if out is None else _promoted(out, probe)
    return out.dtype if isinstance(out, ndarray) else asarray(out).dtype


def _is_bool(x):
    return x.dtype == bool if isinstance(x, ndarray) else isinstance(x, _builtins.bool)


def _promoted(a, b):
    """A probe of the dtype `a` and `b` promote to (0-d arrays or Python scalars): by adding
    them, except that bool, which `+` refuses, gives way to any other type."""
    if _is_bool(b):
        return a
    if _is_bool(a):
        return b
    return (zeros((), dtype=a.dtype) if isinstance(a, ndarray) else a) + b


def can_cast(from_, to):
    f, t = _dtype(from_.dtype if isinstance(from_, ndarray) else from_), _dtype(to)
    order = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}
    if f == t or f == bool:
        return True
    if order[f.kind] > order[t.kind]:
        return False
    if f.kind == t.kind:
        return f.itemsize <= t.itemsize
    if f.kind == "u" and t.kind == "i":
        return t.itemsize > f.itemsize
    if f.kind == "i" and t.kind == "u":
        return False
    if f.kind in "iu" and t.kind in "fc":
        need = 4 if f.itemsize <= 2 else 8
        return (t.itemsize if t.kind == "f" else t.itemsize // 2) >= need
    return (f.itemsize if f.kind == "f" else f.itemsize // 2) <= t.itemsize // 2


# -- indices ------------------------------------------------------------------------------


def _int_index(i):
    if isinstance(i, _builtins.bool):
        raise IndexError("boolean scalars are not supported as indices")
    if isinstance(i, ndarray):
        if i.ndim == 0 and i.dtype.kind in "iu":
            return int(i)
        raise IndexError("only integer scalars, slices, None, ... and boolean masks are indices")
    if hasattr(i, "__index__"):
        return i.__index__()
    raise IndexError(f"only integers, slices, None and ... are indices, not {type(i).__name__}")


def _index(key):
    """A Python index as the host's index items."""
    if not isinstance(key, tuple):
        key = (key,)
    items = []
    for k in key:
        if k is None:
            items.append(("newaxis",))
        elif k is Ellipsis:
            items.append(("ellipsis",))
        elif isinstance(k, slice):
            items.append(("slice",) + tuple(None if v is None else _int_index(v) for v in (k.start, k.stop, k.step)))
        else:
            items.append(("at", _int_index(k)))
    return items


# -- arrays -------------------------------------------------------------------------------


def _scalar_or_array(v):
    if isinstance(v, ndarray):
        return v._a
    if isinstance(v, (_builtins.bool, int, float, complex)):
        return v
    return asarray(v)._a


class ndarray:
    """An n-dimensional array in the host."""

    # `_of`: `(weakref to parent, key)` for a view made by basic indexing (`parent[key]`), else None.
    __slots__ = ("_a", "_of", "__weakref__")
    __array_priority__ = 1000

    def __init__(self, native):
        self._a = native
        self._of = None

    # attributes
    @property
    def shape(self):
        return tuple(self._a.shape)

    @property
    def dtype(self):
        return _DTYPES[self._a.dtype]

    @property
    def ndim(self):
        return len(self._a.shape)

    @property
    def size(self):
        n = 1
        for d in self._a.shape:
            n *= d
        return n

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    @property
    def T(self):
        return ndarray(self._a.permute_dims(None))

    @property
    def mT(self):
        if self.ndim < 2:
            raise ValueError("mT needs at least 2 dimensions")
        axes = list(range(self.ndim))
        axes[-2], axes[-1] = axes[-1], axes[-2]
        return ndarray(self._a.permute_dims(axes))

    @property
    def real(self):
        return real(self)

    @property
    def imag(self):
        return imag(self)

    @property
    def device(self):
        return "cpu"

    def to_device(self, device, /, *, stream=None):
        return self

    def __array_namespace__(self, *, api_version=None):
        import sys

        return sys.modules[__name__]

    # conversion
    def __len__(self):
        if not self.ndim:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self):
        if not self.ndim:
            raise TypeError("iteration over a 0-d array")
        for i in range(self.shape[0]):
            yield self[i]

    def tolist(self):
        flat = _unpack(self.dtype, self._a.to_bytes())
        def nest(values, shape):
            if not shape:
                return values[0]
            step = len(values) // shape[0] if shape[0] else 0
            return [nest(values[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]
        return nest(flat, self.shape)

    def item(self):
        if self.size != 1:
            raise ValueError("can only convert an array of size 1 to a Python scalar")
        return _unpack(self.dtype, self._a.to_bytes())[0]

    def tobytes(self):
        return self._a.to_bytes()

    def __bool__(self):
        if self.size != 1:
            raise ValueError("the truth value of an array with more than one element is ambiguous")
        return _builtins.bool(self.item())

    def __int__(self):
        v = self.item()
        if isinstance(v, complex):
            raise TypeError("cannot convert a complex array to int")
        return int(v)

    def __float__(self):
        v = self.item()
        if isinstance(v, complex):
            raise TypeError("cannot convert a complex array to float")
        return float(v)

    def __complex__(self):
        return complex(self.item())

    def __index__(self):
        if self.dtype.kind not in "iu" or self.ndim:
            raise TypeError("only 0-d integer arrays can be indices")
        return int(self.item())

    def __array__(self, dtype=None, copy=None):
        import numpy

        out = numpy.frombuffer(self._a.to_bytes(), dtype=self.dtype.name).reshape(self.shape)
        return out.astype(dtype) if dtype is not None else out.copy()

    def __repr__(self):
        return f"array({self.tolist()!r}, dtype={self.dtype.name})"

    __str__ = __repr__

    # indexing
    def __getitem__(self, key):
        if isinstance(key, ndarray) and key.dtype == bool:
            if key.ndim == 0:
                return ndarray(self._a.getitem([("newaxis",)])).__getitem__(ndarray(key._a.reshape([1])))
            return ndarray(self._a.select(key._a))
        if isinstance(key, (list,)) or (isinstance(key, ndarray) and key.dtype.kind in "iu" and key.ndim == 1):
            indices = [int(i) for i in (key.tolist() if isinstance(key, ndarray) else key)]
            return ndarray(self._a.take(indices, 0))
        view = ndarray(self._a.getitem(_index(key)))
        if _is_basic(key):
            # Weakly: a chain of views (`x = x[1:]` in a loop) must not keep every parent's
            # handle alive (the host caps live arrays).
            view._of = (_weakref.ref(self), key)
        return view

    def __setitem__(self, key, value):
        if type(value) is ndarray and value._of is not None and value._of[0]() is self and value._of[1] == key:
            # `x[key] = x[key]`: the last step of `x[key] += y`, whose `+=` already wrote
            # into `x` through the view (a copy of the region onto itself, skipped).
            return
        if isinstance(key, ndarray) and key.dtype == bool:
            if key.shape != self.shape:
                raise IndexError("a boolean mask must have the array's shape")
            self._a.set([], where(key, value, self)._a)
            return
        if isinstance(key, list) or (isinstance(key, ndarray) and key.dtype.kind in "iu" and key.ndim > 0):
            self._set_rows(key, value)
            return
        self._a.set(_index(key), _scalar_or_array(value))

    def _set_rows(self, key, value):
        """`a[indices] = value` with an integer array (NumPy's integer-array indexing along
        the first axis): row by row, the last of repeated indices wins."""
        indices = key if isinstance(key, ndarray) else asarray(key)
        if indices.dtype.kind not in "iu":
            raise IndexError("only integer arrays and boolean masks are array indices")
        flat = [int(i) for i in indices.reshape((-1,)).tolist()]
        rows = self.shape[1:]
        if not isinstance(value, ndarray) or value.ndim == 0:
            for i in flat:
                self._a.set([("at", i)], _scalar_or_array(value))
            return
        values = broadcast_to(value, tuple(indices.shape) + tuple(rows)).reshape((len(flat), *rows))
        for n, i in enumerate(flat):
            self._a.set([("at", i)], values[n]._a)

    # methods
    def astype(self, dtype, /, *, copy=True):
        return astype(self, dtype, copy=copy)

    def copy(self):
        return ndarray(self._a.astype(self._a.dtype))

    def fill(self, value):
        """Set every element to ``value`` (NumPy's ``ndarray.fill``)."""
        self._a.set([], _scalar_or_array(value))

    def reshape(self, *shape, copy=None):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return reshape(self, shape)

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = axes[0]
        return permute_dims(self, axes if axes else None)

    def ravel(self):
        return reshape(self, (-1,))

    flatten = ravel

    def squeeze(self, axis=None):
        return squeeze(self, axis)

    def sum(self, axis=None, dtype=None, keepdims=False):
        return sum(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def prod(self, axis=None, dtype=None, keepdims=False):
        return prod(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def mean(self, axis=None, dtype=None, keepdims=False):
        return mean(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def var(self, axis=None, dtype=None, ddof=0, keepdims=False):
        return var(self, axis=axis, dtype=dtype, correction=ddof, keepdims=keepdims)

    def std(self, axis=None, dtype=None, ddof=0, keepdims=False):
        return std(self, axis=axis, dtype=dtype, correction=ddof, keepdims=keepdims)

    def min(self, axis=None, keepdims=False):
        return min(self, axis=axis, keepdims=keepdims)

    def max(self, axis=None, keepdims=False):
        return max(self, axis=axis, keepdims=keepdims)

    def argmin(self, axis=None, keepdims=False):
        return argmin(self, axis=axis, keepdims=keepdims)

    def argmax(self, axis=None, keepdims=False):
        return argmax(self, axis=axis, keepdims=keepdims)

    def any(self, axis=None, keepdims=False):
        return any(self, axis=axis, keepdims=keepdims)

    def all(self, axis=None, keepdims=False):
        return all(self, axis=axis, keepdims=keepdims)

    def clip(self, min=None, max=None):
        return clip(self, min, max)

    def conj(self):
        return conj(self)

    def dot(self, other):
        return dot(self, other)

    # operators
    def _bin(self, name, other, reflected=False):
        if not isinstance(other, (ndarray, _builtins.bool, int, float, complex)):
            try:
                other = asarray(other)
            except TypeError:
                return NotImplemented
        a, b = (_scalar_or_array(other), self._a) if reflected else (self._a, _scalar_or_array(other))
        return ndarray(_b.binary(name, a, b))

    def _inplace(self, name, other):
        kind = self.dtype.kind
        if name == "add" and kind != "b" and (isinstance(other, ndarray) or (type(other) in (int, float) and kind in "fc")):
            # `x += v` in one pass, in place: the host broadcasts, checks `same_kind` casting
            # and shapes (LiberTEM's `self.results.x[:] += ...`, once per tile).
            self._a.add_at([], other._a if isinstance(other, ndarray) else other)
            return self
        result = self._bin(name, other)
        if result is NotImplemented:
            return result
        if result.shape != self.shape:
            raise ValueError(f"non-broadcastable output operand with shape {self.shape} for {result.shape}")
        if name == "add" and result.dtype == self.dtype:
            self._a.add_at([], _scalar_or_array(other))
        else:
            if not can_cast(result.dtype, self.dtype) and result.dtype.kind != self.dtype.kind:
                raise TypeError(f"cannot cast {result.dtype} to {self.dtype} in place (casting rule 'same_kind')")
            self._a.set([], result._a)
        return self

    def __add__(self, o): return self._bin("add", o)
    def __radd__(self, o): return self._bin("add", o, True)
    def __iadd__(self, o): return self._inplace("add", o)
    def __sub__(self, o): return self._bin("subtract", o)
    def __rsub__(self, o): return self._bin("subtract", o, True)
    def __isub__(self, o): return self._inplace("subtract", o)
    def __mul__(self, o): return self._bin("multiply", o)
    def __rmul__(self, o): return self._bin("multiply", o, True)
    def __imul__(self, o): return self._inplace("multiply", o)
    def __truediv__(self, o): return self._bin("divide", o)
    def __rtruediv__(self, o): return self._bin("divide", o, True)
    def __itruediv__(self, o): return self._inplace("divide", o)
    def __floordiv__(self, o): return self._bin("floor_divide", o)
    def __rfloordiv__(self, o): return self._bin("floor_divide", o, True)
    def __ifloordiv__(self, o): return self._inplace("floor_divide", o)
    def __mod__(self, o): return self._bin("remainder", o)
    def __rmod__(self, o): return self._bin("remainder", o, True)
    def __imod__(self, o): return self._inplace("remainder", o)
    def __pow__(self, o): return self._bin("pow", o)
    def __rpow__(self, o): return self._bin("pow", o, True)
    def __ipow__(self, o): return self._inplace("pow", o)
    def __and__(self, o): return self._bin("bitwise_and", o)
    def __rand__(self, o): return self._bin("bitwise_and", o, True)
    def __iand__(self, o): return self._inplace("bitwise_and", o)
    def __or__(self, o): return self._bin("bitwise_or", o)
    def __ror__(self, o): return self._bin("bitwise_or", o, True)
    def __ior__(self, o): return self._inplace("bitwise_or", o)
    def __xor__(self, o): return self._bin("bitwise_xor", o)
    def __rxor__(self, o): return self._bin("bitwise_xor", o, True)
    def __ixor__(self, o): return self._inplace("bitwise_xor", o)
    def __lshift__(self, o): return self._bin("bitwise_left_shift", o)
    def __rlshift__(self, o): return self._bin("bitwise_left_shift", o, True)
    def __ilshift__(self, o): return self._inplace("bitwise_left_shift", o)
    def __rshift__(self, o): return self._bin("bitwise_right_shift", o)
    def __rrshift__(self, o): return self._bin("bitwise_right_shift", o, True)
    def __irshift__(self, o): return self._inplace("bitwise_right_shift", o)
    def __eq__(self, o): return self._bin("equal", o)
    def __ne__(self, o): return self._bin("not_equal", o)
    def __lt__(self, o): return self._bin("less", o)
    def __le__(self, o): return self._bin("less_equal", o)
    def __gt__(self, o): return self._bin("greater", o)
    def __ge__(self, o): return self._bin("greater_equal", o)
    __hash__ = None

    def __matmul__(self, o): return matmul(self, asarray(o))
    def __rmatmul__(self, o): return matmul(asarray(o), self)
    def __imatmul__(self, o):
        self._a.set([], matmul(self, asarray(o))._a)
        return self
    def __neg__(self): return negative(self)
    def __pos__(self): return positive(self)
    def __abs__(self): return abs(self)
    def __invert__(self): return bitwise_invert(self)


def _unpack(d, data):
    if d.kind == "c":
        parts = _struct.unpack(f"<{len(data) // (d.itemsize // 2)}{d._fmt}", data)
        return [complex(parts[i], parts[i + 1]) for i in range(0, len(parts), 2)]
    values = list(_struct.unpack(f"<{len(data) // d.itemsize}{d._fmt}", data))
    return values


# -- constructors -------------------------------------------------------------------------


def _flatten(obj):
    """Nested sequences as (shape, flat values)."""
    if isinstance(obj, (list, tuple)):
        if not obj:
            return (0,), []
        parts = [_flatten(o) for o in obj]
        shape = parts[0][0]
        if _builtins.any(p[0] != shape for p in parts):
            raise ValueError("asarray: nested sequences of different lengths")
        return (len(obj),) + shape, [v for p in parts for v in p[1]]
    if isinstance(obj, ndarray):
        return obj.shape, [obj.tolist()] if obj.ndim == 0 else _flatten(obj.tolist())[1]
    return (), [obj]


def _infer(values):
    if _builtins.all(isinstance(v, _builtins.bool) for v in values) and values:
        return bool
    if _builtins.any(isinstance(v, complex) for v in values):
        return complex128
    if _builtins.any(isinstance(v, float) for v in values):
        return float64
    return int64 if values else float64


def asarray(obj, /, *, dtype=None, device=None, copy=None):
    """An array from an array, a NumPy array, a Python scalar or nested sequences."""
    dtype = _dtype(dtype)
    if isinstance(obj, ndarray):
        if dtype is None or dtype == obj.dtype:
            return obj.copy() if copy else obj
        return obj.astype(dtype)
    if hasattr(obj, "__array_interface__") or (hasattr(obj, "tobytes") and hasattr(obj, "dtype")):
        src = _dtype(obj.dtype.name)
        data = obj.tobytes() if getattr(obj, "flags", None) is None or obj.flags.c_contiguous else obj.copy().tobytes()
        a = ndarray(_b.from_bytes(src.name, list(obj.shape), data))
        return a if dtype is None or dtype == src else a.astype(dtype)
    if copy is False:
        raise ValueError("asarray: cannot avoid a copy of a Python object")
    shape, values = _flatten(obj)
    if _builtins.any(isinstance(v, ndarray) for v in values):
        values = [v.item() if isinstance(v, ndarray) else v for v in values]
    target = dtype or _infer(values)
    if target.kind in "iu" and _builtins.any(isinstance(v, float) for v in values):
        raise TypeError("asarray: floats given for an integer dtype")
    if target == bool:
        packed = bytes(1 if v else 0 for v in values)
    elif target.kind == "c":
        flat = []
        for v in values:
            c = complex(v)
            flat += [c.real, c.imag]
        packed = _struct.pack(f"<{len(flat)}{target._fmt}", *flat)
    elif target.kind in "iu":
        info = iinfo(target)
        for v in values:
            if not info.min <= int(v) <= info.max:
                raise OverflowError(f"Python integer {v} out of bounds for {target}")
        packed = _struct.pack(f"<{len(values)}{target._fmt}", *[int(v) for v in values])
    else:
        packed = _struct.pack(f"<{len(values)}{target._fmt}", *[float(v) for v in values])
    return ndarray(_b.from_bytes(target.name, list(shape), packed))


array = asarray


def _shape(shape):
    if isinstance(shape, int):
        return [shape]
    return [int(s) for s in shape]


def zeros(shape, *, dtype=None, device=None):
    return ndarray(_b.zeros(_shape(shape), (_dtype(dtype) or float64).name))


def empty(shape, *, dtype=None, device=None):
    return zeros(shape, dtype=dtype)


def ones(shape, *, dtype=None, device=None):
    return full(shape, 1, dtype=dtype or float64)


def full(shape, fill_value, *, dtype=None, device=None):
    d = _dtype(dtype)
    if isinstance(fill_value, ndarray):
        fill_value = fill_value.item()
    if d is None:
        d = _infer([fill_value])
    return ndarray(_b.full(_shape(shape), fill_value, d.name))


def zeros_like(x, /, *, dtype=None, device=None):
    return zeros(x.shape, dtype=dtype or x.dtype)


def empty_like(x, /, *, dtype=None, device=None):
    return zeros(x.shape, dtype=dtype or x.dtype)


def ones_like(x, /, *, dtype=None, device=None):
    return ones(x.shape, dtype=dtype or x.dtype)


def full_like(x, /, fill_value, *, dtype=None, device=None):
    return full(x.shape, fill_value, dtype=dtype or x.dtype)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    if stop is None:
        start, stop = 0, start
    d = _dtype(dtype) or (float64 if _builtins.any(isinstance(v, float) for v in (start, stop, step)) else int64)
    return ndarray(_b.arange(float(start), float(stop), float(step), d.name))


def linspace(start, stop, /, num=50, *, dtype=None, device=None, endpoint=True):
    return ndarray(_b.linspace(float(start), float(stop), int(num), _builtins.bool(endpoint),
                               (_dtype(dtype) or float64).name))


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    return ndarray(_b.eye(int(n_rows), int(n_rows if n_cols is None else n_cols), int(k),
                          (_dtype(dtype) or float64).name))


# -- shapes -------------------------------------------------------------------------------


def astype(x, dtype, /, *, copy=True, device=None):
    d = _dtype(dtype)
    if not copy and d == x.dtype:
        return x
    if type(x) is _Tile and _holds_exactly(x.dtype, d):
        return _Deferred(("astype", x), x.shape, d)
    return ndarray(x._a.astype(d.name))


def reshape(x, /, shape, *, copy=None):
    return ndarray(x._a.reshape(_shape(shape)))


def permute_dims(x, /, axes=None):
    return ndarray(x._a.permute_dims(None if axes is None else [int(a) for a in axes]))


def transpose(x, axes=None):
    return permute_dims(x, axes)


def matrix_transpose(x, /):
    return x.mT


def broadcast_to(x, /, shape):
    return ndarray(x._a.broadcast_to(_shape(shape)))


def broadcast_arrays(*arrays):
    shape = broadcast_shapes(*[a.shape for a in arrays])
    return [broadcast_to(a, shape) for a in arrays]


def broadcast_shapes(*shapes):
    ndim = _builtins.max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, d in enumerate(s):
            j = ndim - len(s) + i
            if out[j] == 1:
                out[j] = d
            elif d != 1 and d != out[j]:
                raise ValueError(f"shapes {shapes} do not broadcast together")
    return tuple(out)


def expand_dims(x, /, axis=0):
    return ndarray(x._a.expand_dims(int(axis)))


def squeeze(x, /, axis=None):
    if isinstance(axis, int):
        axis = (axis,)
    return ndarray(x._a.squeeze(None if axis is None else list(axis)))


def concat(arrays, /, *, axis=0):
    return ndarray(_b.concat([asarray(a)._a for a in arrays], axis))


concatenate = concat


def stack(arrays, /, *, axis=0):
    return ndarray(_b.stack([asarray(a)._a for a in arrays], int(axis)))


def take(x, indices, /, *, axis=None):
    idx = [int(i) for i in (indices.tolist() if isinstance(indices, ndarray) else indices)]
    return ndarray(x._a.take(idx, axis))


def flip(x, /, *, axis=None):
    axes = range(x.ndim) if axis is None else ([axis] if isinstance(axis, int) else axis)
    key = [slice(None)] * x.ndim
    for a in axes:
        key[a] = slice(None, None, -1)
    return x[tuple(key)]


def ravel(x):
    return reshape(x, (-1,))


# -- elementwise --------------------------------------------------------------------------


def _array(x):
    return x if isinstance(x, ndarray) else asarray(x)


def _unary(name):
    def f(x, /):
        if name == "square" and _is_conversion(x):
            return _Deferred(("multiply", x, x), x.shape, x.dtype)
        return ndarray(_b.unary(name, _array(x)._a))

    f.__name__ = name
    f.__doc__ = f"The array API's `{name}`, elementwise, computed in the host."
    return f


def _binary(name):
    def f(x1, x2, /):
        a = x1._a if isinstance(x1, ndarray) else _scalar_or_array(x1)
        b = x2._a if isinstance(x2, ndarray) else _scalar_or_array(x2)
        return ndarray(_b.binary(name, a, b))

    f.__name__ = name
    f.__doc__ = f"The array API's `{name}`, broadcasting, computed in the host."
    return f


def where(condition, x1, x2, /):
    c = _array(condition)
    return ndarray(_b.where_(c._a, _scalar_or_array(x1), _scalar_or_array(x2)))


def clip(x, /, min=None, max=None):
    lo = None if min is None else _scalar_or_array(min)
    hi = None if max is None else _scalar_or_array(max)
    return ndarray(_b.clip(_array(x)._a, lo, hi))


# -- reductions ---------------------------------------------------------------------------


def _axes(axis):
    if axis is None:
        return None
    if isinstance(axis, (tuple, list)):
        return [int(a) for a in axis]
    return [int(axis)]


def _reduction(name, takes_dtype=False, takes_correction=False):
    def f(x, /, *, axis=None, keepdims=False, dtype=None, correction=0.0, ddof=None, out=None):
        x = _array(x)
        if ddof is not None:
            correction = ddof
        d = _dtype(dtype)
        if type(x) is _Deferred and x._how is not None:
            computed = _deferred_reduction(name, x, axis, _builtins.bool(keepdims), d, float(correction))
            if computed is not None:
                return computed
        if name in ("sum", "prod") and d is None and x.dtype.kind in "iub":
            d = uint64 if x.dtype.kind == "u" else int64
        return ndarray(_b.reduce(name, x._a, _axes(axis), _builtins.bool(keepdims), d.name if d else None,
                                 float(correction)))

    f.__name__ = name
    f.__doc__ = f"The array API's `{name}` over `axis` (all if None), computed in the host."
    return f


def sum_var(x, /, *, axis=None, keepdims=False, dtype=None, correction=0.0, ddof=None):
    """udf-host's own (not the array API's, not NumPy's): `(sum(x), var(x))` over the same
    axes, reading `x` once where the two calls read it twice — a tile's per-pixel sum and
    variance, `sum_var(tile, axis=0)`. `dtype` (a floating dtype; default `var`'s) is both
    results', the sums accumulated in float64; `correction` (or `ddof`) is the variance's."""
    x = _array(x)
    if ddof is not None:
        correction = ddof
    d = _dtype(dtype)
    if _is_conversion(x):
        # A tile's deferred conversion: the tile itself, read with the conversion's dtype.
        x, d = x._how[1], d or x._dtype
    total, variance = _b.sum_var(x._a, _axes(axis), _builtins.bool(keepdims), d.name if d else None,
                                 float(correction))
    return ndarray(total), ndarray(variance)


def count_nonzero(x, /, *, axis=None, keepdims=False):
    return ndarray(_b.reduce("count_nonzero", _array(x)._a, _axes(axis), _builtins.bool(keepdims), None, 0.0))


def argmin(x, /, *, axis=None, keepdims=False):
    return ndarray(_b.reduce("argmin", _array(x)._a, _axes(axis), _builtins.bool(keepdims), None, 0.0))


def argmax(x, /, *, axis=None, keepdims=False):
    return ndarray(_b.reduce("argmax", _array(x)._a, _axes(axis), _builtins.bool(keepdims), None, 0.0))


# -- products and transforms --------------------------------------------------------------


def matmul(x1, x2, /):
    return ndarray(_b.matmul(_array(x1)._a, _array(x2)._a))


def tensordot(x1, x2, /, *, axes=2):
    x1, x2 = _array(x1), _array(x2)
    if isinstance(axes, int):
        a = list(range(x1.ndim - axes, x1.ndim))
        b = list(range(axes))
    else:
        a, b = ([axes[0]] if isinstance(axes[0], int) else list(axes[0]),
                [axes[1]] if isinstance(axes[1], int) else list(axes[1]))
    return ndarray(_b.tensordot(x1._a, x2._a, a, b))


def vecdot(x1, x2, /, *, axis=-1, dtype=None):
    """The array API's `vecdot`: the sum over `axis` of `conj(x1) * x2` (the other axes
    broadcast), computed in the host; `dtype=` as NumPy's (both converted to it first)."""
    d = _dtype(dtype)
    return ndarray(_b.vecdot(_array(x1)._a, _array(x2)._a, int(axis), d.name if d else None))


def dot(a, b):
    a, b = _array(a), _array(b)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    if b.ndim <= 2:
        return matmul(a, b)
    return tensordot(a, b, axes=([a.ndim - 1], [b.ndim - 2]))


class _FFT:
    """`xp.fft`: the two-dimensional transforms and the shifts."""

    @staticmethod
    def _call(name, x, axes):
        return ndarray(_b.fft(name, _array(x)._a, None if axes is None else [int(a) for a in axes]))

    def fft2(self, x, s=None, axes=(-2, -1), norm="backward"):
        return self._call("fft2", x, axes)

    def ifft2(self, x, s=None, axes=(-2, -1), norm="backward"):
        return self._call("ifft2", x, axes)

    def rfft2(self, x, s=None, axes=(-2, -1), norm="backward"):
        return self._call("rfft2", x, axes)

    def irfft2(self, x, s=None, axes=(-2, -1), norm="backward"):
        return self._call("irfft2", x, axes)

    def fftshift(self, x, axes=None):
        return self._call("fftshift", x, _axes(axes))

    def ifftshift(self, x, axes=None):
        return self._call("ifftshift", x, _axes(axes))


fft = _FFT()


# -- deferred conversions of a tile --------------------------------------------------------


def _holds_exactly(src, dst):
    """Whether `dst` (a float dtype) holds every value of `src` exactly."""
    if dst.kind != "f":
        return False
    if src.kind == "b":
        return True
    if src.kind in "iu":
        return src.itemsize <= (2 if dst.itemsize == 4 else 4)
    return src.kind == "f" and src.itemsize <= dst.itemsize


class _Tile(ndarray):
    """The tile (or a frame of it) of the runner's current `process` call: read-only
    memory of the host that ends with the call. Its `astype` to a float dtype that holds
    its values exactly is deferred (`_Deferred`); basic indexing keeps it a `_Tile`."""

    __slots__ = ()

    def __getitem__(self, key):
        view = ndarray.__getitem__(self, key)
        return _Tile(view._a) if _is_basic(key) else view

    def _at(self, i):
        """`self[i]` for an int `i` (the runner's frames: one host call, nothing else)."""
        return _Tile(self._a.getitem((("at", i),)))


def _is_basic(key):
    items = key if isinstance(key, tuple) else (key,)
    return _builtins.all(i is None or i is Ellipsis or type(i) in (int, slice) for i in items)


_SLOT = ndarray.__dict__["_a"]
#: Weak references to the deferred arrays made since the last `_settle`.
_DEFERRED = []


class _Deferred(ndarray):
    """An array not computed yet: a tile's `astype` to a float dtype that holds its
    values exactly, or the product of two such (`t * t`, `t ** 2`, `square(t)`).

    Reductions that can read the tile instead never compute it: `sum`, `mean`, `var`,
    `std`, `prod` and NaN forms of a conversion are the tile's with `dtype=`; `sum`
    over one axis of a product is `vecdot` of the tiles. So
    `np.sum(t * t, axis=0)` with `t = tile.astype(np.float64)` is one pass over the
    stored tile, with no float64 copy (a whole partition of uint16 frames made two
    float64 temporaries four times its size). Any other use computes it, once, as
    eager evaluation would have; `_settle` computes those still alive when the tile's
    call ends, so a copy a class keeps outlives the tile, as NumPy's would.
    """

    __slots__ = ("_how", "_shape", "_dtype")

    def __init__(self, how, shape, dt):
        self._how = how
        self._shape = tuple(shape)
        self._dtype = dt
        _DEFERRED.append(_weakref.ref(self))

    @property
    def _a(self):
        try:
            return _SLOT.__get__(self, ndarray)
        except AttributeError:
            pass
        how = self._how
        if how[0] == "astype":
            native = how[1]._a.astype(self._dtype.name)
        else:
            native = _b.binary("multiply", how[1]._a, how[2]._a)
        _SLOT.__set__(self, native)
        self._how = None
        return native

    @property
    def shape(self):
        return self._shape

    @property
    def dtype(self):
        return self._dtype

    @property
    def ndim(self):
        return len(self._shape)

    @property
    def size(self):
        return _math.prod(self._shape)

    def __mul__(self, o):
        if _is_conversion(self) and _is_conversion(o) and o._dtype == self._dtype and o._shape == self._shape:
            return _Deferred(("multiply", self, o), self._shape, self._dtype)
        return ndarray.__mul__(self, o)

    def __rmul__(self, o):
        return ndarray.__rmul__(self, o)

    def __pow__(self, o):
        if type(o) is int and o == 2 and _is_conversion(self):
            return _Deferred(("multiply", self, self), self._shape, self._dtype)
        return ndarray.__pow__(self, o)


def _is_conversion(x):
    return type(x) is _Deferred and x._how is not None and x._how[0] == "astype"


#: Reductions whose `dtype=` converts each element first: of a conversion, they are
#: the source's with the conversion's dtype.
_CONVERTING_REDUCTIONS = frozenset(("sum", "prod", "mean", "var", "std", "nansum", "nanmean", "nanvar", "nanstd"))


def _deferred_reduction(name, x, axis, keepdims, d, correction):
    """A reduction of a deferred array from its sources, or None where it has to be
    computed first."""
    how = x._how
    if how[0] == "astype":
        if name not in _CONVERTING_REDUCTIONS:
            return None
        return ndarray(_b.reduce(name, how[1]._a, _axes(axis), keepdims, (d or x._dtype).name, correction))
    single = axis if type(axis) is int else (axis[0] if isinstance(axis, (tuple, list)) and len(axis) == 1 else None)
    if name != "sum" or single is None or keepdims or (d is not None and d != x._dtype):
        return None
    sources = [f._how[1]._a if f._how is not None else f._a for f in how[1:]]
    return ndarray(_b.vecdot(sources[0], sources[1], int(single), x._dtype.name))


def _tile(native):
    """The runner's tile of the current call (see `_Tile`)."""
    return _Tile(native)


def _settle(compute=True):
    """End of a tile's call: compute the deferred arrays still alive (a class kept
    them), then forget them all (`compute=False` after a failed call)."""
    if not _DEFERRED:
        return
    pending = _DEFERRED[:]
    _DEFERRED.clear()
    if compute:
        for ref in pending:
            x = ref()
            if x is not None and x._how is not None:
                _ = x._a


# -- the table ----------------------------------------------------------------------------

#: NumPy's names for the array API's functions.
NUMPY_ALIASES = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh",
                 "arccosh": "acosh", "arctanh": "atanh", "arctan2": "atan2", "power": "pow",
                 "invert": "bitwise_invert", "left_shift": "bitwise_left_shift",
                 "right_shift": "bitwise_right_shift", "mod": "remainder", "absolute": "abs",
                 "true_divide": "divide", "conjugate": "conj"}

_g = globals()
for _kind, _names in _b.operations():
    for _name in _names:
        if _kind == "unary":
            _g[_name] = _unary(_name)
        elif _kind == "binary":
            _g[_name] = _binary(_name)
        elif _kind == "reduce" and _name not in ("count_nonzero", "argmin", "argmax"):
            _g[_name] = _reduction(_name)
for _alias, _name in NUMPY_ALIASES.items():
    _g[_alias] = _g[_name]
del _g, _kind, _names, _name, _alias


class _NamespaceInfo:
    """`__array_namespace_info__()`: what this namespace offers."""

    def capabilities(self):
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self):
        return "cpu"

    def devices(self):
        return ["cpu"]

    def default_dtypes(self, *, device=None):
        return {"real floating": float64, "complex floating": complex128, "integral": int64, "indexing": int64}

    def dtypes(self, *, device=None, kind=None):
        out = dict(_DTYPES)
        if kind is not None:
            out = {n: d for n, d in out.items() if isdtype(d, kind)}
        return out


def __array_namespace_info__():
    return _NamespaceInfo()
