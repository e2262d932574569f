#!/usr/bin/env bash
# Install what building udf-host and its plugins needs beyond a Rust toolchain:
# the WebAssembly targets. Safe to run again.
set -euo pipefail
command -v cargo >/dev/null || { echo "error: cargo not found; install Rust 1.95 (https://rustup.rs)" >&2; exit 1; }
rustup target add wasm32-wasip2 wasm32-unknown-unknown
