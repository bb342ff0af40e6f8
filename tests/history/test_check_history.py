"""Hand-built histories: linearizable and not, unknown outcomes, the window (issue 14, point 1)."""

from __future__ import annotations

import pytest
from attrs import evolve

from invocation_store.history import _checker
from invocation_store.kernel import (
    CanonicalRecord,
    ErrorCode,
    Failed,
    RunState,
    SweptStale,
    cancel_run,
    close_run,
    decide_completion,
    transition,
)

from ._build import LIMITS, T0, Builder, admitted, create_args, open_args, opened, request, with_raw


def _opened_builder(budget: int = 5) -> Builder:
    b = Builder()
    b.call(0, "open_run", opened(budget), **open_args(budget))
    return b


def test_sequential_history_is_linearizable() -> None:
    """CIS-HIST-2: the kernel's own sequential answers are linearizable (open, create, duplicate, read)."""
    b = _opened_builder()
    first = request("call_1", "t1")
    adm = admitted(opened(), first)
    b.call(1, "create", adm, **create_args(first))
    b.call(2, "create", ErrorCode.CALL_IN_PROGRESS, **create_args(request("call_1", "t2")))
    b.call(2, "get", adm.record, run_id="run-1", tool_call_id="call_1")
    b.call(3, "calls", ("call_1",), run_id="run-1")
    b.call(3, "get_run", adm.run, run_id="run-1")
    report = b.check()
    assert report.violation is None
    assert (report.exit_code, report.operations, report.runs) == (0, 6, 1)


def test_duplicate_both_callers_saw_succeed_is_not_linearizable() -> None:
    """CIS-HIST-2, CIS-ID-5: two concurrent creates of one key that both report admission."""
    b = _opened_builder()
    r1, r2 = request("call_1", "t1"), request("call_1", "t2")
    a = b.invoke(1, "create", **create_args(r1))
    c = b.invoke(2, "create", **create_args(r2))
    b.ok(a, admitted(opened(), r1))
    b.ok(c, admitted(opened(), r2))
    violation = b.check().violation
    assert violation is not None
    assert (violation.requirement, violation.rule, violation.run_id) == ("CIS-HIST-2", "CIS-ID-5", "run-1")
    assert sorted(op.op_id for op in violation.window) == [a, c]
    assert violation.orders_total == 2
    assert all("CALL_IN_PROGRESS" in order.reason for order in violation.orders)
    text = violation.render()
    assert "not linearizable [CIS-HIST-2, CIS-ID-5]" in text
    assert f"op {a}, op {c}: op {c} create: the kernel returns CALL_IN_PROGRESS" in text


def test_concurrent_duplicate_with_one_winner_is_linearizable() -> None:
    """CIS-HIST-2: concurrent creates of one key, one admitted and one DUPLICATE, in either line order."""
    b = _opened_builder()
    r1, r2 = request("call_1", "t1"), request("call_1", "t2")
    a = b.invoke(1, "create", **create_args(r1))
    c = b.invoke(2, "create", **create_args(r2))
    b.ok(a, ErrorCode.CALL_IN_PROGRESS)  # the later invocation won
    b.ok(c, admitted(opened(), r2))
    assert b.check().violation is None


def test_budget_overspent_by_two_concurrent_creates() -> None:
    """CIS-HIST-2, CIS-RUN-5: budget 1, two concurrent creates of different keys both admitted."""
    b = _opened_builder(budget=1)
    r1, r2 = request("call_1", "t1"), request("call_2", "t2")
    a = b.invoke(1, "create", **create_args(r1))
    c = b.invoke(2, "create", **create_args(r2))
    b.ok(a, admitted(opened(1), r1))
    b.ok(c, admitted(opened(1), r2))  # both saw the fresh run: sequence 1 each
    violation = b.check().violation
    assert violation is not None
    assert violation.rule == "CIS-RUN-5"
    assert {op.op_id for op in violation.window} == {a, c}
    # Serialised answers (sequence 1, then TOOL_BUDGET_EXHAUSTED) are fine.
    ok = _opened_builder(budget=1)
    a = ok.invoke(1, "create", **create_args(r1))
    c = ok.invoke(2, "create", **create_args(r2))
    ok.ok(c, ErrorCode.TOOL_BUDGET_EXHAUSTED)
    ok.ok(a, admitted(opened(1), r1))
    assert ok.check().violation is None


