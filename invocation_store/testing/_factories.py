"""Store factories for the stateful machine: a fresh, empty store per example.

:class:`SqliteStoreFactory` gives every example a SQLite store on a fresh file and
deletes it when the example ends.

:class:`RedisStoreFactory` gives every example a Redis store under a fresh, unique
key prefix on one server, and deletes that prefix's keys when the example ends
(``release``, called by the machine's teardown): a shared server is never flushed.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import redis

from ..adapters import AsyncRedisStore, RedisStore
from ._clock import FakeClock

__all__ = ["PostgresStoreFactory", "RedisStoreFactory", "SqliteStoreFactory", "drop_tables"]


class RedisStoreFactory:
    """``factory(clock)`` -> a RedisStore (or AsyncRedisStore) with a fresh key prefix.

    ``url``: the Redis to use (``redis://``, ``unix://``; use a private throwaway
    server, see :mod:`invocation_store.testing.redis_server`). ``asynchronous``: build
    :class:`AsyncRedisStore` (driven by the machine through AsyncToolBoundary).
    ``prefix``: the start of every example's prefix. Sync stores share one client;
    async stores get their own, bound to the example's event loop. ``release(store)``
    deletes the keys under the store's prefix (SCAN + UNLINK, never FLUSH). Call
    :meth:`close` when done. Raises ``ValueError`` for a URL redis-py cannot parse.
    """

    def __init__(self, url: str, *, asynchronous: bool = False, prefix: str = "cis-machine") -> None:
        self.url = url
        self.asynchronous = asynchronous
        self.prefix = prefix
        self.created = 0
        self._client = redis.Redis.from_url(url)

    def __call__(self, clock: FakeClock) -> Any:
        """A fresh store on ``clock`` under a new unique prefix."""
        self.created += 1
        prefix = f"{self.prefix}-{secrets.token_hex(6)}"
        if self.asynchronous:
            return AsyncRedisStore.from_url(self.url, prefix=prefix, clock=clock)
        return RedisStore(self._client, prefix=prefix, clock=clock)

    def release(self, store: Any) -> None:
        """Delete every key under ``store.prefix`` (the example is over)."""
        keys = list(self._client.scan_iter(match=f"{store.prefix}:*", count=1000))
        if keys:
            self._client.unlink(*keys)

    def close(self) -> None:
        """Close the shared client."""
        self._client.close()


class SqliteStoreFactory:
    """``factory(clock)`` -> a :class:`~invocation_store.adapters.sqlite.SqliteStore` on a fresh file.

    ``directory``: where the example databases go (a temporary one of the caller's).
    ``asynchronous``: build :class:`~invocation_store.adapters.sqlite.AsyncSqliteStore`.
    ``options`` are passed to the store (e.g. ``synchronous="NORMAL"``). ``release(store)``
    deletes the example's files.
    """

    def __init__(
        self, directory: str | os.PathLike[str], *, asynchronous: bool = False, **options: Any
    ) -> None:
        self.directory = Path(directory)
        self.asynchronous = asynchronous
        self.options = options
        self.created = 0

    def __call__(self, clock: FakeClock) -> Any:
        """A fresh store on ``clock`` in a new file."""
        from ..adapters.sqlite import AsyncSqliteStore, SqliteStore  # noqa: PLC0415 - only for SQLite users

        self.created += 1
        path = self.directory / f"example-{self.created}-{secrets.token_hex(4)}.db"
        store = SqliteStore(path, clock=clock, **self.options)
        return AsyncSqliteStore(store=store) if self.asynchronous else store

    def release(self, store: Any) -> None:
        """Delete the example's database files (the store is closed)."""
        sync = getattr(store, "sync", store)
        for suffix in ("", "-wal", "-shm"):
            Path(sync.path + suffix).unlink(missing_ok=True)


class PostgresStoreFactory:
    """``factory(clock)`` -> a :class:`~invocation_store.adapters.postgres.PostgresStore` under fresh tables.

    ``dsn``: the database (use a private server, see
    :mod:`invocation_store.testing.postgres_server`). Each example gets its own table
    prefix on one shared pool; ``release(store)`` drops its tables. ``asynchronous``:
    build an :class:`~invocation_store.adapters.postgres.AsyncPostgresStore` on its own
    pool (bound to the example's event loop). ``options`` go to the store. Call
    :meth:`close` when done.
    """

    def __init__(
        self, dsn: str, *, asynchronous: bool = False, prefix: str = "cis_machine", **options: Any
    ) -> None:
        from psycopg_pool import ConnectionPool  # noqa: PLC0415 - the postgres extra

        self.dsn = dsn
        self.asynchronous = asynchronous
        self.prefix = prefix
        self.options = options
        self.created = 0
        self._pool: Any = ConnectionPool(dsn, min_size=1, max_size=4, open=True)

    def __call__(self, clock: FakeClock) -> Any:
        """A fresh store on ``clock`` under a new table prefix."""
        from ..adapters.postgres import AsyncPostgresStore, PostgresStore  # noqa: PLC0415 - the postgres extra

        self.created += 1
        prefix = f"{self.prefix}_{secrets.token_hex(4)}_"
        if self.asynchronous:
            return AsyncPostgresStore.from_dsn(
                self.dsn, max_size=2, prefix=prefix, clock=clock, **self.options
            )
        return PostgresStore(self._pool, prefix=prefix, clock=clock, **self.options)

    def release(self, store: Any) -> None:
        """Drop the example's tables."""
        drop_tables(self.dsn, store.prefix)

    def close(self) -> None:
        """Close the shared pool."""
        self._pool.close()


def drop_tables(dsn: str, prefix: str) -> None:
    """Drop every table whose name starts with ``prefix`` (a store's tables) in the database ``dsn``."""
    import psycopg  # noqa: PLC0415 - the postgres extra
    from psycopg import sql  # noqa: PLC0415

    with psycopg.connect(dsn, autocommit=True) as conn:
        names = [
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables "
                "WHERE schemaname = current_schema() AND starts_with(tablename, %s)",
                (prefix,),
            ).fetchall()
        ]
        if names:
            conn.execute(sql.SQL("DROP TABLE {}").format(sql.SQL(", ").join(map(sql.Identifier, names))))
