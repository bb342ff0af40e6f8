"""A completion the store cannot apply is retried, then held; the harness learns every call's fate."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from invocation_store import (
    AsyncMemoryStore,
    AsyncToolBoundary,
    CompletionRetry,
    MemoryStore,
    StoreUnavailableError,
    ToolRegistry,
)
from invocation_store._completion import PendingCompletion, PendingCompletions
from invocation_store.adapters import ForwardingStore
from invocation_store.kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    ErrorCode,
    EvidenceStatus,
    InvocationStatus,
    Limits,
    Projection,
    ProjectionReceived,
    RawReceived,
    transition,
)
from invocation_store.testing import FakeClock

from ._fakes import RUN, FakeExecutor, boundary_for, envelope, open_run, tool

FAST = CompletionRetry(budget_ms=150, first_delay_ms=5, max_delay_ms=20)


class FlakyStore(ForwardingStore):
    """A memory store whose ``complete`` fails (STORE_UNAVAILABLE) while ``down`` is set."""

    def __init__(self, inner: MemoryStore) -> None:
        super().__init__(inner)
        self.down = False
        self.fail_next = 0
        self.attempts = 0

    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        self.attempts += 1
        if self.down or self.fail_next > 0:
            self.fail_next = max(0, self.fail_next - 1)
            raise StoreUnavailableError("ConnectionError")
        return super().complete(before, after)


def _flaky(clock: FakeClock) -> FlakyStore:
    return FlakyStore(MemoryStore(clock))


def test_a_completion_that_fails_briefly_is_retried_and_lands(clock: FakeClock) -> None:
    """CIS-DUR-5: two failed compare-and-sets, then success: the agent gets the result, the executor
    ran once, nothing is held."""
    store = _flaky(clock)
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor), completion_retry=FAST)
    context = open_run(boundary)
    store.fail_next = 2
    result = boundary.invoke(context, envelope("call_1"))
    assert result.ok, result
    assert store.attempts == 3
    assert len(executor.calls) == 1
    assert boundary.pending_completions() == ()
    stored = store.get(context.run_id, "call_1")
    assert stored is not None
    assert stored.status is InvocationStatus.READY


def test_a_completion_that_keeps_failing_is_held_and_the_retried_call_gets_its_result(
    clock: FakeClock,
) -> None:
    """CIS-DUR-5: the store stays down past the budget: the agent sees STORE_UNAVAILABLE after about
    the budget, the completion (raw response included) is held; the harness re-sending the same call
    while the store is down gets STORE_UNAVAILABLE again (never DUPLICATE_TOOL_CALL), and once the
    store is back gets the result of the one execution; another call under the same id (other
    arguments) is the duplicate it is; the executor never runs a second time."""
    store = _flaky(clock)
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor), completion_retry=FAST)
    context = open_run(boundary)
    store.down = True
    started = time.monotonic()
    first = boundary.invoke(context, envelope("call_1"))
    took = time.monotonic() - started
    assert first.code is ErrorCode.STORE_UNAVAILABLE
    assert 0.1 <= took < 2.0
    assert boundary.pending_completions() == ((context.run_id, "call_1"),)
    assert boundary.pending_completions("other-run") == ()
    held = boundary.completions.get(context.run_id, "call_1")
    assert held is not None
    assert held.final.raw_response is not None  # kept whole, in memory
    projecting = store.get(context.run_id, "call_1")
    assert projecting is not None
    assert projecting.status is InvocationStatus.PROJECTING

    again = boundary.invoke(context, envelope("call_1"))
    assert again.code is ErrorCode.STORE_UNAVAILABLE
    other = boundary.invoke(context, envelope("call_1", arguments='{"q":"other"}'))  # not a retry
    assert other.code is ErrorCode.CALL_IN_PROGRESS  # the stored record is still PROJECTING
    store.down = False
    answered = boundary.invoke(context, envelope("call_1"))
    assert answered.ok, answered
    assert len(executor.calls) == 1
    assert boundary.pending_completions() == ()
    stored = store.get(context.run_id, "call_1")
    assert stored == held.final
    duplicate = boundary.invoke(context, envelope("call_1"))  # nothing held now: an ordinary duplicate
    assert duplicate.code is ErrorCode.DUPLICATE_TOOL_CALL


def test_finish_pending_and_drop_pending_settle_every_held_call(clock: FakeClock) -> None:
    """CIS-DUR-5: finish_pending applies every held completion of the run once the store is back;
    drop_pending forgets one, whose record the harness then sweeps to ERROR/STALE_PROJECTION; the
    table is bounded (max_pending, oldest dropped first)."""
    store = _flaky(clock)
    executor = FakeExecutor()
    policy = CompletionRetry(budget_ms=0, max_pending=2)
    boundary = boundary_for(store, tool(executor), completion_retry=policy)
    context = open_run(boundary)
    store.down = True
    for tool_call_id in ("call_1", "call_2", "call_3"):
        assert boundary.invoke(context, envelope(tool_call_id)).code is ErrorCode.STORE_UNAVAILABLE
    assert boundary.pending_completions() == ((context.run_id, "call_2"), (context.run_id, "call_3"))
    still = boundary.finish_pending(context)
    assert {tcid: result.code for tcid, result in still.items()} == {
        "call_2": ErrorCode.STORE_UNAVAILABLE,
        "call_3": ErrorCode.STORE_UNAVAILABLE,
    }
    assert boundary.drop_pending(context, "call_3") is True
    assert boundary.drop_pending(context, "call_3") is False
    store.down = False
    finished = boundary.finish_pending(context)
    assert set(finished) == {"call_2"}
    assert finished["call_2"].ok
    assert boundary.pending_completions() == ()
    clock.advance(10_000)
    assert boundary.sweep_stale(context, older_than_ms=5_000) == 2  # call_1 (table overflow), call_3
    for tool_call_id in ("call_1", "call_3"):
        swept = store.get(context.run_id, tool_call_id)
        assert swept is not None
        assert swept.error_code is ErrorCode.STALE_PROJECTION
    assert len(executor.calls) == 3


def test_completion_retry_values_are_checked() -> None:
    """CIS-DUR-5: budgets and counts are non-negative ints; pauses double up to their cap."""
    pauses = CompletionRetry().pauses_ms()
    assert [next(pauses) for _ in range(6)] == [10, 20, 40, 80, 160, 250]
    for bad in ({"budget_ms": -1}, {"max_pending": 1.5}):
        with pytest.raises(ValueError):
            CompletionRetry(**bad)
    with pytest.raises(TypeError):
        boundary_for(MemoryStore(FakeClock()), completion_retry="fast")


class FlakyAsyncStore:
    """An async memory store whose ``complete`` fails while ``down`` is set."""

    def __init__(self, inner: AsyncMemoryStore) -> None:
        self.inner = inner
        self.down = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        if self.down:
            raise StoreUnavailableError("ConnectionError")
        return await self.inner.complete(before, after)


def test_the_async_boundary_holds_and_finishes_completions_too(clock: FakeClock) -> None:
    """CIS-DUR-5: the same on AsyncToolBoundary: held after the budget, the retried call answered with
    the one execution's result once the store is back, finish_pending for the rest."""
    store = FlakyAsyncStore(AsyncMemoryStore(clock=clock))
    executor = FakeExecutor()
    boundary = AsyncToolBoundary(store, ToolRegistry([tool(executor)]), completion_retry=FAST)  # type: ignore[arg-type]

    async def scenario() -> None:
        context = await boundary.open_run(
            "run-1", deadline_ms=clock() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=10**6
        )
        assert not isinstance(context, ErrorCode)
        store.down = True
        assert (await boundary.invoke(context, envelope("call_1"))).code is ErrorCode.STORE_UNAVAILABLE
        assert (await boundary.invoke(context, envelope("call_2"))).code is ErrorCode.STORE_UNAVAILABLE
        assert (await boundary.invoke(context, envelope("call_1"))).code is ErrorCode.STORE_UNAVAILABLE
        store.down = False
        assert (await boundary.invoke(context, envelope("call_1"))).ok
        finished = await boundary.finish_pending(context)
        assert set(finished) == {"call_2"}
        assert finished["call_2"].ok

    asyncio.run(scenario())
    assert len(executor.calls) == 2
    assert boundary.pending_completions() == ()


