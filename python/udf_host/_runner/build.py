"""Builds udf-host's Python runner (this folder: LiberTEM UDF classes, sandboxed) with
componentize-py, and finds it in the user's cache.

The wheel carries the runner's sources, not the 20 MB component: the first class run on a
machine builds it (`ensure_runner`, 10-20 s) into `<cache>/runners/udf-runner-<key>.wasm`,
where `<cache>` is udf-host's compile cache directory (`$UDF_HOST_CACHE_DIR`, else
`$XDG_CACHE_HOME/udf-host`, else `~/.cache/udf-host`) and `<key>` is a hash of the sources
and the componentize-py version, so a changed runner is a new file and never a stale one.
`scripts/polyglot/runner.sh` builds the same way (`python build.py --out FILE --store`).

Only the standard library here: runner.sh runs this file with the build tools' Python,
where neither NumPy nor udf_host is installed.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

#: The componentize-py release the runner is built with (PyPI; python/pyproject.toml
#: and scripts/polyglot/common.sh pin the same one).
COMPONENTIZE_PY_VERSION = "0.25.1"

#: The runner's file name and its world in udf.wit.
RUNNER_FILE = "udf-runner.wasm"
WORLD = "udf-runner"

_HERE = Path(__file__).resolve().parent
_PACKAGE = _HERE.parent
#: The runner's modules by the top-level name they have inside it: this folder's, the
#: guest SDK's (linked here from guest-sdk/python/) and two of the udf_host package's.
_MODULES = {
    "app.py": _HERE / "app.py",
    "numpy_facade.py": _HERE / "numpy_facade.py",
    "udf_sdk.py": _HERE / "udf_sdk.py",
    "xp_backend.py": _HERE / "xp_backend.py",
    "xp.py": _PACKAGE / "xp.py",
    "udf_class.py": _PACKAGE / "udf_class.py",
}
#: The contract (linked here from wit/udf.wit).
_WIT = _HERE / "udf.wit"


class RunnerBuildError(RuntimeError):
    """The runner is not in the cache and cannot be built, or the cache cannot hold it."""


def cache_dir() -> Path:
    """udf-host's compile cache directory, as the host finds it (host/src/wasm/cache.rs)."""
    for name, tail in (("UDF_HOST_CACHE_DIR", ()), ("XDG_CACHE_HOME", ("udf-host",)), ("HOME", (".cache", "udf-host"))):
        value = os.environ.get(name)
        if value:
            return Path(value, *tail)
    return Path.home() / ".cache" / "udf-host"


def source_key() -> str:
    """A hash of everything the runner is built from: its sources, the contract, this
    recipe and the componentize-py version (16 hex digits)."""
    digest = hashlib.sha256(f"componentize-py {COMPONENTIZE_PY_VERSION}\n".encode())
    for name, path in [*sorted(_MODULES.items()), ("udf.wit", _WIT), ("build.py", Path(__file__))]:
        try:
            data = path.read_bytes()
        except OSError as e:
            raise RunnerBuildError(f"the Python runner's source {path} cannot be read: {e}") from None
        digest.update(f"{name} {len(data)}\n".encode())
        digest.update(data)
    return digest.hexdigest()[:16]


def cached_runner() -> Path:
    """Where the runner built from these sources lives in the cache (whether or not it is
    there yet)."""
    return cache_dir() / "runners" / f"udf-runner-{source_key()}.wasm"


def _check_private(path: Path) -> None:
    """Refuse a cache folder or runner someone else owns or can write (the runner's
    results are trusted as the class's: nobody else may swap it)."""
    if os.name != "posix":
        return
    st = path.stat()
    if st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise RunnerBuildError(
            f"{path}: belongs to another user or others can write it; udf-host loads its Python runner only from "
            f"a cache nobody else can write: remove it (it is rebuilt), or set UDF_HOST_CACHE_DIR to a folder of your own"
        )


