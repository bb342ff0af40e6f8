"""Every seed scenario end to end through the sync ToolBoundary, on every store.

``make_store`` is parametrized over the in-memory and the Redis store; each test
runs on both. Executors and projectors are counting fakes.
"""

from __future__ import annotations

import contextvars
import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from invocation_store import (
    ERROR_MESSAGES,
    BoundaryResult,
    ErrorCode,
    EvidenceStatus,
    InvocationStatus,
    Limits,
    Projection,
    RunContext,
    ToolBoundary,
    ToolRegistry,
    ToolSpec,
)
from invocation_store.kernel import AdmissionRequest
from invocation_store.testing import FakeClock

from ._fakes import (
    MARKER,
    OTHER_RUN,
    RUN,
    TTL_MS,
    CountingStore,
    FailingStore,
    FakeExecutor,
    FakeProjector,
    boundary_for,
    envelope,
    no_evidence,
    open_run,
    tool,
)


@pytest.fixture
def store(make_store: Any, clock: FakeClock) -> Any:
    return make_store(clock)


def assert_failure(result: BoundaryResult, code: ErrorCode) -> None:
    assert result.ok is False
    assert result.code is code
    assert result.message == ERROR_MESSAGES[code]
    assert result.content is None
    assert result.scope is None
    assert result.evidence_status is None


# ---------------------------------------------------------------------------
# Success


def test_success_returns_only_the_bounded_result(store: Any, clock: FakeClock) -> None:
    """CIS-REC-5, CIS-BND-1, CIS-BND-4, CIS-REC-1, CIS-REC-2, CIS-REC-3: READY, one record, bounded result."""
    raw = '{"hits":["' + MARKER + '"]}'
    executor, projector = FakeExecutor(raw), FakeProjector()
    boundary = boundary_for(store, tool(executor, projector))
    context = open_run(boundary)
    arguments = '{ "q" : "disk",  "n": 3 }'  # odd spacing: stored exactly as supplied

    result = boundary.invoke(context, envelope(arguments=arguments))

    assert result.ok is True
    assert result.code is None
    assert result.message is None
    assert result.evidence_status is EvidenceStatus.EVIDENCE_FOUND
    assert result.negative is False
    assert (result.content, result.scope) == ("db-1 disk full", "logs")
    assert result.tool_call_id == "call_1"
    assert MARKER not in repr(result)
    assert executor.calls == [{"q": "disk", "n": 3}]
    assert projector.calls == [(raw, {"q": "disk", "n": 3})]
    record = store.get(RUN, "call_1")
    assert record.status is InvocationStatus.READY
    assert record.evidence_status is EvidenceStatus.EVIDENCE_FOUND
    assert record.request_json == arguments
    assert record.raw_response == raw
    assert record.agent_result == "db-1 disk full"
    assert (record.run_id, record.tool_call_id, record.tool_name) == (RUN, "call_1", "search")
    assert record.error_code is None
    assert record.sequence == 1
    assert record.expires_at_ms == record.created_at_ms + TTL_MS


def test_begin_creates_one_projecting_record_before_the_tool_runs(store: Any) -> None:
    """CIS-REC-4, CIS-LIFE-5: while the executor runs, the record is PROJECTING with the request only."""
    seen: list[Any] = []
    executor = FakeExecutor(on_call=lambda _args: seen.append(store.get(RUN, "call_1")))
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary)

    boundary.invoke(context, envelope())

    (during,) = seen
    assert during.status is InvocationStatus.PROJECTING
    assert during.request_json == '{"q":"disk"}'
    assert during.tool_call_id == "call_1"
    assert (during.raw_response, during.agent_result, during.evidence_status, during.error_code) == (
        None,
        None,
        None,
        None,
    )
    assert store.calls(RUN) == ("call_1",)


def test_non_text_raw_is_serialized_once_compactly(store: Any) -> None:
    """CIS-FAIL-4, CIS-REC-3: a dict raw response is stored as compact, sorted JSON, never a preview."""
    executor = FakeExecutor({"b": [1, 2], "a": "é"})
    projector = FakeProjector()
    boundary = boundary_for(store, tool(executor, projector))
    context = open_run(boundary)

    assert boundary.invoke(context, envelope()).ok
    assert store.get(RUN, "call_1").raw_response == '{"a":"é","b":[1,2]}'
    assert projector.calls[0][0] == '{"a":"é","b":[1,2]}'


