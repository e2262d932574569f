"""udf_sdk: write udf-host plugins in Python (built with componentize-py).

The SDK hides the bindings componentize-py generates from `wit/udf.wit` and gives a plugin
author LiberTEM's view of a UDF: a class with ``process_tile`` / ``process_frame`` /
``process_partition``, result buffers seen through the view shapes of docs/contract.md,
and pure ``merge`` / ``get_results``. A sum plugin::

    import udf_sdk as udf

    class Sum(udf.Udf):
        description = udf.Description("my-sum", "0.1.0", "Sum of all frames")
        # dtype: the run's input dtype; merge: how the default merge combines it
        buffers = [udf.BufferDecl.sig("intensity", udf.INPUT, merge="add")]

        def process_tile(self, tile, results):
            results.accumulate("intensity", tile, "add")  # the tile's part of the frame

    Udf = udf.export(Sum)                        # componentize-py looks for `Udf`

A function of one frame is a whole plugin (LiberTEM's ``ctx.map``)::

    Udf = udf.frame_map("row-sums", lambda frame: [float(sum(row)) for row in frame.rows()])

Arrays arrive as ``bytes`` (the plugin declares ``data-access: bytes``) and are viewed as
typed ``memoryview`` objects without a copy. Dtypes are NumPy names (``"float32"``).
Complex buffers are viewed as their float parts, with one more trailing axis of length 2
(real, imaginary).

With ``Description(..., host_arrays=True)`` every array a plugin sees is an ``xp`` array
instead (``xp``: the NumPy-like namespace of ``python/udf_host/xp.py``, over the
contract's ``arrays`` interface): the tile, frames, result buffers and array parameters
live in the host, and NumPy-style code runs at the host's speed, the tile never copied
into the plugin::

    import udf_sdk as udf
    import xp as np

    class Sum(udf.Udf):
        description = udf.Description("my-sum", "0.1.0", "Sum of all frames", host_arrays=True)
        buffers = [udf.BufferDecl.sig("intensity", udf.INPUT, merge="add")]

        def process_tile(self, tile, results):
            results.intensity[:] += np.sum(tile.data, axis=0)
"""

import copy
import sys
import traceback

from componentize_py_types import Err
from wit_world import exports as _exports
from wit_world.imports import host as _host
from wit_world.imports import types as t

# --------------------------------------------------------------------------------------
# dtypes

#: NumPy name -> (wit enum, memoryview format, bytes per element, values per element)
_DTYPES = {
    "bool": (t.Dtype.BOOLEAN, "B", 1, 1),
    "uint8": (t.Dtype.UINT8, "B", 1, 1),
    "uint16": (t.Dtype.UINT16, "H", 2, 1),
    "uint32": (t.Dtype.UINT32, "I", 4, 1),
    "uint64": (t.Dtype.UINT64, "Q", 8, 1),
    "int8": (t.Dtype.INT8, "b", 1, 1),
    "int16": (t.Dtype.INT16, "h", 2, 1),
    "int32": (t.Dtype.INT32, "i", 4, 1),
    "int64": (t.Dtype.INT64, "q", 8, 1),
    "float32": (t.Dtype.FLOAT32, "f", 4, 1),
    "float64": (t.Dtype.FLOAT64, "d", 8, 1),
    "complex64": (t.Dtype.COMPLEX64, "f", 8, 2),
    "complex128": (t.Dtype.COMPLEX128, "d", 16, 2),
}
_NAME_OF = {v[0]: k for k, v in _DTYPES.items()}

#: Every dtype name the SDK knows.
DTYPES = tuple(_DTYPES)


def _wit_dtype(name):
    try:
        return _DTYPES[name][0]
    except KeyError:
        raise UdfError.bad_param(f"'{name}' is not a dtype name (expected one of {', '.join(DTYPES)})") from None


def dtype_name(dtype):
    """The NumPy name of a wit dtype enum value (or a name, returned unchanged)."""
    return dtype if isinstance(dtype, str) else _NAME_OF[dtype]


def itemsize(dtype):
    """Bytes per element of a dtype name."""
    return _DTYPES[dtype][2]


def is_complex(dtype):
    """Whether a dtype name is complex (viewed as float pairs)."""
    return _DTYPES[dtype][3] == 2


# --------------------------------------------------------------------------------------
# errors and logging


