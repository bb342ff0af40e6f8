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
from typing import Final

__all__ = ["current_deadline", "operation_deadline", "retry_allowed"]

_DEADLINE: Final[contextvars.ContextVar[float | None]] = contextvars.ContextVar(
    "invocation_store_operation_deadline", default=None
)


def current_deadline() -> float | None:
    """The innermost scope's deadline (``time.monotonic()`` seconds), or None outside any scope."""
    return _DEADLINE.get()


class _Scope:
    """The context manager :func:`operation_deadline` returns (a class: entered on every call's path)."""

    __slots__ = ("budget_ms", "token")

    def __init__(self, budget_ms: int) -> None:
        self.budget_ms = budget_ms
        self.token: contextvars.Token[float | None] | None = None

    def __enter__(self) -> float:
        own = time.monotonic() + self.budget_ms / 1000
        outer = _DEADLINE.get()
        deadline = own if outer is None else min(own, outer)
        self.token = _DEADLINE.set(deadline)
        return deadline

    def __exit__(self, *exc_info: object) -> None:
        if self.token is not None:
            _DEADLINE.reset(self.token)
            self.token = None


def operation_deadline(budget_ms: int) -> contextlib.AbstractContextManager[float]:
    """A scope whose deadline is ``budget_ms`` (integer ms) from entry, or the enclosing one if earlier.

    ``with operation_deadline(budget_ms) as deadline``: ``deadline`` is the scope's
    (``time.monotonic()`` seconds); the enclosing deadline is restored on exit.
    ``budget_ms`` 0 is a deadline of now: no retry.
    """
    return _Scope(budget_ms)


def retry_allowed(pause_s: float) -> bool:
    """Whether a retry after a pause of ``pause_s`` seconds starts before the current deadline.

    Outside any scope: True (the caller's own loop bounds itself).
    """
    deadline = _DEADLINE.get()
    return deadline is None or time.monotonic() + pause_s <= deadline
