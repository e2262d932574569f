#!/usr/bin/env bash
# Build the GPU test and benchmark kit here (no GPU needed; docs/gpu.md):
#   - the integration test binary (tests/all) and the GPU benchmark (tests/benches/gpu.rs),
#     built with `--features cuda` in the `gpu-kit` profile (optimised, stripped);
#   - the wasm plugin the CUDA tests run beside the GPU built-ins (sum.wasm);
#   - NVRTC from the `nvidia-cuda-nvrtc-cu12` wheel, for GPU machines without a CUDA toolkit
#     (the driver alone is enough then);
# into target/gpu-kit/kit/, xz-compressed (about 40-60 MiB). Then, on the GPU machine, from a
# copy of this repository with target/gpu-kit/kit/ in it: scripts/gpu/run.sh (no Rust
# needed there). The first build takes 20-30 minutes on 2 cores (a release build of
# wasmtime and the tests).
# Usage: scripts/gpu/build.sh   (UDF_GPU_FEATURE=cuda13 for CUDA 13 drivers; UDF_GPU_NVRTC=0
#        leaves NVRTC out, for GPU machines with a CUDA toolkit)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/polyglot/common.sh   # say, die, python_venv
scripts/setup.sh
feature=${UDF_GPU_FEATURE:-cuda}
case $feature in
    cuda) nvrtc_wheel=nvidia-cuda-nvrtc-cu12==12.9.86 nvrtc_dir='*nvidia/cuda_nvrtc/lib' nvrtc_so=12 ;;
    cuda13) nvrtc_wheel=nvidia-cuda-nvrtc==13.5.37 nvrtc_dir='*nvidia/cu13/lib' nvrtc_so=13 ;;
    *) die "UDF_GPU_FEATURE must be cuda or cuda13, not '$feature'" ;;
esac
command -v xz >/dev/null || apt_install xz-utils
target=${CARGO_TARGET_DIR:-$PWD/target}
# The kit goes beside the profile's own build output (target/gpu-kit/), which stays, so
# that a rebuild is incremental.
kit="$target/gpu-kit/kit"
rm -rf "$kit"
mkdir -p "$kit/plugins" "$kit/lib"

say "building the test binary and the GPU benchmark (--features $feature, profile gpu-kit)"
cargo build --profile gpu-kit -p udf-host-tests --features "$feature" --test all --bench gpu \
    --message-format=json-render-diagnostics >"$kit/build.json"
executable() {
    python3 - "$kit/build.json" "$1" <<'PY'
import json, sys
path, name = sys.argv[1], sys.argv[2]
found = [m["executable"] for m in map(json.loads, open(path))
         if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == name]
if not found:
    sys.exit(f"no executable for {name} in the build output")
print(found[-1])
PY
}
tests=$(executable all)
bench=$(executable gpu)
rm "$kit/build.json"

say "packing the kit"
xz -T0 -6 -c "$tests" >"$kit/all.xz"
xz -T0 -6 -c "$bench" >"$kit/gpu.xz"
cp "$target/wasm-plugins/wasm32-wasip2/release/sum.wasm" "$kit/plugins/"
if [[ ${UDF_GPU_NVRTC:-1} == 1 ]]; then
    # ~30 MiB of the kit: leave it out (UDF_GPU_NVRTC=0) where the GPU machine has CUDA.
    venv=$(python_venv "$nvrtc_wheel")
    nvrtc_lib=$(find "$venv" -type d -path "$nvrtc_dir" | head -1)
    [[ -n $nvrtc_lib && -e $nvrtc_lib/libnvrtc.so.$nvrtc_so ]] || die "no libnvrtc.so.$nvrtc_so in the $nvrtc_wheel wheel"
    for so in "$nvrtc_lib/libnvrtc.so.$nvrtc_so" "$nvrtc_lib/libnvrtc-builtins.so.$nvrtc_so".*; do
        xz -T0 -6 -c "$so" >"$kit/lib/$(basename "$so").xz"
    done
fi
git rev-parse HEAD >"$kit/commit" 2>/dev/null || true
echo "$feature" >"$kit/feature"
du -sh "$kit"
say "done: carry target/gpu-kit/kit to the GPU machine and run scripts/gpu/run.sh there"
