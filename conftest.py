"""Shared pytest fixtures for tests/ and stateful_tests/.

OWNERSHIP: the Redis half of this file (``redis_url`` and the ``redis`` branches of
the store factories) is filled in with the Redis store. Fixture names are a contract:

- ``clock``: a :class:`~invocation_store.testing.FakeClock`.
- ``redis_url``: URL of a private, throwaway redis-server (or ``REDIS_URL``);
  skips with a how-to reason when none can be had, fails under ``CI=true``.
- ``make_store``: parametrized ``memory``/``redis``; ``make_store(clock)`` returns a
  fresh sync store (own key prefix in Redis), closed after the test.
- ``make_async_store``: the same for async stores (``memory``/``redis``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from invocation_store.adapters import AsyncInvocationStore, AsyncMemoryStore, InvocationStore, MemoryStore
from invocation_store.testing import FakeClock


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
def make_async_store(request: pytest.FixtureRequest) -> Iterator[Callable[[FakeClock], AsyncInvocationStore]]:
    """Factory of fresh async stores of the parametrized kind (close them in the test's loop)."""

    def factory(clock: FakeClock) -> AsyncInvocationStore:
        if request.param == "memory":
            return AsyncMemoryStore(clock=clock)
        result: AsyncInvocationStore = request.getfixturevalue("async_redis_store_factory")(clock)
        return result

    yield factory
