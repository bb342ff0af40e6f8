"""What only the SQL stores can break: aborted transactions, the schema, the lapse sweep, the database clock.

Both stores run each operation as one transaction of the shared core's steps
(``adapters/_sql.py``). A failure at any write of a transaction must leave nothing
written; the schema is created once and refused when newer; lapsed rows are swept in
bounded batches; PostgreSQL decides on its own clock, whatever the host's clock says.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import psycopg
import pytest

from invocation_store._deadline import operation_deadline
from invocation_store.adapters import CorruptRecordError, RetryPolicy, StoreUnavailableError, _sql
from invocation_store.adapters._sql import SCHEMA_VERSION, Execute
from invocation_store.adapters.postgres import AsyncPostgresStore, PostgresStore, SchemaError
from invocation_store.adapters.sqlite import AsyncSqliteStore, SqliteStore
from invocation_store.kernel import Admission, ErrorCode, RunState, is_own_create
from invocation_store.testing import FakeClock
from invocation_store.testing._factories import drop_tables

from ._support import LIMITS, RUN, admitted, failed, open_default_run, ready, request

SQL_KINDS = ("sqlite", pytest.param("postgres", marks=pytest.mark.postgres))


@pytest.fixture(params=SQL_KINDS)
def make_sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """``make_sql_store(clock=..., like=None, **options)`` -> a sync SQL store of each kind: own file or
    tables, or those of the store ``like``."""
    stores: list[Any] = []
    prefixes: list[str] = []

    def build(clock: Callable[[], int] | None = None, *, like: Any = None, **options: Any) -> Any:
        if request.param == "sqlite":
            path = like.path if like is not None else tmp_path / f"s{len(stores)}.db"
            store: Any = SqliteStore(path, clock=clock, **options)
        else:
            prefix = like.prefix if like is not None else f"cis_sql_{secrets.token_hex(4)}_"
            prefixes.append(prefix)
            store = PostgresStore.from_dsn(
                request.getfixturevalue("postgres_dsn"), prefix=prefix, clock=clock, **options
            )
        stores.append(store)
        return store

    yield build
    for store in stores:
        store.close()
    for prefix in prefixes:
        drop_tables(request.getfixturevalue("postgres_dsn"), prefix)


def _failure(store: Any) -> BaseException:
    """A database failure of the store's own driver that is not retried."""
    if isinstance(store, SqliteStore):
        return sqlite3.IntegrityError("planted")
    return psycopg.errors.InternalError("planted")


def _failing_at(store: Any, position: int) -> list[int]:
    """Make the ``position``-th write (Execute step) of the next operations raise; returns the write count."""
    counter = [0]
    original = store._answer

    def answer(conn: Any, step: object) -> Any:
        if isinstance(step, Execute):
            counter[0] += 1
            if counter[0] == position:
                raise _failure(store)
        return original(conn, step)

    store._answer = answer
    return counter


def _state(store: Any, ids: tuple[str, ...] = ("call_1", "call_2")) -> tuple[object, ...]:
    return (store.get_run(RUN), store.calls(RUN), store.completed(RUN), dict(store.get_many(RUN, ids)))


def _writes(store: Any, operation: Callable[[], object]) -> int:
    counter = _failing_at(store, -1)
    operation()
    del store._answer
    return counter[0]


#: Operations whose every write position is tried: (name, setup(store, clock), operation(store, clock)).
def _setup_run(store: Any, clock: FakeClock) -> object:
    return open_default_run(store, clock())


def _setup_record(store: Any, clock: FakeClock) -> object:
    open_default_run(store, clock())
    return admitted(store, request("call_1", invocation_token="tok-1"))


OPERATIONS: dict[str, tuple[Callable[[Any, FakeClock], object], Callable[[Any, FakeClock, Any], object]]] = {
    "open-fresh": (lambda store, clock: None, lambda store, clock, _: open_default_run(store, clock())),
    "open-over-lapsed": (
        lambda store, clock: (_setup_record(store, clock), clock.advance(10**6)),
        lambda store, clock, _: open_default_run(store, clock()),
    ),
    "cancel": (_setup_run, lambda store, clock, _: store.cancel_run(RUN)),
    "create": (
        _setup_run,
        lambda store, clock, _: store.create(request("call_2", invocation_token="tok-2"), LIMITS),
    ),
    "complete-ready": (
        _setup_record,
        lambda store, clock, record: store.complete(record, ready(record, clock())),
    ),
    "complete-error": (
        _setup_record,
        lambda store, clock, record: store.complete(
            record, failed(record, clock(), ErrorCode.EXECUTION_FAILED)
        ),
    ),
}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_transaction_aborted_at_any_write_writes_nothing(
    make_sql_store: Callable[..., Any], clock: FakeClock, operation: str
) -> None:
    """CIS-STORE-5, CIS-FAIL-5: a failure at each write position of each operation's transaction leaves
    every row as it was (STORE_UNAVAILABLE, naming the driver's exception type), and the same operation
    sent again then succeeds as if the first had never run."""
    setup, run = OPERATIONS[operation]
    probe = make_sql_store(clock=clock)
    probe.get_run(RUN)  # the schema is created by the first operation, before any counting
    context = setup(probe, clock)
    writes = _writes(probe, lambda: run(probe, clock, context))
    after = _state(probe)
    assert writes >= 1
    for position in range(1, writes + 1):
        clock.now = FakeClock().now
        store = make_sql_store(clock=clock)
        store.get_run(RUN)
        context = setup(store, clock)
        before = _state(store)
        _failing_at(store, position)
        with pytest.raises(StoreUnavailableError) as caught:
            run(store, clock, context)
        assert caught.value.cause in ("IntegrityError", "InternalError")
        assert caught.value.__cause__ is None
        del store._answer
        assert _state(store) == before, (operation, position)
        result = run(store, clock, context)
        assert not isinstance(result, ErrorCode)
        assert _state(store) == after, (operation, position)


