"""What only the Redis store can show: its layout, commands, TTLs, scripts, processes and failures."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import secrets
import socket
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from attrs import evolve
from redis.backoff import NoBackoff
from redis.crc import key_slot
from redis.retry import Retry

from invocation_store.adapters import (
    AsyncRedisStore,
    RedisStore,
    RetryPolicy,
    StoreUnavailableError,
    UnsupportedRedisError,
    done_key,
    run_key,
)
from invocation_store.adapters import _redis_core as core
from invocation_store.kernel import (
    Admission,
    ErrorCode,
    EvidenceStatus,
)
from invocation_store.testing import FakeClock
from invocation_store.testing.redis_server import redis_server

from ._support import (
    DEADLINE_IN_MS,
    EXPIRE_FAMILY,
    LIMITS,
    RUN,
    TTL_MS,
    StoreDriver,
    admitted,
    monitored,
    name_and_key,
    open_default_run,
    ready,
    record_key,
    request,
    with_raw,
)

MakeRedisStore = Callable[[FakeClock], RedisStore]
READ_COMMANDS = frozenset({"HGETALL", "HMGET", "GET", "LRANGE", "PTTL", "MULTI", "EXEC"})


def _prefix() -> str:
    return f"cis-test-{secrets.token_hex(6)}"


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    """A raw client on the session's Redis, to look at what the store wrote."""
    with redis.Redis.from_url(redis_url) as raw:
        yield raw


@pytest.fixture
def private_store(private_redis_url: str, clock: FakeClock) -> Iterator[RedisStore]:
    """A store on a server this session started (MONITOR, SCRIPT FLUSH, CONFIG RESETSTAT are safe)."""
    store = RedisStore.from_url(private_redis_url, prefix=_prefix(), clock=clock)
    yield store
    store.close()


# -- layout ----------------------------------------------------------------------------


def test_a_record_is_one_hash_under_the_run_hash_tag(
    redis_store_factory: MakeRedisStore, clock: FakeClock, client: redis.Redis
) -> None:
    """CIS-KEY-1, CIS-KEY-2, CIS-REC-1: one HASH per record, None fields absent, all run keys in one slot."""
    store = redis_store_factory(clock)
    prefix = store.prefix
    open_default_run(store, clock())
    record = admitted(store, request("functions.get_weather:0"))
    key = record_key(prefix, RUN, "functions.get_weather:0")
    assert key == f"{prefix}:{{{RUN}}}:call:functions.get_weather:0"
    stored = client.hgetall(key)
    assert stored == {
        b"run_id": RUN.encode(),
        b"tool_call_id": b"functions.get_weather:0",
        b"tool_name": b"search",
        b"invocation_token": record.invocation_token.encode(),
        b"sequence": b"1",
        b"status": b"PROJECTING",
        b"request_json": record.request_json.encode(),
        b"created_at_ms": str(clock()).encode(),
        b"updated_at_ms": str(clock()).encode(),
        b"expires_at_ms": str(clock() + TTL_MS).encode(),
    }
    done = ready(record, clock() + 5)
    store.complete(record, done)
    raw = core.raw_key(prefix, RUN, "functions.get_weather:0")
    assert raw == f"{prefix}:{{{RUN}}}:raw:functions.get_weather:0"
    keys = [run_key(prefix, RUN), done_key(prefix, RUN), core.calls_key(prefix, RUN), key, raw]
    assert [client.type(name) for name in keys] == [b"hash", b"list", b"list", b"hash", b"string"]
    assert len({key_slot(name.encode()) for name in keys}) == 1
    assert sorted(name.decode() for name in client.scan_iter(match=f"{prefix}:*")) == sorted(keys)
    assert client.get(raw) == (done.raw_response or "").encode()
    assert b"raw_response" not in client.hgetall(key)
    # The record's PTTL is read first: a later read of the raw key sees at least as
    # much time gone, so the comparison holds even when the clock ticks in between.
    record_left, raw_left = client.pipeline(transaction=True).pttl(key).pttl(raw).execute()
    assert 0 < raw_left <= record_left  # the raw response never outlives its record


def _expiries(client: redis.Redis, record: str, raw: str) -> tuple[int, int, bool]:
    """(record, raw, absolute): the two keys' expiries, ordered as their lapse times are.

    On Redis 7.0+ the absolute expiries in ms (PEXPIRETIME, read in one MULTI; absolute
    True). On 6.2 the PTTLs, read in one MULTI as record, raw, record (absolute False):
    Redis 6.2 reads the clock afresh at each command, so the raw's PTTL is compared with
    the record's *first* reading, which is at least the record's PTTL at the instant the
    raw's was read. ``raw <= record`` then holds whenever the raw lapses no later, and
    fails whenever it lapses later and the clock did not tick between the readings.
    """
    if int(client.info("server")["redis_version"].split(".")[0]) >= 7:
        record_at, raw_at = client.pipeline(transaction=True).pexpiretime(record).pexpiretime(raw).execute()
        return int(record_at), int(raw_at), True
    record_left, raw_left, _ = client.pipeline(transaction=True).pttl(record).pttl(raw).pttl(record).execute()
    return int(record_left), int(raw_left), False


