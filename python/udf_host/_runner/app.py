"""udf-host's Python runner: LiberTEM UDF classes, sandboxed (DESIGN.md §8).

A component built with componentize-py (scripts/polyglot/runner.sh) against
`wit/udf.wit`'s `udf-runner` world. The host hands it a class's source first
(`runner.load`, a JSON document: python/udf_host/class_spec.py writes it for
`udf_host.UDF` subclasses, `udf-host` for `file.py:Class`), then drives the class through
the ordinary `udf` interface; this module turns every `udf` call into LiberTEM 0.16's calls
on the class (API.md §2.1): a fresh instance per partition made from the keyword
arguments, `get_result_buffers` with buffers and views of API.md §3.1, `self.meta`,
`get_task_data`, `preprocess`, `process_tile|frame|partition`, `postprocess`, `merge`,
`get_results` with `with_mask`.

Inside, `import numpy` is the host's arrays presented as NumPy (`numpy_facade`); tiles
are the host's memory, never copied in. A Python exception in the class is returned as
the `udf-error` "<Class>.<method> raised ...", with the traceback of the class's own
lines (its file name and line numbers).
"""

import ast
import base64
import functools
import json
import linecache
import math
import sys
import traceback
import types

import numpy_facade  # noqa: F401  (binds `numpy` to the host's arrays first)
import udf_class
import udf_sdk as sdk
import xp
import xp_backend
from udf_sdk import UdfError
from udf_sdk import t
from wit_world import exports as _exports

np = sys.modules["numpy"]

# `from udf_host import UDF` (and LiberTEM's own import, for a file run as it is) give the
# base class of this runner.
_udf_host = types.ModuleType("udf_host")
for _name in ("UDF", "UDFException", "UDFRunCancelled"):
    setattr(_udf_host, _name, getattr(udf_class, _name))
_udf_host.udf_class = udf_class
sys.modules["udf_host"] = _udf_host
sys.modules["udf_host.udf_class"] = udf_class
for _name in ("libertem", "libertem.udf", "libertem.udf.base"):
    _module = types.ModuleType(_name)
    _module.UDF = udf_class.UDF
    _module.UDFException = udf_class.UDFException
    _module.UDFRunCancelled = udf_class.UDFRunCancelled
    sys.modules[_name] = _module
sys.modules["libertem"].udf = sys.modules["libertem.udf"]


class _HostLog:
    """`print` inside the class: each line goes to the host's log (the sandbox has no stdout)."""

    def __init__(self, level):
        self.level = level
        self.pending = ""

    def write(self, text):
        self.pending += str(text)
        while "\n" in self.pending:
            line, self.pending = self.pending.split("\n", 1)
            sdk.log(self.level, line)
        return len(text)

    def flush(self):
        if self.pending:
            sdk.log(self.level, self.pending)
            self.pending = ""


sys.stdout = _HostLog("info")
sys.stderr = _HostLog("warn")

#: The hidden parameter carrying the ROI (flat bool array over the nav axis) for
#: `self.meta.roi` before `get_results`; the front ends add it.
ROI_PARAM = "udf_host_roi"

_STATE = {}


# --------------------------------------------------------------------------------------
# errors


class ClassError(Exception):
    """A Python exception raised by the class, with where it happened."""


def _user_traceback(e):
    """The traceback of `e` without the runner's own frames: the class's lines first."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename not in _RUNNER_FILES]
    lines = traceback.format_list(frames)
    return "Traceback (most recent call last):\n" + "".join(lines) + "".join(
        traceback.format_exception_only(type(e), e))


_RUNNER_FILES = set()


def _guard(method_name):
    """Run a `udf` export: Python exceptions become `udf-error`s naming the class, the
    method and the unit, with the class's own traceback."""

    def wrap(f):
        def call(self, *args):
            try:
                return f(self, *args)
            except UdfError as e:
                raise sdk.Err(t.UdfError(e.kind, e.message)) from None
            except sdk.Err:
                raise
            except Exception as e:  # noqa: BLE001 - everything the class raises is reported
                name = _STATE.get("class_name", "the class")
                where = _unit_text(_STATE.get("unit")) or method_name
                message = f"{name}.{where} raised {type(e).__name__}: {e}\n{_user_traceback(e)}"
                kind = t.ErrorKind.BAD_PARAM if isinstance(e, (TypeError, AttributeError)) and method_name == "load" \
                    else t.ErrorKind.INTERNAL
                raise sdk.Err(t.UdfError(kind, message)) from None

        call.__name__ = f.__name__
        _RUNNER_FILES.add(f.__code__.co_filename)
        return call

    return wrap