@pytest.mark.parametrize(
    "tool_call_id",
    [
        "call_abc123XYZ",
        "toolu_01A09q90qw90lq917835lq9",
        "tooluse_Vr3Xyz-Q",
        "aB3dE5fG7",
        "chatcmpl-tool-3f9a0b",
        "functions.get_weather:0",
        "123e4567-e89b-12d3-a456-426614174000",
    ],
)
def test_framework_ids_are_preserved(store: Any, tool_call_id: str) -> None:
    """CIS-ID-1, CIS-ID-4: real framework ids pass and key the record exactly."""
    boundary = boundary_for(store)
    context = open_run(boundary)

    result = boundary.invoke(context, envelope(tool_call_id))

    assert result.ok
    assert result.tool_call_id == tool_call_id
    assert store.get(RUN, tool_call_id).tool_call_id == tool_call_id
    assert store.calls(RUN) == (tool_call_id,)


# ---------------------------------------------------------------------------
# NO_EVIDENCE


def test_no_evidence_is_a_scoped_negative_observation(store: Any) -> None:
    """CIS-EVID-3, CIS-EVID-4, CIS-REF-2: READY, scope kept, negative, executor run once, never upgraded."""
    executor = FakeExecutor('{"hits":[]}')
    projector = FakeProjector(no_evidence("logs of db-1, last 24h"))
    boundary = boundary_for(store, tool(executor, projector))
    context = open_run(boundary)

    result = boundary.invoke(context, envelope())

    assert result.ok is True
    assert result.evidence_status is EvidenceStatus.NO_EVIDENCE
    assert result.negative is True
    assert result.scope == "logs of db-1, last 24h"
    assert result.content == "no matching lines"
    assert len(executor.calls) == 1
    assert len(projector.calls) == 1
    record = store.get(RUN, "call_1")
    assert (record.status, record.evidence_status) == (InvocationStatus.READY, EvidenceStatus.NO_EVIDENCE)
    assert record.scope == "logs of db-1, last 24h"
    assert boundary.cite(context, "call_1").kind.value == "NEGATIVE_OBSERVATION"


# ---------------------------------------------------------------------------
# Executor failures


def test_executor_exception_is_execution_failed(store: Any) -> None:
    """CIS-FAIL-2, CIS-BND-2, CIS-EVID-1: the record becomes ERROR/EXECUTION_FAILED, no raw returned."""
    executor = FakeExecutor(raises=RuntimeError(f"boom {MARKER}"))
    projector = FakeProjector()
    boundary = boundary_for(store, tool(executor, projector))
    context = open_run(boundary)

    result = boundary.invoke(context, envelope())

    assert_failure(result, ErrorCode.EXECUTION_FAILED)
    assert result.tool_call_id == "call_1"
    assert MARKER not in repr(result)
    assert projector.calls == []
    record = store.get(RUN, "call_1")
    assert record.status is InvocationStatus.ERROR
    assert record.evidence_status is EvidenceStatus.ERROR
    assert record.error_code is ErrorCode.EXECUTION_FAILED
    assert record.raw_response is None
    assert record.agent_result is None


def test_executor_timeout(store: Any) -> None:
    """CIS-FAIL-3: an executor over its tool's timeout makes the record ERROR/EXECUTION_TIMEOUT."""
    executor = FakeExecutor(block=True)
    projector = FakeProjector()
    boundary = boundary_for(store, tool(executor, projector, timeout_ms=50))
    context = open_run(boundary)
    try:
        result = boundary.invoke(context, envelope())
    finally:
        executor.release.set()

    assert_failure(result, ErrorCode.EXECUTION_TIMEOUT)
    assert projector.calls == []
    record = store.get(RUN, "call_1")
    assert (record.status, record.error_code) == (InvocationStatus.ERROR, ErrorCode.EXECUTION_TIMEOUT)


def test_an_executor_raising_system_exit_is_a_failure(store: Any) -> None:
    """CIS-FAIL-2: even a BaseException raised in the worker thread is EXECUTION_FAILED, never re-raised."""
    boundary = boundary_for(store, tool(FakeExecutor(raises=SystemExit(3))))
    context = open_run(boundary)
    assert boundary.invoke(context, envelope()).code is ErrorCode.EXECUTION_FAILED


def test_executors_see_the_callers_context_variables(store: Any) -> None:
    """CIS-BND-5: a harness's context (trace ids, deadlines) reaches executors in their worker thread."""
    trace: contextvars.ContextVar[str] = contextvars.ContextVar("trace", default="none")
    seen: list[str] = []
    boundary = boundary_for(store, tool(FakeExecutor(on_call=lambda _args: seen.append(trace.get()))))
    context = open_run(boundary)
    trace.set("trace-42")
    assert boundary.invoke(context, envelope()).ok
    assert seen == ["trace-42"]


def test_an_executor_raising_timeout_error_is_a_failure_not_a_timeout(store: Any) -> None:
    """CIS-FAIL-2, CIS-FAIL-3: only the boundary's own clock decides EXECUTION_TIMEOUT."""
    boundary = boundary_for(store, tool(FakeExecutor(raises=TimeoutError("upstream"))))
    context = open_run(boundary)
    assert boundary.invoke(context, envelope()).code is ErrorCode.EXECUTION_FAILED


