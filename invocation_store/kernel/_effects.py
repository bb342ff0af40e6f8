"""Store effects and visibility: what a store must apply, and what a reader may see.

Theory of operation
-------------------
The lifecycle table (:mod:`._state`) decides whether a record may move. This module
turns those decisions into *effects*, the complete list of writes a store makes for
one operation, and answers every visibility question a store, the boundary, the
stateful model or the oracle would otherwise answer inline:

- :func:`is_live` / :func:`live` / :func:`remaining_ms` / :func:`lapsed`: a record or run is visible
  while ``now_ms < expires_at_ms``; at or after its expiry it reads as absent
  (CIS-TTL-4), and what it has left is ``expires_at_ms - now_ms``.
- :func:`decide_completion`: the compare-and-set of a completion with its
  bookkeeping: the record to store, the run's new usage (charged only while the run
  is live, CIS-RUN-6) and whether the id joins the run's completed list (terminal
  records of a live run only, CIS-PROG-1), or REPLAY, or a code (CIS-STORE-3).
- :func:`completion_charge`: the bytes one completion adds to the run byte budget.
- :func:`is_own_create`: the boundary's test that a same-token replay is its own
  retried create (CIS-RETRY-2).
- :func:`sweep_candidates`: the records a stale sweep moves to ERROR (CIS-LIFE-7).
- :func:`agent_view` / :func:`failure_view`: the agent-facing view of a record or a
  refusal: a bounded result or one stable code, never raw data (CIS-BND-4, CIS-ERR-1).

A store applies an effect; it never re-derives one. Lua scripts mirror these
functions (to be atomic) and name the one they mirror; adapters re-check every
reply against them. Nothing here does I/O, reads a clock or draws random numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

from attrs import evolve, frozen

from ._admission import AdmissionRequest, charge, charged
from ._codes import ERROR_MESSAGES, ErrorCode
from ._ids import is_safe_id
from ._models import CanonicalRecord, EvidenceStatus, InvocationStatus, RunState, check_now
from ._state import CompareAndSet, decide_complete, is_well_formed

__all__ = [
    "AgentView",
    "Completion",
    "agent_view",
    "completion_charge",
    "decide_completion",
    "failure_view",
    "is_live",
    "is_own_create",
    "lapsed",
    "live",
    "remaining_ms",
    "sweep_candidates",
    "without_raw",
]


class _Expiring(Protocol):
    @property
    def expires_at_ms(self) -> int: ...


_T = TypeVar("_T", bound=_Expiring)


def is_live(value: _Expiring | None, now_ms: int) -> bool:
    """True if ``value`` (a record or a run state) exists and ``now_ms < expires_at_ms``.

    The single expiry rule (CIS-TTL-4): at ``now_ms == expires_at_ms`` the value has
    lapsed and reads as absent. Times are integer milliseconds; a ``now_ms`` that is
    not an int in ``[0, 2**53 - 1]`` raises ``ValueError`` (as in :func:`live` and
    :func:`remaining_ms`).
    """
    return value is not None and check_now(now_ms) < value.expires_at_ms


def lapsed(value: _Expiring, now_ms: int) -> bool:
    """True if the stored ``value`` (a record or run state) has lapsed at ``now_ms``: it may be deleted.

    The lapse rule (CIS-TTL-4): a stored value is deleted only when the store's own
    clock (CIS-STORE-10) says it lapsed (``now_ms >= expires_at_ms``, the negation of
    :func:`is_live`); a run's call and completed lists lapse with the run state, and
    every record of a run lapses before the run itself (a record is created before the
    run's deadline and lives ``ttl_ms``; the run state lives until deadline + ttl).
    """
    return not is_live(value, now_ms)


def live(value: _T | None, now_ms: int) -> _T | None:
    """``value`` if it is live at ``now_ms`` (see :func:`is_live`), else ``None``."""
    return value if value is not None and check_now(now_ms) < value.expires_at_ms else None


def remaining_ms(value: _Expiring | None, now_ms: int) -> int | None:
    """Milliseconds ``value`` (a record or run) has left at ``now_ms``: ``expires_at_ms - now_ms``.

    ``None`` when it is absent or no longer live (see :func:`is_live`); otherwise at
    least 1 (CIS-TTL-4, CIS-TTL-5).
    """
    if value is None or check_now(now_ms) >= value.expires_at_ms:
        return None
    return value.expires_at_ms - now_ms


def completion_charge(before: CanonicalRecord, after: CanonicalRecord) -> int:
    """UTF-8 bytes a completion ``before -> after`` adds to the run byte budget (CIS-RUN-6).

    ``max(0, record_bytes(after) - record_bytes(before))``: the raw response, agent
    result and scope the completion stored. Never negative. Raises ``ValueError`` when
    ``after`` changes an identity field (kernel ``check_completion``).
    """
    return charge(before, after)


@frozen(kw_only=True)
class Completion:
    """Every effect a store applies for one completion (CIS-STORE-3, CIS-RUN-6, CIS-PROG-1).

    ``action`` WRITE: store ``record`` under its key keeping the key's TTL, store
    ``run`` when it is not ``None`` (the run's new usage), and append
    ``record.tool_call_id`` to the run's completed list when ``append_done``.
    ``action`` REPLAY: a retried write already applied; ``record`` is the stored
    record; write nothing. ``charge_bytes`` is what ``run`` adds to ``bytes_used``
    (0 when the run is not live or on REPLAY).
    """

    action: CompareAndSet
    record: CanonicalRecord
    run: RunState | None
    charge_bytes: int
    append_done: bool


def decide_completion(
    stored: CanonicalRecord | None,
    before: CanonicalRecord,
    after: CanonicalRecord,
    run: RunState | None,
    now_ms: int,
) -> Completion | ErrorCode:
    """Decide a completion and all its bookkeeping (CIS-STORE-3, CIS-RUN-6, CIS-PROG-1).

    ``stored`` is the record the store holds (``None`` if absent), ``run`` the run
    state it holds, ``now_ms`` the store's time. The compare-and-set is
    :func:`~._state.decide_complete`'s: INVALID_TRANSITION unless ``stored`` is live
    and is ``before`` (WRITE) or already holds ``after`` (REPLAY). On WRITE the run
    is charged :func:`completion_charge` bytes and a terminal record joins the
    completed list, both only while ``run`` is live and belongs to the record's run:
    a lapsed run's lists lapsed with it. Raises ``ValueError`` (from
    ``decide_complete``) if ``after`` changes an identity field.
    """
    decision = decide_complete(stored, before, after, now_ms)
    if isinstance(decision, ErrorCode):
        return decision
    if decision is CompareAndSet.REPLAY:
        assert stored is not None  # REPLAY is decided on a live stored record
        return Completion(action=decision, record=stored, run=None, charge_bytes=0, append_done=False)
    current = live(run, now_ms)
    if current is None or current.run_id != after.run_id:
        return Completion(action=decision, record=after, run=None, charge_bytes=0, append_done=False)
    charge_bytes = charge(before, after)  # measured once: for the run and for the effect
    return Completion(
        action=decision,
        record=after,
        run=charged(current, charge_bytes),
        charge_bytes=charge_bytes,
        append_done=after.terminal,
    )


def is_own_create(record: CanonicalRecord, request: AdmissionRequest, not_before_ms: int) -> bool:
    """True if ``record`` is exactly the PROJECTING record ``request`` creates (CIS-RETRY-2).

    A same-token admission replay is the caller's own retried create only if the
    record has not moved since: PROJECTING, no raw response, the token, ids, tool
    name and request text all equal the request's, and it was created at or after
    ``not_before_ms`` (integer ms on the store's clock: a reading the caller took
    before it sent its first attempt, so an earlier call that reused the token is
    not mistaken for this one). The creation time itself is the store's (CIS-STORE-10).
    An empty token identifies no invocation (CIS-PRE-8): never an own create. Raises
    ``ValueError`` when ``not_before_ms`` is not an int in ``[0, 2**53 - 1]``.
    """
    check_now(not_before_ms)
    return (
        request.invocation_token != ""
        and record.created_at_ms >= not_before_ms
        and record.status is InvocationStatus.PROJECTING
        and record.raw_response is None
        and record.invocation_token == request.invocation_token
        and record.run_id == request.run_id
        and record.tool_call_id == request.tool_call_id
        and record.tool_name == request.tool_name
        and record.request_json == request.request_json
    )


def without_raw(record: CanonicalRecord) -> CanonicalRecord:
    """``record`` with ``raw_response`` None: what a read that leaves out raw responses returns (CIS-PROG-5).

    The raw response is harness-only and the largest field; reads for progress and
    citations never need it. A store that does not read it back returns exactly this.
    """
    return record if record.raw_response is None else evolve(record, raw_response=None)


def sweep_candidates(
    records: Iterable[CanonicalRecord | None], run_id: str, now_ms: int
) -> tuple[CanonicalRecord, ...]:
    """The live PROJECTING records of run ``run_id`` among ``records`` (CIS-LIFE-7).

    A sweep offers each of them a ``SweptStale`` event; the table then decides by age
    (``now_ms - created_at_ms >= older_than_ms`` moves it to ERROR/STALE_PROJECTION,
    else NOT_STALE). Order is kept; ``None`` entries (absent records) are skipped.
    Raises ``ValueError`` when ``now_ms`` is not an int in ``[0, 2**53 - 1]``.
    """
    check_now(now_ms)
    return tuple(
        record
        for record in records
        if record is not None
        and record.run_id == run_id
        and record.status is InvocationStatus.PROJECTING
        and now_ms < record.expires_at_ms
    )


@frozen(kw_only=True)
class AgentView:
    """The agent-facing view of one call (CIS-BND-4, CIS-ERR-1): a bounded result or a code.

    Success (a READY record): ``ok`` True, ``evidence_status`` EVIDENCE_FOUND or
    NO_EVIDENCE, ``content`` the bounded agent result, ``scope`` what the tool
    covered, ``negative`` True for NO_EVIDENCE. Failure: ``ok`` False, ``code`` and
    its fixed ``message`` (:data:`~._codes.ERROR_MESSAGES`). ``tool_call_id`` is the
    id when it is safe to show, else ``None``. Never raw data.
    """

    ok: bool
    tool_call_id: str | None
    code: ErrorCode | None = None
    message: str | None = None
    evidence_status: EvidenceStatus | None = None
    content: str | None = None
    scope: str | None = None
    negative: bool = False


def failure_view(code: ErrorCode, tool_call_id: object) -> AgentView:
    """The view of a refused or failed call: ``code``, its fixed message, the id if safe (CIS-ERR-1)."""
    echo = tool_call_id if isinstance(tool_call_id, str) and is_safe_id(tool_call_id) else None
    return AgentView(ok=False, tool_call_id=echo, code=code, message=ERROR_MESSAGES[code])


def agent_view(record: CanonicalRecord) -> AgentView:
    """The view of a record (CIS-BND-4).

    A record that is not well formed (:func:`~._state.is_well_formed`, CIS-LIFE-5) is
    never shown: STORE_UNAVAILABLE, as a store answers a read of it (CIS-STORE-6).
    READY: the bounded result (evidence FOUND or NO_EVIDENCE, content, scope).
    PROJECTING (admitted, not finished): CALL_IN_PROGRESS, its fate not known yet
    (CIS-ID-5). ERROR: its code and fixed message. The raw response is never part of
    it; the id only when it is a safe id.
    """
    if not is_well_formed(record):
        return failure_view(ErrorCode.STORE_UNAVAILABLE, record.tool_call_id)
    if record.status is InvocationStatus.READY:
        return AgentView(
            ok=True,
            tool_call_id=record.tool_call_id,
            evidence_status=record.evidence_status,
            content=record.agent_result,
            scope=record.scope,
            negative=record.evidence_status is EvidenceStatus.NO_EVIDENCE,
        )
    if record.status is InvocationStatus.PROJECTING:
        return failure_view(ErrorCode.CALL_IN_PROGRESS, record.tool_call_id)
    assert record.error_code is not None  # a well-formed ERROR record carries its code
    return failure_view(record.error_code, record.tool_call_id)