def _unit_text(unit):
    """The unit an error happened in: a name, or `(method, partition, frame)` for a frame
    (a tuple per frame; the text is made only for an error)."""
    if isinstance(unit, tuple):
        method, partition, frame = unit
        return f"{method} (partition {partition}, frame {frame})"
    return unit


_RUNNER_FILES.add(__file__)
_RUNNER_FILES.add(getattr(udf_class, "__file__", "udf_class.py"))


# --------------------------------------------------------------------------------------
# loading a class


def _array_from_json(spec):
    data = base64.b64decode(spec["data"])
    return xp.ndarray(xp_backend.from_bytes(spec["dtype"], [int(n) for n in spec["shape"]], data))


def _exec_piece(namespace, text, file, line):
    """Run one piece of the class's module, its lines where they are in the user's file;
    returns its syntax tree."""
    padded = "\n" * max(int(line) - 1, 0) + text
    linecache.cache[file] = (len(padded), None, padded.splitlines(True), file)
    tree = ast.parse(padded, file)
    exec(compile(tree, file, "exec"), namespace)  # noqa: S102 - the sandbox is the point
    return tree


def _check_numpy_names(namespace, trees):
    """Every `np.name` (and `np.fft.name`) the class's code names must exist in udf-host's
    NumPy: an error that names the first one that does not, before any data is read."""
    for tree, file in trees:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            chain = []
            value = node
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if not isinstance(value, ast.Name) or namespace.get(value.id) is not np:
                continue
            target = np
            spelled = "numpy"
            for attr in reversed(chain):
                spelled += "." + attr
                try:
                    target = getattr(target, attr)
                except AttributeError:
                    raise UdfError.bad_param(
                        f"{spelled} (line {node.lineno} of {file}) is not supported by udf-host's NumPy, the "
                        "host's arrays inside the sandbox; docs/python.md lists what is") from None
                if not isinstance(target, (types.ModuleType, type(xp.fft))):
                    break


def load(document):
    source = json.loads(document)
    name = source["class_name"]
    _STATE.clear()
    _STATE["class_name"] = name
    _STATE["unit"] = "load"
    namespace = {"__name__": "__udf__", "__builtins__": __builtins__}
    for const, spec in source.get("constants", {}).items():
        namespace[const] = _array_from_json(spec)
    pieces = source.get("pieces") or [(source["text"], source.get("file", "<udf>"), source.get("first_line", 1))]
    trees = [(_exec_piece(namespace, text, file, line), file) for text, file, line in pieces]
    _check_numpy_names(namespace, trees)
    cls = namespace.get(name)
    if not isinstance(cls, type):
        raise UdfError.bad_param(f"{source.get('file', '<udf>')} defines no class {name!r}")
    if not issubclass(cls, udf_class.UDF):
        raise UdfError.bad_param(
            f"{name} does not derive from udf_host.UDF (or libertem.udf.UDF); its bases are "
            f"{', '.join(b.__name__ for b in cls.__bases__)}")
    _STATE["cls"] = cls
    _STATE["kwargs_spec"] = source.get("kwargs", {})
    _STATE["file"] = source.get("file", "<udf>")
    _STATE["literal_names"] = set()
    _STATE["specs"] = _param_specs(cls)
    _STATE["unit"] = None


# --------------------------------------------------------------------------------------
# parameters and meta


def _param_values(params):
    """The wit params as the class's keyword arguments (and the ROI, if the front end sent it)."""
    spec = _STATE["kwargs_spec"]
    kwargs, roi = {}, None
    for p in params:
        v = p.value
        if isinstance(v, t.ParamValue_Array):
            value = sdk._host_array(v.value)
        else:
            value = v.value
        if p.name == ROI_PARAM:
            roi = value if value.size else None
            continue
        kind = spec.get(p.name, {}).get("type")
        if kind == "literal" or (kind is None and p.name in _STATE["literal_names"]):
            value = ast.literal_eval(value)
        elif kind == "aux":
            value = _Aux(value)
        kwargs[p.name] = value
    return kwargs, roi


class _Aux:
    """A nav aux array (partition-sized on workers) whose view follows the current unit."""

    def __init__(self, arr):
        self.arr = arr


def _dataset(meta):
    nav = tuple(int(n) for n in meta.nav_shape)
    sig = tuple(int(n) for n in meta.sig_shape)
    return nav, sig


