"""Seed-spec scenarios of the record lifecycle that the kernel decides, one test each.

Each docstring names the requirement it covers. Records are made by :func:`admit` and
:func:`transition` (see ``_helpers``); times are integer ms from ``T0``.
"""

from __future__ import annotations

import attrs
import pytest

from invocation_store.kernel import (
    FAILURE_CODES,
    Begin,
    CanonicalRecord,
    CitationKind,
    ErrorCode,
    Event,
    EvidenceStatus,
    ExclusionReason,
    Failed,
    InvocationStatus,
    Limits,
    Phase,
    Projection,
    ProjectionReceived,
    RawReceived,
    SweptStale,
    admit,
    cite,
    phase_of,
    record_bytes,
    transition,
)

from ._helpers import (
    ARGS,
    RAW,
    RUN_ID,
    T0,
    TOOL,
    TTL_MS,
    admitted,
    begun,
    errored,
    make_run,
    projection,
    ready,
    request,
    step,
    with_raw,
)

IDENTITY = (
    "run_id",
    "tool_call_id",
    "tool_name",
    "invocation_token",
    "sequence",
    "request_json",
    "created_at_ms",
    "expires_at_ms",
)


def _identity(record: CanonicalRecord) -> tuple[object, ...]:
    return tuple(getattr(record, name) for name in IDENTITY)


# -- creation ------------------------------------------------------------------------


def test_begin_creates_one_projecting_record() -> None:
    """CIS-REC-4, CIS-LIFE-5: admission creates one PROJECTING record with the complete request."""
    args = '{"q": "caf\u00e9 \U0001f600", "n": [1, 2.50, {"deep": null}]}'
    admission = admitted("call_AbC.9:x", request_json=args)
    record = admission.record
    assert record.status is InvocationStatus.PROJECTING
    assert phase_of(record, T0) is Phase.AWAITING_RAW
    assert record.tool_call_id == "call_AbC.9:x"
    assert record.run_id == RUN_ID
    assert record.tool_name == TOOL
    assert record.request_json == args
    assert record.sequence == 1
    assert record.agent_result is None
    assert record.raw_response is None
    assert record.evidence_status is None
    assert record.error_code is None
    assert record.scope is None
    assert admission.replayed is False
    assert admission.run.tool_calls_used == 1


def test_request_is_kept_exactly() -> None:
    """CIS-REC-2: whitespace, key order, escapes and number spellings of the request are kept."""
    args = '{ "b" : 1.0E+2,\n\t"a": "\\u00e9\\n", "c": -0, "d": [ ] }'
    record = begun(request_json=args)
    final = ready(record)
    assert record.request_json == args
    assert final.request_json == args


def test_ttl_is_set_once_at_creation() -> None:
    """CIS-TTL-1: the expiry is creation time + the run's TTL, fixed at Begin."""
    run = make_run(ttl_ms=12_345)
    record = admitted(run=run, now_ms=T0 + 7).record
    assert record.created_at_ms == T0 + 7
    assert record.updated_at_ms == T0 + 7
    assert record.expires_at_ms == T0 + 7 + 12_345


# -- completion ------------------------------------------------------------------------


def test_successful_projection_completes_the_same_record() -> None:
    """CIS-REC-5, CIS-REC-1, CIS-EVID-1: raw and bounded result land in the same record, READY."""
    record = begun()
    with_response = with_raw(record, now_ms=T0 + 10)
    assert with_response.status is InvocationStatus.PROJECTING
    assert phase_of(with_response, T0 + 10) is Phase.AWAITING_PROJECTION
    final = step(with_response, ProjectionReceived(projection=projection(), now_ms=T0 + 20))
    assert final.status is InvocationStatus.READY
    assert final.evidence_status is EvidenceStatus.EVIDENCE_FOUND
    assert final.raw_response == RAW
    assert final.agent_result == "Paris: 18 C"
    assert final.scope == "weather index"
    assert final.error_code is None
    assert final.updated_at_ms == T0 + 20
    assert _identity(final) == _identity(record)
    # CIS-REC-1: every field of the one record is populated.
    for field in attrs.fields(CanonicalRecord):
        if field.name != "error_code":
            assert getattr(final, field.name) is not None, field.name
    # The agent-facing view carries only the bounded result.
    citation = cite(RUN_ID, "call_1", final, T0 + 21)
    assert citation.kind is CitationKind.EVIDENCE
    assert citation.content == "Paris: 18 C"
    assert "RAW-ONLY" not in repr(citation)


def test_projecting_carries_no_outcome() -> None:
    """CIS-LIFE-5: both PROJECTING phases have no evidence status, error code or agent result."""
    for record in (begun(), with_raw(begun())):
        assert record.status is InvocationStatus.PROJECTING
        assert record.evidence_status is None
        assert record.error_code is None
        assert record.agent_result is None
        assert record.scope is None


