"""Redis as operators run it: read-only users, old servers, corrupt keys, policy drift, deadlines."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio

from invocation_store import (
    AsyncToolBoundary,
    RunContext,
    ToolBoundary,
    ToolCallEnvelope,
    ToolRegistry,
    ToolSpec,
)
from invocation_store._cli.inspect import inspect_run, render_text
from invocation_store._completion import CompletionRetry
from invocation_store.adapters import (
    AsyncRedisStore,
    CorruptRecordError,
    RedisStore,
    RetryPolicy,
    StoreUnavailableError,
    UnsafeServerError,
    UnsupportedRedisError,
    call_key,
)
from invocation_store.adapters._async import redis as async_redis
from invocation_store.adapters._sync import redis as sync_redis
from invocation_store.cli import main
from invocation_store.kernel import Admission, ErrorCode, EvidenceStatus, Projection
from invocation_store.testing import FakeClock
from invocation_store.testing.redis_server import redis_server

from . import _old_redis
from ._old_redis import OldRedis, old_redis
from ._support import LIMITS, RUN, TTL_MS, StoreDriver, admitted, open_default_run, ready, record_key, request

pytestmark = pytest.mark.redis

EVICTING = (
    "volatile-lru",
    "allkeys-lru",
    "volatile-lfu",
    "allkeys-lfu",
    "volatile-random",
    "allkeys-random",
    "volatile-ttl",
)


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """A private server for this module (ACL users, CONFIG SET): never shared with other tests."""
    with redis_server() as url:
        yield url


def _reader_url(url: str, prefix: str, *extra: str) -> str:
    """The URL of user ``reader``: ``+@read +@connection`` on ``prefix``'s keys, and ``extra`` rights."""
    with redis.Redis.from_url(url) as admin:
        admin.acl_setuser(
            "reader",
            enabled=True,
            reset=True,
            passwords=["+reader-pw"],
            keys=[f"{prefix}:*"],
            commands=["-@all", "+@read", "+@connection", *extra],
        )
    return url.replace("redis://", "redis://reader:reader-pw@")


# -- CIS-DUR-9: every read with read rights alone ------------------------------------


def _written_run(url: str, prefix: str, clock: FakeClock | None) -> RedisStore:
    """A run with a READY call_1 and a PROJECTING call_2, written by a full-rights store (left open)."""
    writer = RedisStore.from_url(url, prefix=prefix, clock=clock)
    open_default_run(writer, writer.now_ms())
    first = admitted(writer, request("call_1"))
    done = ready(first, writer.now_ms())
    assert writer.complete(first, done) == done
    admitted(writer, request("call_2"))
    return writer