def _new(params, meta, partition=None, valid=None, roi_flat=None):
    """A fresh instance of the class with its meta (LiberTEM's `new_for_partition`)."""
    kwargs, roi = _param_values(params)
    if roi_flat is not None:
        roi = roi_flat
    cls = _STATE["cls"]
    _STATE["unit"] = "__init__"
    udf = cls(**{k: v for k, v in kwargs.items()})
    if not hasattr(udf, "_kwargs"):
        raise UdfError.internal(f"{cls.__name__}.__init__ did not call super().__init__(**kwargs)")
    nav, sig = _dataset(meta)
    shape = udf_class.Shape(nav + sig, len(sig))
    frames = int(meta.roi_count) if meta.roi_count is not None else math.prod(nav)
    roi_array = None
    roi_list = None
    if roi is not None:
        roi_array = roi if isinstance(roi, xp.ndarray) else xp.asarray(roi, dtype=xp.bool)
        roi_array = roi_array.astype(xp.bool).reshape(nav)
        roi_list = [bool(b) for b in roi_array.reshape((-1,)).tobytes()]
    udf.meta = udf_class.UDFMeta(
        dataset_shape=shape,
        roi=roi_array,
        dataset_dtype=xp._dtype(sdk.dtype_name(meta.dataset_dtype)),
        input_dtype=xp._dtype(sdk.dtype_name(meta.input_dtype)),
        device_class="cpu",
        threads_per_worker=int(meta.threads_per_worker),
        _roi_flat=roi_list,
    )
    if valid is not None:
        udf.meta._later("_valid_nav_mask", valid)
    udf._frames = frames
    udf._nav, udf._sig = nav, sig
    if roi is None and meta.roi_count is not None:
        udf.meta.roi = _NoRoi()
    if partition is not None:
        udf.meta._partition_shape = udf_class.Shape((int(partition.frames), *sig), len(sig))
        udf.meta.slice = udf_class.Slice((int(partition.origin),) + (0,) * len(sig), udf.meta._partition_shape)
        udf.meta.tiling_scheme = [udf_class.Slice(s.origin, udf_class.Shape(s.shape, len(sig)))
                                  for s in partition.tiling_scheme]
        udf.meta.array_backend = udf_class.BACKEND_NUMPY
    _STATE["unit"] = None
    return udf


class _NoRoi:
    """`meta.roi` when the run has a ROI that the front end did not send."""

    def __getattr__(self, name):
        raise UdfError.bad_param("meta.roi is not available to this run (the front end did not send the ROI)")


def _decls(udf):
    _STATE["unit"] = "get_result_buffers"
    decls = udf.get_result_buffers()
    if not isinstance(decls, dict):
        raise UdfError.internal(f"get_result_buffers returned {type(decls).__name__}, expected a dict of self.buffer(...)")
    out = {}
    for name, d in decls.items():
        if not isinstance(d, udf_class.BufferDecl):
            raise UdfError.internal(f"get_result_buffers: {name!r} is {type(d).__name__}, expected self.buffer(...)")
        try:
            dtype = xp._dtype(d.dtype)
        except TypeError:
            raise UdfError.invalid_data(
                f"get_result_buffers: buffer {name!r} has dtype {d.dtype!r}; udf-host's buffers are numeric "
                "(bool, int, uint, float, complex), not objects or structures") from None
        out[name] = (d, dtype.name)
    _STATE["unit"] = None
    return out


_KINDS = {"nav": t.BufferKind.NAV, "sig": t.BufferKind.SIG, "single": t.BufferKind.SINGLE}
_USES = {None: t.BufferUse.NORMAL, "private": t.BufferUse.PRIVATE, "result_only": t.BufferUse.RESULT_ONLY}


def _storage_shape(decl, frames, sig):
    if decl.kind == "nav":
        return (frames, *decl.extra_shape)
    if decl.kind == "sig":
        return (*sig, *decl.extra_shape)
    return decl.extra_shape or (1,)


# --------------------------------------------------------------------------------------
# buffers and their views (API.md §3.1)


