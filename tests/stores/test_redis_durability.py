"""Durability modes: WAIT / WAITAOF pipelined with the create gate the executor (CIS-DUR-2)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import redis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

from invocation_store import RunContext, ToolBoundary, ToolCallEnvelope, ToolRegistry, ToolSpec
from invocation_store.adapters import (
    AsyncRedisStore,
    Durability,
    RedisStore,
    StoreUnavailableError,
    UnsafeServerError,
    call_key,
    run_key,
)
from invocation_store.kernel import (
    Admission,
    ErrorCode,
    EvidenceStatus,
    InvocationStatus,
    Projection,
    RunState,
)
from invocation_store.testing import FakeClock
from invocation_store.testing.redis_server import redis_server

from ._support import (
    LIMITS,
    RUN,
    StoreDriver,
    monitored,
    name_and_key,
    open_default_run,
    ready,
    record_key,
    request,
)

pytestmark = pytest.mark.redis


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


def _pid(url: str) -> int:
    with redis.Redis.from_url(url) as client:
        return int(client.info("server")["process_id"])


def _wait_link_up(primary_url: str, replica_url: str, deadline_s: float = 10.0) -> None:
    """Until the replica reports its link up and the primary sees it online."""
    end = time.monotonic() + deadline_s
    with redis.Redis.from_url(replica_url) as replica, redis.Redis.from_url(primary_url) as primary:
        while time.monotonic() < end:
            link = replica.info("replication").get("master_link_status")
            seen = primary.info("replication").get("slave0")
            if link == "up" and isinstance(seen, dict) and seen.get("state") == "online":
                return
            time.sleep(0.02)
    raise AssertionError("the replica never caught up")


@contextlib.contextmanager
def _paused(pid: int) -> Iterator[None]:
    """SIGSTOP a server this test started (its replication link stops acknowledging), then SIGCONT."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


@pytest.fixture(scope="module")
def primary_and_replica() -> Iterator[tuple[str, str]]:
    """A private master and one private replica of it."""
    with contextlib.ExitStack() as stack:
        primary = stack.enter_context(redis_server(extra_args=["--repl-diskless-sync-delay", "0"]))
        replica = stack.enter_context(
            redis_server(extra_args=["--replicaof", "127.0.0.1", str(_port(primary))])
        )
        _wait_link_up(primary, replica)
        yield primary, replica


