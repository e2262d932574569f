"""`numpy` inside the runner: the host's arrays (`xp`, python/udf_host/xp.py) presented as
NumPy to a LiberTEM UDF class.

Every public name of `xp` is here, plus NumPy's spellings a UDF commonly uses that the
array API spells otherwise (`np.dtype("float32")`, `np.zeros(shape, np.float32)` with the
dtype given by position). A name NumPy has and this module has not raises an
`AttributeError` that names it and says that udf-host's NumPy does not offer it (the
table in docs/python.md lists what it offers).
"""

import sys
import types

import xp

module = types.ModuleType("numpy", "NumPy as udf-host's host arrays (docs/python.md)")
for _name in dir(xp):
    if not _name.startswith("_") or _name in ("__array_api_version__", "__array_namespace_info__"):
        setattr(module, _name, getattr(xp, _name))


def dtype(d, align=False, copy=False):
    """`np.dtype(x)`: the host's dtype for any spelling (`"float32"`, `np.float32`, `int`)."""
    return xp._dtype(d)


def _creation(f):
    def create(shape, dtype=None, order="C", **kw):
        return f(shape, dtype=dtype, **kw)

    create.__name__ = f.__name__
    return create


def full(shape, fill_value, dtype=None, order="C"):
    return xp.full(shape, fill_value, dtype=dtype)


def array(obj, dtype=None, copy=True, **kw):
    return xp.asarray(obj, dtype=dtype, copy=None if copy else False)


def shape(a):
    return tuple(a.shape) if hasattr(a, "shape") else tuple(xp.asarray(a).shape)


def size(a):
    return xp.asarray(a).size


def ndim(a):
    return xp.asarray(a).ndim


def copy(a):
    return xp.asarray(a).copy()


def isscalar(v):
    return isinstance(v, (bool, int, float, complex, str))


module.dtype = dtype
module.zeros = _creation(xp.zeros)
module.ones = _creation(xp.ones)
module.empty = _creation(xp.empty)
module.full = full
module.array = array
module.shape = shape
module.size = size
module.ndim = ndim
module.copy = copy
module.isscalar = isscalar
module.ndarray = xp.ndarray
module.float_ = xp.float64
module.int_ = xp.int64
module.bool_ = xp.bool
module.intp = xp.int64
module.fft = xp.fft


def _missing(name):
    raise AttributeError(
        f"numpy.{name} is not supported by udf-host's NumPy (the host's arrays inside the sandbox); "
        "docs/python.md lists what is"
    )


module.__getattr__ = _missing
sys.modules["numpy"] = module
sys.modules["numpy.fft"] = xp.fft
