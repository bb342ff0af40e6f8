"""The time a store decided an operation at, for whoever records a history of it (CIS-HIST-1).

A history's sequential specification (the kernel) is replayed at each operation's
``now_ms``; it must be the time the store really decided at, on the store's clock
(CIS-STORE-10). A caller cannot read it beforehand when the store decides on another
clock (a Redis script's server ``TIME``, a database's ``clock_timestamp()``), so a
store reports it: :func:`report_decided_at` inside each operation, with the time its
decision used (integer ms). A recorder wraps the call in :func:`watch_decisions` and
reads what was reported. The report travels in a :class:`contextvars.ContextVar`, so
concurrent operations (threads, asyncio tasks) never see each other's; outside a watch
a report costs one lookup and goes nowhere. A store that reports nothing (a third
party's) is recorded at the caller's reading, as before.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Final

__all__ = ["report_decided_at", "watch_decisions"]

_WATCH: Final[contextvars.ContextVar[list[int] | None]] = contextvars.ContextVar(
    "invocation_store_decided_at", default=None
)


def report_decided_at(now_ms: int) -> None:
    """Report that the current store operation decided at ``now_ms`` (integer ms, store clock).

    The last report of an operation is the one recorded.
    """
    watch = _WATCH.get()
    if watch is not None:
        watch.append(now_ms)


@contextlib.contextmanager
def watch_decisions() -> Iterator[list[int]]:
    """Collect the times reported inside this scope (a list, last report last)."""
    reported: list[int] = []
    token = _WATCH.set(reported)
    try:
        yield reported
    finally:
        _WATCH.reset(token)
