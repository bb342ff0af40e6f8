"""An acknowledgement is about the record: a replication link partitioned by a proxy (CIS-DUR-2).

A master and its replica, the replica's link to the master through a loopback TCP proxy that
drops every byte both ways while TCP stays up. Creates in ``Durability(replicas=1)`` then meet
the two ways a wait is cut short and resent on a fresh connection, where the resent create is a
replay (Valkey answers ``WAIT`` at once on a connection that wrote nothing): (a) the connection
blocked in ``WAIT`` is killed, (b) the client's socket timeout is shorter than the wait. After
the replica is promoted, no create answered OK is missing and no executor ran twice. Runs on the
server under test (Redis 7 by default; Redis 6.2 and Valkey in CI).
"""

from __future__ import annotations

import contextlib
import os
import signal
import statistics
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import redis

from invocation_store import RunContext, ToolBoundary, ToolCallEnvelope, ToolRegistry, ToolSpec
from invocation_store.adapters import Durability, RedisStore, RetryPolicy
from invocation_store.kernel import ErrorCode, EvidenceStatus, InvocationStatus, Projection, RunState
from invocation_store.testing.redis_server import LinkProxy, redis_server

pytestmark = pytest.mark.redis

WAIT_MS = 400
#: How long a setup step (before anything is measured or partitioned) may wait for the replica's
#: acknowledgement: a loaded machine can take longer than WAIT_MS, which the measured steps use.
SETUP_WAIT_MS = 10_000
#: How long setup may wait for the replication link to come up and catch up (s).
LINK_UP_S = 30.0
CALLS = 3
#: When the old master, restarted, rejoins as the promoted master's replica (s).
REJOIN_AFTER_S = 3.0


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


def _wait_link_up(primary: redis.Redis, replica: redis.Redis, deadline_s: float = LINK_UP_S) -> None:
    """Until the master counts the replica online and the replica has every byte the master had then."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        master = primary.info("replication")
        seen = master.get("slave0")
        mine = replica.info("replication")
        if (
            mine.get("master_link_status") == "up"
            and isinstance(seen, dict)
            and seen.get("state") == "online"
            and int(mine.get("slave_repl_offset", -1)) >= int(master.get("master_repl_offset", 0))
        ):
            return
        time.sleep(0.02)
    raise AssertionError("the replica never caught up")


@contextlib.contextmanager
def _partitionable_pair() -> Iterator[tuple[str, str, LinkProxy]]:
    """A private master, a private replica whose link goes through a LinkProxy."""
    with contextlib.ExitStack() as stack:
        primary = stack.enter_context(redis_server(extra_args=["--repl-diskless-sync-delay", "0"]))
        proxy = stack.enter_context(LinkProxy(_port(primary)))
        replica = stack.enter_context(
            redis_server(extra_args=["--replicaof", "127.0.0.1", str(proxy.port), "--repl-timeout", "60"])
        )
        with redis.Redis.from_url(primary) as p, redis.Redis.from_url(replica) as r:
            _wait_link_up(p, r)
        yield primary, replica, proxy


class CountingExecutor:
    """Counts its runs per query, over every host and phase of a test."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, args: Mapping[str, Any]) -> object:
        with self.lock:
            key = str(args["q"])
            self.runs[key] = self.runs.get(key, 0) + 1
        return '{"hits": 1}'


def _project(raw: object, args: Mapping[str, Any]) -> Projection:
    return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="1 hit", scope="all")


def _boundary(store: RedisStore, executor: CountingExecutor) -> ToolBoundary:
    spec = ToolSpec(name="search", executor=executor, projector=_project, authorized=True, read_only=True)
    return ToolBoundary(store, ToolRegistry([spec]))


def _call(boundary: ToolBoundary, run_id: str, tool_call_id: str) -> Any:
    envelope = ToolCallEnvelope(
        run_id=run_id, tool_call_id=tool_call_id, tool_name="search", arguments=f'{{"q":"{tool_call_id}"}}'
    )
    return boundary.invoke(RunContext(run_id=run_id), envelope)


