# LiberTEM's documentation, docs/source/udf/basic.rst (the YourUDF of the "Running UDFs" examples, defined in the page's test setup), as of LiberTEM commit 83313ca
# (https://github.com/LiberTEM/LiberTEM; MIT License, Copyright (c) 2024 LiberTEM creators).
# The original that plugins/examples/your_udf/src/lib.rs ports; scripts/gallery-lines.py
# counts its non-blank, non-comment, non-docstring lines.

class YourUDF(RealUDF):
   def get_result_buffers(self):
      return {'buf1': self.buffer(kind="nav")}

   def process_frame(self, frame):
      self.results.buf1[:] = 42
