"""LiberTEM-style UDF classes in plain NumPy: the benchmark's, the parts of LiberTEM's
programming model the documentation's gallery (plugins/examples/*/libertem.py, which the
tests run as they are) does not show, and the gallery's method-only snippet completed into
a class (marked "added:"). test_libertem_classes.py runs this file twice: once as it is in
LiberTEM 0.16, once with the import line changed to `from udf_host import UDF`.
"""

import numpy as np

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


# -- the gallery's buffer_declarations snippet (a method) completed into a class -----------


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


# -- merge_all (LiberTEM calls it in its DelayedJobExecutor; udf-host when there is no merge) --


class MergeAllSumUDF(UDF):
    """A sig sum and the per-frame maxima merged by `merge_all` only (LiberTEM's SumUDF's
    merge_all, without `merge`)."""

    def get_result_buffers(self):
        return {
            "intensity": self.buffer(kind="sig", dtype=np.float32),
            "peak": self.buffer(kind="nav", dtype=np.float32),
        }

    def process_tile(self, tile):
        self.results.intensity[:] += np.sum(tile, axis=0)
        self.results.peak[:] = np.max(tile.reshape((tile.shape[0], -1)), axis=1)

    def merge_all(self, ordered_results):
        intensity = np.stack([b.intensity for b in ordered_results.values()], axis=0).sum(axis=0)
        peak = np.concatenate([b.peak for b in ordered_results.values()])
        return {"intensity": intensity, "peak": peak}


class MergeAndMergeAllUDF(UDF):
    """Both `merge` and `merge_all`: LiberTEM's ordinary executors (and udf-host) call
    `merge`; the results say which ran (merge_all would double the sum)."""

    def get_result_buffers(self):
        return {"intensity": self.buffer(kind="sig", dtype=np.float32)}

    def process_tile(self, tile):
        self.results.intensity[:] += np.sum(tile, axis=0)

    def merge(self, dest, src):
        dest.intensity[:] += src.intensity

    def merge_all(self, ordered_results):
        return {"intensity": 2 * np.stack([b.intensity for b in ordered_results.values()]).sum(axis=0)}


class MergeAllRescalesNavUDF(UDF):
    """Nav buffers only and a `merge_all` that rescales them: LiberTEM's ordinary executors
    (and udf-host) use the default merge, the partitions' rows as they are."""

    def get_result_buffers(self):
        return {"frame_sum": self.buffer(kind="nav", dtype=np.float32)}

    def process_tile(self, tile):
        self.results.frame_sum[:] = np.sum(tile.reshape((tile.shape[0], -1)), axis=1)

    def merge_all(self, ordered_results):
        sums = np.concatenate([b.frame_sum for b in ordered_results.values()])
        return {"frame_sum": sums / np.max(sums)}


class MergeAllRescalesSigAndNavUDF(UDF):
    """A sig buffer and a `merge_all` that rewrites the nav rows of other partitions:
    udf-host merges nav rows partition by partition, cannot do that, and says so."""

    def get_result_buffers(self):
        return {
            "intensity": self.buffer(kind="sig", dtype=np.float32),
            "frame_sum": self.buffer(kind="nav", dtype=np.float32),
        }

    def process_tile(self, tile):
        self.results.intensity[:] += np.sum(tile, axis=0)
        self.results.frame_sum[:] = np.sum(tile.reshape((tile.shape[0], -1)), axis=1)

    def merge_all(self, ordered_results):
        sums = np.concatenate([b.frame_sum for b in ordered_results.values()])
        intensity = np.stack([b.intensity for b in ordered_results.values()]).sum(axis=0)
        return {"intensity": intensity, "frame_sum": sums / np.max(sums)}
