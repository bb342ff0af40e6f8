"""Boundary vectors: both sides of every numeric and ordering rule of the kernel (CIS-SPEC-3).

Theory of operation
-------------------
:mod:`._vectors_lifecycle` covers the *shape* of the kernel (every table row, every
illegal pair, every pair of preflight checks) and :mod:`._vectors_preflight` the
preflight checks' own edges. This module covers the other rules' *numbers*: for each
rule that compares a quantity with a limit, the case just inside, at, and just
outside (limit - 1, limit, limit + 1; an age equal to the sweep threshold; a budget
reached exactly), and for each rival reading an implementer could pick (counting
characters instead of UTF-8 bytes, ages from the last update instead of creation, a
content-only agent result, ...) a case the rival reading fails; the description
names it. Cases are data rows (:data:`LIMIT_CASES`, :data:`COMPLETE_CASES`,
:data:`CITE_CASES`, :data:`PROGRESS_CASES`, ...); every expected outcome is computed
by the kernel.

Documents (file name -> vector kinds):

- ``limits.json`` (``transition``): record, raw and agent-result limits, blank
  scopes, the projection step's order, sweep ages, record expiry;
- ``completion.json`` (``complete``): the compare-and-set and the byte charge;
- ``references.json`` (``cite``, ``progress``): citations and progress facts;
- ``run_lifecycle.json`` (``run``): open, re-open, cancel and close at their edges;
- ``well_formed.json`` (``well_formed``), ``keys.json`` (``keys``) and
  ``invalid_input.json`` (caller errors beside the valid input just inside each bound).

Size: data. Case tables, one row per vector; each builder is a few lines that turn
rows into vectors. Its length is the number of boundaries the spec pins down.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, Final, NamedTuple

from attrs import evolve

from ..kernel import (
    MAX_SAFE_INT,
    CanonicalRecord,
    ErrorCode,
    EvidenceStatus,
    ExclusionReason,
    Failed,
    Limits,
    Projection,
    ProjectionReceived,
    RawReceived,
    RunState,
    RunStatus,
    SweptStale,
)
from ._vectors_fixtures import (
    CALL,
    LIMITS,
    NOW,
    RUN,
    RUN_PARAMETERS,
    TTL,
    awaiting_raw,
    begin_event,
    document,
    done_record,
    error_record,
    event_json,
    projecting,
    projection_event,
    record_json,
    run_json,
    run_state,
    step,
)
from ._vectors_lifecycle import TransitionCase, run_op_vector, transition_vector
from ._vectors_outcomes import vector
from ._views import limits_view

__all__ = ["WELL_FORMED_CASES", "WELL_FORMED_RUN_CASES", "rule_documents"]

_AT: Final = NOW + 10  # when the limit vectors' events happen
_EXPIRY: Final = NOW + TTL  # when the fixture records lapse


# ---------------------------------------------------------------------------
# limits.json


class LimitSection(NamedTuple):
    """Transition cases sharing an id prefix and requirements."""

    prefix: str
    requirements: list[str]
    cases: tuple[TransitionCase, ...]


def _raw(text: Any, now: int = _AT) -> RawReceived:
    return RawReceived(raw_response=text, now_ms=now)


def _bad_projection(content: Any, scope: Any) -> ProjectionReceived:
    return ProjectionReceived(
        projection=Projection(evidence_status="EVIDENCE_FOUND", content=content, scope=scope), now_ms=_AT
    )


def _blank_scope(label: str, value: str) -> TransitionCase:
    return TransitionCase(
        f"scope/blank-{label}",
        "NO_EVIDENCE with a blank scope: PROJECTION_INVALID",
        projecting,
        projection_event("NO_EVIDENCE", "", value),
    )


def _invalid_part(label: str, content: Any, scope: Any, description: str) -> TransitionCase:
    return TransitionCase(
        f"projection/{label}",
        f"{description}: PROJECTION_INVALID, raw kept",
        projecting,
        _bad_projection(content, scope),
    )


_RECORD_26: Final = evolve(LIMITS, record_bytes=26)
_OVER_REQUEST: Final = '{"q":"' + "x" * 62 + '"}'  # 70 bytes


def _not_a_projection(value: Any) -> dict[str, Any]:
    """The JSON of a ProjectionReceived whose ``projection`` member is ``value`` (any JSON value)."""
    return {"type": "ProjectionReceived", "projection": value, "now_ms": _AT}


_BLANKS: Final = (("empty", ""), ("tab", "\t"), ("lf", "\n"), ("vt", "\x0b"), ("ff", "\x0c"), ("cr", "\r"))

#: The transition cases of ``limits.json``, by section, in file order.
LIMIT_SECTIONS: Final[tuple[LimitSection, ...]] = (
    LimitSection(
        "record",
        ["CIS-SIZE-5"],
        (
            TransitionCase(
                "begin-at",
                "run_id 5 + tool_call_id 6 + tool_name 6 + request 9 = 26 bytes, limit 26: created "
                "(a reading that also counts the token refuses it)",
                None,
                begin_event(_AT),
                _RECORD_26,
            ),
            TransitionCase(
                "begin-over",
                "26 bytes against 25: REQUEST_TOO_LARGE (a reading that leaves out the ids admits it)",
                None,
                begin_event(_AT),
                evolve(LIMITS, record_bytes=25),
            ),
            TransitionCase(
                "begin-utf8",
                "a tool name of 7 UTF-8 bytes (6 characters): 27 bytes against 26",
                None,
                begin_event(_AT, tool_name="s\u00e9arch"),
                _RECORD_26,
            ),
            TransitionCase(
                "raw-at",
                "26 + raw 30 = 56 = the limit: raw stored",
                awaiting_raw,
                _raw("r" * 30),
                evolve(LIMITS, record_bytes=56),
            ),
            TransitionCase(
                "raw-over",
                "26 + raw 31 = 57 > 56: ERROR/RESULT_TOO_LARGE, raw not stored",
                awaiting_raw,
                _raw("r" * 31),
                evolve(LIMITS, record_bytes=56),
            ),
            TransitionCase(
                "projection-at",
                "26 + raw 3 + content 5 + scope 3 = 37 = the limit: READY",
                projecting,
                projection_event("EVIDENCE_FOUND", "found", "web"),
                evolve(LIMITS, record_bytes=37),
            ),
            TransitionCase(
                "projection-over",
                "37 bytes against 36: ERROR/RESULT_TOO_LARGE, raw kept (a reading that "
                "leaves out the raw response admits it)",
                projecting,
                projection_event("EVIDENCE_FOUND", "found", "web"),
                evolve(LIMITS, record_bytes=36),
            ),
        ),
    ),
    LimitSection(
        "begin",
        ["CIS-SIZE-5", "CIS-SIZE-2", "CIS-REC-4"],
        (
            TransitionCase(
                "request-over-request-limit",
                "a Begin whose request (70 bytes) is over request_bytes (64) but whose record (87 bytes) is "
                "within the record limit: created; the request limit is preflight's check 3, not Begin's "
                "(a reading that applies it here refuses it)",
                None,
                begin_event(_AT, request_json=_OVER_REQUEST),
            ),
            TransitionCase(
                "empty-token",
                "an empty invocation token is a text: created (it identifies no invocation, CIS-PRE-8)",
                None,
                begin_event(_AT, invocation_token=""),
            ),
        ),
    ),
    LimitSection(
        "begin-order",
        ["CIS-ID-6", "CIS-SIZE-5", "CIS-LIFE-2"],
        (
            TransitionCase(
                "missing-id-before-run-id",
                "a blank tool_call_id and an unsafe run id: MISSING_TOOL_CALL_ID, the id is checked first "
                "(a reading checking the run id first says RUN_MISMATCH)",
                None,
                begin_event(_AT, tool_call_id="", run_id="run{1}"),
            ),
            TransitionCase(
                "unsafe-id-before-run-id",
                "an unsafe tool_call_id and an unsafe run id: UNSAFE_TOOL_CALL_ID",
                None,
                begin_event(_AT, tool_call_id="call 1", run_id="run{1}"),
            ),
            TransitionCase(
                "id-before-record-limit",
                "an unsafe tool_call_id and a record over its limit: UNSAFE_TOOL_CALL_ID",
                None,
                begin_event(_AT, tool_call_id="call 1"),
                evolve(LIMITS, record_bytes=25),
            ),
            TransitionCase(
                "run-id-before-record-limit",
                "an unsafe run id and a record over its limit: RUN_MISMATCH",
                None,
                begin_event(_AT, run_id="run{1}"),
                evolve(LIMITS, record_bytes=25),
            ),
            TransitionCase(
                "phase-before-id",
                "a Begin with an unsafe id on a live record: INVALID_TRANSITION, the table is consulted "
                "before the event's ids",
                awaiting_raw,
                begin_event(_AT, tool_call_id="call 1"),
            ),
        ),
    ),
    LimitSection(
        "raw",
        ["CIS-SIZE-3", "CIS-SIZE-1"],
        (
            *(
                TransitionCase(
                    f"ascii-{n}", f"a raw response of {n} bytes, limit 64", awaiting_raw, _raw("r" * n)
                )
                for n in (63, 64, 65)
            ),
            TransitionCase(
                "utf8-64", "32 characters of U+00E9 = 64 bytes: stored", awaiting_raw, _raw("\u00e9" * 32)
            ),
            TransitionCase(
                "utf8-66",
                "33 characters = 66 bytes: too large (a reading counting characters stores it)",
                awaiting_raw,
                _raw("\u00e9" * 33),
            ),
        ),
    ),
    LimitSection(
        "raw",
        ["CIS-SIZE-3", "CIS-SIZE-1", "CIS-LIFE-1"],
        (
            TransitionCase(
                "empty",
                "an empty raw response is a raw response: AWAITING_PROJECTION",
                awaiting_raw,
                _raw(""),
            ),
        ),
    ),
    LimitSection(
        "raw",
        ["CIS-LIFE-1"],
        (
            TransitionCase(
                "empty-then-projection",
                'raw_response "" is present: the record awaits its projection',
                lambda: projecting(""),
                projection_event("EVIDENCE_FOUND", "found", "web"),
            ),
        ),
    ),
    LimitSection(
        "raw",
        ["CIS-LIFE-1", "CIS-LIFE-2"],
        (
            TransitionCase(
                "empty-then-raw",
                'raw_response "" is present: a second raw is illegal',
                lambda: projecting(""),
                _raw("RAW"),
            ),
        ),
    ),
    LimitSection(
        "result",
        ["CIS-SIZE-4"],
        (
            TransitionCase(
                "at",
                "content 29 + scope 3 = 32 = the agent result limit: READY",
                projecting,
                projection_event("EVIDENCE_FOUND", "c" * 29, "web"),
            ),
            TransitionCase(
                "one-over",
                "content 30 + scope 3 = 33 > 32: ERROR/RESULT_TOO_LARGE",
                projecting,
                projection_event("EVIDENCE_FOUND", "c" * 30, "web"),
            ),
            TransitionCase(
                "scope-counts",
                "content 20 + scope 13 = 33 > 32 (a content-only reading accepts it)",
                projecting,
                projection_event("EVIDENCE_FOUND", "c" * 20, "s" * 13),
            ),
            TransitionCase(
                "utf8",
                "16 characters of U+00E9 (32 bytes) + scope 1 = 33 > 32",
                projecting,
                projection_event("EVIDENCE_FOUND", "\u00e9" * 16, "w"),
            ),
        ),
    ),
    LimitSection(
        "",
        ["CIS-EVID-3"],
        (
            *(
                _blank_scope(label, value)
                for label, value in (*_BLANKS, ("space", " "), ("all-six", " \t\n\x0b\x0c\r"))
            ),
            *(
                TransitionCase(
                    f"scope/not-blank-U+{ord(value):04X}",
                    f"U+{ord(value):04X} is not a blank code point: READY",
                    projecting,
                    projection_event("NO_EVIDENCE", "", value),
                )
                for value in ("\u00a0", "\u3000", "\u200b")
            ),
            TransitionCase(
                "scope/kept-exactly",
                "a padded scope is kept exactly, never trimmed",
                projecting,
                projection_event("NO_EVIDENCE", "", " kb "),
            ),
        ),
    ),
    LimitSection(
        "",
        ["CIS-EVID-2"],
        (
            TransitionCase(
                "scope/found-without-scope",
                "EVIDENCE_FOUND needs no scope",
                projecting,
                projection_event("EVIDENCE_FOUND", "found", ""),
            ),
        ),
    ),
    LimitSection(
        "",
        ["CIS-EVID-2", "CIS-EVID-5"],
        (
            _invalid_part("content-null", None, "web", "content that is not text"),
            _invalid_part("scope-number", "found", 7, "a scope that is not text"),
            _invalid_part("content-lone-surrogate", "bad \ud800", "web", "content with no UTF-8 form"),
            _invalid_part("scope-lone-surrogate", "found", "bad \ud800", "a scope with no UTF-8 form"),
            *(
                TransitionCase(
                    f"projection/{label}",
                    f"{description}: not a projection, ERROR/PROJECTION_INVALID with the raw response kept "
                    "(a reading that calls it a caller error refuses the event)",
                    projecting,
                    _not_a_projection(value),
                )
                for label, value, description in (
                    ("text", "found", "a text"),
                    ("null", None, "null"),
                    ("number", 7, "a number"),
                    ("list", ["EVIDENCE_FOUND", "found", "web"], "a list"),
                    (
                        "extra-member",
                        {
                            "evidence_status": "EVIDENCE_FOUND",
                            "content": "found",
                            "scope": "web",
                            "raw": "RAW",
                        },
                        "an object with a member besides evidence_status, content and scope",
                    ),
                    (
                        "missing-scope",
                        {"evidence_status": "EVIDENCE_FOUND", "content": "found"},
                        "an object without its scope member",
                    ),
                )
            ),
        ),
    ),
    LimitSection(
        "order",
        ["CIS-EVID-2", "CIS-EVID-3", "CIS-SIZE-4"],
        (
            TransitionCase(
                "status-before-size",
                "an invalid evidence status and an oversized content: PROJECTION_INVALID (status first)",
                projecting,
                projection_event("MAYBE", "c" * 40, "web"),
            ),
            TransitionCase(
                "blank-scope-before-size",
                "NO_EVIDENCE with a blank scope and an oversized content: PROJECTION_INVALID (scope first)",
                projecting,
                projection_event("NO_EVIDENCE", "c" * 40, " "),
            ),
            TransitionCase(
                "utf8-before-size",
                "content with no UTF-8 form and over the limit: PROJECTION_INVALID (UTF-8 first)",
                projecting,
                projection_event("EVIDENCE_FOUND", "\ud800" * 40, "web"),
            ),
            TransitionCase(
                "types-before-size",
                "content that is not text and a scope over the limit: PROJECTION_INVALID (types first)",
                projecting,
                _bad_projection(7, "s" * 40),
            ),
            *(
                TransitionCase(
                    f"{label}-before-record-size",
                    f"{what} and a record over its 30-byte limit: PROJECTION_INVALID, not RESULT_TOO_LARGE",
                    projecting,
                    event,
                    evolve(LIMITS, record_bytes=30),
                )
                for label, what, event in (
                    ("status", "an invalid evidence status", projection_event("MAYBE", "found", "web")),
                    ("types", "content that is not text", _bad_projection(None, "web")),
                    (
                        "blank-scope",
                        "NO_EVIDENCE with a blank scope",
                        projection_event("NO_EVIDENCE", "found", " "),
                    ),
                    (
                        "utf8",
                        "content with no UTF-8 form",
                        projection_event("EVIDENCE_FOUND", "\ud800", "web"),
                    ),
                )
            ),
        ),
    ),
    LimitSection(
        "order",
        ["CIS-FAIL-4", "CIS-SIZE-3"],
        (
            TransitionCase(
                "raw-utf8-before-size",
                "a raw response with no UTF-8 form and over the limit: SERIALIZATION_FAILED (UTF-8 first)",
                awaiting_raw,
                _raw("\ud800" * 40),
            ),
            TransitionCase(
                "raw-utf8-before-record-size",
                "a raw response with no UTF-8 form and a record over its limit: SERIALIZATION_FAILED",
                awaiting_raw,
                _raw("\ud800" * 5),
                evolve(LIMITS, record_bytes=30),
            ),
            TransitionCase(
                "raw-not-text",
                "a raw response that is not text (a number): SERIALIZATION_FAILED, nothing stored",
                awaiting_raw,
                _raw(7),
            ),
        ),
    ),
    LimitSection(
        "evidence",
        ["CIS-EVID-5"],
        (
            TransitionCase(
                "lowercase",
                "evidence status strings are exact: evidence_found is invalid",
                projecting,
                projection_event("evidence_found", "found", "web"),
            ),
        ),
    ),
    LimitSection(
        "sweep",
        ["CIS-LIFE-7"],
        (
            TransitionCase(
                "age-equals",
                "age = now - created_at = 10 = older_than: stale",
                awaiting_raw,
                SweptStale(now_ms=_AT, older_than_ms=10),
            ),
            TransitionCase(
                "age-one-less",
                "age 10 < older_than 11: NOT_STALE",
                awaiting_raw,
                SweptStale(now_ms=_AT, older_than_ms=11),
            ),
            TransitionCase(
                "age-one-more",
                "age 10 > older_than 9: stale",
                awaiting_raw,
                SweptStale(now_ms=_AT, older_than_ms=9),
            ),
            TransitionCase(
                "from-creation",
                "created 10 ms ago, updated 9 ms ago, older_than 10: stale (a reading "
                "measuring from the last update says NOT_STALE)",
                projecting,
                SweptStale(now_ms=_AT, older_than_ms=10),
            ),
            TransitionCase(
                "zero",
                "older_than 0 sweeps a record created now",
                awaiting_raw,
                SweptStale(now_ms=NOW, older_than_ms=0),
            ),
        ),
    ),
    LimitSection(
        "expiry",
        ["CIS-TTL-4"],
        (
            TransitionCase(
                "raw-last-ms",
                "now = expires_at - 1: the record is live",
                awaiting_raw,
                _raw("RAW", _EXPIRY - 1),
            ),
            TransitionCase(
                "raw-at", "now = expires_at: the record is absent", awaiting_raw, _raw("RAW", _EXPIRY)
            ),
            TransitionCase(
                "projection-at",
                "now = expires_at: absent",
                projecting,
                projection_event("EVIDENCE_FOUND", "found", "web", _EXPIRY),
            ),
            TransitionCase(
                "failed-last-ms",
                "now = expires_at - 1: live",
                awaiting_raw,
                Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=_EXPIRY - 1),
            ),
            TransitionCase(
                "sweep-at",
                "now = expires_at: absent",
                awaiting_raw,
                SweptStale(now_ms=_EXPIRY, older_than_ms=0),
            ),
            TransitionCase(
                "begin-at",
                "a Begin at the old record's expiry creates a new record",
                awaiting_raw,
                begin_event(_EXPIRY),
            ),
        ),
    ),
    LimitSection(
        "expiry",
        ["CIS-TTL-4", "CIS-LIFE-2"],
        (
            TransitionCase(
                "begin-last-ms",
                "a Begin while the old record lives is illegal",
                awaiting_raw,
                begin_event(_EXPIRY - 1),
            ),
        ),
    ),
)


def _limits_document() -> dict[str, Any]:
    vectors = [
        transition_vector(
            "limits/" + (f"{section.prefix}/" if section.prefix else "") + case.label,
            section.requirements,
            case.description,
            None if case.before is None else case.before(),
            case.event,
            case.limits,
        )
        for section in LIMIT_SECTIONS
        for case in section.cases
    ]
    return document(
        "Limits and ages at their edges, as transition vectors (run as transitions.json): the whole "
        "record size, the raw and agent-result limits at limit - 1, limit and limit + 1, blank "
        "scopes by code point, the sweep age from creation with age = threshold, and record expiry "
        "at expires_at - 1 and expires_at.",
        ["CIS-SIZE-3", "CIS-SIZE-4", "CIS-SIZE-5", "CIS-EVID-3", "CIS-LIFE-7", "CIS-TTL-4", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


# ---------------------------------------------------------------------------
# completion.json


def _with_raw() -> CanonicalRecord:
    return step(awaiting_raw(), _raw("RAW", NOW + 5))


def _ready() -> CanonicalRecord:
    return step(_with_raw(), projection_event("EVIDENCE_FOUND", "found", "web", NOW + 6))


def _failed() -> CanonicalRecord:
    return step(_with_raw(), Failed(code=ErrorCode.PROJECTION_FAILED, now_ms=NOW + 6))


def _wide_ready() -> CanonicalRecord:
    return step(
        step(awaiting_raw(), _raw("\u00e9\u00e9", NOW + 5)),
        projection_event("NO_EVIDENCE", "", "\u00e9", NOW + 6),
    )


def _one_byte() -> CanonicalRecord:
    return step(
        step(awaiting_raw(), _raw("R", NOW + 5)), Failed(code=ErrorCode.PROJECTION_FAILED, now_ms=NOW + 6)
    )


class CompleteCase(NamedTuple):
    """A ``complete`` vector: what the store holds, the worker's records, when, and the run."""

    label: str
    requirements: list[str]
    description: str
    stored: Callable[[], CanonicalRecord | None]
    after: Callable[[], CanonicalRecord]
    now: Callable[[], int] = lambda: NOW + 20
    run: Callable[[], RunState | None] = lambda: run_state(tool_calls_used=1, bytes_used=9)
    before: Callable[[], CanonicalRecord] = awaiting_raw


