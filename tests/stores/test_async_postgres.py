"""AsyncPostgresStore's own I/O shell: what the sync store's tests in test_sql_stores.py hold, on the
asyncio module (its own code: the isolation level, the sweep after writes, the pool's wait)."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import psycopg_pool
import pytest

from invocation_store._deadline import operation_deadline
from invocation_store.adapters import RetryPolicy, StoreUnavailableError
from invocation_store.adapters._sql import Execute, Fetch
from invocation_store.adapters.postgres import AsyncPostgresStore, PostgresStore
from invocation_store.kernel import Admission, RunState
from invocation_store.testing import FakeClock
from invocation_store.testing._factories import drop_tables
from invocation_store.testing.postgres_server import PostgresServer

from ._support import LIMITS, RUN, StoreDriver, request

pytestmark = pytest.mark.postgres


def _store(flavour: str, dsn: str, **options: Any) -> Any:
    """A PostgresStore ("sync") or AsyncPostgresStore ("async") from ``dsn`` with the store ``options``."""
    kind: Any = PostgresStore if flavour == "sync" else AsyncPostgresStore
    return kind.from_dsn(dsn, **options)


def _run(dsn: str, flow: Callable[[AsyncPostgresStore], Awaitable[Any]], **options: Any) -> Any:
    """``flow(store)`` on a fresh AsyncPostgresStore of ``dsn`` (own tables, closed and dropped after)."""
    prefix = f"cis_async_{secrets.token_hex(4)}_"

    async def main() -> Any:
        store = AsyncPostgresStore.from_dsn(dsn, prefix=prefix, **options)
        try:
            return await flow(store)
        finally:
            await store.close()

    try:
        return asyncio.run(main())
    finally:
        drop_tables(dsn, prefix)


async def _open(store: AsyncPostgresStore, now: int, ttl_ms: int = 60_000) -> None:
    opened = await store.open_run(
        RUN, deadline_ms=now + 60_000, ttl_ms=ttl_ms, tool_call_budget=5, byte_budget=1000
    )
    assert isinstance(opened, RunState)


def test_every_transaction_runs_at_read_committed(postgres_dsn: str) -> None:
    """CIS-STORE-4: on a server whose sessions default to SERIALIZABLE, every transaction the async
    store runs (schema check, writes, reads, the sweep) is READ COMMITTED."""
    dsn = psycopg.conninfo.make_conninfo(
        postgres_dsn, options="-c default_transaction_isolation=serializable"
    )
    seen: list[str] = []

    async def flow(store: AsyncPostgresStore) -> None:
        original = store._answer

        async def answer(conn: Any, step: object) -> Any:
            found = await (await conn.execute("SHOW transaction_isolation")).fetchone()
            seen.append(str(found[0]))
            return await original(conn, step)

        store._answer = answer  # type: ignore[method-assign]
        await _open(store, store.now_ms())
        assert isinstance(await store.create(request("call_1"), LIMITS), Admission)
        assert await store.get(RUN, "call_1") is not None
        assert await store.sweep_lapsed() == 0

    _run(dsn, flow)
    assert len(seen) >= 5
    assert set(seen) == {"read committed"}


def test_writes_sweep_when_due_and_reads_never(postgres_dsn: str) -> None:
    """CIS-TTL-4: with a sweep due, reads leave lapsed rows alone; the next write sweeps them; with
    no interval (0) nothing sweeps by itself."""
    clock = FakeClock(1_000_000)

    async def flow(store: AsyncPostgresStore) -> tuple[int, int]:
        await _open(store, clock(), ttl_ms=100)
        assert isinstance(await store.create(request("call_1"), LIMITS), Admission)
        clock.advance(10**6)  # the record and the run lapse
        store._last_sweep = 0.0  # a sweep is due
        assert await store.get(RUN, "call_1") is None
        assert await store.get_many(RUN, ["call_1"]) == {"call_1": None}
        assert await store.get_progress(RUN, ["call_1"]) == {"call_1": None}
        assert await store.get_run(RUN) is None
        assert await store.calls(RUN) == ()
        assert await store.completed(RUN) == ()
        left_by_reads = await store.sweep_lapsed()
        await _open(store, clock(), ttl_ms=100)  # the same run again, lapsed again, then a write
        clock.advance(10**6)
        store._last_sweep = 0.0
        opened = await store.open_run(
            "run-2", deadline_ms=clock() + 10, ttl_ms=10, tool_call_budget=1, byte_budget=1
        )
        assert isinstance(opened, RunState)
        return left_by_reads, await store.sweep_lapsed()

    left_by_reads, left_by_write = _run(postgres_dsn, flow, clock=clock, sweep_interval_ms=1, sweep_limit=10)
    assert left_by_reads == 2  # the record and the run: no read swept them
    assert left_by_write == 0  # the write swept the lapsed run itself

    async def idle(store: AsyncPostgresStore) -> int:
        await _open(store, clock(), ttl_ms=100)
        clock.advance(10**6)
        store._last_sweep = 0.0
        await store.open_run("run-2", deadline_ms=clock() + 10, ttl_ms=10, tool_call_budget=1, byte_budget=1)
        return await store.sweep_lapsed()

    assert _run(postgres_dsn, idle, clock=clock, sweep_interval_ms=0) == 1  # nothing swept it


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_database_down_at_first_use_is_unavailable_within_the_budget_then_served(flavour: str) -> None:
    """CIS-DUR-4, CIS-STORE-9: a store whose database is down when it is first used answers
    STORE_UNAVAILABLE within the retry budget (plus a connect attempt), naming only the failure's
    type; once the database is up, the same store serves (its pool was not closed for good)."""
    clock = FakeClock(1_000_000)
    prefix = f"cis_down_{secrets.token_hex(4)}_"
    with PostgresServer() as server:
        server.stop()
        store = _store(flavour, server.dsn, prefix=prefix, clock=clock, retry=RetryPolicy(budget_ms=200))
        driver = StoreDriver(store, flavour)
        try:
            started = time.monotonic()
            with pytest.raises(StoreUnavailableError) as caught:
                driver.get_run(RUN)
            assert (
                time.monotonic() - started < 1.0
            )  # the 0.2 s budget and a refused connect, not the pool's 30 s
            assert caught.value.cause in {"PoolTimeout", "OperationalError"}
            assert str(server.port) not in str(caught.value)
            on_db_clock = _store(flavour, server.dsn, prefix=prefix)  # no clock: reads the database's
            with pytest.raises(StoreUnavailableError) as unclocked:
                on_db_clock.now_ms()  # its first reading, on a connection of its own
            assert unclocked.value.cause == "OperationalError"
            server.start()
            deadline = time.monotonic() + 20
            while True:  # the pool reconnects in the background
                try:
                    opened = driver.open_run(
                        RUN, deadline_ms=clock() + 60_000, ttl_ms=60_000, tool_call_budget=1, byte_budget=10
                    )
                    break
                except StoreUnavailableError:
                    assert time.monotonic() < deadline, "the store never recovered"
                    time.sleep(0.2)
            assert isinstance(opened, RunState)
            assert driver.get_run(RUN) == opened
        finally:
            driver.close()


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_closed_store_is_unavailable_at_once(postgres_dsn: str, flavour: str) -> None:
    """CIS-DUR-4: a closed pool never opens again, so an operation on a closed store answers
    STORE_UNAVAILABLE (PoolClosed) at once instead of retrying for the whole budget (2 s here)."""
    clock = FakeClock(1_000_000)
    prefix = f"cis_closed_{secrets.token_hex(4)}_"
    store = _store(flavour, postgres_dsn, prefix=prefix, clock=clock)
    driver = StoreDriver(store, flavour)
    try:
        assert driver.get_run(RUN) is None  # opened, schema made
        if flavour == "sync":
            store.close()
        else:
            assert driver._loop is not None
            driver._loop.run_until_complete(store.close())
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError) as caught:
            driver.get_run(RUN)
        assert caught.value.cause == "PoolClosed"
        assert time.monotonic() - started < 0.5
    finally:
        driver.close()
        drop_tables(postgres_dsn, prefix)


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_later_step_after_the_deadline_is_unavailable_at_once(postgres_dsn: str, flavour: str) -> None:
    """CIS-DUR-4, CIS-DUR-13: inside one enclosing deadline (the boundary's completion retry, a
    caller's budget), a store operation started after it passed is STORE_UNAVAILABLE (TimeoutError)
    before any statement: never a late write."""
    clock = FakeClock(1_000_000)
    prefix = f"cis_spent_{secrets.token_hex(4)}_"
    store = _store(flavour, postgres_dsn, prefix=prefix, clock=clock)
    driver = StoreDriver(store, flavour)
    try:
        opened = driver.open_run(
            RUN, deadline_ms=clock() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=99
        )
        assert isinstance(opened, RunState)
        with operation_deadline(50):
            assert driver.get_run(RUN) == opened  # the scope's first step always runs
            time.sleep(0.1)
            with pytest.raises(StoreUnavailableError) as caught:
                driver.create(request("late"), LIMITS)
        assert caught.value.cause == "TimeoutError"
        assert driver.get(RUN, "late") is None
    finally:
        driver.close()
        drop_tables(postgres_dsn, prefix)


def test_the_async_sweep_is_bounded_by_its_limit(postgres_dsn: str) -> None:
    """CIS-TTL-4: sweep_lapsed(limit) deletes at most ``limit`` lapsed records; 0 or below deletes
    nothing; no limit takes the store's sweep_limit."""
    clock = FakeClock(1_000_000)

    async def flow(store: AsyncPostgresStore) -> list[int]:
        await _open(store, clock(), ttl_ms=100)
        for index in range(4):
            assert isinstance(await store.create(request(f"call_{index}"), LIMITS), Admission)
        clock.advance(100)  # the four records lapse; the run lives until deadline + ttl
        return [
            await store.sweep_lapsed(limit=0),
            await store.sweep_lapsed(limit=-1),
            await store.sweep_lapsed(limit=1),
            await store.sweep_lapsed(),  # sweep_limit=2
            await store.sweep_lapsed(limit=5),
        ]

    assert _run(postgres_dsn, flow, clock=clock, sweep_limit=2, sweep_interval_ms=0) == [0, 0, 1, 2, 1]


def test_the_async_first_clock_reading_uses_the_pools_connection_settings(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CIS-STORE-10: the async store's now_ms() before any operation reads the database its pool
    reaches, with the pool's kwargs (here the port; libpq's default port is made useless)."""
    from psycopg_pool import AsyncConnectionPool  # noqa: PLC0415 - the postgres extra

    params = psycopg.conninfo.conninfo_to_dict(postgres_dsn)
    port = params.pop("port")
    monkeypatch.setenv("PGPORT", "1")  # nothing listens there
    prefix = f"cis_aclock_{secrets.token_hex(4)}_"

    async def flow() -> int:
        pool = AsyncConnectionPool(
            psycopg.conninfo.make_conninfo(**params), kwargs={"port": port}, open=False
        )
        store = AsyncPostgresStore(pool, prefix=prefix)
        try:
            return store.now_ms()
        finally:
            await store.close()
            await pool.close()

    first = asyncio.run(flow())
    with psycopg.connect(postgres_dsn) as conn:
        row = conn.execute("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint").fetchone()
    assert row is not None
    assert abs(int(row[0]) - first) < 5_000
    drop_tables(postgres_dsn, prefix)


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_the_wait_for_a_connection_ends_at_the_enclosing_deadline(flavour: str) -> None:
    """CIS-DUR-4, CIS-DUR-13: with the database down, an operation inside an enclosing deadline
    (the boundary's completion retry, a caller's budget) shorter than the store's retry budget
    answers STORE_UNAVAILABLE by that deadline: the wait for a pooled connection is bounded by the
    time the deadline leaves, not by the whole retry budget (1.5 s here). A budget-0 caller
    ("never retry") bounds no step: the wait is the store's own budget."""
    clock = FakeClock(1_000_000)
    prefix = f"cis_wait_{secrets.token_hex(4)}_"
    with PostgresServer() as server:
        server.stop()
        store = _store(flavour, server.dsn, prefix=prefix, clock=clock, retry=RetryPolicy(budget_ms=1_500))
        driver = StoreDriver(store, flavour)
        try:
            for budget_ms, expected_s in ((300, 0.3), (600, 0.6), (0, 1.5)):
                started = time.monotonic()
                with operation_deadline(budget_ms), pytest.raises(StoreUnavailableError) as caught:
                    driver.get_run(RUN)
                took = time.monotonic() - started
                assert expected_s - 0.05 <= took < expected_s + 0.7, (budget_ms, took)
                assert caught.value.cause in {"PoolTimeout", "OperationalError"}
        finally:
            driver.close()


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_from_dsn_builds_the_pool_it_documents(flavour: str) -> None:
    """CIS-STORE-9: ``from_dsn`` makes a pool of ``min_size`` .. ``max_size`` connections (1 .. 10 by
    default), each named by ``application_name`` and giving up a connect after 5 s, opened on first
    use (nothing is connected here: the address is never dialled)."""
    dsn = "postgresql://nobody@127.0.0.1:9/none"
    store = _store(flavour, dsn)
    pool = store._pool
    assert (pool.min_size, pool.max_size) == (1, 10)
    assert pool.kwargs == {"application_name": "invocation-store", "connect_timeout": 5}
    assert pool.closed
    sized = _store(flavour, dsn, min_size=2, max_size=3, application_name="billing")
    assert (sized._pool.min_size, sized._pool.max_size) == (2, 3)
    assert sized._pool.kwargs["application_name"] == "billing"


def _planted(store: Any, flavour: str, plant: Callable[[object], Any]) -> None:
    """Answer each step with ``plant(step)`` when it is not None (a value or an exception to raise)."""
    original = store._answer
    if flavour == "sync":

        def answer(conn: Any, step: object) -> Any:
            planted = plant(step)
            if isinstance(planted, BaseException):
                raise planted
            return original(conn, step) if planted is None else planted

        store._answer = answer
    else:

        async def answer_async(conn: Any, step: object) -> Any:
            planted = plant(step)
            if isinstance(planted, BaseException):
                raise planted
            return await original(conn, step) if planted is None else planted

        store._answer = answer_async


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_an_insert_that_keeps_conflicting_is_unavailable_after_five_attempts(
    postgres_dsn: str, flavour: str
) -> None:
    """CIS-STORE-2, CIS-DUR-4: an insert that finds its row there runs the operation again (the
    next attempt reads the row); one that never lands (as a trigger or a row policy could make it)
    is STORE_UNAVAILABLE (Conflict) after CONFLICT_ATTEMPTS (5) runs, never a loop."""
    clock = FakeClock(1_000_000)
    prefix = f"cis_conflict_{secrets.token_hex(4)}_"
    store = _store(flavour, postgres_dsn, prefix=prefix, clock=clock)
    driver = StoreDriver(store, flavour)
    inserts: list[object] = []

    def plant(step: object) -> object:
        if isinstance(step, Execute) and step.sql == store._sql.insert_run:
            inserts.append(step)
            return 0 if len(inserts) < 50 else RuntimeError("looped")  # as if a concurrent insert won
        return None

    try:
        assert driver.get_run(RUN) is None  # the schema is made
        _planted(store, flavour, plant)
        with pytest.raises(StoreUnavailableError) as caught:
            driver.open_run(
                RUN, deadline_ms=clock() + 60_000, ttl_ms=60_000, tool_call_budget=1, byte_budget=9
            )
        assert caught.value.cause == "Conflict"
        assert len(inserts) == 5
    finally:
        driver.close()
        drop_tables(postgres_dsn, prefix)


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_transient_failure_is_retried_after_a_short_pause_and_others_are_named(
    postgres_dsn: str, flavour: str
) -> None:
    """CIS-DUR-4: a lost connection (OperationalError) in a step runs the transaction again after
    the policy's pause (milliseconds: 5 ms here, well inside the 2 s budget), and the operation
    answers; a failure that is not transient (InternalError) is STORE_UNAVAILABLE at once, naming
    its type."""
    clock = FakeClock(1_000_000)
    prefix = f"cis_transient_{secrets.token_hex(4)}_"
    policy = RetryPolicy(budget_ms=2_000, first_delay_ms=5, max_delay_ms=5)
    store = _store(flavour, postgres_dsn, prefix=prefix, clock=clock, retry=policy)
    driver = StoreDriver(store, flavour)
    failures = [psycopg.OperationalError("planted: connection lost")]
    reads: list[object] = []

    def plant(step: object) -> object:
        if isinstance(step, Fetch) and step.sql == store._sql.select_run:
            reads.append(step)
            return failures.pop() if failures else None
        return None

    try:
        opened = driver.open_run(
            RUN, deadline_ms=clock() + 60_000, ttl_ms=60_000, tool_call_budget=1, byte_budget=9
        )
        _planted(store, flavour, plant)
        started = time.monotonic()
        assert driver.get_run(RUN) == opened
        assert len(reads) == 2  # the failed attempt and the retry
        assert time.monotonic() - started < 1.0
        failures.append(psycopg.errors.InternalError("planted"))
        with pytest.raises(StoreUnavailableError) as caught:
            driver.get_run(RUN)
        assert caught.value.cause == "InternalError"
        assert len(reads) == 3  # not retried
    finally:
        driver.close()
        drop_tables(postgres_dsn, prefix)


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_pool_the_caller_never_opened_is_not_opened_by_the_store(postgres_dsn: str, flavour: str) -> None:
    """CIS-STORE-9: a pool given by the caller is the caller's to open; one never opened is
    STORE_UNAVAILABLE (PoolClosed) at once, and stays closed (only a pool from_dsn made is opened
    on first use)."""
    kind: Any = PostgresStore if flavour == "sync" else AsyncPostgresStore
    pool_kind: Any = psycopg_pool.ConnectionPool if flavour == "sync" else psycopg_pool.AsyncConnectionPool
    pool = pool_kind(postgres_dsn, min_size=1, max_size=1, open=False)
    store = kind(pool, clock=FakeClock(1_000_000), prefix=f"cis_given_{secrets.token_hex(4)}_")
    driver = StoreDriver(store, flavour)
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError) as caught:
            driver.get_run(RUN)
        assert caught.value.cause == "PoolClosed"
        assert time.monotonic() - started < 0.5
        assert pool.closed
    finally:
        driver.close()