class CountingExecutor:
    """Counts its runs per query."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}

    def __call__(self, args: Mapping[str, Any]) -> object:
        key = str(args["q"])
        self.runs[key] = self.runs.get(key, 0) + 1
        return '{"hits": 1}'


def _project(raw: object, args: Mapping[str, Any]) -> Projection:
    return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="1 hit", scope="all")


def _boundary(store: RedisStore, executor: CountingExecutor) -> ToolBoundary:
    spec = ToolSpec(name="search", executor=executor, projector=_project, authorized=True, read_only=True)
    return ToolBoundary(store, ToolRegistry([spec]))


def _call(boundary: ToolBoundary, context: RunContext, tool_call_id: str) -> Any:
    envelope = ToolCallEnvelope(
        run_id=context.run_id,
        tool_call_id=tool_call_id,
        tool_name="search",
        arguments=f'{{"q":"{tool_call_id}"}}',
    )
    return boundary.invoke(context, envelope)


NOT_DURABLE_LINE = "redis store: create not durable in time: DURABILITY_NOT_REACHED"


def _store_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "invocation_store.redis"]


def test_a_create_that_reaches_its_replica_runs_and_one_that_does_not_never_runs(
    primary_and_replica: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """CIS-DUR-2: with Durability(replicas=1) a create answers only after a replica acknowledged it
    (the record is on the replica when the executor runs); with the replica paused the create is
    refused with DURABILITY_NOT_REACHED after the timeout, the executor never runs, and the record the
    master holds is ERROR/DURABILITY_NOT_REACHED."""
    primary, replica = primary_and_replica
    # 3 s: long enough that a loaded machine's replica still acknowledges the first
    # create in time, short enough to keep the paused case quick.
    store = RedisStore.from_url(primary, prefix="dur", durability=Durability(replicas=1, timeout_ms=3000))
    executor = CountingExecutor()
    boundary = _boundary(store, executor)
    context = boundary.open_run(
        "run-d", deadline_ms=boundary.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=10, byte_budget=10**6
    )
    assert isinstance(context, RunContext)
    first = _call(boundary, context, "call_1")
    assert first.ok, first
    with redis.Redis.from_url(replica) as on_replica:
        assert on_replica.hget("dur:{run-d}:call:call_1", "tool_call_id") == b"call_1"
    caplog.set_level(logging.WARNING, logger="invocation_store.redis")
    with _paused(_pid(replica)):
        started = time.monotonic()
        second = _call(boundary, context, "call_2")
        waited = time.monotonic() - started
    assert second.code is ErrorCode.DURABILITY_NOT_REACHED
    assert _store_lines(caplog).count(NOT_DURABLE_LINE) == 1  # the operator is told, once
    assert waited >= 3.0
    assert executor.runs == {"call_1": 1}
    record = store.get("run-d", "call_2")
    assert record is not None
    assert record.status is InvocationStatus.ERROR
    assert record.error_code is ErrorCode.DURABILITY_NOT_REACHED
    again = _call(boundary, context, "call_2")  # the key's fate is recorded and told, never a run
    assert again.code is ErrorCode.DURABILITY_NOT_REACHED
    assert executor.runs == {"call_1": 1}
    store.close()


def test_more_replicas_than_exist_are_refused_where_asked_for(
    primary_and_replica: tuple[str, str], clock: FakeClock
) -> None:
    """CIS-DUR-2: asking for two replicas of a server with one is refused on first use, naming the
    setting and the count found, before anything is written (the run can then be opened with a mode the
    server can give); without the mode (Durability(), the default) nothing is awaited."""
    primary, _ = primary_and_replica
    store = RedisStore.from_url(
        primary, prefix="dur2", clock=clock, durability=Durability(replicas=2, timeout_ms=50)
    )
    started = time.monotonic()
    with pytest.raises(UnsafeServerError) as caught:
        store.open_run(RUN, deadline_ms=clock() + 1000, ttl_ms=1000, tool_call_budget=1, byte_budget=100)
    assert time.monotonic() - started < 1.0  # refused at once, not after waiting for the replicas
    assert "Durability(replicas=2)" in str(caught.value)
    assert "has 1 online" in str(caught.value)
    assert caught.value.permanent
    with redis.Redis.from_url(primary) as client:
        assert list(client.scan_iter(match="dur2:*")) == []
    store.close()
    one = RedisStore.from_url(primary, prefix="dur2", clock=clock, durability=Durability(replicas=1))
    assert isinstance(open_default_run(one, clock()), RunState)
    one.close()
    plain = RedisStore.from_url(primary, prefix="dur3", clock=clock, durability=Durability())
    assert isinstance(open_default_run(plain, clock()), RunState)
    assert isinstance(plain.create(request(), LIMITS), Admission)
    plain.close()


def test_durability_values_are_checked() -> None:
    """CIS-DUR-2: counts are non-negative ints, a waiting mode needs a positive timeout, aof is a bool."""
    assert not Durability().waits
    assert Durability(replicas=1).command() == ("WAIT", "1", "1000")
    assert Durability(aof=True).command() == ("WAITAOF", "1", "0", "1000")
    assert Durability(replicas=1).reached(1)
    assert not Durability(replicas=2).reached(1)
    assert Durability(aof=True, replicas=1).reached([1, 1])
    assert not Durability(aof=True, replicas=1).reached([0, 1])
    assert not Durability(aof=True).reached(b"junk")
    for bad in ({"replicas": -1}, {"timeout_ms": -5}, {"replicas": 1, "timeout_ms": 0}):
        with pytest.raises(ValueError):
            Durability(**bad)
    with pytest.raises(TypeError):
        Durability(aof=1)  # type: ignore[arg-type]


@pytest.mark.parametrize("store_class", [RedisStore, AsyncRedisStore])
def test_a_socket_timeout_equal_to_the_wait_is_refused(store_class: type[Any]) -> None:
    """CIS-DUR-2: a waiting mode needs the client's socket timeout strictly longer than its wait
    (equal, the read gives up as the wait ends, and the wait is resent): equal is refused when
    the store is built, one millisecond longer is accepted. No connection is made."""
    durability = Durability(replicas=1, timeout_ms=1_500)
    with pytest.raises(ValueError, match=r"timeout_ms \(1500 ms\) must be shorter .* \(1500 ms\)"):
        store_class.from_url("redis://127.0.0.1:1/0", durability=durability, socket_timeout=1.5)
    store_class.from_url("redis://127.0.0.1:1/0", durability=durability, socket_timeout=1.501)  # accepted


def _has_waitaof(url: str) -> bool:
    with redis.Redis.from_url(url) as client:
        return client.execute_command(b"COMMAND", b"INFO", b"WAITAOF")[0] is not None


def _waitaof_calls(url: str) -> int:
    with redis.Redis.from_url(url) as client:
        stats = client.info("commandstats").get("cmdstat_waitaof", {})
        return int(stats.get("calls", 0)) if isinstance(stats, dict) else 0


def test_an_aof_mode_needs_waitaof_and_appendonly(clock: FakeClock) -> None:
    """CIS-DUR-2: Durability(aof=True) is refused on first use where the server lacks WAITAOF (Redis
    < 7.2: the message names the version found) or runs without appendonly; where it has both (Valkey,
    Redis >= 7.2: CI's Valkey run), the run open and each create are followed by one WAITAOF on the
    server, acknowledged by the local fsync."""
    with redis_server() as url:
        has_waitaof = _has_waitaof(url)
        store = RedisStore.from_url(url, clock=clock, durability=Durability(aof=True, timeout_ms=3000))
        with pytest.raises(UnsafeServerError) as caught:
            open_default_run(store, clock())
        if has_waitaof:
            assert "appendonly is off" in str(caught.value)
        else:
            with redis.Redis.from_url(url) as client:
                version = str(client.info("server")["redis_version"])
            assert f"is Redis {version}" in str(caught.value)
            assert "Redis >= 7.2 or Valkey" in str(caught.value)
        store.close()
    with redis_server(extra_args=["--appendonly", "yes", "--appendfsync", "always"]) as url:
        store = RedisStore.from_url(url, clock=clock, durability=Durability(aof=True, timeout_ms=3000))
        if has_waitaof:
            assert isinstance(open_default_run(store, clock()), RunState)
            assert _waitaof_calls(url) == 1
            assert isinstance(store.create(request(), LIMITS), Admission)
            assert _waitaof_calls(url) == 2
        else:
            with pytest.raises(UnsafeServerError) as caught:
                open_default_run(store, clock())
            assert "WAITAOF" in str(caught.value)
        store.close()


def test_an_asyncio_cluster_client_refuses_a_waiting_mode() -> None:
    """CIS-DUR-2: WAIT must follow the create on its connection, which redis.asyncio's cluster
    client cannot pipeline: AsyncRedisStore refuses a waiting mode on it at construction."""
    client = AsyncRedisCluster(host="127.0.0.1", port=1)
    with pytest.raises(ValueError, match="durability mode"):
        AsyncRedisStore(client, durability=Durability(replicas=1))
    assert AsyncRedisStore(client, durability=Durability()).prefix == "cis"


def test_the_async_store_waits_too(
    primary_and_replica: tuple[str, str], clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """CIS-DUR-2, CIS-DUR-10: AsyncRedisStore pipelines the same WAIT: a create reaches the replica,
    and with the replica paused it is DURABILITY_NOT_REACHED and its record ERROR with that code."""
    primary, replica = primary_and_replica

    async def scenario() -> tuple[object, object, object]:
        store = AsyncRedisStore.from_url(
            primary, prefix="adur", clock=clock, durability=Durability(replicas=1, timeout_ms=3000)
        )
        try:
            opened = await store.open_run(
                RUN, deadline_ms=clock() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=10**6
            )
            assert isinstance(opened, RunState)
            first = await store.create(request("call_1"), LIMITS)
            with _paused(_pid(replica)):
                second = await store.create(request("call_2"), LIMITS)
            return first, second, await store.get(RUN, "call_2")
        finally:
            await store.close()

    caplog.set_level(logging.WARNING, logger="invocation_store.redis")
    first, second, stored = asyncio.run(scenario())
    assert isinstance(first, Admission)
    assert second is ErrorCode.DURABILITY_NOT_REACHED
    assert _store_lines(caplog).count(NOT_DURABLE_LINE) == 1
    assert stored is not None
    assert getattr(stored, "error_code", None) is ErrorCode.DURABILITY_NOT_REACHED


def _durable_store(flavour: str, url: str, prefix: str, clock: FakeClock, mode: Durability) -> Any:
    """A RedisStore ("sync") or AsyncRedisStore ("async") on ``url`` in the durability ``mode``."""
    kind: Any = RedisStore if flavour == "sync" else AsyncRedisStore
    return kind.from_url(url, prefix=prefix, clock=clock, durability=mode)


def _run_parameters(now_ms: int) -> dict[str, int]:
    """open_run's keyword arguments for a run of a minute from ``now_ms``."""
    return {"deadline_ms": now_ms + 60_000, "ttl_ms": 60_000, "tool_call_budget": 5, "byte_budget": 10**6}


def _open_when_the_replica_answers(
    driver: StoreDriver, run_id: str, parameters: Mapping[str, int]
) -> RunState:
    """Open ``run_id`` durably, again while the replica is not yet acknowledging (a fresh one, or
    one just resumed, catches up on its own within seconds)."""
    deadline = time.monotonic() + 15
    while True:
        opened = driver.open_run(run_id, **parameters)
        if isinstance(opened, RunState):
            return opened
        assert time.monotonic() < deadline, opened
        time.sleep(0.2)


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_an_open_that_is_not_durable_in_time_leaves_no_run(
    primary_and_replica: tuple[str, str], clock: FakeClock, caplog: pytest.LogCaptureFixture, flavour: str
) -> None:
    """CIS-DUR-2, CIS-DUR-14: with the replica paused, open_run is DURABILITY_NOT_REACHED, logged once,
    and the run it stored is taken back: nothing is left, so the same open once the replica is
    back opens it afresh (and a run opened durably before is never taken back)."""
    primary, replica = primary_and_replica
    prefix = f"odur-{flavour}-{secrets.token_hex(3)}"
    mode = Durability(replicas=1, timeout_ms=500)
    store = _durable_store(flavour, primary, prefix, clock, mode)
    driver = StoreDriver(store, flavour)
    caplog.set_level(logging.WARNING, logger="invocation_store.redis")
    parameters = _run_parameters(clock())
    try:
        kept = _open_when_the_replica_answers(driver, "run-kept", parameters)
        caplog.clear()  # count the lines of the paused opens only
        with _paused(_pid(replica)):
            refused = driver.open_run(RUN, **parameters)
            again_kept = driver.open_run("run-kept", **parameters)  # already stored and durable
        assert refused is ErrorCode.DURABILITY_NOT_REACHED
        assert (
            _store_lines(caplog).count("redis store: open_run not durable in time: DURABILITY_NOT_REACHED")
            == 2
        )
        assert driver.get_run(RUN) is None  # taken back
        assert driver.get_run("run-kept") == kept  # an earlier open is never taken back
        assert again_kept in (kept, ErrorCode.DURABILITY_NOT_REACHED)
        opened = _open_when_the_replica_answers(driver, RUN, parameters)
        assert driver.get_run(RUN) == opened
    finally:
        driver.close()


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_waiting_mode_reloads_its_scripts_after_noscript(
    primary_and_replica: tuple[str, str], clock: FakeClock, flavour: str
) -> None:
    """CIS-STORE-5, CIS-DUR-2: the scripts sent with their WAIT (open, create, and a completion with a
    large raw response) are reloaded after SCRIPT FLUSH and the pair resent once: each answers as
    usual, and what the replica holds is what the primary holds."""
    primary, replica = primary_and_replica
    prefix = f"ndur-{flavour}-{secrets.token_hex(3)}"
    mode = Durability(replicas=1, timeout_ms=3000)
    store = _durable_store(flavour, primary, prefix, clock, mode)
    driver = StoreDriver(store, flavour)
    try:
        with redis.Redis.from_url(primary) as client:
            client.script_flush()
            _open_when_the_replica_answers(
                driver,
                RUN,
                {
                    "deadline_ms": clock() + 60_000,
                    "ttl_ms": 60_000,
                    "tool_call_budget": 5,
                    "byte_budget": 10**7,
                },
            )
            client.script_flush()
            created = driver.create(request("call_1"), LIMITS)
            assert isinstance(created, Admission)
            client.script_flush()
            done = ready(created.record, clock(), raw="w" * 200_000)
            assert driver.complete(created.record, done) == done
            client.execute_command("WAIT", 1, 1000)
        with redis.Redis.from_url(replica) as follower:
            assert follower.exists(run_key(prefix, RUN)) == 1
            assert follower.exists(call_key(prefix, RUN, "call_1")) == 1
        assert driver.get(RUN, "call_1") == done
    finally:
        driver.close()


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_second_noscript_after_the_reload_is_unavailable_after_one_resend(
    primary_and_replica: tuple[str, str], clock: FakeClock, flavour: str
) -> None:
    """CIS-STORE-5, CIS-DUR-4: when the scripts are gone again after the reload (flushed again), a
    script sent with its WAIT (open, create, a completion with a staged raw response) is resent
    once only: STORE_UNAVAILABLE naming NoScriptError after one server check, never a loop."""
    primary, _replica = primary_and_replica
    prefix = f"n2dur-{flavour}-{secrets.token_hex(3)}"
    store = _durable_store(flavour, primary, prefix, clock, Durability(replicas=1, timeout_ms=3000))
    driver = StoreDriver(store, flavour)
    parameters = {
        "deadline_ms": clock() + 60_000,
        "ttl_ms": 60_000,
        "tool_call_budget": 5,
        "byte_budget": 10**7,
    }
    rechecks: list[str] = []
    try:
        _open_when_the_replica_answers(driver, RUN, parameters)
        created = driver.create(request("call_1"), LIMITS)
        assert isinstance(created, Admission)
        real = store._recheck
        with redis.Redis.from_url(primary) as client:
            if flavour == "sync":

                def recheck() -> None:
                    real()
                    rechecks.append("checked")
                    client.script_flush()  # gone again before the resend

                store._recheck = recheck
            else:

                async def recheck_async() -> None:
                    await real()
                    rechecks.append("checked")
                    client.script_flush()

                store._recheck = recheck_async
            operations = [
                lambda: driver.open_run("run-2", **parameters),
                lambda: driver.create(request("call_2"), LIMITS),
                lambda: driver.complete(created.record, ready(created.record, clock(), raw="w" * 200_000)),
            ]
            for index, operation in enumerate(operations, start=1):
                client.script_flush()
                with pytest.raises(StoreUnavailableError) as caught:
                    operation()
                assert caught.value.cause == "NoScriptError"
                assert len(rechecks) == index  # one reload, one resend
        assert driver.get_run("run-2") is None
        assert driver.get(RUN, "call_2") is None
        assert driver.get(RUN, "call_1") == created.record
    finally:
        driver.close()


@pytest.mark.parametrize("decided_on", ["given-clock", "server-clock"])
@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_an_open_resent_after_a_lost_reply_takes_back_the_run_it_stored(
    primary_and_replica: tuple[str, str], clock: FakeClock, flavour: str, decided_on: str
) -> None:
    """CIS-DUR-14, CIS-RETRY-3: the first attempt stores the run but its reply is lost; the resend
    finds the run (EXISTING). With the replica paused the open is DURABILITY_NOT_REACHED, and the
    run its first attempt stored is taken back all the same, on a given clock and on the server's:
    nothing is left behind."""
    primary, replica = primary_and_replica
    prefix = f"ldur-{flavour}-{secrets.token_hex(3)}"
    mode = Durability(replicas=1, timeout_ms=300)
    if decided_on == "given-clock":
        store = _durable_store(flavour, primary, prefix, clock, mode)
    else:
        kind: Any = RedisStore if flavour == "sync" else AsyncRedisStore
        store = kind.from_url(primary, prefix=prefix, durability=mode)
        clock.now = int(time.time() * 1000)  # the deadline below is a server time then
    sends: list[None] = []
    real = store._send_waited

    if flavour == "sync":

        def lossy(*args: Any) -> Any:
            answer = real(*args)
            sends.append(None)
            if len(sends) == 1:
                raise redis.exceptions.ConnectionError("the reply was lost")
            return answer

    else:

        async def lossy(*args: Any) -> Any:  # type: ignore[misc]
            answer = await real(*args)
            sends.append(None)
            if len(sends) == 1:
                raise redis.exceptions.ConnectionError("the reply was lost")
            return answer

    store._send_waited = lossy
    driver = StoreDriver(store, flavour)
    parameters = _run_parameters(clock())
    try:
        driver.get_run(RUN)  # the server checked before the pause
        with _paused(_pid(replica)):
            refused = driver.open_run(RUN, **parameters)
        assert len(sends) == 2  # stored, reply lost; resent, found stored
        assert refused is ErrorCode.DURABILITY_NOT_REACHED
        assert driver.get_run(RUN) is None
    finally:
        driver.close()


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_replay_in_a_waiting_mode_touches_its_key_so_the_wait_is_about_it(
    primary_and_replica: tuple[str, str], clock: FakeClock, flavour: str
) -> None:
    """CIS-DUR-2, CIS-ID-5: in a waiting mode, a replayed create (the same invocation) and a re-open
    of a live run rewrite one field of their key with the value it holds, inside the script, so
    that the WAIT sent with them counts the replica's copy of that key, not an older write of the
    connection (a fresh connection has none: its WAIT would pass at once). Both answer as usual."""
    primary, _replica = primary_and_replica
    prefix = f"tdur-{flavour}-{secrets.token_hex(3)}"
    store = _durable_store(flavour, primary, prefix, clock, Durability(replicas=1, timeout_ms=3000))
    driver = StoreDriver(store, flavour)
    try:
        parameters = _run_parameters(clock())
        opened = _open_when_the_replica_answers(driver, RUN, parameters)
        call = request("call_1")
        created = driver.create(call, LIMITS)
        assert isinstance(created, Admission)
        with monitored(primary) as seen:
            again = driver.create(call, LIMITS)
            reopened = driver.open_run(RUN, **parameters)
        assert isinstance(again, Admission)
        assert again.replayed
        assert reopened == driver.get_run(RUN)  # the live run, with its usage
        assert isinstance(reopened, RunState)
        assert reopened.opened_at_ms == opened.opened_at_ms
        scripted = [name_and_key(entry) for entry in seen if entry["client_type"] == "lua"]
        assert ("HSET", record_key(prefix, RUN, "call_1")) in scripted
        assert ("HSET", run_key(prefix, RUN)) in scripted
    finally:
        driver.close()
