"""Admission: a call's creation decided atomically with its run's checks (CIS-PRE-8).

:func:`admit` is what a store runs under its atomicity guarantee (a lock, a Lua
script mirroring it): the same-token replay, the run checks, the duplicate check and
the budget reservation, in the fixed order, then the table's (ABSENT, Begin) row.
:func:`check_begin` is that row's run-independent part; :func:`run_usage_after`
charges what a completion stored. No I/O, no clock (``now_ms`` is an input), no
random numbers (the invocation token comes from the adapter).
"""

from __future__ import annotations

from typing import Final

from attrs import frozen

from ._codes import ErrorCode
from ._models import CanonicalRecord, InvocationStatus, Limits, RunState, RunStatus, check_now
from ._sizes import outcome_bytes, utf8_len
from ._state import Phase, _created, check_completion, phase_of

__all__ = [
    "DUPLICATE_CODES",
    "Admission",
    "AdmissionRequest",
    "admit",
    "charge",
    "check_begin",
    "check_request",
    "duplicate_code",
    "run_usage_after",
]


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
    adapter-drawn retry token (CIS-RETRY-1). It carries no time: the store admits
    at its own clock's reading, taken inside its atomic step (CIS-STORE-10), so that
    callers whose clocks differ are decided alike.
    """

    run_id: str
    tool_call_id: str
    tool_name: str
    request_json: str
    invocation_token: str


@frozen(kw_only=True)
class Admission:
    """A successful admission and every effect a store applies for it (CIS-PRE-8, CIS-STORE-2).

    Unless ``replayed``: store ``run`` (the run's new usage: one more call and the
    request's UTF-8 bytes), store ``record`` (the new PROJECTING record) with a
    lifetime of ``record.expires_at_ms - record.created_at_ms`` ms, and, when
    ``append_call``, append ``record.tool_call_id`` to the run's call list (which
    lives and lapses with the run state). ``replayed`` True: the key already held
    this very invocation (same token), a retried create recognised as itself;
    ``record`` is the stored record, ``run`` the stored run state, and nothing is
    written (CIS-RETRY-2).
    """

    run: RunState
    record: CanonicalRecord
    replayed: bool = False

    @property
    def append_call(self) -> bool:
        """True when the store appends ``record.tool_call_id`` to the run's call list (not on a replay)."""
        return not self.replayed


def duplicate_code(existing: CanonicalRecord) -> ErrorCode:
    """The answer to a call whose key holds the live record ``existing`` of another invocation (CIS-ID-5).

    The code tells the harness the call's fate, so that a call made once is never
    told it was made twice while its tool never ran: CALL_IN_PROGRESS while
    ``existing`` is PROJECTING (admitted, not finished: its worker may still run it,
    or have died, see CIS-LIFE-7); the record's own code when it is ERROR with
    STALE_PROJECTION (abandoned) or DURABILITY_NOT_REACHED (the tool did not run);
    DUPLICATE_TOOL_CALL otherwise (READY, or ERROR after the tool ran).
    """
    if existing.status is InvocationStatus.PROJECTING:
        return ErrorCode.CALL_IN_PROGRESS
    code = existing.error_code
    if existing.status is InvocationStatus.ERROR and code is not None and code in _FATE_CODES:
        return code
    return ErrorCode.DUPLICATE_TOOL_CALL


#: ERROR codes a duplicate is answered with, because DUPLICATE_TOOL_CALL would say the
#: tool ran when it did not (DURABILITY_NOT_REACHED) or may not have (STALE_PROJECTION).
_FATE_CODES: frozenset[ErrorCode] = frozenset({ErrorCode.STALE_PROJECTION, ErrorCode.DURABILITY_NOT_REACHED})

#: Every code :func:`duplicate_code` can answer: admission's check 9 (CIS-PRE-2, CIS-ID-5).
DUPLICATE_CODES: Final[frozenset[ErrorCode]] = frozenset(
    {ErrorCode.DUPLICATE_TOOL_CALL, ErrorCode.CALL_IN_PROGRESS, *_FATE_CODES}
)