class UdfError(Exception):
    """An expected failure, reported to the host as a typed ``udf-error`` instead of a trap."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.message = message

    @staticmethod
    def bad_param(message):
        return UdfError(t.ErrorKind.BAD_PARAM, message)

    @staticmethod
    def invalid_data(message):
        return UdfError(t.ErrorKind.INVALID_DATA, message)

    @staticmethod
    def internal(message):
        return UdfError(t.ErrorKind.INTERNAL, message)


_LEVELS = {
    "trace": _host.LogLevel.TRACE,
    "debug": _host.LogLevel.DEBUG,
    "info": _host.LogLevel.INFO,
    "warn": _host.LogLevel.WARN,
    "error": _host.LogLevel.ERROR,
}


def log(level, message):
    """Send a log line to the host (``level``: trace, debug, info, warn, error)."""
    _host.log(_LEVELS[level], str(message))


# --------------------------------------------------------------------------------------
# n-d views over typed memory


class View:
    """A strided n-d view of a typed 1-D ``memoryview`` (LiberTEM's buffer views).

    ``shape`` and ``strides`` (in elements) describe the view; the last axis is always
    contiguous. Index with ``v[i]`` (a sub-view, or an element for 1-D views) or
    ``v[i, j, ...]`` (an element); ``v.row(i, j)`` is a ``memoryview`` of one row of the last
    axis, ``v.rows()`` iterates over all of them, ``v.flat()`` gives the whole view as one
    ``memoryview`` when it is contiguous. Iterating yields the sub-views along axis 0.
    """

    __slots__ = ("mem", "offset", "shape", "strides", "dtype")

    def __init__(self, mem, shape, strides=None, offset=0, dtype=None):
        self.mem = mem
        self.shape = tuple(shape)
        self.offset = offset
        self.dtype = dtype
        if strides is None:
            strides = []
            step = 1
            for n in reversed(self.shape):
                strides.append(step)
                step *= n
            strides.reverse()
        self.strides = tuple(strides)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __len__(self):
        return self.shape[0]

    def _element_offset(self, idx):
        if len(idx) != len(self.shape):
            raise IndexError(f"{len(idx)} indices for a {len(self.shape)}-d view")
        off = self.offset
        for i, n, s in zip(idx, self.shape, self.strides):
            if i < 0:
                i += n
            if not 0 <= i < n:
                raise IndexError(f"index {i} out of range for an axis of length {n}")
            off += i * s
        return off

    def __getitem__(self, idx):
        if isinstance(idx, tuple):
            if len(idx) < len(self.shape):
                return self._sub(idx)
            return self.mem[self._element_offset(idx)]
        if len(self.shape) == 1:
            return self.mem[self._element_offset((idx,))]
        return self._sub((idx,))

    def __setitem__(self, idx, value):
        if not isinstance(idx, tuple):
            idx = (idx,)
        self.mem[self._element_offset(idx)] = value

    def _sub(self, idx):
        off = self.offset
        for i, n, s in zip(idx, self.shape, self.strides):
            if i < 0:
                i += n
            if not 0 <= i < n:
                raise IndexError(f"index {i} out of range for an axis of length {n}")
            off += i * s
        k = len(idx)
        return View(self.mem, self.shape[k:], self.strides[k:], off, self.dtype)

    def __iter__(self):
        if len(self.shape) == 1:
            return iter(self.row())
        return (self._sub((i,)) for i in range(self.shape[0]))

    def row(self, *idx):
        """One row of the last axis (all but the last index given) as a ``memoryview``."""
        start = self.offset
        for i, s in zip(idx, self.strides):
            start += i * s
        return self.mem[start : start + self.shape[-1]]

    def rows(self):
        """Every row of the last axis, in C order, as ``memoryview`` objects."""
        if not self.shape:
            yield self.mem[self.offset : self.offset + 1]
            return
        outer = self.shape[:-1]
        n = self.shape[-1]
        if not outer:
            yield self.mem[self.offset : self.offset + n]
            return
        idx = [0] * len(outer)
        count = 1
        for d in outer:
            count *= d
        for _ in range(count):
            start = self.offset
            for i, s in zip(idx, self.strides):
                start += i * s
            yield self.mem[start : start + n]
            for axis in reversed(range(len(outer))):
                idx[axis] += 1
                if idx[axis] < outer[axis]:
                    break
                idx[axis] = 0

    def is_contiguous(self):
        step = 1
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n > 1 and s != step:
                return False
            step *= n
        return True

    def flat(self):
        """The whole view as one 1-D ``memoryview`` (only for contiguous views)."""
        if not self.is_contiguous():
            raise UdfError.internal("flat() of a non-contiguous view; use rows()")
        return self.mem[self.offset : self.offset + self.size]

    def tolist(self):
        """The elements as nested Python lists."""
        if len(self.shape) == 1:
            return self.row().tolist()
        return [sub.tolist() for sub in self]

    def fill(self, value):
        """Set every element to ``value``."""
        for row in self.rows():
            for i in range(len(row)):
                row[i] = value


def iadd(dest, src):
    """``dest += src`` elementwise for two views of the same shape."""
    if dest.shape != src.shape:
        raise UdfError.internal(f"iadd: shapes {dest.shape} and {src.shape} differ")
    fmt = dest.mem.format
    from array import array
    from operator import add

    for d, s in zip(dest.rows(), src.rows()):
        d[:] = array(fmt, map(add, d, s))


def _combine_values(a, b, op):
    if op == "add":
        return a + b
    if op == "assign":
        return b
    if a != a:  # NaN wins, as with np.minimum / np.maximum
        return a
    if op == "min":
        return a if a <= b else b
    return a if a >= b else b


def _wrap(dtype):
    """A function that brings a Python number into range of an integer dtype (wrapping, as
    NumPy's integer arithmetic does), or None for floats."""
    if dtype == "bool":
        return lambda v: 1 if v else 0
    if dtype.startswith("uint") or dtype.startswith("int"):
        bits = 8 * itemsize(dtype)
        signed = dtype.startswith("int")

        def wrap(v):
            v = int(v) & ((1 << bits) - 1)
            return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v

        return wrap
    return None


def combine(dest, src, op):
    """``dest = dest op src`` elementwise for two views of the same shape; ``op``: ``"add"``,
    ``"min"``, ``"max"`` (NaN wins, as with ``np.maximum``), ``"assign"``. Values are
    converted to ``dest``'s dtype (integers wrap)."""
    if op not in _MERGES:
        raise UdfError.internal(f"combine: op must be one of {', '.join(_MERGES)}, found {op!r}")
    if dest.size != src.size:
        raise UdfError.internal(f"combine: shapes {dest.shape} and {src.shape} differ")
    if op in ("min", "max") and dest.dtype and is_complex(dest.dtype):
        raise UdfError.internal(f"combine: {dest.dtype} values have no {op}")
    wrap = _wrap(dest.dtype) if dest.dtype else None
    for d, s_ in zip(dest.rows(), src.rows()):
        for i, v in enumerate(s_):
            value = _combine_values(d[i], v, op)
            d[i] = wrap(value) if wrap else value


def accumulate(dest, frames, op):
    """``dest = dest op frame`` for every frame of the view ``frames`` (``[n, *dest.shape]``),
    e.g. a tile's frames into a sig buffer's part under the tile."""
    for frame in frames:
        combine(dest, frame, op)


def _identity(dtype, op):
    """The identity of ``op`` in ``dtype``: +-inf, an integer's extremes, or 0."""
    if op not in ("min", "max"):
        return 0
    if dtype == "bool":
        return 1 if op == "min" else 0
    if dtype.startswith("uint"):
        return (1 << 8 * itemsize(dtype)) - 1 if op == "min" else 0
    if dtype.startswith("int"):
        half = 1 << (8 * itemsize(dtype) - 1)
        return half - 1 if op == "min" else -half
    return float("inf") if op == "min" else float("-inf")


def _typed(buf, dtype):
    """A writable or read-only 1-D typed memoryview of raw bytes, without a copy."""
    fmt = _DTYPES[dtype][1]
    mem = memoryview(buf)
    if mem.format != "B" or mem.ndim != 1:
        mem = mem.cast("B")
    return mem.cast(fmt)


def _value_shape(dtype, shape):
    return tuple(shape) + ((2,) if is_complex(dtype) else ())


def _array_bytes(ndarray):
    """The raw little-endian bytes of a wit ``ndarray`` (whichever form it came in)."""
    data = ndarray.data
    if isinstance(data, t.ArrayData_Bytes):
        return data.value
    dtype = dtype_name(ndarray.dtype)
    if isinstance(data, (t.ArrayData_Uint8, t.ArrayData_Int8)):
        return data.value
    from array import array

    if isinstance(data, t.ArrayData_Boolean):
        return bytes(1 if v else 0 for v in data.value)
    return array(_DTYPES[dtype][1], data.value).tobytes()


class Array:
    """An array parameter: ``dtype`` (a name), ``shape`` and a typed ``view``."""

    def __init__(self, ndarray):
        self.dtype = dtype_name(ndarray.dtype)
        self.shape = tuple(ndarray.shape)
        self.view = View(_typed(_array_bytes(ndarray), self.dtype), _value_shape(self.dtype, self.shape),
                         dtype=self.dtype)


# --------------------------------------------------------------------------------------
# description, params, buffers


class ParamSpec:
    """Declaration of a parameter (see ``Description``)."""

    def __init__(self, name, ty, doc, default=None, nav_aux=False):
        self.name, self.ty, self.doc, self.default, self.nav_aux = name, ty, doc, default, nav_aux

    @staticmethod
    def boolean(name, doc, default=None):
        return ParamSpec(name, t.ParamType.BOOLEAN, doc, None if default is None else t.ParamValue_Boolean(default))

    @staticmethod
    def int(name, doc, default=None):
        return ParamSpec(name, t.ParamType.INT, doc, None if default is None else t.ParamValue_Int(default))

    @staticmethod
    def float(name, doc, default=None):
        return ParamSpec(name, t.ParamType.FLOAT, doc, None if default is None else t.ParamValue_Float(default))

    @staticmethod
    def text(name, doc, default=None):
        return ParamSpec(name, t.ParamType.TEXT, doc, None if default is None else t.ParamValue_Text(default))

    @staticmethod
    def array(name, doc, nav_aux=False):
        """A required n-d array parameter; ``nav_aux`` for per-frame aux data."""
        return ParamSpec(name, t.ParamType.ARRAY, doc, None, nav_aux)

    def _wit(self):
        return t.ParamSpec(self.name, self.ty, self.doc, self.default, self.nav_aux)


_METHODS = {"tile": t.Method.TILE, "frame": t.Method.FRAME, "partition": t.Method.PARTITION}
_METHOD_NAMES = {v: k for k, v in _METHODS.items()}


def _depth(depth):
    if depth is None:
        return t.TileDepth_Default()
    if depth == "max":
        return t.TileDepth_Max()
    return t.TileDepth_Frames(int(depth))


def _size(size):
    if size is None:
        return t.TileSize_BestFit()
    if size == "max":
        return t.TileSize_Max()
    return t.TileSize_Bytes(int(size))


def _preference(dtype):
    return t.DtypePreference_Native() if dtype in (None, "native") else t.DtypePreference_Prefer(_wit_dtype(dtype))


class Description:
    """What ``udf-host inspect`` shows: name, version, summary, params, methods (in order of
    preference: ``"tile"``, ``"frame"``, ``"partition"``), preferred input dtype (a name, or
    ``"native"``), tiling preferences (``tile_depth``: None, ``"max"`` or frames;
    ``tile_size``: None, ``"max"`` or bytes) and which optional hooks exist.
    ``host_arrays``: tiles, frames, buffers and array parameters are ``xp`` arrays in the
    host (see the module's docs)."""

    def __init__(self, name, version, summary, params=(), methods=("tile",), input_dtype="float32",
                 tile_depth=None, tile_size=None, custom_merge=False, custom_results=False,
                 main_preprocess=False, host_arrays=False):
        self.name, self.version, self.summary = name, version, summary
        self.host_arrays = host_arrays
        self.params = list(params)
        self.methods = list(methods)
        self.input_dtype = input_dtype
        self.tile_depth, self.tile_size = tile_depth, tile_size
        self.custom_merge, self.custom_results, self.main_preprocess = custom_merge, custom_results, main_preprocess

    def _wit(self):
        return t.Description(
            self.name, self.version, self.summary, [p._wit() for p in self.params],
            [_METHODS[m] for m in self.methods], _preference(self.input_dtype),
            t.TilingPreferences(_depth(self.tile_depth), _size(self.tile_size)),
            self.custom_merge, self.custom_results, self.main_preprocess, t.DataAccess.BYTES,
        )


class RunPlan:
    """What ``plan`` returns: method, preferred input dtype and tiling for this run."""

    def __init__(self, method="tile", input_dtype="float32", tile_depth=None, tile_size=None):
        self.method, self.input_dtype, self.tile_depth, self.tile_size = method, input_dtype, tile_depth, tile_size

    @staticmethod
    def from_description(d):
        return RunPlan(d.methods[0], d.input_dtype, d.tile_depth, d.tile_size)

    def _wit(self):
        return t.RunPlan(_METHODS[self.method], _preference(self.input_dtype),
                         t.TilingPreferences(_depth(self.tile_depth), _size(self.tile_size)))


_KINDS = {"nav": t.BufferKind.NAV, "sig": t.BufferKind.SIG, "single": t.BufferKind.SINGLE}
_USES = {"normal": t.BufferUse.NORMAL, "private": t.BufferUse.PRIVATE, "result_only": t.BufferUse.RESULT_ONLY}


#: Buffer dtype rules (``BufferDecl`` dtypes besides NumPy names): the run's input dtype,
#: the dataset's dtype, and ``at_least(name)``, NumPy's ``result_type`` of the input dtype
#: and ``name``.
INPUT = "input"
DATASET = "dataset"


def at_least(dtype):
    """The buffer dtype ``np.result_type(input dtype, dtype)``."""
    return "at_least:" + dtype


def result_type(a, b):
    """NumPy's ``result_type`` of two dtype names (bool is neutral; uint64 with a signed
    integer is float64; integers of up to 16 bits fit float32)."""
    kinds = {"bool": "b", "float32": "f", "float64": "f", "complex64": "c", "complex128": "c"}
    kind = lambda d: kinds.get(d, "u" if d.startswith("u") else "i")  # noqa: E731
    bits = lambda d: {"c": itemsize(d) * 4, "b": 8}.get(kind(d), itemsize(d) * 8)  # noqa: E731
    ka, kb = kind(a), kind(b)
    if ka == "b":
        return b
    if kb == "b":
        return a
    if ka in "ui" and kb in "ui":
        if ka == kb:
            return a if bits(a) >= bits(b) else b
        unsigned, signed = (a, b) if ka == "u" else (b, a)
        if bits(signed) > bits(unsigned):
            return signed
        return "float64" if bits(unsigned) == 64 else f"int{2 * bits(unsigned)}"
    need = max((32 if bits(d) <= 16 else 64) if kind(d) in "ui" else bits(d) for d in (a, b))
    return ("complex" + str(2 * need)) if "c" in (ka, kb) else f"float{need}"


_MERGES = ("add", "min", "max", "assign")


class BufferDecl:
    """A result buffer: ``BufferDecl.nav/sig/single(name, dtype, extra_shape=(), use="normal",
    merge=None)``. ``dtype`` is a NumPy name, ``udf.INPUT``, ``udf.DATASET`` or
    ``udf.at_least("float32")``; ``extra_shape`` a tuple or ``lambda params, dataset: (...)``;
    ``use``: ``"normal"``, ``"private"``, ``"result_only"``; ``merge`` (``"add"``, ``"min"``,
    ``"max"``, ``"assign"``) is how the default ``merge`` combines it (nav buffers without
    one are copied); with ``"min"`` / ``"max"`` it starts at that rule's identity."""

    def __init__(self, name, kind, dtype, extra_shape=(), use="normal", merge=None):
        self.name, self.kind, self.dtype = name, kind, dtype_name(dtype)
        self.extra_shape = extra_shape if callable(extra_shape) else tuple(extra_shape)
        self.use = use
        if merge is not None and merge not in _MERGES:
            raise UdfError.internal(f"buffer '{name}': merge must be one of {', '.join(_MERGES)}, found {merge!r}")
        self.merge = merge

    @staticmethod
    def nav(name, dtype, extra_shape=(), use="normal", merge=None):
        return BufferDecl(name, "nav", dtype, extra_shape, use, merge)

    @staticmethod
    def sig(name, dtype, extra_shape=(), use="normal", merge=None):
        return BufferDecl(name, "sig", dtype, extra_shape, use, merge)

    @staticmethod
    def single(name, dtype, extra_shape=(), use="normal", merge=None):
        return BufferDecl(name, "single", dtype, extra_shape, use, merge)

    def resolved(self, params, dataset):
        """This declaration for a run: a NumPy dtype name and a tuple extra shape."""
        dtype = self.dtype
        if dtype == INPUT:
            dtype = dataset.input_dtype
        elif dtype == DATASET:
            dtype = dataset.dataset_dtype
        elif dtype.startswith("at_least:"):
            dtype = result_type(dataset.input_dtype, dtype.split(":", 1)[1])
        extra = self.extra_shape(params, dataset) if callable(self.extra_shape) else self.extra_shape
        return BufferDecl(self.name, self.kind, dtype, tuple(extra), self.use, self.merge)

    def _wit(self):
        return t.BufferDecl(self.name, _KINDS[self.kind], _wit_dtype(self.dtype), list(self.extra_shape),
                            _USES[self.use])


class Params:
    """The run's parameters by name: ``params.float("r")``, ``.int``, ``.boolean``, ``.text``,
    ``.array`` (an ``Array``, or an ``xp`` array with ``host_arrays``), ``name in params``."""

    def __init__(self, params, host_arrays=False):
        self._values = {p.name: p.value for p in params}
        self._arrays = {}
        self._host_arrays = host_arrays

    def __contains__(self, name):
        return name in self._values

    def _get(self, name, cls, what):
        value = self._values.get(name)
        if value is None:
            raise UdfError.bad_param(f"parameter '{name}' is missing")
        if not isinstance(value, cls):
            raise UdfError.bad_param(f"parameter '{name}' is not {what}")
        return value.value

    def boolean(self, name):
        return self._get(name, t.ParamValue_Boolean, "a boolean")

    def int(self, name):
        return self._get(name, t.ParamValue_Int, "an integer")

    def float(self, name):
        value = self._values.get(name)
        if isinstance(value, t.ParamValue_Int):
            return float(value.value)
        return self._get(name, t.ParamValue_Float, "a float")

    def text(self, name):
        return self._get(name, t.ParamValue_Text, "text")

    def array(self, name):
        if name not in self._arrays:
            value = self._get(name, t.ParamValue_Array, "an array")
            self._arrays[name] = _host_array(value) if self._host_arrays else Array(value)
        return self._arrays[name]

    def floats(self, name):
        """An array parameter's elements as a flat list of Python numbers."""
        value = self._get(name, t.ParamValue_Array, "an array")
        return [v for row in Array(value).view.rows() for v in row]


class Dataset:
    """Dataset meta: ``nav_shape``, ``sig_shape``, ``dataset_dtype``, ``input_dtype`` (names),
    ``roi_count`` (None without ROI), ``frames`` (selected frames)."""

    def __init__(self, meta):
        self.nav_shape = tuple(meta.nav_shape)
        self.sig_shape = tuple(meta.sig_shape)
        self.dataset_dtype = dtype_name(meta.dataset_dtype)
        self.input_dtype = dtype_name(meta.input_dtype)
        self.roi_count = meta.roi_count
        self.threads_per_worker = meta.threads_per_worker
        n = 1
        for d in self.nav_shape:
            n *= d
        self.frames = n if meta.roi_count is None else meta.roi_count

    def nav_coordinates(self, index):
        """True nav coordinates of a true flat nav index."""
        out = []
        for n in reversed(self.nav_shape):
            out.append(index % n)
            index //= n
        return tuple(reversed(out))


class Partition:
    """The partition of a worker: ``index``, ``origin`` (compressed), ``frames``, ``method``."""

    def __init__(self, meta):
        self.index = meta.index
        self.origin = meta.origin
        self.frames = meta.frames
        self.method = _METHOD_NAMES[meta.method]
        self.tile_depth = meta.tile_depth
        self.tiling_scheme = [(tuple(s.origin), tuple(s.shape)) for s in meta.tiling_scheme]


class Context:
    """``params``, ``dataset`` and (on workers) ``partition``; for merge and get_results
    also ``valid_nav_mask`` and (get_results) ``roi``."""

    def __init__(self, params, dataset, partition=None, valid_nav_mask=None, roi=None):
        self.params = params
        self.dataset = dataset
        self.partition = partition
        self.valid_nav_mask = valid_nav_mask
        self.roi = roi


# --------------------------------------------------------------------------------------
# buffers


class _Buffer:
    __slots__ = ("name", "kind", "dtype", "shape", "raw", "mem")

    def __init__(self, name, kind, dtype, shape, raw):
        self.name, self.kind, self.dtype, self.shape = name, kind, dtype, tuple(shape)
        self.raw = raw
        self.mem = _typed(raw, dtype)


def _storage_shape(decl, frames, sig_shape):
    if decl.kind == "nav":
        shape = [frames]
    elif decl.kind == "sig":
        shape = list(sig_shape)
    else:
        shape = []
    shape += list(decl.extra_shape)
    return shape or [1]


class Buffers:
    """Result buffers by name, seen through the current unit (docs/contract.md):
    ``results["name"]`` is a ``View`` — in ``process_tile`` a nav buffer's rows of the tile
    ``(T, *E)``, a sig buffer's part under the tile ``(*s, *E)``; in ``process_frame`` a nav
    buffer's entry ``E`` (or ``(1,)``) and the whole sig buffer; otherwise the whole buffer."""

    def __init__(self, buffers, sig_dims=0):
        self._buffers = {b.name: b for b in buffers}
        self._sig_dims = sig_dims
        self._unit = None  # None: whole; ("tile", nav0, nav1, sig_origin, sig_shape); ("frame", nav)

    def _enter(self, unit):
        """Views from now on are of ``unit``: None (whole), ``("tile", nav0, nav1,
        sig_origin, sig_shape)`` or ``("frame", nav)``."""
        self._unit = unit

    def names(self):
        return list(self._buffers)

    def dtype(self, name):
        return self._buffer(name).dtype

    def _buffer(self, name):
        try:
            return self._buffers[name]
        except KeyError:
            raise UdfError.internal(f"no buffer '{name}' (buffers: {', '.join(self._buffers)})") from None

    def whole(self, name):
        """The whole buffer, whatever the unit."""
        b = self._buffer(name)
        return View(b.mem, _value_shape(b.dtype, b.shape), dtype=b.dtype)

    def __getitem__(self, name):
        b = self._buffer(name)
        view = View(b.mem, _value_shape(b.dtype, b.shape), dtype=b.dtype)
        unit = self._unit
        if unit is None or b.kind in (None, "single"):
            return view
        if b.kind == "nav":
            if unit[0] == "tile":
                _, n0, n1, _, _ = unit
                return View(view.mem, (n1 - n0,) + view.shape[1:], view.strides, view.offset + n0 * view.strides[0],
                            b.dtype)
            sub = view._sub((unit[1],))
            if len(b.shape) == 1:
                return View(sub.mem, (1,) + sub.shape, (1,) + sub.strides, sub.offset, b.dtype)
            return sub
        # sig
        if unit[0] == "tile":
            _, _, _, origin, shape = unit
            off = view.offset
            for axis in range(min(self._sig_dims, len(origin))):
                off += origin[axis] * view.strides[axis]
            new_shape = tuple(shape[: self._sig_dims]) + view.shape[self._sig_dims :]
            return View(view.mem, new_shape, view.strides, off, b.dtype)
        return view

    def fill(self, name, value):
        """Set every element of the buffer's current view to ``value``."""
        self[name].fill(value)

    def accumulate(self, name, source, op):
        """Combine ``source`` into the buffer's current view: every frame of a ``Tile``, one
        ``Frame``, or a number for every element (``results.accumulate("n", 1, "add")``)."""
        view = self[name]
        if isinstance(source, Tile):
            accumulate(view, source.data, op)
        elif isinstance(source, Frame):
            combine(view, source.data, op)
        else:
            combine(view, View([source] * view.size, view.shape), op)

    def add_frame_sums(self, name, tile):
        """Add the sum of each frame of ``tile`` (its part of the frame) to the buffer's rows
        for the tile (a nav buffer: LiberTEM's ``intensity[:] += np.sum(tile, axis=(1, 2))``)."""
        view = self[name]
        sums = [sum(v for row in frame.rows() for v in row) for frame in tile.data]
        combine(view, View(sums, view.shape), "add")

    def merge_from(self, src, name, op):
        """Merge buffer ``name`` of ``src`` into this one, whole."""
        combine(self.whole(name), src.whole(name), op)

    def _named(self):
        return [t.NamedArray(b.name, t.Ndarray(_wit_dtype(b.dtype), list(b.shape), t.ArrayData_Bytes(bytes(b.raw))))
                for b in self._buffers.values()]


# --------------------------------------------------------------------------------------
# host arrays (``Description(host_arrays=True)``): ``xp`` over the contract's ``arrays``


def _xp():
    """The ``xp`` module (imported on first use: plugins without host arrays never load it)."""
    import xp

    return xp


def _xp_backend():
    import xp_backend

    return xp_backend


def _host_array(ndarray):
    """A wit ``ndarray`` (a parameter, a buffer given to ``merge``) as an ``xp`` array in the host."""
    xp = _xp()
    return xp.ndarray(_xp_backend().from_bytes(dtype_name(ndarray.dtype), list(ndarray.shape),
                                               bytes(_array_bytes(ndarray))))


class _ArrayBuffer:
    __slots__ = ("name", "kind", "dtype", "shape", "arr")

    def __init__(self, name, kind, dtype, shape, arr):
        self.name, self.kind, self.dtype, self.shape, self.arr = name, kind, dtype, tuple(shape), arr


class ArrayBuffers(Buffers):
    """Result buffers as ``xp`` arrays in the host (``Description(host_arrays=True)``), seen
    through the current unit as ``Buffers`` are: ``results["name"]`` or ``results.name``
    is an ``xp`` view (no copy) of the buffer — in ``process_tile`` a nav buffer's rows
    of the tile, a sig buffer's part under the tile. Write with NumPy's forms:
    ``results.intensity[:] += np.sum(tile.data, axis=0)``, ``results["n"] += 1``,
    ``results.peak[...] = np.maximum(results.peak, frame)``."""

    def __init__(self, buffers, sig_dims=0):
        object.__setattr__(self, "_views", {})
        super().__init__(buffers, sig_dims)

    def __setattr__(self, name, value):
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        else:
            self[name] = value

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except UdfError as e:
            raise AttributeError(e.message) from None

    def _enter(self, unit):
        self._unit = unit
        self._views.clear()

    def whole(self, name):
        return self._buffer(name).arr

    def __getitem__(self, name):
        view = self._views.get(name)
        if view is not None:
            return view
        b = self._buffer(name)
        view = b.arr
        unit = self._unit
        if unit is not None and b.kind == "nav":
            if unit[0] == "tile":
                view = view[unit[1] : unit[2]]
            else:
                n = unit[1]
                view = view[n : n + 1] if len(b.shape) == 1 else view[n]
        elif unit is not None and b.kind == "sig" and unit[0] == "tile":
            origin, shape = unit[3], unit[4]
            view = view[tuple(slice(o, o + n) for o, n in zip(origin[: self._sig_dims], shape[: self._sig_dims]))]
        self._views[name] = view
        return view

    def __setitem__(self, name, value):
        view = self[name]
        if value is not view:  # `results["x"] += v` has added in place already
            view[...] = value

    def fill(self, name, value):
        self[name][...] = value

    def accumulate(self, name, source, op):
        xp = _xp()
        view = self[name]
        if isinstance(source, Tile):
            frames = source.data
            if op == "add":
                value = xp.sum(frames, axis=0)
            elif op == "assign":
                value = frames[-1]
            else:
                value = xp.max(frames, axis=0) if op == "max" else xp.min(frames, axis=0)
        elif isinstance(source, Frame):
            value = source.data
        else:
            value = source
        _combine_arrays(view, value, op)

    def add_frame_sums(self, name, tile):
        data = tile.data
        _combine_arrays(self[name], _xp().sum(data, axis=tuple(range(1, data.ndim))), "add")

    def merge_from(self, src, name, op):
        _combine_arrays(self.whole(name), src.whole(name), op)

    def result(self, name):
        b = self._buffer(name)
        return Result(name, b.dtype, b.shape, b.arr.tobytes())

    def _named(self):
        return [t.NamedArray(b.name, t.Ndarray(_wit_dtype(b.dtype), list(b.shape), t.ArrayData_Bytes(b.arr.tobytes())))
                for b in self._buffers.values()]


def _combine_arrays(dest, value, op):
    """``dest = dest op value`` in place for ``xp`` arrays (``op`` as for ``combine``; NaN
    wins in min and max, as with ``np.maximum``)."""
    if op == "add":
        dest[...] += value
    elif op == "assign":
        dest[...] = value
    elif op in ("min", "max"):
        xp = _xp()
        dest[...] = xp.maximum(dest, value) if op == "max" else xp.minimum(dest, value)
    else:
        raise UdfError.internal(f"combine: op must be one of {', '.join(_MERGES)}, found {op!r}")


def _allocate(decls, frames, sig_shape, host_arrays=False):
    out = []
    for d in decls:
        if d.use == "result_only":
            continue
        shape = _storage_shape(d, frames, sig_shape)
        if host_arrays:
            out.append(_ArrayBuffer(d.name, d.kind, d.dtype, shape, _xp().zeros(shape, dtype=d.dtype)))
            continue
        n = 1
        for s in shape:
            n *= s
        out.append(_Buffer(d.name, d.kind, d.dtype, shape, bytearray(n * itemsize(d.dtype))))
    return ArrayBuffers(out, len(sig_shape)) if host_arrays else Buffers(out, len(sig_shape))


def _from_named(arrays, host_arrays=False):
    out = []
    for a in arrays:
        dtype = dtype_name(a.data.dtype)
        raw = bytearray(_array_bytes(a.data))
        n = 1
        for s in a.data.shape:
            n *= s
        if len(raw) != n * itemsize(dtype):
            raise UdfError.internal(f"buffer '{a.name}' from the host has {len(raw)} bytes, "
                                    f"expected {n * itemsize(dtype)} for {dtype} {tuple(a.data.shape)}")
        if host_arrays:
            arr = _xp().ndarray(_xp_backend().from_bytes(dtype, list(a.data.shape), bytes(raw)))
            out.append(_ArrayBuffer(a.name, None, dtype, a.data.shape, arr))
        else:
            out.append(_Buffer(a.name, None, dtype, a.data.shape, raw))
    return ArrayBuffers(out) if host_arrays else Buffers(out)


class Result:
    """One result of ``get_results``: a name, a dtype name, a shape and the raw bytes (or
    anything exposing the buffer protocol), optionally a valid mask (list of bools)."""

    def __init__(self, name, dtype, shape, data, valid=None):
        self.name, self.dtype, self.shape, self.data, self.valid = name, dtype_name(dtype), tuple(shape), data, valid

    @staticmethod
    def from_values(name, dtype, shape, values, valid=None):
        """A result from a flat sequence of numbers (complex: interleaved pairs)."""
        from array import array

        return Result(name, dtype, shape, array(_DTYPES[dtype_name(dtype)][1], values).tobytes(), valid)

    @staticmethod
    def from_array(name, array, valid=None):
        """A result from an ``xp`` array (host arrays)."""
        return Result(name, array.dtype.name, array.shape, array.tobytes(), valid)

    def _wit(self):
        return t.ResultEntry(self.name, t.Ndarray(_wit_dtype(self.dtype), list(self.shape),
                                                  t.ArrayData_Bytes(bytes(self.data))),
                             None if self.valid is None else [bool(v) for v in self.valid])


# --------------------------------------------------------------------------------------
# tiles and frames


class Tile:
    """A tile: ``frames`` consecutive frames times one signal slice. ``data`` is a ``View``
    ``[frames, *sig_shape]`` (with ``host_arrays``: an ``xp`` array, a view of the host's
    memory valid during the ``process`` call); ``origin`` the compressed flat nav index of
    the first frame; ``sig_origin``, ``sig_shape``, ``scheme_index``, ``true_nav_indices``,
    ``dtype``."""

    def __init__(self, raw, ctx, host_arrays=False):
        self.host_arrays = host_arrays
        self.ctx = ctx
        self.dtype = ctx.dataset.input_dtype
        self.frames = raw.frames
        self.origin = raw.origin
        self.scheme_index = raw.scheme_index
        self.sig_origin = tuple(raw.sig.origin)
        self.sig_shape = tuple(raw.sig.shape)
        self.true_nav_indices = raw.true_nav_indices
        if host_arrays:
            self.data = _xp().ndarray(_xp_backend().tile())
        else:
            if isinstance(raw.data, t.ArrayData_Bytes):
                payload = raw.data.value
            else:
                payload = _array_bytes(t.Ndarray(_wit_dtype(self.dtype), [], raw.data))
            mem = _typed(payload, self.dtype)
            self.data = View(mem, _value_shape(self.dtype, (self.frames,) + self.sig_shape), dtype=self.dtype)
        partition_origin = ctx.partition.origin if ctx.partition else 0
        self.nav_offset = self.origin - partition_origin

    @property
    def frame_len(self):
        n = 1
        for d in self.sig_shape:
            n *= d
        return n

    def frame(self, i):
        return Frame(self, i)

    def coordinates(self):
        return [self.ctx.dataset.nav_coordinates(i) for i in self.true_nav_indices]

    def sig_part(self, view):
        """The tile's part of a sig-shaped view (its last axes the signal shape; leading
        axes, e.g. a stack of masks, are kept)."""
        k = len(self.sig_shape)
        shape = tuple(view.shape)
        if self.host_arrays or not isinstance(view, View):
            if len(shape) < k or shape[len(shape) - k:] != tuple(self.ctx.dataset.sig_shape):
                raise UdfError.bad_param(f"an array of shape {shape} does not end in the signal shape "
                                         f"{self.ctx.dataset.sig_shape}")
            return view[(Ellipsis,) + tuple(slice(o, o + n) for o, n in zip(self.sig_origin, self.sig_shape))]
        first = len(view.shape) - k
        if first < 0 or tuple(view.shape[first:]) != tuple(self.ctx.dataset.sig_shape):
            raise UdfError.bad_param(f"an array of shape {view.shape} does not end in the signal shape "
                                     f"{self.ctx.dataset.sig_shape}")
        offset = view.offset + sum(o * s_ for o, s_ in zip(self.sig_origin, view.strides[first:]))
        return View(view.mem, view.shape[:first] + tuple(self.sig_shape), view.strides, offset, view.dtype)

    def aux(self, name):
        """Per-frame aux data of this tile's frames: ``[frames, *extra]``."""
        if self.host_arrays:
            return self.ctx.params.array(name)[self.nav_offset : self.nav_offset + self.frames]
        v = self.ctx.params.array(name).view
        return View(v.mem, (self.frames,) + v.shape[1:], v.strides, v.offset + self.nav_offset * v.strides[0], v.dtype)


class Frame:
    """One full frame: ``data`` (a ``View`` of the signal shape), ``nav_index`` (compressed),
    ``true_nav_index``, ``coordinates``, ``aux(name)``."""

    def __init__(self, tile, i):
        self.tile = tile
        self.index = i
        self.data = tile.data[i]
        self.dtype = tile.dtype
        self.nav_index = tile.origin + i
        self.true_nav_index = tile.true_nav_indices[i]

    @property
    def coordinates(self):
        return self.tile.ctx.dataset.nav_coordinates(self.true_nav_index)

    def flat(self):
        if self.tile.host_arrays:
            return self.data.reshape(-1)
        return self.data.flat()

    def sum(self):
        """The sum of the frame's values."""
        if self.tile.host_arrays:
            return _xp().sum(self.data).item()
        return sum(v for row in self.data.rows() for v in row)

    def aux(self, name):
        if self.tile.host_arrays:
            a = self.tile.ctx.params.array(name)
            i = self.tile.nav_offset + self.index
            return a[i : i + 1] if a.ndim == 1 else a[i]
        v = self.tile.ctx.params.array(name).view
        sub = v._sub((self.tile.nav_offset + self.index,))
        return sub if sub.shape else View(sub.mem, (1,), (1,), sub.offset, sub.dtype)


# --------------------------------------------------------------------------------------
# the plugin base class and the export adapter


class Udf:
    """Base class of a plugin. Set ``description`` and ``buffers`` (or implement
    ``result_buffers``, static) and implement one of ``process_tile(self, tile, results)``, ``process_frame(self, frame, results)``,
    ``process_partition(self, tile, results)``. Optional: ``plan`` (static), ``__init__(self,
    ctx)`` (per partition: task data), ``preprocess(self, ctx, results)``, ``postprocess``,
    ``merge(ctx, dest, src)`` (static, with ``custom_merge``), ``get_results(ctx, buffers)``
    (static, with ``custom_results``; returns a list of ``Result``)."""

    description = None
    #: The result buffers (``BufferDecl``), if declared here instead of in ``result_buffers``.
    buffers = ()

    def __init__(self, ctx):
        pass

    @classmethod
    def plan(cls, params, dataset):
        return RunPlan.from_description(cls.description)

    @classmethod
    def result_buffers(cls, params, dataset):
        return list(cls.buffers)

    def preprocess(self, ctx, results):
        pass

    def postprocess(self, ctx, results):
        pass

    @classmethod
    def merge(cls, ctx, dest, src):
        if not cls.buffers:
            raise UdfError.internal("merge is not implemented")
        rules = {b.name: b for b in cls.buffers}
        for name in src.names():
            decl = rules.get(name)
            if decl is None:
                raise UdfError.internal(f"buffer '{name}' is not declared")
            op = decl.merge or ("assign" if decl.kind == "nav" else None)
            if op is None:
                raise UdfError.internal(f"buffer '{name}' has no merge rule: declare it with merge='add' (or min, "
                                        "max, assign), or implement merge")
            dest.merge_from(src, name, op)

    @staticmethod
    def get_results(ctx, buffers):
        return [buffers.result(name) for name in buffers.names()]


def _guard(f):
    """Turn ``UdfError`` into the wit error, and any other exception (a bug, or an
    ``OverflowError`` from absurd parameters) into an ``internal`` error with the
    traceback in the log: the contract wants typed errors, never traps."""

    def wrapper(*args):
        try:
            return f(*args)
        except UdfError as e:
            raise Err(t.UdfError(e.kind, e.message)) from None
        except Err:
            raise
        except Exception as e:
            _host.log(_host.LogLevel.ERROR, "python exception: " + "".join(traceback.format_exception(*sys.exc_info())))
            raise Err(t.UdfError(t.ErrorKind.INTERNAL, f"{type(e).__name__}: {e}")) from None

    return wrapper


def _pass_through(buffers, name):
    b = buffers._buffer(name)
    return Result(name, b.dtype, b.shape, b.raw)


Buffers.result = _pass_through


def export(cls):
    """The class componentize-py exports (assign it to ``Udf`` in the app module)."""
    state = {}
    arrays = bool(getattr(cls.description, "host_arrays", False))

    class Export(_exports.Udf):
        @_guard
        def describe(self):
            if arrays:
                _xp_backend().use_host_tiles()
            d = copy.copy(cls.description)
            d.custom_merge = d.custom_merge or any(b.merge for b in cls.buffers)
            d.custom_results = d.custom_results or any(b.use == "result_only" for b in cls.buffers)
            d.main_preprocess = d.main_preprocess or any(b.merge in ("min", "max") for b in cls.buffers)
            return d._wit()

        @_guard
        def plan(self, params, dataset):
            return cls.plan(Params(params, arrays), Dataset(dataset))._wit()

        @_guard
        def result_buffers(self, params, dataset):
            params, dataset = Params(params, arrays), Dataset(dataset)
            return [d.resolved(params, dataset)._wit() for d in cls.result_buffers(params, dataset)]

        @_guard
        def init(self, ctx):
            params = Params(ctx.params, arrays)
            dataset = Dataset(ctx.dataset)
            partition = Partition(ctx.partition) if ctx.partition is not None else None
            context = Context(params, dataset, partition)
            decls = [d.resolved(params, dataset) for d in cls.result_buffers(params, dataset)]
            frames = partition.frames if partition else dataset.frames
            buffers = _allocate(decls, frames, dataset.sig_shape, arrays)
            for d in decls:
                if d.merge in ("min", "max") and d.use != "result_only":
                    buffers.whole(d.name).fill(_identity(d.dtype, d.merge))
            state["ctx"] = context
            state["buffers"] = buffers
            state["method"] = partition.method if partition else "partition"
            state["udf"] = cls(context)

        def _worker(self):
            if "udf" not in state:
                raise UdfError.internal("called before init")
            return state["udf"], state["ctx"], state["buffers"]

        @_guard
        def preprocess(self):
            udf, ctx, buffers = self._worker()
            buffers._enter(None)
            udf.preprocess(ctx, buffers)

        @_guard
        def process(self, raw):
            udf, ctx, buffers = self._worker()
            tile = Tile(raw, ctx, arrays)
            method = state["method"]
            if method == "tile":
                n0 = tile.nav_offset
                buffers._enter(("tile", n0, n0 + tile.frames, tile.sig_origin, tile.sig_shape))
                udf.process_tile(tile, buffers)
            elif method == "frame":
                for i in range(tile.frames):
                    buffers._enter(("frame", tile.nav_offset + i))
                    udf.process_frame(Frame(tile, i), buffers)
            else:
                buffers._enter(None)
                udf.process_partition(tile, buffers)

        @_guard
        def postprocess(self):
            udf, ctx, buffers = self._worker()
            buffers._enter(None)
            udf.postprocess(ctx, buffers)

        @_guard
        def export_buffers(self):
            _, _, buffers = self._worker()
            state.clear()
            return buffers._named()

        @_guard
        def merge(self, ctx, dest, src):
            context = Context(Params(ctx.params, arrays), Dataset(ctx.dataset), Partition(ctx.partition),
                              valid_nav_mask=ctx.valid_nav_mask)
            d = _from_named(dest, arrays)
            cls.merge(context, d, _from_named(src, arrays))
            return d._named()

        @_guard
        def get_results(self, ctx, buffers):
            context = Context(Params(ctx.params, arrays), Dataset(ctx.dataset), None,
                              valid_nav_mask=ctx.valid_nav_mask, roi=ctx.roi)
            return [r._wit() for r in cls.get_results(context, _from_named(buffers, arrays))]

    Export.__name__ = "Udf"
    return Export


# --------------------------------------------------------------------------------------
# frame maps (LiberTEM's AutoUDF / ctx.map)


def _value_info(value):
    """``(dtype, shape, flat values)`` of a frame map's value: a number, a ``View`` or nested
    lists. Like ``np.asarray``: Python floats are float64, ints int64, complex complex128
    (flattened to (real, imaginary) pairs)."""
    if isinstance(value, View):
        values = [v for row in value.rows() for v in row]
        dtype = value.dtype or "float64"
        shape = value.shape[:-1] if is_complex(dtype) else value.shape
        return dtype, tuple(shape), values
    shape, flat = [], []

    def walk(v, depth):
        if isinstance(v, (list, tuple)):
            if len(shape) == depth:
                shape.append(len(v))
            elif shape[depth] != len(v):
                raise UdfError.invalid_data(f"a frame map returned ragged lists (length {len(v)}, not {shape[depth]})")
            for item in v:
                walk(item, depth + 1)
        else:
            flat.append(v)

    walk(value, 0)
    if any(isinstance(v, complex) for v in flat):
        return "complex128", tuple(shape), [p for v in flat for p in (complex(v).real, complex(v).imag)]
    if any(isinstance(v, float) for v in flat):
        return "float64", tuple(shape), [float(v) for v in flat]
    if flat and all(isinstance(v, bool) for v in flat):
        return "bool", tuple(shape), [int(v) for v in flat]
    return "int64", tuple(shape), [int(v) for v in flat]


def frame_map(name, f, summary="A frame map (LiberTEM's AutoUDF), Python", input_dtype="float32",
              host_arrays=False):
    """A whole plugin from a function of one frame (LiberTEM's ``ctx.map(f=...)``):
    ``Udf = udf.frame_map("row-sums", lambda frame: [sum(row) for row in frame.rows()])``.

    ``f`` gets the frame as a ``View`` of the signal shape and returns a number, a ``View`` or
    nested lists; the nav buffer ``result`` takes that value's dtype and shape, found by
    calling ``f`` on a frame of zeros (as ``AutoUDF`` does). With ``host_arrays`` the frame
    is an ``xp`` array and ``f`` returns anything ``xp.asarray`` takes:
    ``udf.frame_map("row-sums", lambda frame: np.sum(frame, axis=-1), host_arrays=True)``."""
    if host_arrays:
        return _array_frame_map(name, f, summary, input_dtype)

    class FrameMap(Udf):
        description = Description(name, "0.1.0", summary, methods=["frame"], input_dtype=input_dtype)

        @staticmethod
        def result_buffers(params, dataset):
            dtype = dataset.input_dtype
            n = 1
            for d in dataset.sig_shape:
                n *= d
            zeros = View(_typed(bytearray(n * itemsize(dtype)), dtype), _value_shape(dtype, dataset.sig_shape),
                         dtype=dtype)
            value_dtype, shape, _ = _value_info(f(zeros))
            return [BufferDecl.nav("result", value_dtype, shape)]

        def process_frame(self, frame, results):
            out = results["result"]
            _, shape, values = _value_info(f(frame.data))
            if len(values) != out.size:
                raise UdfError.invalid_data(f"the frame map returned a value of shape {shape} for frame "
                                            f"{frame.nav_index}, unlike its value for a frame of zeros")
            combine(out, View(values, out.shape), "assign")

    FrameMap.__name__ = name
    return export(FrameMap)


def _array_frame_map(name, f, summary, input_dtype):
    """``frame_map`` with host arrays."""

    class FrameMap(Udf):
        description = Description(name, "0.1.0", summary, methods=["frame"], input_dtype=input_dtype,
                                  host_arrays=True)

        @staticmethod
        def result_buffers(params, dataset):
            xp = _xp()
            value = xp.asarray(f(xp.zeros(dataset.sig_shape, dtype=dataset.input_dtype)))
            return [BufferDecl.nav("result", value.dtype.name, value.shape)]

        def process_frame(self, frame, results):
            out = results["result"]
            value = _xp().asarray(f(frame.data))
            if value.size != out.size:
                raise UdfError.invalid_data(f"the frame map returned a value of shape {value.shape} for frame "
                                            f"{frame.nav_index}, unlike its value for a frame of zeros")
            out[...] = value.reshape(out.shape)

    FrameMap.__name__ = name
    return export(FrameMap)