def _pausing_after_the_run_read(store: Any) -> threading.Event:
    """Make ``store`` pause 0.3 s after each read of a run row (inside its transaction); the
    returned event is set at the first such read."""
    original = store._answer
    has_read = threading.Event()

    def answer(conn: Any, step: object) -> Any:
        reply = original(conn, step)
        if isinstance(step, _sql.Fetch) and step.sql in (store._sql.lock_run, store._sql.select_run):
            has_read.set()
            time.sleep(0.3)
        return reply

    store._answer = answer
    return has_read


@pytest.mark.parametrize("cancel", [True, False])
def test_ending_a_run_holds_its_row_against_a_concurrent_create(
    make_sql_store: Callable[..., Any], clock: FakeClock, cancel: bool
) -> None:
    """CIS-RUN-2, CIS-STORE-2: a cancel or close reads the run row locked, so a create in another
    transaction waits for it and then sees the ended run (RUN_INACTIVE). Read unlocked, the create
    would be admitted in between and the end would write back the usage it read: a call whose
    charge the run no longer shows. The end pauses 0.3 s after reading the row."""
    store = make_sql_store(clock=clock)
    other = make_sql_store(clock=clock, like=store)
    open_default_run(store, clock())
    has_read = _pausing_after_the_run_read(store)
    ended: list[object] = []
    ender = threading.Thread(
        target=lambda: ended.append(store.cancel_run(RUN) if cancel else store.close_run(RUN))
    )
    ender.start()
    assert has_read.wait(10)
    created = other.create(request("call_1"), LIMITS)
    ender.join(10)
    (end,) = ended
    assert isinstance(end, RunState)
    assert created is ErrorCode.RUN_INACTIVE
    run = other.get_run(RUN)
    assert run == end
    assert run.tool_calls_used == len(other.calls(RUN)) == 0


def test_the_schema_is_created_once_and_a_newer_one_refused(
    make_sql_store: Callable[..., Any], clock: FakeClock
) -> None:
    """CIS-STORE-9: the first operation creates the tables and the version row; a database whose
    version is newer than this library's is refused with a permanent error naming both versions."""
    store = make_sql_store(clock=clock)
    open_default_run(store, clock())
    second = make_sql_store(clock=clock, like=store)
    assert second.get_run(RUN) is not None  # the same tables, found and checked
    bumped = make_sql_store(clock=clock, like=store)
    bump = f"UPDATE {store._sql.prefix}schema SET version = version + 1"
    if isinstance(store, SqliteStore):
        with sqlite3.connect(store.path) as conn:
            conn.execute(bump)
    else:
        with psycopg.connect(store._conninfo, autocommit=True) as conn:
            conn.execute(bump)
    with pytest.raises(SchemaError) as caught:
        bumped.get_run(RUN)
    assert caught.value.permanent is True
    assert caught.value.cause == "SchemaVersion"
    assert caught.value.operator_text() == "schema version 2 in the database; this library reads version 1"


#: The columns of each schema version, as released: (runs, records). The library's columns are
#: the attrs fields (adapters/_sql.py), so a new field changes them and must come with a new version.
SCHEMA_COLUMNS = {
    1: (
        (
            "run_id",
            "status",
            "opened_at_ms",
            "deadline_ms",
            "ttl_ms",
            "expires_at_ms",
            "tool_call_budget",
            "byte_budget",
            "tool_calls_used",
            "bytes_used",
        ),
        (
            "run_id",
            "tool_call_id",
            "tool_name",
            "invocation_token",
            "sequence",
            "status",
            "evidence_status",
            "error_code",
            "request_json",
            "raw_response",
            "agent_result",
            "scope",
            "created_at_ms",
            "updated_at_ms",
            "expires_at_ms",
        ),
    )
}


def test_the_columns_change_only_with_the_schema_version() -> None:
    """CIS-STORE-9: the tables' columns are those pinned for SCHEMA_VERSION; a new RunState or
    CanonicalRecord field is a schema change, which needs a new version and its migration step."""
    assert SCHEMA_COLUMNS[SCHEMA_VERSION] == (_sql._RUN_COLUMNS, _sql._RECORD_COLUMNS), (
        "the SQL columns changed: raise SCHEMA_VERSION and add MIGRATIONS[old version] (e.g. "
        "'ALTER TABLE {prefix}records ADD COLUMN ...') in invocation_store/adapters/_sql.py, pin the new "
        "version's columns in SCHEMA_COLUMNS here, and say so in docs/stores.md"
    )
    assert set(range(1, SCHEMA_VERSION)) == set(_sql.MIGRATIONS), "one migration step per older version"


#: The columns of each table that may hold NULL (an outcome not reached yet, a raw response not
#: stored), and those holding integers (ms, UTF-8 bytes, counts), at SCHEMA_VERSION.
NULLABLE: Final = {
    "runs": frozenset(),
    "records": frozenset({"evidence_status", "error_code", "raw_response", "agent_result", "scope"}),
}
INTEGERS: Final = {
    "runs": frozenset(_sql._RUN_COLUMNS[2:]),
    "records": frozenset({"sequence", "created_at_ms", "updated_at_ms", "expires_at_ms"}),
}


def test_every_column_is_typed_and_not_null_unless_the_model_allows_none(
    make_sql_store: Callable[..., Any], clock: FakeClock
) -> None:
    """CIS-STORE-9, CIS-STORE-6: a fresh database's tables refuse NULL in every column but those
    the model leaves empty (an outcome not reached, a raw response not stored), and hold integers
    (BIGINT) where the model has int and text elsewhere, so a hand-made row cannot leave out what
    every record and run must have."""
    store = make_sql_store(clock=clock)
    open_default_run(store, clock())
    for table in ("runs", "records"):
        name = f"{store._sql.prefix}{table}"
        if isinstance(store, SqliteStore):
            rows = _execute(store, f"SELECT name, type, \"notnull\" FROM pragma_table_info('{name}')")
            described = {column: (kind.upper(), bool(notnull)) for column, kind, notnull in rows}
        else:
            rows = _execute(
                store,
                "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
                f"WHERE table_name = '{name}'",
            )
            described = {column: (kind.upper(), nullable == "NO") for column, kind, nullable in rows}
        assert set(described) == set(_sql._RUN_COLUMNS if table == "runs" else _sql._RECORD_COLUMNS)
        for column, (kind, not_null) in described.items():
            assert not_null is (column not in NULLABLE[table]), (table, column)
            assert kind == ("BIGINT" if column in INTEGERS[table] else "TEXT"), (table, column, kind)


