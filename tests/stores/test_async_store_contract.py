"""The store contract on the asyncio stores, parametrized over ``make_async_store`` (memory, redis)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from attrs import evolve

from invocation_store.adapters import AsyncInvocationStore
from invocation_store.kernel import (
    Admission,
    AdmissionRequest,
    ErrorCode,
    RunState,
    RunStatus,
    admit,
)
from invocation_store.testing import FakeClock

from ._support import LIMITS, RUN, TTL_MS, failed, ready, request, with_raw

MakeAsyncStore = Callable[[FakeClock], AsyncInvocationStore]


def _run(
    make: MakeAsyncStore, clock: FakeClock, body: Callable[[AsyncInvocationStore], Awaitable[None]]
) -> None:
    async def main() -> None:
        store = make(clock)
        try:
            await body(store)
        finally:
            await store.close()

    asyncio.run(main())


async def _open(store: AsyncInvocationStore, now: int, *, budget: int = 10, run_id: str = RUN) -> RunState:
    run = await store.open_run(
        run_id, deadline_ms=now + 60_000, ttl_ms=TTL_MS, tool_call_budget=budget, byte_budget=1_000_000
    )
    assert isinstance(run, RunState)
    return run


async def _create(store: AsyncInvocationStore, req: AdmissionRequest) -> Admission:
    result = await store.create(req, LIMITS)
    assert isinstance(result, Admission), result
    return result


def test_async_lifecycle_matches_the_kernel(make_async_store: MakeAsyncStore, clock: FakeClock) -> None:
    """CIS-STORE-1, CIS-STORE-8, CIS-REC-4, CIS-REC-5, CIS-PROG-1: create, CAS, reads match the kernel."""

    async def body(store: AsyncInvocationStore) -> None:
        run = await _open(store, clock())
        assert (
            await store.open_run(
                RUN, deadline_ms=run.deadline_ms, ttl_ms=TTL_MS, tool_call_budget=10, byte_budget=1_000_000
            )
            == run
        )
        req = request(clock(), "call_async")
        expected = admit(run, None, req, LIMITS)
        assert await store.create(req, LIMITS) == expected
        assert isinstance(expected, Admission)
        record = expected.record
        assert await store.get(RUN, "call_async") == record
        clock.advance(3)
        raw = with_raw(record, clock())
        assert await store.complete(record, raw) == raw
        done = ready(raw, clock() + 1)
        assert await store.complete(raw, done) == done
        assert await store.complete(raw, done) == done  # replay
        assert await store.complete(record, failed(record, clock(), ErrorCode.EXECUTION_FAILED)) is (
            ErrorCode.INVALID_TRANSITION
        )
        assert dict(await store.get_many(RUN, ["call_async", "nope"])) == {"call_async": done, "nope": None}
        assert dict(await store.get_many(RUN, ["call_async"], include_raw=False)) == {
            "call_async": evolve(done, raw_response=None)
        }
        assert await store.calls(RUN) == ("call_async",)
        assert await store.completed(RUN) == ("call_async",)
        remaining = await store.ttl_remaining_ms(RUN, "call_async")
        assert remaining is not None
        assert 0 < remaining <= TTL_MS
        state = await store.get_run(RUN)
        assert state is not None
        assert await store.close_run(RUN) == evolve(state, status=RunStatus.CLOSED)
        assert await store.cancel_run(RUN) is ErrorCode.INVALID_TRANSITION
        assert await store.create(request(clock(), "late"), LIMITS) is ErrorCode.RUN_INACTIVE

    _run(make_async_store, clock, body)


def test_async_large_raw_responses(make_async_store: MakeAsyncStore, clock: FakeClock) -> None:
    """CIS-REC-3, CIS-STORE-3, CIS-RETRY-2: a 200 KiB raw response is kept whole and replayed."""

    async def body(store: AsyncInvocationStore) -> None:
        await store.open_run(
            RUN, deadline_ms=clock() + 60_000, ttl_ms=TTL_MS, tool_call_budget=5, byte_budget=10**7
        )
        record = (await _create(store, request(clock(), "big"))).record
        done = ready(record, clock() + 1, raw="R" * 200_000)
        assert await store.complete(record, done) == done
        assert await store.complete(record, done) == done
        other = ready(record, clock() + 2, raw="S" * 200_000)
        assert await store.complete(record, other) is ErrorCode.INVALID_TRANSITION
        assert await store.get(RUN, "big") == done
        assert dict(await store.get_many(RUN, ["big"])) == {"big": done}

    _run(make_async_store, clock, body)


def test_async_retry_duplicate_and_expiry(make_async_store: MakeAsyncStore, clock: FakeClock) -> None:
    """CIS-RETRY-2, CIS-ID-5, CIS-TTL-4: replay by token, duplicates refused, expired records absent."""

    async def body(store: AsyncInvocationStore) -> None:
        await _open(store, clock())
        req = request(clock())
        first = await _create(store, req)
        again = await store.create(req, LIMITS)
        assert again == evolve(first, replayed=True)
        assert await store.create(request(clock()), LIMITS) is ErrorCode.DUPLICATE_TOOL_CALL
        late = ready(first.record, first.record.expires_at_ms - 1)
        clock.now = first.record.expires_at_ms
        assert await store.get(RUN, "call_1") is None
        assert await store.ttl_remaining_ms(RUN, "call_1") is None
        assert await store.complete(first.record, late) is ErrorCode.INVALID_TRANSITION
        assert await store.get(RUN, "call_1") is None

    _run(make_async_store, clock, body)


def test_async_tasks_race_for_one_key_and_a_budget(
    make_async_store: MakeAsyncStore, clock: FakeClock
) -> None:
    """CIS-ID-5, CIS-RUN-5: 8 concurrent tasks on one key: one wins; 8 on budget 3: exactly 3 records."""

    async def body(store: AsyncInvocationStore) -> None:
        await _open(store, clock(), budget=4)
        same = await asyncio.gather(*(store.create(request(clock(), "contended"), LIMITS) for _ in range(8)))
        assert sum(isinstance(result, Admission) for result in same) == 1
        assert same.count(ErrorCode.DUPLICATE_TOOL_CALL) == 7
        spread = await asyncio.gather(
            *(store.create(request(clock(), f"c{index}"), LIMITS) for index in range(8))
        )
        assert sum(isinstance(result, Admission) for result in spread) == 3
        assert spread.count(ErrorCode.TOOL_BUDGET_EXHAUSTED) == 5
        assert len(await store.calls(RUN)) == 4

    _run(make_async_store, clock, body)
