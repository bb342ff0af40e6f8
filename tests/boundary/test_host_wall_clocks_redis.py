"""Hosts whose wall clocks are off: no Redis-backed decision rests on the clock a store falls back to.

A Redis store's ``now_ms()`` answers the host's wall clock until it holds a reading of
server ``TIME``: the asyncio store before its first round trip, the blocking store when
its ``TIME`` read fails. These tests inject that wall clock (``wall_clock_ms`` of the two
store modules, the one fallback) skewed by +10 s, -10 s and +120 s per host, and check
that every decision that compares times is taken on the server's clock whatever it says
(CIS-STORE-10): a sweep's age, a held create's own-create test, a run's deadline, a
record's and a run's expiry. Each test first checks that the skewed fallback is really
what a fresh store answers, so that it cannot pass with the injection gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import secrets
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import redis

from invocation_store import (
    AsyncRedisStore,
    AsyncToolBoundary,
    RedisStore,
    RunContext,
    ToolBoundary,
    ToolCallEnvelope,
    ToolRegistry,
    ToolSpec,
)
from invocation_store.adapters._async import redis as async_redis
from invocation_store.adapters._sync import redis as sync_redis
from invocation_store.kernel import (
    Admission,
    CitationKind,
    ErrorCode,
    EvidenceStatus,
    InvocationStatus,
    Projection,
    RunState,
)
from invocation_store.testing.contract import LIMITS, request
from invocation_store.testing.redis_server import redis_server

from .test_held_creates_redis import (
    FAST_COMPLETION,
    FAST_RETRY,
    RUN,
    Counting,
    ReplyDroppingProxy,
    _call,
    _registry,
    proxied_server,
)

pytestmark = pytest.mark.redis

#: The host skews every test runs: ahead, behind, far ahead (ms).
SKEWS_MS = (10_000, -10_000, 120_000)

_SKEW: contextvars.ContextVar[int] = contextvars.ContextVar("host_wall_skew_ms", default=0)


def _skewed_wall() -> int:
    return int(time.time() * 1000) + _SKEW.get()


@pytest.fixture(autouse=True)
def _skewable_walls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stores' wall-clock fallback reads the skew of the host whose code runs (:func:`on_host`)."""
    monkeypatch.setattr(async_redis, "wall_clock_ms", _skewed_wall)
    monkeypatch.setattr(sync_redis, "wall_clock_ms", _skewed_wall)


@contextlib.contextmanager
def on_host(skew_ms: int) -> Iterator[None]:
    """Run the block as a host whose wall clock is ``skew_ms`` off."""
    token = _SKEW.set(skew_ms)
    try:
        yield
    finally:
        _SKEW.reset(token)


def _server_ms(url: str) -> int:
    with redis.Redis.from_url(url) as client:
        seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def _assert_falls_back_to_the_skewed_wall(store: AsyncRedisStore, url: str, skew_ms: int) -> None:
    """The injection is live: a fresh asyncio store answers the skewed host clock (so the test can fail)."""
    assert abs(store.now_ms() - (_server_ms(url) + skew_ms)) < 2_000


def _opened(url: str, prefix: str, run_id: str, *, deadline_in_ms: int, ttl_ms: int) -> RunState:
    """The run opened by a host whose clock is right, deadline and TTL from server TIME."""
    store = RedisStore.from_url(url, prefix=prefix)
    try:
        opened = store.open_run(
            run_id,
            deadline_ms=store.synced_now_ms() + deadline_in_ms,
            ttl_ms=ttl_ms,
            tool_call_budget=50,
            byte_budget=1 << 20,
        )
    finally:
        store.close()
    assert isinstance(opened, RunState)
    return opened


# -- a sweep's age -----------------------------------------------------------------------


