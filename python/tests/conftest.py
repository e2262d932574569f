"""Shared fixtures: where the repository's plugins and command-line binary are, and
generated datasets. `scripts/python-tests.sh` builds both before pytest runs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = Path(os.environ.get("UDF_HOST_PLUGIN_DIR", ROOT / "target/wasm-plugins/wasm32-wasip2/release"))
CLI = Path(os.environ.get("UDF_HOST_BIN", ROOT / "target/debug/udf-host"))
CACHE = ROOT / "target/test-cache"


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes a minute or more (a fresh venv); `-m 'not slow'` leaves it out")


def plugin(name: str) -> Path:
    path = PLUGINS / f"{name}.wasm"
    if not path.exists():
        pytest.fail(f"{path} was not built: run `cargo test` (tests/build.rs builds the plugins) first")
    return path


def cli(*args: str | os.PathLike) -> subprocess.CompletedProcess:
    """Run the command-line binary; fails the test with its output if it fails."""
    if not CLI.exists():
        pytest.fail(f"{CLI} was not built: run `cargo build -p udf-host` first")
    done = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"udf-host {' '.join(map(str, args))} failed ({done.returncode}):\n{done.stderr}")
    return done


def module_from_file(tmp_path: Path, name: str, source: str):
    """`source` (dedented) as module `name` imported from a file of its own in `tmp_path`
    (a class's source must be readable by `inspect`): the module and its path."""
    import importlib.util
    import sys
    import textwrap

    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module, path


def scan(nav=(6, 7), sig=(16, 12), seed=1, dtype=np.uint16) -> np.ndarray:
    """A synthetic 4D-STEM scan of small integers (sums are exact in float32): a bright
    disk that moves with the scan position over a noisy background."""
    rng = np.random.default_rng(seed)
    frames = rng.integers(0, 4, size=nav + sig).astype(dtype)
    yy, xx = np.mgrid[: sig[0], : sig[1]]
    for index in np.ndindex(*nav):
        cy, cx = sig[0] / 2 + index[0] % 3 - 1, sig[1] / 2 + index[-1] % 3 - 1
        frames[index][(yy - cy) ** 2 + (xx - cx) ** 2 < 9] += 20
    return frames


@pytest.fixture
def ctx():
    import udf_host

    return udf_host.Context(threads=2, cache_dir=CACHE)


@pytest.fixture
def scan_file(tmp_path):
    data = scan()
    path = tmp_path / "scan.npy"
    np.save(path, data)
    return path, data


# Dask's cluster start and stop chatter at INFO level drowns a failure's own output.
import logging  # noqa: E402

logging.getLogger("distributed").setLevel(logging.WARNING)