def test_transitions_keep_identity_and_expiry() -> None:
    """CIS-LIFE-6, CIS-TTL-2: no transition changes identity, token, request, sequence, creation or expiry."""
    record = begun()
    outcomes = [
        with_raw(record),
        ready(record),
        ready(record, evidence=EvidenceStatus.NO_EVIDENCE),
        errored(record),
        errored(with_raw(record), ErrorCode.PROJECTION_FAILED),
        step(record, RawReceived(raw_response="x" * 10, now_ms=T0 + 5), Limits(raw_bytes=9)),
        step(record, SweptStale(now_ms=T0 + 50, older_than_ms=10)),
    ]
    for outcome in outcomes:
        assert _identity(outcome) == _identity(record)
        assert outcome.expires_at_ms == T0 + TTL_MS


# -- evidence ----------------------------------------------------------------------------


def test_no_evidence_projection_completes_as_scoped_negative_observation() -> None:
    """CIS-EVID-3, CIS-EVID-1: NO_EVIDENCE with a scope makes READY, keeps the scope, cites negatively."""
    final = ready(evidence=EvidenceStatus.NO_EVIDENCE, content="no match", scope="orders 2024-01..03")
    assert final.status is InvocationStatus.READY
    assert final.evidence_status is EvidenceStatus.NO_EVIDENCE
    assert final.scope == "orders 2024-01..03"
    citation = cite(RUN_ID, "call_1", final, T0 + 30)
    assert citation.kind is CitationKind.NEGATIVE_OBSERVATION
    assert citation.scope == "orders 2024-01..03"


@pytest.mark.parametrize("scope", ["", " ", "\t\n"])
def test_no_evidence_without_scope_is_invalid(scope: str) -> None:
    """CIS-EVID-3, CIS-EVID-5: a NO_EVIDENCE projection with a blank scope is PROJECTION_INVALID."""
    record = with_raw(begun())
    result = step(
        record,
        ProjectionReceived(projection=projection(EvidenceStatus.NO_EVIDENCE, "none", scope), now_ms=T0 + 20),
    )
    assert result.status is InvocationStatus.ERROR
    assert result.error_code is ErrorCode.PROJECTION_INVALID
    assert result.agent_result is None


def test_no_evidence_is_never_upgraded_or_retried() -> None:
    """CIS-EVID-4: after READY/NO_EVIDENCE a FOUND projection or a new Begin is refused; nothing changes."""
    final = ready(evidence=EvidenceStatus.NO_EVIDENCE, content="none", scope="index A")
    upgrade = ProjectionReceived(
        projection=projection(EvidenceStatus.EVIDENCE_FOUND, "found!"), now_ms=T0 + 40
    )
    assert transition(final, upgrade, Limits()) is ErrorCode.INVALID_TRANSITION
    retry = Begin(
        run_id=RUN_ID,
        tool_call_id="call_1",
        tool_name=TOOL,
        request_json=ARGS,
        invocation_token="tok-2",
        sequence=2,
        ttl_ms=TTL_MS,
        now_ms=T0 + 40,
    )
    assert transition(final, retry, Limits()) is ErrorCode.INVALID_TRANSITION
    assert final.evidence_status is EvidenceStatus.NO_EVIDENCE


@pytest.mark.parametrize(
    "bad",
    [
        Projection(evidence_status="FOUND", content="x"),
        Projection(evidence_status=EvidenceStatus.ERROR, content="x", scope="s"),
        Projection(evidence_status="evidence_found", content="x"),
        Projection(evidence_status=7, content="x"),  # type: ignore[arg-type]
        Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content=None),  # type: ignore[arg-type]
        Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="x", scope=b"s"),  # type: ignore[arg-type]
        Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="\ud800"),
        {"evidence_status": "EVIDENCE_FOUND", "content": "x"},
        None,
    ],
    ids=repr,
)
def test_invalid_projection_makes_the_record_error(bad: object) -> None:
    """CIS-EVID-5, CIS-EVID-2, CIS-FAIL-6: an invalid projection is ERROR/PROJECTION_INVALID; raw stays."""
    record = with_raw(begun())
    result = step(record, ProjectionReceived(projection=bad, now_ms=T0 + 20))  # type: ignore[arg-type]
    assert result.status is InvocationStatus.ERROR
    assert result.evidence_status is EvidenceStatus.ERROR
    assert result.error_code is ErrorCode.PROJECTION_INVALID
    assert result.agent_result is None
    assert result.scope is None
    assert result.raw_response == RAW  # harness-only, kept for diagnosis
    assert cite(RUN_ID, "call_1", result, T0 + 21).kind is CitationKind.NOT_REFERENCABLE


