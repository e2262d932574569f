# LiberTEM's documentation, docs/source/udf/basic.rst ("Passing parameters"), as of LiberTEM commit 83313ca
# (https://github.com/LiberTEM/LiberTEM; MIT License, Copyright (c) 2024 LiberTEM creators).
# The original that plugins/examples/correlate_peaks/src/lib.rs ports; scripts/gallery-lines.py
# counts its non-blank, non-comment, non-docstring lines.

class MyUDF(UDF):

    def process_frame(self, frame):
        result = correlate_peaks(frame, self.params.peaks)
        ...

udf = MyUDF(peaks=peaks, other=...)
