"""LiberTEM-style UDF classes in plain NumPy, and LiberTEM's documentation examples
(plugins/examples/*/libertem.py) completed into runnable classes with the minimum added
(marked "added:"). test_libertem_classes.py runs this file twice: once as it is in
LiberTEM 0.16, once with the import line changed to `from udf_host import UDF`.
"""

import numpy as np
from numpy import count_nonzero  # added: the page's snippet uses it without the import

from libertem.udf import UDF


# -- the benchmark's classes (LiberTEM's built-ins, rewritten in plain NumPy) ---------------


class SumUDF(UDF):
    """Sum of all frames (LiberTEM's SumUDF)."""

    def get_result_buffers(self):
        return {"intensity": self.buffer(kind="sig", dtype=np.result_type(self.meta.input_dtype, np.float32))}

    def get_tiling_preferences(self):
        return {"depth": 128, "total_size": self.TILE_SIZE_MAX}

    def process_tile(self, tile):
        self.results.intensity[:] += np.sum(tile, axis=0)

    def merge(self, dest, src):
        dest.intensity[:] += src.intensity


class SumSigUDF(UDF):
    """Sum over the signal of every frame (LiberTEM's SumSigUDF)."""

    def get_result_buffers(self):
        return {"intensity": self.buffer(kind="nav", dtype=np.result_type(self.meta.input_dtype, np.float32))}

    def process_tile(self, tile):
        self.results.intensity[:] += np.sum(tile.reshape((tile.shape[0], -1)), axis=1)


class StdDevUDF(UDF):
    """Per-pixel mean, variance and standard deviation (sums of x and x**2 per partition)."""

    def get_result_buffers(self):
        return {
            "sum": self.buffer(kind="sig", dtype=np.float64),
            "sumsq": self.buffer(kind="sig", dtype=np.float64),
            "num_frames": self.buffer(kind="single", dtype=np.int64),
            "mean": self.buffer(kind="sig", dtype=np.float64, use="result_only"),
            "var": self.buffer(kind="sig", dtype=np.float64, use="result_only"),
            "std": self.buffer(kind="sig", dtype=np.float64, use="result_only"),
        }

    def process_tile(self, tile):
        t = tile.astype(np.float64)
        self.results.sum[:] += np.sum(t, axis=0)
        self.results.sumsq[:] += np.sum(t * t, axis=0)
        if self.meta.tiling_scheme_idx == 0:
            self.results.num_frames[:] += tile.shape[0]

    def merge(self, dest, src):
        dest.sum[:] += src.sum
        dest.sumsq[:] += src.sumsq
        dest.num_frames[:] += src.num_frames

    def get_results(self):
        n = self.results.num_frames[0]
        mean = self.results.sum / n
        var = self.results.sumsq / n - mean * mean
        return {"mean": mean, "var": var, "std": np.sqrt(np.maximum(var, 0))}


class ApplyMasksUDF(UDF):
    """Dot product of every frame with a stack of masks (LiberTEM's ApplyMasksUDF, dense)."""

    def __init__(self, masks):
        super().__init__(masks=masks)

    def get_result_buffers(self):
        count = self.params.masks.shape[0]
        dtype = np.result_type(self.meta.input_dtype, self.params.masks.dtype)
        return {"intensity": self.buffer(kind="nav", dtype=dtype, extra_shape=(count,))}

    def get_task_data(self):
        return {"by_slice": {}}

    def process_tile(self, tile):
        matrices = self.task_data.by_slice
        key = self.meta.tiling_scheme_idx
        if key not in matrices:
            part = self.params.masks[(slice(None),) + self.meta.sig_slice.get()]
            matrices[key] = part.reshape((part.shape[0], -1)).T.astype(tile.dtype)
        flat = tile.reshape((tile.shape[0], -1))
        self.results.intensity[:] += flat @ matrices[key]


# -- LiberTEM's documentation examples (plugins/examples/*/libertem.py) ---------------------


