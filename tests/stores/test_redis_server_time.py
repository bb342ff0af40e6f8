"""Server time: a create whose script starts long after its ``now`` never trusts that ``now`` (CIS-DUR-11)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import pytest
import redis

from invocation_store.adapters import AsyncRedisStore, RedisStore
from invocation_store.adapters.redis import DEFAULT_MAX_LAG_MS
from invocation_store.kernel import Admission, AdmissionRequest, ErrorCode, RunState
from invocation_store.testing import FakeClock
from invocation_store.testing.redis_server import redis_server

from ._support import LIMITS, request

pytestmark = pytest.mark.redis

PAUSE_S = 2.0
DEADLINE_IN_MS = 1_000


def _pause_soon(url: str) -> threading.Event:
    """SIGSTOP the (private) server for PAUSE_S seconds; the event is set once it is stopped."""
    with redis.Redis.from_url(url) as client:
        pid = int(client.info("server")["process_id"])
    stopped = threading.Event()

    def pause() -> None:
        os.kill(pid, signal.SIGSTOP)
        stopped.set()
        time.sleep(PAUSE_S)
        os.kill(pid, signal.SIGCONT)

    threading.Thread(target=pause, daemon=True).start()
    stopped.wait(5)
    return stopped


def _open(store: RedisStore, run_id: str) -> None:
    opened = store.open_run(
        run_id,
        deadline_ms=store.now_ms() + DEADLINE_IN_MS,
        ttl_ms=60_000,
        tool_call_budget=5,
        byte_budget=10**6,
    )
    assert isinstance(opened, RunState)


def _request(store: RedisStore | AsyncRedisStore, run_id: str, tool_call_id: str) -> AdmissionRequest:
    return request(tool_call_id, run_id=run_id)


def test_a_create_delayed_past_the_deadline_by_a_paused_server_is_refused() -> None:
    """CIS-DUR-11, CIS-RUN-4: the server is paused (SIGSTOP) while a create whose now is before the
    run's deadline is in flight, and resumes after the deadline: the script finds it started more
    than max_lag_ms after its now (server TIME), writes nothing, and the store resends with a fresh
    now: RUN_DEADLINE_EXCEEDED. Without the check (max_lag_ms=0) the stale now admits the call."""
    with redis_server() as url:
        store = RedisStore.from_url(url, prefix="time")  # the wall clock: checked by default
        _open(store, "run-checked")
        unchecked = RedisStore.from_url(url, prefix="time", max_lag_ms=0)
        checked_request = _request(store, "run-checked", "call_1")
        unchecked_request = _request(unchecked, "run-unchecked", "call_1")
        _pause_soon(url)
        outcome = store.create(checked_request, LIMITS)
        assert outcome is ErrorCode.RUN_DEADLINE_EXCEEDED
        assert store.get("run-checked", "call_1") is None
        _open(unchecked, "run-unchecked")  # its deadline is DEADLINE_IN_MS from now
        _pause_soon(url)
        late = unchecked.create(unchecked_request, LIMITS)
        assert isinstance(late, Admission)  # the stale now was trusted: what the check prevents
        assert late.record.created_at_ms < late.run.deadline_ms <= store.now_ms()
        assert isinstance(store.create(_request(store, "run-checked", "call_2"), LIMITS), ErrorCode)
        store.close()
        unchecked.close()


def test_the_async_store_checks_server_time_too() -> None:
    """CIS-DUR-11: the same pause on an AsyncRedisStore: RUN_DEADLINE_EXCEEDED, nothing written."""
    with redis_server() as url:
        sync = RedisStore.from_url(url, prefix="atime")
        _open(sync, "run-a")

        async def scenario() -> object:
            store = AsyncRedisStore.from_url(url, prefix="atime")
            try:
                await store.check_server()
                req = _request(store, "run-a", "call_1")
                await asyncio.to_thread(_pause_soon, url)
                return await store.create(req, LIMITS)
            finally:
                await store.close()

        assert asyncio.run(scenario()) is ErrorCode.RUN_DEADLINE_EXCEEDED
        assert sync.get("run-a", "call_1") is None
        sync.close()


def test_the_lag_bound_defaults_to_the_wall_clock_only(clock: FakeClock) -> None:
    """CIS-DUR-11: the default bound applies to a store on the wall clock; an injected clock (which
    tests move at will) is not compared with server time unless max_lag_ms says so; bad values refuse."""
    with redis_server() as url:
        wall = RedisStore.from_url(url)
        fake = RedisStore.from_url(url, clock=clock)
        assert wall._max_lag == DEFAULT_MAX_LAG_MS
        assert fake._max_lag is None
        assert RedisStore.from_url(url, clock=clock, max_lag_ms=250)._max_lag == 250
        with pytest.raises(ValueError):
            RedisStore.from_url(url, max_lag_ms=-1)
        _open(wall, "run-w")
        assert isinstance(wall.create(_request(wall, "run-w", "call_1"), LIMITS), Admission)
        wall.close()
        fake.close()
