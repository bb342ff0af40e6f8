"""The double-collect decision of a read-rights-only record read, on fabricated replies (CIS-DUR-9)."""

from __future__ import annotations

import inspect
import secrets
from collections.abc import Callable
from typing import Any

import pytest
import redis
import redis.asyncio

from invocation_store.adapters import AsyncRedisStore, RedisStore, StoreUnavailableError
from invocation_store.adapters._redis_core import run_keys
from invocation_store.adapters._redis_decode import CorruptReplyError
from invocation_store.adapters._redis_reads import (
    MAX_ATTEMPTS,
    SNAPSHOT_FIELDS,
    decide_snapshot,
    snapshot_commands,
)
from invocation_store.kernel import CanonicalRecord
from invocation_store.testing import FakeClock

from ._support import RUN as STORE_RUN
from ._support import StoreDriver, admitted, open_default_run, ready, request

RUN = "run-1"
HASH = {
    b"run_id": b"run-1",
    b"tool_call_id": b"call_1",
    b"tool_name": b"search",
    b"invocation_token": b"tok",
    b"sequence": b"1",
    b"status": b"PROJECTING",
    b"request_json": b"{}",
    b"created_at_ms": b"5",
    b"updated_at_ms": b"5",
    b"expires_at_ms": b"1000",
}
SAME = [HASH[name.encode()] for name in SNAPSHOT_FIELDS]


def test_the_pipeline_is_plain_read_commands_with_the_check_last() -> None:
    """CIS-DUR-9: HGETALL, PTTL, GET per record, then one HMGET of the written-by-every-write fields."""
    keys = run_keys("cis", RUN)
    assert keys is not None
    commands = snapshot_commands(keys, ["call_1", "call_2"], include_raw=True)
    assert [command[0] for command in commands] == [
        "HGETALL",
        "PTTL",
        "GET",
        "HGETALL",
        "PTTL",
        "GET",
        "HMGET",
        "HMGET",
    ]
    assert commands[-1][2:] == SNAPSHOT_FIELDS
    assert [command[0] for command in snapshot_commands(keys, ["call_1"], include_raw=False)] == [
        "HGETALL",
        "PTTL",
    ]


def test_a_record_written_between_the_reads_is_read_again() -> None:
    """CIS-DUR-9: the same check fields mean a consistent snapshot; changed ones mean read it again
    (a completion landed between HGETALL and GET, whose raw response would not belong to the hash)."""
    stable = decide_snapshot([HASH, 900, None, SAME], RUN, ["call_1"], include_raw=True)
    assert stable.unstable == []
    assert stable.records["call_1"] is not None
    changed = [b"READY", b"9", b"tok"]
    moved = decide_snapshot([HASH, 900, b"raw", changed], RUN, ["call_1"], include_raw=True)
    assert moved.unstable == ["call_1"]
    assert moved.records == {}
    gone = decide_snapshot([HASH, 900, None, [None, None, None]], RUN, ["call_1"], include_raw=True)
    assert gone.unstable == ["call_1"]  # expired between the reads: read again, then absent
    absent = decide_snapshot([{}, -2, None, [None, None, None]], RUN, ["call_1"], include_raw=True)
    assert absent.records == {"call_1": None}


def test_corrupt_records_are_named_and_the_others_still_decided() -> None:
    """CIS-DUR-12: no TTL, a foreign type and an undecodable hash are named by id; others still read;
    an error reply that says nothing about the record is raised."""
    replies = [
        HASH, -1,  # no expiry
        redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"), -1,
        {**HASH, b"tool_call_id": b"call_3", b"status": b"DONE"}, 900,
        {**HASH, b"tool_call_id": b"call_4"}, 900,
    ]  # fmt: skip
    snapshot = decide_snapshot(replies, RUN, ["call_1", "call_2", "call_3", "call_4"], include_raw=False)
    assert snapshot.corrupt == {"call_1": "NoTTL", "call_2": "WrongType", "call_3": "CorruptRecord"}
    assert snapshot.records["call_4"] is not None
    with pytest.raises(redis.ResponseError, match="NOPERM"):
        decide_snapshot([redis.ResponseError("NOPERM no rights"), 900], RUN, ["call_1"], include_raw=False)


