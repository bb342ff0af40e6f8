"""One clock per deployment: every Redis decision that compares times is taken on the server's clock.

Hosts whose clocks differ by seconds (or minutes) decide identically, a paused server never
admits a call past its deadline, and each store's ``now_ms`` is a lower bound of server TIME
(CIS-STORE-10, CIS-DUR-11).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest
import redis

from invocation_store import RunContext, ToolBoundary, ToolCallEnvelope, ToolRegistry, ToolSpec
from invocation_store.adapters import AsyncRedisStore, RedisStore, RetryPolicy, StoreUnavailableError
from invocation_store.adapters._async import redis as async_redis
from invocation_store.adapters._redis_clock import DRIFT, ServerClock, monotonic_ms
from invocation_store.kernel import (
    Admission,
    AdmissionRequest,
    ErrorCode,
    EvidenceStatus,
    InvocationStatus,
    Projection,
    RunState,
    RunStatus,
)
from invocation_store.testing.redis_server import redis_server

from ._support import LIMITS, StoreDriver, failed, request

pytestmark = pytest.mark.redis

PAUSE_S = 2.0
DEADLINE_IN_MS = 1_000


def _server_ms(url: str) -> int:
    with redis.Redis.from_url(url) as client:
        seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


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


def _open(
    store: RedisStore, run_id: str, deadline_in_ms: int = DEADLINE_IN_MS, ttl_ms: int = 60_000
) -> RunState:
    opened = store.open_run(
        run_id,
        deadline_ms=store.now_ms() + deadline_in_ms,
        ttl_ms=ttl_ms,
        tool_call_budget=5,
        byte_budget=10**6,
    )
    assert isinstance(opened, RunState)
    return opened


def _request(run_id: str, tool_call_id: str) -> AdmissionRequest:
    return request(tool_call_id, run_id=run_id)


def test_a_create_delayed_past_the_deadline_by_a_paused_server_is_refused() -> None:
    """CIS-DUR-11, CIS-RUN-4, CIS-STORE-10: the server is paused (SIGSTOP) while a create sent before
    the run's deadline is in flight, and resumes after the deadline: the script reads the server's
    clock when it runs, so the call is RUN_DEADLINE_EXCEEDED and nothing is written. No late-start
    bound is needed: the caller's clock is never an argument of the decision."""
    with redis_server() as url:
        store = RedisStore.from_url(url, prefix="time")
        _open(store, "run-paused")
        pending = _request("run-paused", "call_1")
        _pause_soon(url)
        assert store.create(pending, LIMITS) is ErrorCode.RUN_DEADLINE_EXCEEDED
        assert store.get("run-paused", "call_1") is None
        store.close()


def test_the_async_store_decides_on_server_time_too() -> None:
    """CIS-DUR-11, CIS-STORE-10: the same pause on an AsyncRedisStore: RUN_DEADLINE_EXCEEDED, nothing
    written."""
    with redis_server() as url:
        sync = RedisStore.from_url(url, prefix="atime")
        _open(sync, "run-a")

        async def scenario() -> object:
            store = AsyncRedisStore.from_url(url, prefix="atime")
            try:
                await store.check_server()
                req = _request("run-a", "call_1")
                await asyncio.to_thread(_pause_soon, url)
                return await store.create(req, LIMITS)
            finally:
                await store.close()

        assert asyncio.run(scenario()) is ErrorCode.RUN_DEADLINE_EXCEEDED
        assert sync.get("run-a", "call_1") is None
        sync.close()


# -- hosts whose clocks differ -----------------------------------------------------------


