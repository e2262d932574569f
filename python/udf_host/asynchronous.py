"""The `sync=False` forms of `Context.run_udf` and `Context.run_udf_iter`, as LiberTEM has
them: `await ctx.run_udf(..., sync=False)` and
`async for part in ctx.run_udf_iter(..., sync=False)`.

The run goes on in udf-host's worker threads as always; waiting for the next merge
happens in a thread of the event loop's executor, so the loop (a notebook's, a web
server's) stays free meanwhile. Plots are drawn on the loop's thread.
"""

from __future__ import annotations

import asyncio

__all__ = ["AsyncResultIterator", "run_to_end"]

_END = object()


class AsyncResultIterator:
    """An asynchronous iterator over a `ResultIterator`: a `UDFResults` after each merged
    partition. `await aclose()` (or leaving an `async with` block) stops the run;
    cancelling the task that iterates stops it too."""

    def __init__(self, iterator, plots=None):
        self._iterator = iterator
        self._plots = plots
        self._pending = None
        self._last = None

    def __aiter__(self) -> "AsyncResultIterator":
        return self

    async def __anext__(self):
        loop = asyncio.get_running_loop()
        self._pending = loop.run_in_executor(None, next, self._iterator, _END)
        try:
            item = await asyncio.shield(self._pending)
        except asyncio.CancelledError:
            # The thread finishes its wait for the next merge; then the run stops.
            self._pending.add_done_callback(lambda _: self._iterator.close())
            raise
        self._pending = None
        if item is _END:
            if self._plots is not None and self._last is not None:
                self._plots.finish(self._last)
            raise StopAsyncIteration
        self._last = item
        if self._plots is not None:
            self._plots.update(item)
        return item

    def results(self):
        """The results merged so far."""
        return self._iterator.results()

    def update_parameters_experimental(self, parameters) -> None:
        self._iterator.update_parameters_experimental(parameters)

    async def aclose(self) -> None:
        if self._pending is not None:
            await asyncio.wait([self._pending])
        self._iterator.close()

    async def __aenter__(self) -> "AsyncResultIterator":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()


async def run_to_end(iterator, plots=None):
    """Drive `iterator` (a `ResultIterator`) to its end without blocking the event loop;
    the final buffers, as `run_udf` returns them."""
    last = None
    async with AsyncResultIterator(iterator, plots) as steps:
        async for last in steps:
            pass
        if last is None:  # nothing to merge (an empty ROI): the zero results
            last = steps.results()
    return last.buffers
