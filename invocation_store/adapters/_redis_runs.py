"""Run operations of the Redis store, I/O-free: the script call of an open, cancel or close, and its reply.

Each ``plan_*`` builds a script call from kernel values; each ``finish_*`` turns the
script's reply back into the kernel's answer, re-running the kernel on the run the
script saw, at the time the script reports it decided at (the server's clock,
CIS-STORE-10), and raises :class:`~invocation_store.adapters._redis_decode.CorruptReplyError`
("KernelDisagrees") when the kernel would have answered otherwise (CIS-STORE-8).
Contracts of the scripts: ``_redis_scripts`` (OPEN_RUN_SCRIPT, UNDO_OPEN_SCRIPT,
END_RUN_SCRIPT).
"""

from __future__ import annotations

from typing import NamedTuple

from attrs import frozen

from ..kernel import (
    RUN_TRANSITIONS,
    ErrorCode,
    RunOp,
    RunState,
    RunStatus,
    cancel_run,
    close_run,
    is_safe_id,
    open_run,
)
from ._redis_decode import (
    CODES,
    CorruptReplyError,
    Reply,
    check_int,
    decode_int,
    decode_run,
    decode_text,
    split_words,
)
from ._redis_keys import calls_key, done_key, run_key

__all__ = [
    "EndPlan",
    "OpenPlan",
    "finish_end_run",
    "finish_open",
    "plan_end_run",
    "plan_open",
    "plan_undo_open",
    "takes_back",
]


@frozen(kw_only=True)
class OpenPlan:
    """What ``open_run`` sends: keys, args, and the parameters the kernel re-decides with.

    ``fresh`` is the kernel's run for an absent run at the caller's clock; the
    script stores it opened at its own time (see :func:`finish_open`).
    """

    keys: tuple[str, str, str]
    args: tuple[str, ...]
    fresh: RunState


def plan_open(
    prefix: str,
    run_id: str,
    now_ms: int | None,
    *,
    deadline_ms: int,
    ttl_ms: int,
    tool_call_budget: int,
    byte_budget: int,
    touch: bool = False,
) -> OpenPlan | ErrorCode:
    """Kernel ``open_run`` for an absent run; its code, or the OPEN_RUN_SCRIPT call that stores it.

    ``now_ms`` is the store's given clock, or None: the script decides on the server's
    clock (TIME). ``touch``: a waiting durability mode (an existing run is rewritten
    with itself, so that the wait covers it). Raises ``ValueError`` as the kernel does
    (negative budgets, non-positive TTL) and for integers of 2**53 or more.
    """
    planned_at = 0 if now_ms is None else now_ms
    check_int(planned_at, deadline_ms, ttl_ms, tool_call_budget, byte_budget, deadline_ms + ttl_ms)
    fresh = open_run(
        None,
        run_id=run_id,
        now_ms=planned_at,
        deadline_ms=deadline_ms,
        ttl_ms=ttl_ms,
        tool_call_budget=tool_call_budget,
        byte_budget=byte_budget,
    )
    if isinstance(fresh, ErrorCode):
        return fresh
    values = (
        fresh.run_id,
        fresh.status.value,
        str(fresh.opened_at_ms),
        str(fresh.deadline_ms),
        str(fresh.ttl_ms),
        str(fresh.expires_at_ms),
        str(fresh.tool_call_budget),
        str(fresh.byte_budget),
        str(fresh.tool_calls_used),
        str(fresh.bytes_used),
    )
    return OpenPlan(
        keys=(run_key(prefix, run_id), done_key(prefix, run_id), calls_key(prefix, run_id)),
        args=("" if now_ms is None else str(now_ms), "1" if touch else "", *values),
        fresh=fresh,
    )


def _reopen(plan: OpenPlan, existing: RunState | None, now_ms: int) -> RunState | ErrorCode:
    fresh = plan.fresh
    return open_run(
        existing,
        run_id=fresh.run_id,
        now_ms=now_ms,
        deadline_ms=fresh.deadline_ms,
        ttl_ms=fresh.ttl_ms,
        tool_call_budget=fresh.tool_call_budget,
        byte_budget=fresh.byte_budget,
    )


def _decided_at(items: Reply, index: int) -> int:
    if len(items) <= index:
        raise CorruptReplyError("UnexpectedReply")
    return decode_int(decode_text(items[index]))