class CountingExecutor:
    """Counts its runs per query, across every host (one executor object shared by the test)."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}

    def __call__(self, args: Mapping[str, Any]) -> object:
        key = str(args["q"])
        self.runs[key] = self.runs.get(key, 0) + 1
        return '{"hits": 1}'


def _project(raw: object, args: Mapping[str, Any]) -> Projection:
    return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="1 hit", scope="all")


def _host(url: str, skew_ms: int, executor: CountingExecutor) -> tuple[RedisStore, ToolBoundary]:
    """A harness host whose clock is ``skew_ms`` off: its store's local clock is the skewed wall clock."""

    def skewed() -> float:
        return time.time() * 1000 + skew_ms

    store = RedisStore.from_url(url, prefix="skew", local_clock=skewed)
    spec = ToolSpec(name="search", executor=executor, projector=_project, authorized=True, read_only=True)
    return store, ToolBoundary(store, ToolRegistry([spec]))


def _call(boundary: ToolBoundary, run_id: str, tool_call_id: str) -> Any:
    envelope = ToolCallEnvelope(
        run_id=run_id, tool_call_id=tool_call_id, tool_name="search", arguments=f'{{"q":"{tool_call_id}"}}'
    )
    return boundary.invoke(RunContext(run_id=run_id), envelope)


SKEWS_MS = (10_000, -10_000, 120_000)


def test_hosts_with_skewed_clocks_decide_alike_and_run_each_call_once() -> None:
    """CIS-STORE-10, CIS-ID-5, CIS-RUN-4, CIS-RUN-1: hosts at +10 s, -10 s and +120 s share one run.
    The host 10 s behind opens it (deadline 1.5 s, TTL 3 s by its now_ms) and completes c1; the
    others see the same live run at once (re-opening with the same parameters returns it, other
    parameters are INVALID_TRANSITION: never re-opened while its records live), re-sending c1 never
    runs the executor again, every host's now_ms stays a lower bound of server TIME, no call is
    admitted at or after the deadline as the server sees it, and once the server's clock passes the
    deadline every host is refused alike."""
    executor = CountingExecutor()
    with redis_server() as url:
        hosts = [_host(url, skew, executor) for skew in (-10_000, *SKEWS_MS)]
        stores = [store for store, _ in hosts]
        for store in stores:
            before = _server_ms(url)
            now = store.now_ms()
            assert now <= _server_ms(url)
            error = store.clock_error_ms()
            assert error is not None
            assert now >= before - error - 5  # follows the server, whatever the host's clock says
        opener, opener_boundary = hosts[0]
        run = _open(opener, "run-skew", deadline_in_ms=1_500, ttl_ms=3_000)
        assert abs(run.opened_at_ms - _server_ms(url)) < 1_000  # stamped by the server's clock
        first = _call(opener_boundary, "run-skew", "c1")
        assert first.ok
        for store, boundary in hosts[1:]:
            same = store.open_run(
                "run-skew",
                deadline_ms=run.deadline_ms,
                ttl_ms=run.ttl_ms,
                tool_call_budget=run.tool_call_budget,
                byte_budget=run.byte_budget,
            )
            assert same == store.get_run("run-skew")
            other = store.open_run(
                "run-skew",
                deadline_ms=store.now_ms() + 60_000,
                ttl_ms=3_000,
                tool_call_budget=5,
                byte_budget=10**6,
            )
            assert other is ErrorCode.INVALID_TRANSITION
            again = _call(boundary, "run-skew", "c1")
            assert not again.ok
            assert again.code is ErrorCode.DUPLICATE_TOOL_CALL
        for index, (_, boundary) in enumerate(hosts):
            _call(boundary, "run-skew", f"c{index + 2}")
        while _server_ms(url) < run.deadline_ms + 50:
            time.sleep(0.05)
        late = [_call(boundary, "run-skew", f"late{index}") for index, (_, boundary) in enumerate(hosts)]
        assert [result.code for result in late] == [ErrorCode.RUN_DEADLINE_EXCEEDED] * len(hosts)
        # Past the deadline, before the run lapses on the server: still not re-opened by any host.
        for store in stores[1:]:
            reopened = store.open_run(
                "run-skew",
                deadline_ms=store.now_ms() + 60_000,
                ttl_ms=3_000,
                tool_call_budget=5,
                byte_budget=10**6,
            )
            assert reopened is ErrorCode.INVALID_TRANSITION
        records = opener.get_many("run-skew", opener.calls("run-skew"))
        assert records
        for record in records.values():
            assert record is not None
            assert record.created_at_ms < run.deadline_ms
            assert record.status is InvocationStatus.READY
        assert executor.runs == {f"c{index}": 1 for index in range(1, len(hosts) + 2)}
        for store in stores:
            store.close()