def _kill_waiters(url: str, stop: threading.Event, armed: threading.Event, killed: list[int]) -> None:
    """While ``armed``, kill the first client connection blocked in WAIT and disarm, until ``stop``."""
    with redis.Redis.from_url(url) as admin:
        while not stop.is_set():
            if armed.is_set():
                for client in admin.client_list():
                    if client.get("cmd") == "wait":
                        with contextlib.suppress(redis.ResponseError):
                            admin.client_kill_filter(_id=client["id"])
                            killed.append(int(client["id"]))
                            armed.clear()
                        break
            time.sleep(0.005)


def _promote_and_resend(
    replica_url: str, run_id: str, ids: list[str], acknowledged: list[str], executor: CountingExecutor
) -> None:
    """Promote the replica; every acknowledged record is there; re-send every id there."""
    with redis.Redis.from_url(replica_url) as replica:
        replica.replicaof("NO", "ONE")
    promoted = RedisStore.from_url(replica_url, prefix="part")
    for tool_call_id in acknowledged:
        record = promoted.get(run_id, tool_call_id)
        assert record is not None, f"acknowledged create {tool_call_id} lost"
        # Only creates (and opens) wait: a completion acknowledged by the master alone may lag.
        assert record.status in {InvocationStatus.READY, InvocationStatus.PROJECTING}
    if promoted.get_run(run_id) is None:
        opened = promoted.open_run(
            run_id,
            deadline_ms=promoted.now_ms() + 60_000,
            ttl_ms=60_000,
            tool_call_budget=50,
            byte_budget=10**6,
        )
        assert isinstance(opened, RunState)
    boundary = _boundary(promoted, executor)
    for tool_call_id in ids:
        result = _call(boundary, run_id, tool_call_id)
        # The create that reached the replica is refused with its fate; the others run now, once.
        assert result.ok or result.code in {ErrorCode.DUPLICATE_TOOL_CALL, ErrorCode.CALL_IN_PROGRESS}
    promoted.close()


def _open(store: RedisStore, run_id: str) -> None:
    opened = store.open_run(
        run_id, deadline_ms=store.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=50, byte_budget=10**6
    )
    assert isinstance(opened, RunState)


def _acknowledged_start(url: str, prefix: str, run_id: str, executor: CountingExecutor | None) -> None:
    """Setup, before anything is measured: open ``run_id`` and, with an executor, acknowledge its first
    call ("before"), waiting up to SETUP_WAIT_MS for the replica (a store of its own: the store under
    test keeps WAIT_MS)."""
    setup = RedisStore.from_url(
        url,
        prefix=prefix,
        durability=Durability(replicas=1, timeout_ms=SETUP_WAIT_MS),
        socket_timeout=SETUP_WAIT_MS / 1000 + 5,
    )
    try:
        _open(setup, run_id)
        if executor is not None:
            assert _call(_boundary(setup, executor), run_id, "before").ok
    finally:
        setup.close()


def test_a_wait_killed_mid_partition_never_acknowledges_a_create_that_did_not_replicate() -> None:
    """CIS-DUR-2, CIS-ID-5: with the replication link partitioned, each create's connection is killed
    while it blocks in WAIT; the store resends it on a fresh connection, where it replays and touches
    its record, so the new WAIT is about the record: DURABILITY_NOT_REACHED, never OK. After the
    replica is promoted: 0 acknowledged creates lost, every executor ran at most once."""
    executor = CountingExecutor()
    with _partitionable_pair() as (primary, replica, proxy):
        _acknowledged_start(primary, "part", "run-kill", executor)  # the link works: acknowledged
        store = RedisStore.from_url(
            primary, prefix="part", durability=Durability(replicas=1, timeout_ms=WAIT_MS)
        )
        store.check_server()  # counts the replica while the link is up
        boundary = _boundary(store, executor)
        proxy.partition()
        stop, armed, killed = threading.Event(), threading.Event(), []
        killer = threading.Thread(target=_kill_waiters, args=(primary, stop, armed, killed), daemon=True)
        killer.start()
        ids = [f"kill{index}" for index in range(CALLS)]
        results = []
        try:
            for tool_call_id in ids:
                armed.set()  # the first WAIT of this call is killed; its resend waits undisturbed
                results.append(_call(boundary, "run-kill", tool_call_id))
        finally:
            stop.set()
            killer.join(5)
        assert len(killed) == CALLS, "each call's first WAIT was killed"
        acknowledged = ["before"] + [tcid for tcid, result in zip(ids, results, strict=True) if result.ok]
        assert acknowledged == ["before"]  # nothing reached the replica: nothing acknowledged
        assert all(result.code is ErrorCode.DURABILITY_NOT_REACHED for result in results)
        assert all(executor.runs.get(tool_call_id, 0) == 0 for tool_call_id in ids)
        store.close()
        _promote_and_resend(replica, "run-kill", ["before", *ids], acknowledged, executor)
    assert executor.runs == {"before": 1, **dict.fromkeys(ids, 1)}


