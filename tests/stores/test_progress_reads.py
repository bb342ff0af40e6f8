"""Progress reads only the fields facts need, on every store (CIS-PERF-3, CIS-PROG-1, CIS-PROG-5)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis

from invocation_store.adapters import RedisStore, StoreUnavailableError
from invocation_store.adapters._async.progress import async_progress_reader, async_read_progress
from invocation_store.adapters._progress import ProgressReader, progress_reader
from invocation_store.kernel import PROGRESS_FIELDS, ErrorCode, EvidenceStatus, ProgressView
from invocation_store.testing import FakeClock

from ._support import (
    LIMITS,
    RUN,
    TTL_MS,
    admitted,
    failed,
    monitored,
    name_and_key,
    open_default_run,
    ready,
    record_key,
    request,
)


def _fill(store: Any, clock: FakeClock) -> list[str]:
    """READY (found, no evidence), ERROR, PROJECTING records, one expired, with large requests."""
    open_default_run(store, clock(), tool_call_budget=20)
    big = '{"q": "' + "x" * 4_000 + '"}'
    first = admitted(store, request("old_1", arguments=big))
    done = ready(first, clock())
    assert store.complete(first, done) == done
    clock.advance(TTL_MS - 5)  # old_1 expires 5 ms from now
    for tcid, kind in (("ok_1", "found"), ("ok_2", "none"), ("err_1", "error"), ("proj_1", "projecting")):
        record = admitted(store, request(tcid, arguments=big))
        if kind == "found":
            store.complete(record, ready(record, clock(), raw="r" * 8_000))
        elif kind == "none":
            store.complete(record, ready(record, clock(), evidence=EvidenceStatus.NO_EVIDENCE, scope="logs"))
        elif kind == "error":
            store.complete(record, failed(record, clock(), ErrorCode.EXECUTION_FAILED))
    clock.advance(10)
    return ["old_1", "ok_1", "ok_2", "err_1", "proj_1", "ghost", "bad id"]


def test_progress_views_equal_the_records_fields(make_store: Any, clock: FakeClock) -> None:
    """CIS-PERF-3, CIS-TTL-4: get_progress answers each record's progress fields; expired/absent are None."""
    store = make_store(clock)
    ids = _fill(store, clock)
    assert isinstance(store, ProgressReader)
    views = store.get_progress(RUN, ids)
    records = store.get_many(RUN, ids, include_raw=False)
    assert list(views) == ids
    for tcid in ids:
        record = records[tcid]
        assert views[tcid] == (None if record is None else ProgressView.of(record))
    assert views["old_1"] is None  # expired by the store clock
    assert views["ghost"] is None
    assert views["bad id"] is None
    assert ProgressView._fields == PROGRESS_FIELDS


def test_stores_without_a_progress_read_fall_back_to_get_many(make_store: Any, clock: FakeClock) -> None:
    """CIS-PERF-3: a store of your own without get_progress still serves progress, through get_many."""
    store = make_store(clock)
    ids = _fill(store, clock)

    class Plain:
        def get_many(self, run_id: str, tool_call_ids: Any, *, include_raw: bool = True) -> Any:
            assert include_raw is False
            return store.get_many(run_id, tool_call_ids, include_raw=include_raw)

    assert progress_reader(Plain())(RUN, ids) == store.get_many(RUN, ids, include_raw=False)


def test_async_stores_without_a_progress_read_fall_back_to_get_many(
    make_async_store: Any, clock: FakeClock
) -> None:
    """CIS-PERF-3: an async store of your own without get_progress serves progress through
    get_many without raw responses: the same views, for the run and the ids asked."""

    async def main() -> None:
        store = make_async_store(clock)
        asked: list[tuple[str, tuple[str, ...], bool]] = []

        class Plain:
            async def get_many(self, run_id: str, tool_call_ids: Any, *, include_raw: bool = True) -> Any:
                asked.append((run_id, tuple(tool_call_ids), include_raw))
                return await store.get_many(run_id, tool_call_ids, include_raw=include_raw)

        try:
            await store.open_run(
                RUN, deadline_ms=clock() + 60_000, ttl_ms=TTL_MS, tool_call_budget=5, byte_budget=1 << 20
            )
            admission = await store.create(request("ok_1"), LIMITS)
            done = ready(admission.record, clock())
            await store.complete(admission.record, done)
            views = await async_read_progress(Plain(), RUN, ["ok_1", "ghost"])
            assert views == {"ok_1": ProgressView.of(done), "ghost": None}
            assert asked == [(RUN, ("ok_1", "ghost"), False)]
            reader = async_progress_reader(Plain())
            assert await reader(RUN, ["ok_1"]) == await store.get_many(RUN, ["ok_1"], include_raw=False)
            assert async_progress_reader(store) == store.get_progress  # a store that has one: its own
        finally:
            await store.close()

    asyncio.run(main())