_RUN_LAPSES: Final = NOW + 600_000 + TTL  # the fixture run state's expiry


def _outliving(record: CanonicalRecord) -> CanonicalRecord:
    """``record`` with an expiry 10 ms past the fixture run's, so it outlives the run state."""
    return evolve(record, expires_at_ms=_RUN_LAPSES + 10)


_CAS: Final = ["CIS-STORE-3", "CIS-RETRY-2"]
_CHARGE: Final = ["CIS-RUN-6"]

#: The completion compare-and-set cases, in file order (``before`` is always :func:`awaiting_raw`).
COMPLETE_CASES: Final[tuple[CompleteCase, ...]] = (
    CompleteCase(
        "ready",
        _CHARGE + _CAS,
        "WRITE; the run is charged raw 3 + content 5 + scope 3 = 11 "
        "bytes (a reading charging the raw response alone, or the result alone, differs)",
        awaiting_raw,
        _ready,
    ),
    CompleteCase(
        "ready-utf8", _CHARGE, "raw 4 + content 0 + scope 2 UTF-8 bytes = 6", awaiting_raw, _wide_ready
    ),
    CompleteCase(
        "error-raw-kept", _CHARGE, "ERROR after the raw response: raw 3 bytes charged", awaiting_raw, _failed
    ),
    CompleteCase(
        "error-raw-dropped",
        _CHARGE,
        "ERROR/RESULT_TOO_LARGE stores no raw: nothing charged",
        awaiting_raw,
        lambda: step(awaiting_raw(), _raw("r" * 65, NOW + 6)),
    ),
    CompleteCase(
        "one-byte", _CHARGE, "an ERROR keeping a 1-byte raw response: 1 byte charged", awaiting_raw, _one_byte
    ),
    CompleteCase(
        "stored-raw-already",
        _CAS,
        "the store already holds the raw response (PROJECTING): WRITE, charged from the worker's before",
        _with_raw,
        _ready,
    ),
    CompleteCase(
        "no-run", _CAS, "no run state: WRITE, nothing to charge", awaiting_raw, _ready, run=lambda: None
    ),
    CompleteCase(
        "replay", _CAS, "the stored record is already `after`: REPLAY, nothing charged again", _ready, _ready
    ),
    CompleteCase(
        "other-updated",
        _CAS,
        "terminal with another updated_at_ms: INVALID_TRANSITION",
        lambda: evolve(_ready(), updated_at_ms=NOW + 7),
        _ready,
    ),
    CompleteCase("other-status", [*_CAS, "CIS-LIFE-3"], "terminal ERROR, after READY", _failed, _ready),
    CompleteCase(
        "other-code",
        _CAS,
        "terminal with another error code",
        lambda: evolve(_failed(), error_code=ErrorCode.EXECUTION_FAILED),
        _failed,
    ),
    CompleteCase("absent", [*_CAS, "CIS-TTL-4"], "nothing stored", lambda: None, _ready),
    CompleteCase(
        "expired", [*_CAS, "CIS-TTL-4"], "now = expires_at: absent", awaiting_raw, _ready, lambda: _EXPIRY
    ),
    CompleteCase(
        "last-ms",
        [*_CAS, "CIS-TTL-4"],
        "now = expires_at - 1: WRITE",
        awaiting_raw,
        _ready,
        lambda: _EXPIRY - 1,
    ),
    CompleteCase(
        "other-token",
        _CAS,
        "another invocation's record under the key",
        lambda: evolve(awaiting_raw(), invocation_token="tok-2"),  # noqa: S106 - a retry token
        _ready,
    ),
    CompleteCase(
        "other-request",
        [*_CAS, "CIS-LIFE-6"],
        "same token, another request text",
        lambda: evolve(awaiting_raw(), request_json='{"q":"y"}'),
        _ready,
    ),
    CompleteCase(
        "other-expiry",
        [*_CAS, "CIS-TTL-2"],
        "same token, another expiry",
        lambda: evolve(awaiting_raw(), expires_at_ms=_EXPIRY + 1),
        _ready,
    ),
    CompleteCase(
        "run-lapsed",
        [*_CHARGE, "CIS-STORE-10"],
        "now = the run state's expiry (deadline + ttl), the record still live: WRITE; the lapsed run is "
        "absent, so nothing is charged and the run is returned as given (a reading charging any stored "
        "run state differs)",
        lambda: _outliving(awaiting_raw()),
        lambda: _outliving(_ready()),
        lambda: _RUN_LAPSES,
        before=lambda: _outliving(awaiting_raw()),
    ),
    CompleteCase(
        "cancelled-run-charged",
        _CHARGE,
        "a live CANCELLED run is charged all the same: the charge asks only that the run state be live "
        "and of the record's run (a reading charging ACTIVE runs only differs)",
        awaiting_raw,
        _ready,
        run=lambda: run_state(RunStatus.CANCELLED, tool_calls_used=1, bytes_used=9),
    ),
    CompleteCase(
        "closed-run-charged",
        _CHARGE,
        "a live CLOSED run is charged too",
        awaiting_raw,
        _ready,
        run=lambda: run_state(RunStatus.CLOSED, tool_calls_used=1, bytes_used=9),
    ),
    CompleteCase(
        "other-run-state",
        _CHARGE,
        "the run state given is another run's: WRITE, nothing charged, the run returned as given",
        awaiting_raw,
        _ready,
        run=lambda: run_state(run_id="run-2", tool_calls_used=1, bytes_used=9),
    ),
    *(
        CompleteCase(
            f"replay-other-{label}",
            _CAS,
            f"the stored terminal record has `after`'s status, code and updated_at_ms but another {what}: "
            "REPLAY (only those fields are compared; a reading comparing the whole record says "
            "INVALID_TRANSITION)",
            stored,
            _ready,
        )
        for label, what, stored in (
            ("content", "agent result", lambda: evolve(_ready(), agent_result="other")),
            ("raw", "raw response", lambda: evolve(_ready(), raw_response="RAW2")),
            (
                "evidence",
                "evidence status",
                lambda: evolve(_ready(), evidence_status=EvidenceStatus.NO_EVIDENCE),
            ),
            ("scope", "scope", lambda: evolve(_ready(), scope="kb")),
        )
    ),
    CompleteCase(
        "now-two-to-53",
        ["CIS-KERN-2"],
        "now = 2^53: a caller error",
        awaiting_raw,
        _ready,
        lambda: MAX_SAFE_INT + 1,
    ),
    CompleteCase(
        "caller-error-before-absent",
        ["CIS-KERN-2", "CIS-LIFE-6"],
        "nothing stored and an `after` that changes the request: the caller error is decided first "
        "(invalid input, not INVALID_TRANSITION)",
        lambda: None,
        lambda: evolve(_ready(), request_json='{"q":"y"}'),
    ),
)


