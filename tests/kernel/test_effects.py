"""Store effects and visibility rules: one place for every rule a store applies.

Each rule that stores, the stateful model, the oracle and the boundary once restated
(expiry, the completion's charge and completed-list append, the own-create test, the
sweep candidates, the agent view) is pinned here on both sides of its boundary.
"""

from __future__ import annotations

import attrs
import pytest

from invocation_store.kernel import (
    ERROR_MESSAGES,
    CompareAndSet,
    Completion,
    ErrorCode,
    EvidenceStatus,
    Limits,
    RunStatus,
    admit,
    agent_view,
    check_begin,
    check_completion,
    completion_charge,
    decide_completion,
    failure_view,
    is_live,
    is_own_create,
    live,
    record_bytes,
    remaining_ms,
    sweep_candidates,
    utf8_len,
    without_raw,
)

from ._helpers import (
    ARGS,
    RAW,
    RUN_ID,
    T0,
    TOOL,
    admitted,
    begun,
    default_limits,
    errored,
    make_run,
    ready,
    request,
    with_raw,
)


def test_is_live_boundary_is_exclusive() -> None:
    """CIS-TTL-4: live strictly before ``expires_at_ms``; at it, absent."""
    record = begun()
    run = make_run()
    for value in (record, run):
        assert is_live(value, value.expires_at_ms - 1) is True
        assert is_live(value, value.expires_at_ms) is False
        assert is_live(value, value.expires_at_ms + 1) is False
        assert live(value, value.expires_at_ms - 1) is value
        assert live(value, value.expires_at_ms) is None
        assert remaining_ms(value, value.expires_at_ms - 1) == 1
        assert remaining_ms(value, value.expires_at_ms) is None
        assert remaining_ms(value, value.expires_at_ms - 500) == 500
    assert is_live(None, T0) is False
    assert live(None, T0) is None
    assert remaining_ms(None, T0) is None


def test_completion_charges_stored_bytes_and_appends_terminal() -> None:
    """CIS-RUN-6, CIS-PROG-1: a terminal WRITE charges the bytes stored and joins the done list."""
    admission = admitted()
    before = with_raw(admission.record)
    after = ready(admission.record)
    effect = decide_completion(before, before, after, admission.run, T0 + 30)
    assert isinstance(effect, Completion)
    expected_charge = record_bytes(after) - record_bytes(before)
    assert expected_charge > 0
    assert effect == Completion(
        action=CompareAndSet.WRITE,
        record=after,
        run=attrs.evolve(admission.run, bytes_used=admission.run.bytes_used + expected_charge),
        charge_bytes=expected_charge,
        append_done=True,
    )
    assert completion_charge(before, after) == expected_charge


def test_non_terminal_completion_charges_but_does_not_append() -> None:
    """CIS-RUN-6, CIS-PROG-1: storing the raw response charges its bytes; PROJECTING stays off the list."""
    admission = admitted()
    before = admission.record
    after = with_raw(before)
    effect = decide_completion(before, before, after, admission.run, T0 + 30)
    assert isinstance(effect, Completion)
    assert effect.action is CompareAndSet.WRITE
    assert effect.append_done is False
    assert effect.charge_bytes == len(RAW.encode("utf-8"))
    assert effect.run is not None
    assert effect.run.bytes_used == admission.run.bytes_used + effect.charge_bytes


def test_one_byte_completion_is_charged_one_byte() -> None:
    """CIS-RUN-6: the smallest completion that stores anything is charged exactly."""
    admission = admitted()
    after = with_raw(admission.record, raw="x")
    effect = decide_completion(admission.record, admission.record, after, admission.run, T0 + 30)
    assert isinstance(effect, Completion)
    assert effect.charge_bytes == 1
    assert effect.run is not None
    assert effect.run.bytes_used == admission.run.bytes_used + 1


