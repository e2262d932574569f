#!/usr/bin/env bash
# Build the Python plugins (plugins/polyglot/python/*/app.py) with componentize-py.
# Usage: scripts/polyglot/python.sh [OUT_DIR]   (default target/polyglot/python)
# Installs componentize-py from PyPI into target/polyglot/tools/venv on first use.
source "$(dirname "$0")/common.sh"
out=$(out_dir "${1:-}" python)
venv=$(python_venv "componentize-py==$COMPONENTIZE_PY_VERSION")
for dir in "$ROOT"/plugins/polyglot/python/*/; do
    name=$(basename "$dir")
    if up_to_date "$out/$name.wasm" "$dir" "$ROOT/guest-sdk/python" "$WIT" "$0"; then
        say "python: $name is up to date ($out/$name.wasm)"
        continue
    fi
    say "python: $name -> $out/$name.wasm"
    # -p: where the app module and the SDK (udf_sdk.py) are found.
    (cd "$dir" && PYTHONDONTWRITEBYTECODE=1 "$venv/bin/componentize-py" -d "$WIT" -w udf-plugin componentize \
        -p "$dir" -p "$ROOT/guest-sdk/python" app -o "$out/$name.wasm" >/dev/null)
done