@pytest.mark.parametrize("given_clock", [True, False], ids=["given clock", "server clock"])
@pytest.mark.parametrize("raw_size", [10, core.STAGE_ABOVE_BYTES + 1], ids=["argument", "staged"])
def test_a_raw_response_never_outlives_its_record(
    private_redis_url: str, clock: FakeClock, given_clock: bool, raw_size: int
) -> None:
    """CIS-TTL-3: a raw response lapses with its record, never after it, completion after completion.

    Redis 6.2 and 7.0 read the clock afresh at each command of a script: a raw written
    with ``PX <the record's PTTL>`` outlived its record by a millisecond whenever the
    clock ticked between the two commands. On the server's clock both lapse at the
    same instant (the record's ``expires_at_ms``).
    """
    prefix = _prefix()
    store = RedisStore.from_url(private_redis_url, prefix=prefix, clock=clock if given_clock else None)
    try:
        now = clock() if given_clock else store.now_ms()
        open_default_run(store, now, tool_call_budget=100, byte_budget=10**9)
        with redis.Redis.from_url(private_redis_url) as client:
            for index in range(60):
                record = admitted(store, request(f"call_{index}"))
                done = ready(record, record.created_at_ms, raw="r" * raw_size)
                assert store.complete(record, done) == done
                key = record_key(prefix, RUN, f"call_{index}")
                record_at, raw_at, absolute = _expiries(
                    client, key, core.raw_key(prefix, RUN, f"call_{index}")
                )
                assert 0 < raw_at <= record_at
                if not given_clock and absolute:
                    assert raw_at == record_at == record.expires_at_ms
    finally:
        store.close()


def test_stores_with_other_prefixes_do_not_meet(
    redis_store_factory: MakeRedisStore, clock: FakeClock
) -> None:
    """CIS-KEY-1: the prefix is configurable and isolates stores; a prefix with braces is refused."""
    first, second = redis_store_factory(clock), redis_store_factory(clock)
    open_default_run(first, clock())
    assert second.get_run(RUN) is None
    assert second.create(request(), LIMITS) is ErrorCode.RUN_INACTIVE
    for bad in ("", "a{b", "a}b"):
        with pytest.raises(ValueError):
            RedisStore(redis.Redis(), prefix=bad)


# -- TTL -------------------------------------------------------------------------------


def test_ttl_set_once_reads_and_updates_never_touch_it(
    private_store: RedisStore, private_redis_url: str, clock: FakeClock
) -> None:
    """CIS-TTL-1, CIS-TTL-2, CIS-TTL-3, CIS-TTL-5: one PEXPIRE at creation; reads and CAS never expire."""
    store = private_store
    open_default_run(store, clock())
    store.check_server()
    key = record_key(store.prefix, RUN, "call_1")
    with redis.Redis.from_url(private_redis_url) as client:
        with monitored(private_redis_url) as on_create:
            record = admitted(store, request())
        pttls = [client.pttl(key)]
        # The scripts go on the connection the store holds: the reads' pool connection is
        # opened (its HELLO / CLIENT SETINFO handshake) before the reads are watched.
        store.get_run(RUN)
        with monitored(private_redis_url) as on_reads:
            for _ in range(3):
                store.get(RUN, "call_1")
                store.get_many(RUN, ["call_1"])
                store.get_many(RUN, ["call_1"], include_raw=False)
                store.ttl_remaining_ms(RUN, "call_1")
                store.get_run(RUN)
                store.calls(RUN)
                store.completed(RUN)
        pttls.append(client.pttl(key))
        time.sleep(0.01)
        with monitored(private_redis_url) as on_updates:
            raw = with_raw(record, clock())
            store.complete(record, raw)
            pttls.append(client.pttl(key))
            done = ready(raw, clock())
            store.complete(raw, done)
            store.complete(raw, done)  # a replay
        pttls.append(client.pttl(key))
    creates = [name_and_key(entry) for entry in on_create]
    assert [(name, target) for name, target in creates if name in EXPIRE_FAMILY and target == key] == [
        ("PEXPIRE", key)
    ]
    reads = [name_and_key(entry)[0] for entry in on_reads]
    assert reads
    assert set(reads) <= READ_COMMANDS
    assert all(entry["client_type"] != "lua" for entry in on_reads)
    updates = [name_and_key(entry) for entry in on_updates]
    assert [name for name, _ in updates if name == "EVALSHA"] == ["EVALSHA"] * 3
    touching = [name for name, target in updates if target == key]
    assert touching
    assert not set(touching) & EXPIRE_FAMILY
    assert all(0 < value <= TTL_MS for value in pttls)
    assert pttls == sorted(pttls, reverse=True)
    assert pttls[-1] < pttls[0]
    # The raw response got its expiry once, when written: the record's remaining TTL.
    raw_name = core.raw_key(store.prefix, RUN, "call_1")
    raw_expiries = [name for name, target in updates if target == raw_name and name in EXPIRE_FAMILY]
    assert raw_expiries == ["SET"]  # SET raw PX <record PTTL>, once; the replay wrote nothing


def test_duplicates_and_refused_writes_leave_the_bytes_alone(
    redis_store_factory: MakeRedisStore, clock: FakeClock, client: redis.Redis
) -> None:
    """CIS-ID-5, CIS-LIFE-2, CIS-TTL-2: a duplicate or refused CAS changes neither stored bytes nor TTL."""
    store = redis_store_factory(clock)
    open_default_run(store, clock())
    record = admitted(store, request())
    done = ready(record, clock())
    store.complete(record, done)
    key = record_key(store.prefix, RUN, "call_1")
    dumped, fields, pttl = client.dump(key), client.hgetall(key), client.pttl(key)
    run_state = client.hgetall(run_key(store.prefix, RUN))
    assert store.create(request(arguments='{"other": true}'), LIMITS) is ErrorCode.DUPLICATE_TOOL_CALL
    other = ready(record, clock() + 1, content="overwrite?")
    assert store.complete(record, other) is ErrorCode.INVALID_TRANSITION
    assert client.dump(key) == dumped
    assert client.hgetall(key) == fields
    assert 0 < client.pttl(key) <= pttl
    assert client.hgetall(run_key(store.prefix, RUN)) == run_state