@pytest.mark.parametrize(
    ("clocked", "extra"),
    [(True, ()), (False, ()), (False, ("+time",))],
    ids=["given-clock", "server-clock", "server-clock-with-time"],
)
def test_every_read_api_works_for_a_read_only_acl_user(
    server_url: str, clock: FakeClock, clocked: bool, extra: tuple[str, ...]
) -> None:
    """CIS-DUR-9, CIS-STORE-10: a user granted only ``+@read`` (and ``+@connection``) reads through every
    read API of both stores, raw responses and progress included, with no MULTI and no script (the ACL
    refuses both), and reads what a full-rights store reads. With a given clock; with the default
    server clock, whose ``TIME`` the ACL refuses too (reads send none: a key Redis returned is live;
    a decision clock is refused, never the host's); and with ``+time`` granted as well (a decision
    clock reads the server's). CI runs this on Redis 6.2, 7.x and Valkey."""
    prefix = "ro-" + ("given" if clocked else "server") + "".join(extra).replace("+", "-")
    given = clock if clocked else None
    writer = _written_run(server_url, prefix, given)
    reader = _reader_url(server_url, prefix, *extra)
    with redis.Redis.from_url(reader) as denied:
        refused = [("MULTI",), ("EVAL", "return 1", "0"), ("INFO", "server")]
        for command in refused if extra else [*refused, ("TIME",)]:
            with pytest.raises(redis.exceptions.NoPermissionError):
                denied.execute_command(*command)
    store = RedisStore.from_url(reader, prefix=prefix, clock=given)
    record = store.get(RUN, "call_1")
    assert record is not None
    assert record == writer.get(RUN, "call_1")
    assert record.raw_response == '{"temp": 21}'
    assert store.get(RUN, "call_2") == writer.get(RUN, "call_2")
    assert store.get(RUN, "call_2") is not None
    with_raw = store.get_many(RUN, ["call_1", "call_2", "nope"])
    assert with_raw["call_1"] == record
    assert with_raw["nope"] is None
    without = store.get_many(RUN, ["call_1", "nope"], include_raw=False)
    assert without["call_1"] is not None
    assert without["call_1"].raw_response is None
    assert without["call_1"].status is record.status
    assert without["nope"] is None
    assert store.calls(RUN) == ("call_1", "call_2")
    assert store.completed(RUN) == ("call_1",)
    ttl = store.ttl_remaining_ms(RUN, "call_1")
    assert ttl is not None
    assert 0 < ttl <= TTL_MS
    assert store.raw_sizes(RUN, ["call_1", "call_2"]) == {"call_1": len('{"temp": 21}'), "call_2": None}
    progress = store.get_progress(RUN, ["call_1", "call_2"])
    assert progress["call_1"] is not None
    assert progress["call_1"].evidence_status is EvidenceStatus.EVIDENCE_FOUND
    assert progress == writer.get_progress(RUN, ["call_1", "call_2"])
    run = store.get_run(RUN)
    assert run is not None
    assert run.tool_calls_used == 2
    assert run == writer.get_run(RUN)
    # Reads send no TIME (a key Redis returned is live): no server reading yet. A decision that
    # compares times takes one first, which only a user granted TIME can.
    assert store.clock_error_ms() == (0 if clocked else None)  # a given clock is exact
    if clocked:
        assert store.synced_now_ms() == clock.now
    elif extra:
        store.synced_now_ms()
        assert store.clock_error_ms() is not None
    else:
        with pytest.raises(StoreUnavailableError):
            store.synced_now_ms()
    store.close()
    writer.close()

    async def async_reads() -> tuple[Any, ...]:
        async_store = AsyncRedisStore.from_url(reader, prefix=prefix, clock=given)
        try:
            return (
                await async_store.get(RUN, "call_1"),
                await async_store.get_many(RUN, ["call_1", "nope"]),
                await async_store.get_many(RUN, ["call_1", "call_2", "nope"], include_raw=False),
                await async_store.calls(RUN),
                await async_store.completed(RUN),
                await async_store.ttl_remaining_ms(RUN, "call_1"),
                await async_store.raw_sizes(RUN, ["call_1"]),
                await async_store.get_progress(RUN, ["call_1"]),
                await async_store.get_run(RUN),
            )
        finally:
            await async_store.close()

    got, many, hashes, calls, completed, left, sizes, views, state = asyncio.run(async_reads())
    assert got == record
    assert many == {"call_1": record, "nope": None}
    assert hashes == {"call_1": without["call_1"], "call_2": with_raw["call_2"], "nope": None}
    assert calls == ("call_1", "call_2")
    assert completed == ("call_1",)
    assert left is not None
    assert 0 < left <= TTL_MS
    assert sizes == {"call_1": len('{"temp": 21}')}
    assert views["call_1"] == progress["call_1"]
    assert state == run


# -- CIS-DUR-8: old servers on every path ----------------------------------------------


@pytest.fixture(scope="module")
def old_server() -> Iterator[OldRedis]:
    """Redis 5.x: the real binary named by INVOCATION_STORE_OLD_REDIS_SERVER, else the fake (_old_redis)."""
    with old_redis() as server:
        yield server


def _every_operation(store: Any) -> list[tuple[str, Callable[[], Any]]]:
    """(name, call) of every write and read of ``store`` (for an asyncio store, call returns a coroutine)."""
    return [
        (
            "open_run",
            lambda: store.open_run(
                RUN, deadline_ms=10**12, ttl_ms=60_000, tool_call_budget=5, byte_budget=99
            ),
        ),
        ("create", lambda: store.create(request(), LIMITS)),
        ("get", lambda: store.get(RUN, "call_1")),
        ("get_many", lambda: store.get_many(RUN, ["call_1", "call_2"])),
        ("get_many without raw", lambda: store.get_many(RUN, ["call_1"], include_raw=False)),
        ("get_run", lambda: store.get_run(RUN)),
        ("calls", lambda: store.calls(RUN)),
        ("completed", lambda: store.completed(RUN)),
        ("ttl_remaining_ms", lambda: store.ttl_remaining_ms(RUN, "call_1")),
        ("raw_sizes", lambda: store.raw_sizes(RUN, ["call_1"])),
        ("get_progress", lambda: store.get_progress(RUN, ["call_1"])),
    ]


