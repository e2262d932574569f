#!/usr/bin/env bash
# Build the JavaScript plugins (plugins/polyglot/js/<name>/<name>.js) with componentize-js.
# Usage: scripts/polyglot/js.sh [OUT_DIR]   (default target/polyglot/js)
# Installs @bytecodealliance/componentize-js from npm (versions pinned by
# scripts/polyglot/js-toolchain/package-lock.json) into target/polyglot/tools/js.
source "$(dirname "$0")/common.sh"
out=$(out_dir "${1:-}" js)
tool="$TOOLS/js"
if ! cmp -s "$ROOT/scripts/polyglot/js-toolchain/package-lock.json" "$tool/package-lock.json" \
    || [[ ! -d "$tool/node_modules" ]]; then
    say "npm install componentize-js (pinned by the lockfile)"
    mkdir -p "$tool"
    cp "$ROOT"/scripts/polyglot/js-toolchain/package{,-lock}.json "$tool/"
    (cd "$tool" && npm install --no-audit --no-fund --loglevel=error)
    cp "$ROOT/scripts/polyglot/js-toolchain/package-lock.json" "$tool/package-lock.json"
fi
cli="$tool/node_modules/@bytecodealliance/componentize-js/src/cli.js"
# componentize-js's CLI without FinalizationRegistry in the bindings (host arrays; see its
# comment).
wrapper="$ROOT/scripts/polyglot/js-toolchain/componentize.mjs"
stage="$ROOT/target/polyglot/stage/js"
for dir in "$ROOT"/plugins/polyglot/js/*/; do
    name=$(basename "$dir")
    if up_to_date "$out/$name.wasm" "$dir" "$ROOT/guest-sdk/js" "$WIT" "$0" "$tool/package-lock.json" "$wrapper"; then
        say "js: $name is up to date ($out/$name.wasm)"
        continue
    fi
    say "js: $name -> $out/$name.wasm"
    # componentize-js maps the source's directory as the module root: stage the plugin
    # beside the SDK it imports ('./udf-sdk.js', './xp.js') and run from there.
    rm -rf "${stage:?}/$name" && mkdir -p "$stage/$name"
    cp "$dir/$name.js" "$ROOT/guest-sdk/js/udf-sdk.js" "$ROOT/guest-sdk/js/xp.js" "$stage/$name/"
    # -d: no WASI features (stdio, random, clocks, http): the component imports only the
    # host's log function.
    (cd "$stage/$name" && node "$wrapper" "$cli" "$name.js" -w "$WIT" -n udf-plugin \
        -d stdio random clocks http fetch-event -o "$out/$name.wasm")
done
