#!/usr/bin/env bash
# Build the Zig plugins (plugins/polyglot/zig/<name>/<name>.zig) with the Zig SDK, which
# compiles the C SDK and the C bindings with Zig's own clang.
# Usage: scripts/polyglot/zig.sh [OUT_DIR]   (default target/polyglot/zig)
# Installs Zig from PyPI (ziglang) into target/polyglot/tools/venv and cargo-installs
# wit-bindgen-cli and wasm-tools into target/polyglot/tools on first use.
source "$(dirname "$0")/common.sh"
out=$(out_dir "${1:-}" zig)
venv=$(python_venv "ziglang==$ZIG_VERSION")
zig() { "$venv/bin/python" -m ziglang "$@"; }
gen="$ROOT/target/polyglot/stage/zig-bindings"
generate_c_bindings "$gen"
# Zig's caches (inside target/, not the user's home).
export ZIG_GLOBAL_CACHE_DIR="$TOOLS/zig-cache" ZIG_LOCAL_CACHE_DIR="$TOOLS/zig-cache"
for dir in "$ROOT"/plugins/polyglot/zig/*/; do
    name=$(basename "$dir")
    say "zig: $name -> $out/$name.wasm"
    core="$ROOT/target/polyglot/stage/zig-$name.core.wasm"
    (cd "$dir" && zig build-exe -target wasm32-wasi -mcpu=generic+simd128 -O ReleaseFast -fno-entry -mexec-model=reactor -rdynamic \
        -fstrip --name "$name" -femit-bin="$core" \
        --dep udf -Mroot="$dir/$name.zig" \
        -I "$ROOT/guest-sdk/c" -I "$gen" -cflags -std=c11 -O2 -- "$ROOT"/guest-sdk/c/*.c "$gen/udf_plugin.c" \
        "$gen/udf_plugin_component_type.o" -lc -Mudf="$ROOT/guest-sdk/zig/udf.zig")
    wasm_tools component new "$core" -o "$out/$name.wasm"
done
