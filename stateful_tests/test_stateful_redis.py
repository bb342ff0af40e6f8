"""The stateful machine on the Redis stores and the differential machine (CIS-STATE-1, CIS-STORE-8)."""

from __future__ import annotations

import time

import pytest

from invocation_store.adapters import MemoryStore, RedisStore
from invocation_store.kernel import Admission, AdmissionRequest, Limits, RunState
from invocation_store.testing import MachineStats, RedisStoreFactory, make_invocation_machine

from ._support import run_machine


def test_redis_store_machine(redis_factory: RedisStoreFactory, request: pytest.FixtureRequest) -> None:
    """CIS-STATE-1, CIS-TTL-2, CIS-TTL-5: every invariant holds on RedisStore; PTTL never grows.

    A real private redis-server; a fresh key prefix per example, deleted at teardown.
    """
    stats = MachineStats()
    run_machine(make_invocation_machine(redis_factory, stats=stats), "redis", stats, request)
    assert stats.steps > 0


def test_async_redis_store_machine(
    async_redis_factory: RedisStoreFactory, request: pytest.FixtureRequest
) -> None:
    """CIS-STATE-1, CIS-BND-1: every invariant holds through AsyncToolBoundary on AsyncRedisStore.

    Each example runs its async steps on its own event loop (an asyncio.Runner).
    """
    stats = MachineStats()
    run_machine(make_invocation_machine(async_redis_factory, stats=stats), "async-redis", stats, request)
    assert stats.steps > 0


def test_differential_machine(
    redis_factory: RedisStoreFactory, async_redis_factory: RedisStoreFactory, request: pytest.FixtureRequest
) -> None:
    """CIS-STORE-8, CIS-STATE-1: memory, Redis and async Redis answer every operation identically.

    Every operation goes to the three stores at once; their results, records, run
    states and call lists must equal each other and the kernel's after every step.
    """
    stats = MachineStats()
    machine = make_invocation_machine(MemoryStore, redis_factory, async_redis_factory, stats=stats)
    run_machine(machine, "differential", stats, request)
    assert stats.steps > 0


def test_redis_record_really_expires(redis_factory: RedisStoreFactory) -> None:
    """CIS-TTL-1, CIS-TTL-2, CIS-TTL-4: a record's Redis key is created with its TTL and really lapses.

    The machine moves a fake clock; this checks real time once, with a short TTL:
    PTTL starts at or below the run's TTL, only falls, and the key is gone (and
    reads absent) after it.
    """
    store = redis_factory(lambda: time.time_ns() // 1_000_000)  # type: ignore[arg-type]
    try:
        assert isinstance(store, RedisStore)
        now = store.now_ms()
        opened = store.open_run(
            "run-ttl", deadline_ms=now + 60_000, ttl_ms=300, tool_call_budget=1, byte_budget=100
        )
        assert isinstance(opened, RunState)
        admitted = store.create(
            AdmissionRequest(
                run_id="run-ttl",
                tool_call_id="call_ttl",
                tool_name="search",
                request_json="{}",
                invocation_token="tok",
            ),
            Limits(),
        )
        assert isinstance(admitted, Admission)
        first = store.ttl_remaining_ms("run-ttl", "call_ttl")
        assert first is not None
        assert 0 < first <= 300
        assert store.get("run-ttl", "call_ttl") is not None  # a read ...
        second = store.ttl_remaining_ms("run-ttl", "call_ttl")
        assert second is not None
        assert second <= first  # ... does not refresh
        time.sleep(0.45)
        assert store.get("run-ttl", "call_ttl") is None
        assert store.ttl_remaining_ms("run-ttl", "call_ttl") is None
    finally:
        store.close()
        redis_factory.release(store)
