"""A bare `pip install` of udf_host runs LiberTEM classes (issue 27, item 2): the wheel
carries the runner's sources, and the first class run builds the runner with componentize-py
(a dependency, from PyPI) into the user's cache. Slow (a fresh venv, a runner build:
about a minute here); `pytest -m "not slow"` leaves it out.

`scripts/python-tests.sh` builds the wheel it installs into its own venv and names it in
`UDF_HOST_TEST_WHEEL`; without that the test builds one (`pip wheel ./python`, slower)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

CLASS_RUN = """
import sys
import numpy as np
import udf_host

sys.path.insert(0, sys.argv[1])
from uh_classes import SumUDF  # the benchmark's SumUDF, its import changed to udf_host's

data = np.arange(4 * 5 * 6 * 7, dtype=np.float32).reshape(4, 5, 6, 7) % 11
ctx = udf_host.Context(threads=2)
result = ctx.run_udf(dataset=ctx.load("memory", data=data, sig_dims=2), udf=SumUDF())
np.testing.assert_array_equal(np.asarray(result["intensity"]), data.sum(axis=(0, 1)))
from udf_host.class_spec import runner_path
print(runner_path())
"""
CLASSES = Path(__file__).parent / "libertem_classes" / "classes.py"


def _wheel(tmp_path: Path) -> Path:
    given = os.environ.get("UDF_HOST_TEST_WHEEL")
    if given:
        return Path(given)
    out = tmp_path / "wheel"
    env = {**os.environ, "MATURIN_PEP517_ARGS": "--profile dev"}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", str(ROOT / "python"), "-w", str(out)],
                   check=True, env=env)  # fmt: skip
    return next(out.glob("udf_host-*.whl"))


def _run(*args, env=None, check=True) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env)
    if check and done.returncode != 0:
        pytest.fail(f"{' '.join(map(str, args))} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


@pytest.mark.slow
def test_a_fresh_install_without_the_projects_runner_builds_it_on_first_use(tmp_path):
    wheel = _wheel(tmp_path)
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    # The wheel and its dependencies (NumPy, componentize-py) from PyPI, as a user gets them.
    _run(python, "-m", "pip", "install", "--quiet", wheel)
    script = tmp_path / "run_class.py"
    script.write_text(CLASS_RUN)
    source = CLASSES.read_text().replace("from libertem.udf import UDF", "from udf_host import UDF")
    (tmp_path / "uh_classes.py").write_text(source)
    cache = tmp_path / "cache"
    # Nothing of the project's: no UDF_HOST_RUNNER, an empty cache, not run from the repository.
    env = {k: v for k, v in os.environ.items() if k not in ("UDF_HOST_RUNNER", "PYTHONPATH")}
    env["UDF_HOST_CACHE_DIR"] = str(cache)
    first = _run(python, script, tmp_path, env=env)
    runner = Path(first.stdout.strip().splitlines()[-1])
    assert runner.parent == cache / "runners", runner
    assert runner.stat().st_size > 10_000_000
    built = runner.stat().st_mtime_ns

    # A second process finds it there and builds nothing.
    second = _run(python, script, tmp_path, env=env)
    assert Path(second.stdout.strip().splitlines()[-1]) == runner
    assert runner.stat().st_mtime_ns == built

    # Without componentize-py and without a built runner: an error that names what is
    # missing and the command that installs it, before any data is read.
    _run(python, "-m", "pip", "uninstall", "--quiet", "--yes", "componentize-py")
    env["UDF_HOST_CACHE_DIR"] = str(tmp_path / "empty-cache")
    failed = _run(python, script, tmp_path, env=env, check=False)
    assert failed.returncode != 0
    assert "componentize-py 0.25.1 is not installed" in failed.stderr, failed.stderr
    assert "-m pip install componentize-py==0.25.1" in failed.stderr, failed.stderr
    assert "UDF_HOST_RUNNER" in failed.stderr, failed.stderr


def test_the_runners_componentize_py_version_is_pinned_the_same_everywhere():
    """build.py, the package's dependency and the polyglot scripts name one version."""
    import re

    from udf_host._runner.build import COMPONENTIZE_PY_VERSION

    pyproject = (ROOT / "python/pyproject.toml").read_text()
    common = (ROOT / "scripts/polyglot/common.sh").read_text()
    assert re.findall(r'"componentize-py==([^"]+)"', pyproject) == [COMPONENTIZE_PY_VERSION]
    assert re.findall(r"^COMPONENTIZE_PY_VERSION=(\S+)", common, re.M) == [COMPONENTIZE_PY_VERSION]


def test_a_changed_runner_source_is_a_new_cache_entry(tmp_path, monkeypatch):
    """The cache key covers the sources: an edited runner is never served from an old build."""
    from udf_host._runner import build

    before = build.source_key()
    edited = tmp_path / "app.py"
    edited.write_bytes(build._MODULES["app.py"].read_bytes() + b"\n# edited\n")
    monkeypatch.setitem(build._MODULES, "app.py", edited)
    assert build.source_key() != before
    monkeypatch.setenv("UDF_HOST_CACHE_DIR", str(tmp_path / "c"))
    assert build.cached_runner() == tmp_path / "c" / "runners" / f"udf-runner-{build.source_key()}.wasm"


def test_a_runner_cache_others_can_write_is_refused(tmp_path, monkeypatch):
    from udf_host._runner import build

    shared = tmp_path / "shared"
    (shared / "runners").mkdir(parents=True)
    (shared / "runners").chmod(0o777)
    monkeypatch.setenv("UDF_HOST_CACHE_DIR", str(shared))
    with pytest.raises(build.RunnerBuildError, match="others can write it"):
        build.ensure_runner()
