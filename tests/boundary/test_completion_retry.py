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
from invocation_store.adapters import ForwardingStore
from invocation_store.kernel import CanonicalRecord, ErrorCode, InvocationStatus
from invocation_store.testing import FakeClock

from ._fakes import FakeExecutor, boundary_for, envelope, open_run, tool

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
