"""Effect and visibility vectors: what a store applies and what a reader may see (CIS-SPEC-3).

Theory of operation
-------------------
The lifecycle and rule vectors pin the table and the numbers of each rule. This
module pins the kernel's *effects* and *visibility* rules
(:mod:`invocation_store.kernel._effects`, ``_views``, ``_lifetime``), the answers a
store, a boundary or a reader of another implementation must give alike, as case
tables:

- ``completion`` (``effects.json``, :data:`COMPLETION_CASES`): every effect of one
  completion: the record written, the run's new usage (or none), the bytes charged,
  and whether the id joins the completed-call list (CIS-STORE-3, CIS-RUN-6,
  CIS-PROG-2);
- ``liveness``: ``now < expires_at_ms`` at ``expires_at - 1`` and ``expires_at``,
  and the remaining time ``expires_at_ms - now`` (CIS-TTL-4);
- ``lifetime``: whether a stored key's reported remaining lifetime is intact
  (CIS-DUR-7);
- ``own_create``: whether a same-token replay is the caller's own retried create
  (CIS-RETRY-2);
- ``sweep``: which records a stale sweep offers the SweptStale event (CIS-LIFE-7);
- ``agent_view`` / ``failure_view`` (``views.json``): what the agent sees of a record
  or a refusal (CIS-BND-4, CIS-ERR-1);
- ``well_formed_view``: whether a progress read's view is well formed (CIS-PERF-3,
  CIS-STORE-6).

Every expected outcome is computed by the kernel; the rows only choose inputs, on
both sides of every boundary.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NamedTuple

from attrs import evolve

from ..kernel import (
    MAX_SAFE_INT,
    CanonicalRecord,
    ErrorCode,
    EvidenceStatus,
    Failed,
    ProgressView,
    RawReceived,
    RunState,
    RunStatus,
)
from ._vectors_fixtures import (
    CALL,
    NOW,
    RUN,
    awaiting_raw,
    document,
    done_record,
    error_record,
    projection_event,
    record_json,
    run_json,
    run_state,
    step,
)
from ._vectors_outcomes import vector
from ._vectors_rules import WELL_FORMED_CASES, WELL_FORMED_RUN_CASES

__all__ = ["effect_documents"]


def _effect(
    kind: str, label: str, requirements: list[str], description: str, **inputs: Any
) -> dict[str, Any]:
    return vector(kind, f"{kind.replace('_', '-')}/{label}", requirements, description, **inputs)


# ---------------------------------------------------------------------------
# completion


def _with_raw() -> CanonicalRecord:
    return step(awaiting_raw(), RawReceived(raw_response="RAW", now_ms=NOW + 5))


def _ready() -> CanonicalRecord:
    return step(_with_raw(), projection_event("EVIDENCE_FOUND", "found", "web", NOW + 6))


def _failed() -> CanonicalRecord:
    return step(_with_raw(), Failed(code=ErrorCode.PROJECTION_FAILED, now_ms=NOW + 6))


def _run() -> RunState:
    return run_state(tool_calls_used=1, bytes_used=9)


_LATE: Final = NOW + 600_000 + 60_000 + 10  # a record expiry past the fixture run's


class CompletionCase(NamedTuple):
    """One completion: ``start`` -> ``after`` against ``stored`` and ``run`` at ``now``."""

    label: str
    description: str
    stored: Callable[[], CanonicalRecord | None]
    after: Callable[[], CanonicalRecord]
    run: Callable[[], RunState | None] = _run
    now: int = NOW + 20
    start: Callable[[], CanonicalRecord] = awaiting_raw


#: Every effect of one completion, in file order.
COMPLETION_CASES: Final[tuple[CompletionCase, ...]] = (
    CompletionCase(
        "ready",
        "WRITE READY: charge raw 3 + content 5 + scope 3 = 11; the id joins the list",
        awaiting_raw,
        _ready,
    ),
    CompletionCase(
        "error",
        "WRITE ERROR keeping the raw: charge 3; a terminal record joins the list",
        awaiting_raw,
        _failed,
    ),
    CompletionCase(
        "raw-dropped",
        "WRITE ERROR/RESULT_TOO_LARGE with no raw: record_bytes unchanged, charge max(0, 0) = 0; joins",
        awaiting_raw,
        lambda: step(awaiting_raw(), RawReceived(raw_response="r" * 65, now_ms=NOW + 6)),
    ),
    CompletionCase(
        "raw-received",
        "WRITE the raw response (still PROJECTING): charge 3, not terminal, does not join the list",
        awaiting_raw,
        _with_raw,
    ),
    CompletionCase(
        "smaller-after",
        "an `after` smaller than `before`: the charge is max(0, negative) = 0, never a refund",
        _with_raw,
        lambda: evolve(_failed(), raw_response="RA"),
        start=_with_raw,
    ),
    CompletionCase("replay", "REPLAY: the stored record, no run write, charge 0, no append", _ready, _ready),
    CompletionCase(
        "no-run",
        "no run state: WRITE the record only: no run write, charge 0, no append (no list to join)",
        awaiting_raw,
        _ready,
        run=lambda: None,
    ),
    CompletionCase(
        "other-run",
        "the run state read belongs to another run: no charge, no append",
        awaiting_raw,
        _ready,
        run=lambda: evolve(_run(), run_id="run-2"),
    ),
    CompletionCase(
        "run-last-ms",
        "now = run.expires_at_ms - 1: the run is live, charged, the id joins",
        lambda: evolve(awaiting_raw(), expires_at_ms=_LATE),
        lambda: evolve(_ready(), expires_at_ms=_LATE),
        now=_LATE - 11,
        start=lambda: evolve(awaiting_raw(), expires_at_ms=_LATE),
    ),
    CompletionCase(
        "run-expired",
        "now = run.expires_at_ms: the run lapsed with its lists: WRITE, no charge, no append",
        lambda: evolve(awaiting_raw(), expires_at_ms=_LATE),
        lambda: evolve(_ready(), expires_at_ms=_LATE),
        now=_LATE - 10,
        start=lambda: evolve(awaiting_raw(), expires_at_ms=_LATE),
    ),
    CompletionCase("absent", "nothing stored: INVALID_TRANSITION", lambda: None, _ready),
    CompletionCase(
        "cancelled-run",
        "a live CANCELLED run: WRITE, charged 11 and the id joins the list; the effects ask only that the "
        "run state be live and of the record's run",
        awaiting_raw,
        _ready,
        run=lambda: evolve(_run(), status=RunStatus.CANCELLED),
    ),
    CompletionCase(
        "replay-other-content",
        "the stored terminal record has `after`'s status, code and updated_at_ms but another agent result: "
        "REPLAY of the stored record",
        lambda: evolve(_ready(), agent_result="other"),
        _ready,
    ),
)


def _completion_vectors() -> list[dict[str, Any]]:
    return [
        _effect(
            "completion",
            case.label,
            ["CIS-STORE-3", "CIS-RUN-6", "CIS-PROG-2"],
            case.description,
            stored=record_json(case.stored()),
            before=record_json(case.start()),
            after=record_json(case.after()),
            run=run_json(case.run()),
            now_ms=case.now,
        )
        for case in COMPLETION_CASES
    ]


# ---------------------------------------------------------------------------
# liveness, lifetime, own_create, sweep

_EXPIRES: Final = NOW + 100

#: (label, description, expires_at_ms or None, now).
LIVENESS_CASES: Final[tuple[tuple[str, str, int | None, int], ...]] = (
    ("absent", "nothing stored: not live", None, NOW),
    ("young", "now = expires_at - 2: live, 2 ms left", _EXPIRES, _EXPIRES - 2),
    ("last-ms", "now = expires_at - 1: live, 1 ms left", _EXPIRES, _EXPIRES - 1),
    ("at-expiry", "now = expires_at: expired (absent), nothing left", _EXPIRES, _EXPIRES),
    ("after-expiry", "now = expires_at + 1: expired", _EXPIRES, _EXPIRES + 1),
    ("now-max", "now = 2^53 - 1: a time in range, expired", _EXPIRES, MAX_SAFE_INT),
    ("now-two-to-53", "now = 2^53: a caller error", _EXPIRES, MAX_SAFE_INT + 1),
    ("now-negative", "now = -1: a caller error", _EXPIRES, -1),
)

#: (label, description, the store's report of a key's remaining lifetime).
LIFETIME_CASES: Final[tuple[tuple[str, str, Any], ...]] = (
    ("no-expiry", "no expiry (Redis PTTL -1): corrupt", None),
    ("one-ms", "1 ms left: intact", 1),
    ("lapsed", "0 ms left: lapsed, not corrupt", 0),
    ("negative", "a negative remaining time: lapsed, not corrupt", -5),
    ("boolean", "true is not a time: invalid input", True),
    ("text", "a text is not a time: invalid input", "5"),
    (
        "beyond-53-bits",
        "2^53 + 1 ms left (a binary64 reader sees 2^53): any integer is a report, intact",
        MAX_SAFE_INT + 2,
    ),
    ("minus-beyond-53-bits", "-(2^53 + 1): lapsed, intact", -(MAX_SAFE_INT + 2)),
)


def _request() -> dict[str, Any]:
    record = awaiting_raw()
    return {
        "run_id": record.run_id,
        "tool_call_id": record.tool_call_id,
        "tool_name": record.tool_name,
        "request_json": record.request_json,
        "invocation_token": record.invocation_token,
    }


#: (label, description, the stored record, changes to the fixture request).
OWN_CREATE_CASES: Final[tuple[tuple[str, str, Callable[[], CanonicalRecord], dict[str, Any]], ...]] = (
    ("own", "the PROJECTING record this request creates", awaiting_raw, {}),
    (
        "raw-received",
        "the record has its raw response: it moved on",
        lambda: evolve(awaiting_raw(), raw_response=""),
        {},
    ),
    ("terminal", "the record is ERROR", error_record, {}),
    ("other-token", "another token", awaiting_raw, {"invocation_token": "tok-2"}),
    ("other-run", "another run id", awaiting_raw, {"run_id": "run-2"}),
    ("other-call", "another tool_call_id", awaiting_raw, {"tool_call_id": "call_2"}),
    ("other-tool", "another tool name", awaiting_raw, {"tool_name": "fetch"}),
    ("other-request", "another request text", awaiting_raw, {"request_json": '{"q":"y"}'}),
    (
        "created-later",
        "created after not_before_ms: the store stamped it later than the caller's reading",
        lambda: evolve(awaiting_raw(), created_at_ms=NOW + 1, updated_at_ms=NOW + 1),
        {},
    ),
    (
        "created-earlier",
        "created before not_before_ms: an earlier call that reused the token",
        lambda: evolve(awaiting_raw(), created_at_ms=NOW - 1),
        {},
    ),
    (
        "empty-token",
        "record and request both carry the empty token: an empty token identifies no invocation, so "
        "never an own create (a reading comparing tokens alone says yes)",
        lambda: evolve(awaiting_raw(), invocation_token=""),
        {"invocation_token": ""},
    ),
)


def _sweep_mix() -> list[CanonicalRecord | None]:
    return [
        None,
        awaiting_raw(),
        evolve(awaiting_raw(), run_id="run-2"),
        done_record(CALL),
        step(awaiting_raw(), RawReceived(raw_response="RAW", now_ms=NOW + 1)),
        error_record(),
    ]


_RECORD_EXPIRY: Final = NOW + 60_000

#: (label, description, records, now) of each sweep of the fixture run.
SWEEP_CASES: Final[tuple[tuple[str, str, Callable[[], list[CanonicalRecord | None]], int], ...]] = (
    (
        "mixed",
        "absent, own PROJECTING, another run's PROJECTING, READY, PROJECTING with raw, ERROR: "
        "only the live PROJECTING records of the run, in order",
        _sweep_mix,
        NOW + 50,
    ),
    (
        "last-ms",
        "now = expires_at - 1: the record is live, a candidate",
        lambda: [awaiting_raw()],
        _RECORD_EXPIRY - 1,
    ),
    (
        "at-expiry",
        "now = expires_at: the record is absent, not a candidate",
        lambda: [awaiting_raw()],
        _RECORD_EXPIRY,
    ),
    ("now-two-to-53", "now = 2^53: a caller error", lambda: [awaiting_raw()], MAX_SAFE_INT + 1),
)


def _reader_vectors() -> list[dict[str, Any]]:
    vectors = [
        _effect(
            "liveness",
            label,
            ["CIS-TTL-4", "CIS-TTL-5"],
            description,
            value=None if value is None else {"expires_at_ms": value},
            now_ms=now,
        )
        for label, description, value, now in LIVENESS_CASES
    ]
    vectors += [
        _effect("lifetime", label, ["CIS-DUR-7"], description, remaining_ms=value)
        for label, description, value in LIFETIME_CASES
    ]
    vectors += [
        _effect(
            "own_create",
            label,
            ["CIS-RETRY-2"],
            description,
            record=record_json(record()),
            request={**_request(), **changes},
            not_before_ms=NOW,
        )
        for label, description, record, changes in OWN_CREATE_CASES
    ]
    vectors += [
        _effect(
            "sweep",
            label,
            ["CIS-LIFE-7"],
            description,
            records=[record_json(record) for record in records()],
            run_id=RUN,
            now_ms=now,
        )
        for label, description, records, now in SWEEP_CASES
    ]
    return vectors


# ---------------------------------------------------------------------------
# views.json

#: (label, description, record) of each agent view.
AGENT_VIEW_CASES: Final[tuple[tuple[str, str, Callable[[], CanonicalRecord]], ...]] = (
    ("found", "READY + EVIDENCE_FOUND: the bounded result", lambda: done_record(CALL)),
    (
        "negative",
        "READY + NO_EVIDENCE: a negative observation, with its scope",
        lambda: done_record(CALL, "", "kb", negative=True),
    ),
    ("error", "ERROR: its code and fixed message, no result", error_record),
    (
        "durability",
        "ERROR/DURABILITY_NOT_REACHED: the create was not acknowledged durably",
        lambda: error_record(ErrorCode.DURABILITY_NOT_REACHED),
    ),
    (
        "ready-evidence-error",
        "READY with evidence ERROR: not well formed, never shown: STORE_UNAVAILABLE (CIS-STORE-6; a "
        "reading that shows its own code or INVALID_TRANSITION differs)",
        lambda: evolve(done_record(CALL), evidence_status=EvidenceStatus.ERROR),
    ),
    (
        "error-without-code",
        "ERROR without an error code: not well formed, STORE_UNAVAILABLE",
        lambda: evolve(error_record(), error_code=None),
    ),
    (
        "ready-unsafe-id",
        "a READY record with an unsafe tool_call_id: not well formed, STORE_UNAVAILABLE, the id not echoed",
        lambda: evolve(done_record(CALL), tool_call_id="call 1"),
    ),
    (
        "projecting",
        "PROJECTING (admitted, not finished): CALL_IN_PROGRESS, its fate not known yet (a reading "
        "answering INVALID_TRANSITION differs)",
        awaiting_raw,
    ),
)

#: (label, description, requirements, code, tool_call_id) of each failure view.
FAILURE_VIEW_CASES: Final[tuple[tuple[str, str, list[str], str, Any], ...]] = (
    ("safe-id", "a safe id is echoed", ["CIS-ERR-1"], "DUPLICATE_TOOL_CALL", CALL),
    ("unsafe-id", "an unsafe id is never echoed: null", ["CIS-ERR-1"], "DUPLICATE_TOOL_CALL", "call 1"),
    ("empty-id", "an empty id: null", ["CIS-ERR-1"], "DUPLICATE_TOOL_CALL", ""),
    ("null-id", "no id: null", ["CIS-ERR-1"], "DUPLICATE_TOOL_CALL", None),
    ("number-id", "a number is not an id: null", ["CIS-ERR-1"], "DUPLICATE_TOOL_CALL", 5),
    (
        "durability",
        "DURABILITY_NOT_REACHED with its fixed message",
        ["CIS-ERR-1", "CIS-DUR-2"],
        "DURABILITY_NOT_REACHED",
        CALL,
    ),
    (
        "call-in-progress",
        "CALL_IN_PROGRESS with its fixed message",
        ["CIS-ERR-1", "CIS-ID-5"],
        "CALL_IN_PROGRESS",
        CALL,
    ),
    (
        "unknown-code",
        "a text that names no code of the closed set: a caller error, never a made-up view",
        ["CIS-ERR-1", "CIS-KERN-2"],
        "NOT_A_CODE",
        CALL,
    ),
    (
        "lowercase-code",
        "codes are exact: duplicate_tool_call names no code, a caller error",
        ["CIS-ERR-1", "CIS-KERN-2"],
        "duplicate_tool_call",
        CALL,
    ),
)

#: Well-formedness cases about fields a progress view does not hold (error code, creation time).
_NOT_IN_A_VIEW: Final = frozenset(
    {
        "projecting-code",
        "ready-code",
        "error-no-code",
        "expiry-at-creation",
        "expiry-after-creation",
        "ready-without-raw",
        "empty-token",
        "updated-before-created",
        "created-zero",
        "created-negative",
        "updated-two-to-53",
    }
)


def _raw_held() -> CanonicalRecord:
    return step(awaiting_raw(), RawReceived(raw_response="RAW 1", now_ms=NOW + 1))


#: (label, description, record, include_raw) of each read view.
READ_VIEW_CASES: Final[tuple[tuple[str, str, Callable[[], CanonicalRecord], bool], ...]] = (
    ("with-raw", "raw asked for: the record as stored", _raw_held, True),
    ("without-raw", "raw left out: raw_response is null, every other field as stored", _raw_held, False),
    ("none-stored", "no raw response stored: the record as stored either way", awaiting_raw, False),
)


def _view_vectors() -> list[dict[str, Any]]:
    vectors = [
        _effect("agent_view", label, ["CIS-BND-4", "CIS-ERR-1"], description, record=record_json(record()))
        for label, description, record in AGENT_VIEW_CASES
    ]
    vectors += [
        _effect("failure_view", label, requirements, description, code=code, tool_call_id=tool_call_id)
        for label, description, requirements, code, tool_call_id in FAILURE_VIEW_CASES
    ]
    vectors += [
        _effect(
            "read_view",
            label,
            ["CIS-PROG-5", "CIS-REC-3"],
            description,
            record=record_json(record()),
            include_raw=include_raw,
        )
        for label, description, record, include_raw in READ_VIEW_CASES
    ]
    for label, description, record in WELL_FORMED_CASES:
        if label in _NOT_IN_A_VIEW:
            continue
        view = ProgressView.of(record())
        vectors.append(
            _effect(
                "well_formed_view",
                label,
                ["CIS-PERF-3", "CIS-STORE-6"],
                description,
                view={name: getattr(view, name) for name in ProgressView._fields},
            )
        )
    return vectors


def _run_vectors() -> list[dict[str, Any]]:
    return [
        _effect("well_formed_run", label, ["CIS-STORE-6", "CIS-RUN-1"], description, run=run_json(run()))
        for label, description, run in WELL_FORMED_RUN_CASES
    ]


def effect_documents() -> dict[str, dict[str, Any]]:
    """The effect and visibility documents by file name, built from the kernel."""
    return {
        "effects.json": document(
            "Store effects and visibility, one kernel answer each: `completion` (every write of one "
            "completion: the record, the run's new usage or null, the bytes charged "
            "max(0, record_bytes(after) - record_bytes(before)), whether the id joins the "
            "completed-call list), `liveness` (live iff now < expires_at_ms; remaining "
            "expires_at_ms - now), `lifetime` (a stored key without expiry is corrupt), "
            "`own_create` (a same-token replay is the caller's own create), `sweep` (the "
            "positions of the records a sweep offers SweptStale).",
            [
                "CIS-STORE-3",
                "CIS-RUN-6",
                "CIS-PROG-2",
                "CIS-TTL-4",
                "CIS-DUR-7",
                "CIS-RETRY-2",
                "CIS-LIFE-7",
                "CIS-SPEC-3",
            ],
            {"vectors": [*_completion_vectors(), *_reader_vectors()]},
        ),
        "views.json": document(
            "What a reader may see: `agent_view` (the agent's view of a record), "
            "`failure_view` (of a refusal: code, fixed message, the id only if safe), "
            "`read_view` (what a read returns with and without the raw response), "
            "`well_formed_view` (whether a progress read's nine-field view is well formed) and "
            "`well_formed_run` (whether a run state read back is one the kernel makes).",
            ["CIS-BND-4", "CIS-ERR-1", "CIS-PERF-3", "CIS-STORE-6", "CIS-SPEC-3"],
            {"vectors": [*_view_vectors(), *_run_vectors()]},
        ),
    }
