"""A LiberTEM UDF class as data: its source and the module-level things it uses.

A `udf_host.UDF` subclass never runs in the user's process: it travels to the Python
runner in the sandbox as source text. `capture(cls)` finds that text — the class, and
every module-level function, class, constant and import its code names, recursively —
from the live module (a file, or a notebook's cells) and returns one self-contained
module:

    >>> source = capture(MyUDF)
    >>> source.text          # imports, constants, helpers, then the class
    >>> source.arrays        # NumPy constants the text refers to, sent as arrays

What cannot travel is refused here, before any data is read, with an error that names
it: a module other than NumPy and the standard library's pure-Python modules, a
function or class from such a module, a closure over live objects, an object that is
not plain data (an open file, a dataset, an instance of some class), a name that is not
defined at all.

Which names a function uses is read from the compiler's own symbol tables (`symtable`),
so a local variable that happens to share a global's name is not mistaken for it.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import linecache
import math
import symtable
import sys
import textwrap
import types
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["CapturedSource", "CaptureError", "capture", "ALLOWED_MODULES"]

#: Modules a UDF may import inside the sandbox. `numpy` is the host's array interface
#: presented as NumPy; the others are the standard library's pure-Python modules that the
#: runner's interpreter carries (no files, sockets, processes or threads there).
ALLOWED_MODULES = frozenset(
    {
        "numpy",
        "math",
        "cmath",
        "functools",
        "itertools",
        "operator",
        "collections",
        "collections.abc",
        "dataclasses",
        "enum",
        "typing",
        "numbers",
        "fractions",
        "decimal",
        "statistics",
        "string",
        "re",
        "copy",
        "heapq",
        "bisect",
        "abc",
        "warnings",
        "json",
        "struct",
    }
)

# The module a `udf_host.UDF` subclass names as its base; the runner provides it.
_UDF_MODULES = frozenset({"udf_host", "udf_host.udf_class"})

# Largest NumPy constant that travels (as an array beside the text).
MAX_ARRAY_BYTES = 64 << 20

# The name under which the captured text imports NumPy for its own constants.
_NUMPY = "_udf_host_numpy"


class CaptureError(TypeError):
    """The class cannot travel to the sandbox as it is; the message says which name and why."""


@dataclass
class CapturedSource:
    """A UDF class as one self-contained module: `text` defines `class_name`; `arrays`
    are the NumPy constants `text` binds by name (the runner binds them before running
    `text`)."""

    class_name: str
    text: str
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    #: Where the class came from (a file name, or a notebook cell's name), for tracebacks.
    origin: str = "<unknown>"
    #: `text` as pieces to run in order, each `(text, file, first line)`: the imports and
    #: constants, then every definition with the file and line it has in the user's
    #: source, so that a traceback in the sandbox shows the user's own line numbers.
    pieces: list[tuple[str, str, int]] = field(default_factory=list)


def capture(cls: type) -> CapturedSource:
    """The source of `cls` and of what it uses, as one module (see the module docs).

    # Errors
    `CaptureError` naming the first thing that cannot travel.
    """
    if not isinstance(cls, type):
        raise CaptureError(f"expected a UDF class, got {type(cls).__name__} {cls!r}")
    if "<locals>" in cls.__qualname__ or cls.__qualname__ != cls.__name__:
        raise CaptureError(
            f"{cls.__qualname__} is defined inside a function or another class; define the "
            "UDF class at the top level of a module or notebook cell"
        )
    collector = _Collector(_module_globals(cls))
    collector.add_class(cls.__name__, cls)
    return CapturedSource(
        class_name=cls.__name__,
        text=collector.module_text(),
        arrays=collector.arrays,
        origin=_source_file(cls) or "<unknown>",
        pieces=collector.module_pieces(),
    )


def _module_globals(cls: type) -> dict[str, Any]:
    """The globals the class's methods see (a notebook's namespace for a class defined in
    a cell, where `sys.modules['__main__']` may not be that namespace)."""
    for value in vars(cls).values():
        function = _function_of(value)
        if function is not None:
            return function.__globals__
    module = sys.modules.get(cls.__module__)
    if module is None:
        raise CaptureError(f"cannot find the module of {cls.__name__} ({cls.__module__!r})")
    return vars(module)


def _function_of(value: Any) -> types.FunctionType | None:
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if isinstance(value, property):
        value = value.fget
    return value if isinstance(value, types.FunctionType) else None


def _method_codes(cls: type) -> list[types.CodeType]:
    codes = []
    for value in vars(cls).values():
        function = _function_of(value)
        if function is not None:
            codes.append(function.__code__)
    return codes


def _source_file(obj: Any) -> str | None:
    """The file (or notebook cell name) the object was defined in. For a class, a method's
    code object is asked first: `inspect` goes by `sys.modules[cls.__module__]`, which for a
    class of `__main__` can be any program's main file."""
    if isinstance(obj, type):
        for code in _method_codes(obj):
            return code.co_filename
    try:
        return inspect.getsourcefile(obj) or inspect.getfile(obj)
    except (TypeError, OSError):
        return None