def test_read_that_saw_a_record_before_its_create() -> None:
    """CIS-HIST-2: a read that returned before the create was invoked cannot see its record."""
    req = request("call_1", "t1")
    adm = admitted(opened(), req)
    b = _opened_builder()
    g = b.call(2, "get", adm.record, run_id="run-1", tool_call_id="call_1")
    b.call(1, "create", adm, **create_args(req))
    violation = b.check().violation
    assert violation is not None
    # The shortest unexplained prefix ends at the read: no create had been invoked yet.
    assert violation.first_unexplained.op_id == g
    assert [op.op_id for op in violation.window] == [g]
    assert "the kernel returns null (absent)" in violation.orders[0].reason
    # Concurrent with the create, the read may see it.
    b = _opened_builder()
    c = b.invoke(1, "create", **create_args(req))
    b.call(2, "get", adm.record, run_id="run-1", tool_call_id="call_1")
    b.ok(c, adm)
    assert b.check().violation is None


def test_create_that_returned_to_nobody_may_have_taken_effect() -> None:
    """CIS-HIST-2: a create with an unknown outcome (a timeout) may be seen by later reads, or never."""
    req = request("call_1", "t1")
    adm = admitted(opened(), req)
    b = _opened_builder()
    c = b.invoke(1, "create", **create_args(req))
    b.info(c)
    b.call(2, "get", None, run_id="run-1", tool_call_id="call_1")
    b.call(2, "get", adm.record, run_id="run-1", tool_call_id="call_1")  # it took effect late
    assert b.check().violation is None
    # ... but not before it was invoked, and once seen it does not vanish.
    b = _opened_builder()
    b.call(2, "get", adm.record, run_id="run-1", tool_call_id="call_1")
    c = b.invoke(1, "create", **create_args(req))
    b.info(c)
    assert b.check().violation is not None
    b = _opened_builder()
    c = b.invoke(1, "create", **create_args(req))
    b.call(2, "get", adm.record, run_id="run-1", tool_call_id="call_1")
    b.call(2, "get", None, run_id="run-1", tool_call_id="call_1")
    b.info(c)
    violation = b.check().violation
    assert violation is not None
    assert violation.rule == "CIS-STORE-1"


def test_unknown_create_that_never_happened_leaves_the_key_free() -> None:
    """CIS-HIST-2: an invoke with no completion (a crashed worker) may never take effect."""
    r1, r2 = request("call_1", "t1"), request("call_1", "t2")
    b = _opened_builder()
    b.invoke(1, "create", **create_args(r1))  # never completes
    b.call(2, "create", admitted(opened(), r2), **create_args(r2))
    report = b.check()
    assert report.violation is None
    assert report.unknown == 1


def test_fail_means_it_did_not_happen() -> None:
    """CIS-HIST-1: a ``fail`` completion is dropped: a later read must not see its effect."""
    req = request("call_1", "t1")
    adm = admitted(opened(), req)
    b = _opened_builder()
    c = b.invoke(1, "create", **create_args(req))
    b.fail(c)
    b.call(2, "get", adm.record, run_id="run-1", tool_call_id="call_1")
    assert b.check().violation is not None


def test_retried_create_is_a_replay() -> None:
    """CIS-HIST-2, CIS-RETRY-2: a retried create with the same token answers replayed; not a duplicate."""
    req = request("call_1", "t1")
    adm = admitted(opened(), req)
    b = _opened_builder()
    c = b.invoke(1, "create", **create_args(req))
    b.info(c)
    replay = admitted(adm.run, req, existing=adm.record)
    assert replay.replayed
    b.call(1, "create", replay, **create_args(req))
    assert b.check().violation is None
    # A replay answered DUPLICATE is not what the kernel says.
    b = _opened_builder()
    b.call(1, "create", adm, **create_args(req))
    b.call(1, "create", ErrorCode.CALL_IN_PROGRESS, **create_args(req))
    violation = b.check().violation
    assert violation is not None
    assert violation.rule == "CIS-ID-5"