# -- a write landing between the reads, end to end ------------------------------------


def _moving_pipeline(pipe: Any, rounds: list[int], moved_rounds: int) -> Any:
    """``pipe`` whose replies to its first ``moved_rounds`` snapshot rounds (pipelines ending in
    HMGET) show every record's check fields changed, as a completion landing between HGETALL
    and the check would; ``rounds`` counts the snapshot rounds sent."""
    execute = pipe.execute

    def sent() -> list[object]:  # each queued command's name (a tuple or a command object per client)
        return [(entry[0] if isinstance(entry, tuple) else entry.args)[0] for entry in pipe.command_stack]

    def moved(names: list[object], replies: list[Any]) -> list[Any]:
        if not names or names[-1] != "HMGET":
            return replies
        rounds.append(len(rounds) + 1)
        if len(rounds) > moved_rounds:
            return replies
        return [
            [b"READY", b"99", b"another"] if name == "HMGET" else reply
            for name, reply in zip(names, replies, strict=True)
        ]

    if inspect.iscoroutinefunction(execute):

        async def execute_async(raise_on_error: bool = True) -> list[Any]:
            names = sent()
            return moved(names, list(await execute(raise_on_error)))

        pipe.execute = execute_async
    else:

        def execute_sync(raise_on_error: bool = True) -> list[Any]:
            names = sent()
            return moved(names, list(execute(raise_on_error)))

        pipe.execute = execute_sync
    return pipe


@pytest.mark.parametrize("moved_rounds", [0, 1, MAX_ATTEMPTS - 1, MAX_ATTEMPTS])
@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_moved_record_is_read_again_up_to_max_attempts(
    redis_url: str, clock: FakeClock, flavour: str, moved_rounds: int
) -> None:
    """CIS-DUR-9: a record whose check fields moved is read again, round by round, and the first
    stable round answers (get and get_many); a record still moving after MAX_ATTEMPTS rounds is
    STORE_UNAVAILABLE (cause UnstableRead), after exactly MAX_ATTEMPTS rounds, never a mixed record."""
    rounds: list[int] = []
    prefix = f"cis-test-{secrets.token_hex(6)}"
    if flavour == "sync":

        class Moving(redis.Redis):
            def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
                return _moving_pipeline(super().pipeline(transaction, shard_hint), rounds, moved_rounds)

        store: Any = RedisStore(Moving.from_url(redis_url), prefix=prefix, clock=clock)
    else:

        class AsyncMoving(redis.asyncio.Redis):
            def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
                return _moving_pipeline(super().pipeline(transaction, shard_hint), rounds, moved_rounds)

        store = AsyncRedisStore(AsyncMoving.from_url(redis_url), prefix=prefix, clock=clock, owns_client=True)
    driver = StoreDriver(store, flavour)
    try:
        open_default_run(driver, clock())
        record = admitted(driver, request("call_1"))
        done = ready(record, clock(), raw="the raw response")
        assert driver.complete(record, done) == done
        reads: tuple[Callable[[], CanonicalRecord | None], ...] = (
            lambda: driver.get(STORE_RUN, "call_1"),
            lambda: driver.get_many(STORE_RUN, ["call_1"])["call_1"],
        )
        for read in reads:
            rounds.clear()
            if moved_rounds < MAX_ATTEMPTS:
                assert read() == done
                assert len(rounds) == moved_rounds + 1
            else:
                with pytest.raises(StoreUnavailableError) as caught:
                    read()
                assert caught.value.cause == "UnstableRead"
                assert len(rounds) == MAX_ATTEMPTS
    finally:
        driver.close()


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_an_unsafe_id_is_never_read_even_where_a_key_would_be(
    redis_url: str, clock: FakeClock, flavour: str
) -> None:
    """CIS-ID-3, CIS-STORE-6: a read with an unsafe tool_call_id (here 200 characters, each one
    allowed) answers None without reading, even where a hash sits at the key that id would name;
    a safe id beside it is read as usual."""
    prefix = f"cis-test-{secrets.token_hex(6)}"
    if flavour == "sync":
        store: Any = RedisStore.from_url(redis_url, prefix=prefix, clock=clock)
    else:
        store = AsyncRedisStore.from_url(redis_url, prefix=prefix, clock=clock)
    driver = StoreDriver(store, flavour)
    unsafe = "c" * 200
    keys = run_keys(prefix, STORE_RUN)
    assert keys is not None
    try:
        open_default_run(driver, clock())
        record = admitted(driver, request("call_1"))
        with redis.Redis.from_url(redis_url) as client:
            client.hset(keys.record(unsafe), mapping={"run_id": STORE_RUN, "tool_call_id": unsafe})
            client.pexpire(keys.record(unsafe), 60_000)
            assert driver.get(STORE_RUN, unsafe) is None
            assert driver.get_many(STORE_RUN, [unsafe, "call_1"]) == {unsafe: None, "call_1": record}
            assert driver.get_progress(STORE_RUN, [unsafe]) == {unsafe: None}
            assert driver.ttl_remaining_ms(STORE_RUN, unsafe) is None
            client.delete(keys.record(unsafe))
    finally:
        driver.close()


