"""One contract, every store: the shipped suite over every flavour, plus what only a server can break.

:class:`TestEveryStore` runs :class:`~invocation_store.testing.contract.StoreContract`
(the suite a third-party store runs too) on every flavour of ``conftest.FLAVOURS``:
memory, async memory, SQLite, async SQLite, PostgreSQL, async PostgreSQL, Redis, async
Redis and Redis Cluster. The tests below it hold the Redis stores to rules only a
store with a server can break (a tampered key, a planted script, staging keys).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from attrs import evolve

from invocation_store.adapters import StoreUnavailableError, call_key, run_key
from invocation_store.adapters._redis_core import STAGE_ABOVE_BYTES, STAGE_TTL_MS
from invocation_store.kernel import ErrorCode, RunStatus, utf8_len
from invocation_store.testing import FakeClock
from invocation_store.testing.contract import StoreContract

from ._support import LIMITS, RUN, TTL_MS, admitted, open_default_run, ready, request, with_planted_script
from .conftest import FLAVOUR_PARAMS, MakeDriver, driver_factory


class TestEveryStore(StoreContract):
    """CIS-STORE-8: the shipped store contract on every store flavour of this package."""

    @pytest.fixture(params=FLAVOUR_PARAMS)
    def make_driver(self, request: pytest.FixtureRequest) -> Iterator[MakeDriver]:  # type: ignore[override]
        """One fresh store of each flavour per test."""
        yield from driver_factory(request)


def test_a_foreign_record_is_never_served(make_redis_driver: MakeDriver, clock: FakeClock) -> None:
    """CIS-STORE-6: a stored record of another run or call, or a corrupt one, is STORE_UNAVAILABLE.

    Sync, async and cluster Redis stores alike check, after every read, that what came
    back is the record asked for: a reply left behind on a connection never serves
    another run's data.
    """
    store = make_redis_driver(clock)
    client = store.redis_client
    assert client is not None
    open_default_run(store, clock())
    record = admitted(store, request())
    key = call_key(store.prefix, RUN, "call_1")
    good = dict(client.hgetall(key))
    reads: list[Callable[[], object]] = [
        lambda: store.get(RUN, "call_1"),
        lambda: store.get_many(RUN, ["call_1"]),
        lambda: store.get_many(RUN, ["call_1"], include_raw=False),
    ]
    for field, value, cause in (
        (b"run_id", b"run-2", "IdentityMismatch"),
        (b"tool_call_id", b"call_2", "IdentityMismatch"),
        (b"sequence", b"one", "CorruptInteger"),
        (b"status", b"DONE", "CorruptRecord"),  # no such status: a record that does not decode
        (b"status", b"READY", "CorruptRecord"),  # READY without evidence: no transition makes it
        (b"unexpected", b"x", "CorruptRecord"),
    ):
        client.delete(key)
        client.hset(key, mapping={**good, field: value})
        client.pexpire(key, 10_000)
        for read in reads:
            with pytest.raises(StoreUnavailableError) as caught:
                read()
            assert caught.value.code is ErrorCode.STORE_UNAVAILABLE, (field, store.flavour)
            assert caught.value.__cause__ is None
            assert caught.value.cause == cause, (field, store.flavour)
    client.delete(key)
    client.hset(key, mapping={**good, b"run_id": b"run-2"})
    client.pexpire(key, 10_000)
    with pytest.raises(StoreUnavailableError):
        store.ttl_remaining_ms(RUN, "call_1")
    client.hset(run_key(store.prefix, RUN), "run_id", "run-2")
    for run_read in (lambda: store.get_run(RUN), lambda: store.calls(RUN)):
        with pytest.raises(StoreUnavailableError):
            run_read()
    assert record.run_id == RUN


#: Lua mirrors planted with a refusal the kernel would not make: (script attribute,
#: text, replacement). Each must surface as STORE_UNAVAILABLE ("KernelDisagrees"),
#: never as the wrong refusal.
_WRONG_REFUSALS = {
    "bytes-at-equality": ("_create", "if bytes > tonumber(run[10])", "if bytes >= tonumber(run[10])"),
    "calls-at-equality": ("_create", "if used > tonumber(run[9])", "if used >= tonumber(run[9])"),
    "deadline-early": ("_create", "if now >= tonumber(run[6])", "if now + 1 >= tonumber(run[6])"),
    "retried-cancel": ("_end", "cur[2] ~= 'ACTIVE' and cur[2] ~= ARGV[2]", "cur[2] ~= 'ACTIVE'"),
    "reopen-counts": ("_open", "{1, 4, 5, 6, 7, 8}", "{1, 4, 5, 6, 7, 8, 9}"),
    "write-refused": ("_complete", "if s[1] == 'PROJECTING' then", "if s[1] == 'PROJECTING' and false then"),
    "replay-refused": ("_complete", "if s[1] == status and", "if s[1] ~= status and"),
}


@pytest.mark.parametrize("fault", sorted(_WRONG_REFUSALS))
def test_a_refusal_the_kernel_would_not_make_is_caught(
    make_redis_driver: MakeDriver, clock: FakeClock, fault: str
) -> None:
    """CIS-STORE-8, CIS-FAIL-5: every ERR reply of a script is re-decided by the kernel on the state it saw.

    A Lua mirror that refuses at ``used + size == budget`` (or any other refusal the
    kernel would not make) is a corrupt reply, not a budget answer.
    """
    store = with_planted_script(make_redis_driver(clock), *_WRONG_REFUSALS[fault])
    arguments = '{"a": 1}'
    size = utf8_len(arguments)
    run = open_default_run(store, clock(), tool_call_budget=1, byte_budget=size, deadline_in_ms=5)
    clock.now = run.deadline_ms - 1
    if fault == "retried-cancel":
        assert store.cancel_run(RUN) == evolve(run, status=RunStatus.CANCELLED)
    record = None
    if fault in ("reopen-counts", "write-refused", "replay-refused"):
        record = admitted(store, request(arguments=arguments))
    done = None if record is None else ready(record, clock())
    if fault == "replay-refused":
        assert store.complete(record, done) == done  # the write itself; its retry is refused
    operations: dict[str, Callable[[], object]] = {
        "retried-cancel": lambda: store.cancel_run(RUN),
        "reopen-counts": lambda: store.open_run(
            RUN, deadline_ms=run.deadline_ms, ttl_ms=TTL_MS, tool_call_budget=1, byte_budget=size
        ),
        "write-refused": lambda: store.complete(record, done),  # type: ignore[arg-type]
        "replay-refused": lambda: store.complete(record, done),  # type: ignore[arg-type]
    }
    operation = operations.get(fault, lambda: store.create(request(arguments=arguments), LIMITS))
    with pytest.raises(StoreUnavailableError) as caught:
        operation()
    assert caught.value.cause == "KernelDisagrees"
    assert caught.value.code is ErrorCode.STORE_UNAVAILABLE


def test_a_failed_completion_leaves_no_key_without_a_ttl(
    make_redis_driver: MakeDriver, clock: FakeClock
) -> None:
    """CIS-STORE-5, CIS-FAIL-5: a large raw response is staged with a TTL; a script that fails leaves
    the staging key expiring, the record untouched (sync, async and cluster stores alike)."""
    store = with_planted_script(
        make_redis_driver(clock), "_complete", "now = tonumber(now)", "now = tonumber(now) error('planted')"
    )
    client = store.redis_client
    assert client is not None
    open_default_run(store, clock(), byte_budget=10_000_000)
    record = admitted(store, request("staged"))
    big = "z" * (STAGE_ABOVE_BYTES + 1)
    with pytest.raises(StoreUnavailableError):
        store.complete(record, ready(record, clock(), raw=big))
    staged = list(client.scan_iter(match=f"{store.prefix}:*:stage:*"))
    assert len(staged) == 1
    assert 0 < client.pttl(staged[0]) <= STAGE_TTL_MS
    assert store.get(RUN, "staged") == record


def test_the_run_key_expires_with_the_run(make_redis_driver: MakeDriver, clock: FakeClock) -> None:
    """CIS-RUN-3, CIS-TTL-1: the run's Redis key expires at deadline + ttl, never later (PTTL, real time)."""
    store = make_redis_driver(clock)
    client = store.redis_client
    assert client is not None
    run = open_default_run(store, clock(), ttl_ms=5_000, deadline_in_ms=1_000)
    remaining = client.pttl(run_key(store.prefix, RUN))
    assert 0 < remaining <= run.expires_at_ms - clock()


