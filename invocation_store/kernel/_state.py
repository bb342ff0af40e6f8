"""The lifecycle state machine: the only place where transition rules live.

Theory of operation
-------------------
A canonical record moves ``absent -> PROJECTING -> READY | ERROR`` (CIS-LIFE-1).
Inside PROJECTING the kernel tracks one more fact, whether the raw response has
arrived, so the table distinguishes two *phases* of PROJECTING; the stored status is
PROJECTING for both. :data:`TRANSITIONS` maps ``(phase, event type)`` to the phases
the event may lead to; :data:`TABLE` holds the full rows (handler, next phases, the
codes returned instead of a record, the codes an ERROR may carry) and
:func:`transition` dispatches through it. A pair that is not in the table is an
illegal transition and becomes ``ErrorCode.INVALID_TRANSITION`` in exactly one place,
:func:`transition`, which then leaves the record untouched (CIS-LIFE-2).
``spec/transitions.json`` is generated from the table by
``scripts/generate_transitions.py`` and a test keeps it identical (CIS-SPEC-2).

What lives here: events, the table, :func:`transition` and the compare-and-set rule
(:func:`decide_complete`); admission is in :mod:`._admission`, the run lifecycle in
:mod:`._runs`, the effects a store applies in :mod:`._effects`. What never does: I/O,
clocks (``now_ms`` is an input), random numbers (the invocation token comes from the
adapter), logging.

Domain outcomes are values (a record or an :class:`ErrorCode`); exceptions are
raised only for programming errors such as passing a non-event.

Size: one table. The events, each row's handler and the row itself are read together
(a handler away from its row would scatter one rule over two files), and the
compare-and-set is the table's CompareAndSet rule; admission and runs already left.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Callable
from typing import Any, Final, TypeAlias

from attrs import frozen

from ._codes import ErrorCode
from ._ids import check_tool_call_id, is_blank, is_safe_id
from ._models import (
    MAX_SAFE_INT,
    CanonicalRecord,
    EvidenceStatus,
    InvocationStatus,
    Limits,
    Projection,
    check_int,
    check_now,
    is_safe_int,
)
from ._sizes import record_bytes, utf8_len

__all__ = [
    "FAILURE_CODES",
    "IDENTITY_FIELDS",
    "MAX_SAFE_INT",
    "TABLE",
    "TRANSITIONS",
    "Begin",
    "CompareAndSet",
    "Event",
    "Failed",
    "Phase",
    "ProjectionReceived",
    "RawReceived",
    "Row",
    "SweptStale",
    "TransitionResult",
    "check_completion",
    "check_event",
    "decide_complete",
    "is_well_formed",
    "phase_of",
    "transition",
]


class Phase(enum.Enum):
    """Where a record stands in the table (CIS-LIFE-1)."""

    #: No record, or the record has expired (CIS-TTL-4).
    ABSENT = "ABSENT"
    #: PROJECTING, raw response not yet received.
    AWAITING_RAW = "AWAITING_RAW"
    #: PROJECTING, raw response held, projection not yet received.
    AWAITING_PROJECTION = "AWAITING_PROJECTION"
    #: Terminal READY.
    READY = "READY"
    #: Terminal ERROR.
    ERROR = "ERROR"


@frozen(kw_only=True)
class Begin:
    """Create the PROJECTING record (CIS-REC-4). Built by :func:`admit`.

    ``sequence`` is the 1-based admission position; ``ttl_ms`` the run's record TTL;
    ``now_ms`` the creation time. Expiry = ``now_ms + ttl_ms``, set once (CIS-TTL-1).
    """

    run_id: str
    tool_call_id: str
    tool_name: str
    request_json: str
    invocation_token: str
    sequence: int
    ttl_ms: int
    now_ms: int


@frozen(kw_only=True)
class RawReceived:
    """The executor returned ``raw_response`` (complete text) at ``now_ms`` (CIS-SIZE-3)."""

    raw_response: str
    now_ms: int


@frozen(kw_only=True)
class ProjectionReceived:
    """The projector returned ``projection`` at ``now_ms`` (CIS-EVID-2..5)."""

    projection: Projection
    now_ms: int


@frozen(kw_only=True)
class Failed:
    """The call failed with ``code`` (one of :data:`FAILURE_CODES`) at ``now_ms`` (CIS-FAIL-1)."""

    code: ErrorCode
    now_ms: int


@frozen(kw_only=True)
class SweptStale:
    """A sweep at ``now_ms`` for records PROJECTING for ``older_than_ms`` or more (CIS-LIFE-7)."""

    now_ms: int
    older_than_ms: int


Event: TypeAlias = Begin | RawReceived | ProjectionReceived | Failed | SweptStale
TransitionResult: TypeAlias = CanonicalRecord | ErrorCode


#: Codes a :class:`Failed` event may carry (CIS-FAIL-1).
FAILURE_CODES: Final[frozenset[ErrorCode]] = frozenset(
    {
        ErrorCode.EXECUTION_FAILED,
        ErrorCode.EXECUTION_TIMEOUT,
        ErrorCode.SERIALIZATION_FAILED,
        ErrorCode.PROJECTION_FAILED,
        ErrorCode.PROJECTION_INVALID,
        ErrorCode.RESULT_TOO_LARGE,
        ErrorCode.STORE_UNAVAILABLE,
        ErrorCode.DURABILITY_NOT_REACHED,
    }
)

_EVENT_TYPES: Final = (Begin, RawReceived, ProjectionReceived, Failed, SweptStale)
_VALID_EVIDENCE: Final = frozenset({EvidenceStatus.EVIDENCE_FOUND, EvidenceStatus.NO_EVIDENCE})


def is_well_formed(record: CanonicalRecord) -> bool:
    """True if ``record`` is a state some sequence of transitions can produce.

    PROJECTING has no evidence, code, result or scope (CIS-LIFE-5); READY has
    evidence FOUND or NO_EVIDENCE, a result and a scope and no code; ERROR has
    evidence ERROR and a code and no result or scope (CIS-EVID-1); ids are safe;
    the sequence is an int in ``[1, 2**53 - 1]``, the three times ints in
    ``[0, 2**53 - 1]``, and ``expires_at_ms > created_at_ms``. Stores decoding what
    they read (a tampered or corrupted record) answer STORE_UNAVAILABLE when this is
    False (CIS-STORE-6). Nothing else is judged: not the raw response (reads may
    omit it), the token, the tool name, the request text, nor the order of
    ``updated_at_ms`` and ``created_at_ms``.
    """
    status = record.status
    if status is InvocationStatus.PROJECTING:
        outcome_ok = (
            record.evidence_status is None
            and record.error_code is None
            and record.agent_result is None
            and record.scope is None
        )
    elif status is InvocationStatus.READY:
        outcome_ok = (
            record.evidence_status in _VALID_EVIDENCE
            and record.error_code is None
            and isinstance(record.agent_result, str)
            and isinstance(record.scope, str)
        )
    elif status is InvocationStatus.ERROR:
        outcome_ok = (
            record.evidence_status is EvidenceStatus.ERROR
            and isinstance(record.error_code, ErrorCode)
            and record.agent_result is None
            and record.scope is None
        )
    else:
        return False
    return (
        outcome_ok
        and is_safe_id(record.run_id)
        and check_tool_call_id(record.tool_call_id) is None
        and is_safe_int(record.sequence, 1)
        and is_safe_int(record.created_at_ms, 0)
        and is_safe_int(record.updated_at_ms, 0)
        and is_safe_int(record.expires_at_ms, 0)
        and record.expires_at_ms > record.created_at_ms
    )


def phase_of(record: CanonicalRecord | None, now_ms: int) -> Phase:
    """Return the table phase of ``record`` at ``now_ms``; expired reads as ABSENT (CIS-TTL-4)."""
    if record is None or now_ms >= record.expires_at_ms:
        return Phase.ABSENT
    if record.status is InvocationStatus.READY:
        return Phase.READY
    if record.status is InvocationStatus.ERROR:
        return Phase.ERROR
    return Phase.AWAITING_RAW if record.raw_response is None else Phase.AWAITING_PROJECTION


def _record(
    record: CanonicalRecord,
    *,
    status: InvocationStatus,
    evidence_status: EvidenceStatus | None,
    error_code: ErrorCode | None,
    raw_response: str | None,
    agent_result: str | None,
    scope: str | None,
    updated_at_ms: int,
) -> CanonicalRecord:
    """``attrs.evolve(record, ...)`` of the outcome fields, spelled out.

    The identity fields (CIS-LIFE-6) are copied, never taken from the caller. A
    direct constructor call costs a fraction of ``evolve``'s generic machinery and
    this runs several times per invocation.
    """
    return CanonicalRecord(
        run_id=record.run_id,
        tool_call_id=record.tool_call_id,
        tool_name=record.tool_name,
        invocation_token=record.invocation_token,
        sequence=record.sequence,
        status=status,
        evidence_status=evidence_status,
        error_code=error_code,
        request_json=record.request_json,
        raw_response=raw_response,
        agent_result=agent_result,
        scope=scope,
        created_at_ms=record.created_at_ms,
        updated_at_ms=updated_at_ms,
        expires_at_ms=record.expires_at_ms,
    )


def _error(record: CanonicalRecord, code: ErrorCode, now_ms: int, *, keep_raw: bool) -> CanonicalRecord:
    return _record(
        record,
        status=InvocationStatus.ERROR,
        evidence_status=EvidenceStatus.ERROR,
        error_code=code,
        raw_response=record.raw_response if keep_raw else None,
        agent_result=None,
        scope=None,
        updated_at_ms=now_ms,
    )


def check_event(event: Event) -> None:
    """Raise for an event whose fields are outside their domain: a caller error (CIS-KERN-2).

    Every event: ``now_ms`` an int in ``[0, 2**53 - 1]``. Begin: ``ttl_ms`` and
    ``sequence`` ints in ``[1, 2**53 - 1]`` with ``now_ms + ttl_ms`` (the expiry) at
    most ``2**53 - 1``, and ``tool_name``, ``request_json`` and ``invocation_token``
    texts (an empty token is a text: it identifies no invocation, CIS-PRE-8).
    SweptStale: ``older_than_ms`` an int in ``[0, 2**53 - 1]``. Failed: a code of
    :data:`FAILURE_CODES`. Raises ``ValueError`` for a number or code out of range and
    ``TypeError`` for a field of the wrong type. :func:`transition` runs it before the
    table, so a caller error is refused whatever the record's phase.
    """
    now = check_now(event.now_ms)
    if isinstance(event, Begin):
        for name in ("tool_name", "request_json", "invocation_token"):
            if type(getattr(event, name)) is not str:
                raise TypeError(f"Begin.{name} must be a str")
        ttl = check_int("Begin.ttl_ms", event.ttl_ms, 1)
        check_int("Begin.sequence", event.sequence, 1)
        if now + ttl > MAX_SAFE_INT:
            raise ValueError("Begin.now_ms + ttl_ms (the expiry) must be at most 2**53 - 1")
    elif isinstance(event, SweptStale):
        check_int("SweptStale.older_than_ms", event.older_than_ms)
    elif isinstance(event, Failed) and event.code not in FAILURE_CODES:
        raise ValueError(f"{event.code} is not a failure code")


def _begin(event: Begin, limits: Limits) -> TransitionResult:
    check_event(event)
    return _created(
        run_id=event.run_id,
        tool_call_id=event.tool_call_id,
        tool_name=event.tool_name,
        request_json=event.request_json,
        invocation_token=event.invocation_token,
        sequence=event.sequence,
        ttl_ms=event.ttl_ms,
        now_ms=event.now_ms,
        limits=limits,
    )


def _created(
    *,
    run_id: str,
    tool_call_id: str,
    tool_name: str,
    request_json: str,
    invocation_token: str,
    sequence: int,
    ttl_ms: int,
    now_ms: int,
    limits: Limits,
    request_bytes: int | None = None,
) -> TransitionResult:
    """The table's (ABSENT, Begin) row, from the event's fields (admission calls it without an event,
    carrying the request's size it measured: ``request_bytes``, UTF-8 bytes).

    The fields are in their domain: :func:`check_event` judged a Begin's, and
    admission's come from a checked request and the run state (CIS-KERN-2). No
    fallback id ever reaches a record (CIS-ID-6); a record over ``record_bytes`` is
    REQUEST_TOO_LARGE (CIS-SIZE-5).
    """
    id_code = check_tool_call_id(tool_call_id)
    if id_code is not None:
        return id_code  # no fallback id ever reaches a record
    if not is_safe_id(run_id):
        return ErrorCode.RUN_MISMATCH
    record = CanonicalRecord(
        run_id=run_id,
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        invocation_token=invocation_token,
        sequence=sequence,
        status=InvocationStatus.PROJECTING,
        evidence_status=None,
        error_code=None,
        request_json=request_json,
        raw_response=None,
        agent_result=None,
        scope=None,
        created_at_ms=now_ms,
        updated_at_ms=now_ms,
        expires_at_ms=now_ms + ttl_ms,
    )
    if record_bytes(record, request_bytes) > limits.record_bytes:
        return ErrorCode.REQUEST_TOO_LARGE
    return record


def _raw(record: CanonicalRecord, event: RawReceived, limits: Limits) -> CanonicalRecord:
    """The table's (AWAITING_RAW, RawReceived) row: a raw response over ``raw_bytes`` is refused
    whole, never truncated, and the projector never runs (CIS-SIZE-3); one the record cannot hold
    within ``record_bytes`` likewise (CIS-SIZE-5)."""
    raw = event.raw_response
    if type(raw) is not str:
        return _error(record, ErrorCode.SERIALIZATION_FAILED, event.now_ms, keep_raw=False)
    size = utf8_len(raw)
    if size is None:
        return _error(record, ErrorCode.SERIALIZATION_FAILED, event.now_ms, keep_raw=False)
    if size > limits.raw_bytes:
        return _error(record, ErrorCode.RESULT_TOO_LARGE, event.now_ms, keep_raw=False)
    if record_bytes(record) + size > limits.record_bytes:  # before building
        return _error(record, ErrorCode.RESULT_TOO_LARGE, event.now_ms, keep_raw=False)
    return _record(
        record,
        status=record.status,
        evidence_status=record.evidence_status,
        error_code=record.error_code,
        raw_response=raw,
        agent_result=record.agent_result,
        scope=record.scope,
        updated_at_ms=event.now_ms,
    )


def _projection(record: CanonicalRecord, event: ProjectionReceived, limits: Limits) -> CanonicalRecord:
    """The table's (PROJECTING with raw, ProjectionReceived) row: an invalid projection is
    PROJECTION_INVALID (CIS-EVID-5), NO_EVIDENCE needs a scope (CIS-EVID-3), the agent result is
    held to ``agent_result_bytes`` (CIS-SIZE-4) and the record to ``record_bytes`` (CIS-SIZE-5)."""
    projection = event.projection
    now_ms = event.now_ms
    if not isinstance(projection, Projection):
        return _error(record, ErrorCode.PROJECTION_INVALID, now_ms, keep_raw=True)
    status = projection.evidence_status
    if not isinstance(status, str) or status not in _VALID_EVIDENCE:
        return _error(record, ErrorCode.PROJECTION_INVALID, now_ms, keep_raw=True)
    evidence = EvidenceStatus(status)
    content, scope = projection.content, projection.scope
    if type(content) is not str or type(scope) is not str:  # exact str: sizes must not lie
        return _error(record, ErrorCode.PROJECTION_INVALID, now_ms, keep_raw=True)
    if evidence is EvidenceStatus.NO_EVIDENCE and is_blank(scope):
        return _error(record, ErrorCode.PROJECTION_INVALID, now_ms, keep_raw=True)
    content_size, scope_size = utf8_len(content), utf8_len(scope)
    if content_size is None or scope_size is None:
        return _error(record, ErrorCode.PROJECTION_INVALID, now_ms, keep_raw=True)
    if content_size + scope_size > limits.agent_result_bytes:
        return _error(record, ErrorCode.RESULT_TOO_LARGE, now_ms, keep_raw=True)
    if record_bytes(record) + content_size + scope_size > limits.record_bytes:
        return _error(record, ErrorCode.RESULT_TOO_LARGE, now_ms, keep_raw=True)
    return _record(
        record,
        status=InvocationStatus.READY,
        evidence_status=evidence,
        error_code=None,
        raw_response=record.raw_response,
        agent_result=content,
        scope=scope,
        updated_at_ms=now_ms,
    )


#: A row's handler: the live record (``None`` for ABSENT), the event and the limits.
Handler: TypeAlias = Callable[[CanonicalRecord | None, Any, Limits], TransitionResult]


@frozen(kw_only=True)
class Row:
    """One row of the lifecycle table: everything about one (phase, event) pair (CIS-LIFE-1).

    ``handler`` computes the outcome; ``next_phases`` are the phases its record can be
    in; ``returns`` the codes it may return instead of a record (the record then
    unchanged, CIS-LIFE-2); ``error_codes`` the codes an ERROR record it builds may
    carry. ``tests/kernel/test_transition_table.py`` checks every handler keeps to its
    row, and ``spec/transitions.json`` is generated from the rows.
    """

    handler: Handler
    next_phases: frozenset[Phase]
    returns: frozenset[ErrorCode]
    error_codes: frozenset[ErrorCode]


def _on_begin(_record: CanonicalRecord | None, event: Begin, limits: Limits) -> TransitionResult:
    return _begin(event, limits)


def _on_raw(record: CanonicalRecord | None, event: RawReceived, limits: Limits) -> TransitionResult:
    assert record is not None  # every non-Begin row starts from a live record
    return _raw(record, event, limits)


def _on_projection(
    record: CanonicalRecord | None, event: ProjectionReceived, limits: Limits
) -> TransitionResult:
    assert record is not None
    return _projection(record, event, limits)


def _on_failed(record: CanonicalRecord | None, event: Failed, _limits: Limits) -> TransitionResult:
    assert record is not None
    return _error(record, event.code, event.now_ms, keep_raw=True)


def _on_swept(record: CanonicalRecord | None, event: SweptStale, _limits: Limits) -> TransitionResult:
    assert record is not None
    if event.now_ms - record.created_at_ms < event.older_than_ms:
        return ErrorCode.NOT_STALE
    return _error(record, ErrorCode.STALE_PROJECTION, event.now_ms, keep_raw=True)


_NONE: Final[frozenset[ErrorCode]] = frozenset()
_BEGIN_ROW: Final = Row(
    handler=_on_begin,
    next_phases=frozenset({Phase.AWAITING_RAW}),
    returns=frozenset(
        {
            ErrorCode.MISSING_TOOL_CALL_ID,
            ErrorCode.UNSAFE_TOOL_CALL_ID,
            ErrorCode.RUN_MISMATCH,
            ErrorCode.REQUEST_TOO_LARGE,
        }
    ),
    error_codes=_NONE,
)
_RAW_ROW: Final = Row(
    handler=_on_raw,
    next_phases=frozenset({Phase.AWAITING_PROJECTION, Phase.ERROR}),
    returns=_NONE,
    error_codes=frozenset({ErrorCode.RESULT_TOO_LARGE, ErrorCode.SERIALIZATION_FAILED}),
)
_PROJECTION_ROW: Final = Row(
    handler=_on_projection,
    next_phases=frozenset({Phase.READY, Phase.ERROR}),
    returns=_NONE,
    error_codes=frozenset({ErrorCode.PROJECTION_INVALID, ErrorCode.RESULT_TOO_LARGE}),
)
_FAILED_ROW: Final = Row(
    handler=_on_failed,
    next_phases=frozenset({Phase.ERROR}),
    returns=_NONE,
    error_codes=FAILURE_CODES,
)
_SWEPT_ROW: Final = Row(
    handler=_on_swept,
    next_phases=frozenset({Phase.ERROR}),
    returns=frozenset({ErrorCode.NOT_STALE}),
    error_codes=frozenset({ErrorCode.STALE_PROJECTION}),
)

#: The lifecycle table: (phase, event type) -> :class:`Row` (CIS-LIFE-1). A pair that
#: is not here is an illegal transition; :func:`transition` dispatches through it.
TABLE: Final[dict[tuple[Phase, type[Event]], Row]] = {
    (Phase.ABSENT, Begin): _BEGIN_ROW,
    (Phase.AWAITING_RAW, RawReceived): _RAW_ROW,
    (Phase.AWAITING_RAW, Failed): _FAILED_ROW,
    (Phase.AWAITING_RAW, SweptStale): _SWEPT_ROW,
    (Phase.AWAITING_PROJECTION, ProjectionReceived): _PROJECTION_ROW,
    (Phase.AWAITING_PROJECTION, Failed): _FAILED_ROW,
    (Phase.AWAITING_PROJECTION, SweptStale): _SWEPT_ROW,
}

#: The table's next phases only: (phase, event type) -> phases (CIS-LIFE-1).
TRANSITIONS: Final[dict[tuple[Phase, type[Event]], frozenset[Phase]]] = {
    key: row.next_phases for key, row in TABLE.items()
}


def transition(record: CanonicalRecord | None, event: Event, limits: Limits) -> TransitionResult:
    """Apply ``event`` to ``record`` (``None`` = absent) and return the new record or a code (CIS-KERN-2).

    The table decides whether the event is allowed in the record's phase; a pair
    outside it returns ``ErrorCode.INVALID_TRANSITION`` and the caller must keep the
    record exactly as it was (CIS-LIFE-2). An expired record is absent (CIS-TTL-4).
    The result never changes ``expires_at_ms``, ``created_at_ms``, ids, token, tool
    name, request or sequence (CIS-TTL-2, CIS-REC-1).

    Outcomes: Begin -> PROJECTING, or MISSING/UNSAFE_TOOL_CALL_ID, RUN_MISMATCH,
    REQUEST_TOO_LARGE; RawReceived -> PROJECTING with raw, or ERROR with
    RESULT_TOO_LARGE / SERIALIZATION_FAILED (raw not kept); ProjectionReceived ->
    READY, or ERROR with PROJECTION_INVALID / RESULT_TOO_LARGE (raw kept); Failed
    -> ERROR with its code; SweptStale -> ERROR/STALE_PROJECTION or NOT_STALE.

    Raises ``TypeError`` if ``event`` is not a kernel event, and ``ValueError`` or
    ``TypeError`` for a field outside its domain (:func:`check_event`: a time outside
    ``[0, 2**53 - 1]``, a Failed code outside :data:`FAILURE_CODES`, ...), before the
    table is consulted: a caller error is refused whatever the record's phase.
    """
    if not isinstance(event, _EVENT_TYPES):
        raise TypeError(f"not a kernel event: {type(event).__name__}")
    check_event(event)  # caller errors first, whatever the phase
    row = TABLE.get((phase_of(record, event.now_ms), type(event)))
    if row is None:
        return ErrorCode.INVALID_TRANSITION
    return row.handler(record, event, limits)


#: The record fields no completion changes: ids, token, tool name, request, sequence, creation
#: and expiry times (CIS-LIFE-6). Every other field is the completion's to write.
IDENTITY_FIELDS: Final[tuple[str, ...]] = (
    "run_id",
    "tool_call_id",
    "tool_name",
    "invocation_token",
    "sequence",
    "request_json",
    "created_at_ms",
    "expires_at_ms",
)
_identity: Final = operator.attrgetter(*IDENTITY_FIELDS)


class CompareAndSet(enum.Enum):
    """What a store must do with a completion (CIS-STORE-3)."""

    #: Write ``after`` (the stored record is still the one the kernel saw).
    WRITE = "WRITE"
    #: ``after`` is already stored (a retried write): write nothing, report success.
    REPLAY = "REPLAY"


def check_completion(before: CanonicalRecord, after: CanonicalRecord) -> None:
    """Raise ``ValueError`` if ``after`` changes a field no transition changes (CIS-LIFE-6).

    The identity fields (ids, token, tool name, request, sequence, creation and expiry
    times) of ``before`` and ``after`` must be equal: a completion that changes one is
    a programming error, not a domain outcome. :func:`decide_complete` runs it first;
    stores that decide the compare-and-set elsewhere (a Lua script) call it before
    sending.
    """
    if _identity(before) != _identity(after):
        changed = [name for name in IDENTITY_FIELDS if getattr(before, name) != getattr(after, name)]
        raise ValueError(f"a completion may not change {', '.join(changed)} (CIS-LIFE-6)")


def decide_complete(
    stored: CanonicalRecord | None,
    before: CanonicalRecord,
    after: CanonicalRecord,
    now_ms: int,
) -> CompareAndSet | ErrorCode:
    """Decide a store's compare-and-set of ``before`` -> ``after`` (CIS-STORE-3, CIS-RETRY-2, CIS-TTL-2).

    WRITE when ``stored`` is live, PROJECTING and is ``before`` (same invocation
    token and identity fields); REPLAY when ``stored`` is already terminal with ``after``'s status, error
    code, token and update time (a retried write); otherwise INVALID_TRANSITION
    (absent, expired, another invocation, or already completed differently). The
    comparison uses only fields a Redis script can compare cheaply, so every
    adapter decides alike. Raises ``ValueError`` if ``after`` changes a field the
    kernel never changes (identity, token, request, sequence, times of creation
    and expiry), or if ``now_ms`` is not an int in ``[0, 2**53 - 1]``: that is a
    programming error, not a domain outcome. Only the status, error code,
    ``updated_at_ms``, token and identity fields are compared: a stored record that
    differs from ``after`` in its raw response, result, scope or evidence status is
    still a REPLAY.
    """
    check_completion(before, after)
    check_now(now_ms)
    if phase_of(stored, now_ms) is Phase.ABSENT or stored is None:
        return ErrorCode.INVALID_TRANSITION
    if stored.invocation_token != before.invocation_token or (
        stored is not before and _identity(stored) != _identity(before)
    ):
        # Another invocation, or a ``before`` that is not the stored record: writing
        # would let a caller move the expiry or rewrite the request.
        return ErrorCode.INVALID_TRANSITION
    if stored.status is InvocationStatus.PROJECTING:
        return CompareAndSet.WRITE
    if (
        stored.status is after.status
        and stored.error_code == after.error_code
        and stored.updated_at_ms == after.updated_at_ms
    ):
        return CompareAndSet.REPLAY
    return ErrorCode.INVALID_TRANSITION
