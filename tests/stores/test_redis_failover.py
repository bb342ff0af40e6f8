"""Failover on a local 3-master + 3-replica Redis Cluster, in the WAIT durability mode (CIS-DUR-2)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from invocation_store import RunContext, ToolBoundary, ToolCallEnvelope, ToolRegistry, ToolSpec
from invocation_store.adapters import Durability, RedisStore, RetryPolicy, run_key
from invocation_store.kernel import ErrorCode, EvidenceStatus, Projection
from invocation_store.testing.redis_server import RedisServerUnavailableError, redis_cluster

pytestmark = [pytest.mark.redis, pytest.mark.slow]

PREFIX = "fo"
RUN = "run-failover"


@pytest.fixture(scope="module")
def cluster() -> Iterator[list[str]]:
    """A private cluster: 3 masters, one replica each, 1 s node timeout (a failover takes ~2-4 s)."""
    try:
        with redis_cluster(3, replicas=1, node_timeout_ms=1000) as urls:
            yield urls
    except RedisServerUnavailableError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"no local Redis Cluster: {exc}", pytrace=False)
        pytest.skip(f"no local Redis Cluster: {exc}")


class CountingExecutor:
    """Counts its runs per tool call (the query is the tool_call_id)."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}

    def __call__(self, args: Mapping[str, Any]) -> object:
        key = str(args["q"])
        self.runs[key] = self.runs.get(key, 0) + 1
        return '{"hits": 1}'


def _project(raw: object, args: Mapping[str, Any]) -> Projection:
    return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="1 hit", scope="all")


def _call(boundary: ToolBoundary, context: RunContext, tool_call_id: str) -> Any:
    arguments = f'{{"q":"{tool_call_id}"}}'
    envelope = ToolCallEnvelope(
        run_id=RUN, tool_call_id=tool_call_id, tool_name="search", arguments=arguments
    )
    return boundary.invoke(context, envelope)


def _info(url: str, section: str) -> dict[str, Any]:
    with redis.Redis.from_url(url, socket_timeout=2.0) as client:
        return dict(client.info(section))


def _wait_promoted(replica_url: str, others: list[str], deadline_s: float = 30.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            promoted = _info(replica_url, "replication").get("role") == "master"
            states = []
            for url in others:
                with redis.Redis.from_url(url, socket_timeout=2.0) as client:
                    states.append(str(client.cluster("INFO").get("cluster_state")) == "ok")
            if promoted and all(states):
                return
        except redis.RedisError:
            pass
        time.sleep(0.1)
    raise AssertionError("the replica was not promoted")


def _cut_link(replica_url: str) -> None:
    """Cut a replica's replication link and keep it cut: it can no longer authenticate to its master.

    (A paused replica is not cut: the kernel keeps buffering the stream for it.)
    """
    with redis.Redis.from_url(replica_url, socket_timeout=2.0) as replica:
        replica.config_set("masterauth", "not-the-password")
        replica.client_kill_filter(_type="master")
        end = time.monotonic() + 10
        while replica.info("replication").get("master_link_status") != "down":
            if time.monotonic() > end:
                raise AssertionError("the replication link stayed up")
            time.sleep(0.02)


def test_killing_a_master_whose_replica_was_cut_loses_no_acknowledged_create(cluster: list[str]) -> None:
    """CIS-DUR-2, CIS-DUR-1, CIS-BND-6, CIS-KEY-2: in the WAIT mode, the replication link of the run's
    master is cut, the master is killed and the replica promoted: every call the boundary reported
    as created survives, every call made while the link was cut was refused with
    DURABILITY_NOT_REACHED without running (and is gone with the master); re-sending every id
    afterwards runs no executor a second time (the new master, without a replica of its own, keeps
    refusing what it cannot make durable)."""
    client = RedisCluster.from_url(cluster[0])
    store = RedisStore(
        client,
        prefix=PREFIX,
        durability=Durability(replicas=1, timeout_ms=1000),
        retry_policy=RetryPolicy(budget_ms=10_000),
    )
    executor = CountingExecutor()
    spec = ToolSpec(name="search", executor=executor, projector=_project, authorized=True, read_only=True)
    boundary = ToolBoundary(store, ToolRegistry([spec]))
    try:
        context = boundary.open_run(
            RUN,
            deadline_ms=boundary.now_ms() + 600_000,
            ttl_ms=600_000,
            tool_call_budget=50,
            byte_budget=10**6,
        )
        assert isinstance(context, RunContext), context
        node = client.get_node_from_key(run_key(PREFIX, RUN))
        master_index = next(i for i, url in enumerate(cluster[:3]) if url.endswith(f":{node.port}/0"))
        master_url, replica_url = cluster[master_index], cluster[3 + master_index]
        master_pid = int(_info(master_url, "server")["process_id"])

        acknowledged = [f"call_{i}" for i in range(5)]
        for tool_call_id in acknowledged:
            assert _call(boundary, context, tool_call_id).ok
        cut = [f"cut_{i}" for i in range(3)]
        _cut_link(replica_url)
        for tool_call_id in cut:
            assert _call(boundary, context, tool_call_id).code is ErrorCode.DURABILITY_NOT_REACHED
        assert all(tool_call_id not in executor.runs for tool_call_id in cut)
        os.kill(master_pid, signal.SIGKILL)
        _wait_promoted(replica_url, [url for url in cluster[:3] if url != master_url])

        for tool_call_id in acknowledged:  # each survived the failover: a re-send is a duplicate
            assert store.get(RUN, tool_call_id) is not None, tool_call_id
            assert _call(boundary, context, tool_call_id).code is ErrorCode.DUPLICATE_TOOL_CALL
        for tool_call_id in cut:  # never acknowledged, gone with the master
            assert store.get(RUN, tool_call_id) is None, tool_call_id
            # The new master has no replica yet: the mode still refuses rather than run unprotected.
            assert _call(boundary, context, tool_call_id).code is ErrorCode.DURABILITY_NOT_REACHED
        assert executor.runs == dict.fromkeys(acknowledged, 1)
    finally:
        client.close()
