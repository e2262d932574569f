"""`udf_host.UDF`: LiberTEM 0.16's UDF base class, for classes that run in udf-host's sandbox.

A LiberTEM user changes `from libertem.udf import UDF` to `from udf_host import UDF`, and
`ctx.run_udf(dataset=ds, udf=MyUDF(param=...))` runs the class in udf-host's Python runner
component (CPython in WebAssembly, `python/udf_host/_runner/`), where `import numpy` is the host's
arrays (`udf_host.xp`) presented as NumPy. The class's code never runs in the user's process:
it travels to the runner as source text (`udf_host.capture`) and the keyword arguments as
the plugin contract's parameters.

This one file is used in both places:

- in the user's process only `__init__` (the keyword arguments, `self.params`),
  `aux_data` and the constants are used, and `_spec()` hands the class to the engine;
- inside the runner the whole of LiberTEM's semantics run on it (`python/udf_host/_runner/app.py`
  drives it): buffers and their views (API.md §3.1), `self.meta`, `self.task_data`,
  `merge`, `get_results`, `with_mask`, `forbuf`, `self.xp`.

Nothing here imports NumPy at module level, so that inside the runner `numpy` is bound
to the host's arrays before this module's methods use it.
"""

from __future__ import annotations

import enum
import math

__all__ = ["UDF", "UDFException", "UDFRunCancelled", "AuxData", "BufferDecl", "UDFMeta", "Shape", "Slice"]


class UDFException(Exception):
    """A class broke LiberTEM's UDF interface (as LiberTEM's `UDFException`)."""


class UDFRunCancelled(Exception):
    """The run was cancelled (as LiberTEM's `UDFRunCancelled`)."""


class UDFMethod(str, enum.Enum):
    TILE = "tile"
    FRAME = "frame"
    PARTITION = "partition"


_TILE_SIZE_BEST_FIT = object()
_TILE_DEPTH_DEFAULT = object()

BACKEND_NUMPY = "numpy"
BACKEND_CUPY = "cupy"
BACKEND_CUDA = "cuda"
BACKEND_SPARSE_COO = "sparse.COO"
BACKEND_SPARSE_GCXS = "sparse.GCXS"
BACKEND_SPARSE_DOK = "sparse.DOK"
BACKEND_SCIPY_COO = "scipy.sparse.coo_matrix"
BACKEND_SCIPY_CSR = "scipy.sparse.csr_matrix"
BACKEND_SCIPY_CSC = "scipy.sparse.csc_matrix"
BACKEND_SCIPY_COO_ARRAY = "scipy.sparse.coo_array"
BACKEND_SCIPY_CSR_ARRAY = "scipy.sparse.csr_array"
BACKEND_SCIPY_CSC_ARRAY = "scipy.sparse.csc_array"
BACKEND_CUPY_SCIPY_COO = "cupyx.scipy.sparse.coo_matrix"
BACKEND_CUPY_SCIPY_CSR = "cupyx.scipy.sparse.csr_matrix"
BACKEND_CUPY_SCIPY_CSC = "cupyx.scipy.sparse.csc_matrix"


class AuxData:
    """Per-frame auxiliary data (`UDF.aux_data(...)`): the array flattened over the nav axes,
    `(-1, *extra_shape)`; inside the UDF `self.params.<name>` is its part for the current
    frame, tile or partition, shaped as a `kind='nav'` buffer's view."""

    def __init__(self, data, kind, extra_shape, dtype):
        self.data = data
        self.kind = kind
        self.extra_shape = tuple(int(n) for n in extra_shape)
        self.dtype = dtype

    def __repr__(self):
        return f"AuxData(kind={self.kind!r}, extra_shape={self.extra_shape}, dtype={self.dtype})"


class BufferDecl:
    """A result buffer declaration (what LiberTEM's `self.buffer(...)` returns)."""

    def __init__(self, kind, extra_shape=(), dtype="float32", where=None, use=None):
        if kind not in ("nav", "sig", "single"):
            raise ValueError(f"buffer kind must be 'nav', 'sig' or 'single', found {kind!r}")
        if use not in (None, "private", "result_only"):
            raise ValueError(f"buffer use must be None, 'private' or 'result_only', found {use!r}")
        if where not in (None, "device"):
            raise ValueError(f"buffer where must be None or 'device', found {where!r}")
        if isinstance(extra_shape, int):
            extra_shape = (extra_shape,)
        self.kind = kind
        self.extra_shape = tuple(int(n) for n in extra_shape)
        self.dtype = dtype
        self.where = where
        self.use = use

    def __repr__(self):
        return f"BufferDecl(kind={self.kind!r}, extra_shape={self.extra_shape}, dtype={self.dtype!r}, use={self.use!r})"


