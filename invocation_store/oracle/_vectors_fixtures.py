"""Shared fixtures of the conformance vectors: constants, JSON forms, records, runs (CIS-SPEC-3).

Theory of operation
-------------------
Every vector module builds its cases from the values here and nothing else: the
fixture call (run ``run-1``, call ``call_1``, tool ``search``, request
``{"q":"x"}``), the small limits most vectors use, a run state, records in each
phase built by the kernel's own transitions, and the JSON forms of kernel values
(the codec's: every field by name, enums as their exact strings). This module
imports nothing from the other vector modules, so they form a tree: fixtures, then
the outcomes (:mod:`._vectors_outcomes`, how a vector is run), then one module of
case tables per family of rules, then :mod:`._vectors`, which assembles the files.

Times are integer ms (``NOW`` is an epoch time in 2023), sizes UTF-8 bytes.
"""

from __future__ import annotations

from typing import Any, Final

from attrs import evolve

from .. import codec
from ..kernel import (
    Begin,
    CanonicalRecord,
    ErrorCode,
    EvidenceStatus,
    Failed,
    Limits,
    Phase,
    Projection,
    ProjectionReceived,
    RawReceived,
    RunState,
    RunStatus,
    SweptStale,
    phase_of,
    transition,
)
from ..kernel import Event as KernelEvent

__all__ = [
    "ADMIT_NOW",
    "CALL",
    "EVENT_NOW",
    "LIMITS",
    "NOW",
    "REQUEST",
    "ROOMY",
    "RUN",
    "TOOL",
    "TTL",
    "VECTOR_FORMAT",
    "VECTOR_VERSION",
    "Event",
    "awaiting_raw",
    "begin_event",
    "document",
    "done_record",
    "error_record",
    "event_from_json",
    "event_json",
    "existing_record",
    "in_phase",
    "limits_from_json",
    "projecting",
    "projection_event",
    "record_from_json",
    "record_json",
    "run_from_json",
    "run_json",
    "run_state",
    "sample_event",
    "step",
]

#: The ``format`` of every vector document.
VECTOR_FORMAT: Final = "canonical-invocation-vectors"
#: The vector format version.
VECTOR_VERSION: Final = 1

#: The fixture clock: integer ms since the epoch.
NOW: Final = 1_700_000_000_000
#: The fixture run's record TTL, ms.
TTL: Final = 60_000
RUN: Final = "run-1"
CALL: Final = "call_1"
TOOL: Final = "search"
#: The fixture arguments: 9 UTF-8 bytes.
REQUEST: Final = '{"q":"x"}'
#: Small limits keep the vectors short; a vector that needs others carries its own.
LIMITS: Final = Limits(
    request_bytes=64,
    raw_bytes=64,
    agent_result_bytes=32,
    record_bytes=512,
    max_json_depth=4,
    max_facts=3,
    max_fact_bytes=64,
)
#: Limits roomy enough that only the rule under test can fail.
ROOMY: Final = evolve(LIMITS, request_bytes=16_384, record_bytes=65_536)
#: When admission vectors admit: 1 s after the fixture records were created.
ADMIT_NOW: Final = NOW + 1000
#: When the table's sample events happen.
EVENT_NOW: Final = NOW + 10

Event = Begin | RawReceived | ProjectionReceived | Failed | SweptStale


# ---------------------------------------------------------------------------
# JSON forms of kernel values (and back)


def record_json(record: CanonicalRecord | None) -> dict[str, Any] | None:
    """A record as JSON: every field by name, enums as strings (the codec's form)."""
    return None if record is None else codec.unstructure(record)


def record_from_json(obj: dict[str, Any] | None) -> CanonicalRecord | None:
    """The inverse of :func:`record_json` (strict: raises :class:`~invocation_store.codec.CodecError`)."""
    return None if obj is None else codec.record_from_obj(obj)


def run_json(run: RunState | None) -> dict[str, Any] | None:
    """A run state as JSON (the codec's form)."""
    return None if run is None else codec.unstructure(run)


def run_from_json(obj: dict[str, Any] | None) -> RunState | None:
    """The inverse of :func:`run_json` (strict)."""
    return None if obj is None else codec.run_state_from_obj(obj)


def event_json(event: Event) -> dict[str, Any]:
    """An event as JSON: ``{"type": <class name>, <fields>}`` (the codec's tagged union)."""
    obj: dict[str, Any] = codec.converter.unstructure(event, KernelEvent)
    return obj


def event_from_json(obj: dict[str, Any]) -> Event:
    """The inverse of :func:`event_json` (strict)."""
    return codec.event_from_obj(obj)


def limits_from_json(obj: dict[str, int]) -> Limits:
    """Limits from their JSON form (strict: every limit a positive integer)."""
    return codec.limits_from_obj(obj)


def document(description: str, requirements: list[str], body: dict[str, Any]) -> dict[str, Any]:
    """One vector file: format, version, provenance, what it pins, and its ``body``."""
    return {
        "format": VECTOR_FORMAT,
        "version": VECTOR_VERSION,
        "generated_by": "scripts/generate_vectors.py (from invocation_store.kernel; do not edit by hand)",
        "description": description,
        "requirements": requirements,
        **body,
    }


# ---------------------------------------------------------------------------
# Events, records and runs


