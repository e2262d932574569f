#!/usr/bin/env bash
# Run the GPU kit of scripts/gpu/build.sh on a machine with an NVIDIA GPU and its driver
# (no Rust, no CUDA toolkit needed): the CUDA tests with their --ignored twins (which fail
# where no GPU can be used), then the GPU benchmark. Writes the report (Markdown) to
# target/gpu-kit/kit/report.md, or to the file given as the first argument, and exits non-zero
# if a test failed.
# Environment: UDF_GPU_KIT (default target/gpu-kit/kit), UDF_BENCH_DIR (benchmark datasets,
# default /tmp, 6 GiB), UDF_GPU_BENCH_GIB (float32 dataset size, default 4), SKIP_BENCH=1,
# UDF_GPU_TEST_TIMEOUT / UDF_GPU_BENCH_TIMEOUT (seconds, default 600 / 900), MEMCHECK=1 (one
# small test, MEMCHECK_TEST, under compute-sanitizer's memcheck, where it is installed).
set -uo pipefail
cd "$(dirname "$0")/../.."
kit=${UDF_GPU_KIT:-target/gpu-kit/kit}
report=${1:-$kit/report.md}
[[ -f $kit/all.xz && -f $kit/gpu.xz ]] || { echo "error: no kit in $kit; build it with scripts/gpu/build.sh" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lib" "$work/cache"
# xz, or Python's lzma where the machine has no xz.
unxz() {
    if command -v xz >/dev/null; then xz -dc "$1"; else python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$1"; fi
}
unxz "$kit/all.xz" >"$work/all" && unxz "$kit/gpu.xz" >"$work/gpu" || exit 1
chmod +x "$work/all" "$work/gpu"
for so in "$kit"/lib/*.xz; do
    [[ -e $so ]] && unxz "$so" >"$work/lib/$(basename "$so" .xz)"
done
# NVRTC and cuBLAS (for more than 32 float32 masks) of the kit's CUDA major version: the
# machine's own (a CUDA toolkit, or its Python packages' nvidia/* libraries) where it has
# them, else the kit's NVRTC; the machine's driver is used for everything else.
major=12
[[ $(cat "$kit/feature" 2>/dev/null) == cuda13 ]] && major=13
candidates=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu
    $(find /opt /usr/local /usr/lib -maxdepth 9 -type d -path '*/nvidia/*/lib' 2>/dev/null))
library_dir() {
    local d
    for d in "${candidates[@]}"; do
        [[ -e $d/$1 ]] && { echo "$d"; return; }
    done
}
nvrtc_dir=$(library_dir "libnvrtc.so.$major")
cublas_dir=$(library_dir "libcublas.so.$major")
[[ -n $nvrtc_dir ]] || nvrtc_dir=$work/lib
export LD_LIBRARY_PATH="$nvrtc_dir${cublas_dir:+:$cublas_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
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
    echo "NVRTC: $nvrtc_dir; cuBLAS: ${cublas_dir:-libcublas.so.$major not found here (cudarc also tries the unversioned libcublas.so; without cuBLAS, more than 4 float32 masks run in the one-pass kernel)}"
    echo '```'
    echo
    echo "## Tests: cuda:: with the --ignored twins"
    echo
    echo '```'
} >"$report"
timeout "${UDF_GPU_TEST_TIMEOUT:-600}" "$work/all" --include-ignored --test-threads 2 cuda:: 2>&1 | tee -a "$report"
tests=${PIPESTATUS[0]}
echo '```' >>"$report"
echo >>"$report"
bench=0
if [[ ${SKIP_BENCH:-0} != 1 ]]; then
    timeout "${UDF_GPU_BENCH_TIMEOUT:-900}" env UDF_GPU_REPORT="$work/bench.md" "$work/gpu"
    bench=$?
    ((bench == 124)) && echo "the benchmark ran past UDF_GPU_BENCH_TIMEOUT and was stopped" >>"$report"
    [[ -f $work/bench.md ]] && cat "$work/bench.md" >>"$report"
fi
[[ -d /usr/local/cuda/bin ]] && PATH=$PATH:/usr/local/cuda/bin
memcheck_test=${MEMCHECK_TEST:-a_shipped_plan_keeps_its_devices_on_the_gpu}
if [[ ${MEMCHECK:-0} == 1 ]] && command -v compute-sanitizer >/dev/null; then
    # Out-of-bounds and misaligned accesses that do not crash a run (slow: one small test).
    {
        echo
        echo "## compute-sanitizer memcheck: $memcheck_test"
        echo
        echo '```'
    } >>"$report"
    timeout "${MEMCHECK_TIMEOUT:-180}" compute-sanitizer --tool memcheck --error-exitcode 9 "$work/all" --include-ignored --exact \
        "cuda::$memcheck_test" 2>&1 | tail -40 >>"$report"
    echo "memcheck exit ${PIPESTATUS[0]}" >>"$report"
    echo '```' >>"$report"
fi
echo "report: $report" >&2
if ((tests != 0 || bench != 0)); then
    echo "FAILED: tests exit $tests, benchmark exit $bench" | tee -a "$report" >&2
    exit 1
fi
