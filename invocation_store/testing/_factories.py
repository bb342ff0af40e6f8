"""Store factories for the stateful machine: a fresh, empty store per example.

:class:`RedisStoreFactory` gives every example a Redis store under a fresh, unique
key prefix on one server, and deletes that prefix's keys when the example ends
(``release``, called by the machine's teardown): a shared server is never flushed.
"""

from __future__ import annotations

import secrets
from typing import Any

import redis

from ..adapters import AsyncRedisStore, RedisStore
from ._clock import FakeClock

__all__ = ["RedisStoreFactory"]


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