class Shape(tuple):
    """A dataset or partition shape with LiberTEM's `.nav`, `.sig`, `.dims`, `.size`."""

    def __new__(cls, shape, sig_dims):
        self = super().__new__(cls, (int(n) for n in shape))
        self.sig_dims = sig_dims
        return self

    @property
    def nav(self):
        return Shape(self[: len(self) - self.sig_dims], 0)

    @property
    def sig(self):
        return Shape(self[len(self) - self.sig_dims :], self.sig_dims)

    @property
    def dims(self):
        return len(self)

    @property
    def size(self):
        return math.prod(self)

    def to_tuple(self):
        return tuple(self)

    def flatten_nav(self):
        return Shape((math.prod(self.nav), *self.sig), self.sig_dims)


class Slice:
    """A part of the dataset in flat-nav, ROI-compressed coordinates (LiberTEM's `Slice`):
    `origin` and `shape` (a `Shape`), `get(arr, sig_only, nav_only)`."""

    def __init__(self, origin, shape):
        self.origin = tuple(int(n) for n in origin)
        self.shape = shape

    def get(self, arr=None, sig_only=False, nav_only=False):
        sig_dims = self.shape.sig_dims
        nav_dims = len(self.shape) - sig_dims
        pairs = list(zip(self.origin, self.shape))
        if sig_only:
            pairs = pairs[nav_dims:]
        elif nav_only:
            pairs = pairs[:nav_dims]
        index = tuple(slice(o, o + n) for o, n in pairs)
        return arr[index] if arr is not None else index

    @property
    def nav(self):
        sig_dims = self.shape.sig_dims
        return Slice(self.origin[: len(self.origin) - sig_dims], self.shape.nav)

    @property
    def sig(self):
        sig_dims = self.shape.sig_dims
        return Slice(self.origin[len(self.origin) - sig_dims :], self.shape.sig)

    def __repr__(self):
        return f"Slice(origin={self.origin}, shape={tuple(self.shape)})"


class _MadeWhenRead:
    """A field of `UDFMeta` that the runner may set as a maker (`meta._later(name, make)`),
    made by its first read: most classes never read `slice`, `coordinates` or the valid
    mask, and the runner would otherwise make them per frame (or, for the mask, loop over
    the whole scan). Assigning a value replaces the maker."""

    def __set_name__(self, owner, name):
        self.value, self.maker = f"{name} (value)", f"{name} (maker)"

    def __get__(self, meta, owner=None):
        if meta is None:
            return self
        fields = meta.__dict__
        make = fields.get(self.maker)
        if make is not None:
            fields[self.value], fields[self.maker] = make(), None
        return fields.get(self.value)

    def __set__(self, meta, value):
        meta.__dict__[self.value], meta.__dict__[self.maker] = value, None

    def later(self, meta, make):
        meta.__dict__[self.value], meta.__dict__[self.maker] = None, make


class UDFMeta:
    """`self.meta` (API.md §4). Set by the runner; the fields a unit does not have are None."""

    def __init__(self, **fields):
        self.dataset_shape = None
        self._partition_shape = None
        self.slice = None
        self.sig_slice = None
        self.tiling_scheme = None
        self.tiling_scheme_idx = 0
        self.roi = None
        self.dataset_dtype = None
        self.input_dtype = None
        self.corrections = None
        self.device_class = "cpu"
        self.array_backend = None
        self.threads_per_worker = None
        self.coordinates = None
        self._valid_nav_mask = None
        self._roi_flat = None
        for name, value in fields.items():
            setattr(self, name, value)

    #: The nav coordinates of the current unit's frames, `(frames, nav dims)` int64.
    coordinates = _MadeWhenRead()
    #: The current unit's part of the dataset (a `Slice`).
    slice = _MadeWhenRead()
    #: The positions merged so far (see `get_valid_nav_mask`).
    _valid_nav_mask = _MadeWhenRead()

    def _later(self, name, make):
        """Set field `name` to what `make()` returns, called only if someone reads it."""
        type(self).__dict__[name].later(self, make)

    @property
    def partition_shape(self):
        if self._partition_shape is None:
            raise ValueError("meta.partition_shape is only available while a partition is processed")
        return self._partition_shape

    def get_valid_nav_mask(self, full_nav=False):
        """The positions merged so far (in `merge`: without the one being merged); None while
        processing. ROI-compressed unless `full_nav`."""
        mask = self._valid_nav_mask
        if mask is None or not full_nav or self._roi_flat is None:
            return mask
        import numpy as np

        full = np.zeros((len(self._roi_flat),), dtype=bool)
        positions = [i for i, selected in enumerate(self._roi_flat) if selected]
        values = mask.tolist()
        for i, v in zip(positions, values):
            if v:
                full[i] = True
        return full