class Results:
    """`self.results`: each buffer's view for the current unit (attribute access; assigning
    to an attribute assigns into the view, as LiberTEM's `UDFData`)."""

    def __init__(self, buffers, sig_dims):
        object.__setattr__(self, "_buffers", buffers)  # name -> (decl, array)
        object.__setattr__(self, "_views", {})
        object.__setattr__(self, "_unit", None)
        object.__setattr__(self, "_sig_dims", sig_dims)

    def _enter(self, unit):
        object.__setattr__(self, "_unit", unit)
        self._views.clear()

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        view = self._views.get(name)
        if view is not None:
            return view
        try:
            decl, arr = self._buffers[name]
        except KeyError:
            raise AttributeError(f"no result buffer {name!r} (declared: {', '.join(self._buffers)})") from None
        view = _view(decl.kind, decl.extra_shape, arr, self._unit, self._sig_dims)
        self._views[name] = view
        return view

    def __setattr__(self, name, value):
        view = getattr(self, name)
        if value is not view:
            view[...] = value

    def __contains__(self, name):
        return name in self._buffers

    def get(self, name, default=None):
        return getattr(self, name) if name in self._buffers else default

    def keys(self):
        return self._buffers.keys()

    def get_buffer(self, name):
        return self._buffers[name][1]


def _view(kind, extra_shape, arr, unit, sig_dims):
    """A buffer's view for a unit: `None` (whole), `("tile", start, stop, sig_origin,
    sig_shape)` or `("frame", i)`; nav indices relative to the partition."""
    if unit is None or kind == "single":
        return arr
    if kind == "nav":
        if unit[0] == "tile":
            return arr[unit[1] : unit[2]]
        i = unit[1]
        return arr[i] if extra_shape else arr[i : i + 1]
    if unit[0] == "tile":
        origin, shape = unit[3], unit[4]
        return arr[tuple(slice(o, o + n) for o, n in zip(origin[:sig_dims], shape[:sig_dims]))]
    return arr


class MergeAttrMapping:
    """`dest` and `src` of `merge`: buffers by attribute; assigning assigns into the buffer."""

    def __init__(self, arrays):
        object.__setattr__(self, "_dict", arrays)

    def __iter__(self):
        return iter(self._dict)

    def __contains__(self, name):
        return name in self._dict

    def __getattr__(self, name):
        try:
            return self._dict[name]
        except KeyError:
            raise AttributeError(f"no buffer {name!r} in merge (buffers: {', '.join(self._dict)})") from None

    def __setattr__(self, name, value):
        arr = self.__getattr__(name)
        if value is not arr:
            arr[...] = value

    def __getitem__(self, name):
        return self._dict[name]


class _TaskData:
    """`self.task_data`: the dict of `get_task_data` by attribute."""

    def __init__(self, data):
        object.__setattr__(self, "_data", dict(data))

    def __getattr__(self, name):
        try:
            return self._data[name]
        except KeyError:
            raise AttributeError(f"no task data {name!r}") from None

    def __getitem__(self, name):
        return self._data[name]

    def __contains__(self, name):
        return name in self._data

    def get(self, name, default=None):
        return self._data.get(name, default)

    def __setattr__(self, name, value):
        self._data[name] = value


def _has_aux(udf):
    return any(isinstance(value, _Aux) for value in udf._kwargs.values())


def _set_params_unit(udf, unit):
    """Aux data in `self.params` as the part for the unit (API.md §3.2)."""
    views = {}
    for name, value in udf._kwargs.items():
        if isinstance(value, _Aux):
            arr = value.arr
            views[name] = _view("nav", tuple(arr.shape[1:]), arr, unit, 0)
    if views:
        object.__setattr__(udf.params, "_views", views)


def _coordinates(true_indices, nav):
    rows = []
    for flat in true_indices:
        flat = int(flat)
        coord = []
        for n in reversed(nav):
            coord.append(flat % n)
            flat //= n
        rows.append(list(reversed(coord)))
    return xp.asarray(rows, dtype=xp.int64).reshape((len(rows), len(nav)))


def _valid_later(ctx):
    """`meta.get_valid_nav_mask()` in `merge` and `get_results`, made when first asked for:
    most classes never ask, and making it is a Python loop over the whole scan."""
    flags = ctx.valid_nav_mask
    return lambda: xp.asarray([bool(v) for v in flags], dtype=xp.bool)


def _named(buffers):
    out = []
    for name, (decl, arr) in buffers.items():
        out.append(t.NamedArray(name, t.Ndarray(sdk._wit_dtype(arr.dtype.name), list(arr.shape),
                                                 t.ArrayData_Bytes(arr.tobytes()))))
    return out


def _from_named(arrays):
    return {a.name: sdk._host_array(a.data) for a in arrays}


# --------------------------------------------------------------------------------------
# the exports


def _implemented(cls, name):
    return callable(getattr(cls, name, None))


def _own(cls, name):
    """Whether the class (not the base) defines `name`."""
    return getattr(cls, name, None) is not getattr(udf_class.UDF, name, None) and _implemented(cls, name)