class AverageUDF(UDF):
    """
    Like SumUDF, but also computes the average
    """
    def get_result_buffers(self):
        return {
            'sum': self.buffer(kind='sig', dtype=np.float32),
            'num_frames': self.buffer(kind='single', dtype=np.uint64),
            'average': self.buffer(kind='sig', dtype=np.float32, use='result_only'),
        }

    def process_frame(self, frame):
        self.results.sum[:] += frame
        self.results.num_frames[:] += 1

    def merge(self, dest, src):
        dest.sum[:] += src.sum
        dest.num_frames[:] += src.num_frames

    def get_results(self):
        return {
            # NOTE: 'sum' omitted here, will be returned unchanged
            'average': self.results.sum / self.results.num_frames,
        }


class BufferDeclarationsUDF(UDF):
    def get_result_buffers(self):
        buffers = {
            "nav_buffer": self.buffer(kind="nav", extra_shape=(3, 2), dtype="float32"),
            "sig_buffer": self.buffer(kind="sig", extra_shape=(2,), dtype="float32"),
            "single_buffer": self.buffer(kind="single", extra_shape=(16, 16), dtype="float32"),
        }
        return buffers

    # added: a process_frame and merge that fill each buffer
    def process_frame(self, frame):
        self.results.nav_buffer[:] = np.sum(frame)
        self.results.sig_buffer[..., 0] += frame
        self.results.sig_buffer[..., 1] += frame * frame
        self.results.single_buffer[:] += np.max(frame)

    def merge(self, dest, src):
        dest.nav_buffer[:] = src.nav_buffer
        dest.sig_buffer[:] += src.sig_buffer
        dest.single_buffer[:] += src.single_buffer


class CoordUDF(UDF):
    def get_result_buffers(self):
        nav_dims = len(self.meta.dataset_shape.nav)
        return {
            'coords': self.buffer(
                kind="nav",
                dtype=int,
                extra_shape=(nav_dims, ),
            )
        }

    def process_tile(self, tile):
        self.results.coords[:] = self.meta.coordinates


class MaxUDF(UDF):
    def get_result_buffers(self):
        return {
            'maxbuf': self.buffer(
                kind="sig", dtype=self.meta.input_dtype
            )
        }

    def preprocess(self):
        self.results.maxbuf[:] = -np.inf

    def process_frame(self, frame):
        self.results.maxbuf[:] = np.maximum(frame, self.results.maxbuf)

    def merge(self, dest, src):
        dest.maxbuf[:] = np.maximum(dest.maxbuf, src.maxbuf)


class MySumUDF(UDF):
    def get_result_buffers(self):
        return {
            'intensity': self.buffer(kind='sig', dtype=self.meta.input_dtype)
        }

    def process_tile(self, tile):
        self.results.intensity[:] += np.sum(tile, axis=0)

    def merge(self, dest, src):
        dest.intensity[:] += src.intensity


class PixelsumUDF(UDF):
    def get_result_buffers(self):
        if self.meta.roi is not None:
            navsize = np.count_nonzero(self.meta.roi)
        else:
            navsize = np.prod(self.meta.dataset_shape.nav)
        return {
            'pixelsum_nav_raw': self.buffer(
                kind="single",
                dtype=self.meta.dataset_dtype,
                extra_shape=(navsize, ),
            )
        }

    def merge(self, dest, src):
        dest.pixelsum_nav_raw[:] += src.pixelsum_nav_raw

    def process_frame(self, frame):
        np_slice = self.meta.slice.get(nav_only=True)
        self.results.pixelsum_nav_raw[np_slice] = np.sum(frame)


class SumOverSig(UDF):
    def get_result_buffers(self):
        return {
            'pixelsum': self.buffer(
                kind="nav", dtype="float32"
            )
        }

    def process_frame(self, frame):
        self.results.pixelsum[:] = np.sum(frame)


class SumSigBackendsUDF(UDF):
    def get_backends(self):
        return self.BACKEND_ALL

    def get_result_buffers(self):
        dtype = np.result_type(self.meta.input_dtype, np.float32)
        return {
            'intensity': self.buffer(
                kind="nav", dtype=dtype, where='device'
            ),
        }

    def process_tile(self, tile):
        print(self.meta.array_backend)
        self.results.intensity[:] += self.forbuf(
            np.sum(
                tile.reshape((tile.shape[0], -1)),
                axis=1
            ),
            self.results.intensity
        )