def test_completion_of_a_lapsed_or_foreign_run_writes_only_the_record() -> None:
    """CIS-PROG-1: a lapsed run's usage and lists lapsed with it; another run is never charged."""
    admission = admitted()
    after = errored(admission.record)
    for run, now in (
        (None, T0 + 30),
        (make_run(run_id="run-2"), T0 + 30),
    ):
        effect = decide_completion(admission.record, admission.record, after, run, now)
        assert effect == Completion(
            action=CompareAndSet.WRITE, record=after, run=None, charge_bytes=0, append_done=False
        )
    short = make_run(ttl_ms=1, deadline_ms=T0 + 5)
    assert short.expires_at_ms == T0 + 6
    at_expiry = attrs.evolve(after, updated_at_ms=T0 + 6)
    effect = decide_completion(admission.record, admission.record, at_expiry, short, T0 + 6)
    assert isinstance(effect, Completion)
    assert (effect.run, effect.charge_bytes, effect.append_done) == (None, 0, False)
    effect = decide_completion(admission.record, admission.record, at_expiry, short, T0 + 5)
    assert isinstance(effect, Completion)
    assert effect.run is not None
    assert effect.append_done is True


def test_replay_and_refusals() -> None:
    """CIS-STORE-3, CIS-RETRY-2: a retried write is REPLAY with nothing to apply; else a code."""
    admission = admitted()
    after = ready(admission.record)
    effect = decide_completion(after, admission.record, after, admission.run, T0 + 30)
    assert effect == Completion(
        action=CompareAndSet.REPLAY, record=after, run=None, charge_bytes=0, append_done=False
    )
    assert decide_completion(None, admission.record, after, admission.run, T0 + 30) is (
        ErrorCode.INVALID_TRANSITION
    )
    other = errored(admission.record)
    assert decide_completion(other, admission.record, after, admission.run, T0 + 30) is (
        ErrorCode.INVALID_TRANSITION
    )
    expired = admission.record.expires_at_ms
    assert decide_completion(admission.record, admission.record, after, admission.run, expired) is (
        ErrorCode.INVALID_TRANSITION
    )


def test_is_own_create_compares_every_field() -> None:
    """CIS-RETRY-2: only the untouched PROJECTING record of this very request, created no earlier
    than the caller's reading before it sent the create, is its own create."""
    req = request()
    record = admitted().record
    assert is_own_create(record, req, T0) is True
    for changed in (
        attrs.evolve(req, invocation_token="tok-2"),
        attrs.evolve(req, run_id="run-2"),
        attrs.evolve(req, tool_call_id="call_2"),
        attrs.evolve(req, tool_name="other"),
        attrs.evolve(req, request_json='{"q": "x"}'),
    ):
        assert is_own_create(record, changed, T0) is False
    # The creation time is the store's: later than the caller's reading is still this request's,
    # earlier is a call before this one that reused the token.
    assert is_own_create(record, req, T0 - 1) is True
    assert is_own_create(record, req, T0 + 1) is False
    assert is_own_create(with_raw(record), req, T0) is False
    assert is_own_create(ready(record), req, T0) is False


def test_sweep_candidates_are_live_projecting_records_of_the_run() -> None:
    """CIS-LIFE-7: terminal, absent, expired and other-run records are never swept."""
    waiting = begun("call_1")
    holding = with_raw(begun("call_2"))
    done = ready(begun("call_3"))
    foreign = begun("call_4", run_id="run-2")
    records = [waiting, None, holding, done, foreign]
    assert sweep_candidates(records, "run-1", T0 + 30) == (waiting, holding)
    assert sweep_candidates(records, "run-1", waiting.expires_at_ms) == ()
    assert sweep_candidates(records, "run-2", T0 + 30) == (foreign,)


def test_agent_view_of_ready_and_error_records() -> None:
    """CIS-BND-4, CIS-ERR-1: a bounded result or a code with its fixed message; never raw."""
    found = agent_view(ready())
    assert found.ok is True
    assert (found.evidence_status, found.content, found.scope, found.negative) == (
        EvidenceStatus.EVIDENCE_FOUND,
        "Paris: 18 C",
        "weather index",
        False,
    )
    negative = agent_view(ready(evidence=EvidenceStatus.NO_EVIDENCE, content="none", scope="index"))
    assert negative.ok is True
    assert negative.negative is True
    failed = agent_view(errored(code=ErrorCode.EXECUTION_TIMEOUT))
    assert failed == failure_view(ErrorCode.EXECUTION_TIMEOUT, "call_1")
    assert failed.message == ERROR_MESSAGES[ErrorCode.EXECUTION_TIMEOUT]
    assert RAW not in repr(found)
    codeless = attrs.evolve(errored(), error_code=None)
    assert agent_view(codeless) == failure_view(ErrorCode.STORE_UNAVAILABLE, "call_1")