def _param_specs(cls):
    import inspect

    specs = {}
    try:
        signature = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        signature = None
    if signature is not None:
        for p in list(signature.parameters.values())[1:]:
            if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            specs[p.name] = _spec_of_default(p.name, p.default, p.default is p.empty)
    for name, given in _STATE["kwargs_spec"].items():
        specs[name] = _spec_of_given(name, given)
    no_roi = t.ParamValue_Array(t.Ndarray(t.Dtype.BOOLEAN, [0], t.ArrayData_Bytes(b"")))
    specs[ROI_PARAM] = sdk.ParamSpec(ROI_PARAM, t.ParamType.ARRAY,
                                     "the run's ROI, flat over the nav axis (front ends set it; empty: none)", no_roi)
    return list(specs.values())


def _spec_of_default(name, default, required):
    doc = f"keyword argument {name}"
    if required:
        _STATE["literal_names"].add(name)
        return sdk.ParamSpec(name, t.ParamType.TEXT, doc + " (a Python literal)")
    if isinstance(default, bool):
        return sdk.ParamSpec.boolean(name, doc, default)
    if isinstance(default, int):
        return sdk.ParamSpec.int(name, doc, default)
    if isinstance(default, float):
        return sdk.ParamSpec.float(name, doc, default)
    if isinstance(default, str):
        return sdk.ParamSpec.text(name, doc, default)
    _STATE["literal_names"].add(name)
    return sdk.ParamSpec.text(name, doc + f" (a Python literal; default {default!r})", repr(default))


def _spec_of_given(name, given):
    kind = given.get("type")
    doc = f"keyword argument {name}"
    types_ = {"bool": t.ParamType.BOOLEAN, "int": t.ParamType.INT, "float": t.ParamType.FLOAT,
              "text": t.ParamType.TEXT, "literal": t.ParamType.TEXT, "array": t.ParamType.ARRAY,
              "aux": t.ParamType.ARRAY}
    return sdk.ParamSpec(name, types_[kind], doc, None, nav_aux=kind == "aux")


def _wit_param_spec(s):
    return t.ParamSpec(s.name, s.ty, s.doc, s.default, s.nav_aux)


class Runner(_exports.Runner):
    @_guard("load")
    def load(self, source):
        load(source)


def _depth(value):
    if value is udf_class.UDF.TILE_DEPTH_DEFAULT:
        return t.TileDepth_Default()
    if value == math.inf:
        return t.TileDepth_Max()
    return t.TileDepth_Frames(int(value))


def _size(value):
    if value is udf_class.UDF.TILE_SIZE_BEST_FIT:
        return t.TileSize_BestFit()
    if value == math.inf:
        return t.TileSize_Max()
    return t.TileSize_Bytes(int(value))


def _preference(value):
    if value is bool or value is udf_class.UDF.USE_NATIVE_DTYPE:
        return t.DtypePreference_Native()
    return t.DtypePreference_Prefer(sdk._wit_dtype(xp._dtype(value).name))


_METHODS = {"tile": t.Method.TILE, "frame": t.Method.FRAME, "partition": t.Method.PARTITION}


