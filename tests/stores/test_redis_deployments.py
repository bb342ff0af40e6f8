"""What survives a server kill and a failover, per deployment: the table of docs/durability.md (CIS-DUR-1)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import redis

from invocation_store import RunContext, ToolBoundary, ToolCallEnvelope, ToolRegistry, ToolSpec
from invocation_store.adapters import Durability, RedisStore, UnsafeServerError
from invocation_store.kernel import ErrorCode, EvidenceStatus, InvocationStatus, Projection
from invocation_store.testing.redis_server import redis_server

pytestmark = pytest.mark.redis

RUN = "run-deploy"


class CountingExecutor:
    """Counts its runs per query; runs ``on_run[query]()`` first when given (a fault while it runs)."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}
        self.on_run: dict[str, Any] = {}

    def __call__(self, args: Mapping[str, Any]) -> object:
        key = str(args["q"])
        self.runs[key] = self.runs.get(key, 0) + 1
        hook = self.on_run.pop(key, None)
        if hook is not None:
            hook()
        return '{"hits": 1}'


def _project(raw: object, args: Mapping[str, Any]) -> Projection:
    return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="1 hit", scope="all")


def _boundary(store: RedisStore, executor: CountingExecutor) -> ToolBoundary:
    spec = ToolSpec(name="search", executor=executor, projector=_project, authorized=True, read_only=True)
    return ToolBoundary(store, ToolRegistry([spec]))


def _open(boundary: ToolBoundary) -> RunContext | ErrorCode:
    return boundary.open_run(
        RUN, deadline_ms=boundary.now_ms() + 600_000, ttl_ms=600_000, tool_call_budget=20, byte_budget=10**6
    )


def _call(boundary: ToolBoundary, context: RunContext, tool_call_id: str) -> Any:
    arguments = f'{{"q":"{tool_call_id}"}}'
    envelope = ToolCallEnvelope(
        run_id=RUN, tool_call_id=tool_call_id, tool_name="search", arguments=arguments
    )
    return boundary.invoke(context, envelope)


def _pid(url: str) -> int:
    with redis.Redis.from_url(url) as client:
        return int(client.info("server")["process_id"])


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


@pytest.mark.parametrize("persistence", ["none", "aof-always"])
def test_what_a_server_kill_keeps(persistence: str, tmp_path: Path) -> None:
    """CIS-DUR-1: a server killed (SIGKILL) and restarted. Without persistence every run and record is
    gone: the next call is RUN_INACTIVE and, the run reopened, a re-sent id runs its executor again.
    With ``appendonly yes`` + ``appendfsync always`` every acknowledged call survives: the re-sent id is
    a duplicate and the executor ran once."""
    args = ["--appendonly", "yes", "--appendfsync", "always"] if persistence == "aof-always" else []
    executor = CountingExecutor()
    with redis_server(extra_args=args, data_dir=str(tmp_path)) as url:
        store = RedisStore.from_url(url, prefix="kill")
        boundary = _boundary(store, executor)
        context = _open(boundary)
        assert isinstance(context, RunContext)
        assert _call(boundary, context, "call_1").ok
        port = _port(url)
        os.kill(_pid(url), signal.SIGKILL)
    with redis_server(extra_args=args, data_dir=str(tmp_path), port=port):
        again = _call(boundary, context, "call_1")
        if persistence == "aof-always":
            assert again.code is ErrorCode.DUPLICATE_TOOL_CALL
            record = store.get(RUN, "call_1")
            assert record is not None
            assert record.status is InvocationStatus.READY
            assert executor.runs == {"call_1": 1}
        else:
            assert again.code is ErrorCode.RUN_INACTIVE
            assert isinstance(_open(boundary), RunContext)
            assert _call(boundary, context, "call_1").ok
            assert executor.runs == {"call_1": 2}  # the lost record let the executor run again
        store.close()


def _wait_online(primary: str, replica: str) -> None:
    end = time.monotonic() + 10
    with redis.Redis.from_url(primary) as p, redis.Redis.from_url(replica) as r:
        while time.monotonic() < end:
            seen = p.info("replication").get("slave0")
            link = r.info("replication").get("master_link_status")
            if link == "up" and isinstance(seen, dict) and seen.get("state") == "online":
                return
            time.sleep(0.02)
    raise AssertionError("the replica never caught up")


def _wait_replicated(primary: str, replica: str) -> None:
    """Until the replica has applied everything the primary wrote so far (by offset, not by WAIT)."""
    end = time.monotonic() + 10
    with redis.Redis.from_url(primary) as p, redis.Redis.from_url(replica) as r:
        while time.monotonic() < end:
            if r.info("replication").get("slave_repl_offset") == p.info("replication")["master_repl_offset"]:
                return
            time.sleep(0.01)
    raise AssertionError("the replica never caught up")