class YourUDF(UDF):  # the original derives from RealUDF, the page's alias of UDF
    def get_result_buffers(self):
        return {'buf1': self.buffer(kind="nav")}

    def process_frame(self, frame):
        self.results.buf1[:] = 42


class MyParamUDF(UDF):
    def __init__(self, my_param=None):
        if my_param is None:
            my_param = "Eins, zwei drei!"
        super().__init__(my_param=my_param)

    def get_result_buffers(self):
        return {
            'demo': self.buffer(
                kind='single',
                dtype=object
            ),
        }

    def process_frame(self, frame):
        self.results.demo[:] = self.params.my_param

    def merge(self, dest, src):
        dest.demo[:] = src.demo


# -- more of LiberTEM's programming model: process_partition, aux data, valid masks ---------


class PartitionStatsUDF(UDF):
    """process_partition: each frame's sum (nav), the partition-wise sum and the frame count,
    and their mean in get_results."""

    def get_result_buffers(self):
        return {
            "frame_sum": self.buffer(kind="nav", dtype=np.float64),
            "sum": self.buffer(kind="sig", dtype=np.float64),
            "count": self.buffer(kind="single", dtype=np.int64),
            "mean": self.buffer(kind="sig", dtype=np.float64, use="result_only"),
        }

    def process_partition(self, partition):
        self.results.frame_sum[:] = np.sum(partition, axis=(1, 2))
        self.results.sum[:] += np.sum(partition, axis=0)
        self.results.count[:] += partition.shape[0]

    def merge(self, dest, src):
        dest.frame_sum[:] = src.frame_sum
        dest.sum[:] += src.sum
        dest.count[:] += src.count

    def get_results(self):
        return {"mean": self.results.sum / self.results.count[0]}


class AuxWeightedSumUDF(UDF):
    """Aux data (`UDF.aux_data`): each frame's sum times its per-frame weight, and the
    weighted sum of all frames."""

    def __init__(self, weights):
        super().__init__(weights=weights)

    def get_result_buffers(self):
        return {
            "weighted": self.buffer(kind="nav", dtype=np.float32),
            "total": self.buffer(kind="sig", dtype=np.float32),
        }

    def process_frame(self, frame):
        self.results.weighted[:] = np.sum(frame) * self.params.weights
        self.results.total[:] += frame * self.params.weights[0]

    def merge(self, dest, src):
        dest.weighted[:] = src.weighted
        dest.total[:] += src.total


class MaskedCountUDF(UDF):
    """get_results with `with_mask` and `get_valid_nav_mask`: the frame sums where merged."""

    def get_result_buffers(self):
        return {
            "frame_sum": self.buffer(kind="nav", dtype=np.float32),
            "merged": self.buffer(kind="single", dtype=np.int64, use="result_only"),
        }

    def process_tile(self, tile):
        self.results.frame_sum[:] = np.sum(tile, axis=(1, 2))

    def get_results(self):
        valid = self.meta.get_valid_nav_mask()
        return {
            "frame_sum": self.with_mask(self.results.frame_sum, valid),
            "merged": np.array([np.count_nonzero(valid)]),
        }


class CustomValidMask(UDF):
    def get_result_buffers(self):
        nav_shape = self.meta.dataset_shape.nav

        if self.meta.roi is not None:
            nav_shape = (count_nonzero(self.meta.roi),)

        return {
            # Emulate a kind='nav' result buffer using a kind='sig' buffer for demonstration.
            # In the real world, such result buffers can be found in the implementations of ptychography
            # and iCoM since they reconstruct the object in Fourier space
            'custom_2d': self.buffer(kind='single', dtype=np.float32, extra_shape=nav_shape),
        }

    def process_frame(self, frame):
        self.results.custom_2d[self.meta.coordinates] = np.sum(frame)

    def get_results(self):
        # in this case, we set the valid mask of the kind=single buffer to
        # match what a nav buffer would do.
        valid_nav_mask = self.meta.get_valid_nav_mask()

        return {
            'custom_2d': self.with_mask(
                self.results.custom_2d,
                mask=valid_nav_mask.reshape(self.results.custom_2d.shape)
            ),
        }

    def merge(self, dest, src):
        dest.custom_2d += src.custom_2d
