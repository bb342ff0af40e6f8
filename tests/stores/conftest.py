"""Store-flavour fixtures: one parametrisation runs a contract test on every store.

- ``make_driver``: parametrized over :data:`FLAVOURS`; ``make_driver(clock)`` returns a
  :class:`~tests.stores._support.StoreDriver` over a fresh store of that flavour, closed
  after the test. Redis flavours carry the ``redis`` marker.
- ``make_redis_driver``: the same over the Redis flavours only, for contract rules that
  only a store with a server can break (a tampered key, a foreign record).
- ``make_every_driver``: ``make_every_driver(clock)`` returns one driver of every flavour
  (differential tests), carrying the ``redis`` marker.
- ``store_cluster_urls``: node URLs of a private 3-master Redis Cluster for the session.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster

from invocation_store.adapters import AsyncMemoryStore, AsyncRedisStore, MemoryStore, RedisStore
from invocation_store.adapters.postgres import AsyncPostgresStore, PostgresStore
from invocation_store.adapters.sqlite import AsyncSqliteStore, SqliteStore
from invocation_store.testing import FakeClock
from invocation_store.testing._factories import drop_tables
from invocation_store.testing.redis_server import RedisServerUnavailableError, redis_cluster

from ._support import MakeDriver, StoreDriver

#: Every store flavour a contract test runs on: both Redis stores also on a Redis Cluster
#: client (``redis.cluster`` and ``redis.asyncio.cluster``).
FLAVOURS = (
    "memory",
    "async-memory",
    "sqlite",
    "async-sqlite",
    "postgres",
    "async-postgres",
    "redis",
    "async-redis",
    "redis-cluster",
    "async-redis-cluster",
)
REDIS_FLAVOURS = tuple(flavour for flavour in FLAVOURS if "redis" in flavour)


def _params(flavours: tuple[str, ...]) -> list[object]:
    return [
        pytest.param(
            flavour,
            marks=[getattr(pytest.mark, kind) for kind in ("redis", "postgres") if kind in flavour],
            id=flavour,
        )
        for flavour in flavours
    ]


@pytest.fixture(scope="session")
def store_cluster_urls() -> Iterator[list[str]]:
    """A private 3-master Redis Cluster for the session (skip, or fail under CI, without one)."""
    with contextlib.ExitStack() as stack:
        try:
            urls = stack.enter_context(redis_cluster(3))
        except RedisServerUnavailableError as exc:
            message = f"no local Redis Cluster: {exc}"
            if os.environ.get("CI") == "true":
                pytest.fail(message, pytrace=False)
            pytest.skip(message)
        yield urls


class _Drivers:
    """Builds drivers of any flavour for one test and closes them (and their clients) after it."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._request = request
        self.drivers: list[StoreDriver] = []
        self._clients: list[redis.Redis | RedisCluster] = []
        self._prefixes: list[tuple[str, str]] = []

    def build(self, flavour: str, clock: FakeClock) -> StoreDriver:
        request = self._request
        if flavour == "memory":
            driver = StoreDriver(MemoryStore(clock), flavour)
        elif flavour == "async-memory":
            driver = StoreDriver(AsyncMemoryStore(clock=clock), flavour)
        elif flavour in ("postgres", "async-postgres"):
            dsn: str = request.getfixturevalue("postgres_dsn")
            prefix = f"cis_test_{secrets.token_hex(4)}_"
            self._prefixes.append((dsn, prefix))
            if flavour == "postgres":
                pg_store: Any = PostgresStore.from_dsn(dsn, max_size=8, prefix=prefix, clock=clock)
            else:
                pg_store = AsyncPostgresStore.from_dsn(dsn, max_size=8, prefix=prefix, clock=clock)
            driver = StoreDriver(pg_store, flavour)
        elif flavour in ("sqlite", "async-sqlite"):
            path = request.getfixturevalue("tmp_path") / f"store-{len(self.drivers)}.db"
            sqlite_store = SqliteStore(path, clock=clock)
            face = sqlite_store if flavour == "sqlite" else AsyncSqliteStore(store=sqlite_store)
            driver = StoreDriver(face, flavour)
        elif flavour == "redis-cluster":
            urls: list[str] = request.getfixturevalue("store_cluster_urls")
            cluster = RedisCluster.from_url(urls[0])
            self._clients.append(cluster)
            store = RedisStore(cluster, prefix=f"cis-test-{secrets.token_hex(6)}", clock=clock)
            driver = StoreDriver(store, flavour, redis_client=cluster)
        elif flavour == "async-redis-cluster":
            urls = request.getfixturevalue("store_cluster_urls")
            cluster = RedisCluster.from_url(urls[0])  # the test's own view of the keys
            self._clients.append(cluster)
            prefix = f"cis-test-{secrets.token_hex(6)}"
            # The store owns its asyncio client, so the driver closes it in the store's loop.
            async_store = AsyncRedisStore(
                AsyncRedisCluster.from_url(urls[0]), prefix=prefix, clock=clock, owns_client=True
            )
            driver = StoreDriver(async_store, flavour, redis_client=cluster)
        else:
            url: str = request.getfixturevalue("redis_url")
            client = redis.Redis.from_url(url)
            self._clients.append(client)
            name = "async_redis_store_factory" if flavour == "async-redis" else "redis_store_factory"
            driver = StoreDriver(request.getfixturevalue(name)(clock), flavour, redis_client=client)
        self.drivers.append(driver)
        return driver

    def close(self) -> None:
        for driver in self.drivers:
            driver.close()
        for client in self._clients:
            client.close()
        for dsn, prefix in self._prefixes:
            drop_tables(dsn, prefix)


#: ``make_driver``'s parameters: one per flavour, with its marker.
FLAVOUR_PARAMS = _params(FLAVOURS)


def driver_factory(request: pytest.FixtureRequest) -> Iterator[MakeDriver]:
    """Yield ``make_driver(clock)`` for the flavour ``request.param``; close its drivers afterwards."""
    drivers = _Drivers(request)
    yield lambda clock: drivers.build(request.param, clock)
    drivers.close()


@pytest.fixture(params=FLAVOUR_PARAMS)
def make_driver(request: pytest.FixtureRequest) -> Iterator[MakeDriver]:
    """``make_driver(clock)`` -> a :class:`StoreDriver` over a fresh store of each flavour."""
    yield from driver_factory(request)


@pytest.fixture(params=_params(REDIS_FLAVOURS))
def make_redis_driver(request: pytest.FixtureRequest) -> Iterator[MakeDriver]:
    """``make_redis_driver(clock)`` -> a :class:`StoreDriver` over a fresh Redis store of each flavour."""
    yield from driver_factory(request)


_EVERY = pytest.param("every", marks=[pytest.mark.redis, pytest.mark.postgres], id="every-flavour")


@pytest.fixture(params=[_EVERY])
def make_every_driver(request: pytest.FixtureRequest) -> Iterator[Callable[[FakeClock], list[StoreDriver]]]:
    """``make_every_driver(clock)`` -> one fresh :class:`StoreDriver` of every flavour, in FLAVOURS order."""
    drivers = _Drivers(request)
    yield lambda clock: [drivers.build(flavour, clock) for flavour in FLAVOURS]
    drivers.close()
