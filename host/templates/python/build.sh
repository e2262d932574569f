#!/usr/bin/env bash
# Build {{name}}.wasm with componentize-py: src/app.py and the SDK beside it (src/udf_sdk.py)
# against wit/. Uses COMPONENTIZE_PY (the componentize-py command) if set, otherwise
# componentize-py {{componentize_py_version}} from .venv, installed there with pip on first use.
set -euo pipefail
cd "$(dirname "$0")"
tool=${COMPONENTIZE_PY:-}
if [[ -z $tool ]]; then
    if [[ ! -x .venv/bin/componentize-py ]]; then
        python3 -m venv .venv
        .venv/bin/python -m pip install --quiet --disable-pip-version-check componentize-py=={{componentize_py_version}}
    fi
    tool=.venv/bin/componentize-py
fi
# -p src: where the app module and the SDK are found (componentize-py bundles that folder).
PYTHONDONTWRITEBYTECODE=1 "$tool" -d wit -w udf-plugin componentize -p src app -o {{name}}.wasm >/dev/null
echo "built $PWD/{{name}}.wasm"
