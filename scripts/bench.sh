#!/usr/bin/env bash
# The benchmark suite (docs/benchmarks.md), in a release build:
#   1. throughput of the native built-ins and their wasm twins (default and --trusted)
#      on 2 GiB float32 and 1 GiB uint16 datasets in the page cache, next to memcpy
#      bandwidth measured in the same run (cargo bench --bench builtins);
#   2. fixed costs of the udf-host binary: startup, compile with a cold and a warm
#      cache, a whole warm run on a tiny dataset, thread scaling of compute-bound UDFs.
# Usage: scripts/bench.sh [LABEL...]   (labels filter part 1, e.g. `sum masks16`)
# Run it on a quiet machine (load average < 1). The report is printed and written to
# target/bench/report-<date>.md. Datasets go to $UDF_BENCH_DIR (default /tmp, 3 GiB).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
target=${CARGO_TARGET_DIR:-$PWD/target}
out="$target/bench"
mkdir -p "$out"
report="$out/report-$(date +%Y-%m-%d-%H%M).md"
echo "==> building (release; the first build takes 10-15 minutes on 2 cores)" >&2
cargo build --quiet --release -p udf-host
cargo build --quiet --release --target wasm32-wasip2 -p udf-plugin-sum -p udf-plugin-masks
cargo bench --quiet -p udf-host-tests --bench builtins --no-run
host="$target/release/udf-host"
plugins="$target/wasm32-wasip2/release"

# Seconds of wall time of a command (stdout discarded), best of $2 runs.
best_of() {
    local n=$1
    shift
    python3 - "$n" "$@" <<'EOF'
import subprocess, sys, time
n, cmd = int(sys.argv[1]), sys.argv[2:]
best = float("inf")
for _ in range(n):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    best = min(best, time.perf_counter() - t)
print(f"{best * 1000:.1f} ms")
EOF
}

{
    echo "# udf-host benchmarks, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "Machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1),"
    echo "$(free -g | awk '/Mem:/ {print $2}') GiB RAM; $(uname -sr); $(rustc --version)."
    echo "Command: \`scripts/bench.sh $*\`"
    echo
    echo "## Throughput"
    echo
    cargo bench --quiet -p udf-host-tests --bench builtins -- "$@"
    echo
    echo "## Fixed costs"
    echo
    tiny="$out/tiny.npy"
    "$host" generate "$tiny" --nav-shape 8,8 --sig-shape 64,64 --dtype uint16 >/dev/null
    cache="$out/cache"
    rm -rf "$cache"
    echo "| what | time |"
    echo "|---|---:|"
    echo "| \`udf-host --version\` (process startup) | $(best_of 5 "$host" --version) |"
    echo "| \`udf-host inspect sum.wasm\`, cold cache (compile) | $(best_of 1 "$host" inspect "$plugins/sum.wasm" --cache-dir "$cache") |"
    echo "| \`udf-host inspect sum.wasm\`, warm cache | $(best_of 5 "$host" inspect "$plugins/sum.wasm" --cache-dir "$cache") |"
    echo "| \`udf-host inspect masks.wasm\`, cold cache (compile) | $(best_of 1 "$host" inspect "$plugins/masks.wasm" --cache-dir "$cache") |"
    echo "| \`udf-host run builtin:sum tiny.npy\` (8 × 8 × 64 × 64 uint16) | $(best_of 5 "$host" run builtin:sum "$tiny" --out "$out/tiny-builtin" --force) |"
    echo "| \`udf-host run sum.wasm tiny.npy\`, warm cache | $(best_of 5 "$host" run "$plugins/sum.wasm" "$tiny" --out "$out/tiny-wasm" --force --cache-dir "$cache") |"
    echo
    echo "Where a warm run's time goes (\`results.json\` of the last tiny run, seconds):"
    echo
    python3 -c "import json,sys; t=json.load(open(sys.argv[1]))['timings']; print(', '.join(f'{k} {v:.4f}' for k,v in t.items()))" \
        "$out/tiny-wasm/results.json"
    echo
    echo "## Thread scaling (compute-bound: masks, 16 dense masks, uint16 1 GiB)"
    echo
    masks="$out/masks16.npy"
    python3 - "$masks" <<'EOF'
import struct, sys
# 16 masks of 256 x 256 float32 (.npy written by hand: no NumPy needed).
n, h, w = 16, 256, 256
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d, %d), }" % (n, h, w)
pad = (64 - (10 + len(header) + 1) % 64) % 64
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header) + pad + 1) + header.encode() + b" " * pad + b"\n")
    f.write(struct.pack("<%df" % (n * h * w), *[((i * 7919) % 1000) / 1000 for i in range(n * h * w)]))
EOF
    data="${UDF_BENCH_DIR:-/tmp}/udf-host-bench-uint16.npy"
    echo "| UDF | 1 thread | 2 threads | speed-up | processing only (\`process_seconds\`): 1 → 2 threads | speed-up |"
    echo "|---|---:|---:|---:|---:|---:|"
    for udf in builtin:masks "$plugins/masks.wasm"; do
        # Best of 3 for each thread count, the two taking turns (a busy moment of the
        # machine then hits both alike).
        python3 - "$udf" "$host" run "$udf" "$data" -p "masks=@$masks" --out "$out/scale" --force --cache-dir "$cache" <<'EOF'
import json, os, subprocess, sys, time
udf, cmd = sys.argv[1], sys.argv[2:]
out = cmd[cmd.index("--out") + 1]
best = {1: float("inf"), 2: float("inf")}
processing = dict(best)
for _ in range(3):
    for threads in best:
        t = time.perf_counter()
        subprocess.run(cmd + ["--threads", str(threads)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        best[threads] = min(best[threads], time.perf_counter() - t)
        with open(os.path.join(out, "results.json")) as f:
            processing[threads] = min(processing[threads], json.load(f)["timings"]["process_seconds"])
p1, p2 = processing[1], processing[2]
print(f"| {os.path.basename(udf)} | {best[1] * 1000:.1f} ms | {best[2] * 1000:.1f} ms | {best[1] / best[2]:.2f}x "
      f"| {p1 * 1000:.1f} → {p2 * 1000:.1f} ms | {p1 / p2:.2f}x |")
EOF
    done
} | tee "$report"
echo "==> report: $report" >&2
