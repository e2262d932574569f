#!/usr/bin/env bash
# Build {{name}}.wasm: C bindings of wit/ (wit-bindgen), src/plugin.zig with the SDK in sdk/
# (udf.zig on the C SDK, which Zig compiles itself) for wasm32-wasi, the module wrapped into
# a component (wasm-tools).
# Tools: Zig {{zig_version}}, wit-bindgen {{wit_bindgen_version}}, wasm-tools {{wasm_tools_version}} (README.md says how to install
# them); ZIG (a command, e.g. "python3 -m ziglang"), WIT_BINDGEN and WASM_TOOLS override the defaults.
set -euo pipefail
cd "$(dirname "$0")"
read -ra zig <<<"${ZIG:-zig}"
wit_bindgen=${WIT_BINDGEN:-wit-bindgen}
wasm_tools=${WASM_TOOLS:-wasm-tools}
for tool in "${zig[0]}" "$wit_bindgen" "$wasm_tools"; do
    command -v "$tool" >/dev/null || { echo "error: $tool is not installed (README.md: Toolchain)" >&2; exit 1; }
done
rm -rf gen && mkdir gen
log=$("$wit_bindgen" c wit --world udf-plugin --out-dir gen 2>&1) || { echo "$log" >&2; exit 1; }
"${zig[@]}" build-exe -target wasm32-wasi -mcpu=generic+simd128 -O ReleaseFast -fno-entry -mexec-model=reactor \
    -rdynamic -fstrip --name {{crate}} -femit-bin=gen/{{name}}.core.wasm --dep udf -Mroot=src/plugin.zig \
    -I sdk -I gen -cflags -std=c11 -O2 -- sdk/*.c gen/udf_plugin.c gen/udf_plugin_component_type.o -lc \
    -Mudf=sdk/udf.zig
"$wasm_tools" component new gen/{{name}}.core.wasm -o {{name}}.wasm
echo "built $PWD/{{name}}.wasm"