def admit(
    run: RunState | None,
    existing: CanonicalRecord | None,
    request: AdmissionRequest,
    limits: Limits,
    now_ms: int,
    *,
    request_bytes: int | None = None,
) -> Admission | ErrorCode:
    """Decide creation atomically with the run checks, in the fixed order (CIS-PRE-8).

    Stores call this under their atomicity guarantee (a lock, a Lua script mirroring
    it), with ``run`` and ``existing`` as stored and ``now_ms`` the store's own clock
    read inside that step (CIS-STORE-10). Caller errors first (:func:`check_request`:
    ``ValueError``/``TypeError``). Then: same-token replay (the live record under the
    key carries the request's non-empty token, whatever its status, and the run
    state is live: nothing written) -> RUN_INACTIVE (no run state, expired,
    cancelled or closed) -> RUN_MISMATCH -> RUN_DEADLINE_EXCEEDED
    (``now_ms >= deadline_ms``) -> the duplicate answer of :func:`duplicate_code`
    (DUPLICATE_TOOL_CALL, CALL_IN_PROGRESS, STALE_PROJECTION or
    DURABILITY_NOT_REACHED) -> TOOL_BUDGET_EXHAUSTED -> RUN_BYTES_EXHAUSTED. A
    duplicate therefore never consumes budget. On success the run's counters grow by
    one call and the request's UTF-8 bytes; the returned :class:`Admission` lists
    every effect. ``request_bytes``: the request's size when the caller measured it
    already (``utf8_len(request.request_json)``, None if it has no UTF-8 form: the
    caller's measure of it before its atomic step, CIS-SIZE-1); measured here when
    omitted.
    """
    check_request(request, now_ms)
    live = existing if phase_of(existing, now_ms) is not Phase.ABSENT else None
    run_live = run is not None and now_ms < run.expires_at_ms
    if (
        live is not None
        and request.invocation_token
        and live.invocation_token == request.invocation_token
        and run_live
    ):
        assert run is not None
        return Admission(run=run, record=live, replayed=True)
    if run is None or not run_live or run.status is not RunStatus.ACTIVE:
        return ErrorCode.RUN_INACTIVE
    if run.run_id != request.run_id:
        return ErrorCode.RUN_MISMATCH
    if now_ms >= run.deadline_ms:
        return ErrorCode.RUN_DEADLINE_EXCEEDED
    if live is not None:
        return duplicate_code(live)
    if run.tool_calls_used + 1 > run.tool_call_budget:
        return ErrorCode.TOOL_BUDGET_EXHAUSTED
    request_size = utf8_len(request.request_json) if request_bytes is None else request_bytes
    if request_size is None:
        return ErrorCode.INVALID_ARGUMENTS
    if run.bytes_used + request_size > run.byte_budget:
        return ErrorCode.RUN_BYTES_EXHAUSTED
    result = _created(  # the table's (ABSENT, Begin) row: live is None here
        run_id=request.run_id,
        tool_call_id=request.tool_call_id,
        tool_name=request.tool_name,
        request_json=request.request_json,
        invocation_token=request.invocation_token,
        sequence=run.tool_calls_used + 1,
        ttl_ms=run.ttl_ms,
        now_ms=now_ms,
        limits=limits,
        request_bytes=request_size,
    )
    if isinstance(result, ErrorCode):
        return result
    new_run = _run(
        run,
        status=run.status,
        tool_calls_used=run.tool_calls_used + 1,
        bytes_used=run.bytes_used + request_size,
    )
    return Admission(run=new_run, record=result)


def check_request(request: AdmissionRequest, now_ms: object) -> None:
    """Raise for a caller error in an admission: ``now_ms`` not an int in ``[0, 2**53 - 1]``
    (``ValueError``), or a tool name, request text or token that is not a text (``TypeError``).

    The ids are not caller errors: a non-text or unsafe id is a domain outcome
    (MISSING_TOOL_CALL_ID, UNSAFE_TOOL_CALL_ID, RUN_MISMATCH; CIS-ID-6). :func:`admit`
    runs this first, so a caller error is refused whatever the run and the record.
    """
    check_now(now_ms)
    for name in ("tool_name", "request_json", "invocation_token"):
        if type(getattr(request, name)) is not str:
            raise TypeError(f"AdmissionRequest.{name} must be a str")


def check_begin(
    request: AdmissionRequest, limits: Limits, *, request_bytes: int | None = None
) -> ErrorCode | None:
    """The run-independent outcome of the table's (ABSENT, Begin) row for ``request``.

    ``None`` when Begin would create the record; else MISSING_TOOL_CALL_ID or
    UNSAFE_TOOL_CALL_ID (CIS-ID-6), RUN_MISMATCH for an unsafe run id, or
    REQUEST_TOO_LARGE when the new record would exceed ``limits.record_bytes``
    (CIS-SIZE-5). None of these depend on the run, the sequence or the TTL, so a
    store whose atomic step cannot run the kernel (a Lua script) decides them before
    it sends the step; :func:`admit` reaches the same answer. ``request_bytes``: the
    request's size when the caller measured it already (its UTF-8 bytes), carried
    into :func:`admit` too. Raises ``TypeError`` for a tool name, request text or
    token that is not a text (:func:`check_request`).
    """
    check_request(request, 0)  # the Begin row's caller errors: its texts (a placeholder time)
    result = _created(  # the table's (ABSENT, Begin) row; sequence, TTL and time are placeholders
        run_id=request.run_id,
        tool_call_id=request.tool_call_id,
        tool_name=request.tool_name,
        request_json=request.request_json,
        invocation_token=request.invocation_token,
        sequence=1,
        ttl_ms=1,
        now_ms=0,
        limits=limits,
        request_bytes=request_bytes,
    )
    return result if isinstance(result, ErrorCode) else None


def run_usage_after(run: RunState, before: CanonicalRecord, after: CanonicalRecord) -> RunState:
    """Charge the bytes a completion stored to the run's byte budget (CIS-RUN-6).

    The charge is :func:`charge` (``record_bytes(after) - record_bytes(before)`` when
    positive). It never refuses a completion; it makes later admissions see the spend.
    Raises ``ValueError`` when ``after`` changes an identity field (not a completion).
    """
    return charged(run, charge(before, after))


def charge(before: CanonicalRecord, after: CanonicalRecord) -> int:
    """The UTF-8 bytes a completion ``before -> after`` adds to its run's ``bytes_used`` (CIS-RUN-6).

    ``record_bytes(after) - record_bytes(before)`` when positive, else 0: the raw
    response, agent result and scope the completion stored. Computed once per
    completion and carried (kernel ``decide_completion`` gives it to the run and to
    the effect). A completion keeps the identity (ids, tool name, request: kernel
    ``check_completion``, which raises ``ValueError`` for a pair that changes one), so
    those sizes cancel out and only the outcome texts are measured
    (:func:`~._sizes.outcome_bytes`): the request is never measured again.
    """
    check_completion(before, after)
    delta = outcome_bytes(after) - outcome_bytes(before)
    return delta if delta > 0 else 0


def charged(run: RunState, charge_bytes: int) -> RunState:
    """``run`` with ``charge_bytes`` (>= 0) more bytes used; ``run`` itself when nothing is charged."""
    if not charge_bytes:
        return run
    return _run(
        run, status=run.status, tool_calls_used=run.tool_calls_used, bytes_used=run.bytes_used + charge_bytes
    )
