#!/usr/bin/env bash
# Test {{name}}.wasm (build it first: ./build.sh): run it on a small generated scan, then run
# the conformance kit on it. Uses udf-host from the PATH, or UDF_HOST. Exit code 0: all passed.
set -euo pipefail
cd "$(dirname "$0")"
udf_host=${UDF_HOST:-udf-host}
[[ -f {{name}}.wasm ]] || { echo "error: {{name}}.wasm is missing: run ./build.sh first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$udf_host" generate "$tmp/scan.npy" --nav-shape 8,8 --sig-shape 16,16 --dtype uint16
{{prepare}}"$udf_host" run {{name}}.wasm "$tmp/scan.npy" --out "$tmp/results"{{params}}
"$udf_host" conformance {{name}}.wasm{{params}}
echo "{{name}}.wasm passed"
