"""`plots=True` and the `sync=False` forms in a real notebook: a Jupyter kernel runs the
cells (nbclient), as a LiberTEM user's notebook would."""

from __future__ import annotations

import numpy as np
import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("matplotlib")
pytest.importorskip("ipykernel")

SETUP = """
import numpy as np
import udf_host
import udf_host.plots
udf_host.plots.REDRAW_EVERY = 0.0  # redraw after every merge
ctx = udf_host.Context(threads=2)
data = np.random.default_rng(0).integers(0, 100, size=(8, 6, 16, 16)).astype(np.float32)
ds = ctx.load("memory", data=data)
"""

PLOTS = """
res = ctx.run_udf(ds, [udf_host.BuiltinUDF("sumsig"), udf_host.BuiltinUDF("sum")], plots=True, partitions=4)
assert np.array_equal(res[0]["intensity"].data, data.sum(axis=(2, 3)))
"""

PLOTS_NAMED = """
res = ctx.run_udf(ds, [udf_host.BuiltinUDF("sumsig"), udf_host.BuiltinUDF("sum")], plots=[[], ["intensity"]], partitions=4)
"""

AWAIT = """
res = await ctx.run_udf(ds, udf_host.BuiltinUDF("sumsig"), sync=False, partitions=4)
assert np.array_equal(res["intensity"].data, data.sum(axis=(2, 3)))
print("awaited", res["intensity"].data.shape)
"""

ASYNC_FOR = """
merged = []
async for part in ctx.run_udf_iter(ds, udf_host.BuiltinUDF("sumsig"), sync=False, partitions=4):
    merged.append(int(part.damage.sum()))
print("merged", merged)
"""


class CountingClient(nbclient.NotebookClient):
    """Counts the kernel's `update_display_data` messages per cell: plots redrawn in place."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.updates: dict[int, int] = {}

    def process_message(self, msg, cell, cell_index):
        if msg["msg_type"] == "update_display_data":
            self.updates[cell_index] = self.updates.get(cell_index, 0) + 1
        return super().process_message(msg, cell, cell_index)


def images(cell) -> list:
    return [o for o in cell.outputs if o.output_type == "display_data" and "image/png" in o.data]


def test_plots_update_as_partitions_merge_and_the_async_forms_run_in_a_notebook():
    cells = [SETUP, PLOTS, PLOTS_NAMED, AWAIT, ASYNC_FOR]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = CountingClient(notebook, timeout=180, kernel_name="python3")
    client.execute()

    # plots=True: the two image-shaped buffers (the virtual image of sumsig, the pattern
    # of sum), each displayed once and redrawn in place after merges.
    assert len(images(notebook.cells[1])) == 2, notebook.cells[1].outputs
    assert client.updates.get(1, 0) >= 2 * 3, client.updates
    # plots=[[], ["intensity"]]: only the second UDF's buffer.
    assert len(images(notebook.cells[2])) == 1, notebook.cells[2].outputs

    text = "".join(o.get("text", "") for o in notebook.cells[3].outputs)
    assert "awaited (8, 6)" in text, notebook.cells[3].outputs
    text = "".join(o.get("text", "") for o in notebook.cells[4].outputs)
    merged = [int(n) for n in text.split("merged", 1)[1].strip(" []\n").split(",")]
    assert merged == sorted(merged) and merged[-1] == 48 and len(merged) == 4, text
    assert np.all(np.diff(merged) > 0)
