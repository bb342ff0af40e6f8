"""No partial writes: a failure injected at each write position of a script leaves the keys as they were.

Redis scripts have no rollback, so the scripts make every check before their first
write (``_redis_scripts`` "No partial writes"). Each test plants one fault (a foreign
type, a foreign value, a key stripped of its TTL, a full memory), runs the operation
and compares a snapshot of every key (type, ``DUMP``) before and after.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
import redis

from invocation_store.adapters import RedisStore, StoreUnavailableError, done_key, run_key
from invocation_store.adapters import _redis_core as core
from invocation_store.adapters._redis_scripts import EXPIRY_SLACK_MS
from invocation_store.kernel import CanonicalRecord, ErrorCode, InvocationStatus, RunState
from invocation_store.testing import FakeClock
from invocation_store.testing.redis_server import redis_server

from ._support import LIMITS, RUN, admitted, failed, open_default_run, ready, record_key, request

pytestmark = pytest.mark.redis

Snapshot = dict[bytes, tuple[bytes, bytes | None]]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    """A private server for this module (CONFIG SET maxmemory is safe on it)."""
    with redis_server() as started:
        yield started


@pytest.fixture
def client(url: str) -> Iterator[redis.Redis]:
    with redis.Redis.from_url(url) as raw:
        raw.flushall()
        yield raw
        raw.config_set("maxmemory", 0)


@pytest.fixture
def store(url: str, clock: FakeClock) -> Iterator[RedisStore]:
    opened = RedisStore.from_url(url, prefix="pw", clock=clock)
    opened.check_server()
    yield opened
    opened.close()


def _snapshot(client: redis.Redis) -> Snapshot:
    snap: Snapshot = {}
    for key in client.scan_iter(match="*"):
        snap[key] = (client.type(key), client.dump(key))
    return snap


def _assert_every_key_has_a_ttl(client: redis.Redis, *, except_keys: tuple[str, ...] = ()) -> None:
    for key in client.scan_iter(match="*"):
        if key.decode() in except_keys:
            continue
        assert client.pttl(key) > 0, key


def _refused(operation: Callable[[], object]) -> StoreUnavailableError:
    with pytest.raises(StoreUnavailableError) as caught:
        operation()
    assert caught.value.code is ErrorCode.STORE_UNAVAILABLE
    return caught.value


def _foreign(client: redis.Redis, key: str) -> str:
    """Replace ``key`` with a SET (a type no script writes there), without TTL; return the key."""
    client.delete(key)
    client.sadd(key, "x")
    return key


# -- creates -------------------------------------------------------------------------


CREATE_FAULTS: dict[str, Callable[[redis.Redis, str], str]] = {
    # the calls LIST (RPUSH, the create's last write) holds another type
    "calls-list-foreign-type": lambda c, p: _foreign(c, core.calls_key(p, RUN)),
    # a run counter the create increments is not an integer
    "run-counter-foreign-value": lambda c, p: str(c.hset(run_key(p, RUN), "bytes_used", "lots") and ""),
    # the record key (HSET, the first write) holds another type
    "record-foreign-type": lambda c, p: _foreign(c, record_key(p, RUN, "call_2")),
}


@pytest.mark.parametrize("fault", sorted(CREATE_FAULTS))
def test_a_create_meeting_a_foreign_key_writes_nothing(
    fault: str, client: redis.Redis, store: RedisStore, clock: FakeClock
) -> None:
    """CIS-DUR-7: a create whose write would fail part-way (foreign type or value at a write
    position) is refused before its first write: every key is exactly as before."""
    open_default_run(store, clock())
    admitted(store, request("call_1"))
    planted = CREATE_FAULTS[fault](client, store.prefix)
    before = _snapshot(client)
    _refused(lambda: store.create(request("call_2"), LIMITS))
    assert _snapshot(client) == before
    _assert_every_key_has_a_ttl(client, except_keys=(planted,) if planted else ())


# -- completions -----------------------------------------------------------------------


COMPLETE_FAULTS: dict[str, Callable[[redis.Redis, str], str]] = {
    # the done LIST (RPUSH, the completion's last write) holds another type
    "done-list-foreign-type": lambda c, p: _foreign(c, done_key(p, RUN)),
    # the run's byte counter (HINCRBY) is not an integer
    "run-bytes-foreign-value": lambda c, p: str(c.hset(run_key(p, RUN), "bytes_used", "lots") and ""),
}


@pytest.mark.parametrize("fault", sorted(COMPLETE_FAULTS))
@pytest.mark.parametrize("raw_size", [10, 40_000])  # argument or staged raw response
def test_a_completion_meeting_a_foreign_key_writes_nothing(
    fault: str, raw_size: int, client: redis.Redis, store: RedisStore, clock: FakeClock
) -> None:
    """CIS-DUR-7: a completion whose later writes would fail is refused before its first write:
    the record stays PROJECTING with its TTL, no raw response is stored, no staging key is left."""
    open_default_run(store, clock())
    created = admitted(store, request("call_1"))
    planted = COMPLETE_FAULTS[fault](client, store.prefix)
    before = _snapshot(client)
    _refused(lambda: store.complete(created, ready(created, clock(), raw="r" * raw_size)))
    assert _snapshot(client) == before
    _assert_every_key_has_a_ttl(client, except_keys=(planted,) if planted else ())
    client.delete(planted) if planted else client.hset(run_key(store.prefix, RUN), "bytes_used", "0")
    assert store.get(RUN, "call_1") == created


# -- keys without TTL ------------------------------------------------------------------


def test_a_record_without_ttl_is_corrupt_and_never_completed(
    client: redis.Redis, store: RedisStore, clock: FakeClock
) -> None:
    """CIS-DUR-7: a record whose TTL was removed from outside (PTTL -1) is reported as corrupt by every
    read and is never completed: the completion writes nothing (no raw response that lapses at once)."""
    open_default_run(store, clock())
    created = admitted(store, request("call_1"))
    client.persist(record_key(store.prefix, RUN, "call_1"))
    before = _snapshot(client)
    for operation in (
        lambda: store.complete(created, ready(created, clock())),
        lambda: store.complete(created, failed(created, clock(), ErrorCode.EXECUTION_FAILED)),
        lambda: store.get(RUN, "call_1"),
        lambda: store.ttl_remaining_ms(RUN, "call_1"),
        lambda: store.create(request("call_1"), LIMITS),
    ):
        assert _refused(operation).cause in {"NoTTL", "CorruptRecord"}
    assert _snapshot(client) == before


def test_a_run_without_ttl_is_corrupt_and_never_used(
    client: redis.Redis, store: RedisStore, clock: FakeClock
) -> None:
    """CIS-DUR-7: a run whose TTL was removed from outside is never admitted into, reopened, ended, or
    charged by a completion; nothing is written."""
    open_default_run(store, clock())
    created = admitted(store, request("call_1"))
    client.persist(run_key(store.prefix, RUN))
    before = _snapshot(client)
    for operation in (
        lambda: store.create(request("call_2"), LIMITS),
        lambda: open_default_run(store, clock()),
        lambda: store.cancel_run(RUN),
        lambda: store.complete(created, ready(created, clock())),
    ):
        assert _refused(operation).cause == "NoTTL"
    assert _snapshot(client) == before


# -- full memory ------------------------------------------------------------------------


def _record(store: RedisStore, tool_call_id: str) -> CanonicalRecord | None:
    return store.get(RUN, tool_call_id)


def test_a_full_memory_never_leaves_half_a_write(
    client: redis.Redis, store: RedisStore, clock: FakeClock
) -> None:
    """CIS-DUR-7: with maxmemory reached (noeviction), a create writes nothing (its first write is
    refused), and a completion is all or nothing: the record is either still the PROJECTING one or
    exactly the completed one, and every key keeps its TTL."""
    open_default_run(store, clock())
    first = admitted(store, request("call_1"))
    second = admitted(store, request("call_2"))
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory", max(1, used // 2))
    before = _snapshot(client)
    refused = _refused(lambda: store.create(request("call_3"), LIMITS))
    assert refused.cause in {"OutOfMemoryError", "ResponseError"}  # Redis 6.2 wraps the OOM in a script error
    assert _snapshot(client) == before
    for record, raw_size in ((first, 10), (second, 40_000)):
        after = ready(record, clock(), raw="r" * raw_size)
        try:
            outcome: object = store.complete(record, after)
        except StoreUnavailableError as exc:
            outcome = exc
        client.config_set("maxmemory", 0)
        stored = _record(store, record.tool_call_id)
        if isinstance(outcome, StoreUnavailableError):
            assert stored == record
            assert stored is not None
            assert stored.status is InvocationStatus.PROJECTING
        else:
            assert outcome == after
            assert stored == after
        _assert_every_key_has_a_ttl(client)
        client.config_set("maxmemory", max(1, used // 2))
    assert not list(client.scan_iter(match="*:stage:*"))


def test_on_the_server_clock_a_run_without_ttl_is_corrupt_once_past_its_expiry(client: redis.Redis) -> None:
    """CIS-DUR-7, CIS-STORE-10: a store on the server's clock judges a run by its stored expiry (the
    create's check folded into the read it makes anyway): a run whose TTL was removed admits nothing
    after that expiry, and from EXPIRY_SLACK_MS after it every create, open and cancel is NoTTL with
    nothing written. A record without TTL is never completed on the server's clock either."""
    store = RedisStore(client, prefix="srvclk")
    opened = store.open_run(
        RUN, deadline_ms=store.now_ms() + 200, ttl_ms=300, tool_call_budget=5, byte_budget=10**6
    )
    assert isinstance(opened, RunState)
    created = admitted(store, request("call_1"))
    client.persist(record_key("srvclk", RUN, "call_1"))
    assert _refused(lambda: store.complete(created, ready(created, store.now_ms()))).cause == "NoTTL"
    client.persist(run_key("srvclk", RUN))
    while store.now_ms() < opened.expires_at_ms + EXPIRY_SLACK_MS + 20:
        time.sleep(0.05)
    before = _snapshot(client)
    for operation in (
        lambda: store.create(request("call_2"), LIMITS),
        lambda: store.open_run(
            RUN, deadline_ms=store.now_ms() + 1_000, ttl_ms=300, tool_call_budget=5, byte_budget=9
        ),
        lambda: store.cancel_run(RUN),
    ):
        assert _refused(operation).cause == "NoTTL"
    assert _snapshot(client) == before