def complete_vector(case: CompleteCase) -> dict[str, Any]:
    """The ``complete`` vector of ``case``."""
    run = case.run()
    return vector(
        "complete",
        f"complete/{case.label}",
        case.requirements,
        case.description,
        stored=record_json(case.stored()),
        before=record_json(case.before()),
        after=record_json(case.after()),
        now_ms=case.now(),
        run=run_json(run),
    )


def _completion_document() -> dict[str, Any]:
    return document(
        "The completion compare-and-set and its byte charge: given what the store holds (`stored`), "
        "the worker's PROJECTING record (`before`), its completed record (`after`) and the run state "
        "read (`run`, or null) at `now_ms`, expect `decision` WRITE or REPLAY and `run`: on a WRITE "
        "with a live run state of the record's run, `run` charged record_bytes(after) - "
        "record_bytes(before) when positive, whatever its status; otherwise `run` exactly as given "
        "(null when none was given). Or a `code`.",
        ["CIS-STORE-3", "CIS-RETRY-2", "CIS-RUN-6", "CIS-SPEC-3"],
        {"vectors": [complete_vector(case) for case in COMPLETE_CASES]},
    )


# ---------------------------------------------------------------------------
# references.json

_CITE_NOW: Final = NOW + 100


class CiteCase(NamedTuple):
    """A citation of ``tool_call_id`` by the fixture run, of the record ``record()``, at ``now``."""

    label: str
    description: str
    requirements: list[str]
    tool_call_id: Any
    record: Callable[[], CanonicalRecord | None]
    now: int = _CITE_NOW
    run_id: Any = RUN