def _runners_dir() -> Path:
    folder = cache_dir() / "runners"
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as e:
        raise RunnerBuildError(f"the Python runner's cache folder {folder} cannot be created: {e}") from None
    _check_private(folder.parent)
    _check_private(folder)
    return folder


@contextlib.contextmanager
def _locked(folder: Path):
    """One builder at a time per cache (Dask workers that start together wait for the
    first one's runner instead of each building their own)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: builders race, the last rename wins
        yield
        return
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _componentize_py_missing() -> str | None:
    """Why componentize-py cannot build the runner in this Python, or None."""
    fix = f"install it with `{sys.executable} -m pip install componentize-py=={COMPONENTIZE_PY_VERSION}`"
    try:
        found = importlib.metadata.version("componentize-py")
    except importlib.metadata.PackageNotFoundError:
        return f"componentize-py {COMPONENTIZE_PY_VERSION} is not installed in {sys.prefix}: {fix}"
    if found != COMPONENTIZE_PY_VERSION:
        return f"componentize-py {found} is installed in {sys.prefix}, the runner needs {COMPONENTIZE_PY_VERSION}: {fix}"
    return None


def build(out: Path) -> None:
    """Build the runner into `out` (written whole or not at all)."""
    missing = _componentize_py_missing()
    if missing:
        raise RunnerBuildError(
            f"udf-host's Python runner is not built and cannot be: {missing} (from PyPI, once; where there is no "
            f"network, copy a runner built elsewhere, e.g. by scripts/polyglot/runner.sh, and set UDF_HOST_RUNNER "
            f"to its path)"
        )
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="udf-runner-") as stage:
        for name, path in _MODULES.items():
            shutil.copyfile(path, Path(stage, name))
        partial = Path(stage, RUNNER_FILE)
        # componentize-py's own command line, run by this Python (where it is installed).
        command = [
            sys.executable, "-c", "import sys; from componentize_py import script; sys.argv[0] = 'componentize-py'; sys.exit(script())",
            "-d", str(_WIT), "-w", WORLD, "componentize", "-p", stage, "app", "-o", str(partial),
        ]  # fmt: skip
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        done = subprocess.run(command, cwd=stage, env=env, capture_output=True, text=True)
        if done.returncode != 0 or not partial.is_file():
            raise RunnerBuildError(
                f"componentize-py {COMPONENTIZE_PY_VERSION} failed to build udf-host's Python runner "
                f"(exit {done.returncode}):\n{done.stderr.strip() or done.stdout.strip()}"
            )
        # Into out's folder first, then renamed: nobody sees half a runner.
        with tempfile.NamedTemporaryFile(dir=out.parent, prefix=f".{out.name}.", delete=False) as tmp:
            pass
        try:
            shutil.copyfile(partial, tmp.name)
            os.chmod(tmp.name, 0o644)
            os.replace(tmp.name, out)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp.name)
            raise


def ensure_runner() -> Path:
    """The runner for these sources from the cache, built there first if it is missing."""
    path = cached_runner()
    if path.is_file():
        _check_private(path)
        return path
    folder = _runners_dir()
    with _locked(folder):
        if not path.is_file():
            build(path)
    _check_private(path)
    return path


def store(built: Path) -> Path:
    """Put a runner built from these sources (by `build`) into the cache."""
    path = cached_runner()
    folder = _runners_dir()
    with _locked(folder):
        if not path.is_file() or path.read_bytes() != Path(built).read_bytes():
            with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{path.name}.", delete=False) as tmp:
                pass
            shutil.copyfile(built, tmp.name)
            os.replace(tmp.name, path)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description="Build udf-host's Python runner with componentize-py.")
    parser.add_argument("--out", type=Path, help="build the runner into this file")
    parser.add_argument("--store", type=Path, metavar="FILE", help="put this runner (built from these sources) into the user's cache")
    parser.add_argument("--key", action="store_true", help="print the sources' key and the cached runner's path")
    args = parser.parse_args()
    try:
        if args.key:
            print(source_key(), cached_runner())
        if args.out:
            build(args.out)
        if args.store:
            print(store(args.store))
    except RunnerBuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
