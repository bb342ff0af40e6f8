"""The stateful machine on the SQL stores, single and differential against MemoryStore (CIS-STATE-1)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from invocation_store.adapters import MemoryStore
from invocation_store.testing import (
    MachineStats,
    PostgresStoreFactory,
    SqliteStoreFactory,
    make_invocation_machine,
)

from ._support import run_machine


def test_sqlite_store_machine(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """CIS-STATE-1, CIS-STORE-4: every invariant holds after every step on SqliteStore (a fresh file per
    example, WAL, synchronous=FULL)."""
    stats = MachineStats()
    run_machine(make_invocation_machine(SqliteStoreFactory(tmp_path), stats=stats), "sqlite", stats, request)
    assert stats.steps > 0


def test_async_sqlite_store_machine(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """CIS-STATE-1, CIS-BND-1: the invariants hold through AsyncToolBoundary on AsyncSqliteStore."""
    stats = MachineStats()
    factory = SqliteStoreFactory(tmp_path, asynchronous=True)
    run_machine(make_invocation_machine(factory, stats=stats), "async-sqlite", stats, request)
    assert stats.steps > 0


def test_sqlite_differential_machine(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """CIS-STORE-8: memory, SQLite and async SQLite answer every operation identically, and as the kernel."""
    stats = MachineStats()
    machine = make_invocation_machine(
        MemoryStore,
        SqliteStoreFactory(tmp_path / "sync"),
        SqliteStoreFactory(tmp_path / "async", asynchronous=True),
        stats=stats,
    )
    (tmp_path / "sync").mkdir()
    (tmp_path / "async").mkdir()
    run_machine(machine, "differential-sql", stats, request)
    assert stats.steps > 0


@pytest.fixture(scope="module")
def postgres_factory(postgres_dsn: str) -> Iterator[PostgresStoreFactory]:
    """Sync PostgresStores on the session's private server, fresh tables per example."""
    factory = PostgresStoreFactory(postgres_dsn)
    yield factory
    factory.close()


def test_postgres_store_machine(
    postgres_factory: PostgresStoreFactory, request: pytest.FixtureRequest
) -> None:
    """CIS-STATE-1, CIS-STORE-4: every invariant holds after every step on PostgresStore (a private
    server, fresh tables per example)."""
    stats = MachineStats()
    run_machine(make_invocation_machine(postgres_factory, stats=stats), "postgres", stats, request)
    assert stats.steps > 0


def test_async_postgres_store_machine(postgres_dsn: str, request: pytest.FixtureRequest) -> None:
    """CIS-STATE-1, CIS-BND-1: the invariants hold through AsyncToolBoundary on AsyncPostgresStore."""
    factory = PostgresStoreFactory(postgres_dsn, asynchronous=True)
    stats = MachineStats()
    try:
        run_machine(make_invocation_machine(factory, stats=stats), "async-postgres", stats, request)
    finally:
        factory.close()
    assert stats.steps > 0


def test_postgres_differential_machine(
    postgres_factory: PostgresStoreFactory, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """CIS-STORE-8: memory, PostgreSQL and SQLite answer every operation identically, and as the kernel."""
    stats = MachineStats()
    machine = make_invocation_machine(
        MemoryStore, postgres_factory, SqliteStoreFactory(tmp_path), stats=stats
    )
    run_machine(machine, "differential-postgres", stats, request)
    assert stats.steps > 0