@pytest.mark.redis
def test_redis_progress_reads_one_hmget_of_named_fields_per_record(
    private_redis_url: str, clock: FakeClock
) -> None:
    """CIS-PERF-3, CIS-PROG-5, CIS-STORE-5: one script call, one HMGET of the progress fields per record."""
    store = RedisStore.from_url(private_redis_url, prefix="cis-progress-test", clock=clock)
    try:
        ids = _fill(store, clock)[:5]
        with redis.Redis.from_url(private_redis_url) as raw:
            raw.script_flush()  # the first read loads the script after NOSCRIPT
        first = store.get_progress(RUN, ids)
        with monitored(private_redis_url) as commands:
            assert store.get_progress(RUN, ids) == first
        sent = [name_and_key(entry)[0] for entry in commands if entry.get("client_type") != "lua"]
        scripted = [entry for entry in commands if entry.get("client_type") == "lua"]
        assert sent == ["EVALSHA"]  # one round trip
        assert [name_and_key(entry)[0] for entry in scripted] == ["HMGET"] * 5
        for entry in scripted:
            assert str(entry["command"]).split(" ")[2:] == list(PROGRESS_FIELDS)
    finally:
        with redis.Redis.from_url(private_redis_url) as raw:
            keys = list(raw.scan_iter(match="cis-progress-test:*"))
            if keys:
                raw.delete(*keys)
        store.close()


@pytest.mark.redis
def test_redis_progress_views_of_foreign_or_corrupt_records_are_refused(
    redis_store_factory: Any, clock: FakeClock, redis_url: str
) -> None:
    """CIS-STORE-6, CIS-PERF-3: another run's record, a partial or an ill-formed one is STORE_UNAVAILABLE."""
    store = redis_store_factory(clock)
    open_default_run(store, clock())
    record = admitted(store, request())
    store.complete(record, ready(record, clock()))
    key = record_key(store.prefix, RUN, "call_1")
    with redis.Redis.from_url(redis_url) as client:
        good: dict[Any, Any] = dict(client.hgetall(key))
        for change in (
            {b"run_id": b"run-2"},
            {b"tool_call_id": b"call_2"},
            {b"sequence": b"one"},
            {b"status": b"DONE"},
            {b"evidence_status": b"ERROR"},  # READY with evidence ERROR: no transition makes it
        ):
            client.delete(key)
            client.hset(key, mapping={**good, **change})
            client.pexpire(key, 10_000)
            with pytest.raises(StoreUnavailableError) as caught:
                store.get_progress(RUN, ["call_1"])
            assert caught.value.__cause__ is None
        client.delete(key)
        client.hset(key, mapping={k: v for k, v in good.items() if k != b"status"})
        client.pexpire(key, 10_000)
        with pytest.raises(StoreUnavailableError):
            store.get_progress(RUN, ["call_1"])


def test_async_stores_answer_the_same_views(make_async_store: Any, make_store: Any, clock: FakeClock) -> None:
    """CIS-PERF-3: the async stores' get_progress equals the sync stores' on the same history."""
    sync_store = make_store(clock)
    ids = _fill(sync_store, clock)
    expected = sync_store.get_progress(RUN, ids)

    async def main() -> None:
        store = make_async_store(clock)
        try:
            await store.open_run(
                RUN, deadline_ms=clock() + 60_000, ttl_ms=TTL_MS, tool_call_budget=5, byte_budget=1 << 20
            )
            admission = await store.create(request("ok_1"), LIMITS)
            await store.complete(admission.record, ready(admission.record, clock()))
            views = await store.get_progress(RUN, ["ok_1", "ghost"])
            records = await store.get_many(RUN, ["ok_1"], include_raw=False)
            assert views["ok_1"] == ProgressView.of(records["ok_1"])
            assert views["ghost"] is None
            clock.advance(TTL_MS)  # lapsed by the store's clock, whatever the server still keeps
            assert await store.get_progress(RUN, ["ok_1"]) == {"ok_1": None}
        finally:
            await store.close()

    assert expected["ok_1"] is not None
    asyncio.run(main())


@pytest.mark.redis
def test_redis_progress_views_from_a_client_decoding_replies(redis_url: str, clock: FakeClock) -> None:
    """CIS-PERF-3, CIS-STORE-1: a given client with decode_responses=True answers the same views."""
    prefix = "cis-progress-text"
    text_client = redis.Redis.from_url(redis_url, decode_responses=True)
    bytes_store = RedisStore.from_url(redis_url, prefix=prefix, clock=clock)
    text_store = RedisStore(text_client, prefix=prefix, clock=clock)
    try:
        open_default_run(bytes_store, clock())
        record = admitted(bytes_store, request(arguments='{"q": "é 日本"}'))
        done = ready(record, clock(), raw="raw ü", content="ç 結果", scope="logs ü")
        assert bytes_store.complete(record, done) == done
        expected = {"call_1": ProgressView.of(done), "ghost": None}
        assert dict(bytes_store.get_progress(RUN, ["call_1", "ghost"])) == expected
        assert dict(text_store.get_progress(RUN, ["call_1", "ghost"])) == expected
    finally:
        with redis.Redis.from_url(redis_url) as raw:
            keys = list(raw.scan_iter(match=f"{prefix}:*"))
            if keys:
                raw.delete(*keys)
        bytes_store.close()
        text_client.close()
