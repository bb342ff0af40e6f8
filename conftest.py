"""Shared pytest fixtures for tests/ and stateful_tests/.

Fixture names are a contract that the test suites and the stateful kit rely on:

- ``clock``: a :class:`~invocation_store.testing.FakeClock`.
- ``redis_url``: URL of a private, throwaway redis-server (or ``REDIS_URL``);
  skips with a how-to reason when none can be had, fails under ``CI=true``.
- ``make_store``: parametrized ``memory``/``redis``; ``make_store(clock)`` returns a
  fresh sync store (own key prefix in Redis), closed after the test.
- ``make_async_store``: the same for async stores (``memory``/``redis``).
- ``private_redis_url``: URL of a redis-server this session started itself, even
  when ``REDIS_URL`` is set: the only kind a test may flush, ``SCRIPT FLUSH``,
  ``MONITOR`` or reset statistics on.
- ``redis_store_factory`` / ``async_redis_store_factory``: ``factory(clock)`` builds a
  Redis store on ``redis_url`` with a fresh unique key prefix; its keys are deleted
  after the test (by prefix: a shared server is never flushed).

Tests that use Redis get the ``redis`` marker automatically (``-m "not redis"``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Iterable, Iterator
from typing import NoReturn

import pytest
import redis
from hypothesis import HealthCheck, settings

from invocation_store.adapters import (
    AsyncInvocationStore,
    AsyncMemoryStore,
    AsyncRedisStore,
    InvocationStore,
    MemoryStore,
    RedisStore,
)
from invocation_store.testing import FakeClock
from invocation_store.testing.postgres_server import (
    HOW_TO_GET_POSTGRES,
    PostgresServer,
    PostgresUnavailableError,
)
from invocation_store.testing.redis_server import HOW_TO_GET_REDIS, RedisServerUnavailableError, redis_server

_REDIS_FIXTURES = frozenset(
    {"redis_url", "private_redis_url", "redis_store_factory", "async_redis_store_factory"}
)

# Hypothesis profiles, registered once for the whole session and chosen by
# HYPOTHESIS_PROFILE (dev|ci|thorough); CI=true selects ci. See stateful_tests/conftest.py.
_BUILTIN_CI = settings.get_profile("ci")
settings.register_profile(
    "ci",
    _BUILTIN_CI,
    max_examples=100,
    stateful_step_count=50,
    deadline=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "dev",
    max_examples=25,
    stateful_step_count=30,
    deadline=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    _BUILTIN_CI,
    derandomize=False,
    max_examples=1_000,
    stateful_step_count=100,
    deadline=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") == "true" else "dev")
settings.load_profile(PROFILE)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that talks to Redis with ``redis``, and every one on PostgreSQL with ``postgres``."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & {"postgres", "postgres_dsn"}:
            item.add_marker(pytest.mark.postgres)
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec is not None else {}
        if names & _REDIS_FIXTURES or "redis" in (params.get("make_store"), params.get("make_async_store")):
            item.add_marker(pytest.mark.redis)


@pytest.fixture
def clock() -> FakeClock:
    """A fake clock at a fixed start time."""
    return FakeClock()


@pytest.fixture(params=["memory", "redis"])
def make_store(request: pytest.FixtureRequest) -> Iterator[Callable[[FakeClock], InvocationStore]]:
    """Factory of fresh sync stores of the parametrized kind."""
    created: list[InvocationStore] = []

    def factory(clock: FakeClock) -> InvocationStore:
        if request.param == "memory":
            store: InvocationStore = MemoryStore(clock)
        else:
            store = request.getfixturevalue("redis_store_factory")(clock)
        created.append(store)
        return store

    yield factory
    for store in created:
        store.close()


@pytest.fixture(params=["memory", "redis"])
def make_async_store(request: pytest.FixtureRequest) -> Callable[[FakeClock], AsyncInvocationStore]:
    """Factory of fresh async stores of the parametrized kind (close them in the test's loop)."""

    def factory(clock: FakeClock) -> AsyncInvocationStore:
        if request.param == "memory":
            return AsyncMemoryStore(clock=clock)
        result: AsyncInvocationStore = request.getfixturevalue("async_redis_store_factory")(clock)
        return result

    return factory


# -- Redis ---------------------------------------------------------------------------


def _no_redis(reason: str) -> NoReturn:
    how_to = "" if HOW_TO_GET_REDIS in reason else f"; {HOW_TO_GET_REDIS}"
    message = f"no Redis server for the Redis-backed tests: {reason}{how_to}"
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def private_redis_url() -> Iterator[str]:
    """A redis-server started by this session on a free loopback port, killed at the end."""
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(redis_server())
        except RedisServerUnavailableError as exc:
            _no_redis(str(exc))
        yield url


@pytest.fixture(scope="session")
def redis_url(request: pytest.FixtureRequest) -> str:
    """``REDIS_URL`` if set (never flushed), else the session's private server."""
    from_env = os.environ.get("REDIS_URL")
    if from_env:
        return from_env
    url: str = request.getfixturevalue("private_redis_url")
    return url


def _unique_prefix() -> str:
    return f"cis-test-{secrets.token_hex(6)}"


def _delete_keys(url: str, prefixes: Iterable[str]) -> None:
    """Delete the keys under ``prefixes`` (glob-free by construction); never FLUSH."""
    with contextlib.suppress(redis.RedisError, OSError), redis.Redis.from_url(url) as client:
        for prefix in prefixes:
            keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
            if keys:
                client.unlink(*keys)


@pytest.fixture
def redis_store_factory(redis_url: str) -> Iterator[Callable[[FakeClock], RedisStore]]:
    """``factory(clock)`` -> a RedisStore with a fresh prefix; closed and its keys deleted after the test."""
    stores: list[RedisStore] = []

    def factory(clock: FakeClock) -> RedisStore:
        store = RedisStore.from_url(redis_url, prefix=_unique_prefix(), clock=clock)
        stores.append(store)
        return store

    yield factory
    for store in stores:
        store.close()
    _delete_keys(redis_url, [store.prefix for store in stores])


@pytest.fixture
def async_redis_store_factory(redis_url: str) -> Iterator[Callable[[FakeClock], AsyncRedisStore]]:
    """``factory(clock)`` -> an AsyncRedisStore with a fresh prefix (close it in the test's loop)."""
    stores: list[AsyncRedisStore] = []

    def factory(clock: FakeClock) -> AsyncRedisStore:
        store = AsyncRedisStore.from_url(redis_url, prefix=_unique_prefix(), clock=clock)
        stores.append(store)
        return store

    yield factory
    _delete_keys(redis_url, [store.prefix for store in stores])


# -- PostgreSQL ----------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A private PostgreSQL server started from the installed binaries (initdb, postgres) for the
    session, on a free loopback port, stopped by its pid at the end; skips (fails under CI=true)
    without the binaries. The machine's own PostgreSQL is never used."""
    try:
        server = PostgresServer()
        server.__enter__()
    except PostgresUnavailableError as exc:
        message = f"no PostgreSQL server for the PostgreSQL-backed tests: {exc}; {HOW_TO_GET_POSTGRES}"
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    try:
        yield server
    finally:
        server.__exit__(None, None, None)


@pytest.fixture(scope="session")
def postgres_dsn(postgres: PostgresServer) -> str:
    """The libpq connection string of the session's private PostgreSQL server."""
    return postgres.dsn
