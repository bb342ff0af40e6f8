"""Both Redis stores recover on the first call after a server restart (same test, sync and async)."""

from __future__ import annotations

import asyncio

import pytest

from invocation_store.adapters import AsyncRedisStore, RedisStore
from invocation_store.kernel import Admission, ErrorCode, RunState
from invocation_store.testing import FakeClock
from invocation_store.testing.redis_server import redis_server

from ._support import LIMITS, request

pytestmark = pytest.mark.redis

WAVE = 8


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


def _open_args(clock: FakeClock) -> dict[str, int]:
    return {"deadline_ms": clock() + 60_000, "ttl_ms": 30_000, "tool_call_budget": 20, "byte_budget": 10**6}


def test_sync_store_recovers_on_the_first_call_after_a_restart(clock: FakeClock) -> None:
    """CIS-DUR-10, CIS-STORE-5: after the server restarts (connections dropped, scripts gone), the
    first wave of calls on a RedisStore all succeed: none is STORE_UNAVAILABLE."""
    with redis_server() as url:
        port = _port(url)
        store = RedisStore.from_url(url, clock=clock)
        assert isinstance(store.open_run("run-a", **_open_args(clock)), RunState)
        first = [store.create(request(f"call_{i}", run_id="run-a"), LIMITS) for i in range(WAVE)]
        assert all(isinstance(outcome, Admission) for outcome in first)
    with redis_server(port=port):
        assert isinstance(store.open_run("run-b", **_open_args(clock)), RunState)
        outcomes = [store.create(request(f"call_{i}", run_id="run-b"), LIMITS) for i in range(WAVE)]
        assert all(isinstance(outcome, Admission) for outcome in outcomes), outcomes
        store.close()


def test_async_store_recovers_on_the_first_call_after_a_restart(clock: FakeClock) -> None:
    """CIS-DUR-10, CIS-STORE-5: the same restart on an AsyncRedisStore: the first wave of calls, sent
    concurrently on pooled connections that all died with the server, all succeed."""
    loop = asyncio.new_event_loop()
    try:
        with redis_server() as url:
            port = _port(url)

            async def before() -> AsyncRedisStore:
                store = AsyncRedisStore.from_url(url, clock=clock)
                assert isinstance(await store.open_run("run-a", **_open_args(clock)), RunState)
                first = [store.create(request(f"call_{i}", run_id="run-a"), LIMITS) for i in range(WAVE)]
                assert all(isinstance(outcome, Admission) for outcome in await asyncio.gather(*first))
                return store

            store = loop.run_until_complete(before())
        with redis_server(port=port):

            async def after() -> list[object]:
                wave = [store.create(request(f"call_{i}", run_id="run-a"), LIMITS) for i in range(WAVE)]
                opened = store.open_run("run-b", **_open_args(clock))
                return list(await asyncio.gather(opened, *wave, return_exceptions=True))

            outcomes = loop.run_until_complete(after())
            # The restarted server lost run-a (persistence off): the wave is RUN_INACTIVE, not a failure.
            assert isinstance(outcomes[0], RunState), outcomes
            assert all(outcome is ErrorCode.RUN_INACTIVE for outcome in outcomes[1:]), outcomes
            loop.run_until_complete(store.close())
    finally:
        loop.close()
