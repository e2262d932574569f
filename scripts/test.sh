#!/usr/bin/env bash
# Run every test: installs the wasm targets, builds the Python and JavaScript plugins of
# plugins/polyglot/ (installing componentize-py and componentize-js from PyPI and npm on
# first use; C and Zig ones are committed as tests/fixtures/polyglot/) and the Python
# runner of LiberTEM UDF classes (scripts/polyglot/runner.sh), builds the Rust
# plugins and probes (tests/build.rs), runs the unit, integration and doc tests, then the
# Python package's tests (scripts/python-tests.sh: a venv under target/, the wheel built
# once; UDF_HOST_SKIP_PYTHON=1 skips them).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Node.js for componentize-js, Python's venv for componentize-py, g++: from apt when missing.
source scripts/polyglot/common.sh
{ command -v node && command -v npm; } >/dev/null || apt_install nodejs npm
python3 -c "import venv, ensurepip" 2>/dev/null || apt_install python3-venv
# A C++ compiler for the check that the C SDK's header is valid C++ (tests/all/polyglot.rs).
command -v "${CXX:-c++}" >/dev/null || apt_install g++
scripts/polyglot/python.sh
scripts/polyglot/runner.sh
scripts/polyglot/js.sh
cargo test "$@"
if [[ ${UDF_HOST_SKIP_PYTHON:-0} != 1 ]]; then
    scripts/python-tests.sh
fi