class Udf(_exports.Udf):
    def describe(self):
        cls = _STATE.get("cls")
        if cls is None:
            # The runner on its own (the host loads and describes it once before any class).
            return t.Description(
                "udf-runner", "0", "udf-host's Python runner: runs a LiberTEM UDF class given to runner.load", [],
                [t.Method.TILE], t.DtypePreference_Native(), t.TilingPreferences(t.TileDepth_Default(),
                                                                                  t.TileSize_Max()),
                False, False, False, t.DataAccess.BYTES,
            )
        xp_backend.use_host_tiles()
        methods = [_METHODS[m] for m, f in (("tile", "process_tile"), ("frame", "process_frame"),
                                             ("partition", "process_partition")) if _implemented(cls, f)]
        doc = (cls.__doc__ or "").strip().splitlines()
        summary = doc[0] if doc else f"LiberTEM UDF class {cls.__name__} ({_STATE['file']})"
        return t.Description(
            cls.__name__, "0", summary, [_wit_param_spec(s) for s in _STATE["specs"]], methods,
            t.DtypePreference_Prefer(t.Dtype.FLOAT32),
            t.TilingPreferences(t.TileDepth_Default(), t.TileSize_Max()),
            _own(cls, "merge") or _merges_all(cls), _own(cls, "get_results"), _implemented(cls, "preprocess"),
            t.DataAccess.BYTES,
        )

    @_guard("plan")
    def plan(self, params, dataset):
        udf = _new(params, dataset)
        _STATE["unit"] = "get_method"
        method = udf.get_method()
        method = getattr(method, "value", method)
        if method not in _METHODS or not _implemented(udf, f"process_{method}"):
            raise UdfError.internal(f"get_method returned {method!r}, which the class does not implement")
        _STATE["unit"] = "get_preferred_input_dtype"
        preference = _preference(udf.get_preferred_input_dtype())
        _STATE["unit"] = "get_tiling_preferences"
        tiling = udf.get_tiling_preferences()
        _STATE["unit"] = None
        return t.RunPlan(_METHODS[method], preference, t.TilingPreferences(
            _depth(tiling.get("depth", udf_class.UDF.TILE_DEPTH_DEFAULT)),
            _size(tiling.get("total_size", udf_class.UDF.TILE_SIZE_MAX))))

    @_guard("result_buffers")
    def result_buffers(self, params, dataset):
        udf = _new(params, dataset)
        return [t.BufferDecl(name, _KINDS[d.kind], sdk._wit_dtype(dtype), list(d.extra_shape), _USES[d.use])
                for name, (d, dtype) in _decls(udf).items()]

    @_guard("init")
    def init(self, ctx):
        partition = ctx.partition
        udf = _new(ctx.params, ctx.dataset, partition)
        frames = int(partition.frames) if partition is not None else udf._frames
        buffers = {}
        for name, (d, dtype) in _decls(udf).items():
            if d.use == "result_only":
                continue
            buffers[name] = (d, xp.zeros(_storage_shape(d, frames, udf._sig), dtype=dtype))
        udf.results = Results(buffers, len(udf._sig))
        if partition is not None:
            _STATE["unit"] = "get_task_data"
            udf.task_data = _TaskData(udf.get_task_data() or {})
        _STATE["unit"] = None
        _STATE["udf"] = udf
        _STATE["buffers"] = buffers
        _STATE["partition"] = partition
        _STATE["method"] = partition.method if partition is not None else None

    def _udf(self):
        if "udf" not in _STATE:
            raise UdfError.internal("called before init")
        return _STATE["udf"]

    @_guard("preprocess")
    def preprocess(self):
        udf = self._udf()
        udf.results._enter(None)
        _set_params_unit(udf, None)
        if _implemented(udf, "preprocess"):
            _STATE["unit"] = "preprocess"
            udf.preprocess()
        _STATE["unit"] = None

    @_guard("process")
    def process(self, tile):
        try:
            self._process(tile)
        except BaseException:
            xp._settle(compute=False)
            raise
        # The tile ends with this call: the deferred copies of it the class kept are made now.
        xp._settle()

    def _process(self, tile):
        udf = self._udf()
        meta = udf.meta
        partition = _STATE["partition"]
        data = xp._tile(xp_backend.tile())
        p0 = int(partition.origin)
        n0 = int(tile.origin) - p0
        count = int(tile.frames)
        sig_origin = tuple(int(o) for o in tile.sig.origin)
        sig_shape = tuple(int(n) for n in tile.sig.shape)
        sig_dims = len(udf._sig)
        method = _STATE["method"]
        meta.tiling_scheme_idx = int(tile.scheme_index)
        meta.sig_slice = udf_class.Slice(sig_origin, udf_class.Shape(sig_shape, sig_dims))
        if method == t.Method.TILE or method == t.Method.PARTITION:
            unit = ("tile", n0, n0 + count, sig_origin, sig_shape) if method == t.Method.TILE else None
            udf.results._enter(unit)
            _set_params_unit(udf, unit if unit else None)
            meta.slice = udf_class.Slice((int(tile.origin), *sig_origin),
                                         udf_class.Shape((count, *sig_shape), sig_dims))
            indices = tile.true_nav_indices
            nav = udf._nav  # not `udf` in the closure: meta -> closure -> udf would be a cycle
            meta._later("coordinates", lambda: _coordinates(indices, nav))
            name = "process_tile" if method == t.Method.TILE else "process_partition"
            _STATE["unit"] = f"{name} (partition {partition.index}, frames {tile.origin}..{int(tile.origin) + count})"
            getattr(udf, name)(data)
        else:
            # Per frame only what must change; the rest made when asked for (a frame's
            # bookkeeping was ~50 us in the sandbox's Python, more than a host call).
            origin, index = int(tile.origin), partition.index
            zeros = (0,) * sig_dims
            frame_shape = udf_class.Shape((1, *udf._sig), sig_dims)
            indices, nav = tile.true_nav_indices, udf._nav

            def frame_slice(i):
                return udf_class.Slice((origin + i,) + zeros, frame_shape)

            def frame_coordinates(i):
                return _coordinates(indices[i : i + 1], nav)

            aux = _has_aux(udf)
            results, process_frame = udf.results, udf.process_frame
            for i in range(count):
                unit = ("frame", n0 + i)
                results._enter(unit)
                if aux:
                    _set_params_unit(udf, unit)
                meta._later("slice", functools.partial(frame_slice, i))
                meta._later("coordinates", functools.partial(frame_coordinates, i))
                _STATE["unit"] = ("process_frame", index, origin + i)
                process_frame(data._at(i))
        _STATE["unit"] = None

    @_guard("postprocess")
    def postprocess(self):
        udf = self._udf()
        udf.results._enter(None)
        _set_params_unit(udf, None)
        if _implemented(udf, "postprocess"):
            _STATE["unit"] = "postprocess"
            udf.postprocess()
        if _implemented(udf, "cleanup"):
            _STATE["unit"] = "cleanup"
            udf.cleanup()
        _STATE["unit"] = None

    @_guard("export_buffers")
    def export_buffers(self):
        self._udf()
        buffers = _STATE.pop("buffers")
        _STATE.pop("udf", None)
        return _named(buffers)

    @_guard("merge")
    def merge(self, ctx, dest, src):
        udf = _new(ctx.params, ctx.dataset, None, _valid_later(ctx))
        partition = ctx.partition
        udf.meta.slice = udf_class.Slice((int(partition.origin),) + (0,) * len(udf._sig),
                                         udf_class.Shape((int(partition.frames), *udf._sig), len(udf._sig)))
        d = _from_named(dest)
        if _merges_all(_STATE["cls"]):
            _merge_all_step(udf, ctx, d, src)
        else:
            _STATE["unit"] = f"merge (partition {partition.index})"
            udf.merge(MergeAttrMapping(d), MergeAttrMapping(_from_named(src)))
        _STATE["unit"] = None
        return [t.NamedArray(name, t.Ndarray(sdk._wit_dtype(arr.dtype.name), list(arr.shape),
                                              t.ArrayData_Bytes(arr.tobytes()))) for name, arr in d.items()]

    @_guard("get_results")
    def get_results(self, ctx, buffers):
        roi = None if ctx.roi is None else xp.asarray([bool(v) for v in ctx.roi], dtype=xp.bool)
        udf = _new(ctx.params, ctx.dataset, None, _valid_later(ctx), roi)
        decls = _decls(udf)
        arrays = _from_named(buffers)
        udf.results = Results({name: (decls[name][0], arr) for name, arr in arrays.items() if name in decls},
                              len(udf._sig))
        _STATE["unit"] = "get_results"
        returned = udf.get_results()
        _STATE["unit"] = None
        if not isinstance(returned, dict):
            raise UdfError.internal(f"get_results returned {type(returned).__name__}, expected a dict")
        out = []
        for name, value in returned.items():
            mask = None
            if isinstance(value, udf_class.ArrayWithMask):
                value, mask = value.arr, value.mask
            arr = value if isinstance(value, xp.ndarray) else xp.asarray(value)
            if name not in decls:
                raise UdfError.internal(
                    f"get_results returned {name!r}, which get_result_buffers does not declare "
                    f"(declared: {', '.join(decls)})")
            d, dtype = decls[name]
            if d.use == "private":
                raise UdfError.internal(f"get_results returned {name!r}, a use='private' buffer")
            if arr.dtype.name != dtype:
                # LiberTEM keeps the declared dtype (the value goes into the declared buffer).
                declared = xp._dtype(dtype)
                if arr.dtype.kind != declared.kind:
                    raise UdfError.internal(
                        f"get_results returned {name!r} as {arr.dtype.name}; the buffer is declared {dtype} "
                        "(the kind must be the same)")
                arr = arr.astype(declared)
            expected = _storage_shape(d, udf._frames, udf._sig)
            if tuple(arr.shape) != tuple(expected) and arr.size == math.prod(expected):
                arr = arr.reshape(expected)
            out.append(t.ResultEntry(name, t.Ndarray(sdk._wit_dtype(arr.dtype.name), list(arr.shape),
                                                     t.ArrayData_Bytes(arr.tobytes())), _mask(mask, arr)))
        return out


