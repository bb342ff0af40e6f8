"""One deadline per operation: the outermost retrier's budget bounds every retry loop inside it.

A completion the boundary retries (``CompletionRetry.budget_ms``, CIS-DUR-5) is a
store call that retries on its own (``RetryPolicy.budget_ms``, CIS-DUR-4). If each
loop kept its own clock, the caller would wait for the sum of the two budgets, or more.
So every retry loop opens an :func:`operation_deadline` scope: the deadline of the
scope is the earlier of its own budget and the deadline of the scope it runs in, held
in a :class:`contextvars.ContextVar` (each thread, and each asyncio task, has its own
view; a task started inside a scope inherits it). A loop makes its first attempt in
any case and a retry only while the pause before it ends before the deadline
(:func:`retry_allowed`), so an operation returns at most one round trip after the
outermost deadline: the attempt in flight when it passed.

Times are ``time.monotonic()`` seconds (never the store clock, which tests move at
will). No store Protocol changes: a third-party store simply ignores the scope.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator
from typing import Final

__all__ = ["current_deadline", "operation_deadline", "retry_allowed"]

_DEADLINE: Final[contextvars.ContextVar[float | None]] = contextvars.ContextVar(
    "invocation_store_operation_deadline", default=None
)


def current_deadline() -> float | None:
    """The innermost scope's deadline (``time.monotonic()`` seconds), or None outside any scope."""
    return _DEADLINE.get()


@contextlib.contextmanager
def operation_deadline(budget_ms: int) -> Iterator[float]:
    """A scope whose deadline is ``budget_ms`` (integer ms) from now, or the enclosing one if earlier.

    Yields the scope's deadline (``time.monotonic()`` seconds); the enclosing deadline
    is restored on exit. ``budget_ms`` 0 is a deadline of now: no retry.
    """
    own = time.monotonic() + budget_ms / 1000
    outer = _DEADLINE.get()
    deadline = own if outer is None else min(own, outer)
    token = _DEADLINE.set(deadline)
    try:
        yield deadline
    finally:
        _DEADLINE.reset(token)


def retry_allowed(pause_s: float) -> bool:
    """Whether a retry after a pause of ``pause_s`` seconds starts before the current deadline.

    Outside any scope: True (the caller's own loop bounds itself).
    """
    deadline = _DEADLINE.get()
    return deadline is None or time.monotonic() + pause_s <= deadline
