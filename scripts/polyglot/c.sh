#!/usr/bin/env bash
# Build the C plugins (plugins/polyglot/c/<name>/*.c) with clang and the C SDK.
# Usage: scripts/polyglot/c.sh [OUT_DIR]   (default target/polyglot/c)
# Installs Debian's clang-19, lld-19, libclang-rt-19-dev-wasm32 and wasi-libc (apt) and
# cargo-installs wit-bindgen-cli and wasm-tools into target/polyglot/tools on first use.
source "$(dirname "$0")/common.sh"
out=$(out_dir "${1:-}" c)
apt_install "clang-$CLANG_VERSION" "lld-$CLANG_VERSION" "libclang-rt-$CLANG_VERSION-dev-wasm32" wasi-libc
gen="$ROOT/target/polyglot/stage/c-bindings"
generate_c_bindings "$gen"
for dir in "$ROOT"/plugins/polyglot/c/*/; do
    name=$(basename "$dir")
    say "c: $name -> $out/$name.wasm"
    core="$ROOT/target/polyglot/stage/c-$name.core.wasm"
    compile_c "$core" "$dir"/*.c
    wasm_tools component new "$core" -o "$out/$name.wasm"
done