def _class_source(cls: type) -> tuple[str, int]:
    """The text of a class definition, found through one of its methods: a method's code
    object knows its file or notebook cell and its line, and `linecache` has the text
    (IPython registers every cell there). A class without methods falls back to
    `inspect.getsource`."""
    for code in _method_codes(cls):
        lines = linecache.getlines(code.co_filename)
        if not lines:
            continue
        try:
            tree = ast.parse("".join(lines))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ClassDef)
                and node.name == cls.__name__
                and node.lineno <= code.co_firstlineno <= (node.end_lineno or node.lineno)
            ):
                start = min([d.lineno for d in node.decorator_list] + [node.lineno])
                return textwrap.dedent("".join(lines[start - 1 : node.end_lineno])), start
    if not _method_codes(cls):
        try:
            lines, start = inspect.getsourcelines(cls)
            return textwrap.dedent("".join(lines)), max(start, 1)
        except (OSError, TypeError):
            pass
    raise CaptureError(
        f"the source of {cls.__name__} is not available (a class typed at an interactive "
        "prompt without a file or a notebook cell, or one built with type()); define it in a "
        "file or a notebook cell"
    )


def _function_source(name: str, function: types.FunctionType) -> tuple[str, int]:
    if function.__name__ == "<lambda>":
        raise CaptureError(
            f"{name} is a lambda; give it a name with def so that its source can travel"
        )
    try:
        lines, start = inspect.getsourcelines(function)
        return textwrap.dedent("".join(lines)), max(start, 1)
    except (OSError, TypeError) as e:
        raise CaptureError(f"the source of function {name} is not available: {e}") from None


def _global_names(source: str, filename: str) -> list[str]:
    """Every name `source` (one def or class) reads from module scope, in order of first
    use: the compiler's symbol tables, walked through every nested scope."""
    table = symtable.symtable(source, filename, "exec")
    found: dict[str, None] = {}

    def walk(scope: symtable.SymbolTable, top: bool) -> None:
        for symbol in scope.get_symbols():
            if not symbol.is_referenced():
                continue
            # At module level of the snippet, a referenced name that the snippet does not
            # itself assign (the def/class name is assigned) is a global.
            if top and not symbol.is_assigned() and not symbol.is_imported():
                found[symbol.get_name()] = None
            elif not top and symbol.is_global():
                found[symbol.get_name()] = None
        for child in scope.get_children():
            walk(child, False)

    walk(table, True)
    return list(found)


