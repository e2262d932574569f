#!/usr/bin/env bash
# Benchmark the `sum` plugin of every language (Rust, C, Zig, Python, JavaScript): GB/s
# over a generated float32 dataset and the compile time of the component, cold (empty
# cache) and warm (from the cache), with the release build of udf-host.
# Usage: scripts/polyglot/bench.sh [NAV_Y,NAV_X [SIG_Y,SIG_X]]   (default 32,32 256,256: 256 MiB)
# Needs the plugins built: scripts/polyglot/fixtures.sh (C, Zig, committed),
# scripts/polyglot/{python,js}.sh, and the Rust plugins (cargo build below).
source "$(dirname "$0")/common.sh"
nav=${1:-32,32}
sig=${2:-256,256}
cd "$ROOT"
cargo build --quiet --release -p udf-host
cargo build --quiet --release --target wasm32-wasip2 -p udf-plugin-sum
target=${CARGO_TARGET_DIR:-$ROOT/target}
host="$target/release/udf-host"
bench="$ROOT/target/polyglot/bench"
mkdir -p "$bench"
data="$bench/scan-$nav-$sig.npy"
[[ -f $data ]] || "$host" generate "$data" --nav-shape "$nav" --sig-shape "$sig" --dtype float32 >/dev/null
bytes=$(stat -c %s "$data")
component() {
    case $1 in
    rust) echo "$target/wasm32-wasip2/release/sum.wasm" ;;
    c | zig) echo "$ROOT/tests/fixtures/polyglot/$1/sum.wasm" ;;
    *) echo "$ROOT/target/polyglot/$1/sum.wasm" ;;
    esac
}
seconds() { python3 -c "import sys, time; t = time.perf_counter(); import subprocess; subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); print(f'{time.perf_counter() - t:.3f}')" "$@"; }
echo "dataset: $data ($nav x $sig float32, $((bytes / 1048576)) MiB), $(nproc) cores, udf-host $host"
echo
echo "| language | component size | compile cold (inspect) | warm (inspect) | sum GB/s (run, process time) | run wall |"
echo "|---|---|---|---|---|---|"
for lang in rust c zig python js; do
    wasm=$(component "$lang")
    [[ -f $wasm ]] || { echo "| $lang | missing: $wasm | | | | |"; continue; }
    cache="$bench/cache-$lang"
    rm -rf "$cache"
    cold=$(seconds "$host" inspect "$wasm" --cache-dir "$cache" --compile-timeout 3600)
    warm=$(seconds "$host" inspect "$wasm" --cache-dir "$cache")
    out="$bench/out-$lang"
    wall=$(seconds "$host" run "$wasm" "$data" --cache-dir "$cache" --out "$out" --force -q)
    gbps=$(python3 -c "import json, sys; t = json.load(open(sys.argv[1]))['timings']['process_seconds']; print(f'{int(sys.argv[2]) / t / 1e9:.3f}')" "$out/results.json" "$bytes")
    size=$(($(stat -c %s "$wasm") / 1024))
    echo "| $lang | $size KiB | ${cold} s | ${warm} s | $gbps | ${wall} s |"
done
