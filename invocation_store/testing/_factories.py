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

__all__ = ["RedisStoreFactory", "SqliteStoreFactory"]


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
