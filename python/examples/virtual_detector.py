"""A virtual detector on a generated 4D-STEM scan, the way a notebook would do it.

    python python/examples/virtual_detector.py [PLUGIN.wasm]

Generates a scan (a bright disk that moves with the scan position), runs a ring detector
(a native built-in) and a wasm plugin (default: the repository's `sumsig` plugin, built by
`cargo test` or `scripts/demo.sh`) in one pass over the data, and shows the virtual image
with matplotlib if it is installed — else writes the previews udf-host draws itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import udf_host

ROOT = Path(__file__).resolve().parents[2]


def generate_scan(ny=32, nx=32, sy=64, sx=64, seed=0) -> np.ndarray:
    """uint16 frames: Poisson background plus a disk whose centre follows the scan (a CoM
    shift that grows to the right and downwards)."""
    rng = np.random.default_rng(seed)
    frames = rng.poisson(2.0, size=(ny, nx, sy, sx)).astype(np.uint16)
    yy, xx = np.mgrid[:sy, :sx]
    for y in range(ny):
        for x in range(nx):
            cy, cx = sy / 2 + 4 * y / ny, sx / 2 + 4 * x / nx
            frames[y, x][(yy - cy) ** 2 + (xx - cx) ** 2 < 10**2] += 50
    return frames


def main() -> None:
    plugin = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "target/wasm-plugins/wasm32-wasip2/release/sumsig.wasm"
    if not plugin.exists():
        sys.exit(f"{plugin} not found: build the plugins first (scripts/demo.sh), or give a .wasm file")

    ctx = udf_host.Context()
    ds = ctx.load("memory", data=generate_scan(), sig_dims=2)
    print(ds)

    ring = udf_host.BuiltinUDF("ring", cx=32.0, cy=32.0, ri=8.0, ro=14.0)
    total = udf_host.WasmUDF(plugin)
    ring_result, total_result = ctx.run_udf(dataset=ds, udf=[ring, total], progress=True)

    image = ring_result["intensity"].data
    print(f"ring image {image.shape}, {image.min():.0f} .. {image.max():.0f}")
    print(f"total intensity {total_result['intensity'].data.shape}, mean {total_result['intensity'].data.mean():.0f}")

    try:
        import matplotlib.pyplot as plt
    except ImportError:
        for name, buffer in [("ring.png", ring_result["intensity"]), ("total.png", total_result["intensity"])]:
            Path(name).write_bytes(buffer.preview())
            print(f"matplotlib is not installed: wrote the preview {name}")
        return
    fig, (a, b) = plt.subplots(1, 2, figsize=(8, 4))
    a.imshow(image, cmap="viridis")
    a.set_title("ring detector")
    b.imshow(total_result["intensity"].data, cmap="viridis")
    b.set_title(f"{total_result['intensity'].name} ({plugin.name})")
    plt.show()


if __name__ == "__main__":
    main()
