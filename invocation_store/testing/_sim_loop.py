"""Simulated time: an asyncio event loop whose clock moves only when nothing is ready to run.

Theory of operation
-------------------
A simulation runs every harness host, the network and the store in one thread, on one
event loop (:class:`VirtualLoop`). The loop is asyncio's own selector loop with two
changes: :meth:`VirtualLoop.time` reads a simulated clock (integer nanoseconds, shown
as float seconds, starting at 0), and the selector never waits. When the loop has
nothing ready, it asks the selector to wait until its next timer; the selector moves
the simulated clock to that timer instead and returns at once. So ``asyncio.sleep``,
``asyncio.timeout`` (redis-py's socket timeouts), the boundary's retry pauses and the
Redis store's backoff all run on simulated time, as fast as the CPU allows, and in an
order fixed by the program alone: asyncio runs ready callbacks first in, first out, and
timers by due time (equal due times in the order they were scheduled).

Nothing here may wait for real I/O or another thread: a simulation that has no timer
and nothing ready is stuck (a bug in the simulation) and raises :class:`SimulationStalledError`.
Budgets measured by ``invocation_store._deadline`` use the same clock (:func:`run_simulated`
installs it with ``_deadline.use_clock``).
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from .._deadline import use_clock

__all__ = ["SimulationStalledError", "VirtualLoop", "run_simulated"]

T = TypeVar("T")


class SimulationStalledError(RuntimeError):
    """The simulated loop has nothing to run and no timer: nothing can ever happen again."""


class _VirtualSelector(selectors.BaseSelector):
    """A selector that never blocks: "waiting" ``timeout`` seconds moves the simulated clock."""

    def __init__(self) -> None:
        self._keys: dict[int, selectors.SelectorKey] = {}
        self.loop: VirtualLoop | None = None

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        key = selectors.SelectorKey(fileobj, fd, events, data)
        self._keys[fd] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        return self._keys.pop(fd)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        self.unregister(fileobj)
        return self.register(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        loop = self.loop
        assert loop is not None
        if timeout is None:
            raise SimulationStalledError("nothing is ready and no timer is due: the simulation is stuck")
        if timeout > 0:
            loop.advance_to_next_timer(timeout)
        return []

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return dict(self._keys)

    def close(self) -> None:
        self._keys.clear()


class VirtualLoop(asyncio.SelectorEventLoop):
    """An asyncio loop on simulated time (module docstring). ``now_ns`` is the simulated clock."""

    def __init__(self) -> None:
        selector = _VirtualSelector()
        super().__init__(selector)
        selector.loop = self
        self.now_ns = 0
        self._clock_resolution = 1e-9

    def time(self) -> float:
        """Simulated seconds since the simulation began."""
        return self.now_ns / 1e9

    def advance_to_next_timer(self, timeout: float) -> None:
        """Move the clock forward by ``timeout`` seconds, and at least to the next timer's due time."""
        step = int(timeout * 1e9) + 1
        scheduled = getattr(self, "_scheduled", None)
        if scheduled:
            due = int(scheduled[0].when() * 1e9) + 1
            step = max(step, due - self.now_ns)
        self.now_ns += max(step, 1)

    def run_in_executor(self, executor: Any, func: Any, *args: Any) -> asyncio.Future[Any]:  # type: ignore[override]
        """Refused: another thread's timing is not simulated (tools in a simulation are coroutines)."""
        raise RuntimeError("a simulation runs nothing in threads: use coroutine tools")


def run_simulated(main: Coroutine[Any, Any, T], loop: VirtualLoop | None = None) -> T:
    """Run ``main`` to completion on a :class:`VirtualLoop`, deadlines measured in simulated time."""
    loop = loop or VirtualLoop()
    try:
        with use_clock(loop.time):
            return loop.run_until_complete(main)
    finally:
        try:
            pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        finally:
            loop.close()
