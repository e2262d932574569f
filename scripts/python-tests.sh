#!/usr/bin/env bash
# The Python package's tests (python/tests): builds the udf_host wheel once into a venv
# (target/python-venv; the dev profile, so it reuses what `cargo test` compiled), builds
# the udf-host binary the tests compare with, and runs pytest. Needs the wasm plugins
# that `cargo test` builds (tests/build.rs). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/python-venv
if [[ ! -x $venv/bin/python ]]; then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
fi
# The package's dependency (numpy), pytest, Dask's distributed (test_dask.py) and
# array-api-strict (test_xp.py skips without it); the wheel itself without dependencies,
# so pip builds it exactly once.
"$venv/bin/python" -m pip install --quiet pytest "numpy>=1.23" "distributed==2026.8.0" array-api-strict
# The notebook test (python/tests/test_notebook.py: plots=True, sync=False in a kernel).
"$venv/bin/python" -m pip install --quiet nbclient nbformat ipykernel matplotlib
# LiberTEM for udf_host.libertem's tests (python/tests/test_libertem.py). It brings numba,
# scipy, scikit-image, ...: about 4 minutes and 1 GB the first time, nothing once
# installed. Where it cannot be installed those tests skip, saying so.
"$venv/bin/python" -m pip install --quiet "libertem==0.16.0" "distributed==2026.8.0" ||
    echo "warning: LiberTEM 0.16.0 could not be installed: python/tests/test_libertem.py will skip" >&2
# LiberTEM-live's simulators for python/tests/test_live_simulators.py (the receivers of
# `udf-host live` against protocol implementations nobody here wrote). Where they cannot
# be installed those tests skip, saying so.
"$venv/bin/python" -m pip install --quiet "libertem-live[sim]==0.3.0" ||
    echo "warning: libertem-live 0.3.0 could not be installed: python/tests/test_live_simulators.py will skip" >&2
# The Python runner of LiberTEM UDF classes (componentize-py from PyPI on first use; a
# no-op when up to date). The tests use this one (UDF_HOST_RUNNER), except
# test_runner_install.py, which installs the wheel into a fresh venv without it.
scripts/polyglot/runner.sh
export UDF_HOST_RUNNER="$PWD/target/polyglot/runner/udf-runner.wasm"
echo "==> building the udf_host wheel (dev profile) into $venv"
wheels=target/python-wheel
rm -f "$wheels"/udf_host-*.whl
MATURIN_PEP517_ARGS="--profile dev" "$venv/bin/python" -m pip wheel --quiet --no-deps ./python -w "$wheels"
wheel=$(echo "$PWD/$wheels"/udf_host-*.whl)
"$venv/bin/python" -m pip install --quiet --force-reinstall --no-deps "$wheel"
export UDF_HOST_TEST_WHEEL="$wheel"
cargo build --quiet -p udf-host
echo "==> pytest python/tests"
set +e
# A passed test's tmp_path is removed when it ends (fresh venvs, datasets: GBs in all by
# the end of the run otherwise); a failed test's stays for a look.
"$venv/bin/python" -m pytest python/tests -p no:cacheprovider -o tmp_path_retention_policy=failed "$@"
status=$?
set -e
if [[ $status -eq 5 ]]; then
    echo "error: pytest collected no tests from python/tests (exit 5): the Python tests are missing" >&2
    exit 1
fi
exit $status