def _finished(record: CanonicalRecord, code: ErrorCode) -> CanonicalRecord:
    after = transition(record, Failed(code=code, now_ms=T0 + 10), LIMITS)
    assert isinstance(after, CanonicalRecord)
    return after


def test_sweep_and_completion_both_winning_is_not_linearizable() -> None:
    """CIS-HIST-2, CIS-STORE-3: a sweep and the worker's compare-and-set cannot both write."""
    req = request("call_1", "t1")
    adm = admitted(opened(), req)
    created = adm.record
    worker = _finished(created, ErrorCode.EXECUTION_FAILED)
    swept = transition(created, SweptStale(now_ms=T0, older_than_ms=0), LIMITS)
    assert isinstance(swept, CanonicalRecord)
    b = _opened_builder()
    b.call(1, "create", adm, **create_args(req))
    x = b.invoke(1, "complete", before=created, after=worker)
    y = b.invoke(2, "complete", before=created, after=swept)
    b.ok(x, worker)
    b.ok(y, swept)
    violation = b.check().violation
    assert violation is not None
    assert violation.rule == "CIS-STORE-3"
    assert {op.op_id for op in violation.window} == {x, y}
    # One of them loses with INVALID_TRANSITION: fine.
    b = _opened_builder()
    b.call(1, "create", adm, **create_args(req))
    x = b.invoke(1, "complete", before=created, after=worker)
    y = b.invoke(2, "complete", before=created, after=swept)
    b.ok(y, swept)
    b.ok(x, ErrorCode.INVALID_TRANSITION)
    b.call(3, "completed", ("call_1",), run_id="run-1")
    assert b.check().violation is None


def test_runs_are_checked_apart_and_the_window_is_minimal() -> None:
    """CIS-HIST-2: each run is searched alone; unrelated operations stay out of the window."""
    b = Builder()
    b.call(0, "open_run", opened(), **open_args())
    b.call(0, "open_run", opened(run_id="run-2"), **open_args(run_id="run-2"))
    other = request("call_9", "t9", run_id="run-2")
    b.call(3, "create", admitted(opened(run_id="run-2"), other), **create_args(other))
    r1, r2 = request("call_1", "t1"), request("call_1", "t2")
    a = b.invoke(1, "create", **create_args(r1))
    c = b.invoke(2, "create", **create_args(r2))
    b.call(3, "get", None, run_id="run-1", tool_call_id="call_7")
    b.ok(a, admitted(opened(), r1))
    b.ok(c, admitted(opened(), r2))
    b.call(3, "calls", ("call_1",), run_id="run-1")
    report = b.check()
    assert report.runs == 2
    assert report.violation is not None
    assert report.violation.run_id == "run-1"
    assert {op.op_id for op in report.violation.window} == {a, c}


def test_expiry_is_judged_at_each_operation_time() -> None:
    """CIS-HIST-2, CIS-TTL-4: a read after the record's expiry sees nothing, before it the record."""
    req = request("call_1", "t1")
    adm = admitted(opened(), req)
    expiry = adm.record.expires_at_ms
    b = _opened_builder()
    b.call(1, "create", adm, **create_args(req))
    b.call(2, "get", adm.record, expiry - 1, run_id="run-1", tool_call_id="call_1")
    b.call(2, "get", None, expiry, run_id="run-1", tool_call_id="call_1")
    assert b.check().violation is None
    b = _opened_builder()
    b.call(1, "create", adm, **create_args(req))
    b.call(2, "get", adm.record, expiry, run_id="run-1", tool_call_id="call_1")
    assert b.check().violation is not None