def test_raw_sizes_measure_raw_responses_without_reading_them(
    make_redis_driver: MakeDriver, clock: FakeClock
) -> None:
    """CIS-DUR-9, CIS-SIZE-1: every Redis flavour sizes each stored raw response in UTF-8 bytes
    (inline or staged alike); a record without one, an unknown id and an unsafe id are None."""
    store = make_redis_driver(clock)
    open_default_run(store, clock())
    small = admitted(store, request("call_1"))
    large = admitted(store, request("call_2"))
    admitted(store, request("call_3"))
    raw_small = '{"city": "Zürich"}'
    raw_large = "é" * STAGE_ABOVE_BYTES  # over the staging threshold: renamed into place
    assert store.complete(small, ready(small, clock(), raw=raw_small)) == ready(small, clock(), raw=raw_small)
    assert store.complete(large, ready(large, clock(), raw=raw_large)) == ready(large, clock(), raw=raw_large)
    ids = ["call_1", "call_2", "call_3", "nope", "bad id"]
    assert dict(store.raw_sizes(RUN, ids)) == {
        "call_1": len(raw_small.encode()),
        "call_2": 2 * STAGE_ABOVE_BYTES,
        "call_3": None,
        "nope": None,
        "bad id": None,
    }
    assert dict(store.raw_sizes("bad run", ["call_1"])) == {"call_1": None}