def _found() -> CanonicalRecord:
    return done_record(CALL)


def _negative() -> CanonicalRecord:
    return done_record(CALL, "", "kb", negative=True)


#: Citation cases, in file order: each kind, each reason and the order of the reasons.
CITE_CASES: Final[tuple[CiteCase, ...]] = (
    CiteCase(
        "evidence", "READY + EVIDENCE_FOUND: evidence with its content and scope", ["CIS-REF-1"], CALL, _found
    ),
    CiteCase(
        "negative",
        "READY + NO_EVIDENCE: a negative observation with its scope",
        ["CIS-REF-2"],
        CALL,
        _negative,
    ),
    CiteCase("projecting", "PROJECTING: not referencable", ["CIS-REF-3"], CALL, awaiting_raw),
    CiteCase("error", "ERROR: not referencable", ["CIS-REF-3"], CALL, error_record),
    CiteCase("missing", "no record", ["CIS-REF-3"], CALL, lambda: None),
    CiteCase("expired", "now = expires_at: EXPIRED", ["CIS-REF-3", "CIS-TTL-4"], CALL, _found, _EXPIRY),
    CiteCase(
        "last-ms",
        "now = expires_at - 1: still evidence",
        ["CIS-REF-1", "CIS-TTL-4"],
        CALL,
        _found,
        _EXPIRY - 1,
    ),
    CiteCase(
        "other-run", "a record of another run", ["CIS-REF-3"], CALL, lambda: evolve(_found(), run_id="run-2")
    ),
    CiteCase(
        "other-id",
        "a record answering another tool_call_id",
        ["CIS-REF-3", "CIS-STORE-6"],
        CALL,
        lambda: evolve(_found(), tool_call_id="call_2"),
    ),
    CiteCase(
        "other-run-before-expired",
        "another run's expired record: OTHER_RUN is decided first",
        ["CIS-REF-3"],
        CALL,
        lambda: evolve(_found(), run_id="run-2"),
        _EXPIRY,
    ),
    CiteCase(
        "unsafe",
        "an unsafe id: UNSAFE_ID, the id echoed as null",
        ["CIS-REF-3", "CIS-ERR-1"],
        "call 1",
        lambda: None,
    ),
    CiteCase(
        "unsafe-before-record",
        "an unsafe id is decided before the record",
        ["CIS-REF-3"],
        "call{1}",
        lambda: evolve(_found(), tool_call_id="call{1}"),
    ),
    CiteCase(
        "ready-bad-evidence",
        "a READY record whose evidence status is ERROR (a corrupt record): not referencable, ERROR",
        ["CIS-REF-3", "CIS-EVID-1"],
        CALL,
        lambda: evolve(_found(), evidence_status=EvidenceStatus.ERROR),
    ),
    CiteCase(
        "unsafe-run-id",
        "asked by an unsafe run id (run 1) for a record of run-1: the run id is only compared, OTHER_RUN, "
        "and the safe tool_call_id is echoed (a reading giving UNSAFE_ID, or hiding the id, differs)",
        ["CIS-REF-3", "CIS-ERR-1"],
        CALL,
        _found,
        run_id="run 1",
    ),
    CiteCase(
        "unsafe-run-id-missing",
        "asked by an unsafe run id, no record: MISSING, the safe tool_call_id echoed",
        ["CIS-REF-3"],
        CALL,
        lambda: None,
        run_id="run 1",
    ),
    CiteCase(
        "not-text-run-id",
        "asked by a run id that is not a text (null): OTHER_RUN, the tool_call_id echoed",
        ["CIS-REF-3"],
        CALL,
        _found,
        run_id=None,
    ),
    CiteCase("now-two-to-53", "now = 2^53: a caller error", ["CIS-KERN-2"], CALL, _found, MAX_SAFE_INT + 1),
)

#: The citation reasons in their order of precedence (CIS-REF-3).
CITE_ORDER: Final = (
    ExclusionReason.UNSAFE_ID,
    ExclusionReason.MISSING,
    ExclusionReason.OTHER_RUN,
    ExclusionReason.EXPIRED,
    ExclusionReason.PROJECTING,
    ExclusionReason.ERROR,
)
#: Reasons one citation can never have together: no record has no run, expiry or status;
#: a record is PROJECTING or ERROR, not both.
_CITE_EXCLUSIVE: Final = frozenset(
    {
        *(
            frozenset({ExclusionReason.MISSING, other})
            for other in (
                ExclusionReason.OTHER_RUN,
                ExclusionReason.EXPIRED,
                ExclusionReason.PROJECTING,
                ExclusionReason.ERROR,
            )
        ),
        frozenset({ExclusionReason.PROJECTING, ExclusionReason.ERROR}),
    }
)


def _cite_faults(faults: frozenset[ExclusionReason]) -> CiteCase:
    """A citation failing exactly ``faults``; the earliest of CITE_ORDER must win."""
    tool_call_id = "call 1" if ExclusionReason.UNSAFE_ID in faults else CALL
    first, second = (reason for reason in CITE_ORDER if reason in faults)

    def record() -> CanonicalRecord | None:
        if ExclusionReason.MISSING in faults:
            return None
        base = awaiting_raw() if ExclusionReason.PROJECTING in faults else _found()
        if ExclusionReason.ERROR in faults:
            base = error_record()
        changes: dict[str, Any] = {"tool_call_id": tool_call_id}
        if ExclusionReason.OTHER_RUN in faults:
            changes["run_id"] = "run-2"
        return evolve(base, **changes)

    return CiteCase(
        f"order/{first.value}+{second.value}",
        f"fails {first.value} and {second.value}: {first.value} is decided first",
        ["CIS-REF-3"],
        tool_call_id,
        record,
        _EXPIRY if ExclusionReason.EXPIRED in faults else _CITE_NOW,
    )