@pytest.mark.parametrize(
    "raw",
    [object(), b"bytes are not text", float("nan"), {1: "a", "b": 2}, "lone \ud800 surrogate"],
    ids=["object", "bytes", "nan", "mixed-keys", "lone-surrogate"],
)
def test_unserializable_raw_is_serialization_failed(store: Any, raw: object) -> None:
    """CIS-FAIL-4: a raw response that cannot be encoded makes the record ERROR/SERIALIZATION_FAILED."""
    projector = FakeProjector()
    boundary = boundary_for(store, tool(FakeExecutor(raw), projector))
    context = open_run(boundary)

    assert_failure(boundary.invoke(context, envelope()), ErrorCode.SERIALIZATION_FAILED)
    assert projector.calls == []
    assert store.get(RUN, "call_1").error_code is ErrorCode.SERIALIZATION_FAILED


def test_raw_over_the_limit_is_refused_whole_and_not_projected(store: Any) -> None:
    """CIS-SIZE-3, CIS-SIZE-1: ERROR/RESULT_TOO_LARGE, raw not stored nor truncated, projector not called."""
    limits = Limits(raw_bytes=100)
    raw = "é" * 51  # 51 characters but 102 UTF-8 bytes
    projector = FakeProjector()
    boundary = boundary_for(store, tool(FakeExecutor(raw), projector), limits=limits)
    context = open_run(boundary)

    result = boundary.invoke(context, envelope())

    assert_failure(result, ErrorCode.RESULT_TOO_LARGE)
    assert projector.calls == []
    record = store.get(RUN, "call_1")
    assert (record.status, record.error_code) == (InvocationStatus.ERROR, ErrorCode.RESULT_TOO_LARGE)
    assert record.raw_response is None


def test_raw_at_the_limit_is_kept(store: Any) -> None:
    """CIS-SIZE-1: exactly the limit in UTF-8 bytes passes, whole."""
    raw = "é" * 50  # 100 bytes
    boundary = boundary_for(store, tool(FakeExecutor(raw)), limits=Limits(raw_bytes=100))
    context = open_run(boundary)
    assert boundary.invoke(context, envelope()).ok
    assert store.get(RUN, "call_1").raw_response == raw


# ---------------------------------------------------------------------------
# Projector failures


def test_projector_exception_keeps_raw_harness_only(store: Any) -> None:
    """CIS-EVID-5, CIS-FAIL-6: ERROR/PROJECTION_FAILED; the raw stays in the record, not in the result."""
    raw = f"raw text {MARKER}"
    boundary = boundary_for(store, tool(FakeExecutor(raw), FakeProjector(raises=ValueError(MARKER))))
    context = open_run(boundary)

    result = boundary.invoke(context, envelope())

    assert_failure(result, ErrorCode.PROJECTION_FAILED)
    assert MARKER not in repr(result)
    record = store.get(RUN, "call_1")
    assert (record.status, record.error_code) == (InvocationStatus.ERROR, ErrorCode.PROJECTION_FAILED)
    assert record.evidence_status is EvidenceStatus.ERROR
    assert record.raw_response == raw
    assert record.agent_result is None


@pytest.mark.parametrize(
    "projection",
    [
        Projection(evidence_status="PROBABLY_FOUND", content="x", scope="s"),
        Projection(evidence_status=EvidenceStatus.ERROR, content="x", scope="s"),
        Projection(evidence_status=EvidenceStatus.NO_EVIDENCE, content="none", scope="   "),
        Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content=None, scope="s"),  # type: ignore[arg-type]
        {"evidence_status": "EVIDENCE_FOUND", "content": "x", "scope": "s"},
        "EVIDENCE_FOUND: db-1 disk full",
    ],
    ids=["unknown-status", "error-status", "blank-scope", "content-not-text", "dict", "not-a-projection"],
)
def test_invalid_projection_is_projection_invalid(store: Any, projection: object) -> None:
    """CIS-EVID-5, CIS-EVID-2, CIS-FAIL-6: an invalid status, scope or content is ERROR/PROJECTION_INVALID."""
    projector = FakeProjector()
    projector.projection = projection
    boundary = boundary_for(store, tool(FakeExecutor("raw"), projector))
    context = open_run(boundary)

    assert_failure(boundary.invoke(context, envelope()), ErrorCode.PROJECTION_INVALID)
    record = store.get(RUN, "call_1")
    assert (record.status, record.error_code) == (InvocationStatus.ERROR, ErrorCode.PROJECTION_INVALID)
    assert record.raw_response == "raw"
    assert boundary.cite(context, "call_1").kind.value == "NOT_REFERENCABLE"