def test_agent_view_of_a_record_the_agent_may_not_see() -> None:
    """CIS-BND-4, CIS-STORE-6, CIS-ID-5: a record that is not well formed is STORE_UNAVAILABLE (never
    shown, as a store answers a read of it), a PROJECTING one CALL_IN_PROGRESS (no fate yet); the id
    is echoed only when safe."""
    corrupt = attrs.evolve(ready(), evidence_status=EvidenceStatus.ERROR)
    assert agent_view(corrupt) == failure_view(ErrorCode.STORE_UNAVAILABLE, "call_1")
    unsafe = attrs.evolve(ready(), tool_call_id="call 1")
    assert agent_view(unsafe) == failure_view(ErrorCode.STORE_UNAVAILABLE, None)
    assert agent_view(begun("call_2")) == failure_view(ErrorCode.CALL_IN_PROGRESS, "call_2")


@pytest.mark.parametrize("tool_call_id", [None, "", "bad id", "call{1}", 7, "é"])
def test_failure_view_never_echoes_an_unsafe_id(tool_call_id: object) -> None:
    """CIS-ERR-1: an unsafe or missing id is never echoed back to the agent."""
    view = failure_view(ErrorCode.UNSAFE_TOOL_CALL_ID, tool_call_id)
    assert view.tool_call_id is None
    assert view.ok is False
    assert failure_view(ErrorCode.DUPLICATE_TOOL_CALL, "call_1").tool_call_id == "call_1"


def test_run_status_is_untouched_by_a_completion() -> None:
    """CIS-RUN-6: a completion changes the run's byte usage only."""
    admission = admitted()
    effect = decide_completion(
        admission.record, admission.record, ready(admission.record), admission.run, T0 + 30
    )
    assert isinstance(effect, Completion)
    assert effect.run is not None
    assert effect.run.status is RunStatus.ACTIVE
    assert effect.run.tool_calls_used == admission.run.tool_calls_used


def test_check_begin_is_the_run_independent_part_of_admission() -> None:
    """CIS-ID-6, CIS-SIZE-5: check_begin answers what admit answers for the Begin row, without a run."""
    assert check_begin(request(), default_limits()) is None
    cases = [
        (request(tool_call_id=""), default_limits(), ErrorCode.MISSING_TOOL_CALL_ID),
        (request(tool_call_id="bad id"), default_limits(), ErrorCode.UNSAFE_TOOL_CALL_ID),
        (request(run_id="run 1"), default_limits(), ErrorCode.RUN_MISMATCH),
        (request(), Limits(record_bytes=10), ErrorCode.REQUEST_TOO_LARGE),
    ]
    for req, limits, code in cases:
        assert check_begin(req, limits) is code
    big = Limits(record_bytes=len(RUN_ID) + len("call_1") + len(TOOL) + len(ARGS))
    assert check_begin(request(), big) is None
    assert check_begin(request(), Limits(record_bytes=big.record_bytes - 1)) is ErrorCode.REQUEST_TOO_LARGE
    assert admit(make_run(), None, request(), Limits(record_bytes=big.record_bytes - 1), T0) is (
        ErrorCode.REQUEST_TOO_LARGE
    )


def test_check_completion_refuses_identity_changes() -> None:
    """CIS-LIFE-6: a completion that changes an identity field is a programming error."""
    record = begun()
    check_completion(record, with_raw(record))
    for changed in (
        attrs.evolve(record, expires_at_ms=record.expires_at_ms + 1),
        attrs.evolve(record, request_json="{}"),
        attrs.evolve(record, invocation_token="tok-2"),
        attrs.evolve(record, sequence=2),
    ):
        with pytest.raises(ValueError, match="may not change"):
            check_completion(record, changed)


