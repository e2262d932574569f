#!/usr/bin/env bash
# Live acquisition benchmark (docs/benchmarks.md#live-acquisition), release build, all on
# 127.0.0.1: for each simulator, first the simulator alone (a receiver that only drains
# the socket), then `udf-host live` with sum + sumsig + com and with the wasm sum plugin,
# the simulator unpaced: the rate udf-host sustains (the simulator being faster alone,
# back-pressure holds it to udf-host's pace; nothing is dropped). Frames 256 x 256 uint16
# (a Merlin single chip), 2 GiB per Merlin scan, 1 GiB per DECTRIS series.
# Usage: scripts/bench-live.sh   (datasets in $UDF_BENCH_DIR, default /tmp, 4 GiB)
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-$PWD/target}
echo "==> building (release)" >&2
cargo build --quiet --release -p udf-host
host="$target/release/udf-host"
# The wasm sum plugin as the tests build it (tests/build.rs, release), else built here.
plugin="$target/wasm-plugins/wasm32-wasip2/release/sum.wasm"
if [[ ! -f $plugin ]]; then
    cargo build --quiet --release --target wasm32-wasip2 -p udf-plugin-sum
    plugin="$target/wasm32-wasip2/release/sum.wasm"
fi
dir=${UDF_BENCH_DIR:-/tmp}/udf-live-bench
mkdir -p "$dir"
py=${PYTHON:-python3}

if [[ ! -f $dir/scan.mib ]]; then
    echo "==> writing $dir/scan.mib (128 x 128 frames of 256 x 256 U16)" >&2
    "$host" generate "$dir/scan.raw" --dtype '>u2' --nav-shape 128,128 --sig-shape 256,256 >/dev/null 2>&1
    python3 - "$dir/scan.raw" "$dir/scan.mib" <<'PY'
import sys
src, dst = sys.argv[1], sys.argv[2]
frame = 256 * 256 * 2
with open(src, "rb") as f, open(dst, "wb") as out:
    i = 0
    while chunk := f.read(frame):
        i += 1
        h = f"MQ1,{i:06d},00384,01,0256,0256,U16,   1x1,01,2020-05-18 16:51:49.971626,0.000555,0,0,0,1.2E+2,5.1E+2,MQ1A,2020-05-18T14:51:49.971626178Z,555000ns,12,"
        out.write(h.encode().ljust(384, b"\0"))
        out.write(chunk)
PY
    rm "$dir/scan.raw"
    "$host" generate "$dir/series.npy" --dtype uint16 --nav-shape 64,128 --sig-shape 256,256 >/dev/null 2>&1
fi

# Start a simulator on a free port; sets $sim_pid and $port.
start_sim() {
    local log="$dir/sim.log"
    "$host" simulate "$@" --port 0 --acquisitions 1 2>"$log" &
    sim_pid=$!
    for _ in $(seq 100); do
        port=$(grep -o '127.0.0.1:[0-9]*' "$log" | head -1 | cut -d: -f2 || true)
        [[ -n $port ]] && return
        sleep 0.2
    done
    echo "the simulator did not start: $(cat "$log")" >&2
    exit 1
}

report() { # label, results dir
    "$py" - "$1" "$2/results.json" <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
live = json.load(open(path))["live"]
frames, seconds = live["frames_received"], live["seconds"]
gb = frames * 256 * 256 * 2 / 1e9
print(f"| {label} | {gb / seconds:.2f} GB/s | {frames / seconds:.0f} | {live['bytes_received'] / seconds / 1e9:.2f} GB/s | "
      f"{live['buffer']['back_pressure_waits']} ({live['buffer']['back_pressure_seconds']:.1f} s) | {frames == live['frames_expected']} |")
PY
}

# The same UDFs over the same file, offline: the processing ceiling under the same load.
offline() { # label, file, udfs...
    local label=$1 file=$2
    shift 2
    rm -rf "$dir/out"
    "$host" run "$@" "$file" --out "$dir/out" -q
    "$py" - "$label" "$dir/out/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
frames, seconds = r["frames"], r["timings"]["process_seconds"]
print(f"| {sys.argv[1]} (offline, the file) | {frames * 131072 / seconds / 1e9:.2f} GB/s | {frames / seconds:.0f} | | | |")
PY
}

echo
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| run | frames (GB/s, uint16) | frames/s | on the wire | back-pressure waits | all frames |"
echo "|---|---|---|---|---|---|"
# Merlin: the simulator alone, drained by cat.
start_sim merlin "$dir/scan.mib" --nav-shape 128,128
cat </dev/tcp/127.0.0.1/"$port" >/dev/null
wait "$sim_pid"
grep sent "$dir/sim.log" | sed 's/^/| merlin simulator alone: /; s/$/ | | | | |/'
offline "merlin: sum sumsig com" "$dir/scan.mib" builtin:sum builtin:sumsig builtin:com --nav-shape 128,128
for udfs in "builtin:sum builtin:sumsig builtin:com" "$plugin"; do
    start_sim merlin "$dir/scan.mib" --nav-shape 128,128
    rm -rf "$dir/out"
    "$host" live merlin://127.0.0.1:"$port" $udfs --nav-shape 128,128 --out "$dir/out" -q
    wait "$sim_pid"
    report "merlin: $(basename -a $udfs | tr '\n' ' ')" "$dir/out"
done
# DECTRIS: the simulator alone, drained by pyzmq (from $PYTHON, if it has it).
if "$py" -c "import zmq" 2>/dev/null; then
    start_sim dectris "$dir/series.npy"
    "$py" - "$port" <<'PY'
import sys, time, zmq
s = zmq.Context().socket(zmq.PULL)
s.connect(f"tcp://127.0.0.1:{sys.argv[1]}")
n = nbytes = 0
t0 = None
while True:
    m = s.recv(copy=False)
    t0 = t0 or time.perf_counter()
    nbytes += len(m)
    n += 1
    if n == 8194:  # start + 8192 images + end
        break
dt = time.perf_counter() - t0
print(f"| dectris simulator alone (pyzmq drain) | {8192 * 131072 / dt / 1e9:.2f} GB/s | {8192 / dt:.0f} | {nbytes / dt / 1e9:.2f} GB/s | | |")
PY
    kill "$sim_pid" 2>/dev/null || true
    wait "$sim_pid" 2>/dev/null || true
fi
for udfs in "builtin:sum builtin:sumsig builtin:com" "$plugin"; do
    start_sim dectris "$dir/series.npy"
    rm -rf "$dir/out"
    "$host" live dectris://127.0.0.1:"$port" $udfs --nav-shape 64,128 --out "$dir/out" -q
    kill "$sim_pid" 2>/dev/null || true
    wait "$sim_pid" 2>/dev/null || true
    report "dectris (bslz4): $(basename -a $udfs | tr '\n' ' ')" "$dir/out"
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
