"""Generate the HDF5 layout fixtures of udf-host (run once; the files are committed).

    python -m venv /tmp/h5venv && /tmp/h5venv/bin/pip install h5py hdf5plugin numpy
    /tmp/h5venv/bin/python tests/data/hdf5/generate_layouts.py

Re-creations, written by h5py/libhdf5 + hdf5plugin, of the layouts real acquisition
software writes (the structure of the public sample files rosettasciio tests with; the
values are ours: `value(shape, seed, dtype)` of generate.py, in the *logical* order
scan axes then frame axes, so the Rust tests compare every element with the formula):

- dectris/: a DECTRIS (ARINA/EIGER) master file `scan_master.h5` whose `/entry/data`
  holds external links `data_000001`, `data_000002` to `scan_data_00000N.h5:/entry/data/data`
  (bitshuffle-LZ4, one frame per chunk, uint32), `ntrigger`/`nimages` in
  detectorSpecific, and `scan.h5` with `STEM Metadata` NumPixelsX/NumPixelsY (ARINA);
  `many_master.h5` links 10 files (dense link storage); `broken_master.h5` links a
  missing file.
- velox.emd: Thermo Fisher Velox, `/Data/Image/<id>/Data` stored (height, width, frames)
  with one frame per chunk, `/Version` `{"format": "Velox"}`.
- emd_hyperspy.emd: EMD 0.2 as HyperSpy writes it (`data.T`, dims dim1..dimN).
- preview.h5: an RGB `/Preview/Image` (uint8, last axis 3) and a 2-D mask next to the
  real data: only the data may be chosen automatically.
- image2d.h5: one 2-D dataset (a single frame).
- frames_last.h5: (height, width, frames) contiguous and chunked, no metadata
  (`--sig-axes 0,1`).
- scales.h5: stacks of several sizes with HDF5 dimension scales (a large 3-D one among
  them), as in Delmic SPARC files; tied.h5: two stacks of the same size;
  image_and_scale.h5: one 2-D frame and a 3-D scale.
"""

import json
import os

import h5py
import hdf5plugin
import numpy as np

from generate import value

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "layouts")


def dectris():
    d = os.path.join(HERE, "dectris")
    os.makedirs(d, exist_ok=True)
    # A 3 x 4 scan of 12 frames of 6 x 5, in two data files of 7 and 5 frames.
    frames = value((12, 6, 5), 30, "<u4")
    bslz4 = hdf5plugin.Bitshuffle(nelems=0, cname="lz4")
    for k, (a, b) in enumerate([(0, 7), (7, 12)], start=1):
        with h5py.File(os.path.join(d, f"scan_data_{k:06d}.h5"), "w") as f:
            g = f.create_group("entry/data")
            ds = g.create_dataset("data", data=frames[a:b], chunks=(1, 6, 5), **bslz4)
            ds.attrs["image_nr_low"] = np.uint64(a + 1)
            ds.attrs["image_nr_high"] = np.uint64(b)
    with h5py.File(os.path.join(d, "scan_master.h5"), "w") as f:
        f.attrs["default"] = np.bytes_("entry")
        e = f.create_group("entry")
        e.attrs["NX_class"] = np.bytes_("NXentry")
        g = e.create_group("data")
        g.attrs["NX_class"] = np.bytes_("NXdata")
        for k in (1, 2):
            g[f"data_{k:06d}"] = h5py.ExternalLink(f"scan_data_{k:06d}.h5", "/entry/data/data")
        det = e.create_group("instrument/detector")
        det["description"] = np.bytes_("Dectris ARINA CZT")
        spec = det.create_group("detectorSpecific")
        spec["nimages"] = np.uint64(1)
        spec["ntrigger"] = np.uint64(12)
        spec["x_pixels_in_detector"] = np.uint64(5)
        spec["y_pixels_in_detector"] = np.uint64(6)
        spec["pixel_mask"] = np.zeros((6, 5), dtype="<u4")
        spec["countrate_correction_table"] = np.zeros((40, 2), dtype="<f4")
        det["flatfield"] = np.ones((6, 5), dtype="<f4")
    with h5py.File(os.path.join(d, "scan.h5"), "w") as f:
        g = f.create_group("STEM Metadata")
        g.attrs["NumPixelsX"] = np.int64(4)
        g.attrs["NumPixelsY"] = np.int64(3)
        g.attrs["Pixel Size"] = np.array([0.139])
    # Ten data files of 2 frames (EIGER's nimages x ntrigger scan shape), 8 x 8 uint16.
    many = value((20, 8, 8), 31, "<u2")
    for k in range(1, 11):
        with h5py.File(os.path.join(d, f"many_data_{k:06d}.h5"), "w") as f:
            f.create_dataset("entry/data/data", data=many[2 * k - 2 : 2 * k], chunks=(1, 8, 8), **bslz4)
    with h5py.File(os.path.join(d, "many_master.h5"), "w") as f:
        g = f.create_group("entry/data")
        for k in range(1, 11):
            g[f"data_{k:06d}"] = h5py.ExternalLink(f"many_data_{k:06d}.h5", "/entry/data/data")
        spec = f.create_group("entry/instrument/detector/detectorSpecific")
        spec["nimages"] = np.uint64(5)
        spec["ntrigger"] = np.uint64(4)
    with h5py.File(os.path.join(d, "broken_master.h5"), "w") as f:
        f["entry/data/data_000001"] = h5py.ExternalLink("gone_data_000001.h5", "/entry/data/data")