def test_completion_charge_is_never_negative_and_zero_for_no_growth() -> None:
    """CIS-RUN-6: a completion that stores no more bytes is charged 0, never 1 and never negative."""
    record = begun()
    holding = with_raw(record)
    assert completion_charge(record, record) == 0
    assert completion_charge(holding, record) == 0  # shrinking is clamped to 0
    assert completion_charge(record, holding) == len(RAW.encode("utf-8"))


def test_agent_view_echoes_the_id_of_a_ready_record() -> None:
    """CIS-BND-4: a bounded result names the call it answers."""
    view = agent_view(ready(begun("call_7")))
    assert view.ok is True
    assert view.tool_call_id == "call_7"
    assert (view.code, view.message) == (None, None)


@pytest.mark.parametrize(
    "record",
    [
        attrs.evolve(errored(), evidence_status=EvidenceStatus.EVIDENCE_FOUND),
        attrs.evolve(errored(), evidence_status=EvidenceStatus.NO_EVIDENCE),
        attrs.evolve(ready(), evidence_status=EvidenceStatus.ERROR, error_code=ErrorCode.EXECUTION_FAILED),
    ],
    ids=["error-with-found", "error-with-no-evidence", "ready-with-error-evidence"],
)
def test_agent_view_needs_both_ready_and_a_result_evidence(record: object) -> None:
    """CIS-BND-4, CIS-ERR-1, CIS-STORE-6: only READY *and* FOUND/NO_EVIDENCE is a result; either alone
    is a record no transition makes, never shown: STORE_UNAVAILABLE."""
    view = agent_view(record)  # type: ignore[arg-type]
    assert view == failure_view(ErrorCode.STORE_UNAVAILABLE, "call_1")
    assert view.content is None


def test_without_raw_leaves_out_the_raw_response_only() -> None:
    """CIS-PROG-5, CIS-REC-3: a read without raw responses gives the record with raw_response None and
    every other field as stored; a record without one is returned as it is."""
    holding = ready()
    assert holding.raw_response == RAW
    light = without_raw(holding)
    assert light.raw_response is None
    assert attrs.evolve(light, raw_response=RAW) == holding
    waiting = begun()
    assert without_raw(waiting) is waiting


def test_carried_request_sizes_decide_as_measured_ones() -> None:
    """CIS-SIZE-1, CIS-SIZE-5, CIS-RUN-6: a request size the caller measured once and carried into
    check_begin and admit decides exactly as the kernel's own measure, for ASCII and multi-byte text,
    at the record limit and at the byte budget."""
    for arguments in ('{"q": "abc"}', '{"q": "\u00e9\u4e2d\U0001f600"}'):
        size = utf8_len(arguments)
        assert size is not None
        asked = request(request_json=arguments)
        whole = len(RUN_ID) + len("call_1") + len(TOOL) + size
        for limit in (whole - 1, whole):
            limits = attrs.evolve(default_limits(), record_bytes=limit)
            carried = check_begin(asked, limits, request_bytes=size)
            assert carried == check_begin(asked, limits)
            assert (carried is ErrorCode.REQUEST_TOO_LARGE) is (limit < whole)
        for budget in (size - 1, size):
            run = make_run(byte_budget=budget)
            carried_admission = admit(run, None, asked, default_limits(), T0, request_bytes=size)
            assert carried_admission == admit(run, None, asked, default_limits(), T0)
            assert (carried_admission is ErrorCode.RUN_BYTES_EXHAUSTED) is (budget < size)


def test_a_charge_measures_the_outcome_and_refuses_a_pair_that_is_no_completion() -> None:
    """CIS-RUN-6: a completion's charge is record_bytes(after) - record_bytes(before), multi-byte
    texts counted in UTF-8 bytes; a pair whose identity differs is not a completion: ValueError."""
    before = begun(request_json='{"q": "\u4e2d\u6587"}')
    after = with_raw(before, raw="\u00e9" * 10)
    assert completion_charge(before, after) == record_bytes(after) - record_bytes(before) == 20
    with pytest.raises(ValueError, match="request_json"):
        completion_charge(before, attrs.evolve(after, request_json="{}"))