def begin_event(now: int = NOW, **changes: Any) -> Begin:
    """The fixture call's Begin at ``now`` (token ``tok-1``, sequence 1, TTL :data:`TTL`)."""
    event = Begin(
        run_id=RUN,
        tool_call_id=CALL,
        tool_name=TOOL,
        request_json=REQUEST,
        invocation_token="tok-1",  # noqa: S106 - a retry token, not a credential
        sequence=1,
        ttl_ms=TTL,
        now_ms=now,
    )
    return evolve(event, **changes)


def step(record: CanonicalRecord | None, event: Any, limits: Limits = LIMITS) -> CanonicalRecord:
    """The record ``event`` makes of ``record``; raises ``AssertionError`` on a refusal."""
    result = transition(record, event, limits)
    assert isinstance(result, CanonicalRecord)
    return result


def projection_event(status: str, content: str, scope: str, now: int = NOW + 10) -> ProjectionReceived:
    """A ProjectionReceived of ``status``, ``content`` and ``scope`` at ``now``."""
    return ProjectionReceived(
        projection=Projection(evidence_status=status, content=content, scope=scope), now_ms=now
    )


def awaiting_raw() -> CanonicalRecord:
    """The fixture call's new PROJECTING record, created at :data:`NOW` (26 record bytes)."""
    return step(None, begin_event(NOW))


def projecting(raw: str = "RAW", **changes: Any) -> CanonicalRecord:
    """The fixture record holding ``raw`` (AWAITING_PROJECTION), updated at ``NOW + 1``."""
    return evolve(awaiting_raw(), raw_response=raw, updated_at_ms=NOW + 1, **changes)


def error_record(code: ErrorCode = ErrorCode.EXECUTION_FAILED) -> CanonicalRecord:
    """The fixture record failed with ``code`` at ``NOW + 1`` before its raw response."""
    return step(awaiting_raw(), Failed(code=code, now_ms=NOW + 1))


def done_record(
    tool_call_id: str,
    content: str = "found",
    scope: str = "web",
    *,
    negative: bool = False,
    sequence: int = 1,
) -> CanonicalRecord:
    """A READY record of ``tool_call_id`` (raw ``RAW``; NO_EVIDENCE when ``negative``)."""
    record = step(
        step(awaiting_raw(), RawReceived(raw_response="RAW", now_ms=NOW + 1)),
        projection_event("NO_EVIDENCE" if negative else "EVIDENCE_FOUND", content, scope, NOW + 2),
        evolve(ROOMY, agent_result_bytes=1024),
    )
    return evolve(record, tool_call_id=tool_call_id, sequence=sequence)


def existing_record(token: str = "tok-first", *, expires_at_ms: int | None = None) -> CanonicalRecord:  # noqa: S107
    """A PROJECTING record of another invocation under the fixture key (``token``)."""
    record = step(None, begin_event(NOW, invocation_token=token))
    return record if expires_at_ms is None else evolve(record, expires_at_ms=expires_at_ms)


def in_phase(phase: Phase) -> CanonicalRecord | None:
    """A record of the fixture call in ``phase`` (None for ABSENT), live at ``NOW + 3``."""
    if phase is Phase.ABSENT:
        return None
    record = step(None, begin_event())
    if phase is Phase.AWAITING_RAW:
        return record
    record = step(record, RawReceived(raw_response="RAW", now_ms=NOW + 1))
    if phase is Phase.AWAITING_PROJECTION:
        return record
    if phase is Phase.READY:
        event: Event = ProjectionReceived(
            projection=Projection(
                evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="found", scope="web"
            ),
            now_ms=NOW + 2,
        )
    else:
        event = Failed(code=ErrorCode.PROJECTION_FAILED, now_ms=NOW + 2)
    record = step(record, event)
    assert phase_of(record, NOW + 3) is phase
    return record


def ready_record() -> CanonicalRecord:
    """The fixture call READY with EVIDENCE_FOUND (expires at ``NOW + TTL``)."""
    record = in_phase(Phase.READY)
    assert record is not None
    return record


def sample_event(event_type: type[Any], now: int = EVENT_NOW) -> Event:
    """One canonical instance of each event type, at ``now``."""
    samples: dict[type[Any], Event] = {
        Begin: begin_event(now),
        RawReceived: RawReceived(raw_response="RAW", now_ms=now),
        ProjectionReceived: ProjectionReceived(
            projection=Projection(
                evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="found", scope="web"
            ),
            now_ms=now,
        ),
        Failed: Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=now),
        SweptStale: SweptStale(now_ms=now, older_than_ms=0),
    }
    return samples[event_type]


def run_state(status: RunStatus = RunStatus.ACTIVE, **changes: Any) -> RunState:
    """The fixture run: opened at NOW, deadline NOW + 600 s, budgets 3 calls and 1000 bytes."""
    run = RunState(
        run_id=RUN,
        status=status,
        opened_at_ms=NOW,
        deadline_ms=NOW + 600_000,
        ttl_ms=TTL,
        expires_at_ms=NOW + 600_000 + TTL,
        tool_call_budget=3,
        byte_budget=1000,
    )
    return evolve(run, **changes)


#: The open parameters of the fixture run (:func:`run_state`).
RUN_PARAMETERS: Final[dict[str, Any]] = {
    "run_id": RUN,
    "deadline_ms": NOW + 600_000,
    "ttl_ms": TTL,
    "tool_call_budget": 3,
    "byte_budget": 1000,
}