def test_oversized_projection_is_not_returned(store: Any) -> None:
    """CIS-SIZE-4: an agent result over its limit is ERROR/RESULT_TOO_LARGE and never returned."""
    big = Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content=MARKER + "x" * 60, scope="s")
    boundary = boundary_for(
        store, tool(FakeExecutor("raw"), FakeProjector(big)), limits=Limits(agent_result_bytes=64)
    )
    context = open_run(boundary)

    result = boundary.invoke(context, envelope())

    assert_failure(result, ErrorCode.RESULT_TOO_LARGE)
    assert MARKER not in repr(result)
    record = store.get(RUN, "call_1")
    assert (record.status, record.error_code, record.agent_result) == (
        InvocationStatus.ERROR,
        ErrorCode.RESULT_TOO_LARGE,
        None,
    )


# ---------------------------------------------------------------------------
# Duplicates


def test_duplicate_never_runs_twice_nor_overwrites(store: Any) -> None:
    """CIS-ID-5, CIS-BND-6, CIS-RETRY-2: the second call is DUPLICATE_TOOL_CALL; first record unchanged."""
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary)
    assert boundary.invoke(context, envelope()).ok
    first = store.get(RUN, "call_1")

    again = boundary.invoke(context, envelope(arguments='{"q":"other"}'))

    assert_failure(again, ErrorCode.DUPLICATE_TOOL_CALL)
    assert again.tool_call_id == "call_1"
    assert len(executor.calls) == 1
    assert store.get(RUN, "call_1") == first


def test_duplicate_after_an_error_is_still_a_duplicate(store: Any) -> None:
    """CIS-ID-5, CIS-BND-6: a failed call is not retried under the same id."""
    executor = FakeExecutor(raises=RuntimeError("down"))
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary)
    assert boundary.invoke(context, envelope()).code is ErrorCode.EXECUTION_FAILED
    assert boundary.invoke(context, envelope()).code is ErrorCode.DUPLICATE_TOOL_CALL
    assert len(executor.calls) == 1


def test_parallel_calls_with_one_id_run_the_executor_once(store: Any) -> None:
    """CIS-BND-6, CIS-ID-5: eight threads racing on one id: one executes, seven are refused with its
    fate at the time: CALL_IN_PROGRESS while it runs, DUPLICATE_TOOL_CALL once it is READY."""
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _i: boundary.invoke(context, envelope()), range(8)))
    assert sum(r.ok for r in results) == 1
    refused = [r.code for r in results if not r.ok]
    assert len(refused) == 7
    assert set(refused) <= {ErrorCode.CALL_IN_PROGRESS, ErrorCode.DUPLICATE_TOOL_CALL}
    assert len(executor.calls) == 1


# ---------------------------------------------------------------------------
# Preflight rejections: nothing written, executor never called


@pytest.mark.parametrize(
    ("tool_call_id", "code"),
    [
        (None, ErrorCode.MISSING_TOOL_CALL_ID),
        ("", ErrorCode.MISSING_TOOL_CALL_ID),
        ("   ", ErrorCode.MISSING_TOOL_CALL_ID),
        (42, ErrorCode.MISSING_TOOL_CALL_ID),
        (" call_1", ErrorCode.UNSAFE_TOOL_CALL_ID),
        ("call\n1", ErrorCode.UNSAFE_TOOL_CALL_ID),
        ("call_{1}", ErrorCode.UNSAFE_TOOL_CALL_ID),
        ("call_é", ErrorCode.UNSAFE_TOOL_CALL_ID),
        ("c" * 129, ErrorCode.UNSAFE_TOOL_CALL_ID),
    ],
)
def test_missing_or_unsafe_ids_are_rejected(store: Any, tool_call_id: Any, code: ErrorCode) -> None:
    """CIS-ID-2, CIS-ID-3, CIS-ID-6, CIS-PRE-1: rejected before anything is written; the id is not echoed."""
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary)

    result = boundary.invoke(context, envelope(tool_call_id))

    assert_failure(result, code)
    assert result.tool_call_id is None
    assert executor.calls == []
    assert store.calls(RUN) == ()


def test_cross_run_call_is_rejected(store: Any) -> None:
    """CIS-PRE-3, CIS-PRE-1: envelope run id != RunContext run id: RUN_MISMATCH, no record, no execution."""
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary)
    open_run(boundary, OTHER_RUN)

    result = boundary.invoke(context, envelope(run_id=OTHER_RUN))

    assert_failure(result, ErrorCode.RUN_MISMATCH)
    assert executor.calls == []
    assert store.get(RUN, "call_1") is None
    assert store.get(OTHER_RUN, "call_1") is None
    assert store.calls(RUN) == ()
    assert store.calls(OTHER_RUN) == ()