def test_a_record_stamped_by_the_server_is_its_own_create_on_every_host() -> None:
    """CIS-STORE-10, CIS-RETRY-2: now_ms (the boundary's not_before_ms) never runs ahead of the server's
    stamp, so a same-token replay read right after the create is the caller's own, for hosts 10 s
    ahead and behind."""
    with redis_server() as url:
        for skew in (10_000, -10_000):
            store = RedisStore.from_url(
                url, prefix=f"own{skew > 0}", local_clock=lambda s=skew: time.time() * 1000 + s
            )
            _open(store, "run-own")
            for index in range(5):
                before = store.now_ms()
                admitted = store.create(_request("run-own", f"call_{index}"), LIMITS)
                assert isinstance(admitted, Admission)
                assert admitted.record.created_at_ms >= before
                assert store.now_ms() >= admitted.record.created_at_ms  # completions stamp no earlier
            store.close()


# -- the clock itself ----------------------------------------------------------------------


def test_the_server_clock_is_a_lower_bound_that_never_goes_back() -> None:
    """CIS-STORE-10: ServerClock keeps the best lower bound over readings, decays it by DRIFT, never
    hands out a smaller value than before, ignores readings out of order, and states its error."""
    local = [1_000.0]

    def read_local() -> float:
        return local[0]

    clock = ServerClock(read_local)
    assert clock.now_ms() is None
    assert clock.error_ms() is None
    clock.observe(50_000, sent_ms=990.0, received_ms=1_000.0)
    assert clock.now_ms() == 50_000
    assert clock.error_ms() == 10.0
    local[0] = 11_000.0  # ten seconds later
    assert clock.now_ms() == int(50_000 + 10_000 * (1 - DRIFT))
    assert clock.error_ms() == pytest.approx(10.0 + 2 * DRIFT * 10_000)
    clock.observe(40_000, sent_ms=10_999.0, received_ms=11_000.0)  # a lower reading: the bound stays
    assert clock.now_ms() == int(50_000 + 10_000 * (1 - DRIFT))
    clock.observe(60_500, sent_ms=10_999.0, received_ms=11_000.0)  # a higher one is taken
    assert clock.now_ms() == 60_500
    assert clock.error_ms() == 1.0
    clock.observe(99_999, sent_ms=11_000.0, received_ms=10_000.0)  # out of order: ignored
    assert clock.now_ms() == 60_500
    bound = ServerClock(read_local)
    bound.observe(70_000, sent_ms=10_000.0, received_ms=11_000.0)
    assert bound.now_ms() == 70_000
    bound.observe(10, sent_ms=11_000.0, received_ms=11_000.0)
    assert bound.now_ms() == 70_000  # never goes back


def test_now_ms_follows_the_server_on_a_live_store_with_every_reply() -> None:
    """CIS-STORE-10: the blocking store reads TIME on its first now_ms; the asyncio store answers the
    wall clock until its first round trip and the server's clock after it; both stay below TIME."""
    with redis_server() as url:
        store = RedisStore.from_url(url, local_clock=lambda: monotonic_ms() + 7_777_777)
        assert store.now_ms() <= _server_ms(url)
        _open(store, "run-now")
        for index in range(5):
            store.create(_request("run-now", f"call_{index}"), LIMITS)
            assert store.now_ms() <= _server_ms(url)
        store.close()

        async def scenario() -> tuple[int, int, int]:
            astore = AsyncRedisStore.from_url(url)
            try:
                await astore.check_server()
                first = astore.now_ms()
                return first, _server_ms(url), astore.now_ms()
            finally:
                await astore.close()

        first, server, later = asyncio.run(scenario())
        assert first <= server
        assert later >= first


