#!/usr/bin/env bash
# Set up, build, generate a sample 4D-STEM dataset, and run the sum and sumsig plugins
# over it with PNG previews. Results go to sample/results/ (open index.html).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "==> building udf-host and the plugins (a first build takes a few minutes)"
cargo build -p udf-host
cargo build --release --target wasm32-wasip2 -p udf-plugin-sum -p udf-plugin-sumsig
plugins=target/wasm32-wasip2/release
mkdir -p sample
echo "==> generating sample/scan.npy (32 x 32 scan of 64 x 64 uint16 frames)"
target/debug/udf-host generate sample/scan.npy --nav-shape 32,32 --sig-shape 64,64 --dtype uint16
echo "==> running sum and sumsig (with previews)"
target/debug/udf-host run "$plugins/sum.wasm" "$plugins/sumsig.wasm" sample/scan.npy --out sample/results --force -v --preview
echo
echo "Done. sample/results/sum/intensity.npy is the sum of all frames (64 x 64),"
echo "sample/results/sumsig/intensity.npy the total of each frame (32 x 32 image),"
echo "each with a PNG preview beside it (intensity.png), and results.json says what ran."
echo "Open sample/results/index.html in a browser for all of it on one page."
echo
echo "This demo used a quick debug build (target/debug/udf-host), which reads data about ten"
echo "times slower than a release build. For real data, install the release binary:"
echo "  cargo install --path host --locked    # -> ~/.cargo/bin/udf-host; see README.md, Install"
