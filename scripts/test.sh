#!/usr/bin/env bash
# Run every test: installs the wasm targets, builds the plugins and probes (tests/build.rs)
# and runs the unit, integration and doc tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo test "$@"