@pytest.mark.parametrize("skew_ms", SKEWS_MS)
def test_a_sweep_judges_a_records_age_on_the_servers_clock(skew_ms: int) -> None:
    """CIS-STORE-10, CIS-LIFE-7: a janitor host whose wall clock is ``skew_ms`` off sweeps, with a fresh
    store of each flavour, a PROJECTING record less than a second old: ``sweep_stale(older_than_ms=
    5_000)`` leaves it (a host ahead would have judged it old); once the record is 400 ms old on the
    server, ``sweep_stale(300)`` sweeps it (a host behind would have judged it young)."""
    context = RunContext(run_id=RUN)
    with redis_server() as url:
        for flavour in ("async", "sync"):
            prefix = f"sweep-{flavour}-{secrets.token_hex(3)}"
            _opened(url, prefix, RUN, deadline_in_ms=600_000, ttl_ms=600_000)
            writer = RedisStore.from_url(url, prefix=prefix)
            created = writer.create(request("young", run_id=RUN), LIMITS)
            assert isinstance(created, Admission)

            def sweep(older_than_ms: int, flavour: str = flavour, prefix: str = prefix) -> int:
                with on_host(skew_ms):
                    if flavour == "sync":
                        store = RedisStore.from_url(url, prefix=prefix)
                        try:
                            return ToolBoundary(store, _registry(Counting())).sweep_stale(
                                context, older_than_ms
                            )
                        finally:
                            store.close()

                    async def janitor() -> int:
                        astore = AsyncRedisStore.from_url(url, prefix=prefix)
                        try:
                            _assert_falls_back_to_the_skewed_wall(astore, url, skew_ms)
                            boundary = AsyncToolBoundary(astore, _registry(Counting()))
                            return await boundary.sweep_stale(context, older_than_ms)
                        finally:
                            await astore.close()

                    return asyncio.run(janitor())

            assert sweep(5_000) == 0
            young = writer.get(RUN, "young")
            assert young is not None
            assert young.status is InvocationStatus.PROJECTING
            while _server_ms(url) < created.record.created_at_ms + 400:
                time.sleep(0.05)
            assert sweep(300) == 1
            swept = writer.get(RUN, "young")
            assert swept is not None
            assert swept.error_code is ErrorCode.STALE_PROJECTION
            writer.close()


# -- a held create's own-create test ---------------------------------------------------------


@pytest.mark.parametrize("skew_ms", SKEWS_MS)
def test_a_fresh_async_host_runs_a_create_whose_reply_was_lost_once(skew_ms: int) -> None:
    """CIS-BND-7, CIS-STORE-10, CIS-RETRY-2: a fresh AsyncRedisStore on a host whose wall clock is
    ``skew_ms`` off makes its first call; every reply to the create is lost past the retry budget
    (STORE_UNAVAILABLE, the create held). The re-send replays the token and is recognised as the
    call's own create (its ``not_before_ms`` is a reading of the server's clock, not the host's): the
    tool runs exactly once, and a further re-send is DUPLICATE_TOOL_CALL."""
    executor = Counting()

    async def host(url: str, proxy: ReplyDroppingProxy, prefix: str) -> None:
        store = AsyncRedisStore.from_url(url, prefix=prefix, retry_policy=FAST_RETRY)
        try:
            _assert_falls_back_to_the_skewed_wall(store, url, skew_ms)
            boundary = AsyncToolBoundary(store, _registry(executor), completion_retry=FAST_COMPLETION)
            context = RunContext(run_id=RUN)
            proxy.dropping.set()
            first = await boundary.invoke(context, _call("call_1"))
            proxy.dropping.clear()
            assert first.code is ErrorCode.STORE_UNAVAILABLE
            assert proxy.dropped >= 1
            assert executor.runs == {}
            assert boundary.pending_creates() == ((RUN, "call_1"),)
            again = await boundary.invoke(context, _call("call_1"))
            assert again.ok, again
            assert executor.runs == {"call_1": 1}
            assert (await boundary.invoke(context, _call("call_1"))).code is ErrorCode.DUPLICATE_TOOL_CALL
            assert executor.runs == {"call_1": 1}
        finally:
            await store.close()

    with proxied_server() as (url, proxy):
        prefix = f"held-{secrets.token_hex(3)}"
        _opened(url, prefix, RUN, deadline_in_ms=600_000, ttl_ms=600_000)
        with on_host(skew_ms):
            asyncio.run(host(url, proxy, prefix))


