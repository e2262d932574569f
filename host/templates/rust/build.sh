#!/usr/bin/env bash
# Build {{name}}.wasm: the crate for wasm32-wasip2, release, copied into this folder.
set -euo pipefail
cd "$(dirname "$0")"
if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx wasm32-wasip2; then
    rustup target add wasm32-wasip2
fi
cargo build --release
cp "${CARGO_TARGET_DIR:-target}/wasm32-wasip2/release/{{crate}}.wasm" {{name}}.wasm
echo "built $PWD/{{name}}.wasm"
