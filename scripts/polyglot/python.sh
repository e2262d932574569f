#!/usr/bin/env bash
# Build the Python plugins (plugins/polyglot/python/*/app.py) with componentize-py.
# Usage: scripts/polyglot/python.sh [OUT_DIR]   (default target/polyglot/python)
# Installs componentize-py from PyPI into target/polyglot/tools/venv on first use.
source "$(dirname "$0")/common.sh"
out=$(out_dir "${1:-}" python)
venv=$(python_venv "componentize-py==$COMPONENTIZE_PY_VERSION")
# `xp` (python/udf_host/xp.py, the NumPy-like namespace of host arrays) is one file for
# both places: here it is staged as a top-level module beside the SDK, where it finds
# guest-sdk/python/xp_backend.py instead of udf_host._native.
xp_stage="$ROOT/target/polyglot/stage/python-xp"
mkdir -p "$xp_stage"
cp "$ROOT/python/udf_host/xp.py" "$xp_stage/xp.py"
for dir in "$ROOT"/plugins/polyglot/python/*/; do
    name=$(basename "$dir")
    if up_to_date "$out/$name.wasm" "$dir" "$ROOT/guest-sdk/python" "$ROOT/python/udf_host/xp.py" "$WIT" "$0"; then
        say "python: $name is up to date ($out/$name.wasm)"
        continue
    fi
    say "python: $name -> $out/$name.wasm"
    # -p: where the app module, the SDK (udf_sdk.py, xp_backend.py) and xp are found.
    (cd "$dir" && PYTHONDONTWRITEBYTECODE=1 "$venv/bin/componentize-py" -d "$WIT" -w udf-plugin componentize \
        -p "$dir" -p "$ROOT/guest-sdk/python" -p "$xp_stage" app -o "$out/$name.wasm" >/dev/null)
done
