"""Live plots of results as partitions merge (`Context.run_udf(..., plots=True)`), like
LiberTEM's `plots=`: one matplotlib figure per image-shaped result buffer, redrawn as the
run goes on.

The pictures are udf-host's previews (`Buffer.preview()`: the colour maps, robust ranges,
log scale for patterns and grey for positions not merged yet that `udf-host run
--preview` and `udf-host serve` draw — one implementation); matplotlib shows them. In a
notebook each figure is displayed once and replaced in place (an IPython display handle);
elsewhere it is a matplotlib window, drawn without blocking.
"""

from __future__ import annotations

import io
import time
from typing import Any, Sequence

__all__ = ["LivePlots"]

#: The shortest time between two redraws of the plots while a run goes on (seconds).
REDRAW_EVERY = 0.2


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


class _Plot:
    """One buffer's figure."""

    def __init__(self, udf_index: int, name: str, title: str):
        self.udf_index = udf_index
        self.name = name
        self.title = title
        self.figure = None
        self.image = None
        self.handle = None

    def draw(self, png: bytes) -> None:
        import matplotlib.image
        import matplotlib.pyplot as plt

        rgb = matplotlib.image.imread(io.BytesIO(png), format="png")
        if self.figure is None:
            height, width = rgb.shape[:2]
            self.figure, axes = plt.subplots(figsize=(max(width / 100, 2.5), max(height / 100, 2.0) + 0.3), dpi=100)
            axes.set_axis_off()
            axes.set_title(self.title, fontsize=10)
            self.image = axes.imshow(rgb, interpolation="nearest")
            self.figure.tight_layout()
            if _in_notebook():
                from IPython.display import display

                self.handle = display(self.figure, display_id=True)
                # Shown through the handle only: not once more at the end of the cell.
                plt.close(self.figure)
            else:
                plt.show(block=False)
            return
        self.image.set_data(rgb)
        if self.handle is not None:
            self.handle.update(self.figure)
        else:
            self.figure.canvas.draw_idle()
            self.figure.canvas.flush_events()


class LivePlots:
    """The plots of a run: `update(results)` after each merge (redrawn at most every
    `REDRAW_EVERY` seconds), `finish(results)` at the end.

    `plots`: `True` for every image-shaped buffer of every UDF; a list of buffer names
    (every UDF's buffers of those names); or a list with one list of names per UDF, as
    LiberTEM takes it.
    """

    def __init__(self, plots: Any, udf_names: Sequence[str]):
        self.spec = plots
        self.udf_names = list(udf_names)
        self.plots: list[_Plot] | None = None
        self.last = 0.0

    def _wanted(self, index: int, name: str) -> bool:
        spec = self.spec
        if spec is True:
            return True
        if isinstance(spec, (list, tuple)):
            if spec and all(isinstance(s, (list, tuple)) for s in spec):
                return index < len(spec) and name in spec[index]
            return name in spec
        raise TypeError(f"plots= takes True, a list of buffer names or a list of such lists per UDF, not {spec!r}")

    def _choose(self, per_udf: list[dict]) -> list[_Plot]:
        chosen = []
        for index, buffers in enumerate(per_udf):
            for name, buffer in buffers.items():
                if not self._wanted(index, name):
                    continue
                try:
                    buffer.preview()
                except ValueError:  # not an image
                    continue
                chosen.append(_Plot(index, name, f"{self.udf_names[index]}: {name}"))
        return chosen

    def update(self, results, force: bool = False) -> None:
        """Redraw from a `UDFResults` (a partial one while the run goes on)."""
        now = time.monotonic()
        if not force and self.plots is not None and now - self.last < REDRAW_EVERY:
            return
        per_udf = results.buffers if isinstance(results.buffers, list) else [results.buffers]
        if self.plots is None:
            self.plots = self._choose(per_udf)
        for plot in self.plots:
            plot.draw(per_udf[plot.udf_index][plot.name].preview())
        self.last = now

    def finish(self, results) -> None:
        """Draw the final results."""
        self.update(results, force=True)