def test_a_socket_timeout_shorter_than_the_wait_is_refused_and_never_acknowledges() -> None:
    """CIS-DUR-2, CIS-DUR-4: a waiting durability whose timeout the client's socket timeout would cut
    short is refused when the store is built. Where the store cannot see it (the timeout lowered on
    the pool afterwards), every wait is cut short and resent as a replay that touches its record: the
    resent WAIT is about the record, so no create is acknowledged while the link is partitioned. After
    the replica is promoted: 0 acknowledged creates lost, every executor ran at most once."""
    executor = CountingExecutor()
    with _partitionable_pair() as (primary, replica, proxy):
        durability = Durability(replicas=1, timeout_ms=WAIT_MS)
        with pytest.raises(ValueError, match="socket timeout"):
            RedisStore.from_url(primary, durability=durability, socket_timeout=WAIT_MS / 2000)
        _acknowledged_start(primary, "part", "run-timeout", executor)
        store = RedisStore.from_url(
            primary, prefix="part", durability=durability, retry_policy=RetryPolicy(budget_ms=1_500)
        )
        store.check_server()
        boundary = _boundary(store, executor)
        proxy.partition()
        store._client.connection_pool.connection_kwargs["socket_timeout"] = WAIT_MS / 4000
        store._client.connection_pool.disconnect()
        ids = [f"slow{index}" for index in range(CALLS)]
        results = [_call(boundary, "run-timeout", tool_call_id) for tool_call_id in ids]
        acknowledged = ["before"] + [tcid for tcid, result in zip(ids, results, strict=True) if result.ok]
        assert acknowledged == ["before"]
        assert all(
            result.code in {ErrorCode.STORE_UNAVAILABLE, ErrorCode.DURABILITY_NOT_REACHED}
            for result in results
        )
        assert all(executor.runs.get(tool_call_id, 0) == 0 for tool_call_id in ids)
        store.close()
        _promote_and_resend(replica, "run-timeout", ["before", *ids], acknowledged, executor)
    assert executor.runs == {"before": 1, **dict.fromkeys(ids, 1)}


def test_an_open_refused_for_durability_writes_nothing_and_can_be_opened_again() -> None:
    """CIS-DUR-14, CIS-DUR-2, CIS-RUN-1: with the replication link partitioned, a run open waits in
    vain and is DURABILITY_NOT_REACHED; the run it stored is taken back (no key of the run is left),
    so once the link heals the same run opens, with other parameters too."""
    with _partitionable_pair() as (primary, _replica, proxy):
        durability = Durability(replicas=1, timeout_ms=WAIT_MS)
        _acknowledged_start(primary, "undo", "run-before", None)  # the link works: an open reaches it
        store = RedisStore.from_url(primary, prefix="undo", durability=durability)
        store.check_server()
        proxy.partition()
        refused = store.open_run(
            "run-undo", deadline_ms=store.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=99
        )
        assert refused is ErrorCode.DURABILITY_NOT_REACHED
        with redis.Redis.from_url(primary) as client:
            assert list(client.scan_iter(match="undo:{run-undo}*")) == []
            assert client.exists("undo:{run-before}:run") == 1
        proxy.heal()
        with redis.Redis.from_url(primary) as client:
            client.execute_command(
                "CLIENT", "KILL", "TYPE", "replica"
            )  # resynchronise after the dropped bytes
        end = time.monotonic() + 15
        reopened: object = None
        while time.monotonic() < end:
            reopened = store.open_run(
                "run-undo",
                deadline_ms=store.now_ms() + 30_000,
                ttl_ms=30_000,
                tool_call_budget=9,
                byte_budget=9,
            )
            if isinstance(reopened, RunState):
                break
            time.sleep(0.2)
        assert isinstance(reopened, RunState)
        assert reopened.tool_call_budget == 9
        store.close()


