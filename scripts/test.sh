#!/usr/bin/env bash
# Run every test: installs the wasm targets, builds the Python and JavaScript plugins of
# plugins/polyglot/ (installing componentize-py and componentize-js from PyPI and npm on
# first use; C and Zig ones are committed as tests/fixtures/polyglot/), builds the Rust
# plugins and probes (tests/build.rs) and runs the unit, integration and doc tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
command -v node >/dev/null && command -v npm >/dev/null || { echo "error: node and npm are needed for the JavaScript plugins (apt-get install nodejs npm)" >&2; exit 1; }
python3 -c "import venv" || { echo "error: python3 with venv is needed for the Python plugins (apt-get install python3-venv)" >&2; exit 1; }
scripts/polyglot/python.sh
scripts/polyglot/js.sh
cargo test "$@"
