#!/usr/bin/env bash
# Build udf-host's Python runner (python/runner/: LiberTEM UDF classes, sandboxed) with
# componentize-py against wit/udf.wit's udf-runner world.
# Usage: scripts/polyglot/runner.sh [OUT_FILE]   (default target/polyglot/runner/udf-runner.wasm)
# Also copies it to python/udf_host/udf-runner.wasm (ignored by git), where
# `pip install ./python` puts it into the wheel and udf_host finds it.
source "$(dirname "$0")/common.sh"
out=${1:-"$ROOT/target/polyglot/runner/udf-runner.wasm"}
mkdir -p "$(dirname "$out")"
venv=$(python_venv "componentize-py==$COMPONENTIZE_PY_VERSION")
# One module each from the Python package and the SDK, staged as top-level modules:
# udf_class (the UDF base class), xp (host arrays; it finds xp_backend beside it).
stage="$ROOT/target/polyglot/stage/python-runner"
rm -rf "$stage" && mkdir -p "$stage"
cp "$ROOT/python/udf_host/xp.py" "$ROOT/python/udf_host/udf_class.py" "$stage/"
inputs=("$ROOT/python/runner" "$ROOT/guest-sdk/python" "$ROOT/python/udf_host/xp.py" "$ROOT/python/udf_host/udf_class.py" "$WIT" "$0")
if up_to_date "$out" "${inputs[@]}"; then
    say "runner is up to date ($out)"
else
    say "runner -> $out"
    (cd "$ROOT/python/runner" && PYTHONDONTWRITEBYTECODE=1 "$venv/bin/componentize-py" -d "$WIT" -w udf-runner componentize \
        -p "$ROOT/python/runner" -p "$ROOT/guest-sdk/python" -p "$stage" app -o "$out" >/dev/null)
fi
cp "$out" "$ROOT/python/udf_host/udf-runner.wasm"