def test_real_ttl_expiry_is_absent_and_not_recreated(redis_store_factory: MakeRedisStore) -> None:
    """CIS-TTL-4, CIS-TTL-1: real clock, 300 ms TTL: Redis drops the record; a late CAS adds nothing."""
    store = redis_store_factory(FakeClock())
    store = RedisStore(store._client, prefix=store.prefix)  # same client, wall clock
    now = store.now_ms()
    open_default_run(store, now, ttl_ms=300)
    record = admitted(store, request())
    late = ready(record, now + 1)
    key = record_key(store.prefix, RUN, "call_1")
    deadline = time.monotonic() + 5
    while store.get(RUN, "call_1") is not None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert store._client.exists(key) == 0
    assert store.ttl_remaining_ms(RUN, "call_1") is None
    assert store.complete(record, late) is ErrorCode.INVALID_TRANSITION
    assert store._client.exists(key) == 0
    assert store.get(RUN, "call_1") is None


def test_a_clock_expired_leftover_is_replaced_whole(
    redis_store_factory: MakeRedisStore, clock: FakeClock, client: redis.Redis
) -> None:
    """CIS-TTL-4, CIS-TTL-1: a record expired by the store clock but still in Redis is replaced whole."""
    store = redis_store_factory(clock)
    open_default_run(store, clock(), ttl_ms=1_000)
    record = admitted(store, request())
    store.complete(record, ready(record, clock()))
    clock.now = record.expires_at_ms + 10
    raw = core.raw_key(store.prefix, RUN, "call_1")
    assert client.exists(raw) == 1
    again = admitted(store, request(arguments='{"second": 1}'))
    key = record_key(store.prefix, RUN, "call_1")
    assert client.exists(raw) == 0  # the leftover's raw response went with it
    assert set(client.hkeys(key)) == {
        b"run_id",
        b"tool_call_id",
        b"tool_name",
        b"invocation_token",
        b"sequence",
        b"status",
        b"request_json",
        b"created_at_ms",
        b"updated_at_ms",
        b"expires_at_ms",
    }
    assert store.get(RUN, "call_1") == again
    assert 0 < client.pttl(key) <= 1_000


def test_a_write_makes_the_stored_record_exactly_after(
    redis_store_factory: MakeRedisStore, clock: FakeClock, client: redis.Redis
) -> None:
    """CIS-STORE-3, CIS-LIFE-5: fields that ``after`` lacks are deleted, whatever the stored record held."""
    store = redis_store_factory(clock)
    open_default_run(store, clock())
    record = admitted(store, request())
    key = record_key(store.prefix, RUN, "call_1")
    client.hset(key, mapping={"error_code": "EXECUTION_FAILED", "scope": "stray"})
    done = ready(record, clock(), scope="")
    assert store.complete(record, done) == done
    assert store.get(RUN, "call_1") == done
    assert client.hget(key, "error_code") is None


# -- processes -------------------------------------------------------------------------


def _process_worker(url: str, prefix: str, now: int, ids: list[str], barrier: Any, out: Any) -> None:
    store = RedisStore.from_url(url, prefix=prefix, clock=lambda: now)
    barrier.wait(timeout=20)
    out.put([store.create(request(tcid), LIMITS) for tcid in ids])
    store.close()


def _race_processes(url: str, prefix: str, now: int, ids_per_worker: list[list[str]]) -> list[object]:
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(len(ids_per_worker))
    out = context.Queue()
    workers = [
        context.Process(target=_process_worker, args=(url, prefix, now, ids, barrier, out))
        for ids in ids_per_worker
    ]
    for worker in workers:
        worker.start()
    results: list[object] = []
    for _ in workers:
        results.extend(out.get(timeout=30))
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0
    return results


def test_four_processes_race_for_one_key(
    redis_store_factory: MakeRedisStore, clock: FakeClock, redis_url: str
) -> None:
    """CIS-ID-5, CIS-STORE-2: 4 processes create the same key: exactly one wins, 3 get CALL_IN_PROGRESS
    (the winner's record is PROJECTING)."""
    store = redis_store_factory(clock)
    open_default_run(store, clock())
    results = _race_processes(redis_url, store.prefix, clock(), [["shared"]] * 4)
    winners = [result for result in results if isinstance(result, Admission)]
    assert len(winners) == 1
    assert results.count(ErrorCode.CALL_IN_PROGRESS) == 3
    assert store.get(RUN, "shared") == winners[0].record


def test_processes_cannot_overspend_a_budget(
    redis_store_factory: MakeRedisStore, clock: FakeClock, redis_url: str
) -> None:
    """CIS-RUN-5: 4 processes x 3 calls on a run with budget 5 create exactly 5 records."""
    store = redis_store_factory(clock)
    open_default_run(store, clock(), tool_call_budget=5)
    ids = [[f"p{worker}-c{index}" for index in range(3)] for worker in range(4)]
    results = _race_processes(redis_url, store.prefix, clock(), ids)
    admitted_ids = sorted(result.record.tool_call_id for result in results if isinstance(result, Admission))
    assert len(admitted_ids) == 5
    assert results.count(ErrorCode.TOOL_BUDGET_EXHAUSTED) == 7
    assert sorted(store.calls(RUN)) == admitted_ids
    run = store.get_run(RUN)
    assert run is not None
    assert run.tool_calls_used == 5


