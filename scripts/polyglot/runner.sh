#!/usr/bin/env bash
# Build udf-host's Python runner (python/udf_host/_runner/: LiberTEM UDF classes, sandboxed)
# with componentize-py, as the Python package builds it on first use
# (python/udf_host/_runner/build.py), and put it into the user's cache, where udf_host
# finds it (`pip install ./python` then needs no build on first use).
# Usage: scripts/polyglot/runner.sh [OUT_FILE]   (default target/polyglot/runner/udf-runner.wasm)
source "$(dirname "$0")/common.sh"
out=${1:-"$ROOT/target/polyglot/runner/udf-runner.wasm"}
mkdir -p "$(dirname "$out")"
venv=$(python_venv "componentize-py==$COMPONENTIZE_PY_VERSION")
sources="$ROOT/python/udf_host/_runner"
inputs=("$sources" "$ROOT/guest-sdk/python" "$ROOT/python/udf_host/xp.py" "$ROOT/python/udf_host/udf_class.py" "$WIT" "$0")
if up_to_date "$out" "${inputs[@]}"; then
    say "runner is up to date ($out)"
else
    say "runner -> $out"
    "$venv/bin/python" "$sources/build.py" --out "$out"
fi
"$venv/bin/python" "$sources/build.py" --store "$out" >/dev/null