def _cite_order_cases() -> list[CiteCase]:
    return [
        _cite_faults(frozenset(pair))
        for pair in itertools.combinations(CITE_ORDER, 2)
        if frozenset(pair) not in _CITE_EXCLUSIVE
    ]


class ProgressCase(NamedTuple):
    """A progress read of the fixture run: ``identities`` resolved through ``records()``."""

    label: str
    description: str
    requirements: list[str]
    identities: list[Any]
    records: Callable[[], dict[str, CanonicalRecord | None]]
    limits: Limits = LIMITS
    now: int = _CITE_NOW


def _fact(n: int, content: str | None = None, scope: str = "web") -> CanonicalRecord:
    return done_record(f"call_{n}", f"fact{n}" if content is None else content, scope, sequence=n)


def _as(tool_call_id: str, record: CanonicalRecord, **changes: Any) -> CanonicalRecord:
    return evolve(record, tool_call_id=tool_call_id, **changes)


def _every_exclusion() -> dict[str, CanonicalRecord | None]:
    return {
        "call_m": None,
        "call_e": _as("call_e", _fact(1), expires_at_ms=_CITE_NOW),
        "call_o": _as("call_o", _fact(1), run_id="run-2"),
        "call_p": _as("call_p", awaiting_raw()),
        "call_x": _as("call_x", error_record()),
        "call_1": _fact(1),
    }


#: Progress cases, in file order: order, duplicates, exclusions and both caps at their edges.
PROGRESS_CASES: Final[tuple[ProgressCase, ...]] = (
    ProgressCase(
        "completion-order",
        "facts follow the identities' order (completion order), not sequence",
        ["CIS-PROG-2"],
        ["call_2", "call_1"],
        lambda: {"call_1": _fact(1), "call_2": _fact(2)},
    ),
    ProgressCase(
        "first-wins",
        "an identity listed twice gives one fact",
        ["CIS-PROG-2"],
        ["call_1", "call_1"],
        lambda: {"call_1": _fact(1)},
    ),
    ProgressCase(
        "negative",
        "a NO_EVIDENCE fact is marked negative",
        ["CIS-PROG-2", "CIS-REF-2"],
        ["call_1"],
        lambda: {"call_1": _as("call_1", _negative())},
    ),
    ProgressCase(
        "every-exclusion",
        "each reason counted once: UNSAFE_ID, MISSING, EXPIRED, OTHER_RUN, PROJECTING, ERROR",
        ["CIS-PROG-3"],
        ["call 9", "call_m", "call_e", "call_o", "call_p", "call_x", "call_1"],
        _every_exclusion,
    ),
    ProgressCase(
        "max-facts",
        "4 READY records, at most 3 facts: 1 omitted",
        ["CIS-PROG-4"],
        ["call_1", "call_2", "call_3", "call_4"],
        lambda: {f"call_{n}": _fact(n) for n in (1, 2, 3, 4)},
    ),
    ProgressCase(
        "bytes-exact",
        "2 facts of 32 bytes = the 64-byte cap: both kept",
        ["CIS-PROG-4"],
        ["call_1", "call_2"],
        lambda: {"call_1": _fact(1, "c" * 29), "call_2": _fact(2, "c" * 29)},
    ),
    ProgressCase(
        "bytes-exact-empty-parts",
        "32 bytes of content with an empty scope + 32 bytes of scope with empty content = 64: both "
        "kept (an empty part counts 0 bytes)",
        ["CIS-PROG-4"],
        ["call_1", "call_2"],
        lambda: {"call_1": _fact(1, "c" * 32, ""), "call_2": _fact(2, "", "s" * 32)},
    ),
    ProgressCase(
        "bytes-one-over",
        "32 + 33 = 65 > 64: the second omitted",
        ["CIS-PROG-4"],
        ["call_1", "call_2"],
        lambda: {"call_1": _fact(1, "c" * 29), "call_2": _fact(2, "c" * 30)},
    ),
    ProgressCase(
        "ends-the-list",
        "a fact that does not fit ends the list: a later small one is omitted "
        "too (a reading that skips and goes on keeps it)",
        ["CIS-PROG-4"],
        ["call_1", "call_2", "call_3"],
        lambda: {"call_1": _fact(1, "c" * 29), "call_2": _fact(2, "c" * 30), "call_3": _fact(3, "s", "")},
    ),
    ProgressCase(
        "utf8-bytes",
        "a fact's size is content + scope in UTF-8 bytes: 32 + 33 = 65 > 64 (16 + 17 characters: "
        "a reading counting characters keeps both)",
        ["CIS-PROG-4"],
        ["call_1", "call_2"],
        lambda: {"call_1": _fact(1, "\u00e9" * 16, ""), "call_2": _fact(2, "\u00e9" * 16, "x")},
    ),
    ProgressCase(
        "non-ready-twice",
        "an ERROR id listed twice is judged once, at its first position: ERROR counted 1 (a reading "
        "that removes duplicates among facts only counts 2)",
        ["CIS-PROG-2", "CIS-PROG-3"],
        ["call_x", "call_1", "call_x"],
        lambda: {"call_x": _as("call_x", error_record()), "call_1": _fact(1)},
    ),
    ProgressCase(
        "missing-twice",
        "a missing id listed twice: MISSING counted once",
        ["CIS-PROG-2", "CIS-PROG-3"],
        ["call_m", "call_m"],
        lambda: {"call_m": None},
    ),
    ProgressCase(
        "unsafe-twice",
        "an unsafe id (a text) listed twice: UNSAFE_ID counted once",
        ["CIS-PROG-2", "CIS-PROG-3"],
        ["call 9", "call 9"],
        dict,
    ),
    ProgressCase(
        "not-text-identities",
        "identities that are not texts (a number, null, a list, the number again) are each UNSAFE_ID, "
        "counted every time; the text id after them still gives its fact",
        ["CIS-PROG-3"],
        [7, None, ["call_1"], 7, "call_1"],
        lambda: {"call_1": _fact(1)},
    ),
    ProgressCase(
        "now-two-to-53",
        "now = 2^53: a caller error",
        ["CIS-KERN-2"],
        ["call_1"],
        lambda: {"call_1": _fact(1)},
        now=MAX_SAFE_INT + 1,
    ),
    ProgressCase(
        "excluded-after-full",
        "identities after the cap are still judged: an ERROR is excluded, not omitted",
        ["CIS-PROG-3", "CIS-PROG-4"],
        ["call_1", "call_2", "call_x"],
        lambda: {
            "call_1": _fact(1, "c" * 29),
            "call_2": _fact(2, "c" * 30),
            "call_x": _as("call_x", error_record()),
        },
    ),
)