def test_the_waiting_modes_cost_after_a_failover_is_measured() -> None:
    """CIS-DUR-2: after a failover the promoted master has no replica until the old master rejoins as
    one; meanwhile every create in Durability(replicas=1) waits timeout_ms and is
    DURABILITY_NOT_REACHED (its executor never runs), and creates are acknowledged again once the
    replica is back. The store reaches the master through one address (a proxy moved to the promoted
    replica, as a virtual IP would be). The window, the refusals and their wait are measured and
    printed (docs/durability.md states them with what an operator can do)."""
    executor = CountingExecutor()
    durability = Durability(replicas=1, timeout_ms=WAIT_MS)
    fast_sync = ["--repl-diskless-sync-delay", "0"]
    with contextlib.ExitStack() as stack:
        primary = stack.enter_context(redis_server(extra_args=fast_sync))
        replica = stack.enter_context(
            redis_server(extra_args=["--replicaof", "127.0.0.1", str(_port(primary)), *fast_sync])
        )
        with redis.Redis.from_url(primary) as p, redis.Redis.from_url(replica) as r:
            _wait_link_up(p, r)
        address = stack.enter_context(LinkProxy(_port(primary)))
        _acknowledged_start(address.url, "fo", "run-fo", executor)
        store = RedisStore.from_url(address.url, prefix="fo", durability=durability)
        store.check_server()  # counts the replica before the failover
        boundary = _boundary(store, executor)
        with redis.Redis.from_url(primary) as p:
            pid = int(p.info("server")["process_id"])
        os.kill(pid, signal.SIGKILL)  # the master dies; the replica is promoted
        with redis.Redis.from_url(replica) as r:
            r.replicaof("NO", "ONE")
        address.retarget(_port(replica))
        failed_over = time.monotonic()

        refused, waits, index = 0, [], 0
        result = None
        rejoined = False
        while time.monotonic() - failed_over < 30:  # a bound only: the loop ends at the first OK
            if not rejoined and time.monotonic() - failed_over >= REJOIN_AFTER_S:
                # The old master comes back (a fresh process) as the new master's replica. Started
                # from this thread: a server dies with the thread that started it (PDEATHSIG).
                again = ["--replicaof", "127.0.0.1", str(_port(replica)), *fast_sync]
                stack.enter_context(redis_server(extra_args=again))
                rejoined = True
            started = time.monotonic()
            result = _call(boundary, "run-fo", f"after{index}")
            index += 1
            if result.ok:
                break
            assert result.code is ErrorCode.DURABILITY_NOT_REACHED
            refused += 1
            waits.append(time.monotonic() - started)
        window = time.monotonic() - failed_over
        assert result is not None
        assert result.ok, "creates never became durable again"
        assert refused >= 1
        assert all(executor.runs.get(f"after{i}", 0) == 0 for i in range(index - 1))
        print(
            f"failover cost: {refused} creates DURABILITY_NOT_REACHED over {window:.2f} s until the "
            f"replica was back {REJOIN_AFTER_S:.0f} s after the failover (median wait "
            f"{statistics.median(waits) * 1000:.0f} ms, timeout_ms {WAIT_MS})"
        )
        store.close()
