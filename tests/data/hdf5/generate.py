"""Generate the HDF5 test fixtures of udf-host (run once; the files are committed).

    python -m venv /tmp/h5venv && /tmp/h5venv/bin/pip install h5py hdf5plugin numpy
    /tmp/h5venv/bin/python tests/data/hdf5/generate.py

Every dataset holds `value(i, seed)` at flat C-order index `i`, cast to its dtype; the
Rust tests compute the same formula independently (tests/src/fixture_formats/hdf5.rs)
and compare every element. Written with h5py (libhdf5) and hdf5plugin (bitshuffle),
so the reader is checked against the reference implementation, not our own writer.
"""

import os

import h5py
import hdf5plugin
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def value(shape, seed, dtype):
    """The fixture formula: a hash of the flat index, mapped into the dtype's range."""
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.uint64)
    h = ((i * np.uint64(2654435761) + np.uint64(seed) * np.uint64(40503)) % np.uint64(1 << 32)) >> np.uint64(16)
    h = h.astype(np.int64)  # 0 .. 65535
    dt = np.dtype(dtype)
    if dt.kind == "u":
        v = h % (min(int(np.iinfo(dt).max), 60000) + 1)
    elif dt.kind == "i":
        v = h - 32768 if dt.itemsize >= 2 else (h % 256) - 128
    elif dt.kind == "f":
        v = (h - 30000) / 8.0
    elif dt.kind == "c":
        v = (h - 30000) / 8.0 + 1j * ((h % 977) / 4.0)
    else:
        raise ValueError(dt)
    return v.astype(dt).reshape(shape)


def main():
    # 1. Every dtype, contiguous, 4-D.
    with h5py.File(os.path.join(HERE, "dtypes.h5"), "w") as f:
        for k, dt in enumerate(["u1", "<u2", "<u4", "<u8", "i1", "<i2", "<i4", "<i8", "<f4", "<f8", ">u2", ">i4", ">f4", ">f8", "<c8"]):
            name = "d_" + dt.replace("<", "le_").replace(">", "be_")
            f.create_dataset(name, data=value((3, 4, 5, 6), k, dt))

    # 2. Chunked variants of one dataset: edge chunks partial, chunks across frames.
    shape = (3, 5, 11, 13)
    with h5py.File(os.path.join(HERE, "chunked.h5"), "w") as f:
        g = f.create_group("entry").create_group("data")
        g.create_dataset("plain", data=value(shape, 1, "<u2"), chunks=(2, 2, 4, 8))
        g.create_dataset("frame_chunks", data=value(shape, 2, "<f4"), chunks=(1, 1, 11, 13))
        g.create_dataset("gzip", data=value(shape, 3, "<u2"), chunks=(1, 3, 11, 13), compression="gzip", compression_opts=4)
        g.create_dataset("shuffle_gzip", data=value(shape, 4, "<i4"), chunks=(2, 2, 6, 13), shuffle=True, compression="gzip")
        g.create_dataset("bslz4", data=value(shape, 5, "<u2"), chunks=(1, 2, 11, 13), **hdf5plugin.Bitshuffle(nelems=0, cname="lz4"))
        # Blocks of 64 elements: full blocks, a partial block and leftover bytes (143 = 2*64 + 8 + 7).
        g.create_dataset("bslz4_small_blocks", data=value(shape, 6, "<u4"), chunks=(1, 1, 11, 13), **hdf5plugin.Bitshuffle(nelems=64, cname="lz4"))
        g.create_dataset("bitshuffle_only", data=value(shape, 7, "<f8"), chunks=(1, 1, 11, 13), **hdf5plugin.Bitshuffle(nelems=0, cname="none"))
        g.create_dataset("gzip_be", data=value(shape, 8, ">f4"), chunks=(2, 2, 5, 5), compression="gzip")
        # Only some chunks written: the others read as the fill value.
        sparse = g.create_dataset("sparse", shape=shape, dtype="<i2", chunks=(1, 5, 11, 13), fillvalue=-7)
        sparse[1] = value(shape, 9, "<i2")[1]
        
        f["entry"].create_dataset("scan_positions", data=np.zeros((15, 2)))
        # A filter we do not decode (h5py's LZF): opening must name it.
        g.create_dataset("lzf", data=value(shape, 20, "<u2"), chunks=(1, 5, 11, 13), compression="lzf")

    # 3. The newest file format: superblock v3, v2 object headers, v4 layouts (fixed
    #    array, extensible array, B-tree v2, single chunk, implicit).
    with h5py.File(os.path.join(HERE, "latest.h5"), "w", libver="latest") as f:
        f.create_dataset("fixed_array", data=value(shape, 10, "<u2"), chunks=(1, 1, 11, 13), compression="gzip")
        d = f.create_dataset("extensible_array", shape=(0, 5, 11, 13), maxshape=(None, 5, 11, 13), dtype="<u2", chunks=(1, 5, 11, 13), **hdf5plugin.Bitshuffle(nelems=0, cname="lz4"))
        d.resize(shape)
        d[...] = value(shape, 11, "<u2")
        d = f.create_dataset("btree_v2", shape=(0, 0, 11, 13), maxshape=(None, None, 11, 13), dtype="<f4", chunks=(2, 2, 11, 13))
        d.resize(shape)
        d[...] = value(shape, 12, "<f4")
        f.create_dataset("single_chunk", data=value(shape, 13, "<i2"), chunks=shape, compression="gzip")
        f.create_dataset("contiguous", data=value(shape, 14, "<f8"))
        # Implicit chunk index: chunked, no filter, early allocation.
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((1, 1, 11, 13))
        dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
        space = h5py.h5s.create_simple(shape)
        dsid = h5py.h5d.create(f.id, b"implicit", h5py.h5t.STD_U16LE, space, dcpl=dcpl)
        h5py.Dataset(dsid)[...] = value(shape, 15, "<u2")

    # 4. A 3-D stack (nav = 1 axis) and a file with one 4-D dataset among others.
    with h5py.File(os.path.join(HERE, "stack3d.h5"), "w") as f:
        f.create_dataset("frames", data=value((6, 16, 12), 16, "<u2"), chunks=(2, 16, 12), compression="gzip")
        f.create_dataset("dark", data=value((16, 12), 17, "<f4"))
        f.attrs["note"] = "one 3-D dataset: picked without --dataset-path"

    # 5. Two candidate datasets: opening without a path must list both.
    with h5py.File(os.path.join(HERE, "two_candidates.h5"), "w") as f:
        f.create_dataset("a/data", data=value((2, 2, 4, 4), 18, "<u2"))
        f.create_dataset("b/data", data=value((3, 4, 4), 19, "<u2"))


if __name__ == "__main__":
    main()
