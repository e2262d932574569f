"""Write the ~1 GiB HDF5 files of the formats benchmark (tests/benches/formats.rs, `stored`).

    python tests/benches/formats_hdf5.py DIR      # needs h5py, hdf5plugin, numpy

Three files of the same data, 32768 frames of 128 x 128 uint16 (1 GiB), Poisson counts
(mean 0.5, like a sparse 4D-STEM scan): contiguous, gzip (level 1, one frame per chunk)
and bitshuffle-LZ4 (one frame per chunk, as DECTRIS writes).
"""

import os
import sys

import h5py
import hdf5plugin
import numpy as np

NAV = (128, 256)
SIG = (128, 128)


def main(out):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    data = rng.poisson(0.5, size=NAV + SIG).astype("<u2")
    variants = {
        "contiguous": {},
        "gzip": dict(chunks=(1, 1) + SIG, compression="gzip", compression_opts=1),
        "bslz4": dict(chunks=(1, 1) + SIG, **hdf5plugin.Bitshuffle(nelems=0, cname="lz4")),
    }
    for name, kwargs in variants.items():
        path = os.path.join(out, f"bench-{name}.h5")
        if os.path.exists(path):
            continue
        with h5py.File(path + ".part", "w") as f:
            f.create_dataset("/entry/data/data", data=data, **kwargs)
        os.rename(path + ".part", path)
        print(path, os.path.getsize(path))


if __name__ == "__main__":
    main(sys.argv[1])