def _merges_all(cls):
    """Whether the class may merge with `merge_all` (it defines `merge_all` and no `merge`).

    LiberTEM 0.16 calls `merge_all` only in its DelayedJobExecutor, and `merge` (its
    default: copy the nav rows) in every other executor. udf-host calls `merge` when the
    class has one, and the default when all its buffers are nav, as those executors do;
    `merge_all` only for a class without `merge` that has a sig or single buffer, which
    LiberTEM's other executors refuse and its DelayedJobExecutor merges with `merge_all`."""
    return _own(cls, "merge_all") and not _own(cls, "merge")


def _merge_all_step(udf, ctx, dest, src):
    """One partition of a `merge_all` class (nav buffers only: LiberTEM's default merge,
    the partition's rows). Otherwise its buffers are kept (as bytes) until every
    partition has come, then `merge_all` gets them all at once, ordered by position, as
    LiberTEM's `OrderedDict[Slice, MergeAttrMapping]`. Until then nav buffers take the
    partition's rows (what the default `merge_all` makes of them) and the others stay.

    The host merges nav rows partition by partition: at the last partition only its rows
    can still be written, so `merge_all` must return, for the partitions before, the rows
    they gave (checked; LiberTEM's own `merge_all`s concatenate nav buffers)."""
    kinds = {name: decl.kind for name, (decl, _) in _decls(udf).items()}
    if all(kinds.get(name) == "nav" for name in dest):
        for name, array in _from_named(src).items():
            dest[name][...] = array
        return
    partition = ctx.partition
    origin, frames = int(partition.origin), int(partition.frames)
    merged_before = sum(1 for v in ctx.valid_nav_mask if v)
    parts = _STATE.setdefault("merge_all_parts", {})
    if merged_before == 0:
        parts.clear()
    parts[origin] = (frames, [(a.name, a.data) for a in src])
    kept = sum(n for n, _ in parts.values())
    if kept != merged_before + frames:
        raise UdfError.internal(
            f"merge_all: the runner kept {kept} frames of partial results but {merged_before + frames} were merged "
            "(the runner instance was restarted during the merge)")
    if kept < len(ctx.valid_nav_mask):
        for name, array in _from_named(src).items():
            if kinds.get(name) == "nav":
                dest[name][...] = array
        return
    sig_dims = len(udf._sig)
    ordered = {}
    for start in sorted(parts):
        n, arrays = parts[start]
        key = udf_class.Slice((start,) + (0,) * sig_dims, udf_class.Shape((n, *udf._sig), sig_dims))
        ordered[key] = MergeAttrMapping({name: sdk._host_array(data) for name, data in arrays})
    _STATE["unit"] = "merge_all"
    returned = udf.merge_all(_OrderedResults(ordered))
    if not isinstance(returned, dict) or not set(returned).issubset(dest):
        found = list(returned) if isinstance(returned, dict) else type(returned).__name__
        raise UdfError.internal(f"merge_all returned {found}; expected a dict of the buffers {', '.join(dest)}")
    for name, value in returned.items():
        value = value if isinstance(value, xp.ndarray) else xp.asarray(value)
        if kinds[name] != "nav":
            dest[name][...] = value.reshape(tuple(dest[name].shape))
            continue
        value = value.reshape((-1, *tuple(dest[name].shape[1:])))
        for start in sorted(parts):
            rows = value[start : start + parts[start][0]]
            if start == origin:
                dest[name][...] = rows
                continue
            given = dict(parts[start][1])[name]
            if rows.tobytes() != sdk._host_array(given).astype(rows.dtype).tobytes():
                raise UdfError.internal(
                    f"merge_all changed the rows {start}..{start + parts[start][0]} of the nav buffer {name!r}; "
                    "udf-host merges nav buffers partition by partition, so merge_all must return each "
                    "partition's rows as given (as LiberTEM's default merge_all does)")
    parts.clear()


class _OrderedResults(dict):
    """`ordered_results` of `merge_all`: partition slice -> that partition's buffers, in
    nav order (a dict keeps its insertion order, as LiberTEM's OrderedDict)."""


def _mask(mask, arr):
    if mask is None:
        return None
    if isinstance(mask, bool):
        return [mask]
    m = mask if isinstance(mask, xp.ndarray) else xp.asarray(mask, dtype=xp.bool)
    if tuple(m.shape) != tuple(arr.shape):
        m = xp.broadcast_to(m.astype(xp.bool), tuple(arr.shape))
    return [b != 0 for b in m.astype(xp.bool).tobytes()]
