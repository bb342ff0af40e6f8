"""The run lifecycle: open, cancel and close, and the ranges of a run's parameters (CIS-RUN-1, CIS-RUN-2).

A run is opened ACTIVE with a deadline, a record TTL and two budgets
(:func:`open_run`); :data:`RUN_TRANSITIONS` is its whole table (ACTIVE -> CANCELLED or
CLOSED, and the self-loops that make a retried cancel or close answer like the first,
CIS-RETRY-3); a pair outside it is INVALID_TRANSITION. What a run admits and charges
is decided with the records, in :mod:`._state` (:func:`~._admission.admit`,
:func:`~._admission.run_usage_after`). No I/O, no clock (``now_ms`` is an input), no
random numbers.
"""

from __future__ import annotations

import enum
from typing import Final

from attrs import evolve

from ._codes import ErrorCode
from ._ids import is_safe_id
from ._models import MAX_SAFE_INT, RunState, RunStatus, check_now

__all__ = [
    "RUN_TRANSITIONS",
    "RunOp",
    "cancel_run",
    "check_run_parameters",
    "close_run",
    "is_well_formed_run",
    "open_run",
]


class RunOp(enum.StrEnum):
    """Operations of the run lifecycle (CIS-RUN-2)."""

    #: Stop the run before its end: ACTIVE -> CANCELLED.
    CANCEL = "cancel"
    #: End the run normally: ACTIVE -> CLOSED.
    CLOSE = "close"


#: Run lifecycle table: (status, operation) -> next status (CIS-RUN-2). The two
#: self-loops make a retried cancel or close (redis-py retries a command whose reply
#: was lost) answer like the first, instead of INVALID_TRANSITION (CIS-RETRY-3).
RUN_TRANSITIONS: Final[dict[tuple[RunStatus, RunOp], RunStatus]] = {
    (RunStatus.ACTIVE, RunOp.CANCEL): RunStatus.CANCELLED,
    (RunStatus.ACTIVE, RunOp.CLOSE): RunStatus.CLOSED,
    (RunStatus.CANCELLED, RunOp.CANCEL): RunStatus.CANCELLED,
    (RunStatus.CLOSED, RunOp.CLOSE): RunStatus.CLOSED,
}