def _pending(clock: FakeClock, tool_call_id: str, raw: str = "raw") -> PendingCompletion:
    """A PROJECTING record and its READY completion, as the boundary holds them."""
    store = MemoryStore(clock)
    store.open_run(RUN, deadline_ms=clock() + 60_000, ttl_ms=60_000, tool_call_budget=9, byte_budget=10**6)
    request = AdmissionRequest(
        run_id=RUN, tool_call_id=tool_call_id, tool_name="search", request_json="{}", invocation_token="t"
    )
    admitted = store.create(request, Limits())
    assert isinstance(admitted, Admission)
    with_raw = transition(admitted.record, RawReceived(raw_response=raw, now_ms=clock()), Limits())
    assert isinstance(with_raw, CanonicalRecord)
    found = Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="c", scope="s")
    final = transition(with_raw, ProjectionReceived(projection=found, now_ms=clock()), Limits())
    assert isinstance(final, CanonicalRecord)
    return PendingCompletion(created=admitted.record, final=final)


def test_the_held_completion_table_keeps_order_bound_and_identity(clock: FakeClock) -> None:
    """CIS-DUR-5: the table's bookkeeping, by behaviour: holding again moves a call to the newest end;
    the bound drops the oldest; ``settled`` removes only the very completion held (a stale one for the
    same call, or one never held, changes nothing); ``drop`` answers once; ``retry_of`` matches the
    same tool and arguments only."""
    table = PendingCompletions(CompletionRetry(max_pending=2))
    one, two, three = (_pending(clock, tcid) for tcid in ("call_1", "call_2", "call_3"))
    table.settled(one)  # never held: nothing happens
    assert table.keys() == ()
    table.hold(one)
    table.hold(two)
    table.hold(one)  # held again: now the newest
    assert table.keys() == ((RUN, "call_2"), (RUN, "call_1"))
    table.hold(three)  # over the bound: the oldest (call_2) goes
    assert table.keys() == ((RUN, "call_1"), (RUN, "call_3"))
    stale = _pending(clock, "call_1", raw="another raw")
    table.settled(stale)  # the same call, not the completion held: it stays
    assert table.get(RUN, "call_1") is one
    assert table.retry_of(RUN, "call_1", "search", "{}") is one
    assert table.retry_of(RUN, "call_1", "other_tool", "{}") is None
    assert table.retry_of(RUN, "call_1", "search", '{"q":1}') is None
    table.settled(one)
    assert table.keys() == ((RUN, "call_3"),)
    assert table.drop(RUN, "call_3") is True
    assert table.drop(RUN, "call_3") is False
    assert table.keys() == ()
    nothing = PendingCompletions(CompletionRetry(max_pending=0))
    nothing.hold(one)
    assert nothing.keys() == ()


def test_a_completion_that_lands_leaves_other_held_completions_held(clock: FakeClock) -> None:
    """CIS-DUR-5: settling one call's completion never touches another's: after call_1 is held, call_2
    completes normally and call_1 is still held (its raw response with it) until applied."""
    store = _flaky(clock)
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor), completion_retry=CompletionRetry(budget_ms=0))
    context = open_run(boundary)
    store.fail_next = 1
    assert boundary.invoke(context, envelope("call_1")).code is ErrorCode.STORE_UNAVAILABLE
    assert boundary.invoke(context, envelope("call_2")).ok
    assert boundary.pending_completions() == ((context.run_id, "call_1"),)
    held = boundary.completions.get(context.run_id, "call_1")
    assert held is not None
    assert held.final.raw_response == '{"hits":["disk full on db-1"]}'
    assert set(boundary.finish_pending(context)) == {"call_1"}
    assert boundary.pending_completions() == ()
    assert len(executor.calls) == 2
