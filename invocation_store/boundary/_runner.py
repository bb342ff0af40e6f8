"""What differs between the two boundaries: how tool code runs (CIS-FAIL-2, CIS-FAIL-3, CIS-PERF-1).

The boundary is written once, as asyncio code (``_async/boundary.py``);
``scripts/unasync.py`` generates the synchronous boundary from it (``_sync/``), turning
each ``async_<name>`` used there into ``<name>``. The pairs below are the only
boundary code written per flavour, because they truly differ (the mechanics live in
:mod:`invocation_store._runners`):

- :func:`run_tool` / :func:`async_run_tool`: one executor or projector call with an
  optional time limit in ms. Sync: inline in the calling thread without a limit (every
  projector, executors declared ``timeout_ms=None``), else on a persistent worker the
  caller waits for. Async: in an asyncio task of its own (a coroutine in the loop, a
  sync callable on a persistent worker), cancelled and abandoned over the limit.
- :func:`check_tool` / :func:`async_check_tool`: the sync boundary refuses async tools
  (``TypeError``), at construction and per call; the async boundary takes both kinds.
- :func:`pause` / :func:`async_pause`: wait between retries of a completion
  (``time.sleep`` in the calling thread vs ``asyncio.sleep`` in the loop, CIS-DUR-5).
- :data:`StoreMethod` / :data:`AsyncStoreMethod`: the type of a store method each
  flavour calls (its answer, or an awaitable of it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeAlias, TypeVar

from .._runners import Outcome, acall, call_inline, call_with_timeout
from ._registry import ToolSpec, vetted

__all__ = [
    "AsyncStoreMethod",
    "StoreMethod",
    "async_check_tool",
    "async_pause",
    "async_run_tool",
    "check_tool",
    "pause",
    "run_tool",
]

T = TypeVar("T")

#: A sync store method: called, it answers.
StoreMethod: TypeAlias = Callable[..., T]
#: An async store method: called, it returns an awaitable of its answer.
AsyncStoreMethod: TypeAlias = Callable[..., Awaitable[T]]


def run_tool(fn: Callable[..., object], timeout_ms: int | None, *args: object) -> Outcome:
    """Run ``fn(*args)`` for the sync boundary; never raises for what the tool does (CIS-FAIL-2).

    ``timeout_ms`` None: inline, in the calling thread, with no hand-over at all (a
    real Ctrl-C landing meanwhile cannot be told from one the tool raised: it is the
    tool's failure). Otherwise on a persistent worker of the process-wide pool,
    waited for ``timeout_ms`` (then ``timed_out``; the worker is counted hung); a
    ``KeyboardInterrupt`` delivered to the calling thread while it waits propagates.
    """
    if timeout_ms is None:
        return call_inline(fn, *args)
    return call_with_timeout(fn, timeout_ms, *args)


async def async_run_tool(fn: Callable[..., object], timeout_ms: int | None, *args: object) -> Outcome:
    """Run ``fn(*args)`` for the async boundary in a task of its own (CIS-FAIL-2, CIS-FAIL-3).

    Awaited at most ``timeout_ms`` (None: no limit); over it the task is cancelled and
    abandoned, never awaited, so a tool that ignores cancellation cannot stretch the
    call (``timed_out``). A ``CancelledError`` the tool raises while the awaiting task
    is not being cancelled is its failure; a real cancellation of the awaiting task
    cancels the tool's task and propagates. See :func:`invocation_store._runners.acall`.
    """
    return await acall(fn, timeout_ms, *args)


def check_tool(tool: ToolSpec) -> None:
    """Raise ``TypeError`` if ``tool`` has an async executor or projector (sync boundary only)."""
    if vetted(tool)[1]:
        raise TypeError("ToolBoundary runs sync tools only; use AsyncToolBoundary for async ones")


def async_check_tool(tool: ToolSpec) -> None:
    """Accept ``tool``: the async boundary runs sync and async callables alike."""
    del tool


def pause(seconds: float) -> None:
    """Block the calling thread for ``seconds`` (between completion retries, CIS-DUR-5)."""
    time.sleep(seconds)


async def async_pause(seconds: float) -> None:
    """Suspend the awaiting task for ``seconds``, leaving the loop free (CIS-DUR-5)."""
    await asyncio.sleep(seconds)