# -- scripts ---------------------------------------------------------------------------


def test_scripts_recover_after_script_flush(
    private_store: RedisStore, private_redis_url: str, clock: FakeClock
) -> None:
    """CIS-STORE-5: after SCRIPT FLUSH (NOSCRIPT) every script reloads itself and the operation succeeds."""
    store = private_store
    with redis.Redis.from_url(private_redis_url) as client:
        open_default_run(store, clock())
        client.script_flush()
        record = admitted(store, request())
        client.script_flush()
        done = ready(record, clock())
        assert store.complete(record, done) == done
        client.script_flush()
        assert isinstance(store.cancel_run(RUN), type(store.get_run(RUN)))
        client.script_flush()
        assert store.open_run("run-2", deadline_ms=clock() + 10, ttl_ms=10, tool_call_budget=1, byte_budget=1)
        assert store.get(RUN, "call_1") == done

        async def async_flow() -> None:
            async_store = AsyncRedisStore.from_url(private_redis_url, prefix=store.prefix, clock=clock)
            try:
                client.script_flush()
                await async_store.open_run(
                    "run-3", deadline_ms=clock() + 1_000, ttl_ms=1_000, tool_call_budget=1, byte_budget=100
                )
                client.script_flush()
                created = await async_store.create(request(run_id="run-3"), LIMITS)
                assert isinstance(created, Admission)
                client.script_flush()
                big = ready(created.record, clock(), raw="b" * (core.STAGE_ABOVE_BYTES + 1))
                assert await async_store.complete(created.record, big) == big
                client.script_flush()
                small = evolve(ready(created.record, clock()), updated_at_ms=clock() + 1)
                assert await async_store.complete(created.record, small) is ErrorCode.INVALID_TRANSITION
                assert await async_store.get("run-3", "call_1") == big
            finally:
                await async_store.close()

        asyncio.run(async_flow())


def test_one_invocation_is_two_round_trips(
    private_store: RedisStore, private_redis_url: str, clock: FakeClock
) -> None:
    """CIS-STORE-9: one successful invocation (create + complete) is exactly 2 commands (commandstats)."""
    store = private_store
    open_default_run(store, clock())
    warm = admitted(store, request("warm-up"))
    store.complete(warm, ready(warm, clock()))
    req = request("counted")
    with redis.Redis.from_url(private_redis_url) as client:
        client.ping()
        admin = client.client_info()["addr"]
        with monitored(private_redis_url) as seen:
            client.config_resetstat()
            record = admitted(store, req)
            done = ready(record, clock(), evidence=EvidenceStatus.EVIDENCE_FOUND)
            assert store.complete(record, done) == done
            stats = client.info("commandstats")
    assert stats["cmdstat_evalsha"]["calls"] == 2
    assert stats["cmdstat_evalsha"].get("failed_calls", 0) == 0  # Redis 6.2 does not count them
    # Everything but this test's own CONFIG/INFO: the store's two scripts, on one connection.
    by_store = [
        (name_and_key(entry)[0], f"{entry['client_address']}:{entry['client_port']}")
        for entry in seen
        if entry["client_type"] != "lua" and f"{entry['client_address']}:{entry['client_port']}" != admin
    ]
    assert [name for name, _ in by_store] == ["EVALSHA", "EVALSHA"]
    assert len({address for _, address in by_store}) == 1
    in_scripts = {name_and_key(entry)[0].lower() for entry in seen if entry["client_type"] == "lua"}
    # CONFIG RESETSTAT is "config|resetstat" from Redis 7 on, "config" in Redis 6.2.
    counted = {name.removeprefix("cmdstat_") for name in stats} - {"evalsha", "config|resetstat", "config"}
    assert counted == in_scripts


def test_large_raw_responses_are_staged_and_never_left_behind(
    private_store: RedisStore, private_redis_url: str, clock: FakeClock
) -> None:
    """CIS-STORE-3, CIS-STORE-5, CIS-TTL-3: a large raw is SET to a staging key and renamed by the CAS.

    Every outcome (WRITE, refused, NOSCRIPT) leaves no staging key behind, and the
    record's own TTL is never touched.
    """
    store = private_store
    big = "z" * (core.STAGE_ABOVE_BYTES + 1)
    open_default_run(store, clock(), byte_budget=10_000_000)
    record = admitted(store, request("staged"))
    key = record_key(store.prefix, RUN, "staged")
    store.get(RUN, "staged")  # opens the pool connection the staging pipeline uses (HELLO)
    with redis.Redis.from_url(private_redis_url) as client:
        with monitored(private_redis_url) as seen:
            done = ready(record, clock(), raw=big)
            assert store.complete(record, done) == done
        names = [(entry["client_type"] == "lua", *name_and_key(entry)) for entry in seen]
        assert [name for lua, name, _ in names if not lua] == ["SET", "EVALSHA"]
        assert "RENAME" in {name for lua, name, _ in names if lua}
        assert not {name for lua, name, target in names if target == key} & EXPIRE_FAMILY
        assert client.get(core.raw_key(store.prefix, RUN, "staged")) == big.encode()
        # Refused: another invocation's completion with a large raw response.
        second = admitted(store, request("staged-2"))
        wrong = evolve(second, invocation_token="not-it")
        assert store.complete(wrong, ready(wrong, clock(), raw=big)) is ErrorCode.INVALID_TRANSITION
        # NOSCRIPT between the staging SET and the script: reloaded, completed once.
        client.script_flush()
        done_2 = ready(second, clock(), raw=big)
        assert store.complete(second, done_2) == done_2
        assert store.get(RUN, "staged-2") == done_2
        assert list(client.scan_iter(match=f"{store.prefix}:*:stage:*")) == []