def test_get_many_without_raw() -> None:
    """CIS-HIST-2: ``get_many(include_raw=False)`` returns the records with no raw response."""
    req = request("call_1", "t1")
    adm = admitted(opened(), req)
    b = _opened_builder()
    b.call(1, "create", adm, **create_args(req))
    done = _finished(evolve(adm.record), ErrorCode.EXECUTION_FAILED)
    b.call(1, "complete", done, before=adm.record, after=done)
    args = {"run_id": "run-1", "tool_call_ids": ("call_1", "call_2"), "include_raw": False}
    b.call(2, "get_many", {"call_1": evolve(done, raw_response=None), "call_2": None}, **args)
    b.call(2, "completed", ("call_1",), run_id="run-1")
    assert b.check().violation is None


def test_a_create_answered_as_its_own_retry_is_linearizable() -> None:
    """CIS-HIST-2, CIS-RETRY-2: one create whose first attempt admitted and whose client retry
    answered ``replayed`` (redis-py retried after a timeout) is the kernel's answer to the create
    applied twice; another token's replay is not."""
    req = request("call_1", "t1")
    adm = admitted(opened(), req)
    replay = admitted(adm.run, req, existing=adm.record)
    b = _opened_builder()
    b.call(1, "create", replay, **create_args(req))
    b.call(2, "get", adm.record, run_id="run-1", tool_call_id="call_1")
    assert b.check().violation is None
    forged = admitted(adm.run, request("call_1", "t1"), existing=evolve(adm.record, invocation_token="t1"))
    b = _opened_builder()
    b.call(1, "create", evolve(forged, run=opened()), **create_args(req))  # replayed against nothing
    assert b.check().violation is not None


def test_orders_tried_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """CIS-HIST-2: eight concurrent creates of one key all admitted shrink to a window of two (any
    two contradict the kernel); past the bound on orders tried, the report says how many of all."""
    b = _opened_builder(budget=10)
    requests = [request("call_1", f"t{n}") for n in range(8)]
    ids = [b.invoke(n + 1, "create", **create_args(req)) for n, req in enumerate(requests)]
    for op_id, req in zip(ids, requests, strict=True):
        b.ok(op_id, admitted(opened(10), req))
    violation = b.check().violation
    assert violation is not None
    assert (violation.rule, len(violation.window), violation.orders_total) == ("CIS-ID-5", 2, 2)
    monkeypatch.setattr(_checker, "_MAX_ORDERS", 1)
    violation = b.check().violation
    assert violation is not None
    assert len(violation.orders) == 1
    assert "orders tried (1 of 2," in violation.render()


def test_a_retried_create_may_answer_after_other_operations_took_effect() -> None:
    """CIS-HIST-2, CIS-RETRY-2: redis-py retries a create whose reply was lost; between the attempt
    that admitted and the retry, a sweep failed the new record and another create spent budget.
    The retry's ``replayed`` answer is the kernel's at the retry: the swept record, the run as it
    is then. Such a history is linearizable; the same answer with no attempt before the sweep is not."""
    req = request("call_2", "t2")
    adm = admitted(opened(), req)
    swept = transition(adm.record, SweptStale(now_ms=T0, older_than_ms=0), LIMITS)
    assert isinstance(swept, CanonicalRecord)
    other = request("call_3", "t3")
    other_adm = admitted(adm.run, other)
    replay = admitted(other_adm.run, req, existing=swept)
    assert replay.replayed
    b = _opened_builder()
    c = b.invoke(2, "create", **create_args(req))  # the first attempt admits; its reply is lost
    b.call(3, "get", adm.record, run_id="run-1", tool_call_id="call_2")
    b.call(4, "complete", swept, before=adm.record, after=swept)
    b.call(5, "create", other_adm, **create_args(other))
    b.call(6, "create", ErrorCode.STALE_PROJECTION, **create_args(request("call_2", "t9")))
    b.ok(c, replay)  # the retry finds its own record, swept
    assert b.check().violation is None
    # The earlier attempt comes after the invocation: a sweep that returned before it cannot
    # have failed the record, so the replayed swept record is explained by no order.
    b = _opened_builder()
    b.call(4, "complete", swept, before=adm.record, after=swept)
    c = b.call(2, "create", admitted(opened(), req, existing=swept), **create_args(req))
    violation = b.check().violation
    assert violation is not None
    assert violation.rule == "CIS-STORE-3"
    # ... and before the answering attempt: a record swept after the retry answered is not the
    # record the retry saw.
    b = _opened_builder()
    b.call(2, "create", replay, **create_args(req))
    b.call(4, "complete", swept, before=adm.record, after=swept)
    b.call(5, "create", other_adm, **create_args(other))
    assert b.check().violation is not None


