"""The SQL stores' durability table: a test per promised cell (docs/durability.md, CIS-DUR-1).

- SQLite, WAL + ``synchronous=FULL``: a process killed with SIGKILL while it creates
  loses no acknowledged record.
- PostgreSQL, ``synchronous_commit=on``: a server crash (SIGKILL, then recovery) loses
  no acknowledged record.
- PostgreSQL with a synchronous standby (``synchronous_standby_names``,
  ``synchronous_commit=remote_apply``): the primary lost for good, the promoted standby
  holds every acknowledged record; without a standby answering, a commit is never
  acknowledged.
- PostgreSQL, ``synchronous_commit=off``: the store asks for it on every write
  transaction (what it survives is PostgreSQL's: a crash may lose the last commits).

The table's "not promised" cells (``synchronous_commit=off`` in a crash, a primary lost
without a standby) promise nothing, so nothing is measured for them here.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from invocation_store.adapters import StoreUnavailableError
from invocation_store.adapters.postgres import AsyncPostgresStore, PostgresStore
from invocation_store.adapters.sqlite import SqliteStore
from invocation_store.kernel import Admission
from invocation_store.testing.postgres_server import PostgresServer, PostgresUnavailableError

from ._support import LIMITS, RUN, open_default_run, request

_CREATOR = textwrap.dedent(
    """
    import sys
    from invocation_store.adapters.sqlite import SqliteStore
    from invocation_store.kernel import Admission, AdmissionRequest, Limits
    store = SqliteStore(sys.argv[1])
    index = 0
    while True:
        result = store.create(AdmissionRequest(run_id="run-1", tool_call_id=f"call_{index}", tool_name="t",
                                               request_json="{}", invocation_token=f"tok-{index}"), Limits())
        assert isinstance(result, Admission), result
        print(index, flush=True)  # acknowledged: the COMMIT returned
        index += 1
    """
)


def test_sqlite_a_killed_process_loses_no_acknowledged_record(tmp_path: Path) -> None:
    """CIS-DUR-1, CIS-STORE-4: a process creating records in a loop is killed with SIGKILL; every record
    it acknowledged (printed after its COMMIT returned) is in the file, and the file opens clean."""
    path = tmp_path / "killed.db"
    store = SqliteStore(path)
    open_default_run(store, store.now_ms(), tool_call_budget=100_000, byte_budget=10**9)
    store.close()
    child = subprocess.Popen([sys.executable, "-c", _CREATOR, str(path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    acknowledged = []
    for line in child.stdout:
        acknowledged.append(int(line))
        if len(acknowledged) >= 200:
            break
    os.kill(child.pid, signal.SIGKILL)
    child.wait(10)
    acknowledged += [int(line) for line in child.stdout.read().split()]  # printed before the kill
    after = SqliteStore(path)
    try:
        ids = [f"call_{index}" for index in acknowledged]
        found = after.get_many(RUN, ids)
        assert all(found[tcid] is not None for tcid in ids)
        calls = after.calls(RUN)
        assert calls[: len(ids)] == tuple(ids)
        assert len(calls) in (len(ids), len(ids) + 1)  # one more may have committed unacknowledged
    finally:
        after.close()


@pytest.fixture
def own_postgres() -> Any:
    """A private PostgreSQL this test may crash (never the session's shared one)."""
    try:
        with PostgresServer() as server:
            yield server
    except PostgresUnavailableError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(str(exc), pytrace=False)
        pytest.skip(str(exc))


def _create_many(store: PostgresStore, count: int) -> list[str]:
    open_default_run(store, store.now_ms(), tool_call_budget=count, byte_budget=10**9)
    ids = []
    for index in range(count):
        result = store.create(request(f"call_{index}"), LIMITS)
        assert isinstance(result, Admission)
        ids.append(result.record.tool_call_id)
    return ids


@pytest.mark.postgres
def test_postgres_a_crash_loses_no_acknowledged_record(own_postgres: PostgresServer) -> None:
    """CIS-DUR-1: with synchronous_commit=on, the server killed with SIGKILL and recovered holds every
    record whose create was acknowledged; the store reconnects by itself (a transient failure)."""
    store = PostgresStore.from_dsn(own_postgres.dsn, synchronous_commit="on")
    try:
        ids = _create_many(store, 50)
        own_postgres.crash()
        own_postgres.start()
        found = store.get_many(RUN, ids)  # the pool's connections died: retried on fresh ones
        assert all(found[tcid] is not None for tcid in ids)
        assert store.calls(RUN) == tuple(ids)
    finally:
        store.close()


@pytest.mark.postgres
def test_postgres_synchronous_commit_is_set_on_write_transactions(own_postgres: PostgresServer) -> None:
    """CIS-DUR-1: the store runs every write transaction at its synchronous_commit (here off), and
    leaves reads and the server default alone."""
    store = PostgresStore.from_dsn(own_postgres.dsn, synchronous_commit="off")
    seen: list[str] = []
    original = store._answer

    def answer(conn: psycopg.Connection[Any], step: object) -> Any:
        row = conn.execute("SHOW synchronous_commit").fetchone()
        assert row is not None
        seen.append(str(row[0]))
        return original(conn, step)

    store._answer = answer  # type: ignore[method-assign]
    try:
        open_default_run(store, store.now_ms())
        assert isinstance(store.create(request("call_1"), LIMITS), Admission)
        writes = len(seen)
        store.get_run(RUN)
        store.calls(RUN)
        store.completed(RUN)
        store.get(RUN, "call_1")
        store.ttl_remaining_ms(RUN, "call_1")
        store.sweep_lapsed()  # lapsed rows only: no durability asked for their deletion
        assert set(seen[:writes]) == {"off"}
        assert set(seen[writes:]) == {"on"}
    finally:
        store.close()
    with pytest.raises(ValueError):
        PostgresStore.from_dsn(own_postgres.dsn, synchronous_commit="sometimes")


@pytest.mark.postgres
def test_async_postgres_synchronous_commit_is_set_on_write_transactions(own_postgres: PostgresServer) -> None:
    """CIS-DUR-1: the same on AsyncPostgresStore (its own module): every write transaction of a run
    open, a create and a complete runs at the store's synchronous_commit; reads (the run, the lists,
    a record, the remaining TTL) at the server's default."""

    async def scenario() -> tuple[list[str], list[str]]:
        store = AsyncPostgresStore.from_dsn(
            own_postgres.dsn, synchronous_commit="off", prefix="cis_async_sc_"
        )
        seen: list[str] = []
        original = store._answer

        async def answer(conn: psycopg.AsyncConnection[Any], step: object) -> Any:
            cursor = await conn.execute("SHOW synchronous_commit")
            row = await cursor.fetchone()
            assert row is not None
            seen.append(str(row[0]))
            return await original(conn, step)

        store._answer = answer  # type: ignore[method-assign]
        try:
            now = store.now_ms()
            opened = await store.open_run(
                RUN, deadline_ms=now + 60_000, ttl_ms=600_000, tool_call_budget=5, byte_budget=1 << 20
            )
            assert not isinstance(opened, int)
            created = await store.create(request("call_1"), LIMITS)
            assert isinstance(created, Admission)
            writes = list(seen)
            seen.clear()
            await store.get_run(RUN)
            await store.calls(RUN)
            await store.completed(RUN)
            await store.get(RUN, "call_1")
            await store.ttl_remaining_ms(RUN, "call_1")
            await store.sweep_lapsed()
            return writes, list(seen)
        finally:
            await store.close()

    writes, reads = asyncio.run(scenario())
    assert writes
    assert set(writes) == {"off"}
    assert reads
    assert set(reads) == {"on"}


@pytest.mark.postgres
def test_postgres_a_synchronous_standby_holds_every_acknowledged_record() -> None:
    """CIS-DUR-1, CIS-DUR-2: primary with a synchronous standby (remote_apply): records acknowledged
    before the primary is lost for good are all on the promoted standby; with the standby stopped, a
    create is never acknowledged (the commit waits; the store reports it unavailable past its budget)."""
    try:
        primary = PostgresServer(("synchronous_standby_names=cis_standby",))
        primary.__enter__()
    except PostgresUnavailableError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(str(exc), pytrace=False)
        pytest.skip(str(exc))
    try:
        standby = PostgresServer(standby_of=primary, name="cis_standby")
        with standby:
            store = PostgresStore.from_dsn(primary.dsn, synchronous_commit="remote_apply")
            try:
                ids = _create_many(store, 20)
            finally:
                store.close()
            primary.crash()  # the primary is lost for good
            with psycopg.connect(standby.dsn, autocommit=True) as conn:
                conn.execute("SELECT pg_promote(true, 30)")
            promoted = PostgresStore.from_dsn(standby.dsn)
            try:
                found = promoted.get_many(RUN, ids)
                assert all(found[tcid] is not None for tcid in ids)
            finally:
                promoted.close()
        # No standby now: a commit on a primary that lists one waits, and is never acknowledged.
        primary.start()
        waiting = PostgresStore.from_dsn(primary.dsn, synchronous_commit="on")
        outcome: list[object] = []

        def create() -> None:
            try:
                outcome.append(waiting.create(request("call_late"), LIMITS))
            except StoreUnavailableError as exc:
                outcome.append(exc)

        worker = threading.Thread(target=create, daemon=True)
        worker.start()
        worker.join(3)
        assert worker.is_alive()  # still waiting for the standby: not acknowledged
        assert outcome == []
        primary.crash()  # the wait ends with the server: the create was never acknowledged
        worker.join(30)
        assert len(outcome) == 1
        assert isinstance(outcome[0], StoreUnavailableError)
        waiting.close()
    finally:
        primary.__exit__(None, None, None)