def finish_open(plan: OpenPlan, reply: object) -> tuple[RunState | ErrorCode, int]:
    """The kernel's ``open_run`` answer given what the script saw, and the time it decided at (ms).

    FRESH: the kernel's fresh run at the script's time; EXISTING: the stored run,
    which the kernel must return unchanged; ERR: the refusal, which the kernel must
    give too. Raises :class:`CorruptReplyError` otherwise.
    """
    tag, items = split_words(reply)
    if tag == "FRESH":
        if len(items) != 2:
            raise CorruptReplyError("UnexpectedReply")
        now = _decided_at(items, 1)
        fresh = _reopen(plan, None, now)
        return fresh, now
    if tag == "ERR":
        code = _refusal(items)
        now = _decided_at(items, 2)
        existing = decode_run(items[3:], plan.fresh.run_id)
        if _reopen(plan, existing, now) is not code:
            raise CorruptReplyError("KernelDisagrees")
        return code, now
    if tag != "EXISTING":
        raise CorruptReplyError("UnexpectedReply")
    now = _decided_at(items, 1)
    existing = decode_run(items[2:], plan.fresh.run_id)
    result = _reopen(plan, existing, now)
    if result != existing:
        raise CorruptReplyError("KernelDisagrees")
    return result, now


def takes_back(reply: object, opened: RunState, *, resent: bool, not_before_ms: int | None) -> bool:
    """Whether a durable open whose wait failed takes back ``opened``: the run this call stored (CIS-DUR-14).

    FRESH: this attempt stored it. EXISTING after a resend (an earlier attempt's reply
    was lost): that attempt may have stored it, and did if the run was opened no earlier
    than the first attempt was sent (``not_before_ms``: the given clock's reading the
    scripts decide at, or a lower bound of the server's clock then; None: unknown). A
    run found stored by a first attempt is another open's answer, acknowledged to its
    caller, even one decided in the same millisecond: it is never taken back.
    """
    if split_words(reply)[0] == "FRESH":
        return True
    return resent and not_before_ms is not None and opened.opened_at_ms >= not_before_ms


def plan_undo_open(plan: OpenPlan, opened: RunState) -> tuple[tuple[str, str, str], tuple[str, str]]:
    """UNDO_OPEN_SCRIPT's keys and args for the run a FRESH open stored (``opened``)."""
    return plan.keys, (str(opened.opened_at_ms), str(opened.expires_at_ms))


def _refusal(items: Reply) -> ErrorCode:
    """The code of an ``ERR <code> ...`` reply split on spaces; a foreign code is corrupt."""
    if len(items) < 2:
        raise CorruptReplyError("UnexpectedReply")
    code = CODES.get(decode_text(items[1]))
    if code is None:
        raise CorruptReplyError("UnexpectedReply")
    return code


class EndPlan(NamedTuple):
    """What a cancel or close sends to END_RUN_SCRIPT: the run key and ARGV."""

    key: str
    args: tuple[str, str]


def plan_end_run(prefix: str, run_id: str, cancel: bool, now_ms: int | None) -> EndPlan | None:
    """The END_RUN_SCRIPT call of a cancel/close; ``None`` for an unsafe run id (no run).

    ``now_ms`` is the store's given clock, or None: the server's clock.
    """
    if not is_safe_id(run_id):
        return None
    target = RUN_TRANSITIONS[(RunStatus.ACTIVE, RunOp.CANCEL if cancel else RunOp.CLOSE)]
    return EndPlan(run_key(prefix, run_id), ("" if now_ms is None else str(now_ms), target.value))


def finish_end_run(run_id: str, cancel: bool, reply: object) -> tuple[RunState | ErrorCode, int]:
    """The kernel's ``cancel_run``/``close_run`` answer given the run the script saw, and its time (ms)."""
    tag, items = split_words(reply)
    if tag == "ERR":
        # The refusal is re-decided by the kernel on the run the script saw (none: absent).
        code = _refusal(items)
        now = _decided_at(items, 2)
        seen = decode_run(items[3:], run_id) if len(items) > 3 else None
        decided = cancel_run(seen, now) if cancel else close_run(seen, now)
        if decided is not code:
            raise CorruptReplyError("KernelDisagrees")
        return code, now
    if tag != "OK":
        raise CorruptReplyError("UnexpectedReply")
    now = _decided_at(items, 1)
    before = decode_run(items[2:], run_id)
    result = cancel_run(before, now) if cancel else close_run(before, now)
    if not isinstance(result, RunState):
        raise CorruptReplyError("KernelDisagrees")
    return result, now