def _references_document() -> dict[str, Any]:
    vectors = [
        vector(
            "cite",
            f"cite/{case.label}",
            case.requirements,
            case.description,
            run_id=case.run_id,
            tool_call_id=case.tool_call_id,
            record=record_json(case.record()),
            now_ms=case.now,
        )
        for case in (*CITE_CASES, *_cite_order_cases())
    ]
    for made in vectors[len(CITE_CASES) :]:
        reason = made["expect"].get("citation", {}).get("reason")
        if made["id"].split("/")[2].split("+")[0] != reason:
            raise AssertionError(f"{made['id']}: the citation's reason is {reason}")
    vectors += [
        vector(
            "progress",
            f"progress/{case.label}",
            case.requirements,
            case.description,
            run_id=RUN,
            identities=case.identities,
            records={key: record_json(value) for key, value in case.records().items()},
            now_ms=case.now,
            limits=limits_view(case.limits),
        )
        for case in PROGRESS_CASES
    ]
    return document(
        "Citations (`cite`: the record read under `run_id`/`tool_call_id` at `now_ms`; expect "
        "`citation`) and progress (`progress`: the tracker's `identities` resolved through `records` "
        "at `now_ms` under `limits`; expect `facts`, `excluded` by reason, `omitted`).",
        ["CIS-REF-1", "CIS-REF-2", "CIS-REF-3", "CIS-PROG-2", "CIS-PROG-3", "CIS-PROG-4", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


# ---------------------------------------------------------------------------
# run_lifecycle.json


class RunCase(NamedTuple):
    """A run operation on ``before()`` at ``now`` (open: the fixture parameters with ``changes``)."""

    label: str
    requirements: list[str]
    description: str
    operation: str
    before: Callable[[], RunState | None]
    now: int
    changes: dict[str, Any] | None = None


_OPENED: Final = NOW + 600_000 + TTL  # the fixture run state's expiry
_RUN_RETRY: Final = ["CIS-RETRY-3"]


def _used() -> RunState:
    return run_state(tool_calls_used=2, bytes_used=40)


#: The run lifecycle at its edges, in file order.
RUN_CASES: Final[tuple[RunCase, ...]] = (
    RunCase(
        "open/deadline-now",
        ["CIS-RUN-1", "CIS-RUN-4"],
        "a deadline at now opens an ACTIVE run; every call on it is RUN_DEADLINE_EXCEEDED",
        "open",
        lambda: None,
        NOW,
        {"deadline_ms": NOW},
    ),
    RunCase(
        "open/expiry",
        ["CIS-RUN-1"],
        "the run state expires at deadline + ttl",
        "open",
        lambda: None,
        NOW,
        {"ttl_ms": 777},
    ),
    RunCase(
        "open/zero-budgets",
        ["CIS-RUN-1"],
        "budgets of 0 are allowed",
        "open",
        lambda: None,
        NOW,
        {"tool_call_budget": 0, "byte_budget": 0},
    ),
    RunCase(
        "reopen/unchanged",
        _RUN_RETRY,
        "a retried open returns the stored run, counters included",
        "open",
        _used,
        _OPENED - 1,
        {},
    ),
    RunCase(
        "reopen/at-expiry",
        [*_RUN_RETRY, "CIS-RUN-1"],
        "at deadline + ttl the old state lapsed: a fresh run",
        "open",
        _used,
        _OPENED,
        {},
    ),
    RunCase(
        "reopen/cancelled",
        [*_RUN_RETRY, "CIS-RUN-3"],
        "a live CANCELLED run is never re-opened: INVALID_TRANSITION",
        "open",
        lambda: run_state(RunStatus.CANCELLED),
        NOW,
        {},
    ),
    RunCase(
        "reopen/closed",
        [*_RUN_RETRY, "CIS-RUN-3"],
        "a live CLOSED run is never re-opened",
        "open",
        lambda: run_state(RunStatus.CLOSED),
        NOW,
        {},
    ),
    RunCase(
        "reopen/other-run-id",
        _RUN_RETRY,
        "a stored state of another run id",
        "open",
        lambda: run_state(run_id="run-2"),
        NOW,
        {},
    ),
    *(
        RunCase(
            f"reopen/other-{name}",
            _RUN_RETRY,
            f"a retried open with another {name}: INVALID_TRANSITION",
            "open",
            run_state,
            NOW,
            {name: value},
        )
        for name, value in (
            ("deadline_ms", NOW + 600_001),
            ("ttl_ms", TTL + 1),
            ("tool_call_budget", 4),
            ("byte_budget", 1001),
        )
    ),
    *(
        RunCase(
            f"open/unsafe-{label}",
            ["CIS-ID-1", "CIS-RUN-1"],
            "an unsafe run id: RUN_MISMATCH",
            "open",
            lambda: None,
            NOW,
            {"run_id": run_id},
        )
        for label, run_id in (
            ("empty", ""),
            ("brace", "run{1}"),
            ("length-129", "r" * 129),
            ("non-ascii", "run-\u00e9"),
        )
    ),
    RunCase(
        "open/length-128",
        ["CIS-ID-1", "CIS-RUN-1"],
        "128 characters: safe",
        "open",
        lambda: None,
        NOW,
        {"run_id": "r" * 128},
    ),
    RunCase(
        "open/unsafe-id-before-conflict",
        ["CIS-ID-1", "CIS-RUN-1", "CIS-RETRY-3"],
        "an unsafe run id over a live run state: RUN_MISMATCH, decided before the stored state",
        "open",
        run_state,
        NOW,
        {"run_id": "run 1"},
    ),
    RunCase(
        "cancel/now-two-to-53",
        ["CIS-KERN-2", "CIS-RUN-2"],
        "a cancel at now = 2^53 with no run state: the caller error first (not RUN_INACTIVE)",
        "cancel",
        lambda: None,
        MAX_SAFE_INT + 1,
    ),
    RunCase(
        "close/now-max",
        ["CIS-KERN-2", "CIS-RUN-2"],
        "a close at now = 2^53 - 1: a time in range, past the run's expiry: RUN_INACTIVE",
        "close",
        run_state,
        MAX_SAFE_INT,
    ),
    *(
        case
        for operation in ("cancel", "close")
        for case in (
            RunCase(
                f"{operation}/last-ms",
                ["CIS-RUN-2"],
                "now = deadline + ttl - 1: the run state is live",
                operation,
                run_state,
                _OPENED - 1,
            ),
            RunCase(
                f"{operation}/after-deadline",
                ["CIS-RUN-2"],
                "past the deadline a live run can still be ended",
                operation,
                run_state,
                NOW + 600_000,
            ),
        )
    ),
)


def _run_lifecycle_document() -> dict[str, Any]:
    vectors = [
        run_op_vector(
            f"run-edge/{case.label}",
            case.requirements,
            case.description,
            case.operation,
            case.before(),
            case.now,
            None if case.changes is None else {**RUN_PARAMETERS, **case.changes},
        )
        for case in RUN_CASES
    ]
    return document(
        "The run lifecycle at its edges (run as runs.json): opening at and past the deadline, "
        "re-opening a live run (ACTIVE with the same parameters: unchanged; anything else: "
        "INVALID_TRANSITION), the run state's expiry at deadline + ttl.",
        ["CIS-RUN-1", "CIS-RUN-2", "CIS-RETRY-3", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


# ---------------------------------------------------------------------------
# well_formed.json, keys.json, invalid_input.json


def _ready_fixture() -> CanonicalRecord:
    return done_record(CALL)


#: (label, description, record) of each well-formedness case, shared with the view vectors.
WELL_FORMED_CASES: Final[tuple[tuple[str, str, Callable[[], CanonicalRecord]], ...]] = (
    ("projecting", "a PROJECTING record: no evidence, code, result or scope", awaiting_raw),
    ("projecting-with-raw", "raw_response is not judged", lambda: evolve(awaiting_raw(), raw_response="RAW")),
    ("ready", "READY + EVIDENCE_FOUND with a result and a scope", _ready_fixture),
    ("ready-negative", "READY + NO_EVIDENCE", _negative),
    ("error", "ERROR + evidence ERROR + a code", error_record),
    (
        "projecting-evidence",
        "PROJECTING with an evidence status",
        lambda: evolve(awaiting_raw(), evidence_status=EvidenceStatus.EVIDENCE_FOUND),
    ),
    (
        "projecting-code",
        "PROJECTING with an error code",
        lambda: evolve(awaiting_raw(), error_code=ErrorCode.EXECUTION_FAILED),
    ),
    (
        "projecting-result",
        "PROJECTING with an agent result",
        lambda: evolve(awaiting_raw(), agent_result="x"),
    ),
    ("projecting-scope", "PROJECTING with a scope", lambda: evolve(awaiting_raw(), scope="x")),
    (
        "ready-evidence-error",
        "READY with evidence ERROR",
        lambda: evolve(_ready_fixture(), evidence_status=EvidenceStatus.ERROR),
    ),
    (
        "ready-no-evidence-status",
        "READY with no evidence status",
        lambda: evolve(_ready_fixture(), evidence_status=None),
    ),
    (
        "ready-code",
        "READY with an error code",
        lambda: evolve(_ready_fixture(), error_code=ErrorCode.EXECUTION_FAILED),
    ),
    ("ready-no-result", "READY without an agent result", lambda: evolve(_ready_fixture(), agent_result=None)),
    ("ready-no-scope", "READY without a scope", lambda: evolve(_ready_fixture(), scope=None)),
    (
        "error-evidence-found",
        "ERROR with evidence FOUND",
        lambda: evolve(error_record(), evidence_status=EvidenceStatus.EVIDENCE_FOUND),
    ),
    ("error-no-code", "ERROR without a code", lambda: evolve(error_record(), error_code=None)),
    ("error-result", "ERROR with an agent result", lambda: evolve(error_record(), agent_result="x")),
    ("error-scope", "ERROR with a scope", lambda: evolve(error_record(), scope="x")),
    ("unsafe-run-id", "an unsafe run id", lambda: evolve(_ready_fixture(), run_id="run 1")),
    (
        "unsafe-tool-call-id",
        "an unsafe tool_call_id",
        lambda: evolve(_ready_fixture(), tool_call_id="call 1"),
    ),
    ("sequence-0", "sequence 0: positions start at 1", lambda: evolve(_ready_fixture(), sequence=0)),
    ("sequence-1", "sequence 1", lambda: evolve(_ready_fixture(), sequence=1)),
    (
        "expiry-at-creation",
        "expires_at_ms = created_at_ms: a TTL of 0",
        lambda: evolve(_ready_fixture(), expires_at_ms=NOW),
    ),
    (
        "expiry-after-creation",
        "expires_at_ms = created_at_ms + 1",
        lambda: evolve(_ready_fixture(), expires_at_ms=NOW + 1),
    ),
    (
        "ready-without-raw",
        "a READY record read without its raw response: well formed",
        lambda: evolve(_ready_fixture(), raw_response=None),
    ),
    (
        "empty-token",
        "an empty invocation token is not judged",
        lambda: evolve(_ready_fixture(), invocation_token=""),
    ),
    (
        "tool-name-lone-surrogate",
        "the tool name is not judged (even one with no UTF-8 form)",
        lambda: evolve(_ready_fixture(), tool_name="search\ud800"),
    ),
    (
        "updated-before-created",
        "updated_at_ms < created_at_ms is not judged (a reading demanding order refuses it)",
        lambda: evolve(_ready_fixture(), updated_at_ms=NOW - 1),
    ),
    ("sequence-max", "sequence 2^53 - 1: in range", lambda: evolve(_ready_fixture(), sequence=MAX_SAFE_INT)),
    (
        "sequence-two-to-53",
        "sequence 2^53: outside [1, 2^53 - 1], not well formed",
        lambda: evolve(_ready_fixture(), sequence=MAX_SAFE_INT + 1),
    ),
    (
        "created-zero",
        "created_at_ms 0 (the epoch): in range",
        lambda: evolve(_ready_fixture(), created_at_ms=0, updated_at_ms=0),
    ),
    (
        "expiry-one",
        "created at 0, expires at 1: the earliest expiry, well formed",
        lambda: evolve(_ready_fixture(), created_at_ms=0, updated_at_ms=0, expires_at_ms=1),
    ),
    (
        "expiry-zero",
        "created at 0, expires at 0: the expiry does not follow the creation",
        lambda: evolve(_ready_fixture(), created_at_ms=0, updated_at_ms=0, expires_at_ms=0),
    ),
    (
        "created-negative",
        "created_at_ms -1: outside [0, 2^53 - 1]",
        lambda: evolve(_ready_fixture(), created_at_ms=-1),
    ),
    (
        "updated-two-to-53",
        "updated_at_ms 2^53: outside [0, 2^53 - 1]",
        lambda: evolve(_ready_fixture(), updated_at_ms=MAX_SAFE_INT + 1),
    ),
    (
        "expiry-max",
        "expires_at_ms 2^53 - 1: in range",
        lambda: evolve(_ready_fixture(), expires_at_ms=MAX_SAFE_INT),
    ),
    (
        "expiry-two-to-53",
        "expires_at_ms 2^53: outside [0, 2^53 - 1]",
        lambda: evolve(_ready_fixture(), expires_at_ms=MAX_SAFE_INT + 1),
    ),
)


def _well_formed_document() -> dict[str, Any]:
    vectors = [
        vector(
            "well_formed",
            f"well-formed/{label}",
            ["CIS-STORE-6", "CIS-LIFE-5", "CIS-EVID-1"],
            description,
            record=record_json(record()),
        )
        for label, description, record in WELL_FORMED_CASES
    ]
    return document(
        "Which stored records are well formed (`well_formed`, CIS-LIFE-5 exactly): the status, "
        "evidence status, error code, agent result and scope agree (CIS-EVID-1); the ids are safe; "
        "the sequence is in [1, 2^53 - 1] and the three times in [0, 2^53 - 1] with expires_at_ms > "
        "created_at_ms. Nothing else is judged: not the raw response, the token, the tool name, the "
        "request, nor whether updated_at_ms follows created_at_ms. A store that reads a record that "
        "is not well formed answers STORE_UNAVAILABLE instead of serving it.",
        ["CIS-STORE-6", "CIS-LIFE-5", "CIS-EVID-1", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


#: (label, prefix, run id, tool_call_id, description) of each key case.
KEY_CASES: Final[tuple[tuple[str, str, str, str, str], ...]] = (
    ("layout", "cis", RUN, CALL, "<prefix>:{<run_id>}:run, :done and :call:<tool_call_id>"),
    ("colon-id", "app:cis", RUN, "functions.get:0", "colons in the prefix and the id are kept"),
    ("empty-prefix", "", RUN, CALL, "an empty prefix is invalid input"),
    ("brace-prefix-open", "a{b", RUN, CALL, "a prefix with { is invalid input"),
    ("brace-prefix-close", "a}b", RUN, CALL, "a prefix with } is invalid input"),
    ("unsafe-run", "cis", "run{1}", CALL, "an unsafe run id is invalid input"),
    ("unsafe-call", "cis", RUN, "call}1", "an unsafe tool_call_id is invalid input"),
)


def _keys_document() -> dict[str, Any]:
    vectors = [
        vector(
            "keys",
            f"keys/{label}",
            ["CIS-KEY-1", "CIS-KEY-2", "CIS-KEY-3"],
            description,
            prefix=prefix,
            run_id=run_id,
            tool_call_id=tool_call_id,
        )
        for label, prefix, run_id, tool_call_id, description in KEY_CASES
    ]
    return document(
        "Store keys (`keys`): the run, done-list and call keys of `prefix`, `run_id`, "
        "`tool_call_id`; an unsafe part is `invalid_input`.",
        ["CIS-KEY-1", "CIS-KEY-2", "CIS-KEY-3", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


_TOP: Final = 2**53 - 1

#: Opens at the edges of their parameters' domain: (label, description, now, changes).
INVALID_OPEN_CASES: Final[tuple[tuple[str, str, int, dict[str, Any]], ...]] = (
    ("now-0", "now 0 is the epoch: valid", 0, {"deadline_ms": 0}),
    ("now-negative", "a negative time", -1, {"deadline_ms": 0}),
    ("deadline-negative", "a negative deadline", NOW, {"deadline_ms": -1}),
    ("ttl-1", "the smallest TTL, 1 ms", NOW, {"ttl_ms": 1}),
    ("ttl-0", "a TTL of 0", NOW, {"ttl_ms": 0}),
    ("budget-negative", "a negative tool-call budget", NOW, {"tool_call_budget": -1}),
    ("bytes-negative", "a negative byte budget", NOW, {"byte_budget": -1}),
    (
        "budget-max",
        "a budget of 2**53 - 1: the largest exact integer of a double",
        NOW,
        {"tool_call_budget": _TOP, "byte_budget": _TOP},
    ),
    ("budget-over", "a budget of 2**53", NOW, {"byte_budget": _TOP + 1}),
    ("expiry-max", "deadline + ttl = 2**53 - 1", NOW, {"deadline_ms": _TOP - TTL}),
    ("expiry-over", "deadline + ttl = 2**53", NOW, {"deadline_ms": _TOP - TTL + 1}),
    ("boolean-budget", "true is not a number", NOW, {"tool_call_budget": True}),
    ("string-ttl", "a string is not a number", NOW, {"ttl_ms": "60000"}),
    (
        "now-max",
        "now = 2^53 - 1: valid (the deadline has passed: an ACTIVE run every call refuses)",
        _TOP,
        {},
    ),
    ("now-two-to-53", "now = 2^53: a caller error", _TOP + 1, {}),
    ("now-two-to-53-plus-1", "now = 2^53 + 1 (a binary64 reader sees 2^53): a caller error", _TOP + 2, {}),
    (
        "caller-error-before-unsafe-id",
        "an unsafe run id and a TTL of 0: the caller error is decided first (not RUN_MISMATCH)",
        NOW,
        {"run_id": "run 1", "ttl_ms": 0},
    ),
)

_BEGIN: Final = event_json(begin_event())


def _begin(**changes: Any) -> dict[str, Any]:
    """The fixture Begin's JSON with ``changes`` (any JSON values)."""
    return {**_BEGIN, **changes}


def _failed_json(code: str) -> dict[str, Any]:
    return {"type": "Failed", "code": code, "now_ms": NOW + 1}


#: Events at the edges of their fields' domain: (label, description, before, event JSON).
INVALID_EVENT_CASES: Final[
    tuple[tuple[str, str, Callable[[], CanonicalRecord | None], dict[str, Any]], ...]
] = (
    ("begin-ttl-1", "a Begin with a TTL of 1 ms", lambda: None, {**_BEGIN, "ttl_ms": 1}),
    ("begin-ttl-0", "a Begin with a TTL of 0", lambda: None, {**_BEGIN, "ttl_ms": 0}),
    ("begin-ttl-true", "a Begin whose TTL is true", lambda: None, {**_BEGIN, "ttl_ms": True}),
    (
        "failed-not-a-failure",
        "Failed with a code outside the failure set",
        awaiting_raw,
        {"type": "Failed", "code": "RUN_INACTIVE", "now_ms": NOW + 1},
    ),
    (
        "failed-not-a-failure-on-terminal",
        "Failed with a code outside the failure set on a READY record: the caller error is decided "
        "before the table (a reading consulting the phase first says INVALID_TRANSITION)",
        _ready_fixture,
        {"type": "Failed", "code": "RUN_INACTIVE", "now_ms": NOW + 10},
    ),
    (
        "failed-unknown-code",
        "Failed with a text that names no error code",
        awaiting_raw,
        _failed_json("NOT_A_CODE"),
    ),
    (
        "begin-ttl-0-on-live-record",
        "a Begin with a TTL of 0 on a live record: a caller error whatever the phase, not INVALID_TRANSITION",
        awaiting_raw,
        {**_BEGIN, "ttl_ms": 0, "now_ms": NOW + 10},
    ),
    ("begin-sequence-1", "a Begin at sequence 1: valid", lambda: None, {**_BEGIN, "sequence": 1}),
    (
        "begin-sequence-0",
        "a Begin at sequence 0: positions start at 1, a caller error",
        lambda: None,
        _begin(sequence=0),
    ),
    ("begin-sequence-max", "a Begin at sequence 2^53 - 1: valid", lambda: None, _begin(sequence=_TOP)),
    (
        "begin-sequence-two-to-53",
        "a Begin at sequence 2^53: a caller error",
        lambda: None,
        _begin(sequence=_TOP + 1),
    ),
    (
        "begin-token-null",
        "a Begin whose invocation token is null: a caller error",
        lambda: None,
        _begin(invocation_token=None),
    ),
    (
        "begin-token-number",
        "a Begin whose invocation token is a number",
        lambda: None,
        _begin(invocation_token=7),
    ),
    (
        "begin-tool-name-null",
        "a Begin whose tool name is null: a caller error",
        lambda: None,
        _begin(tool_name=None),
    ),
    ("begin-tool-name-number", "a Begin whose tool name is a number", lambda: None, _begin(tool_name=7)),
    (
        "begin-request-null",
        "a Begin whose request is null: a caller error",
        lambda: None,
        _begin(request_json=None),
    ),
    ("begin-now-negative", "a Begin at now = -1", lambda: None, _begin(now_ms=-1)),
    (
        "begin-expiry-max",
        "a Begin at now = 2^53 - 1 - ttl: the expiry is 2^53 - 1, valid",
        lambda: None,
        _begin(now_ms=_TOP - TTL),
    ),
    (
        "begin-expiry-over",
        "a Begin at now = 2^53 - ttl: the expiry would be 2^53, a caller error",
        lambda: None,
        _begin(now_ms=_TOP - TTL + 1),
    ),
    (
        "raw-now-max",
        "a raw response at now = 2^53 - 1: a time in range (the record expired: INVALID_TRANSITION)",
        awaiting_raw,
        {"type": "RawReceived", "raw_response": "RAW", "now_ms": _TOP},
    ),
    (
        "raw-now-two-to-53",
        "a raw response at now = 2^53: a caller error",
        awaiting_raw,
        {"type": "RawReceived", "raw_response": "RAW", "now_ms": _TOP + 1},
    ),
    (
        "raw-now-two-to-53-plus-1",
        "now = 2^53 + 1 (a binary64 reader sees 2^53): a caller error either way",
        awaiting_raw,
        {"type": "RawReceived", "raw_response": "RAW", "now_ms": _TOP + 2},
    ),
    (
        "swept-negative-age",
        "a sweep for records older than -1 ms: a caller error",
        awaiting_raw,
        {"type": "SweptStale", "now_ms": NOW + 10, "older_than_ms": -1},
    ),
    (
        "swept-age-max",
        "a sweep for records older than 2^53 - 1 ms: valid (NOT_STALE)",
        awaiting_raw,
        {"type": "SweptStale", "now_ms": NOW + 10, "older_than_ms": _TOP},
    ),
    ("unknown-type", "an event of no known type", awaiting_raw, {"type": "Teleported", "now_ms": NOW + 10}),
    (
        "extra-member",
        "an event with a member its type does not have",
        awaiting_raw,
        {"type": "RawReceived", "raw_response": "RAW", "now_ms": NOW + 10, "size": 3},
    ),
)

#: A limit at the edge of its domain: (label, description, max_json_depth).
INVALID_LIMIT_CASES: Final[tuple[tuple[str, str, Any], ...]] = (
    ("limit-1", "a limit of 1 (the smallest positive integer): valid", 1),
    ("limit-0", "a limit of 0: every limit is a positive integer", 0),
    ("limit-true", "true is not a limit", True),
    ("limit-max", "a limit of 2^53 - 1: valid", _TOP),
    ("limit-two-to-53", "a limit of 2^53: outside [1, 2^53 - 1]", _TOP + 1),
)


def _invalid_input_document() -> dict[str, Any]:
    """Inputs the kernel refuses as a caller's error (CIS-KERN-2), and their valid neighbours."""
    vectors = [
        vector(
            "run",
            f"invalid/open/{label}",
            ["CIS-KERN-2", "CIS-RUN-1"],
            description,
            operation="open",
            before=None,
            now_ms=now,
            parameters={**RUN_PARAMETERS, **changes},
        )
        for label, description, now, changes in INVALID_OPEN_CASES
    ]
    vectors += [
        vector(
            "transition",
            f"invalid/transition/{label}",
            ["CIS-KERN-2"],
            description,
            limits=limits_view(LIMITS),
            before=record_json(before()),
            event=event,
        )
        for label, description, before, event in INVALID_EVENT_CASES
    ]
    vectors += [
        vector(
            "transition",
            f"invalid/limits/{label}",
            ["CIS-KERN-2", "CIS-SIZE-1"],
            description,
            limits={**limits_view(LIMITS), "max_json_depth": value},
            before=None,
            event=_BEGIN,
        )
        for label, description, value in INVALID_LIMIT_CASES
    ]
    vectors.append(
        vector(
            "complete",
            "invalid/complete/identity-changed",
            ["CIS-KERN-2", "CIS-LIFE-6"],
            "an `after` whose request differs from `before`: a completion may not change identity",
            stored=record_json(awaiting_raw()),
            before=record_json(awaiting_raw()),
            after=record_json(evolve(_ready_fixture(), request_json='{"q":"y"}')),
            now_ms=NOW + 20,
            run=None,
        )
    )
    return document(
        "Inputs the kernel refuses as a caller's error rather than with a domain code "
        '(expect `{"invalid_input": true}`: an exception, a panic or an error return, '
        "whatever the language uses), next to the valid inputs just inside each bound.",
        ["CIS-KERN-2", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


def rule_documents() -> dict[str, dict[str, Any]]:
    """The boundary documents by file name, built from the kernel."""
    return {
        "limits.json": _limits_document(),
        "completion.json": _completion_document(),
        "references.json": _references_document(),
        "run_lifecycle.json": _run_lifecycle_document(),
        "well_formed.json": _well_formed_document(),
        "keys.json": _keys_document(),
        "invalid_input.json": _invalid_input_document(),
    }


_RUN_TOP: Final = 2**53 - 1

#: (label, description, run) of each ``well_formed_run`` vector: the runs a store may read
#: back, and the damaged ones it answers STORE_UNAVAILABLE (CorruptRun) instead (CIS-STORE-6).
WELL_FORMED_RUN_CASES: Final[tuple[tuple[str, str, Callable[[], RunState]], ...]] = (
    ("opened", "A run as open_run makes it, usage 0: well formed.", run_state),
    (
        "in-use",
        "A run with calls and bytes used: well formed.",
        lambda: run_state(tool_calls_used=3, bytes_used=1000),
    ),
    (
        "over-budget",
        "Usage above the budgets is not judged here (a budget lowered by hand is still a run).",
        lambda: run_state(tool_calls_used=9, tool_call_budget=0, byte_budget=0),
    ),
    ("cancelled", "A cancelled run: well formed.", lambda: run_state(RunStatus.CANCELLED)),
    (
        "smallest",
        "Every time 0 and a TTL of 1 (expiry at deadline + TTL = 1): well formed.",
        lambda: run_state(opened_at_ms=0, deadline_ms=0, ttl_ms=1, expires_at_ms=1),
    ),
    (
        "largest",
        "An expiry of 2**53 - 1, the largest exact integer: well formed.",
        lambda: run_state(deadline_ms=_RUN_TOP - 1, ttl_ms=1, expires_at_ms=_RUN_TOP),
    ),
    ("unsafe-id", "A run id that is not a safe id: not well formed.", lambda: run_state(run_id="run 1")),
    ("negative-time", "An opening time below 0: not well formed.", lambda: run_state(opened_at_ms=-1)),
    (
        "negative-usage",
        "A call count below 0 (it would admit calls past the budget): not well formed.",
        lambda: run_state(tool_calls_used=-1),
    ),
    ("negative-budget", "A byte budget below 0: not well formed.", lambda: run_state(byte_budget=-1)),
    (
        "too-large",
        "Bytes used of 2**53, past the exact integers: not well formed.",
        lambda: run_state(bytes_used=_RUN_TOP + 1),
    ),
    (
        "no-ttl",
        "A TTL of 0 (expiry at the deadline): not well formed.",
        lambda: run_state(ttl_ms=0, expires_at_ms=NOW + 600_000),
    ),
    (
        "late-expiry",
        "An expiry 1 ms after deadline + TTL: not well formed.",
        lambda: evolve(run_state(), expires_at_ms=run_state().expires_at_ms + 1),
    ),
    (
        "early-expiry",
        "An expiry 1 ms before deadline + TTL: not well formed.",
        lambda: evolve(run_state(), expires_at_ms=run_state().expires_at_ms - 1),
    ),
)