def test_projector_exception_makes_the_record_error() -> None:
    """CIS-EVID-5, CIS-FAIL-6: a projector that raised: ERROR/PROJECTION_FAILED, no agent result, raw kept."""
    record = with_raw(begun())
    result = step(record, Failed(code=ErrorCode.PROJECTION_FAILED, now_ms=T0 + 20))
    assert result.status is InvocationStatus.ERROR
    assert result.error_code is ErrorCode.PROJECTION_FAILED
    assert result.evidence_status is EvidenceStatus.ERROR
    assert result.agent_result is None
    assert result.raw_response == RAW


def test_ready_and_error_evidence_agree() -> None:
    """CIS-EVID-1: READY carries FOUND or NO_EVIDENCE; ERROR carries evidence ERROR and a code."""
    for final in (ready(), ready(evidence=EvidenceStatus.NO_EVIDENCE)):
        assert final.status is InvocationStatus.READY
        assert final.evidence_status in (EvidenceStatus.EVIDENCE_FOUND, EvidenceStatus.NO_EVIDENCE)
        assert final.error_code is None
    for code in sorted(FAILURE_CODES):
        failed = errored(code=code)
        assert failed.evidence_status is EvidenceStatus.ERROR
        assert failed.error_code is code


# -- failures ----------------------------------------------------------------------------


def test_executor_exception_makes_the_record_error() -> None:
    """CIS-FAIL-2: the executor raised after PROJECTING began: ERROR/EXECUTION_FAILED, no raw, no result."""
    result = errored(begun(), ErrorCode.EXECUTION_FAILED)
    assert result.status is InvocationStatus.ERROR
    assert result.error_code is ErrorCode.EXECUTION_FAILED
    assert result.raw_response is None
    assert result.agent_result is None


def test_executor_timeout_makes_the_record_error() -> None:
    """CIS-FAIL-3: a timed-out executor is ERROR/EXECUTION_TIMEOUT."""
    result = errored(begun(), ErrorCode.EXECUTION_TIMEOUT)
    assert result.error_code is ErrorCode.EXECUTION_TIMEOUT
    assert result.evidence_status is EvidenceStatus.ERROR


@pytest.mark.parametrize("raw", [b"bytes", 42, None, {"a": 1}, "lone \ud800 surrogate"], ids=repr)
def test_unserializable_raw_response_is_serialization_failed(raw: object) -> None:
    """CIS-FAIL-4: a raw response that is not encodable text is ERROR/SERIALIZATION_FAILED, not stored."""
    result = step(begun(), RawReceived(raw_response=raw, now_ms=T0 + 10))  # type: ignore[arg-type]
    assert result.status is InvocationStatus.ERROR
    assert result.error_code is ErrorCode.SERIALIZATION_FAILED
    assert result.raw_response is None


def test_every_failure_maps_to_its_code_and_others_are_programming_errors() -> None:
    """CIS-FAIL-1, CIS-KERN-2: each failure code gives ERROR with it; other codes raise ValueError."""
    for code in ErrorCode:
        event = Failed(code=code, now_ms=T0 + 10)
        if code in FAILURE_CODES:
            assert step(begun(), event).error_code is code
        else:
            with pytest.raises(ValueError, match="not a failure code"):
                transition(begun(), event, Limits())


def test_non_events_are_programming_errors() -> None:
    """CIS-KERN-2: a non-event raises TypeError; domain outcomes (illegal events) are values."""
    with pytest.raises(TypeError):
        transition(begun(), "RawReceived", Limits())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        transition(None, None, Limits())  # type: ignore[arg-type]
    outcome = transition(ready(), Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=T0 + 30), Limits())
    assert outcome is ErrorCode.INVALID_TRANSITION


# -- sizes at completion -------------------------------------------------------------------


def test_raw_response_over_limit_is_refused_whole() -> None:
    """CIS-SIZE-3: raw over its limit: ERROR/RESULT_TOO_LARGE, raw not stored, projection refused."""
    limits = Limits(raw_bytes=100)
    raw = "\u00e9" * 50 + "x"  # 101 UTF-8 bytes, 51 characters
    result = step(begun(), RawReceived(raw_response=raw, now_ms=T0 + 10), limits)
    assert result.status is InvocationStatus.ERROR
    assert result.error_code is ErrorCode.RESULT_TOO_LARGE
    assert result.raw_response is None
    # The projector is never called: the kernel refuses a projection on this record.
    late = ProjectionReceived(projection=projection(), now_ms=T0 + 20)
    assert transition(result, late, limits) is ErrorCode.INVALID_TRANSITION