def test_a_retried_open_may_find_its_run_closed_by_another() -> None:
    """CIS-HIST-2, CIS-RETRY-3: an open whose first attempt opened the run (its reply lost), then
    another process closed it, and the retry was refused INVALID_TRANSITION (an open on a live
    closed run): linearizable. The same refusal with no run opened before the close is not."""
    closed = close_run(opened(), T0)
    assert isinstance(closed, RunState)
    b = Builder()
    first = b.invoke(1, "open_run", **open_args())  # the first attempt opens; its reply is lost
    b.call(2, "close_run", closed, run_id="run-1")
    b.ok(first, ErrorCode.INVALID_TRANSITION)  # the retry finds the run closed
    assert b.check().violation is None
    b = Builder()
    b.call(2, "close_run", closed, run_id="run-1")  # nothing opened it: a close of no run
    b.call(1, "open_run", ErrorCode.INVALID_TRANSITION, **open_args())
    assert b.check().violation is not None


def test_a_retried_cancel_answers_the_run_as_the_retry_found_it() -> None:
    """CIS-HIST-2, CIS-RETRY-3: a cancel_run whose first attempt cancelled and whose retry answered
    the cancelled run after a completion charged it; a create refused RUN_INACTIVE between them
    pins the cancel before it, the charged run after the completion. Linearizable only with the
    cancel's two attempts apart."""
    req = request("call_1", "t1")
    adm = admitted(opened(), req)
    done = with_raw(adm.record, "a raw response")
    cancelled = cancel_run(adm.run, T0)
    assert isinstance(cancelled, RunState)
    effect = decide_completion(adm.record, adm.record, done, cancelled, T0)
    assert not isinstance(effect, ErrorCode)
    assert effect.run is not None
    charged = effect.run
    assert charged != cancelled  # the completion changed the cancelled run
    b = _opened_builder()
    b.call(1, "create", adm, **create_args(req))
    x = b.invoke(2, "cancel_run", run_id="run-1")  # the first attempt cancels; its reply is lost
    b.call(3, "create", ErrorCode.RUN_INACTIVE, **create_args(request("call_2", "t2")))
    b.call(1, "complete", done, before=adm.record, after=done)
    b.ok(x, charged)  # the retry answers the run as it is now
    assert b.check().violation is None
    # Answered before the completion was invoked, the charged run is not what any attempt saw.
    b = _opened_builder()
    b.call(1, "create", adm, **create_args(req))
    b.call(2, "cancel_run", charged, run_id="run-1")
    b.call(3, "create", ErrorCode.RUN_INACTIVE, **create_args(request("call_2", "t2")))
    b.call(1, "complete", done, before=adm.record, after=done)
    assert b.check().violation is not None


def test_a_retried_completion_may_find_its_own_write_moved_on() -> None:
    """CIS-HIST-2, CIS-STORE-3: a non-terminal completion's first attempt wrote (a reader saw it),
    another completion moved the record on, and the retry answered INVALID_TRANSITION; linearizable
    only with the two attempts apart."""
    req = request("call_1", "t1")
    adm = admitted(opened(), req)
    raw = with_raw(adm.record)
    final = _finished(raw, ErrorCode.EXECUTION_FAILED)
    b = _opened_builder()
    b.call(1, "create", adm, **create_args(req))
    x = b.invoke(1, "complete", before=adm.record, after=raw)  # the first attempt writes
    b.call(3, "get", raw, run_id="run-1", tool_call_id="call_1")  # a reader sees that write
    b.call(2, "complete", final, before=raw, after=final)
    b.ok(x, ErrorCode.INVALID_TRANSITION)  # the retry finds the record moved on
    assert b.check().violation is None