@pytest.mark.parametrize("mode", ["default", "wait-1"])
def test_what_a_failover_keeps(mode: str) -> None:
    """CIS-DUR-1, CIS-DUR-2: a primary whose replica's link is cut is killed and the replica
    promoted. In the default mode a call acknowledged meanwhile is lost and its re-sent id runs the
    executor a second time; in the WAIT mode that call was refused (DURABILITY_NOT_REACHED) without
    running, and runs exactly once after the failover, and a call whose completion (not waited for)
    was lost with the primary is PROJECTING on the new primary and never runs again."""
    durability = Durability(replicas=1, timeout_ms=1000) if mode == "wait-1" else Durability()
    executor = CountingExecutor()
    with contextlib.ExitStack() as stack:
        primary = stack.enter_context(redis_server(extra_args=["--repl-diskless-sync-delay", "0"]))
        replica = stack.enter_context(
            redis_server(extra_args=["--replicaof", "127.0.0.1", str(_port(primary))])
        )
        _wait_online(primary, replica)
        store = RedisStore.from_url(primary, prefix="fo", durability=durability)
        boundary = _boundary(store, executor)
        context = _open(boundary)
        assert isinstance(context, RunContext)
        assert _call(boundary, context, "call_1").ok
        _wait_replicated(primary, replica)  # call_1 is on the replica before the cut
        with redis.Redis.from_url(replica) as link:
            # Cut the link: the replica follows a master that does not exist (port 1), keeping
            # its data; nothing the primary writes from now on reaches it.
            if mode == "wait-1":
                # While call_3's tool runs: its create reached the replica (WAIT), its completion will not.
                executor.on_run["call_3"] = lambda: link.replicaof("127.0.0.1", 1)
                assert _call(boundary, context, "call_3").ok
            else:
                link.replicaof("127.0.0.1", 1)
            cut = _call(boundary, context, "call_2")
            os.kill(_pid(primary), signal.SIGKILL)
            store.close()
            link.replicaof("NO", "ONE")  # the failover: the replica is promoted
        promoted = RedisStore.from_url(replica, prefix="fo")
        after = _boundary(promoted, executor)
        assert _call(after, context, "call_1").code is ErrorCode.DUPLICATE_TOOL_CALL
        _call(after, context, "call_2")
        if mode == "wait-1":  # the completion was lost, the create was not: PROJECTING, never rerun
            lost = promoted.get(RUN, "call_3")
            assert lost is not None
            assert lost.status is InvocationStatus.PROJECTING
            assert _call(after, context, "call_3").code is ErrorCode.CALL_IN_PROGRESS
        promoted.close()
    assert executor.runs["call_1"] == 1
    if mode == "wait-1":
        assert cut.code is ErrorCode.DURABILITY_NOT_REACHED
        assert executor.runs["call_2"] == 1
        assert executor.runs["call_3"] == 1
    else:
        assert cut.ok
        assert executor.runs["call_2"] == 2  # acknowledged, lost with the primary, run again


def test_an_aof_mode_keeps_each_create_through_a_kill_with_everysec(tmp_path: Path) -> None:
    """CIS-DUR-1, CIS-DUR-2: with ``appendfsync everysec`` and ``Durability(aof=True)``, a server killed
    right after a call (well within the second everysec may lose) keeps it: the create waited for its
    fsync (WAITAOF). A server without WAITAOF (Redis < 7.2) refuses the mode on first use instead."""
    args = ["--appendonly", "yes", "--appendfsync", "everysec"]
    executor = CountingExecutor()
    with redis_server(extra_args=args, data_dir=str(tmp_path)) as url:
        with redis.Redis.from_url(url) as client:
            has_waitaof = client.execute_command(b"COMMAND", b"INFO", b"WAITAOF")[0] is not None
        store = RedisStore.from_url(url, prefix="aof", durability=Durability(aof=True, timeout_ms=1000))
        boundary = _boundary(store, executor)
        if not has_waitaof:
            with pytest.raises(UnsafeServerError):
                store.check_server()
            store.close()
            return
        context = _open(boundary)
        assert isinstance(context, RunContext)
        for tool_call_id in ("call_1", "call_2", "call_3"):
            assert _call(boundary, context, tool_call_id).ok
        port = _port(url)
        os.kill(_pid(url), signal.SIGKILL)
    with redis_server(extra_args=args, data_dir=str(tmp_path), port=port):
        for tool_call_id in ("call_1", "call_2", "call_3"):
            assert _call(boundary, context, tool_call_id).code is ErrorCode.DUPLICATE_TOOL_CALL
        assert executor.runs == {"call_1": 1, "call_2": 1, "call_3": 1}
        store.close()