def _is_plain_data(value: Any, depth: int = 0) -> bool:
    if depth > 20:
        return False
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return True
    if isinstance(value, (tuple, list, frozenset, set)):
        return all(_is_plain_data(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(_is_plain_data(k, depth + 1) and _is_plain_data(v, depth + 1) for k, v in value.items())
    return False


def _literal(value: Any) -> str:
    """Source text that evaluates to `value` (plain data only). Floats go through `repr`,
    which round-trips exactly; non-finite ones through `float(...)`."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, complex):
        return f"complex({_literal(value.real)}, {_literal(value.imag)})"
    if isinstance(value, (tuple, list, set, frozenset)):
        items = ", ".join(_literal(v) for v in value)
        if isinstance(value, tuple):
            return f"({items}{',' if len(value) == 1 else ''})"
        if isinstance(value, list):
            return f"[{items}]"
        return f"{type(value).__name__}([{items}])"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _root_module(name: str) -> str:
    return name.split(".")[0]


def _module_allowed(name: str) -> bool:
    return name in ALLOWED_MODULES or _root_module(name) == "numpy"


class _Collector:
    """Walks from the class through the module-level names it uses, collecting the text
    of each, in an order where everything is defined before it is used at import time."""

    def __init__(self, module_globals: dict[str, Any]):
        self.globals = module_globals
        self.imports: list[str] = []
        self.constants: list[str] = []
        self.definitions: list[str] = []
        self.placed: list[tuple[str, str, int]] = []
        self.arrays: dict[str, np.ndarray] = {}
        self.seen: set[str] = set()

    def module_text(self) -> str:
        parts = ["\n".join(self.imports), "\n".join(self.constants), *self.definitions]
        return "\n\n".join(p for p in parts if p) + "\n"

    def module_pieces(self) -> list[tuple[str, str, int]]:
        head = "\n".join(p for p in ("\n".join(self.imports), "\n".join(self.constants)) if p)
        return ([(head + "\n", "<udf_host: imports and constants>", 1)] if head else []) + self.placed

    def add_class(self, name: str, cls: type) -> None:
        self.seen.add(name)
        source, line = _class_source(cls)
        filename = _source_file(cls) or "<udf>"
        self._add_uses(name, source, filename)
        self.definitions.append(source)
        self.placed.append((source, filename, line))

    def _add_function(self, name: str, function: types.FunctionType) -> None:
        if function.__closure__:
            cells = ", ".join(function.__code__.co_freevars)
            raise CaptureError(
                f"{name} is a closure over {cells}: only functions defined at the top level "
                "of a module can travel to the sandbox"
            )
        source, line = _function_source(name, function)
        if function.__name__ != name:
            source += f"\n{name} = {function.__name__}\n"
        self._add_uses(name, source, function.__code__.co_filename)
        self.definitions.append(source)
        self.placed.append((source, function.__code__.co_filename, line))

    def _add_uses(self, owner: str, source: str, filename: str) -> None:
        try:
            names = _global_names(source, filename)
        except SyntaxError as e:
            raise CaptureError(f"cannot read the source of {owner}: {e}") from None
        for used in names:
            self._add_name(used, owner)

    def _add_name(self, name: str, used_by: str) -> None:
        if name in self.seen:
            return
        self.seen.add(name)
        if name not in self.globals:
            if hasattr(builtins, name):
                return
            raise CaptureError(f"{used_by} uses {name!r}, which is not defined")
        value = self.globals[name]
        if isinstance(value, types.ModuleType):
            self._add_module(name, value.__name__, used_by)
        elif self._is_own_code(value):
            if isinstance(value, type):
                self.add_class(name, value)
            else:
                self._add_function(name, value)
        elif isinstance(value, type) or (callable(value) and hasattr(value, "__name__")):
            self._add_import_of(name, value, used_by)
        elif isinstance(value, np.ndarray):
            self._add_array(name, value)
        elif isinstance(value, np.generic):
            self.constants.append(f"{name} = {_literal(value.item())}")
        elif isinstance(value, np.dtype) and not value.hasobject and value.fields is None:
            self._need_numpy()
            self.constants.append(f"{name} = {_NUMPY}.dtype({value.str!r})")
        elif _is_plain_data(value):
            self.constants.append(f"{name} = {_literal(value)}")
        else:
            raise CaptureError(
                f"{used_by} uses {name!r}, a {type(value).__module__}.{type(value).__qualname__} object; "
                "only functions, classes and plain data (numbers, strings, tuples, lists, dicts, "
                "NumPy arrays) defined at module level can travel to the sandbox: pass it as a "
                "parameter instead"
            )

    def _add_module(self, name: str, module: str, used_by: str) -> None:
        if module in _UDF_MODULES:
            module = "udf_host"
        elif not _module_allowed(module):
            raise CaptureError(
                f"{used_by} uses the module {module!r} (as {name!r}); inside the sandbox only NumPy "
                f"and these standard modules exist: {', '.join(sorted(ALLOWED_MODULES - {'numpy'}))}"
            )
        self.imports.append(f"import {module}" if name == module else f"import {module} as {name}")

    def _is_own_code(self, value: Any) -> bool:
        """A function or class written in the UDF's own module (or notebook)."""
        if isinstance(value, types.FunctionType):
            return value.__globals__ is self.globals
        if isinstance(value, type):
            return value.__module__ == self.globals.get("__name__") and value.__module__ not in _UDF_MODULES
        return False

    def _add_import_of(self, name: str, value: Any, used_by: str) -> None:
        """A function or class from another module: imported there by name, if that module
        exists in the sandbox and really has it under that name."""
        qualname = getattr(value, "__name__", None)
        origin = getattr(value, "__module__", None) or ""
        candidates = [origin, "numpy"] if _root_module(origin) == "numpy" else [origin]
        if origin in _UDF_MODULES:
            candidates = ["udf_host"]
        for module_name in candidates:
            module = sys.modules.get(module_name)
            allowed = module_name == "udf_host" or _module_allowed(module_name)
            if allowed and module is not None and qualname and getattr(module, qualname, None) is value:
                self.imports.append(
                    f"from {module_name} import {qualname}" + ("" if qualname == name else f" as {name}")
                )
                return
        raise CaptureError(
            f"{used_by} uses {name!r} from the module {origin or '?'!r}; inside the sandbox only "
            "NumPy and the standard library's pure-Python modules exist"
        )

    def _need_numpy(self) -> None:
        line = f"import numpy as {_NUMPY}"
        if line not in self.imports:
            self.imports.append(line)

    def _add_array(self, name: str, value: np.ndarray) -> None:
        if value.dtype.hasobject or value.dtype.fields is not None:
            raise CaptureError(f"the constant {name!r} is an array of {value.dtype}; only numeric arrays travel")
        if value.nbytes > MAX_ARRAY_BYTES:
            raise CaptureError(
                f"the constant {name!r} has {value.nbytes} bytes (more than {MAX_ARRAY_BYTES}); "
                "pass it as a parameter instead"
            )
        self.arrays[name] = np.ascontiguousarray(value)