def test_a_given_clock_replaces_the_server_clock_everywhere() -> None:
    """CIS-STORE-10: with ``clock=`` the scripts decide at that clock's now and now_ms is it; no TIME
    reading is needed (a test clock every host shares)."""
    with redis_server() as url:
        fixed = [1_000_000]
        store = RedisStore.from_url(url, clock=lambda: fixed[0])
        assert store.now_ms() == 1_000_000
        assert store.clock_error_ms() == 0.0
        opened = _open(store, "run-given")
        assert opened.opened_at_ms == 1_000_000
        admitted = store.create(_request("run-given", "call_1"), LIMITS)
        assert isinstance(admitted, Admission)
        assert admitted.record.created_at_ms == 1_000_000
        fixed[0] = opened.deadline_ms
        assert store.create(_request("run-given", "call_2"), LIMITS) is ErrorCode.RUN_DEADLINE_EXCEEDED
        store.close()
        astore = AsyncRedisStore.from_url(url, clock=lambda: fixed[0])
        assert (astore.now_ms(), astore.clock_error_ms()) == (fixed[0], 0.0)  # the given clock: exact
        unread = AsyncRedisStore.from_url(url)
        assert unread.clock_error_ms() is None  # no reading of the server's clock yet


def test_on_the_server_clock_a_lapsed_record_is_never_completed_and_its_id_is_new() -> None:
    """CIS-STORE-10, CIS-TTL-4, CIS-STORE-3: on the server's clock a record key that exists is live and
    one that lapsed is absent: a completion after the record's TTL is INVALID_TRANSITION with nothing
    written, a completion before it writes; the lapsed id is admitted again as a new call (the run
    still live)."""
    with redis_server() as url:
        store = RedisStore.from_url(url, prefix="lapse")
        opened = store.open_run(
            "run-lapse", deadline_ms=store.now_ms() + 5_000, ttl_ms=300, tool_call_budget=9, byte_budget=10**6
        )
        assert isinstance(opened, RunState)
        kept = store.create(_request("run-lapse", "kept"), LIMITS)
        lapsing = store.create(_request("run-lapse", "lapsing"), LIMITS)
        assert isinstance(kept, Admission)
        assert isinstance(lapsing, Admission)
        done = failed(kept.record, store.now_ms(), ErrorCode.EXECUTION_FAILED)
        assert store.complete(kept.record, done) == done
        late = failed(lapsing.record, store.now_ms(), ErrorCode.EXECUTION_FAILED)  # decided while live
        time.sleep(0.4)
        assert store.complete(lapsing.record, late) is ErrorCode.INVALID_TRANSITION
        assert store.get("run-lapse", "lapsing") is None
        again = store.create(_request("run-lapse", "lapsing"), LIMITS)
        assert isinstance(again, Admission)
        assert not again.replayed
        assert again.record.sequence == 3
        store.close()


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_an_unreadable_server_clock_is_unavailable_never_the_hosts(
    flavour: str, caplog: pytest.LogCaptureFixture
) -> None:
    """CIS-STORE-10, CIS-FAIL-5: synced_now_ms on a store that cannot reach its server raises
    STORE_UNAVAILABLE naming the failure's type (logged once as the clock operation), never an
    answer from the host's clock."""
    url = "redis://127.0.0.1:1/0"  # nothing listens there
    policy = RetryPolicy(budget_ms=200)
    caplog.set_level(logging.WARNING, logger="invocation_store.redis")
    if flavour == "sync":
        store: Any = RedisStore.from_url(url, retry_policy=policy, socket_connect_timeout=0.2)
        with pytest.raises(StoreUnavailableError) as caught:
            store.synced_now_ms()
        store.close()
    else:

        async def scenario() -> None:
            astore = AsyncRedisStore.from_url(url, retry_policy=policy, socket_connect_timeout=0.2)
            try:
                await astore.synced_now_ms()
            finally:
                await astore.close()

        with pytest.raises(StoreUnavailableError) as caught:
            asyncio.run(scenario())
    assert caught.value.cause == "ConnectionError"
    lines = [r.getMessage() for r in caplog.records if r.name == "invocation_store.redis"]
    assert lines.count("redis store: clock failed (ConnectionError)") == 1


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_runs_end_on_the_server_clock(redis_url: str, flavour: str) -> None:
    """CIS-RUN-2, CIS-STORE-10: with no given clock, cancel and close decide on the server's clock
    (the script reads TIME): the ended run is stamped no earlier than it was opened, and a second
    end is refused as the kernel refuses it."""
    prefix = f"cis-test-{secrets.token_hex(6)}"
    if flavour == "sync":
        store: Any = RedisStore.from_url(redis_url, prefix=prefix)
    else:
        store = AsyncRedisStore.from_url(redis_url, prefix=prefix)
    driver = StoreDriver(store, flavour)
    try:
        for run_id, end in (("run-cancel", driver.cancel_run), ("run-close", driver.close_run)):
            now = _server_ms(redis_url)
            opened = driver.open_run(
                run_id, deadline_ms=now + 60_000, ttl_ms=60_000, tool_call_budget=1, byte_budget=9
            )
            assert isinstance(opened, RunState)
            ended = end(run_id)
            assert isinstance(ended, RunState)
            assert ended.status is (RunStatus.CANCELLED if run_id == "run-cancel" else RunStatus.CLOSED)
            assert driver.get_run(run_id) == ended
            assert end(run_id) in (ended, ErrorCode.INVALID_TRANSITION)
    finally:
        driver.close()


