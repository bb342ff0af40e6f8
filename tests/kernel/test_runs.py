"""Runs and admission: open/cancel/close, the atomic run checks, duplicates and retries.

The kernel part of CIS-RUN-*, CIS-PRE-8 and CIS-RETRY-*: what :func:`admit`,
:func:`open_run`, :func:`cancel_run`, :func:`close_run`, :func:`run_usage_after` and
:func:`decide_complete` decide. Stores apply these decisions atomically.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from invocation_store.kernel import (
    Admission,
    CompareAndSet,
    ErrorCode,
    RunState,
    RunStatus,
    SweptStale,
    admit,
    cancel_run,
    close_run,
    decide_complete,
    duplicate_code,
    is_well_formed_run,
    open_run,
    record_bytes,
    run_usage_after,
    utf8_len,
)

from ._helpers import (
    DEADLINE_MS,
    RUN_ID,
    T0,
    TTL_MS,
    admitted,
    begun,
    default_limits,
    errored,
    make_run,
    ready,
    request,
    step,
    with_raw,
)


def _cancelled() -> RunState:
    run = cancel_run(make_run(), T0 + 1)
    assert isinstance(run, RunState)
    return run


def _closed() -> RunState:
    run = close_run(make_run(), T0 + 1)
    assert isinstance(run, RunState)
    return run


# -- opening, cancelling, closing -------------------------------------------------------


def test_open_run_records_its_limits() -> None:
    """CIS-RUN-1: an opened run is ACTIVE with its deadline, budgets and TTL; it lapses at deadline + TTL."""
    run = open_run(
        run_id="run-7", now_ms=T0, deadline_ms=T0 + 500, ttl_ms=250, tool_call_budget=3, byte_budget=4096
    )
    assert isinstance(run, RunState)
    assert run.run_id == "run-7"
    assert run.status is RunStatus.ACTIVE
    assert (run.opened_at_ms, run.deadline_ms, run.ttl_ms) == (T0, T0 + 500, 250)
    assert run.expires_at_ms == T0 + 750
    assert (run.tool_call_budget, run.byte_budget) == (3, 4096)
    assert (run.tool_calls_used, run.bytes_used) == (0, 0)


def test_open_run_rejects_unsafe_ids_and_bad_limits() -> None:
    """CIS-RUN-1, CIS-KERN-2: an unsafe run id is RUN_MISMATCH; negative budgets or TTL 0 raise ValueError."""
    for bad_id in ("", "run 1", "run{1}", "r" * 129, "\u00e9t\u00e9"):
        result = open_run(
            run_id=bad_id, now_ms=T0, deadline_ms=T0 + 1, ttl_ms=1, tool_call_budget=1, byte_budget=1
        )
        assert result is ErrorCode.RUN_MISMATCH
    with pytest.raises(ValueError, match="tool_call_budget"):
        open_run(run_id=RUN_ID, now_ms=T0, deadline_ms=T0 + 1, ttl_ms=1, tool_call_budget=-1, byte_budget=1)
    with pytest.raises(ValueError, match="ttl_ms"):
        open_run(run_id=RUN_ID, now_ms=T0, deadline_ms=T0 + 1, ttl_ms=0, tool_call_budget=1, byte_budget=1)


def test_cancel_and_close_are_the_only_run_transitions() -> None:
    """CIS-RUN-2, CIS-RETRY-3: ACTIVE -> CANCELLED / CLOSED; a retry repeats; others and lapsed runs fail."""
    run = make_run()
    cancelled, closed = _cancelled(), _closed()
    assert cancelled.status is RunStatus.CANCELLED
    assert closed.status is RunStatus.CLOSED
    assert attrs.evolve(cancelled, status=RunStatus.ACTIVE) == run
    assert cancel_run(cancelled, T0 + 2) == cancelled  # a retried cancel (CIS-RETRY-3)
    assert close_run(closed, T0 + 2) == closed  # a retried close
    assert close_run(cancelled, T0 + 2) is ErrorCode.INVALID_TRANSITION
    assert cancel_run(closed, T0 + 2) is ErrorCode.INVALID_TRANSITION
    assert cancel_run(None, T0) is ErrorCode.RUN_INACTIVE
    assert close_run(run, run.expires_at_ms) is ErrorCode.RUN_INACTIVE


def test_retried_open_is_a_no_op() -> None:
    """CIS-RETRY-3: reopening a live run with the same parameters returns it unchanged; others conflict."""
    params = {"run_id": RUN_ID, "deadline_ms": DEADLINE_MS, "ttl_ms": TTL_MS, "tool_call_budget": 10}
    run = make_run()
    used = admitted(run=run).run
    again = open_run(used, now_ms=T0, byte_budget=1_000_000, **params)  # type: ignore[arg-type]
    assert again is used  # counters kept, nothing reset
    other = open_run(used, now_ms=T0, byte_budget=999, **params)  # type: ignore[arg-type]
    assert other is ErrorCode.INVALID_TRANSITION
    # Once the old run state has lapsed, the id may be opened afresh.
    fresh = open_run(used, now_ms=used.expires_at_ms, byte_budget=999, **params)  # type: ignore[arg-type]
    assert isinstance(fresh, RunState)
    assert fresh.tool_calls_used == 0


# -- admission order -------------------------------------------------------------------


@pytest.mark.parametrize(
    "run_factory",
    [lambda: None, _cancelled, _closed, lambda: attrs.evolve(make_run(), expires_at_ms=T0 + 5)],
    ids=["unknown", "cancelled", "closed", "expired"],
)
def test_inactive_runs_reject_calls(run_factory: object) -> None:
    """CIS-RUN-3, CIS-PRE-1: unknown, cancelled, closed or expired runs give RUN_INACTIVE and no record."""
    run = run_factory()  # type: ignore[operator]
    result = admit(run, None, request(), default_limits(), T0 + 5)
    assert result is ErrorCode.RUN_INACTIVE


def test_deadline_is_enforced_at_and_after_it() -> None:
    """CIS-RUN-4: a call at or after the deadline is RUN_DEADLINE_EXCEEDED; one ms before is admitted."""
    run = make_run(deadline_ms=T0 + 100)
    assert isinstance(admit(run, None, request(), default_limits(), T0 + 99), Admission)
    assert admit(run, None, request(), default_limits(), T0 + 100) is ErrorCode.RUN_DEADLINE_EXCEEDED
    assert admit(run, None, request(), default_limits(), T0 + 101) is ErrorCode.RUN_DEADLINE_EXCEEDED


def test_tool_call_budget_cannot_be_overspent() -> None:
    """CIS-RUN-5: with budget k exactly k calls are admitted, then TOOL_BUDGET_EXHAUSTED; sequence 1..k."""
    run = make_run(tool_call_budget=3)
    sequences = []
    for index in range(3):
        admission = admit(run, None, request(f"call_{index}", token=f"t{index}"), default_limits(), T0)
        assert isinstance(admission, Admission)
        sequences.append(admission.record.sequence)
        run = admission.run
    assert sequences == [1, 2, 3]
    assert run.tool_calls_used == 3
    assert (
        admit(run, None, request("call_x", token="tx"), default_limits(), T0)
        is ErrorCode.TOOL_BUDGET_EXHAUSTED
    )


def test_run_byte_budget_reserves_requests_and_charges_completions() -> None:
    """CIS-RUN-6: admission reserves request bytes, completion charges stored bytes, overspend is refused."""
    args = '{"q":"\u00e9"}'  # 10 UTF-8 bytes, 9 characters
    size = utf8_len(args)
    assert size == 10
    run = make_run(byte_budget=2 * size)
    first = admit(run, None, request("call_a", request_json=args, token="ta"), default_limits(), T0)
    assert isinstance(first, Admission)
    assert first.run.bytes_used == size
    second = admit(first.run, None, request("call_b", request_json=args, token="tb"), default_limits(), T0)
    assert isinstance(second, Admission)
    assert second.run.bytes_used == 2 * size  # exactly at the budget is allowed
    third = admit(second.run, None, request("call_c", request_json="{}", token="tc"), default_limits(), T0)
    assert third is ErrorCode.RUN_BYTES_EXHAUSTED
    # A completion charges what it stored; a shrinking one charges nothing.
    before = first.record
    after = with_raw(before, raw="r" * 40)
    charged = run_usage_after(first.run, before, after)
    assert charged.bytes_used == first.run.bytes_used + record_bytes(after) - record_bytes(before)
    assert run_usage_after(charged, after, before) is charged


def test_admission_order_inactive_deadline_duplicate_budgets() -> None:
    """CIS-PRE-8: inactive > deadline > duplicate > tool budget > byte budget; duplicates consume nothing."""
    existing = begun("call_1", token="tok-first")
    spent = attrs.evolve(make_run(tool_call_budget=1, byte_budget=1), tool_calls_used=1, bytes_used=1)
    late = attrs.evolve(spent, deadline_ms=T0)
    ended = attrs.evolve(late, status=RunStatus.CANCELLED)
    req = request("call_1", token="tok-second")
    now = T0 + 1
    assert admit(ended, existing, req, default_limits(), now) is ErrorCode.RUN_INACTIVE
    assert admit(late, existing, req, default_limits(), now) is ErrorCode.RUN_DEADLINE_EXCEEDED
    assert admit(spent, existing, req, default_limits(), now) is ErrorCode.CALL_IN_PROGRESS
    assert admit(spent, None, req, default_limits(), now) is ErrorCode.TOOL_BUDGET_EXHAUSTED
    bytes_only = attrs.evolve(spent, tool_call_budget=2)
    assert admit(bytes_only, None, req, default_limits(), now) is ErrorCode.RUN_BYTES_EXHAUSTED


# -- duplicates and retries ------------------------------------------------------------


def test_duplicate_is_refused_without_harm() -> None:
    """CIS-ID-5: a second invocation with the same key is refused with the first call's fate;
    first record and run intact."""
    first = admitted("call_dup", token="tok-a")
    snapshot = attrs.evolve(first.record)
    fates = {
        first.record: ErrorCode.CALL_IN_PROGRESS,
        with_raw(first.record): ErrorCode.CALL_IN_PROGRESS,
        ready(first.record): ErrorCode.DUPLICATE_TOOL_CALL,
        errored(first.record): ErrorCode.DUPLICATE_TOOL_CALL,
        errored(first.record, ErrorCode.EXECUTION_TIMEOUT): ErrorCode.DUPLICATE_TOOL_CALL,
        errored(first.record, ErrorCode.DURABILITY_NOT_REACHED): ErrorCode.DURABILITY_NOT_REACHED,
        step(first.record, SweptStale(now_ms=T0 + 30, older_than_ms=1)): ErrorCode.STALE_PROJECTION,
    }
    for existing, fate in fates.items():
        result = admit(first.run, existing, request("call_dup", token="tok-b"), default_limits(), T0 + 1)
        assert result is fate, existing
        assert duplicate_code(existing) is fate
    assert first.record == snapshot
    assert first.run.tool_calls_used == 1


def test_retried_create_is_recognised_as_itself() -> None:
    """CIS-RETRY-2: the same token on a live record replays it: same record, run unchanged, nothing new."""
    first = admitted("call_r", token="tok-same")
    replay = admit(first.run, first.record, request("call_r", token="tok-same"), default_limits(), T0 + 3)
    assert isinstance(replay, Admission)
    assert replay.replayed is True
    assert replay.record is first.record
    assert replay.run is first.run
    # An empty token never matches: a token-less retry is a duplicate.
    blank = admitted("call_b", token="")
    again = admit(blank.run, blank.record, request("call_b", token=""), default_limits(), T0 + 3)
    assert again is ErrorCode.CALL_IN_PROGRESS
    # After expiry the old record is gone: the key is free again, nothing replayed.
    late = admit(
        first.run,
        first.record,
        request("call_r", token="tok-same"),
        default_limits(),
        first.record.expires_at_ms,
    )
    assert isinstance(late, Admission)
    assert late.replayed is False


def test_completion_compare_and_set() -> None:
    """CIS-RETRY-2: WRITE on the same PROJECTING invocation, REPLAY of a stored completion, else refused."""
    record = begun(token="tok-1")
    done = ready(record)
    assert decide_complete(record, record, done, T0 + 20) is CompareAndSet.WRITE
    assert decide_complete(done, record, done, T0 + 21) is CompareAndSet.REPLAY
    failed = errored(record)
    assert decide_complete(done, record, failed, T0 + 21) is ErrorCode.INVALID_TRANSITION
    other = attrs.evolve(record, invocation_token="tok-2")
    assert decide_complete(other, record, done, T0 + 20) is ErrorCode.INVALID_TRANSITION
    assert decide_complete(None, record, done, T0 + 20) is ErrorCode.INVALID_TRANSITION
    assert decide_complete(record, record, done, record.expires_at_ms) is ErrorCode.INVALID_TRANSITION


def test_completion_may_not_change_identity() -> None:
    """CIS-KERN-2, CIS-LIFE-6: an 'after' that changes identity or expiry is a programming error."""
    record = begun()
    done = ready(record)
    for name, value in (
        ("tool_call_id", "call_2"),
        ("expires_at_ms", done.expires_at_ms + 1),
        ("sequence", 9),
    ):
        changes: dict[str, Any] = {name: value}
        forged = attrs.evolve(done, **changes)
        with pytest.raises(ValueError, match=name):
            decide_complete(record, record, forged, T0 + 20)


def test_failed_admission_never_creates_a_record() -> None:
    """CIS-ID-6, CIS-PRE-1: admit with an unsafe or missing id answers a code and consumes no budget."""
    run = make_run()
    for bad in ("", " ", "call 1", "a" * 129, "\u00e9"):
        result = admit(run, None, request(bad), default_limits(), T0)
        assert result in (ErrorCode.MISSING_TOOL_CALL_ID, ErrorCode.UNSAFE_TOOL_CALL_ID)
        assert not isinstance(result, Admission)
    assert run.tool_calls_used == 0


def _opened() -> RunState:
    run = open_run(
        run_id="run_1", now_ms=1_000, deadline_ms=5_000, ttl_ms=2_000, tool_call_budget=3, byte_budget=100
    )
    assert isinstance(run, RunState)
    return run


def test_every_run_the_kernel_makes_is_well_formed() -> None:
    """CIS-STORE-6: a fresh run, a run with usage, a cancelled and a closed one are well formed;
    budgets of 0 and usage above a budget are not judged."""
    run = _opened()
    assert is_well_formed_run(run)
    assert is_well_formed_run(attrs.evolve(run, tool_calls_used=3, bytes_used=100))
    assert is_well_formed_run(attrs.evolve(run, tool_calls_used=9, tool_call_budget=0, byte_budget=0))
    for ended in (cancel_run(run, 2_000), close_run(run, 2_000)):
        assert isinstance(ended, RunState)
        assert is_well_formed_run(ended)
    assert is_well_formed_run(attrs.evolve(run, opened_at_ms=0, deadline_ms=0, ttl_ms=1, expires_at_ms=1))
    top = 2**53 - 1
    assert is_well_formed_run(attrs.evolve(run, deadline_ms=top - 1, ttl_ms=1, expires_at_ms=top))


@pytest.mark.parametrize(
    "change",
    [
        {"run_id": "run 1"},
        {"run_id": ""},
        {"status": "ACTIVE"},
        {"opened_at_ms": -1},
        {"deadline_ms": -1, "expires_at_ms": 1_999},
        {"ttl_ms": 0, "expires_at_ms": 5_000},
        {"ttl_ms": -1, "expires_at_ms": 4_999},
        {"expires_at_ms": 7_001},
        {"expires_at_ms": 6_999},
        {"tool_call_budget": -1},
        {"byte_budget": -1},
        {"tool_calls_used": -1},
        {"bytes_used": -1},
        {"bytes_used": 2**53},
        {"deadline_ms": 2**53, "expires_at_ms": 2**53 + 2_000},
        {"tool_calls_used": True},
        {"bytes_used": 1.0},
    ],
)
def test_a_run_no_transition_makes_is_not_well_formed(change: dict[str, Any]) -> None:
    """CIS-STORE-6: an unsafe id, a status that is not a RunStatus, any integer outside
    [0, 2**53 - 1] or not an exact int, a TTL below 1, or an expiry other than deadline + TTL."""
    assert not is_well_formed_run(attrs.evolve(_opened(), **change))