@pytest.mark.parametrize(
    ("spec", "code"),
    [
        ({"authorized": False}, ErrorCode.UNAUTHORIZED),
        ({"authorized": "true"}, ErrorCode.UNAUTHORIZED),
        ({"read_only": False}, ErrorCode.NOT_READ_ONLY),
        ({"read_only": 1}, ErrorCode.NOT_READ_ONLY),
        ({"authorized": False, "read_only": False}, ErrorCode.UNAUTHORIZED),
    ],
)
def test_unauthorized_or_writable_tools_are_rejected(
    store: Any, spec: dict[str, Any], code: ErrorCode
) -> None:
    """CIS-PRE-4, CIS-PRE-5, CIS-PRE-6: rejected before execution; the request is not shown to the agent."""
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor, **spec))
    context = open_run(boundary)

    result = boundary.invoke(context, envelope(arguments=json.dumps({"q": MARKER})))

    assert_failure(result, code)
    assert MARKER not in repr(result)
    assert executor.calls == []
    assert store.calls(RUN) == ()


@pytest.mark.parametrize("tool_name", ["delete_everything", None, 7, "Search"])
def test_unknown_tool_is_unauthorized(store: Any, tool_name: Any) -> None:
    """CIS-PRE-5: a tool that is not registered (or a non-string name) fails closed."""
    boundary = boundary_for(store)
    context = open_run(boundary)
    assert_failure(boundary.invoke(context, envelope(tool_name=tool_name)), ErrorCode.UNAUTHORIZED)
    assert store.calls(RUN) == ()


@pytest.mark.parametrize(
    "arguments",
    ['["q"]', '{"q":1,"q":2}', '{"q":NaN}', "{", '{"q":1} trailing', None, 12, '{"q":"\\ud800"}', "\ufeff{}"],
)
def test_invalid_arguments_are_rejected(store: Any, arguments: Any) -> None:
    """CIS-JSON-1, CIS-JSON-2, CIS-JSON-3, CIS-JSON-4, CIS-PRE-1: not one I-JSON object: INVALID_ARGUMENTS."""
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary)
    assert_failure(boundary.invoke(context, envelope(arguments=arguments)), ErrorCode.INVALID_ARGUMENTS)
    assert executor.calls == []
    assert store.calls(RUN) == ()


def test_request_over_the_limit_is_rejected(store: Any) -> None:
    """CIS-SIZE-2, CIS-SIZE-1: arguments over the request limit (UTF-8 bytes) are REQUEST_TOO_LARGE."""
    boundary = boundary_for(store, limits=Limits(request_bytes=20))
    context = open_run(boundary)
    arguments = json.dumps({"q": "é" * 7}, ensure_ascii=False)  # 15 characters, 22 bytes
    assert_failure(boundary.invoke(context, envelope(arguments=arguments)), ErrorCode.REQUEST_TOO_LARGE)
    assert store.calls(RUN) == ()


# ---------------------------------------------------------------------------
# Run state and budgets, decided in the store


@pytest.mark.parametrize("end", ["cancel_run", "close_run"])
def test_inactive_run_rejects_calls(store: Any, end: str) -> None:
    """CIS-RUN-2, CIS-RUN-3: a cancelled or closed run rejects new calls with RUN_INACTIVE."""
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary)
    state = getattr(boundary, end)(context)
    assert state.status.value == ("CANCELLED" if end == "cancel_run" else "CLOSED")

    assert_failure(boundary.invoke(context, envelope()), ErrorCode.RUN_INACTIVE)
    assert executor.calls == []
    assert store.get(RUN, "call_1") is None
    assert getattr(boundary, end)(context) == state  # a retried end repeats (CIS-RETRY-3)
    other = "close_run" if end == "cancel_run" else "cancel_run"
    assert getattr(boundary, other)(context) is ErrorCode.INVALID_TRANSITION


def test_unknown_run_is_inactive(store: Any) -> None:
    """CIS-RUN-3: a call on a run that was never opened is RUN_INACTIVE."""
    boundary = boundary_for(store)
    assert_failure(boundary.invoke(RunContext(run_id=RUN), envelope()), ErrorCode.RUN_INACTIVE)


def test_deadline_is_enforced(store: Any, clock: FakeClock) -> None:
    """CIS-RUN-4: a call at the run's deadline is RUN_DEADLINE_EXCEEDED; before it, admitted."""
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary, deadline_ms=1_000)
    clock.advance(999)
    assert boundary.invoke(context, envelope("call_1")).ok
    clock.advance(1)
    assert_failure(boundary.invoke(context, envelope("call_2")), ErrorCode.RUN_DEADLINE_EXCEEDED)
    assert len(executor.calls) == 1