def test_a_record_hash_read_as_flat_pairs_decides_as_a_mapping() -> None:
    """CIS-STORE-6: HGETALL answered as a flat field/value array (a client without redis-py's reply
    callbacks, RESP2) decides exactly as the mapping does, bytes or str; an odd array, or a check
    of another length, is UnexpectedReply."""
    as_mapping = decide_snapshot([HASH, 900, None, SAME], RUN, ["call_1"], include_raw=True)
    flat = [part for pair in HASH.items() for part in pair]
    for pairs in (flat, tuple(flat), [part.decode() for part in flat]):
        check = SAME if isinstance(pairs[0], bytes) else [value.decode() for value in SAME]
        snapshot = decide_snapshot([pairs, 900, None, check], RUN, ["call_1"], include_raw=True)
        assert snapshot.records == as_mapping.records
        assert snapshot.unstable == []
        lean = decide_snapshot([pairs, 900], RUN, ["call_1"], include_raw=False)
        assert lean.records == as_mapping.records
    for replies in (
        [flat[:-1], 900, None, SAME],
        [42, 900, None, SAME],
        [HASH, 900, None, SAME[:-1]],
        [HASH, 900, None, b"x"],
    ):
        with pytest.raises(CorruptReplyError) as caught:
            decide_snapshot(replies, RUN, ["call_1"], include_raw=True)
        assert caught.value.cause == "UnexpectedReply"


def test_each_record_of_a_batch_is_decided_on_its_own() -> None:
    """CIS-DUR-7, CIS-DUR-9: in one batch, a record that moved between the reads is read again while
    the next is decided as usual; an error reply to one record's check (WRONGTYPE) marks that record
    corrupt (WrongType), not the batch; a reply count other than the commands sent is UnexpectedReply."""
    second = {**HASH, b"tool_call_id": b"call_2"}
    moved = [b"READY", b"9", b"tok"]
    snapshot = decide_snapshot(
        [HASH, 900, b"raw", second, 900, None, moved, SAME], RUN, ["call_1", "call_2"], include_raw=True
    )
    assert snapshot.unstable == ["call_1"]
    record = snapshot.records["call_2"]
    assert record is not None
    assert record.tool_call_id == "call_2"
    wrong = redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")
    snapshot = decide_snapshot([HASH, 900, None, wrong], RUN, ["call_1"], include_raw=True)
    assert snapshot.corrupt == {"call_1": "WrongType"}
    for replies, include_raw in (([HASH, 900, None], True), ([HASH], False), ([HASH, 900, 1], False)):
        with pytest.raises(CorruptReplyError) as caught:
            decide_snapshot(replies, RUN, ["call_1"], include_raw=include_raw)
        assert caught.value.cause == "UnexpectedReply"