@pytest.mark.parametrize("skew_ms", SKEWS_MS)
def test_a_blocking_host_whose_first_clock_read_fails_runs_a_lost_create_once(skew_ms: int) -> None:
    """CIS-BND-7, CIS-STORE-10: a fresh RedisStore on a host whose wall clock is ``skew_ms`` off; the
    reply to its first ``TIME`` is lost (where ``now_ms()`` answers the host's wall clock), then every
    reply to the create. The call's clock reading is retried within the budget rather than taken from
    the host: the re-send is recognised as the call's own create and the tool runs exactly once."""
    executor = Counting()
    with proxied_server() as (url, proxy):
        prefix = f"held-sync-{secrets.token_hex(3)}"
        _opened(url, prefix, RUN, deadline_in_ms=600_000, ttl_ms=600_000)
        with on_host(skew_ms):
            store = RedisStore.from_url(url, prefix=prefix, retry_policy=FAST_RETRY)
            try:
                boundary = ToolBoundary(store, _registry(executor), completion_retry=FAST_COMPLETION)
                context = RunContext(run_id=RUN)
                proxy.drop_once = b"TIME"
                proxy.dropping.set()
                first = boundary.invoke(context, _call("call_1"))
                proxy.dropping.clear()
                assert proxy.drop_once is None  # the TIME reply was lost
                assert first.code is ErrorCode.STORE_UNAVAILABLE
                assert executor.runs == {}
                assert boundary.pending_creates() == ((RUN, "call_1"),)
                again = boundary.invoke(context, _call("call_1"))
                assert again.ok, again
                assert executor.runs == {"call_1": 1}
                assert boundary.invoke(context, _call("call_1")).code is ErrorCode.DUPLICATE_TOOL_CALL
            finally:
                store.close()


def test_a_store_that_cannot_read_the_servers_clock_takes_no_decision_on_the_hosts() -> None:
    """CIS-STORE-10, CIS-FAIL-5: with no server to read ``TIME`` from, ``now_ms()`` falls back to the
    host's wall clock (arithmetic only) but ``synced_now_ms()``, the clock of every decision, raises
    StoreUnavailableError on both flavours, and a call is STORE_UNAVAILABLE with nothing held: its
    create was never sent."""
    with redis_server() as url:
        pass  # the port is free again: connections are refused
    with on_host(120_000):
        store = RedisStore.from_url(url, retry_policy=FAST_RETRY)
        assert store.now_ms() >= int(time.time() * 1000) + 100_000
        with pytest.raises(Exception) as caught:
            store.synced_now_ms()
        assert caught.value.code is ErrorCode.STORE_UNAVAILABLE  # type: ignore[attr-defined]
        boundary = ToolBoundary(store, _registry(Counting()), completion_retry=FAST_COMPLETION)
        assert boundary.invoke(RunContext(run_id=RUN), _call("call_1")).code is ErrorCode.STORE_UNAVAILABLE
        assert boundary.pending_creates() == ()
        store.close()

        async def fresh() -> None:
            astore = AsyncRedisStore.from_url(url, retry_policy=FAST_RETRY)
            try:
                assert astore.now_ms() >= int(time.time() * 1000) + 100_000
                with pytest.raises(Exception) as failed:
                    await astore.synced_now_ms()
                assert failed.value.code is ErrorCode.STORE_UNAVAILABLE  # type: ignore[attr-defined]
            finally:
                await astore.close()

        asyncio.run(fresh())


# -- several hosts on one run: the deadline and expiry -----------------------------------------


