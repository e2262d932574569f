#!/usr/bin/env bash
# Build {{name}}.wasm: C bindings of wit/ (wit-bindgen), src/ and the SDK in sdk/ compiled
# with clang for wasm32-wasi, the module wrapped into a component (wasm-tools).
# Tools: clang-{{clang_version}} with wasi-libc, wit-bindgen {{wit_bindgen_version}}, wasm-tools {{wasm_tools_version}} (README.md
# says how to install them); CLANG, WIT_BINDGEN, WASM_TOOLS, WASI_SYSROOT and EXTRA_CFLAGS
# override the defaults.
set -euo pipefail
cd "$(dirname "$0")"
clang=${CLANG:-clang-{{clang_version}}}
wit_bindgen=${WIT_BINDGEN:-wit-bindgen}
wasm_tools=${WASM_TOOLS:-wasm-tools}
for tool in "$clang" "$wit_bindgen" "$wasm_tools"; do
    command -v "$tool" >/dev/null || { echo "error: $tool is not installed (README.md: Toolchain)" >&2; exit 1; }
done
rm -rf gen && mkdir gen
log=$("$wit_bindgen" c wit --world udf-plugin --out-dir gen 2>&1) || { echo "$log" >&2; exit 1; }
# shellcheck disable=SC2086 # EXTRA_CFLAGS: flags, split on spaces
"$clang" --target=wasm32-wasi --sysroot="${WASI_SYSROOT:-/usr}" -O2 -msimd128 -mexec-model=reactor \
    -std=c11 -Wall -Wextra -Wno-unused-parameter ${EXTRA_CFLAGS:-} -I sdk -I gen -Wl,--strip-debug \
    src/*.c sdk/*.c gen/udf_plugin.c gen/udf_plugin_component_type.o -o gen/{{name}}.core.wasm
"$wasm_tools" component new gen/{{name}}.core.wasm -o {{name}}.wasm
echo "built $PWD/{{name}}.wasm"