def test_tool_call_budget(store: Any) -> None:
    """CIS-RUN-5, CIS-PRE-8: the budget admits exactly k calls; a duplicate consumes none."""
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary, tool_call_budget=2)
    assert boundary.invoke(context, envelope("call_1")).ok
    assert boundary.invoke(context, envelope("call_1")).code is ErrorCode.DUPLICATE_TOOL_CALL
    assert boundary.invoke(context, envelope("call_2")).ok
    assert_failure(boundary.invoke(context, envelope("call_3")), ErrorCode.TOOL_BUDGET_EXHAUSTED)
    assert len(executor.calls) == 2
    assert store.calls(RUN) == ("call_1", "call_2")


def test_byte_budget(store: Any) -> None:
    """CIS-RUN-6: requests and stored results are charged; a call that would pass the budget is refused."""
    boundary = boundary_for(store, tool(FakeExecutor("r" * 40)))
    context = open_run(boundary, byte_budget=100)
    assert boundary.invoke(context, envelope("call_1")).ok  # 12 request bytes + raw 40 + result ~20
    assert_failure(
        boundary.invoke(context, envelope("call_2", arguments=json.dumps({"q": "x" * 40}))),
        ErrorCode.RUN_BYTES_EXHAUSTED,
    )
    assert store.calls(RUN) == ("call_1",)


def test_parallel_calls_cannot_overspend_the_budget(store: Any) -> None:
    """CIS-RUN-5: twelve concurrent calls on a budget of 3 admit exactly 3."""
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary, tool_call_budget=3)
    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda i: boundary.invoke(context, envelope(f"call_{i}")), range(12)))
    assert sum(r.ok for r in results) == 3
    assert [r.code for r in results if not r.ok] == [ErrorCode.TOOL_BUDGET_EXHAUSTED] * 9
    assert len(executor.calls) == 3
    assert len(store.calls(RUN)) == 3


# ---------------------------------------------------------------------------
# Store cost and store failures


def test_a_success_costs_two_store_round_trips(store: Any) -> None:
    """CIS-STORE-9, CIS-BND-1: create and complete, no read."""
    counting = CountingStore(store)
    boundary = boundary_for(counting)
    context = open_run(boundary)
    counting.log.clear()
    assert boundary.invoke(context, envelope()).ok
    assert counting.log == ["create", "complete"]


def test_a_rejection_costs_no_round_trip_and_an_admission_refusal_one(store: Any) -> None:
    """CIS-PRE-1, CIS-PRE-8: preflight 1-6 touch no store; run checks cost one create."""
    counting = CountingStore(store)
    boundary = boundary_for(counting)
    context = open_run(boundary, tool_call_budget=0)
    counting.log.clear()
    assert boundary.invoke(context, envelope(run_id=OTHER_RUN)).code is ErrorCode.RUN_MISMATCH
    assert counting.log == []
    assert boundary.invoke(context, envelope()).code is ErrorCode.TOOL_BUDGET_EXHAUSTED
    assert counting.log == ["create"]


@pytest.mark.parametrize("fail_on", ["create", "complete", "now_ms"])
def test_store_failure_is_store_unavailable(store: Any, fail_on: str) -> None:
    """CIS-FAIL-5, CIS-FAIL-1: any store exception becomes STORE_UNAVAILABLE; nothing escapes invoke."""
    executor = FakeExecutor()
    boundary = boundary_for(FailingStore(store, [fail_on]), tool(executor))
    context = open_run(boundary_for(store))

    result = boundary.invoke(context, envelope())

    assert_failure(result, ErrorCode.STORE_UNAVAILABLE)
    assert result.tool_call_id == "call_1"
    if fail_on == "create":
        assert executor.calls == []
        assert store.get(RUN, "call_1") is None
    if fail_on == "complete":
        assert len(executor.calls) == 1
        assert store.get(RUN, "call_1").status is InvocationStatus.PROJECTING  # left for the sweep


def test_store_returning_a_code_on_complete_is_reported(store: Any, clock: FakeClock) -> None:
    """CIS-LIFE-7, CIS-STORE-3: a record swept while its tool ran: its late completion is refused."""
    holder: dict[str, Any] = {}

    def sweep_meanwhile(_args: Any) -> None:
        clock.advance(10_000)
        holder["swept"] = holder["boundary"].sweep_stale(holder["context"], 5_000)

    executor = FakeExecutor(on_call=sweep_meanwhile)
    boundary = boundary_for(store, tool(executor))
    holder.update(boundary=boundary, context=open_run(boundary))

    result = boundary.invoke(holder["context"], envelope())

    assert holder["swept"] == 1
    assert_failure(result, ErrorCode.INVALID_TRANSITION)
    record = store.get(RUN, "call_1")
    assert (record.status, record.error_code) == (InvocationStatus.ERROR, ErrorCode.STALE_PROJECTION)


