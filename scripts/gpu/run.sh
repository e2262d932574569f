#!/usr/bin/env bash
# Run the GPU kit of scripts/gpu/build.sh on a machine with an NVIDIA GPU and its driver
# (no Rust, no CUDA toolkit needed): the CUDA tests with their --ignored twins (which fail
# where no GPU can be used), then the GPU benchmark. Writes the report (Markdown) to
# target/gpu-kit/report.md, or to the file given as the first argument, and exits non-zero
# if a test failed.
# Environment: UDF_GPU_KIT (default target/gpu-kit), UDF_BENCH_DIR (benchmark datasets,
# default /tmp, 6 GiB), UDF_GPU_BENCH_GIB (float32 dataset size, default 4), SKIP_BENCH=1.
set -uo pipefail
cd "$(dirname "$0")/../.."
kit=${UDF_GPU_KIT:-target/gpu-kit}
report=${1:-$kit/report.md}
[[ -f $kit/all.xz && -f $kit/gpu.xz ]] || { echo "error: no kit in $kit; build it with scripts/gpu/build.sh" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lib" "$work/cache"
xz -dc "$kit/all.xz" >"$work/all" && xz -dc "$kit/gpu.xz" >"$work/gpu" || exit 1
chmod +x "$work/all" "$work/gpu"
for so in "$kit"/lib/*.xz; do
    [[ -e $so ]] && xz -dc "$so" >"$work/lib/$(basename "$so" .xz)"
done
# NVRTC from the kit (the machine's own driver is used for everything else).
export LD_LIBRARY_PATH="$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UDF_PLUGIN_DIR="$kit/plugins" UDF_TEST_CACHE_DIR="$work/cache"
export UDF_PLUGIN_DIR="$(cd "$UDF_PLUGIN_DIR" && pwd)"

{
    echo "# GPU kit run, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "kit: commit $(cat "$kit/commit" 2>/dev/null || echo '?'), feature $(cat "$kit/feature" 2>/dev/null || echo '?')"
    echo
    echo '```'
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max --format=csv 2>&1
    else
        echo "nvidia-smi: not available"
    fi
    echo '```'
    echo
    echo "## Tests: cuda:: with the --ignored twins"
    echo
    echo '```'
} >"$report"
"$work/all" --include-ignored --test-threads 2 cuda:: 2>&1 | tee -a "$report"
tests=${PIPESTATUS[0]}
echo '```' >>"$report"
echo >>"$report"
bench=0
if [[ ${SKIP_BENCH:-0} != 1 ]]; then
    UDF_GPU_REPORT="$work/bench.md" "$work/gpu"
    bench=$?
    [[ -f $work/bench.md ]] && cat "$work/bench.md" >>"$report"
fi
echo "report: $report" >&2
if ((tests != 0 || bench != 0)); then
    echo "FAILED: tests exit $tests, benchmark exit $bench" | tee -a "$report" >&2
    exit 1
fi