def test_agent_result_over_limit_returns_nothing() -> None:
    """CIS-SIZE-4: content + scope over the agent-result limit: ERROR/RESULT_TOO_LARGE, no result kept."""
    limits = Limits(agent_result_bytes=20)
    record = with_raw(begun())
    result = step(
        record,
        ProjectionReceived(projection=projection(content="\U0001f600" * 4, scope="abcde"), now_ms=T0 + 20),
        limits,
    )
    assert result.status is InvocationStatus.ERROR
    assert result.error_code is ErrorCode.RESULT_TOO_LARGE
    assert result.agent_result is None
    assert result.scope is None
    assert result.raw_response == RAW
    assert cite(RUN_ID, "call_1", result, T0 + 21).content is None


def test_whole_record_limit_at_creation_and_completion() -> None:
    """CIS-SIZE-5: a record over the record limit is REQUEST_TOO_LARGE at Begin, RESULT_TOO_LARGE later."""
    record = begun()
    base = record_bytes(record)
    assert base == len(RUN_ID) + len("call_1") + len(TOOL) + len(ARGS)
    tight = Limits(record_bytes=base - 1)
    run = make_run()
    assert admit(run, None, request(), tight, T0) is ErrorCode.REQUEST_TOO_LARGE
    exact = Limits(record_bytes=base + 3)
    raw_ok = step(record, RawReceived(raw_response="abc", now_ms=T0 + 5), exact)
    assert raw_ok.raw_response == "abc"
    raw_over = step(record, RawReceived(raw_response="abcd", now_ms=T0 + 5), exact)
    assert raw_over.error_code is ErrorCode.RESULT_TOO_LARGE
    assert raw_over.raw_response is None
    done = step(
        raw_ok, ProjectionReceived(projection=projection(content="x", scope=""), now_ms=T0 + 6), exact
    )
    assert done.error_code is ErrorCode.RESULT_TOO_LARGE
    assert done.agent_result is None


# -- terminal states, expiry and sweeping ---------------------------------------------------


@pytest.mark.parametrize("final", [ready(), ready(evidence=EvidenceStatus.NO_EVIDENCE), errored()], ids=str)
def test_terminal_records_refuse_every_event(final: CanonicalRecord) -> None:
    """CIS-LIFE-3, CIS-LIFE-2: no event leaves READY or ERROR; the record stays exactly as it was."""
    before = attrs.evolve(final)
    events: list[Event] = [
        RawReceived(raw_response="again", now_ms=T0 + 40),
        ProjectionReceived(projection=projection(), now_ms=T0 + 40),
        *[Failed(code=code, now_ms=T0 + 40) for code in FAILURE_CODES],
        SweptStale(now_ms=T0 + 40, older_than_ms=0),
    ]
    for event in events:
        assert transition(final, event, Limits()) is ErrorCode.INVALID_TRANSITION
    assert final == before


def test_out_of_order_events_in_projecting_are_refused() -> None:
    """CIS-LIFE-2: a projection before the raw response, or a second raw response, is INVALID_TRANSITION."""
    fresh = begun()
    assert (
        transition(fresh, ProjectionReceived(projection=projection(), now_ms=T0 + 5), Limits())
        is ErrorCode.INVALID_TRANSITION
    )
    holding = with_raw(fresh)
    assert (
        transition(holding, RawReceived(raw_response="second", now_ms=T0 + 15), Limits())
        is ErrorCode.INVALID_TRANSITION
    )
    assert holding.raw_response == RAW


def test_expired_record_is_absent_and_not_revived() -> None:
    """CIS-TTL-4: at expiry a record reads ABSENT, is not referencable, and late events do not revive it."""
    record = with_raw(begun())
    at_expiry = record.expires_at_ms
    assert phase_of(record, at_expiry - 1) is Phase.AWAITING_PROJECTION
    assert phase_of(record, at_expiry) is Phase.ABSENT
    late = ProjectionReceived(projection=projection(), now_ms=at_expiry)
    assert transition(record, late, Limits()) is ErrorCode.INVALID_TRANSITION
    final = ready()
    assert cite(RUN_ID, "call_1", final, final.expires_at_ms).reason is ExclusionReason.EXPIRED


def test_stale_projecting_records_are_swept() -> None:
    """CIS-LIFE-7: PROJECTING at least the sweep age old becomes ERROR/STALE_PROJECTION; else NOT_STALE."""
    record = with_raw(begun())
    young = SweptStale(now_ms=T0 + 999, older_than_ms=1_000)
    assert transition(record, young, Limits()) is ErrorCode.NOT_STALE
    old = SweptStale(now_ms=T0 + 1_000, older_than_ms=1_000)
    swept = step(record, old)
    assert swept.status is InvocationStatus.ERROR
    assert swept.error_code is ErrorCode.STALE_PROJECTION
    assert swept.evidence_status is EvidenceStatus.ERROR
    assert swept.updated_at_ms == T0 + 1_000
    assert swept.raw_response == RAW
    assert transition(swept, old, Limits()) is ErrorCode.INVALID_TRANSITION
    assert transition(ready(), old, Limits()) is ErrorCode.INVALID_TRANSITION