def test_the_held_connection_serves_one_caller_at_a_time_and_goes_back_to_the_pool(
    private_redis_url: str, clock: FakeClock
) -> None:
    """CIS-STORE-9: the store holds one pool connection for its scripts; callers that find it taken
    (threads here) use pool connections, every call is answered once and right, and close() gives
    the held connection back. A pool of fewer than 8 connections is never held from."""
    client = redis.Redis.from_url(private_redis_url)
    store = RedisStore(client, prefix=_prefix(), clock=clock)
    open_default_run(store, clock(), tool_call_budget=400)
    pool: Any = client.connection_pool
    errors: list[BaseException] = []

    def creates(worker: int) -> None:
        try:
            for index in range(40):
                created = admitted(store, request(f"w{worker}_{index}"))
                done = ready(created, clock())
                assert store.complete(created, done) == done
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)

    threads = [threading.Thread(target=creates, args=(worker,)) for worker in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(store.calls(RUN)) == len(store.completed(RUN)) == 6 * 40
    assert len(pool._in_use_connections) == 1  # the held one; the others went back
    store.close()
    assert len(pool._in_use_connections) == 0
    client.close()
    # One connection in all: were it held, the read after the create would wait for it in vain.
    tight = redis.Redis(
        connection_pool=redis.BlockingConnectionPool.from_url(private_redis_url, max_connections=1, timeout=1)
    )
    small = RedisStore(tight, prefix=_prefix(), clock=clock)
    open_default_run(small, clock())
    created = admitted(small, request("call_1"))
    assert small.get(RUN, "call_1") == created
    small.close()
    tight.close()


def test_the_async_store_holds_one_connection_too(private_redis_url: str, clock: FakeClock) -> None:
    """CIS-STORE-9: the async store's scripts run on the one connection it holds: sequential calls
    leave exactly that one in use, concurrent tasks that find it taken use pool connections and
    are answered once and right, and close() gives it back."""

    async def flow() -> None:
        client = redis.asyncio.Redis.from_url(private_redis_url)
        store = AsyncRedisStore(client, prefix=_prefix(), clock=clock)
        pool: Any = client.connection_pool
        await store.open_run(
            RUN, deadline_ms=clock() + DEADLINE_IN_MS, ttl_ms=TTL_MS, tool_call_budget=100, byte_budget=10**6
        )

        async def one(name: str) -> None:
            created = await store.create(request(name), LIMITS)
            assert isinstance(created, Admission)
            done = ready(created.record, clock())
            assert await store.complete(created.record, done) == done

        for index in range(5):
            await one(f"seq_{index}")
        assert len(pool._in_use_connections) == 1  # the held one, kept between calls
        held = next(iter(pool._in_use_connections))
        await asyncio.gather(*(one(f"par_{index}") for index in range(8)))
        assert pool._in_use_connections == {held}  # the others went back
        assert len(await store.completed(RUN)) == 13
        await store.close()
        assert len(pool._in_use_connections) == 0
        await client.aclose()

    asyncio.run(flow())


def test_round_trips_counted_on_the_socket(
    redis_store_factory: MakeRedisStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CIS-STORE-9: two socket writes per invocation, also with a large raw response (SET rides along)."""
    store = redis_store_factory(clock)
    open_default_run(store, clock(), byte_budget=10_000_000)
    for raw in ("small", "L" * (core.STAGE_ABOVE_BYTES * 4)):  # both connections opened
        warm = admitted(store, request(f"warm-{len(raw)}"))
        store.complete(warm, ready(warm, clock(), raw=raw))
    sends: list[int] = []
    original = redis.connection.Connection.send_packed_command

    def counting(self: Any, command: Any, check_health: bool = True) -> None:
        sends.append(1)
        original(self, command, check_health)

    monkeypatch.setattr(redis.connection.Connection, "send_packed_command", counting)
    for index, raw in enumerate(("small", "L" * (core.STAGE_ABOVE_BYTES * 4))):
        sends.clear()
        record = admitted(store, request(f"counted-{index}"))
        done = ready(record, clock(), raw=raw)
        assert store.complete(record, done) == done
        assert len(sends) == 2


# -- integrity and failures ------------------------------------------------------------


def test_a_foreign_record_is_never_served(
    redis_store_factory: MakeRedisStore, clock: FakeClock, client: redis.Redis
) -> None:
    """CIS-STORE-6: a record of another run or call, or a corrupt one, is STORE_UNAVAILABLE, never served."""
    store = redis_store_factory(clock)
    open_default_run(store, clock())
    record = admitted(store, request())
    key = record_key(store.prefix, RUN, "call_1")
    good: dict[Any, Any] = dict(client.hgetall(key))
    for field, value in (
        (b"run_id", b"run-2"),
        (b"tool_call_id", b"call_2"),
        (b"sequence", b"one"),
        (b"status", b"DONE"),
        (b"unexpected", b"x"),
    ):
        client.delete(key)
        client.hset(key, mapping={**good, field: value})
        client.pexpire(key, 10_000)
        for read in (
            lambda: store.get(RUN, "call_1"),
            lambda: store.get_many(RUN, ["call_1"]),
        ):
            with pytest.raises(StoreUnavailableError) as caught:
                read()
            assert caught.value.code is ErrorCode.STORE_UNAVAILABLE
            assert caught.value.__cause__ is None
            assert caught.value.__context__ is None
    client.delete(key)
    client.hset(key, mapping={**good, b"run_id": b"run-2"})
    client.pexpire(key, 10_000)
    with pytest.raises(StoreUnavailableError):
        store.ttl_remaining_ms(RUN, "call_1")
    with pytest.raises(StoreUnavailableError):
        store.get_many(RUN, ["call_1"], include_raw=False)
    client.hset(run_key(store.prefix, RUN), "run_id", "run-2")
    with pytest.raises(StoreUnavailableError):
        store.get_run(RUN)
    with pytest.raises(StoreUnavailableError):
        store.calls(RUN)
    assert record.run_id == RUN


def test_a_record_without_a_ttl_is_corrupt(
    redis_store_factory: MakeRedisStore, clock: FakeClock, client: redis.Redis
) -> None:
    """CIS-STORE-6, CIS-TTL-1: a record key without an expiry was not written by the store."""
    store = redis_store_factory(clock)
    open_default_run(store, clock())
    admitted(store, request())
    client.persist(record_key(store.prefix, RUN, "call_1"))
    with pytest.raises(StoreUnavailableError):
        store.ttl_remaining_ms(RUN, "call_1")


def _secret_server_url(port_url: str, password: str) -> str:
    return port_url.replace("redis://", f"redis://user:{password}@")


def _operations(store: RedisStore, clock: FakeClock, payload: str) -> list[Callable[[], object]]:
    return [
        lambda: store.open_run(RUN, deadline_ms=clock() + 10, ttl_ms=10, tool_call_budget=1, byte_budget=1),
        lambda: store.create(request("secret-call", arguments=f'{{"q": "{payload}"}}'), LIMITS),
        lambda: store.get(RUN, "secret-call"),
        lambda: store.get_many(RUN, ["secret-call"]),
        lambda: store.completed(RUN),
    ]


def test_failures_never_leak_url_password_key_or_payload(
    caplog: pytest.LogCaptureFixture, clock: FakeClock
) -> None:
    """CIS-FAIL-5, CIS-ERR-1, CIS-ERR-2: failures are STORE_UNAVAILABLE with no secret, key or payload."""
    password = "hunter2-" + secrets.token_hex(4)
    payload = "payload-" + secrets.token_hex(4)
    fast = {
        "retry": Retry(NoBackoff(), 0),
        "retry_policy": RetryPolicy(budget_ms=0),
        "socket_connect_timeout": 1.0,
        "socket_timeout": 1.0,
    }
    with redis_server(extra_args=["--requirepass", "right-" + password]) as url:
        wrong = url.replace("redis://", f"redis://:{password}@")
        stores = [RedisStore.from_url(wrong, prefix="leak-prefix", clock=clock, **fast)]
    # The server is gone now: this one cannot even connect.
    stores.append(RedisStore.from_url(wrong, prefix="leak-prefix", clock=clock, **fast))
    caplog.set_level(logging.DEBUG)
    for store in stores:
        operations = _operations(store, clock, payload)
        for operation in operations:
            with pytest.raises(StoreUnavailableError) as caught:
                operation()
            error = caught.value
            assert error.code is ErrorCode.STORE_UNAVAILABLE
            assert error.__cause__ is None
            assert error.__context__ is None
            text = f"{error!s} {error!r} {error.args!r} {error.cause}"
            for secret in (password, payload, "leak-prefix", "secret-call", "127.0.0.1", wrong):
                assert secret not in text
        store.close()
    logged = " ".join(f"{record.getMessage()} {record.exc_text or ''}" for record in caplog.records)
    assert "invocation_store.redis" in {record.name for record in caplog.records}
    for secret in (password, payload, "leak-prefix", "secret-call", "127.0.0.1"):
        assert secret not in logged


def test_bad_urls_are_refused_without_echoing_them() -> None:
    """CIS-FAIL-5: an unusable URL raises ValueError whose text does not contain the URL or password."""
    for url in (
        "http://user:pw-SECRET@host:1/0",
        "not a url pw-SECRET",
        "redis://:pw-SECRET@host:notaport/0",
    ):
        with pytest.raises(ValueError) as caught:
            RedisStore.from_url(url)
        assert "pw-SECRET" not in str(caught.value)
        assert caught.value.__context__ is None
        with pytest.raises(ValueError) as async_caught:
            AsyncRedisStore.from_url(url)
        for error in (caught.value, async_caught.value):  # what to do, without the URL
            assert str(error) == "not a usable Redis URL (expected redis://, rediss:// or unix://)"


class _OldRedis(redis.Redis):
    """A client whose INFO reply claims an old server version."""

    version = "6.0.20"

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        pipe = super().pipeline(transaction=transaction, shard_hint=shard_hint)
        execute = pipe.execute

        def patched(raise_on_error: bool = True) -> list[Any]:
            replies = execute(raise_on_error)
            replies[0] = {**replies[0], "redis_version": self.version}
            return list(replies)

        pipe.execute = patched  # type: ignore[method-assign]
        return pipe


def test_redis_older_than_6_2_is_refused(redis_url: str, clock: FakeClock) -> None:
    """CIS-STORE-7: a server reporting a version below 6.2 is refused clearly; 6.2.0 is accepted."""
    old = _OldRedis.from_url(redis_url)
    store = RedisStore(old, prefix=_prefix(), clock=clock)
    with pytest.raises(UnsupportedRedisError) as caught:
        open_default_run(store, clock())
    assert "requires Redis >= 6.2" in str(caught.value)
    assert "6.0.20" in str(caught.value)
    assert caught.value.code is ErrorCode.STORE_UNAVAILABLE
    with pytest.raises(UnsupportedRedisError):  # refused again: a refusal is never cached as ready
        store.create(request("call_1"), LIMITS)
    old.close()
    assert core.parse_version({"redis_version": "6.2.0"}) >= core.MIN_VERSION
    assert core.parse_version({"redis_version": "7.4.1"}) >= core.MIN_VERSION
    assert core.parse_version({"redis_version": "6.1.9"}) < core.MIN_VERSION
    assert core.parse_version({"redis_version": "5.0.14"}) < core.MIN_VERSION


def test_integers_beyond_lua_precision_are_refused(
    redis_store_factory: MakeRedisStore, clock: FakeClock
) -> None:
    """CIS-RUN-1: budgets and times of 2**53 or more are a ValueError, never silently rounded by Lua."""
    store = redis_store_factory(clock)
    with pytest.raises(ValueError):
        store.open_run(RUN, deadline_ms=clock() + 10, ttl_ms=10, tool_call_budget=1, byte_budget=2**53)
    assert store.get_run(RUN) is None


# -- clients and URLs ------------------------------------------------------------------


def test_unix_socket_url_and_str_replies(clock: FakeClock) -> None:
    """CIS-STORE-1: unix:// URLs work, and so does a given client with decode_responses=True."""
    with redis_server(unix_socket=True) as url:
        assert url.startswith("unix://")
        text_client = redis.Redis.from_url(url, decode_responses=True)
        with warnings.catch_warnings():
            # redis-py's own RESP3 handshake compares bytes and str keys when decoding.
            warnings.simplefilter("ignore", BytesWarning)
            text_client.ping()
        for store in (
            RedisStore.from_url(url, prefix="unix", clock=clock),
            RedisStore(text_client, prefix="text", clock=clock),
        ):
            open_default_run(store, clock())
            record = admitted(store, request(arguments='{"q": "é 日本"}'))
            done = ready(record, clock(), raw="raw ü", content="ç")
            assert store.complete(record, done) == done
            assert store.complete(record, done) == done
            assert store.get(RUN, "call_1") == done
            assert store.get_many(RUN, ["call_1"]) == {"call_1": done}
            assert store.completed(RUN) == ("call_1",)
            store.close()


def test_rediss_url_builds_a_tls_client(clock: FakeClock) -> None:
    """CIS-STORE-1, CIS-FAIL-5: rediss:// gives a TLS connection; failing to reach it is STORE_UNAVAILABLE."""
    store = RedisStore.from_url(
        "rediss://:tls-SECRET@127.0.0.1:9/0",
        clock=clock,
        retry=Retry(NoBackoff(), 0),
        socket_connect_timeout=0.5,
    )
    assert isinstance(store._client, redis.Redis)
    pool = store._client.connection_pool
    assert pool.connection_class.__name__ == "SSLConnection"
    with pytest.raises(StoreUnavailableError) as caught:
        store.get_run(RUN)
    assert "tls-SECRET" not in str(caught.value)
    store.close()


# -- real redis-py retries ---------------------------------------------------------------


class _ReplyDroppingProxy:
    """A TCP proxy to Redis that, when armed, lets the next EVALSHA run and then cuts the
    connection before its reply reaches the client: redis-py sees a ConnectionError and
    retries the very same command on a new connection."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.armed = threading.Event()
        self.dropped = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                downstream, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            state = {"evalsha": False}
            threading.Thread(target=self._up, args=(downstream, upstream, state), daemon=True).start()
            threading.Thread(target=self._down, args=(upstream, downstream, state), daemon=True).start()

    def _up(self, source: socket.socket, sink: socket.socket, state: dict[str, bool]) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                if b"EVALSHA" in chunk.upper():
                    state["evalsha"] = True
                sink.sendall(chunk)

    def _down(self, source: socket.socket, sink: socket.socket, state: dict[str, bool]) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                if state["evalsha"] and self.armed.is_set():
                    self.armed.clear()
                    self.dropped += 1
                    for end in (sink, source):  # the script ran; its reply is lost
                        end.shutdown(socket.SHUT_RDWR)
                        end.close()
                    return
                state["evalsha"] = False
                sink.sendall(chunk)

    def close(self) -> None:
        self.closed = True
        self.listener.close()


def test_redis_py_retries_of_lost_replies_are_idempotent(private_redis_url: str, clock: FakeClock) -> None:
    """CIS-RETRY-2, CIS-RETRY-1: a create or complete whose reply is lost runs again under redis-py's retry,
    and the retry is recognised as the same invocation: one record, one call counted, one completion."""
    port = int(private_redis_url.rsplit(":", 1)[1].split("/", 1)[0])
    proxy = _ReplyDroppingProxy(port)
    store = RedisStore.from_url(
        f"redis://127.0.0.1:{proxy.port}/0",
        prefix=_prefix(),
        clock=clock,
        retry=Retry(NoBackoff(), 3),
        socket_timeout=5.0,
    )
    try:
        open_default_run(store, clock())
        proxy.armed.set()
        created = store.create(request(), LIMITS)
        assert proxy.dropped == 1
        assert isinstance(created, Admission)
        assert created.replayed  # the retry found its own record
        run = store.get_run(RUN)
        assert run is not None
        assert (run.tool_calls_used, store.calls(RUN)) == (1, ("call_1",))
        done = ready(created.record, clock())
        proxy.armed.set()
        assert store.complete(created.record, done) == done
        assert proxy.dropped == 2
        assert store.completed(RUN) == ("call_1",)
        assert store.get(RUN, "call_1") == done
        charged = store.get_run(RUN)
        assert charged is not None
        assert charged.bytes_used == run.bytes_used + (
            len(done.raw_response or "") + len(done.agent_result or "") + len(done.scope or "")
        )
    finally:
        store.close()
        proxy.close()


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_staged_raw_response_on_a_client_that_pins_its_connection(
    private_redis_url: str, clock: FakeClock, flavour: str
) -> None:
    """CIS-STORE-3, CIS-STORE-5, CIS-TTL-3: a client made with ``single_connection_client=True``
    (the store then holds no connection of its own, and stages through a pipeline) completes a
    large raw response whole, also after NOSCRIPT (the script reloaded, the completion sent
    once more), and leaves no staging key behind; a resent completion gets the same answer."""
    prefix = _prefix()
    if flavour == "sync":
        pinned: Any = redis.Redis.from_url(private_redis_url, single_connection_client=True)
        store: Any = RedisStore(pinned, prefix=prefix, clock=clock)
    else:
        # An asyncio client pins its connection when initialised: the store is built after that,
        # on the loop the driver then runs it on.
        loop = asyncio.new_event_loop()
        pinned = redis.asyncio.Redis.from_url(private_redis_url, single_connection_client=True)
        loop.run_until_complete(pinned.initialize())
        store = AsyncRedisStore(pinned, prefix=prefix, clock=clock, owns_client=True)
    driver = StoreDriver(store, flavour)
    if flavour == "async":
        assert driver._loop is not None
        driver._loop.close()
        driver._loop = loop
    big = "L" * (core.STAGE_ABOVE_BYTES * 2)
    with redis.Redis.from_url(private_redis_url) as client:
        try:
            open_default_run(driver, clock(), byte_budget=10_000_000)
            for name, flush in (("first", False), ("after-noscript", True)):
                record = admitted(driver, request(name))
                if flush:
                    client.script_flush()
                done = ready(record, clock(), raw=big + name)
                assert driver.complete(record, done) == done
                assert driver.get(RUN, name) == done
                assert client.get(core.raw_key(prefix, RUN, name)) == (big + name).encode()
                assert driver.complete(record, done) == done  # a resent completion: the same answer
            assert list(client.scan_iter(match=f"{prefix}:*:stage:*")) == []
        finally:
            driver.close()
            if flavour == "sync":
                pinned.close()


@pytest.mark.parametrize("flavour", ["sync", "async"])
@pytest.mark.parametrize("pinned", [False, True], ids=["held-connection", "pipeline"])
def test_a_staged_completion_is_one_set_nx_px_and_one_script_and_its_key_lapses(
    private_redis_url: str, clock: FakeClock, flavour: str, pinned: bool
) -> None:
    """CIS-STORE-5, CIS-TTL-3: a large raw response is staged with exactly ``SET <key> <raw> NX PX
    STAGE_TTL_MS`` and then ``EVALSHA``: one round trip, no MULTI, no second send, on the store's
    held connection and on a pipeline (a client that pins its connection). When the script never
    runs (the scripts flushed again after the reload), the staging key left behind lapses within
    STAGE_TTL_MS."""
    prefix = _prefix()
    loop: asyncio.AbstractEventLoop | None = None
    if flavour == "sync":
        client_: Any = redis.Redis.from_url(private_redis_url, single_connection_client=pinned)
        store: Any = RedisStore(client_, prefix=prefix, clock=clock)
    else:
        loop = asyncio.new_event_loop()
        client_ = redis.asyncio.Redis.from_url(private_redis_url, single_connection_client=pinned)
        loop.run_until_complete(client_.initialize())
        store = AsyncRedisStore(client_, prefix=prefix, clock=clock, owns_client=True)
    driver = StoreDriver(store, flavour)
    if loop is not None:
        assert driver._loop is not None
        driver._loop.close()
        driver._loop = loop
    big = "S" * (core.STAGE_ABOVE_BYTES + 1)
    with redis.Redis.from_url(private_redis_url) as client:
        try:
            open_default_run(driver, clock(), byte_budget=10_000_000)
            record = admitted(driver, request("one"))
            driver.get(RUN, "one")  # the connections are made (HELLO) before MONITOR starts
            with monitored(private_redis_url) as seen:
                done = ready(record, clock(), raw=big)
                assert driver.complete(record, done) == done
            sent = [str(entry["command"]).split(" ") for entry in seen if entry["client_type"] != "lua"]
            assert [parts[0].upper() for parts in sent] == ["SET", "EVALSHA"]
            assert [part.upper() for part in sent[0][3:]] == ["NX", "PX", str(core.STAGE_TTL_MS)]
            assert sent[0][1].startswith(f"{prefix}:")
            assert ":stage:" in sent[0][1]
            second = admitted(driver, request("two"))
            real = store._recheck
            if flavour == "sync":

                def recheck() -> None:
                    real()
                    client.script_flush()

                store._recheck = recheck
            else:

                async def recheck_async() -> None:
                    await real()
                    client.script_flush()

                store._recheck = recheck_async
            client.script_flush()
            with pytest.raises(StoreUnavailableError) as caught:
                driver.complete(second, ready(second, clock(), raw=big))
            assert caught.value.cause == "NoScriptError"
            (left,) = client.scan_iter(match=f"{prefix}:*:stage:*")
            assert 0 < client.pttl(left) <= core.STAGE_TTL_MS
        finally:
            driver.close()
            if flavour == "sync":
                client_.close()