def _execute(store: Any, statement: str) -> list[tuple[Any, ...]]:
    """Run ``statement`` on the store's database, outside the store (committed at once)."""
    if isinstance(store, SqliteStore):
        with sqlite3.connect(store.path) as conn:
            rows = conn.execute(statement).fetchall()
        return list(rows)
    with psycopg.connect(store._conninfo, autocommit=True) as conn:
        cursor = conn.execute(statement)
        return list(cursor.fetchall()) if statement.startswith("SELECT") else []


def _columns(store: Any, table: str) -> list[str]:
    name = f"{store._sql.prefix}{table}"
    if isinstance(store, SqliteStore):
        return [row[1] for row in _execute(store, f"SELECT * FROM pragma_table_info('{name}')")]
    return [
        row[0]
        for row in _execute(
            store,
            "SELECT column_name FROM information_schema.columns "
            f"WHERE table_name = '{name}' ORDER BY ordinal_position",
        )
    ]


def test_an_older_schema_is_migrated_on_first_use(
    make_sql_store: Callable[..., Any], clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CIS-STORE-9: a database at the previous version is migrated by the first operation of a newer
    library (its MIGRATIONS step, then the version row), keeping every row; a second store finds it
    migrated and migrates nothing."""
    old = make_sql_store(clock=clock)
    open_default_run(old, clock())
    kept = admitted(old, request("call_1"))
    monkeypatch.setattr(_sql, "SCHEMA_VERSION", 2)
    monkeypatch.setattr(_sql, "MIGRATIONS", {1: ("ALTER TABLE {prefix}records ADD COLUMN note TEXT",)})
    new = make_sql_store(clock=clock, like=old)
    assert new.get(RUN, "call_1") == kept
    assert _execute(new, f"SELECT version FROM {new._sql.prefix}schema") == [(2,)]
    assert _columns(new, "records")[-1] == "note"
    again = make_sql_store(clock=clock, like=old)
    assert again.get(RUN, "call_1") == kept  # a second ALTER would fail: nothing is migrated twice


def test_a_failing_migration_changes_nothing(
    make_sql_store: Callable[..., Any], clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CIS-STORE-9, CIS-STORE-5: a migration whose second statement fails leaves the database at its old
    version with none of the step applied (one transaction), and the store reports it unavailable."""
    old = make_sql_store(clock=clock)
    open_default_run(old, clock())
    monkeypatch.setattr(_sql, "SCHEMA_VERSION", 2)
    monkeypatch.setattr(
        _sql,
        "MIGRATIONS",
        {
            1: (
                "ALTER TABLE {prefix}records ADD COLUMN note TEXT",
                "ALTER TABLE {prefix}missing ADD COLUMN x TEXT",
            )
        },
    )
    new = make_sql_store(clock=clock, like=old)
    with pytest.raises(StoreUnavailableError):
        new.get_run(RUN)
    assert _execute(old, f"SELECT version FROM {old._sql.prefix}schema") == [(1,)]
    assert "note" not in _columns(old, "records")


def test_a_schema_table_of_two_versions_is_refused_as_unreadable(
    make_sql_store: Callable[..., Any], clock: FakeClock
) -> None:
    """CIS-STORE-9: the schema table holds one row; two (an operator's insert, two tools sharing a
    prefix) say no one version, so first use is refused with the version unreadable, even when the
    first row is this library's."""
    store = make_sql_store(clock=clock)
    open_default_run(store, clock())
    _execute(store, f"INSERT INTO {store._sql.prefix}schema (version) VALUES ({SCHEMA_VERSION})")
    later = make_sql_store(clock=clock, like=store)
    with pytest.raises(SchemaError) as caught:
        later.get_run(RUN)
    assert caught.value.found is None
    assert caught.value.operator_text().startswith("schema version unreadable in the database")


@pytest.mark.parametrize("changed", [False, True], ids=["same-parameters", "other-parameters"])
def test_reopening_a_lapsed_run_holds_its_row_against_a_concurrent_open(
    make_sql_store: Callable[..., Any], clock: FakeClock, changed: bool
) -> None:
    """CIS-RUN-1, CIS-STORE-2: an open reads the lapsed run's row locked, so an open of the same run
    in another transaction waits for it and then finds the fresh run: the same one (its
    parameters) or INVALID_TRANSITION (other ones). Read unlocked, both would open it afresh and
    the second write would replace the run the first open answered. The first pauses 0.3 s after
    reading the row."""
    store = make_sql_store(clock=clock)
    other = make_sql_store(clock=clock, like=store)
    open_default_run(store, clock(), ttl_ms=1_000)
    clock.advance(10**6)  # the run lapsed (deadline + TTL long past)
    has_read = _pausing_after_the_run_read(store)
    parameters = {"deadline_ms": clock() + 60_000, "ttl_ms": 60_000, "tool_call_budget": 4, "byte_budget": 99}
    opened: list[object] = []
    opener = threading.Thread(target=lambda: opened.append(store.open_run(RUN, **parameters)))
    opener.start()
    assert has_read.wait(10)
    second = other.open_run(RUN, **{**parameters, "tool_call_budget": 5 if changed else 4})
    opener.join(10)
    (first,) = opened
    assert isinstance(first, RunState)
    assert other.get_run(RUN) == first
    assert second == (ErrorCode.INVALID_TRANSITION if changed else first)


def test_a_version_no_migration_starts_from_is_refused(
    make_sql_store: Callable[..., Any], clock: FakeClock
) -> None:
    """CIS-STORE-9: a database at a version below every migration step (here 0) is refused at first use
    with a permanent error naming both versions and the migration table to extend."""
    store = make_sql_store(clock=clock)
    open_default_run(store, clock())
    _execute(store, f"UPDATE {store._sql.prefix}schema SET version = 0")
    later = make_sql_store(clock=clock, like=store)
    with pytest.raises(SchemaError) as caught:
        later.get_run(RUN)
    assert caught.value.permanent is True
    assert caught.value.operator_text() == (
        "schema version 0 in the database; this library reads version 1; no migration step from version 0 "
        "(MIGRATIONS in adapters/_sql.py migrates from version 1): use a fresh table prefix or database, "
        "or migrate it by hand"
    )


def test_only_an_older_schema_version_gets_migration_advice() -> None:
    """CIS-STORE-9: the operator text advises a migration for a version below the library's only:
    the library's own version and a newer one are named, with no advice; an unreadable one is
    said to be unreadable."""
    for found in (SCHEMA_VERSION, SCHEMA_VERSION + 1):
        assert SchemaError(found).operator_text() == (
            f"schema version {found} in the database; this library reads version {SCHEMA_VERSION}"
        )
    assert "no migration step from version" in SchemaError(SCHEMA_VERSION - 1).operator_text()
    for unreadable in (None, True, "1"):
        assert SchemaError(unreadable).operator_text() == (
            f"schema version unreadable in the database; this library reads version {SCHEMA_VERSION}"
        )


def test_the_lapse_sweep_is_bounded_and_deletes_only_lapsed_rows(
    make_sql_store: Callable[..., Any], clock: FakeClock
) -> None:
    """CIS-TTL-4, CIS-RUN-3: sweep_lapsed deletes at most ``limit`` lapsed records per call and lapsed runs
    with their lists; live rows stay; lapsed rows read as absent before and after."""
    store = make_sql_store(clock=clock, sweep_interval_ms=0)
    run = open_default_run(store, clock(), ttl_ms=1_000)
    for index in range(5):
        admitted(store, request(f"call_{index}"))
    open_default_run(store, clock(), run_id="run-long", ttl_ms=10**7, deadline_in_ms=10**7)
    kept = admitted(store, request("kept", run_id="run-long"))
    clock.advance(1_000)  # the five records lapse; their run lives until deadline + ttl
    assert store.get(RUN, "call_0") is None
    assert store.sweep_lapsed(limit=0) == 0  # a limit of nothing deletes nothing
    assert store.sweep_lapsed(limit=-1) == 0
    assert store.sweep_lapsed(limit=1) == 1
    assert store.sweep_lapsed(limit=2) == 2
    assert store.sweep_lapsed(limit=2) == 2
    assert store.sweep_lapsed(limit=2) == 0
    assert store.calls(RUN) == tuple(f"call_{index}" for index in range(5))  # the lists live with the run
    clock.now = run.expires_at_ms
    assert store.sweep_lapsed() == 1  # the run, and its lists with it
    clock.now = run.opened_at_ms  # even read at an earlier clock, the rows are gone
    assert store.get_run(RUN) is None
    assert store.calls(RUN) == ()
    assert store.get("run-long", "kept") == kept


def test_the_store_sweeps_by_itself_after_writes(
    make_sql_store: Callable[..., Any], clock: FakeClock
) -> None:
    """CIS-TTL-4: with a sweep interval, a write past the interval runs one bounded sweep itself."""
    store = make_sql_store(clock=clock, sweep_interval_ms=1, sweep_limit=10)
    open_default_run(store, clock(), ttl_ms=100)
    admitted(store, request("call_1"))
    clock.advance(100)
    store._last_sweep = 0.0
    open_default_run(store, clock(), run_id="run-2")  # a write: the due sweep runs after it
    assert store.sweep_lapsed() == 0  # already swept


def test_several_threads_share_one_sqlite_file(tmp_path: Path, clock: FakeClock) -> None:
    """CIS-STORE-2, CIS-RUN-5: 8 threads, each on its own connection, admit into one run with budget 5:
    exactly five are admitted with sequences 1..5, across two stores on the same file."""
    path = tmp_path / "shared.db"
    first, second = SqliteStore(path, clock=clock), SqliteStore(path, clock=clock)
    try:
        open_default_run(first, clock(), tool_call_budget=5)
        results: list[object] = [None] * 8
        barrier = threading.Barrier(8)

        def work(index: int) -> None:
            barrier.wait()
            results[index] = (first if index % 2 else second).create(request(f"call_{index}"), LIMITS)

        threads = [threading.Thread(target=work, args=(index,)) for index in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        admitted_ = [result for result in results if isinstance(result, Admission)]
        assert sorted(result.record.sequence for result in admitted_) == [1, 2, 3, 4, 5]
        assert results.count(ErrorCode.TOOL_BUDGET_EXHAUSTED) == 3
        assert len(second.calls(RUN)) == 5
    finally:
        first.close()
        second.close()


def test_sqlite_defaults_are_wal_and_full_sync(tmp_path: Path, clock: FakeClock) -> None:
    """CIS-DUR-1: the durable defaults: journal_mode WAL and synchronous FULL on every connection."""
    store = SqliteStore(tmp_path / "d.db", clock=clock)
    try:
        open_default_run(store, clock())
        (conn,) = list(store.connections())
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    finally:
        store.close()
    with pytest.raises(ValueError):
        SqliteStore(":memory:")
    with pytest.raises(ValueError):
        SqliteStore(tmp_path / "e.db", synchronous="SOMETIMES")


def test_async_sqlite_store_runs_off_the_loop(tmp_path: Path, clock: FakeClock) -> None:
    """CIS-STORE-1: AsyncSqliteStore's operations run on worker threads and answer as the sync store."""
    store = AsyncSqliteStore(tmp_path / "a.db", clock=clock)

    async def scenario() -> None:
        run = await store.open_run(
            RUN, deadline_ms=clock() + 1_000, ttl_ms=500, tool_call_budget=1, byte_budget=100
        )
        assert isinstance(run, RunState)
        assert await store.get_run(RUN) == run
        await store.close()

    asyncio.run(scenario())


# -- PostgreSQL: the database clock --------------------------------------------------


def test_a_scheduled_sweep_that_fails_never_fails_the_write_it_follows(
    make_sql_store: Callable[..., Any], clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CIS-TTL-4, CIS-FAIL-5: the sweep a store runs after a write (its schedule due) may fail (the
    database locked by another process); the write it follows was committed and answers as such:
    the run opens, the call is admitted, nothing is reported unavailable."""
    store = make_sql_store(clock=clock, sweep_interval_ms=1)
    sweeps: list[int] = []

    def failing_sweep(limit: int | None = None) -> int:
        sweeps.append(1)
        raise StoreUnavailableError("OperationalError")

    monkeypatch.setattr(store, "sweep_lapsed", failing_sweep)
    store._last_sweep = float("-inf")
    assert isinstance(open_default_run(store, clock()), RunState)
    store._last_sweep = float("-inf")
    assert isinstance(store.create(request("call_1"), LIMITS), Admission)
    assert len(sweeps) == 2
    assert store.get(RUN, "call_1") is not None


@pytest.mark.postgres
def test_a_lapse_sweep_never_deletes_a_record_re_created_while_it_waited(
    postgres_dsn: str, clock: FakeClock
) -> None:
    """CIS-TTL-4, CIS-BND-6: the sweep picks a lapsed record while a create re-creating that id
    holds its row (the upsert not yet committed); once the create commits, the row is live, and
    the sweep deletes nothing. Deleting it let a re-sent id inside its new TTL be created and run
    a third time (an independent review measured 3 executions)."""
    prefix = f"cis_sweeprace_{secrets.token_hex(4)}_"
    store = PostgresStore.from_dsn(postgres_dsn, prefix=prefix, clock=clock, sweep_interval_ms=10**9)
    try:
        open_default_run(store, clock(), ttl_ms=1_000, deadline_in_ms=100_000)
        admitted(store, request("call_1"))
        clock.advance(2_000)  # the record lapsed; its run lives on
        swept: list[int] = []
        with psycopg.connect(postgres_dsn) as creating:
            creating.execute(
                f"UPDATE {prefix}records SET expires_at_ms = %s WHERE run_id = %s AND tool_call_id = %s",
                (clock() + 1_000, RUN, "call_1"),
            )  # the create's upsert of the lapsed id, its row lock held until commit
            sweeper = threading.Thread(target=lambda: swept.append(store.sweep_lapsed()))
            sweeper.start()
            sweeper.join(1.0)
            assert sweeper.is_alive(), "the sweep waits for the create's row lock"
            creating.commit()
        sweeper.join(10)
        assert swept == [0]
        assert store.get(RUN, "call_1") is not None
        again = store.create(request("call_1"), LIMITS)  # a re-send inside the new TTL: never a new record
        assert not (isinstance(again, Admission) and not again.replayed), again
    finally:
        store.close()
        drop_tables(postgres_dsn, prefix)


@pytest.mark.postgres
def test_the_first_clock_reading_uses_the_pools_connection_settings(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CIS-STORE-10: ``now_ms()`` before any operation reads the database the pool reaches, with the
    settings given as the pool's ``kwargs`` (here its port; libpq's default port is made useless),
    never another server or none: the documented ``deadline_ms=store.now_ms() + ...`` works."""
    from psycopg_pool import ConnectionPool  # noqa: PLC0415 - the postgres extra

    params = psycopg.conninfo.conninfo_to_dict(postgres_dsn)
    port = params.pop("port")
    monkeypatch.setenv("PGPORT", "1")  # nothing listens there
    pool = ConnectionPool(psycopg.conninfo.make_conninfo(**params), kwargs={"port": port}, open=True)
    prefix = f"cis_poolclock_{secrets.token_hex(4)}_"
    store = PostgresStore(pool, prefix=prefix)
    try:
        first = store.now_ms()
        with psycopg.connect(postgres_dsn) as conn:
            row = conn.execute("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint").fetchone()
        assert row is not None
        assert abs(int(row[0]) - first) < 5_000
        assert isinstance(open_default_run(store, first), RunState)
    finally:
        store.close()
        pool.close()
        drop_tables(postgres_dsn, prefix)


@pytest.mark.postgres
def test_postgres_decides_on_the_database_clock(postgres_dsn: str) -> None:
    """CIS-STORE-10: with the default clock, records are stamped with clock_timestamp() read inside the
    transaction, whatever the host's clock says; now_ms() never runs ahead of it, so a create's own
    replay is recognised (kernel is_own_create with the reading taken before the create)."""
    store = PostgresStore.from_dsn(postgres_dsn, prefix="cis_dbclock_")
    try:
        with psycopg.connect(postgres_dsn) as conn:
            row = conn.execute(
                "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
            ).fetchone()
        assert row is not None
        db_before = int(row[0])
        not_before = store.now_ms()
        assert not_before >= db_before - 1_000
        open_default_run(store, not_before)
        req = request("call_1")
        created = store.create(req, LIMITS)
        assert isinstance(created, Admission)
        assert created.record.created_at_ms >= not_before
        assert store.now_ms() >= not_before
        replay = store.create(req, LIMITS)
        assert isinstance(replay, Admission)
        assert replay.replayed
        assert is_own_create(replay.record, req, not_before)
        with psycopg.connect(postgres_dsn) as conn:
            row = conn.execute(
                "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
            ).fetchone()
        assert row is not None
        assert db_before <= created.record.created_at_ms <= int(row[0])
    finally:
        store.close()
        drop_tables(postgres_dsn, "cis_dbclock_")


@pytest.mark.postgres
def test_postgres_runs_every_transaction_at_read_committed(postgres_dsn: str) -> None:
    """CIS-STORE-4: the store sets READ COMMITTED itself: on a server whose connections default to
    SERIALIZABLE, every transaction it runs (the schema check, writes, reads) is READ COMMITTED."""
    serializable = "-c default_transaction_isolation=serializable"
    dsn = psycopg.conninfo.make_conninfo(postgres_dsn, options=serializable)
    with psycopg.connect(dsn) as probe:
        row = probe.execute("SHOW transaction_isolation").fetchone()
    assert row == ("serializable",)  # the server default the store must not inherit
    store = PostgresStore.from_dsn(dsn, prefix="cis_isolation_")
    seen: list[str] = []
    original = store._answer

    def answer(conn: psycopg.Connection[Any], step: object) -> Any:
        found = conn.execute("SHOW transaction_isolation").fetchone()
        assert found is not None
        seen.append(str(found[0]))
        return original(conn, step)

    store._answer = answer  # type: ignore[method-assign]
    try:
        open_default_run(store, store.now_ms())
        assert isinstance(store.create(request("call_1"), LIMITS), Admission)
        assert store.get(RUN, "call_1") is not None
        assert store.sweep_lapsed() == 0
        assert len(seen) >= 5
        assert set(seen) == {"read committed"}
    finally:
        store.close()
        drop_tables(postgres_dsn, "cis_isolation_")


def test_reads_never_sweep_and_an_idle_stores_lapsed_rows_stay_invisible(
    make_sql_store: Callable[..., Any], clock: FakeClock
) -> None:
    """CIS-TTL-4: the store sweeps only after a write (or on demand): reads past the interval sweep
    nothing, yet every lapsed row reads as absent until a write or sweep_lapsed() deletes it."""
    store = make_sql_store(clock=clock, sweep_interval_ms=1, sweep_limit=10)
    open_default_run(store, clock(), ttl_ms=100)
    admitted(store, request("call_1"))
    clock.advance(10**6)  # the record and the run lapse
    store._last_sweep = 0.0  # the interval has long passed
    for _ in range(3):  # every read of the Protocol
        assert store.get(RUN, "call_1") is None
        assert store.get_many(RUN, ["call_1"]) == {"call_1": None}
        assert store.get_progress(RUN, ["call_1"]) == {"call_1": None}
        assert store.ttl_remaining_ms(RUN, "call_1") is None
        assert store.get_run(RUN) is None
        assert store.calls(RUN) == ()
        assert store.completed(RUN) == ()
    assert store.sweep_lapsed() == 2  # nothing was swept by the reads: the record and the run


@pytest.mark.postgres
def test_postgres_with_a_budget_of_zero_runs_every_operation(postgres_dsn: str) -> None:
    """CIS-DUR-4, CIS-DUR-13: RetryPolicy(budget_ms=0) ("never retry") on PostgreSQL, a healthy
    database: opening a run (schema check, then the open), a create and its completion all
    answer as usual; no later step is refused by a deadline of "now" (the Redis stores' fault
    of the same kind)."""
    prefix = f"cis_zero_{secrets.token_hex(3)}_"
    store = PostgresStore.from_dsn(postgres_dsn, prefix=prefix, retry=RetryPolicy(budget_ms=0))
    try:
        now = store.now_ms()
        open_default_run(store, now)
        record = admitted(store, request("call_1"))
        done = ready(record, store.now_ms())
        assert store.complete(record, done) == done
        assert store.completed(RUN) == ("call_1",)
    finally:
        store.close()
        drop_tables(postgres_dsn, prefix)


#: The session's application_name, then how many of its prepared statements are the store's
#: INSERT of a run (an Execute step) and a SELECT from the runs table (a Fetch step).
_FACTS = (
    "SELECT current_setting('application_name'), "
    "(SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s), "
    "(SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s)"
)


def _facts_args(prefix: str) -> tuple[str, str]:
    return (f"INSERT INTO {prefix}runs%", f"SELECT % FROM {prefix}runs%")


def _connections_named(dsn: str, name: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.postgres
@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_postgres_pools_name_their_connections_and_prepare_statements(
    postgres_dsn: str, clock: FakeClock, flavour: str
) -> None:
    """CIS-STORE-9: from_dsn's pool opens on first use, not before; its connections are named
    ``invocation-store`` unless told
    otherwise (what an operator sees in pg_stat_activity), and the store's statements, of
    both kinds of step, are prepared on first use (one parse per connection, not five)."""
    prefix = f"cis_sql_{secrets.token_hex(4)}_"
    named = f"cis-test-{secrets.token_hex(3)}"
    if flavour == "sync":
        store = PostgresStore.from_dsn(postgres_dsn, prefix=prefix, clock=clock, max_size=1)
        other = PostgresStore.from_dsn(postgres_dsn, prefix=prefix, clock=clock, application_name=named)
        try:
            assert _connections_named(postgres_dsn, named) == 0  # the pool opens on first use
            open_default_run(store, clock())
            assert other.get_run(RUN) is not None
            with store._pool.connection() as conn:  # the pool's one connection (max_size=1)
                name, inserts, selects = conn.execute(_FACTS, _facts_args(prefix)).fetchone()
            assert _connections_named(postgres_dsn, named) >= 1  # its pool's, by the name given
        finally:
            store.close()
            other.close()
    else:

        async def flow() -> tuple[str, int, int]:
            store = AsyncPostgresStore.from_dsn(postgres_dsn, prefix=prefix, clock=clock, max_size=1)
            other = AsyncPostgresStore.from_dsn(
                postgres_dsn, prefix=prefix, clock=clock, application_name=named
            )
            try:
                assert _connections_named(postgres_dsn, named) == 0  # the pool opens on first use
                await store.open_run(
                    RUN, deadline_ms=clock() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=1000
                )
                assert await other.get_run(RUN) is not None
                async with store._pool.connection() as conn:  # the pool's one connection (max_size=1)
                    row = await (await conn.execute(_FACTS, _facts_args(prefix))).fetchone()
                assert _connections_named(postgres_dsn, named) >= 1  # its pool's, by the name given
                return row[0], row[1], row[2]
            finally:
                await store.close()
                await other.close()

        name, inserts, selects = asyncio.run(flow())
    drop_tables(postgres_dsn, prefix)
    assert name == "invocation-store"
    assert inserts >= 1  # run once (the open), prepared at once
    assert selects >= 1


@pytest.mark.parametrize(
    ("column", "value"),
    [("status", "'DONE'"), ("sequence", "-3"), ("evidence_status", "'MAYBE'"), ("status", "'READY'")],
)
def test_a_row_that_does_not_decode_is_a_corrupt_record_named_by_id(
    make_sql_store: Callable[..., Any], clock: FakeClock, column: str, value: str
) -> None:
    """CIS-STORE-6, CIS-DUR-12: a record row an operator's hand (or a bad migration) left that no
    transition makes (a value that does not decode, or READY without evidence) is
    CorruptRecordError naming the call with the cause CorruptRecord, on every read of it; the
    other records of the run still read."""
    store = make_sql_store(clock=clock)
    open_default_run(store, clock())
    admitted(store, request("call_1"))
    kept = admitted(store, request("call_2"))
    _execute(store, f"UPDATE {store._sql.prefix}records SET {column} = {value} WHERE tool_call_id = 'call_1'")
    for read in (lambda: store.get(RUN, "call_1"), lambda: store.get_many(RUN, ["call_1", "call_2"])):
        with pytest.raises(CorruptRecordError) as caught:
            read()
        assert caught.value.corrupt == {"call_1": "CorruptRecord"}
    assert store.get(RUN, "call_2") == kept


@pytest.mark.parametrize(("column", "value"), [("status", "'PAUSED'"), ("tool_call_budget", "-1")])
def test_a_run_row_that_does_not_decode_is_a_corrupt_run(
    make_sql_store: Callable[..., Any], clock: FakeClock, column: str, value: str
) -> None:
    """CIS-STORE-6, CIS-DUR-12: a run row no transition makes (a status no run has, a negative
    budget) is CorruptRecordError of the run with the cause CorruptRun (keyed by the empty id:
    no call is named), on a read and on a write of the run."""
    store = make_sql_store(clock=clock)
    open_default_run(store, clock())
    _execute(store, f"UPDATE {store._sql.prefix}runs SET {column} = {value} WHERE run_id = '{RUN}'")
    for operation in (lambda: store.get_run(RUN), lambda: store.create(request("call_1"), LIMITS)):
        with pytest.raises(CorruptRecordError) as caught:
            operation()
        assert caught.value.corrupt == {"": "CorruptRun"}
        assert caught.value.run_id == RUN


def test_a_row_under_an_unsafe_id_is_never_read(make_sql_store: Callable[..., Any], clock: FakeClock) -> None:
    """CIS-ID-2: an unsafe tool_call_id is never looked up, even where an operator's hand left a
    row under it: get and get_many answer None for it, and the safe ids still read."""
    store = make_sql_store(clock=clock)
    open_default_run(store, clock())
    admitted(store, request("call_1"))
    kept = admitted(store, request("call_2"))
    _execute(
        store, f"UPDATE {store._sql.prefix}records SET tool_call_id = 'bad id' WHERE tool_call_id = 'call_1'"
    )
    assert store.get(RUN, "bad id") is None
    assert store.get_many(RUN, ["bad id", "call_2"]) == {"bad id": None, "call_2": kept}
    refused = store.create(request("bad id"), LIMITS)  # the kernel's refusal, not the row's corruption
    assert isinstance(refused, ErrorCode)


def test_no_sweep_runs_by_itself_with_an_interval_of_zero(
    make_sql_store: Callable[..., Any], clock: FakeClock
) -> None:
    """CIS-TTL-4: sweep_interval_ms=0 turns the store's own sweep off: writes after a record lapsed
    leave it for sweep_lapsed()."""
    store = make_sql_store(clock=clock, sweep_interval_ms=0)
    open_default_run(store, clock(), ttl_ms=100)
    admitted(store, request("call_1"))
    clock.advance(100)
    store._last_sweep = 0.0
    open_default_run(store, clock(), run_id="run-2")  # a write
    assert store.sweep_lapsed() == 1


def test_the_clock_step_names_itself() -> None:
    """The step that asks for the clock reads as NOW in a step trace or a failing test's message."""
    assert repr(_sql.NOW) == "NOW"


def test_a_sqlite_store_keeps_one_connection_per_thread(tmp_path: Path, clock: FakeClock) -> None:
    """CIS-STORE-4: each thread's operations share that thread's one connection (opened with the
    store's busy timeout, autocommit so the store's own BEGIN IMMEDIATE rules), and close() closes
    every one of them."""
    store = SqliteStore(tmp_path / "one.db", clock=clock, timeout_s=1.234)
    open_default_run(store, clock())
    for index in range(5):
        admitted(store, request(f"call_{index}"))
        store.get(RUN, f"call_{index}")
    (conn,) = store.connections()
    assert conn.isolation_level is None
    assert conn.execute("PRAGMA busy_timeout").fetchone() == (1234,)
    store.close()
    assert list(store.connections()) == []


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_sqlite_lock_wait_ends_at_the_enclosing_deadline(
    tmp_path: Path, clock: FakeClock, flavour: str
) -> None:
    """CIS-DUR-13: while another connection holds the write lock, a write inside an enclosing
    deadline shorter than ``timeout_s`` (a completion retry's, a caller's) answers
    STORE_UNAVAILABLE by that deadline, not after ``timeout_s`` (5 s here); a budget-0 scope
    ("never retry") does not shorten the wait, and outside any scope it is ``timeout_s``."""
    path = tmp_path / "locked.db"
    store = SqliteStore(path, clock=clock, timeout_s=5.0)
    open_default_run(store, clock())
    async_store = AsyncSqliteStore(path, clock=clock, timeout_s=5.0)
    holder = sqlite3.connect(path, isolation_level=None)

    def create(name: str) -> object:
        if flavour == "sync":
            return store.create(request(name), LIMITS)
        return asyncio.run(async_store.create(request(name), LIMITS))

    try:
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock
        for budget_ms, floor_s, ceiling_s in ((300, 0.25, 1.0), (700, 0.65, 1.4)):
            started = time.monotonic()
            with operation_deadline(budget_ms), pytest.raises(StoreUnavailableError) as caught:
                create(f"late_{budget_ms}")
            assert floor_s <= time.monotonic() - started < ceiling_s
            assert caught.value.cause == "OperationalError"
        holder.execute("ROLLBACK")
        with operation_deadline(0):  # the lock is free: budget 0 refuses no step
            assert isinstance(create("free"), Admission)
        store.close()
        asyncio.run(async_store.close())
        store = SqliteStore(path, clock=clock, timeout_s=1.5)
        async_store = AsyncSqliteStore(path, clock=clock, timeout_s=1.5)
        holder.execute("BEGIN IMMEDIATE")
        for scope in (contextlib.nullcontext(), operation_deadline(0)):
            started = time.monotonic()
            with scope, pytest.raises(StoreUnavailableError):
                create("waits")
            assert 1.4 <= time.monotonic() - started < 3.0  # timeout_s, the scope does not shorten it
    finally:
        holder.close()
        store.close()
        asyncio.run(async_store.close())


def test_sqlite_first_use_by_many_stores_at_once_creates_the_schema_once(
    tmp_path: Path, clock: FakeClock
) -> None:
    """CIS-STORE-9, CIS-STORE-2: eight stores (one thread each) use a fresh file at the same moment,
    on 60 fresh files: none fails (the switch to WAL could meet another connection's lock, which
    SQLite answers "database is locked" at once: about one round in forty failed so), every run is
    opened, and the version row is written once."""

    def first_use(store: Any, barrier: threading.Barrier, results: list[object], index: int) -> None:
        barrier.wait()
        try:
            results[index] = open_default_run(store, clock(), run_id=f"run-{index}")
        except StoreUnavailableError as exc:
            results[index] = exc

    for round_ in range(60):
        path = tmp_path / f"fresh{round_}.db"
        stores = [SqliteStore(path, clock=clock) for _ in range(8)]
        barrier = threading.Barrier(len(stores))
        results: list[object] = [None] * len(stores)
        threads = [
            threading.Thread(target=first_use, args=(store, barrier, results, index))
            for index, store in enumerate(stores)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        try:
            assert all(isinstance(result, RunState) for result in results), (round_, results)
            assert _execute(stores[0], "SELECT version FROM cis_schema") == [(SCHEMA_VERSION,)]
        finally:
            for store in stores:
                store.close()


def test_sqlite_checks_the_schema_on_first_use_only(tmp_path: Path, clock: FakeClock) -> None:
    """CIS-STORE-9: the schema is checked in the first operation's own transaction before it, and
    never again: each later operation is one transaction (one BEGIN)."""
    store = SqliteStore(tmp_path / "once.db", clock=clock)
    try:
        open_default_run(store, clock())
        (conn,) = store.connections()
        begins: list[str] = []
        conn.set_trace_callback(
            lambda statement: begins.append(statement) if statement.startswith("BEGIN") else None
        )
        admitted(store, request("call_1"))
        store.get_run(RUN)
        assert begins == ["BEGIN IMMEDIATE", "BEGIN"]  # a write, then a read: no schema transaction
    finally:
        store.close()


def test_a_sqlite_insert_that_keeps_conflicting_is_unavailable_after_five_attempts(
    tmp_path: Path, clock: FakeClock
) -> None:
    """CIS-STORE-2: an insert that finds its row already there (a concurrent writer's) runs the
    operation again, five attempts at most; then STORE_UNAVAILABLE (Conflict), nothing written."""
    store = SqliteStore(tmp_path / "conflict.db", clock=clock)
    original = store._answer
    inserts: list[str] = []

    def answer(conn: sqlite3.Connection, step: object) -> Any:
        if isinstance(step, Execute) and step.sql == store._sql.insert_run:
            inserts.append(step.sql)
            return 0  # as if another writer inserted the run first
        return original(conn, step)

    store._answer = answer
    try:
        with pytest.raises(StoreUnavailableError) as caught:
            open_default_run(store, clock())
        assert caught.value.cause == "Conflict"
        assert len(inserts) == 5
        store._answer = original
        assert store.get_run(RUN) is None
    finally:
        store.close()


def test_a_sqlite_read_never_waits_for_a_writer(tmp_path: Path, clock: FakeClock) -> None:
    """CIS-STORE-2, CIS-DUR-1: reads begin a deferred transaction on the WAL file, so a writer
    holding the write lock does not hold them up (timeout_s is 5 s; they answer at once)."""
    path = tmp_path / "reader.db"
    store = SqliteStore(path, clock=clock, timeout_s=5.0)
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        opened = open_default_run(store, clock())
        holder.execute("BEGIN IMMEDIATE")
        started = time.monotonic()
        assert store.get_run(RUN) == opened
        assert store.calls(RUN) == ()
        assert time.monotonic() - started < 1.0
    finally:
        holder.close()
        store.close()


def test_a_completion_whose_locked_row_is_not_updated_is_unavailable_and_writes_nothing(
    make_sql_store: Callable[..., Any], clock: FakeClock
) -> None:
    """CIS-STORE-3: the completion's UPDATE of the row it locked must change that one row; if it
    changes none (the row vanished underneath), the answer is STORE_UNAVAILABLE (LostRow), never
    a silent success, and the transaction leaves the record and the run as they were."""
    store = make_sql_store(clock=clock)
    open_default_run(store, clock())
    before = admitted(store, request("call_1"))
    run_before = store.get_run(RUN)
    original = store._answer

    def answer(conn: Any, step: object) -> Any:
        if isinstance(step, Execute) and step.sql == store._sql.update_record:
            return 0
        return original(conn, step)

    store._answer = answer
    with pytest.raises(StoreUnavailableError) as caught:
        store.complete(before, ready(before, clock()))
    assert caught.value.cause == "LostRow"
    store._answer = original
    assert store.get(RUN, "call_1") == before
    assert store.get_run(RUN) == run_before


def test_postgres_reads_never_wait_for_a_writers_row_lock(postgres_dsn: str, clock: FakeClock) -> None:
    """CIS-STORE-2, CIS-STORE-4: the run and list reads select without FOR UPDATE, so while another
    transaction holds the run row locked (a create or completion in flight), get_run, calls and
    completed answer at once from the committed row (the holder lets go only after 3 s)."""
    prefix = f"cis_readlock_{secrets.token_hex(4)}_"
    store = PostgresStore.from_dsn(postgres_dsn, prefix=prefix, clock=clock)
    try:
        opened = open_default_run(store, clock())
        with psycopg.connect(postgres_dsn) as holder:
            holder.execute(f"SELECT run_id FROM {prefix}runs WHERE run_id = %s FOR UPDATE", (RUN,))
            release = threading.Timer(3.0, holder.rollback)
            release.start()
            try:
                started = time.monotonic()
                assert store.get_run(RUN) == opened
                assert store.calls(RUN) == ()
                assert store.completed(RUN) == ()
                assert time.monotonic() - started < 1.0
            finally:
                release.cancel()
    finally:
        store.close()
        drop_tables(postgres_dsn, prefix)