def test_the_async_store_answers_the_servers_clock_once_it_has_a_reading(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CIS-STORE-10: on a host whose wall clock is an hour ahead of the server, a fresh asyncio
    store's now_ms is that wall clock (arithmetic only, before any reading); once a round trip
    brought a reading it is the server's clock (a lower bound of TIME), not the host's."""
    monkeypatch.setattr(async_redis, "wall_clock_ms", lambda: int(time.time() * 1000) + 3_600_000)

    async def scenario() -> tuple[int, int, int]:
        store = AsyncRedisStore.from_url(redis_url)
        try:
            fresh = store.now_ms()
            await store.check_server()
            return fresh, store.now_ms(), _server_ms(redis_url)
        finally:
            await store.close()

    fresh, read, server = asyncio.run(scenario())
    assert fresh >= server + 3_500_000
    assert server - 1_000 <= read <= server


def test_synced_now_ms_reads_time_once_then_answers_from_its_reading(redis_url: str) -> None:
    """CIS-STORE-10: the first synced_now_ms of a fresh asyncio store reads TIME (one round trip);
    after that it answers from the reading it holds, sending nothing, never below the last answer."""

    async def scenario() -> tuple[int, list[int], int, int]:
        store = AsyncRedisStore.from_url(redis_url)
        sent: list[object] = []
        real = store._on_every_node

        async def counted(commands: Any) -> Any:
            sent.append(commands)
            return await real(commands)

        store._on_every_node = counted  # type: ignore[method-assign]
        try:
            first = await store.synced_now_ms()
            rounds = len(sent)
            later = [await store.synced_now_ms() for _ in range(3)]
            return first, later, rounds, len(sent)
        finally:
            await store.close()

    first, later, rounds, total = asyncio.run(scenario())
    assert rounds == 1
    assert total == 1  # no TIME after the first
    assert later == sorted(later)
    assert later[0] >= first
    assert abs(first - _server_ms(redis_url)) < 2_000
