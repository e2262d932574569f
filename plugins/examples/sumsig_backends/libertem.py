# LiberTEM's documentation, docs/source/udf/advanced.rst ("Sparse arrays"), as of LiberTEM commit 83313ca
# (https://github.com/LiberTEM/LiberTEM; MIT License, Copyright (c) 2024 LiberTEM creators).
# The original that plugins/examples/sumsig_backends/src/lib.rs ports; scripts/gallery-lines.py
# counts its non-blank, non-comment, non-docstring lines.

class SumSigUDF(UDF):
    def get_backends(self):
        # Support all recommended array backends in LiberTEM.
        # Please note that their APIs can differ so that comprehensive
        # tests with all supported backends are required. Also, the list of
        # supported backends in LiberTEM may grow in the future, which can
        # require adaptations in an UDF that uses this constant.
        return self.BACKEND_ALL

    def get_result_buffers(self):
        dtype = np.result_type(self.meta.input_dtype, np.float32)
        return {
            'intensity': self.buffer(
                kind="nav", dtype=dtype, where='device'
            ),
        }

    def process_tile(self, tile):
        # Show the backend that is currently used
        print(self.meta.array_backend)

        # Note the following points:
        # * Using self.forbuf(arr, target) to make the result
        #   compatible with the result buffer.
        # * Preemptively flatten the sig dimensions so that
        #   2D and nD arrays work the same.
        # * Work around API peculiarities, such as the axis keyword
        #   that is only partially supported in cupyx.scipy.sparse.
        self.results.intensity[:] += self.forbuf(
            np.sum(
                # Flatten and sum axis 1 for cupyx.scipy.sparse support
                tile.reshape((tile.shape[0], -1)),
                axis=1
            ),
            self.results.intensity
        )