def test_record_expiring_while_the_tool_runs_is_not_recreated(store: Any, clock: FakeClock) -> None:
    """CIS-TTL-4, CIS-LIFE-2: the kernel refuses the late transition; nothing is written back."""
    executor = FakeExecutor(on_call=lambda _args: clock.advance(2_000))
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary, ttl_ms=1_000, deadline_ms=10_000)

    assert_failure(boundary.invoke(context, envelope()), ErrorCode.INVALID_TRANSITION)
    assert store.get(RUN, "call_1") is None


def test_a_repeated_token_is_treated_as_a_duplicate(store: Any) -> None:
    """CIS-RETRY-1, CIS-BND-6: a token factory that repeats itself never makes an executor run twice."""
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor), token_factory=lambda: "same-token")
    context = open_run(boundary)
    assert boundary.invoke(context, envelope()).ok
    assert boundary.invoke(context, envelope()).code is ErrorCode.DUPLICATE_TOOL_CALL
    assert len(executor.calls) == 1


# ---------------------------------------------------------------------------
# Registry and construction


def test_registry_registers_each_tool_once() -> None:
    """CIS-BND-3: names are unique; lookups of unknown or non-string names give None."""
    search = tool()
    registry = ToolRegistry([search])
    with pytest.raises(ValueError, match="already registered"):
        registry.register(tool())
    assert registry.get("search") is search
    assert registry.get("other") is None
    assert registry.get(None) is None
    assert registry.names() == ("search",)
    assert "search" in registry
    assert len(registry) == 1
    with pytest.raises(ValueError, match="timeout_ms"):
        ToolSpec(name="t", executor=FakeExecutor(), projector=FakeProjector(), timeout_ms=0)
    with pytest.raises(TypeError):
        ToolSpec(name="t", executor="not callable", projector=FakeProjector())  # type: ignore[arg-type]


def test_sync_boundary_refuses_async_tools(store: Any) -> None:
    """CIS-BND-3, CIS-BND-5: async executors belong on the AsyncToolBoundary (a programming error here)."""

    async def executor(_args: Any) -> str:
        return "raw"

    registry = ToolRegistry([ToolSpec(name="search", executor=executor, projector=FakeProjector())])
    with pytest.raises(TypeError, match="AsyncToolBoundary"):
        ToolBoundary(store, registry)
    boundary = ToolBoundary(store, ToolRegistry())
    context = open_run(boundary)
    boundary.registry.register(ToolSpec(name="search", executor=executor, projector=FakeProjector()))
    with pytest.raises(TypeError, match="AsyncToolBoundary"):
        boundary.invoke(context, envelope())
    assert store.calls(RUN) == ()


def test_a_sync_callable_returning_a_coroutine_fails_safely(store: Any) -> None:
    """CIS-FAIL-2, CIS-EVID-5: the sync boundary never awaits; such a call is a failure code."""

    async def later() -> str:
        return "raw"

    boundary = boundary_for(store, tool(lambda _args: later()))
    context = open_run(boundary)
    assert boundary.invoke(context, envelope()).code is ErrorCode.EXECUTION_FAILED
    boundary2 = boundary_for(store, tool(FakeExecutor("raw"), lambda _raw, _args: later()))
    assert boundary2.invoke(context, envelope("call_2")).code is ErrorCode.PROJECTION_FAILED


def test_executor_cannot_change_what_the_projector_sees(store: Any) -> None:
    """CIS-BND-5, CIS-REC-2: executor and projector get independent parses of the exact arguments."""

    def mutating(args: dict[str, Any]) -> str:
        args["q"] = "tampered"
        return "raw"

    projector = FakeProjector()
    boundary = boundary_for(store, tool(mutating, projector))
    context = open_run(boundary)
    assert boundary.invoke(context, envelope()).ok
    assert projector.calls == [("raw", {"q": "disk"})]
    assert store.get(RUN, "call_1").request_json == '{"q":"disk"}'


def test_nested_mutations_by_the_executor_do_not_reach_the_projector(store: Any) -> None:
    """CIS-PERF-2, CIS-BND-5: the projector's copy of the one parse shares no object or array."""

    def mutating(args: dict[str, Any]) -> str:
        args["f"]["levels"].append("DEBUG")
        args["f"]["since"] = "tampered"
        return "raw"

    projector = FakeProjector()
    boundary = boundary_for(store, tool(mutating, projector))
    context = open_run(boundary)
    arguments = '{"f":{"levels":["ERROR"],"since":"1d"}}'
    assert boundary.invoke(context, envelope(arguments=arguments)).ok
    assert projector.calls == [("raw", {"f": {"levels": ["ERROR"], "since": "1d"}})]


