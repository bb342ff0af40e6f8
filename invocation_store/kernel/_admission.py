"""Admission: a call's creation decided atomically with its run's checks (CIS-PRE-8).

:func:`admit` is what a store runs under its atomicity guarantee (a lock, a Lua
script mirroring it): the same-token replay, the run checks, the duplicate check and
the budget reservation, in the fixed order, then the table's (ABSENT, Begin) row.
:func:`check_begin` is that row's run-independent part; :func:`run_usage_after`
charges what a completion stored. No I/O, no clock (``now_ms`` is an input), no
random numbers (the invocation token comes from the adapter).
"""

from __future__ import annotations

from attrs import frozen

from ._codes import ErrorCode
from ._models import CanonicalRecord, Limits, RunState, RunStatus
from ._sizes import record_bytes, utf8_len
from ._state import Begin, Phase, _begin, phase_of

__all__ = ["Admission", "AdmissionRequest", "admit", "check_begin", "run_usage_after"]


def _run(run: RunState, *, status: RunStatus, tool_calls_used: int, bytes_used: int) -> RunState:
    """``attrs.evolve(run, ...)`` of the mutable run fields, spelled out (see :func:`_record`)."""
    return RunState(
        run_id=run.run_id,
        status=status,
        opened_at_ms=run.opened_at_ms,
        deadline_ms=run.deadline_ms,
        ttl_ms=run.ttl_ms,
        expires_at_ms=run.expires_at_ms,
        tool_call_budget=run.tool_call_budget,
        byte_budget=run.byte_budget,
        tool_calls_used=tool_calls_used,
        bytes_used=bytes_used,
    )


@frozen(kw_only=True)
class AdmissionRequest:
    """What the store needs to admit one preflight-passed call (CIS-PRE-8).

    ``request_json`` is the exact arguments text; ``invocation_token`` the
    adapter-drawn retry token (CIS-RETRY-1); ``now_ms`` the admission time.
    """

    run_id: str
    tool_call_id: str
    tool_name: str
    request_json: str
    invocation_token: str
    now_ms: int


@frozen(kw_only=True)
class Admission:
    """A successful admission: the new run state and the new PROJECTING record.

    ``replayed`` is True when the key already held this very invocation (same
    token): a retried create recognised as itself, nothing written (CIS-RETRY-2).
    """

    run: RunState
    record: CanonicalRecord
    replayed: bool = False


def admit(
    run: RunState | None,
    existing: CanonicalRecord | None,
    request: AdmissionRequest,
    limits: Limits,
) -> Admission | ErrorCode:
    """Decide creation atomically with the run checks, in the fixed order (CIS-PRE-8).

    Stores call this under their atomicity guarantee (a lock, a Lua script mirroring
    it). Order: same-token replay -> RUN_INACTIVE (no run, expired, cancelled or
    closed) -> RUN_DEADLINE_EXCEEDED (``now_ms >= deadline_ms``) ->
    DUPLICATE_TOOL_CALL -> TOOL_BUDGET_EXHAUSTED -> RUN_BYTES_EXHAUSTED. A duplicate
    therefore never consumes budget. On success the run's counters grow by one call
    and the request's UTF-8 bytes.
    """
    now_ms = request.now_ms
    live = existing if phase_of(existing, now_ms) is not Phase.ABSENT else None
    if (
        live is not None
        and request.invocation_token
        and live.invocation_token == request.invocation_token
        and run is not None
    ):
        return Admission(run=run, record=live, replayed=True)
    if run is None or run.status is not RunStatus.ACTIVE or now_ms >= run.expires_at_ms:
        return ErrorCode.RUN_INACTIVE
    if run.run_id != request.run_id:
        return ErrorCode.RUN_MISMATCH
    if now_ms >= run.deadline_ms:
        return ErrorCode.RUN_DEADLINE_EXCEEDED
    if live is not None:
        return ErrorCode.DUPLICATE_TOOL_CALL
    if run.tool_calls_used + 1 > run.tool_call_budget:
        return ErrorCode.TOOL_BUDGET_EXHAUSTED
    request_size = utf8_len(request.request_json)
    if request_size is None:
        return ErrorCode.INVALID_ARGUMENTS
    if run.bytes_used + request_size > run.byte_budget:
        return ErrorCode.RUN_BYTES_EXHAUSTED
    begin = Begin(
        run_id=request.run_id,
        tool_call_id=request.tool_call_id,
        tool_name=request.tool_name,
        request_json=request.request_json,
        invocation_token=request.invocation_token,
        sequence=run.tool_calls_used + 1,
        ttl_ms=run.ttl_ms,
        now_ms=now_ms,
    )
    result = _begin(begin, limits)  # the table's (ABSENT, Begin) row: live is None here
    if isinstance(result, ErrorCode):
        return result
    new_run = _run(
        run,
        status=run.status,
        tool_calls_used=run.tool_calls_used + 1,
        bytes_used=run.bytes_used + request_size,
    )
    return Admission(run=new_run, record=result)


def check_begin(request: AdmissionRequest, limits: Limits) -> ErrorCode | None:
    """The run-independent outcome of the table's (ABSENT, Begin) row for ``request``.

    ``None`` when Begin would create the record; else MISSING_TOOL_CALL_ID or
    UNSAFE_TOOL_CALL_ID (CIS-ID-6), RUN_MISMATCH for an unsafe run id, or
    REQUEST_TOO_LARGE when the new record would exceed ``limits.record_bytes``
    (CIS-SIZE-5). None of these depend on the run, the sequence or the TTL, so a
    store whose atomic step cannot run the kernel (a Lua script) decides them before
    it sends the step; :func:`admit` reaches the same answer.
    """
    result = _begin(
        Begin(
            run_id=request.run_id,
            tool_call_id=request.tool_call_id,
            tool_name=request.tool_name,
            request_json=request.request_json,
            invocation_token=request.invocation_token,
            sequence=1,
            ttl_ms=1,
            now_ms=request.now_ms,
        ),
        limits,
    )
    return result if isinstance(result, ErrorCode) else None


def run_usage_after(run: RunState, before: CanonicalRecord, after: CanonicalRecord) -> RunState:
    """Charge the bytes a completion stored to the run's byte budget (CIS-RUN-6).

    The charge is ``record_bytes(after) - record_bytes(before)`` when positive. It
    never refuses a completion; it makes later admissions see the spend.
    """
    delta = record_bytes(after) - record_bytes(before)
    if delta <= 0:
        return run
    return _run(
        run, status=run.status, tool_calls_used=run.tool_calls_used, bytes_used=run.bytes_used + delta
    )