def check_run_parameters(
    *, deadline_ms: object, ttl_ms: object, tool_call_budget: object, byte_budget: object
) -> None:
    """Raise ``ValueError`` unless a run's parameters are in range (CIS-RUN-1, CIS-STORE-8).

    ``deadline_ms`` (integer ms), ``tool_call_budget`` and ``byte_budget`` (UTF-8
    bytes) must be ints (not bool) in ``[0, MAX_SAFE_INT]``, ``ttl_ms`` in
    ``[1, MAX_SAFE_INT]``, and ``deadline_ms + ttl_ms`` (when the run state lapses)
    at most ``MAX_SAFE_INT`` (``2**53 - 1``): larger values are not exact in every
    store (Lua numbers are doubles) nor in I-JSON. A value out of range is the
    caller's error, never a store failure. :func:`open_run` and the boundary's
    ``open_run`` both call this, so the ranges are stated once.
    """
    for name, value, minimum in (
        ("deadline_ms", deadline_ms, 0),
        ("ttl_ms", ttl_ms, 1),
        ("tool_call_budget", tool_call_budget, 0),
        ("byte_budget", byte_budget, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_SAFE_INT:
            raise ValueError(f"{name} must be an int in [{minimum}, 2**53 - 1]")
    assert isinstance(deadline_ms, int)
    assert isinstance(ttl_ms, int)
    if deadline_ms + ttl_ms > MAX_SAFE_INT:
        raise ValueError("deadline_ms + ttl_ms must be at most 2**53 - 1")


def is_well_formed_run(run: RunState) -> bool:
    """True if ``run`` is a state :func:`open_run` and the kernel's later updates can produce.

    The id is safe, the status a :class:`RunStatus`; its eight integers (times in ms,
    budgets, usage) exact ints in ``[0, 2**53 - 1]``, the TTL at least 1 and
    ``expires_at_ms == deadline_ms + ttl_ms`` (set once, by :func:`open_run`). Usage
    is not compared with the budgets. Stores decoding a stored run (a tampered or
    corrupted one) answer STORE_UNAVAILABLE (``CorruptRun``) when this is False
    (CIS-STORE-6), as :func:`~invocation_store.kernel.is_well_formed` is for records.
    """
    numbers = (
        run.opened_at_ms,
        run.deadline_ms,
        run.ttl_ms,
        run.expires_at_ms,
        run.tool_call_budget,
        run.byte_budget,
        run.tool_calls_used,
        run.bytes_used,
    )
    return (
        is_safe_id(run.run_id)
        and isinstance(run.status, RunStatus)
        and all(type(value) is int and 0 <= value <= MAX_SAFE_INT for value in numbers)
        and run.ttl_ms >= 1
        and run.expires_at_ms == run.deadline_ms + run.ttl_ms
    )


def open_run(
    existing: RunState | None = None,
    *,
    run_id: str,
    now_ms: int,
    deadline_ms: int,
    ttl_ms: int,
    tool_call_budget: int,
    byte_budget: int,
) -> RunState | ErrorCode:
    """Build a new ACTIVE run state (CIS-RUN-1, CIS-KERN-2).

    The run state lapses at ``deadline_ms + ttl_ms``, so it outlives every record
    created before the deadline. ``existing`` is the stored state under this run id,
    if any: a live ACTIVE run with the same deadline, TTL and budgets is returned
    unchanged, whenever the retry comes (a retried open is itself, CIS-RETRY-3); a
    live run with other parameters, or cancelled or closed, gives
    INVALID_TRANSITION (a cancelled run is never handed out again, CIS-RUN-3).
    Raises ``ValueError`` for a value outside ``[0, 2**53 - 1]`` (TTL at least 1,
    deadline + TTL within the bound), before anything else is judged; then returns
    RUN_MISMATCH for an unsafe run id.
    """
    check_now(now_ms)  # caller errors first, before the run id is judged
    check_run_parameters(
        deadline_ms=deadline_ms, ttl_ms=ttl_ms, tool_call_budget=tool_call_budget, byte_budget=byte_budget
    )
    if not is_safe_id(run_id):
        return ErrorCode.RUN_MISMATCH
    fresh = RunState(
        run_id=run_id,
        status=RunStatus.ACTIVE,
        opened_at_ms=now_ms,
        deadline_ms=deadline_ms,
        ttl_ms=ttl_ms,
        expires_at_ms=deadline_ms + ttl_ms,
        tool_call_budget=tool_call_budget,
        byte_budget=byte_budget,
    )
    if existing is None or now_ms >= existing.expires_at_ms:
        return fresh
    same = (
        existing.status is RunStatus.ACTIVE
        and existing.run_id == run_id
        and existing.deadline_ms == deadline_ms
        and existing.ttl_ms == ttl_ms
        and existing.tool_call_budget == tool_call_budget
        and existing.byte_budget == byte_budget
    )
    return existing if same else ErrorCode.INVALID_TRANSITION


def _end_run(run: RunState | None, operation: RunOp, now_ms: int) -> RunState | ErrorCode:
    check_now(now_ms)
    if run is None or now_ms >= run.expires_at_ms:
        return ErrorCode.RUN_INACTIVE
    target = RUN_TRANSITIONS.get((run.status, operation))
    if target is None:
        return ErrorCode.INVALID_TRANSITION
    return evolve(run, status=target)


def cancel_run(run: RunState | None, now_ms: int) -> RunState | ErrorCode:
    """ACTIVE -> CANCELLED (CIS-RUN-2); a cancelled run stays so (a retry, CIS-RETRY-3).

    RUN_INACTIVE if absent or expired; INVALID_TRANSITION for a closed run. Raises
    ``ValueError`` when ``now_ms`` is not an int in ``[0, 2**53 - 1]``.
    """
    return _end_run(run, RunOp.CANCEL, now_ms)


def close_run(run: RunState | None, now_ms: int) -> RunState | ErrorCode:
    """ACTIVE -> CLOSED (CIS-RUN-2); a closed run stays so (a retry, CIS-RETRY-3).

    RUN_INACTIVE if absent or expired; INVALID_TRANSITION for a cancelled run. Raises
    ``ValueError`` when ``now_ms`` is not an int in ``[0, 2**53 - 1]``.
    """
    return _end_run(run, RunOp.CLOSE, now_ms)