def test_programming_errors_raise(store: Any) -> None:
    """CIS-KERN-2: a non-RunContext or non-envelope is a TypeError, not a code."""
    boundary = boundary_for(store)
    context = open_run(boundary)
    with pytest.raises(TypeError, match=r"must be a RunContext; got str$"):
        boundary.invoke(RUN, envelope())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        boundary.invoke(context, {"tool_call_id": "call_1"})  # type: ignore[arg-type]
    # The README's pattern without its check: a refused open_run's code is named, so the
    # cause is not hidden behind a bare type error.
    refused = boundary.open_run(RUN, deadline_ms=0, ttl_ms=1, tool_call_budget=1, byte_budget=1)
    assert isinstance(refused, ErrorCode)
    with pytest.raises(TypeError, match=f"got ErrorCode.{refused.name}: open_run refused the run"):
        boundary.invoke(refused, envelope())  # type: ignore[arg-type]


def test_result_as_dict_is_the_agent_view(store: Any) -> None:
    """CIS-ERR-1, CIS-BND-4: the JSON view holds the bounded result or the code and message only."""
    boundary = boundary_for(store, tool(FakeExecutor(raises=RuntimeError("x"))))
    context = open_run(boundary)
    failed = boundary.invoke(context, envelope())
    assert failed.as_dict() == {
        "ok": False,
        "tool_call_id": "call_1",
        "code": "EXECUTION_FAILED",
        "message": ERROR_MESSAGES[ErrorCode.EXECUTION_FAILED],
    }
    boundary_ok = boundary_for(store, tool(FakeExecutor("raw"), FakeProjector(no_evidence("s"))))
    ok = boundary_ok.invoke(context, envelope("call_2"))
    assert json.loads(json.dumps(ok.as_dict())) == {
        "ok": True,
        "tool_call_id": "call_2",
        "evidence_status": "NO_EVIDENCE",
        "negative": True,
        "content": "no matching lines",
        "scope": "s",
    }


def test_admission_request_carries_exact_fields(store: Any) -> None:
    """CIS-RETRY-1, CIS-ID-4: the store is asked to create with the exact id, request and a fresh token."""
    seen: list[AdmissionRequest] = []

    class Spy(CountingStore):
        def create(self, request: AdmissionRequest, limits: Limits) -> Any:
            seen.append(request)
            return self.inner.create(request, limits)

    tokens = iter(["tok-a", "tok-b"])
    boundary = boundary_for(Spy(store), token_factory=lambda: next(tokens))
    context = open_run(boundary)
    boundary.invoke(context, envelope("call_1", arguments='{"q": "a"}'))
    boundary.invoke(context, envelope("call_2"))
    assert [(r.tool_call_id, r.request_json, r.invocation_token) for r in seen] == [
        ("call_1", '{"q": "a"}', "tok-a"),
        ("call_2", '{"q":"disk"}', "tok-b"),
    ]
    assert store.get(RUN, "call_1").invocation_token == "tok-a"


def test_run_lifecycle_returns_codes(store: Any) -> None:
    """CIS-RUN-1, CIS-RUN-2, CIS-RETRY-3: open gives a context, reopen is a no-op, failures are codes."""
    boundary = boundary_for(store)
    deadline = boundary.now_ms() + 1_000
    params = {"deadline_ms": deadline, "ttl_ms": 5_000, "tool_call_budget": 3, "byte_budget": 100}
    first = boundary.open_run(RUN, **params)
    assert first.run_id == RUN
    assert boundary.open_run(RUN, **params) == first
    assert boundary.open_run(RUN, **{**params, "tool_call_budget": 4}) is ErrorCode.INVALID_TRANSITION
    assert boundary.open_run("bad run", **params) is ErrorCode.RUN_MISMATCH
    with pytest.raises(ValueError, match="tool_call_budget"):
        boundary.open_run(RUN, **{**params, "tool_call_budget": -1})
    assert boundary.close_run(first).status.value == "CLOSED"
    assert boundary.cancel_run(RunContext(run_id="never-opened")) is ErrorCode.RUN_INACTIVE
    failing = boundary_for(FailingStore(store, ["open_run", "cancel_run", "close_run"]))
    assert failing.open_run("run-9", **params) is ErrorCode.STORE_UNAVAILABLE
    assert failing.cancel_run(first) is ErrorCode.STORE_UNAVAILABLE
    assert failing.close_run(first) is ErrorCode.STORE_UNAVAILABLE


def test_stores_are_left_consistent_after_threads_time_out(store: Any) -> None:
    """CIS-FAIL-3, CIS-BND-6: a timed-out executor finishing later changes nothing."""
    executor = FakeExecutor(block=True)
    boundary = boundary_for(store, tool(executor, timeout_ms=30))
    context = open_run(boundary)
    assert boundary.invoke(context, envelope()).code is ErrorCode.EXECUTION_TIMEOUT
    before = store.get(RUN, "call_1")
    executor.release.set()
    time.sleep(0.05)  # let the abandoned worker thread return
    assert store.get(RUN, "call_1") == before
