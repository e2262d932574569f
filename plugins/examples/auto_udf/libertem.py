# LiberTEM's documentation, docs/source/udf.rst ("Getting started"), as of LiberTEM commit 83313ca
# (https://github.com/LiberTEM/LiberTEM; MIT License, Copyright (c) 2024 LiberTEM creators).
# The original that plugins/examples/auto_udf/src/lib.rs ports; scripts/gallery-lines.py
# counts its non-blank, non-comment, non-docstring lines.

import functools
import numpy as np

result = ctx.map(
   dataset=dataset,
   f=functools.partial(np.sum, axis=-1)
)