class _Query:
    """An executor counting its runs per query across every host."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}

    async def __call__(self, args: Mapping[str, Any]) -> object:
        key = str(args["q"])
        self.runs[key] = self.runs.get(key, 0) + 1
        return '{"hits": 1}'


def _found(raw: object, args: Mapping[str, Any]) -> Projection:
    return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="1 hit", scope="all")


def _query(run_id: str, tool_call_id: str) -> ToolCallEnvelope:
    return ToolCallEnvelope(
        run_id=run_id, tool_call_id=tool_call_id, tool_name="search", arguments=f'{{"q":"{tool_call_id}"}}'
    )


class _Host:
    """One harness host: a fresh AsyncRedisStore whose fallback clock is ``skew_ms`` off."""

    def __init__(self, url: str, prefix: str, skew_ms: int, executor: _Query) -> None:
        self.skew_ms = skew_ms
        self.store = AsyncRedisStore.from_url(url, prefix=prefix)
        spec = ToolSpec(name="search", executor=executor, projector=_found, authorized=True, read_only=True)
        self.boundary = AsyncToolBoundary(self.store, ToolRegistry([spec]))

    async def call(self, run_id: str, tool_call_id: str) -> Any:
        with on_host(self.skew_ms):
            return await self.boundary.invoke(RunContext(run_id=run_id), _query(run_id, tool_call_id))

    async def reopen(self, run_id: str) -> RunState | ErrorCode:
        with on_host(self.skew_ms):
            base = await self.store.synced_now_ms()
            return await self.store.open_run(
                run_id, deadline_ms=base + 60_000, ttl_ms=3_000, tool_call_budget=50, byte_budget=1 << 20
            )


def test_hosts_with_skewed_wall_clocks_share_one_deadline_and_one_expiry() -> None:
    """CIS-STORE-10, CIS-RUN-4, CIS-TTL-4, CIS-ID-5, CIS-RUN-1: fresh asyncio hosts whose wall clocks are
    +10 s, -10 s and +120 s off share a run (deadline 1.5 s, TTL 3 s on the server's clock). Each host's
    first call runs once; every host's re-send of every call is DUPLICATE_TOOL_CALL (the executor runs
    once per id); fresh stores of every host read and cite each record as live (none judges it expired
    on its own clock); no call is admitted at or after the deadline as the server sees it, and every
    host is refused alike after it; no host re-opens the run while a record of it lives, and once the
    records lapsed on the server every host reads them as absent."""
    executor = _Query()

    async def scenario(url: str, prefix: str) -> None:
        run = _opened(url, prefix, "run-walls", deadline_in_ms=1_500, ttl_ms=3_000)
        hosts = [_Host(url, prefix, skew, executor) for skew in SKEWS_MS]
        try:
            for host in hosts:
                with on_host(host.skew_ms):
                    _assert_falls_back_to_the_skewed_wall(host.store, url, host.skew_ms)
            for index, host in enumerate(hosts):
                assert (await host.call("run-walls", f"c{index}")).ok
            for host in hosts:
                for index in range(len(hosts)):
                    again = await host.call("run-walls", f"c{index}")
                    assert again.code is ErrorCode.DUPLICATE_TOOL_CALL
            for skew in SKEWS_MS:  # fresh readers: a record live on the server is live for every host
                reader = _Host(url, prefix, skew, executor)
                try:
                    with on_host(skew):
                        _assert_falls_back_to_the_skewed_wall(reader.store, url, skew)
                        assert await reader.store.get("run-walls", "c0") is not None
                        assert await reader.store.get_run("run-walls") is not None
                        assert (await reader.store.ttl_remaining_ms("run-walls", "c0") or 0) > 0
                        citation = await reader.boundary.cite(RunContext(run_id="run-walls"), "c0")
                        assert citation.kind is CitationKind.EVIDENCE
                        assert (await reader.boundary.project_progress(RunContext(run_id="run-walls"))).facts
                finally:
                    await reader.store.close()
            while _server_ms(url) < run.deadline_ms + 50:
                await asyncio.sleep(0.05)
            late = [await host.call("run-walls", f"late{index}") for index, host in enumerate(hosts)]
            assert [result.code for result in late] == [ErrorCode.RUN_DEADLINE_EXCEEDED] * len(hosts)
            for host in hosts:  # past the deadline, records still live: never re-opened
                assert await host.reopen("run-walls") is ErrorCode.INVALID_TRANSITION
            admin = RedisStore.from_url(url, prefix=prefix)
            try:
                records = admin.get_many("run-walls", admin.calls("run-walls"))
                assert set(records) == {"c0", "c1", "c2"}
                live = [record for record in records.values() if record is not None]
                assert len(live) == len(records)
                assert all(record.created_at_ms < run.deadline_ms for record in live)
                latest_expiry = max(record.expires_at_ms for record in live)
            finally:
                admin.close()
            while _server_ms(url) < latest_expiry + 50:
                await asyncio.sleep(0.05)
            for skew in SKEWS_MS:  # lapsed on the server: absent for every host, behind ones included
                reader = _Host(url, prefix, skew, executor)
                try:
                    with on_host(skew):
                        assert await reader.store.get("run-walls", "c0") is None
                        citation = await reader.boundary.cite(RunContext(run_id="run-walls"), "c0")
                        assert citation.kind is CitationKind.NOT_REFERENCABLE
                finally:
                    await reader.store.close()
        finally:
            for host in hosts:
                await host.store.close()
        assert executor.runs == {"c0": 1, "c1": 1, "c2": 1}

    with redis_server() as url:
        asyncio.run(scenario(url, f"walls-{secrets.token_hex(3)}"))
