# LiberTEM's documentation, docs/source/dask.rst ("Merge function for Dask array results"), as of LiberTEM commit 83313ca
# (https://github.com/LiberTEM/LiberTEM; MIT License, Copyright (c) 2024 LiberTEM creators).
# The original that plugins/examples/my_sum/src/lib.rs ports; scripts/gallery-lines.py
# counts its non-blank, non-comment, non-docstring lines.

class MySumUDF(UDF):
    def get_result_buffers(self):
        return {
            'intensity': self.buffer(kind='sig', dtype=self.meta.input_dtype)
        }

    def process_tile(self, tile):
        self.results.intensity[:] += np.sum(tile, axis=0)

    def merge(self, dest, src):
        dest.intensity[:] += src.intensity
