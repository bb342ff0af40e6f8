"""One deadline per operation: the outermost retrier's budget bounds every retry loop inside it.

A completion the boundary retries (``CompletionRetry.budget_ms``, CIS-DUR-5) is a
store call that retries on its own (``RetryPolicy.budget_ms``, CIS-DUR-4). If each
loop kept its own clock, the caller would wait for the sum of the two budgets, or more.
So every retry loop opens an :func:`operation_deadline` scope: the deadline of the
scope is the earlier of its own budget and the deadline of the scope it runs in, held
in a :class:`contextvars.ContextVar` (each thread, and each asyncio task, has its own
view; a task started inside a scope inherits it). The first attempt of the outermost
scope is made in any case; every later attempt, a retry or the first send of another
step of the same operation, only while it starts before the deadline
(:func:`attempt_allowed`, :func:`retry_allowed`), so an operation returns at most one
round trip after the outermost deadline: the attempt in flight when it passed.

A budget of 0 means "never retry", not "one round trip": such a scope allows no retry,
but its steps run (bounded by an enclosing scope's deadline, if any, and by the
connection's own timeouts), so that a healthy operation of several steps still answers.

Times are :func:`monotonic` seconds: ``time.monotonic()``, never the store clock, which
tests move at will. A deterministic simulation runs the boundary and the stores on
simulated time and installs its own monotonic clock with :func:`use_clock` (a context
variable, like the deadline itself), so that budgets are measured in simulated time
too. No store Protocol changes: a third-party store simply ignores the scope.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator
from typing import Final

__all__ = [
    "MIN_STEP_WAIT_S",
    "attempt_allowed",
    "cleanup_attempt",
    "current_deadline",
    "monotonic",
    "operation_deadline",
    "retry_allowed",
    "step_time_left",
    "step_wait_s",
    "use_clock",
]

_CLOCK: Final[contextvars.ContextVar[Callable[[], float]]] = contextvars.ContextVar(
    "invocation_store_monotonic_clock", default=time.monotonic
)
_DEADLINE: Final[contextvars.ContextVar[float | None]] = contextvars.ContextVar(
    "invocation_store_operation_deadline", default=None
)
#: The deadline for another step (a first send): the same, except in a budget-0 scope,
#: which bounds retries only (its steps keep the enclosing step deadline, or none).
_STEP_DEADLINE: Final[contextvars.ContextVar[float | None]] = contextvars.ContextVar(
    "invocation_store_step_deadline", default=None
)
#: Whether the outermost scope made its first attempt (one cell per outermost scope).
_ATTEMPTED: Final[contextvars.ContextVar[list[bool] | None]] = contextvars.ContextVar(
    "invocation_store_operation_attempted", default=None
)


def monotonic() -> float:
    """Seconds on the clock of every deadline: ``time.monotonic()``, unless :func:`use_clock` set another."""
    return _CLOCK.get()()


@contextlib.contextmanager
def use_clock(clock: Callable[[], float]) -> Iterator[None]:
    """Measure deadlines (and every retry budget) on ``clock``, in seconds, inside this scope.

    For simulations that run the library on simulated time (``invocation_store.testing``'s
    simulator); asyncio tasks started inside the scope inherit it.
    """
    token = _CLOCK.set(clock)
    try:
        yield
    finally:
        _CLOCK.reset(token)


def current_deadline() -> float | None:
    """The innermost scope's deadline (:func:`monotonic` seconds), or None outside any scope."""
    return _DEADLINE.get()


class _Scope:
    """The context manager :func:`operation_deadline` returns (a class: entered on every call's path)."""

    __slots__ = ("attempted", "budget_ms", "step", "token")

    def __init__(self, budget_ms: int) -> None:
        self.budget_ms = budget_ms
        self.token: contextvars.Token[float | None] | None = None
        self.step: contextvars.Token[float | None] | None = None
        self.attempted: contextvars.Token[list[bool] | None] | None = None

    def __enter__(self) -> float:
        own = monotonic() + self.budget_ms / 1000
        outer = _DEADLINE.get()
        deadline = own if outer is None else min(own, outer)
        self.token = _DEADLINE.set(deadline)
        outer_step = _STEP_DEADLINE.get()
        if self.budget_ms == 0:  # never retry; the steps keep the enclosing step deadline
            self.step = _STEP_DEADLINE.set(outer_step)
        else:
            self.step = _STEP_DEADLINE.set(own if outer_step is None else min(own, outer_step))
        if outer is None:
            self.attempted = _ATTEMPTED.set([False])
        return deadline

    def __exit__(self, *exc_info: object) -> None:
        if self.token is not None:
            _DEADLINE.reset(self.token)
            self.token = None
        if self.step is not None:
            _STEP_DEADLINE.reset(self.step)
            self.step = None
        if self.attempted is not None:
            _ATTEMPTED.reset(self.attempted)
            self.attempted = None


def operation_deadline(budget_ms: int) -> contextlib.AbstractContextManager[float]:
    """A scope whose deadline is ``budget_ms`` (integer ms) from entry, or the enclosing one if earlier.

    ``with operation_deadline(budget_ms) as deadline``: ``deadline`` is the scope's
    (:func:`monotonic` seconds); the enclosing deadline is restored on exit.
    ``budget_ms`` 0 is a deadline of now for retries (none is made) but not for steps:
    a budget-0 scope's later steps keep the enclosing scope's step deadline, or none.
    """
    return _Scope(budget_ms)


def attempt_allowed() -> bool:
    """Whether a first send may start now: always for the outermost scope's first attempt,
    else only before the current step deadline (a later step of an operation whose budget is
    spent is not started). Outside any scope, or in budget-0 scopes only: True.
    """
    if _DEADLINE.get() is None:
        return True
    attempted = _ATTEMPTED.get()
    if attempted is not None and not attempted[0]:
        attempted[0] = True
        return True
    deadline = _STEP_DEADLINE.get()
    return deadline is None or monotonic() < deadline


@contextlib.contextmanager
def cleanup_attempt() -> Iterator[None]:
    """Inside this scope one more send may start even past the deadline (no retry after it).

    For an operation's best-effort cleanup after its budget went to a wait (a create or
    open whose durability wait was not reached is taken back): one attempt, so the store
    is left as the answer says, and still at most one round trip more.
    """
    token = _ATTEMPTED.set([False])
    try:
        yield
    finally:
        _ATTEMPTED.reset(token)


def step_time_left() -> float | None:
    """Seconds until the current step deadline (0 or less once it passed), or None when no scope
    bounds a step (outside any scope, or in budget-0 scopes only).

    For a wait inside one step (a pooled connection, a database lock): bound it by this, so
    that the step ends by the deadline that also bounds its retries.
    """
    deadline = _STEP_DEADLINE.get()
    return None if deadline is None else deadline - monotonic()


#: The shortest wait a step is given for a connection or a lock (seconds): one round trip's worth.
MIN_STEP_WAIT_S: Final = 0.1


def step_wait_s(limit_s: float) -> float:
    """How long a wait inside one step may last, in seconds: ``limit_s`` (the store's own
    setting), or less when the step deadline leaves less, but never below
    :data:`MIN_STEP_WAIT_S` then (CIS-DUR-13)."""
    left = step_time_left()
    return limit_s if left is None else min(limit_s, max(MIN_STEP_WAIT_S, left))


def retry_allowed(pause_s: float) -> bool:
    """Whether a retry after a pause of ``pause_s`` seconds starts before the current deadline.

    Outside any scope: True (the caller's own loop bounds itself).
    """
    deadline = _DEADLINE.get()
    return deadline is None or monotonic() + pause_s <= deadline
