#!/usr/bin/env bash
# LiberTEM UDF classes in plain NumPy, udf-host (release) against LiberTEM 0.16 on this
# machine (issue 27): builds the runner and the release wheel, makes a venv with LiberTEM
# 0.16 (target/bench-venv; about 4 minutes and 1 GB the first time) and runs
# python/benchmarks/libertem_classes.py (extra arguments go to it: --rounds, --dir,
# --executors, --nav). Writes its datasets (1.5 GiB) to --dir (default: $TMPDIR or /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/bench-venv
if [[ ! -x $venv/bin/python ]]; then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
fi
"$venv/bin/python" -m pip install --quiet "maturin>=1.16,<2" "numpy>=1.23" "libertem==0.16.0" "distributed==2026.8.0"
scripts/polyglot/runner.sh
# The runner just built (the benchmark's fresh processes use empty compile caches).
export UDF_HOST_RUNNER="$PWD/target/polyglot/runner/udf-runner.wasm"
echo "==> building the udf_host wheel (release) into $venv"
rm -rf target/wheels-release
(cd python && "../$venv/bin/maturin" build --quiet --release -o ../target/wheels-release)
"$venv/bin/python" -m pip install --quiet --force-reinstall --no-deps target/wheels-release/udf_host-*.whl
echo "==> load average: $(cat /proc/loadavg)"
exec "$venv/bin/python" python/benchmarks/libertem_classes.py "$@"
