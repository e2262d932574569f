# LiberTEM's documentation, docs/source/udf/basic.rst ("Implementing the processing function"), as of LiberTEM commit 83313ca
# (https://github.com/LiberTEM/LiberTEM; MIT License, Copyright (c) 2024 LiberTEM creators).
# The original that plugins/examples/sum_over_sig/src/lib.rs ports; scripts/gallery-lines.py
# counts its non-blank, non-comment, non-docstring lines.

import numpy as np   
from libertem.udf import UDF


class SumOverSig(UDF):
   def get_result_buffers(self):
      """
      Describe the buffers we need to store our results:
      kind="nav" means we want to have a value for each coordinate
      in the navigation dimensions. We name our buffer 'pixelsum'.
      """
      return {
         'pixelsum': self.buffer(
            kind="nav", dtype="float32"
         )
      }

   def process_frame(self, frame):
      """
      Sum up all pixels in this frame and store the result in the
      `pixelsum` buffer. `self.results.pixelsum` is a view into the
      result buffer we defined above, and corresponds to the entry
      for the current frame we work on. We don't have to take care
      of finding the correct index for the frame we are processing
      ourselves.
      """
      self.results.pixelsum[:] = np.sum(frame)
