#!/usr/bin/env bash
# Build {{name}}.wasm with componentize-js: src/plugin.js and the SDK beside it
# (src/udf-sdk.js) against wit/. Uses COMPONENTIZE_JS (the absolute path of componentize-js's
# src/cli.js) if set, otherwise the version package-lock.json pins, installed into
# node_modules with npm on first use. Needs Node.js and npm.
set -euo pipefail
cd "$(dirname "$0")"
tool=${COMPONENTIZE_JS:-}
if [[ -z $tool ]]; then
    [[ -d node_modules/@bytecodealliance/componentize-js ]] || npm install --no-audit --no-fund --loglevel=error
    tool=$PWD/node_modules/@bytecodealliance/componentize-js/src/cli.js
fi
wit=$PWD/wit out=$PWD/{{name}}.wasm
# componentize-js maps the plugin's folder as the module root (imports cannot leave src/);
# -d leaves out every WASI feature: the component imports only the host's log function.
# componentize.mjs runs componentize-js without FinalizationRegistry in the bindings, so
# host arrays (src/xp.js) leave no garbage in the JavaScript heap (see its comment).
(cd src && node ../componentize.mjs "$tool" plugin.js -w "$wit" -n udf-plugin -d stdio random clocks http fetch-event -o "$out")
echo "built $out"