class _ParamsView:
    """`self.params`: the keyword arguments by attribute (LiberTEM's `UDFKwargsWrapper`);
    aux data as the part for the current unit."""

    def __init__(self, kwargs, views=None):
        object.__setattr__(self, "_kwargs", kwargs)
        object.__setattr__(self, "_views", views if views is not None else {})

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        views = object.__getattribute__(self, "_views")
        if name in views:
            return views[name]
        try:
            return object.__getattribute__(self, "_kwargs")[name]
        except KeyError:
            raise AttributeError(f"the UDF has no parameter {name!r}") from None

    def __setattr__(self, name, value):
        raise AttributeError("self.params is read-only (LiberTEM passes parameters through the constructor)")

    def __contains__(self, name):
        return name in self._kwargs

    def __getitem__(self, name):
        return self.__getattr__(name)

    def get(self, name, default=None):
        try:
            return self.__getattr__(name)
        except AttributeError:
            return default

    def keys(self):
        return self._kwargs.keys()

    def items(self):
        return [(k, self.__getattr__(k)) for k in self._kwargs]


class ArrayWithMask:
    """A result with its valid mask (`UDF.with_mask`)."""

    def __init__(self, arr, mask):
        self.arr = arr
        self.mask = mask


class UDF:
    """Base class of a LiberTEM-style UDF that runs sandboxed in udf-host (LiberTEM 0.16's API;
    docs/python.md, "Your LiberTEM UDF in udf-host")."""

    UDF_METHOD = UDFMethod
    USE_NATIVE_DTYPE = bool
    TILE_SIZE_BEST_FIT = _TILE_SIZE_BEST_FIT
    TILE_SIZE_MAX = float("inf")
    TILE_DEPTH_DEFAULT = _TILE_DEPTH_DEFAULT
    TILE_DEPTH_MAX = float("inf")
    BACKEND_NUMPY = BACKEND_NUMPY
    BACKEND_CUPY = BACKEND_CUPY
    BACKEND_CUDA = BACKEND_CUDA
    BACKEND_SPARSE_COO = BACKEND_SPARSE_COO
    BACKEND_SPARSE_GCXS = BACKEND_SPARSE_GCXS
    BACKEND_SPARSE_DOK = BACKEND_SPARSE_DOK
    BACKEND_SCIPY_COO = BACKEND_SCIPY_COO
    BACKEND_SCIPY_CSR = BACKEND_SCIPY_CSR
    BACKEND_SCIPY_CSC = BACKEND_SCIPY_CSC
    BACKEND_SCIPY_COO_ARRAY = BACKEND_SCIPY_COO_ARRAY
    BACKEND_SCIPY_CSR_ARRAY = BACKEND_SCIPY_CSR_ARRAY
    BACKEND_SCIPY_CSC_ARRAY = BACKEND_SCIPY_CSC_ARRAY
    BACKEND_CUPY_SCIPY_COO = BACKEND_CUPY_SCIPY_COO
    BACKEND_CUPY_SCIPY_CSR = BACKEND_CUPY_SCIPY_CSR
    BACKEND_CUPY_SCIPY_CSC = BACKEND_CUPY_SCIPY_CSC
    BACKEND_ALL = (
        BACKEND_CUPY_SCIPY_CSR, BACKEND_CUPY_SCIPY_CSC, BACKEND_CUPY_SCIPY_COO, BACKEND_SCIPY_COO_ARRAY,
        BACKEND_SCIPY_CSC_ARRAY, BACKEND_SCIPY_CSR_ARRAY, BACKEND_SCIPY_CSR, BACKEND_SCIPY_CSC,
        BACKEND_SCIPY_COO, BACKEND_CUPY, BACKEND_NUMPY, BACKEND_SPARSE_COO, BACKEND_SPARSE_GCXS,
    )
    CPU_BACKENDS = frozenset({
        BACKEND_NUMPY, BACKEND_CUDA, BACKEND_SPARSE_COO, BACKEND_SPARSE_GCXS, BACKEND_SPARSE_DOK,
        BACKEND_SCIPY_COO, BACKEND_SCIPY_CSR, BACKEND_SCIPY_CSC, BACKEND_SCIPY_COO_ARRAY,
        BACKEND_SCIPY_CSR_ARRAY, BACKEND_SCIPY_CSC_ARRAY,
    })
    CUDA_BACKENDS = frozenset({BACKEND_CUDA, BACKEND_CUPY, BACKEND_CUPY_SCIPY_COO, BACKEND_CUPY_SCIPY_CSR,
                               BACKEND_CUPY_SCIPY_CSC})
    CUPY_BACKENDS = frozenset({BACKEND_CUPY, BACKEND_CUPY_SCIPY_COO, BACKEND_CUPY_SCIPY_CSR, BACKEND_CUPY_SCIPY_CSC})

    def __init__(self, **kwargs):
        self._kwargs = kwargs
        self.params = _ParamsView(kwargs)
        self.meta = None
        self.results = None
        self.task_data = None
        self._backend = BACKEND_NUMPY

    # -- declarations ----------------------------------------------------------------------

    def buffer(self, kind, extra_shape=(), dtype="float32", where=None, use=None):
        """Declare a result buffer (LiberTEM's `UDF.buffer`)."""
        return BufferDecl(kind, extra_shape, dtype, where, use)

    @classmethod
    def aux_data(cls, data, kind, extra_shape=(), dtype="float32"):
        """Per-frame auxiliary data, passed as a keyword argument (LiberTEM's `UDF.aux_data`):
        `data` with one entry (of `extra_shape`) per nav position."""
        if kind != "nav":
            raise ValueError(f"aux data of kind {kind!r}: udf-host takes kind='nav' (one entry per frame)")
        import numpy as np

        array = np.asarray(data)
        if array.dtype != np.dtype(dtype):
            raise ValueError(f"aux data has dtype {array.dtype}, but dtype={dtype!r} was given")
        return AuxData(array.reshape((-1, *tuple(extra_shape))), kind, extra_shape, dtype)

    def get_result_buffers(self):
        raise NotImplementedError(f"{type(self).__name__} must implement get_result_buffers()")

    def get_task_data(self):
        return {}

    def get_preferred_input_dtype(self):
        import numpy as np

        return np.float32

    def get_tiling_preferences(self):
        return {"depth": UDF.TILE_DEPTH_DEFAULT, "total_size": UDF.TILE_SIZE_MAX}

    def get_backends(self):
        return (BACKEND_NUMPY,)

    def get_method(self):
        """The processing method: tile > frame > partition among those the class implements."""
        for method, name in ((UDFMethod.TILE, "process_tile"), (UDFMethod.FRAME, "process_frame"),
                             (UDFMethod.PARTITION, "process_partition")):
            if callable(getattr(self, name, None)):
                return method
        raise TypeError(f"{type(self).__name__} implements none of process_tile, process_frame, process_partition")

    # -- helpers inside the UDF ------------------------------------------------------------

    @property
    def xp(self):
        """The array module: NumPy (inside the runner, the host's arrays presented as NumPy)."""
        import numpy

        return numpy

    def forbuf(self, arr, target):
        """Make `arr` fit the result buffer `target` (LiberTEM's `forbuf`): here the backend is
        always the same, so only a flattened signal is reshaped."""
        if getattr(arr, "shape", None) != getattr(target, "shape", None) and hasattr(arr, "reshape"):
            return arr.reshape(target.shape)
        return arr

    @staticmethod
    def with_mask(data, mask):
        """A result with its valid mask (`True`/`False`, or a bool array broadcastable to `data`)."""
        return ArrayWithMask(data, mask)

    def copy(self):
        return type(self)(**self._kwargs)

    def __repr__(self):
        params = ", ".join(f"{k}={v!r}" for k, v in self._kwargs.items())
        return f"{type(self).__name__}({params})"

    # -- the user's process: the class as data for the engine ------------------------------

    def _spec(self, roi=None) -> tuple:
        """`("class", runner path, runner bytes, params, class source JSON)` for the engine
        (udf_host.api); the class's code is captured as text, never run here."""
        from .class_spec import class_spec

        return class_spec(self, roi)