def velox():
    # 3 frames of 4 x 6 int16, stored (height, width, frames), one frame per chunk.
    logical = value((3, 4, 6), 32, "<i2")
    with h5py.File(os.path.join(HERE, "velox.emd"), "w") as f:
        f["Version"] = np.array([json.dumps({"version": "8", "format": "Velox"}).encode()], dtype=object)
        img = f.create_group("Data/Image/26f60320a61d4f66a73efd8cde34ffa9")
        img.create_dataset("Data", data=np.moveaxis(logical, 0, 2), chunks=(4, 6, 1))
        img["FrameLookupTable"] = np.arange(3, dtype="<u4")
        img["Metadata"] = np.zeros((100, 3), dtype="u1")


def emd_hyperspy():
    # A stack of 3 frames of 4 x 6 (HyperSpy's array order) written transposed.
    logical = value((3, 4, 6), 33, "<f4")
    with h5py.File(os.path.join(HERE, "emd_hyperspy.emd"), "w") as f:
        f.attrs["version_major"] = "0"
        f.attrs["version_minor"] = "2"
        s = f.create_group("signals")
        s.attrs["emd_group_type"] = np.int32(1)
        g = s.create_group("__unnamed__")
        g.attrs["emd_group_type"] = np.int32(1)
        g.attrs["record_by"] = ""
        g.create_dataset("data", data=logical.T, chunks=(6, 4, 3))
        for k, n in zip((1, 2, 3), (6, 4, 3)):
            dim = g.create_dataset(f"dim{k}", data=np.array([0.0, 1.0]))
            dim.attrs["name"] = ""
            dim.attrs["units"] = "[]"


def preview():
    with h5py.File(os.path.join(HERE, "preview.h5"), "w") as f:
        f.create_dataset("Preview/Image", data=np.full((16, 16, 3), 200, dtype="u1"))
        f.create_dataset("Preview/Alpha", data=np.full((16, 16, 4), 100, dtype="u1"))
        f.create_dataset("entry/data/data", data=value((4, 8, 8), 34, "<u2"))
        f.create_dataset("entry/mask", data=np.ones((8, 8), dtype="u1"))
        f.create_dataset("entry/title", data=np.bytes_("a scan"))


def image2d():
    with h5py.File(os.path.join(HERE, "image2d.h5"), "w") as f:
        f.create_dataset("image", data=value((7, 9), 35, "<f4"))


def frames_last():
    logical = value((4, 5, 6), 36, "<u2")
    with h5py.File(os.path.join(HERE, "frames_last.h5"), "w") as f:
        f.create_dataset("contiguous", data=np.moveaxis(logical, 0, 2))
        f.create_dataset("chunked", data=np.moveaxis(logical, 0, 2), chunks=(5, 6, 1), compression="gzip")
        f.create_dataset("chunked_tiles", data=np.moveaxis(logical, 0, 2), chunks=(2, 4, 2))


def scales():
    # Several stacks, as in Delmic SPARC files (acquisitions of different sizes, axes as
    # HDF5 dimension scales): the largest stack is the data; a dimension scale is never
    # chosen, even a large one.
    with h5py.File(os.path.join(HERE, "scales.h5"), "w") as f:
        f.create_dataset("Acquisition0/ImageData/Image", data=value((1, 3, 4, 8, 6), 37, "<u2"))
        f.create_dataset("Acquisition1/ImageData/Image", data=value((1, 1, 1, 2, 2), 38, "<u2"))
        x = f.create_dataset("Acquisition0/ImageData/DimensionScaleX", data=np.arange(6, dtype="<f8"))
        x.make_scale("X")
        cube = f.create_dataset("Acquisition0/ImageData/ScaleCube", data=np.zeros((10, 10, 10), dtype="<f4"))
        cube.make_scale("cube")
    # Two stacks of the same size (Prismatic writes one per depth): no choice is made.
    with h5py.File(os.path.join(HERE, "tied.h5"), "w") as f:
        f.create_dataset("depth0/data", data=value((2, 3, 4), 40, "<f4"))
        f.create_dataset("depth1/data", data=value((2, 3, 4), 41, "<f4"))
    # A single 2-D frame next to a 3-D dimension scale: the frame is the data.
    with h5py.File(os.path.join(HERE, "image_and_scale.h5"), "w") as f:
        f.create_dataset("image", data=value((7, 9), 39, "<f4"))
        z = f.create_dataset("z", data=np.zeros((4, 4, 4), dtype="<f4"))
        z.make_scale("z")


def main():
    os.makedirs(HERE, exist_ok=True)
    dectris()
    velox()
    emd_hyperspy()
    preview()
    image2d()
    frames_last()
    scales()


if __name__ == "__main__":
    main()