PROTOCOLS = [None, 2, 3]


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=["default-protocol", "resp2", "resp3"])
def test_an_old_server_gets_the_version_error_on_every_construction_path(
    old_server: OldRedis, protocol: int | None, clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """CIS-DUR-8, CIS-STORE-7: a Redis 5 server (a real 5.x binary when given, else a fake that answers
    as 5.0.6 does: HELLO unknown, reads of an empty keyspace served) is refused with "requires Redis >=
    6.2, found 5.0.6" whichever way the store was built (from_url, a given client, the asyncio twins)
    and whatever protocol the client asks for (redis-py's default, which redis-py 8.2 downgrades to
    RESP2 on its own, RESP2, RESP3), on every write and every read, and by every CLI command that
    takes a Redis URL (inspect, replay, fuzz), never as "(unknown)" or a bare ResponseError."""
    expected = f"requires Redis >= 6.2, found {old_server.version}"
    query = "" if protocol is None else f"?protocol={protocol}"
    url = old_server.url + query
    given = {} if protocol is None else {"protocol": protocol}
    refused: list[str] = []
    for label, store in (
        ("from_url", RedisStore.from_url(url, clock=clock)),
        (
            "given client",
            RedisStore(redis.Redis(host=old_server.host, port=old_server.port, **given), clock=clock),
        ),
    ):
        for name, operation in _every_operation(store):
            with pytest.raises(UnsupportedRedisError) as caught:
                operation()
            assert expected in str(caught.value), (label, name)
            assert caught.value.__context__ is None
            assert caught.value.permanent
            refused.append(f"{label} {name}")
        store.close()

    async def async_side() -> list[str]:
        messages = []
        client = redis.asyncio.Redis(host=old_server.host, port=old_server.port, **given)
        for store in (AsyncRedisStore.from_url(url, clock=clock), AsyncRedisStore(client, clock=clock)):
            for name, operation in _every_operation(store):
                with pytest.raises(UnsupportedRedisError) as caught:
                    await operation()
                assert caught.value.__context__ is None
                messages.append(f"{name}: {caught.value}")
            await store.close()
        await client.aclose()
        return messages

    messages = asyncio.run(async_side())
    assert len(refused) == 2 * 11
    assert len(messages) == 2 * 11
    assert all(expected in message for message in messages), messages
    assert main(["inspect", "--redis-url", url, "--run", RUN]) == 1
    err = capsys.readouterr().err
    assert expected in err
    transcript = str(
        Path(__file__).resolve().parents[2] / "examples" / "transcripts" / "openai_responses.json"
    )
    assert main(["replay", transcript, "--redis-url", url]) == 1
    err = capsys.readouterr().err
    assert expected in err
    assert "(unknown)" not in err
    assert main(["fuzz", "--store", "redis", "--redis-url", url, "--examples", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert expected in err


# -- CIS-DUR-7: a corrupt key is isolated --------------------------------------------------


def _persisting_tool(url: str, prefix: str) -> ToolSpec:
    """A tool whose executor removes its own record's TTL from outside (as ``PERSIST`` by an operator)."""

    def execute(args: dict[str, Any]) -> object:
        with redis.Redis.from_url(url) as client:
            assert client.persist(record_key(prefix, RUN, str(args["id"])))
        return {"ok": True}

    def project(raw: object, args: dict[str, Any]) -> Projection:
        return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="ok", scope="s")

    return ToolSpec(name="persist", executor=execute, projector=project)


class _CompleteSends:
    """Wraps a Redis store's script sender (``_send``): counts its COMPLETE_SCRIPT sends per tool_call_id."""

    def __init__(self, store: Any, prefix: str, ids: tuple[str, ...] = ("call_1", "call_2")) -> None:
        self.inner = store._send
        self.sha = store._complete.sha
        self.keys = {call_key(prefix, RUN, tool_call_id): tool_call_id for tool_call_id in ids}
        self.sends: Counter[str] = Counter()

    def _note(self, args: tuple[Any, ...]) -> None:
        if len(args) > 1 and args[0] == "EVALSHA" and args[1] == self.sha:
            for arg in args[2:]:
                text = arg.decode("ascii", "replace") if isinstance(arg, bytes) else str(arg)
                if text in self.keys:
                    self.sends[self.keys[text]] += 1

    def __call__(self, *args: Any) -> Any:
        self._note(args)
        return self.inner(*args)

    async def async_call(self, *args: Any) -> Any:
        self._note(args)
        return await self.inner(*args)


def test_a_corrupt_record_is_answered_at_once_and_swept_around(
    server_url: str, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """CIS-DUR-7, CIS-DUR-12: a record whose TTL was removed from outside is a permanent fault: its
    completion is sent once, never again (answered STORE_UNAVAILABLE, the boundary's completion retry
    gives up at once) and held; sweep_stale names it (id and cause, no payload), sends nothing for it
    and carries on with the rest of the run; the batched read and the inspect listing do the same."""
    prefix = "corrupt"
    store = RedisStore.from_url(server_url, prefix=prefix, clock=clock)
    sends = _CompleteSends(store, prefix)
    store._send = sends
    boundary = ToolBoundary(store, ToolRegistry([_persisting_tool(server_url, prefix)]))
    context = boundary.open_run(
        RUN, deadline_ms=clock() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=10**6
    )
    assert isinstance(context, RunContext)
    result = boundary.invoke(
        context,
        ToolCallEnvelope(
            run_id=RUN, tool_call_id="call_1", tool_name="persist", arguments='{"id": "call_1"}'
        ),
    )
    assert result.code is ErrorCode.STORE_UNAVAILABLE
    assert sends.sends == {"call_1": 1}  # not retried: the same key answers the same way
    assert boundary.pending_completions() == ((RUN, "call_1"),)
    admitted(store, request("call_2"))
    clock.advance(10)
    caplog.set_level(logging.WARNING)
    assert boundary.sweep_stale(context, 0) == 1
    assert sends.sends == {"call_1": 1, "call_2": 1}  # the sweep wrote call_2 once, call_1 never
    assert "left corrupt record call_1 as it is (NoTTL)" in caplog.text
    assert '"id"' not in caplog.text
    swept = store.get(RUN, "call_2")
    assert swept is not None
    assert swept.error_code is ErrorCode.STALE_PROJECTION
    caplog.clear()
    with pytest.raises(CorruptRecordError) as caught:
        store.get_many(RUN, ["call_1", "call_2"])
    assert caught.value.corrupt == {"call_1": "NoTTL"}
    assert caught.value.readable["call_2"] == swept
    assert caplog.messages == [  # the read that found it, by operation, id, run and cause
        f"redis store: get_many found record call_1 of run {RUN} corrupt (NoTTL): left as is, not retried"
    ]
    assert caught.value.permanent
    listing = inspect_run(store, RUN, raw_sizes=True)  # the CLI's listing, on the store's (fake) clock
    assert listing["corrupt"] == [{"tool_call_id": "call_1", "code": "NoTTL"}]
    assert [row["tool_call_id"] for row in listing["records"]] == ["call_2"]
    assert "corrupt record call_1 (NoTTL)" in render_text(listing, raw_sizes=True)
    store.close()


def test_the_async_store_and_boundary_isolate_a_corrupt_record_and_inspect_lists_it(
    server_url: str, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """CIS-DUR-7, CIS-DUR-12, CIS-DUR-10: the asyncio store and AsyncToolBoundary on a real server, on
    the server's clock: the completion of a record whose TTL was removed is sent once and held,
    sweep_stale reports it and sweeps the rest, single-record reads raise CorruptRecordError at once;
    then ``invocation-store inspect`` (through ``main``) exits 0, names the corrupt record by id and
    code, lists the rest of the run, and prints no payload, in text and in JSON."""
    prefix = "corrupt-async"
    caplog.set_level(logging.WARNING)

    async def scenario() -> None:
        store = AsyncRedisStore.from_url(server_url, prefix=prefix)
        sends = _CompleteSends(store, prefix)
        store._send = sends.async_call
        boundary = AsyncToolBoundary(store, ToolRegistry([_persisting_tool(server_url, prefix)]))
        try:
            await store.check_server()  # a server reading: now_ms is the server's clock
            context = await boundary.open_run(
                RUN, deadline_ms=store.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=10**6
            )
            assert isinstance(context, RunContext)
            envelope = ToolCallEnvelope(
                run_id=RUN, tool_call_id="call_1", tool_name="persist", arguments='{"id": "call_1"}'
            )
            result = await boundary.invoke(context, envelope)
            assert result.code is ErrorCode.STORE_UNAVAILABLE
            assert sends.sends == {"call_1": 1}
            assert boundary.pending_completions() == ((RUN, "call_1"),)
            assert isinstance(await store.create(request("call_2"), LIMITS), Admission)
            await asyncio.sleep(0.01)
            assert await boundary.sweep_stale(context, 0) == 1
            assert sends.sends == {"call_1": 1, "call_2": 1}
            assert "left corrupt record call_1 as it is (NoTTL)" in caplog.text
            caplog.clear()
            with pytest.raises(CorruptRecordError) as caught:
                await store.get_many(RUN, ["call_1", "call_2"], include_raw=False)
            assert caught.value.corrupt == {"call_1": "NoTTL"}
            assert caplog.messages == [
                f"redis store: get_many found record call_1 of run {RUN} corrupt (NoTTL): "
                "left as is, not retried"
            ]
            swept = caught.value.readable["call_2"]
            assert swept is not None
            assert swept.error_code is ErrorCode.STALE_PROJECTION
            for read in (store.get(RUN, "call_1"), store.ttl_remaining_ms(RUN, "call_1")):
                with pytest.raises(CorruptRecordError) as single:
                    await read
                assert single.value.corrupt == {"call_1": "NoTTL"}
        finally:
            await store.close()

    asyncio.run(scenario())
    assert "redis store: get found record call_1" in caplog.text
    assert "redis store: ttl_remaining_ms found record call_1" in caplog.text
    args = ["inspect", "--redis-url", server_url, "--run", RUN, "--prefix", prefix]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "corrupt record call_1 (NoTTL)" in text
    assert "call_2" in text
    assert "STALE_PROJECTION" in text
    assert '"id"' not in text
    assert main([*args, "--json", "--raw-sizes"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["corrupt"] == [{"tool_call_id": "call_1", "code": "NoTTL"}]
    assert [(row["tool_call_id"], row["error_code"]) for row in listing["records"]] == [
        ("call_2", "STALE_PROJECTION")
    ]
    assert listing["run"]["tool_calls_used"] == 2
    assert '"id": "call_1"' not in json.dumps(listing)


def _flavoured(flavour: str, url: str, prefix: str, clock: FakeClock) -> tuple[Any, StoreDriver]:
    """A RedisStore ("sync") or AsyncRedisStore ("async") on ``url``, and its driver."""
    kind: Any = RedisStore if flavour == "sync" else AsyncRedisStore
    store = kind.from_url(url, prefix=prefix, clock=clock)
    return store, StoreDriver(store, flavour)


@pytest.mark.parametrize("flavour", ["sync", "async"])
@pytest.mark.parametrize("include_raw", [True, False], ids=["with-raw", "lean"])
def test_a_key_of_a_foreign_type_is_a_corrupt_record(
    server_url: str, clock: FakeClock, flavour: str, include_raw: bool
) -> None:
    """CIS-DUR-12: a record key holding another type (WRONGTYPE) is reported by id as WrongType; the
    other records of the batch still read (the error reply is one record's, not the batch's), on
    both flavours, with and without raw responses; a single read of it is CorruptRecordError."""
    prefix = f"wrongtype-{flavour}-{include_raw}"
    _store, driver = _flavoured(flavour, server_url, prefix, clock)
    try:
        open_default_run(driver, clock())
        good = admitted(driver, request("call_1"))
        with redis.Redis.from_url(server_url) as client:
            client.set(record_key(prefix, RUN, "call_2"), "not a hash", px=60_000)
        with pytest.raises(CorruptRecordError) as caught:
            driver.get_many(RUN, ["call_1", "call_2"], include_raw=include_raw)
        assert caught.value.corrupt == {"call_2": "WrongType"}
        assert caught.value.readable["call_1"] == good
        with pytest.raises(CorruptRecordError):
            driver.get(RUN, "call_2")
    finally:
        driver.close()


def test_the_async_held_connection_is_taken_afresh_in_another_process(
    server_url: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CIS-STORE-9: the asyncio store's held connection belongs to the process that took it; seen
    from another process id (a forked child), a fresh pool connection is taken, and the parent's is
    never given back from there."""
    store = AsyncRedisStore.from_url(server_url, prefix="held-pid", clock=clock)
    held = store._held
    assert held is not None
    pid = os.getpid()

    async def scenario() -> tuple[object, object, object]:
        with held.lock:
            first = await held.connection()
            again = await held.connection()
            monkeypatch.setattr(async_redis.os, "getpid", lambda: pid + 1)
            child = await held.connection()
        await held.release()
        await store.close()
        return first, again, child

    first, again, child = asyncio.run(scenario())
    assert again is first  # one process: the same connection every time
    assert child is not first


# -- CIS-DUR-3: policy drift -------------------------------------------------------------


@pytest.mark.parametrize("policy", EVICTING)
def test_an_evicting_policy_set_on_a_running_server_stops_new_creates(
    policy: str, clock: FakeClock, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CIS-DUR-3: ``CONFIG SET maxmemory-policy`` to an evicting policy after the store started is caught
    at the next run open and, within POLICY_CHECK_INTERVAL_MS, at the next create: refused naming the
    policy and the setting, in the exception the application sees and in the boundary's log, never in
    what the agent gets; no re-sent id runs its executor again."""
    with redis_server(extra_args=["--maxmemory", "64mb"]) as url:
        store = RedisStore.from_url(url, clock=clock)
        runs = 0

        def execute(args: dict[str, Any]) -> object:
            nonlocal runs
            runs += 1
            return {"n": runs}

        def project(raw: object, args: dict[str, Any]) -> Projection:
            return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="x", scope="s")

        boundary = ToolBoundary(
            store, ToolRegistry([ToolSpec(name="t", executor=execute, projector=project)])
        )
        context = boundary.open_run(
            RUN, deadline_ms=clock() + 60_000, ttl_ms=60_000, tool_call_budget=9, byte_budget=10**6
        )
        assert isinstance(context, RunContext)
        first = ToolCallEnvelope(run_id=RUN, tool_call_id="call_1", tool_name="t", arguments="{}")
        assert boundary.invoke(context, first).ok
        with redis.Redis.from_url(url) as admin:
            admin.config_set("maxmemory-policy", policy)
        monkeypatch.setattr(sync_redis, "POLICY_CHECK_INTERVAL_MS", 0)  # the schedule's window, elapsed
        caplog.set_level(logging.ERROR)
        second = ToolCallEnvelope(run_id=RUN, tool_call_id="call_2", tool_name="t", arguments="{}")
        refused = boundary.invoke(context, second)
        assert refused.code is ErrorCode.STORE_UNAVAILABLE
        agent_text = json.dumps(refused.as_dict())
        assert policy not in agent_text
        assert "maxmemory" not in agent_text
        assert f"maxmemory-policy {policy} (changed on the running server)" in caplog.text
        assert "noeviction" in caplog.text
        assert "UnprintableType" not in caplog.text
        assert boundary.invoke(context, first).code is ErrorCode.STORE_UNAVAILABLE  # re-sent id
        assert runs == 1
        with pytest.raises(UnsafeServerError) as caught:
            open_default_run(store, clock(), run_id="run-2")
        assert f"maxmemory-policy {policy}" in str(caught.value)
        store.close()


def test_the_policy_is_not_read_again_within_its_window(clock: FakeClock) -> None:
    """CIS-DUR-3: between run opens, creates read the policy at most once per POLICY_CHECK_INTERVAL_MS:
    one INFO for the first check, one per run open, none for creates inside the window."""
    with redis_server() as url:
        store = RedisStore.from_url(url, clock=clock)
        open_default_run(store, clock())
        with redis.Redis.from_url(url) as admin:
            admin.config_resetstat()
            for index in range(5):
                assert isinstance(store.create(request(f"c{index}"), LIMITS), Admission)
            assert "cmdstat_info" not in admin.info("commandstats")
            open_default_run(store, clock(), run_id="run-2")
            # Our own first INFO above, and the run open's policy reading:
            assert admin.info("commandstats")["cmdstat_info"]["calls"] == 2
        store.close()


# -- CIS-DUR-4, CIS-DUR-5: one deadline per operation --------------------------------------


def _stopped(pid: int) -> Any:
    class Stopped:
        def __enter__(self) -> None:
            os.kill(pid, signal.SIGSTOP)

        def __exit__(self, *exc: object) -> None:
            os.kill(pid, signal.SIGCONT)

    return Stopped()


def test_a_stalled_server_keeps_the_completion_budget_nested_retries_included(clock: FakeClock) -> None:
    """CIS-DUR-4, CIS-DUR-5, CIS-DUR-13: with the server stalled (SIGSTOP), a completion answers
    STORE_UNAVAILABLE after at most CompletionRetry.budget_ms plus one round trip (the socket
    timeout), although every boundary retry is a store call with its own RetryPolicy budget: the
    store's loop honours the boundary's deadline."""
    with redis_server() as url:
        with redis.Redis.from_url(url) as admin:
            pid = int(admin.info("server")["process_id"])
        store = RedisStore.from_url(
            url, clock=clock, socket_timeout=0.3, retry_policy=RetryPolicy(budget_ms=1_000)
        )
        stalled = _stopped(pid)

        def execute(args: dict[str, Any]) -> object:
            stalled.__enter__()
            return {"ok": 1}

        def project(raw: object, args: dict[str, Any]) -> Projection:
            return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="x", scope="s")

        boundary = ToolBoundary(
            store,
            ToolRegistry([ToolSpec(name="t", executor=execute, projector=project)]),
            completion_retry=CompletionRetry(budget_ms=1_000),
        )
        context = boundary.open_run(
            RUN, deadline_ms=clock() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=10**6
        )
        assert isinstance(context, RunContext)
        envelope = ToolCallEnvelope(run_id=RUN, tool_call_id="call_1", tool_name="t", arguments="{}")
        try:
            started = time.monotonic()
            result = boundary.invoke(context, envelope)
            waited = time.monotonic() - started
        finally:
            stalled.__exit__()
        assert result.code is ErrorCode.STORE_UNAVAILABLE
        assert waited <= 1.0 + 0.3 + 0.5, waited  # budget + one round trip + scheduling slack
        assert boundary.pending_completions() == ((RUN, "call_1"),)
        store.close()


def test_a_down_server_is_answered_within_the_retry_budget(clock: FakeClock) -> None:
    """CIS-DUR-4, CIS-DUR-13: a server that refuses connections is STORE_UNAVAILABLE within
    RetryPolicy.budget_ms (plus one connection attempt), on both flavours, for a write and for a read."""
    with redis_server() as url:
        pass  # the port is free again: connections are refused
    policy = RetryPolicy(budget_ms=500)
    store = RedisStore.from_url(url, clock=clock, retry_policy=policy)
    for operation in (lambda: store.create(request(), LIMITS), lambda: store.get(RUN, "call_1")):
        started = time.monotonic()
        with pytest.raises(Exception) as caught:
            operation()
        assert caught.value.code is ErrorCode.STORE_UNAVAILABLE  # type: ignore[attr-defined]
        assert 0.2 <= time.monotonic() - started <= 0.5 + 0.5
    store.close()

    async def async_side() -> float:
        async_store = AsyncRedisStore.from_url(url, clock=clock, retry_policy=policy)
        started = time.monotonic()
        with pytest.raises(Exception) as caught:
            await async_store.get_run(RUN)
        waited = time.monotonic() - started
        await async_store.close()
        assert caught.value.code is ErrorCode.STORE_UNAVAILABLE  # type: ignore[attr-defined]
        return waited

    assert asyncio.run(async_side()) <= 0.5 + 0.5


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_an_old_server_with_a_renamed_command_still_gets_the_version_error(
    monkeypatch: pytest.MonkeyPatch, flavour: str
) -> None:
    """CIS-DUR-8, CIS-DUR-6: a Redis 5 whose operator renamed a command the scripts use (its COMMAND
    INFO entry is nil, which redis-py's RESP2 fallback cannot even parse) is refused for its version,
    not as an unreachable store: whatever the server check fails on, an old server is named as such."""
    monkeypatch.delitem(_old_redis._COMMAND_INFO, b"pexpireat")
    server = _old_redis.FakeRedis5()
    url = f"redis://127.0.0.1:{server.port}/0"
    expected = f"requires Redis >= 6.2, found {_old_redis.FAKE_VERSION}"
    try:
        if flavour == "sync":
            store = RedisStore.from_url(url)
            with pytest.raises(UnsupportedRedisError) as caught:
                store.check_server()
            store.close()
        else:

            async def check() -> None:
                async_store = AsyncRedisStore.from_url(url)
                try:
                    await async_store.check_server()
                finally:
                    await async_store.close()

            with pytest.raises(UnsupportedRedisError) as caught:
                asyncio.run(check())
        assert expected in str(caught.value)
    finally:
        server.close()


@pytest.mark.parametrize("flavour", ["sync", "async"])
@pytest.mark.parametrize("replies", [[b"1", 5], [1, b"5"], [None, 5], [1, None], [True, "5"]])
def test_raw_sizes_refuse_a_reply_that_is_not_two_integers(
    server_url: str, clock: FakeClock, flavour: str, replies: list[object]
) -> None:
    """CIS-DUR-9, CIS-STORE-8: ``raw_sizes`` reads an EXISTS and a STRLEN integer per record; a
    reply with either of them of another type (a proxy's, a module's) is never taken for a size:
    STORE_UNAVAILABLE with the cause ``UnexpectedReply``, sync and async."""
    prefix = f"raw-shape-{flavour}"

    async def sent(_round_trip: object) -> list[object]:
        return list(replies)

    if flavour == "sync":
        store: Any = RedisStore.from_url(server_url, prefix=prefix, clock=clock)
        open_default_run(store, clock())  # the schema version is written and checked
        store._io = lambda _round_trip: list(replies)
        with pytest.raises(StoreUnavailableError) as caught:
            store.raw_sizes(RUN, ["call_1"])
        store.close()
    else:

        async def scenario() -> None:
            store = AsyncRedisStore.from_url(server_url, prefix=prefix, clock=clock)
            await store.open_run(
                RUN, deadline_ms=clock() + 60_000, ttl_ms=TTL_MS, tool_call_budget=1, byte_budget=9
            )
            store._io = sent  # type: ignore[method-assign]
            try:
                await store.raw_sizes(RUN, ["call_1"])
            finally:
                await store.close()

        with pytest.raises(StoreUnavailableError) as caught:
            asyncio.run(scenario())
    assert caught.value.cause == "UnexpectedReply"


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_reply_of_the_wrong_shape_is_unavailable_not_a_corrupt_record(
    server_url: str, clock: FakeClock, flavour: str
) -> None:
    """CIS-DUR-7, CIS-STORE-8: only a stored record found damaged (its cause one of the record
    causes) is a CorruptRecordError naming it; a reply of the wrong shape to a one-record operation
    (a proxy's, a module's) says nothing about the record: STORE_UNAVAILABLE (UnexpectedReply)."""
    prefix = f"shape-{flavour}"
    store, driver = _flavoured(flavour, server_url, prefix, clock)
    try:
        open_default_run(driver, clock())
        record = admitted(driver, request("call_1"))
        if flavour == "sync":
            store._io = lambda _send: [42, 42]  # a pipeline's two replies, or a script's, all wrong
        else:

            async def garbage(_send: object) -> object:
                return [42, 42]

            store._io = garbage
        for operation in (
            lambda: driver.ttl_remaining_ms(RUN, "call_1"),
            lambda: driver.create(request("call_2"), LIMITS),
            lambda: driver.complete(record, ready(record, clock())),
        ):
            with pytest.raises(StoreUnavailableError) as caught:
                operation()
            assert not isinstance(caught.value, CorruptRecordError)
            assert caught.value.cause == "UnexpectedReply"
    finally:
        driver.close()


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_completion_told_to_resend_twice_is_an_unexpected_reply(
    server_url: str, clock: FakeClock, flavour: str
) -> None:
    """CIS-STORE-5, CIS-STORE-8: COMPLETE_SCRIPT answers RESEND when the kept raw response is not the
    expected one; the completion is sent once more with the raw response in full, and a second
    RESEND is not a loop: STORE_UNAVAILABLE (UnexpectedReply) after exactly two sends."""
    prefix = f"resend-{flavour}"
    store, driver = _flavoured(flavour, server_url, prefix, clock)
    sends: list[object] = []
    try:
        open_default_run(driver, clock())
        record = admitted(driver, request("call_1"))
        if flavour == "sync":

            def resend(call: object) -> object:
                sends.append(call)
                return b"RESEND"

            store._send_complete = resend
        else:

            async def resend_async(call: object) -> object:
                sends.append(call)
                return b"RESEND"

            store._send_complete = resend_async
        with pytest.raises(StoreUnavailableError) as caught:
            driver.complete(record, ready(record, clock()))
        assert caught.value.cause == "UnexpectedReply"
        assert len(sends) == 2  # the completion, then its resend (the raw response in full)
    finally:
        driver.close()


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_fresh_store_whose_first_call_is_a_completion_judges_the_server_first(
    clock: FakeClock, flavour: str
) -> None:
    """CIS-DUR-3, CIS-STORE-5: a store whose first operation is a completion (a worker process that
    only completes what another admitted) checks the server before it: on a server set to evict
    since, it is refused (UnsafeServerError) and writes nothing, even though the scripts another
    store loaded are there to run."""
    with redis_server() as url:
        writer = RedisStore.from_url(url, prefix="first", clock=clock)
        open_default_run(writer, clock())
        record = admitted(writer, request("call_1"))
        with redis.Redis.from_url(url) as admin:
            admin.config_set("maxmemory-policy", "allkeys-lru")
        _store, driver = _flavoured(flavour, url, "first", clock)
        try:
            with pytest.raises(UnsafeServerError):
                driver.complete(record, ready(record, clock()))
            assert writer.get(RUN, "call_1") == record
        finally:
            driver.close()
            writer.close()
