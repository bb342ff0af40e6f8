"""What a Redis store logs when its server goes away: one line per failed operation, named (CIS-DUR-4).

The store checks a live server, opens a run and admits a call; then the server stops
and every operation is called once. Each raises StoreUnavailableError and logs
exactly ``redis store: <operation> failed (ConnectionError)``, preceded (with a retry
budget) only by ``redis store: retrying after ConnectionError`` lines. Sync and async
stores are separate modules and both are checked, so a wrong operation name, a
dropped cause or a changed text fails here. No line carries a key, URL or payload.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest

from invocation_store.adapters import AsyncRedisStore, RedisStore, RetryPolicy, StoreUnavailableError
from invocation_store.testing import FakeClock
from invocation_store.testing.redis_server import redis_server

from ._support import LIMITS, RUN, admitted, open_default_run, ready, request

pytestmark = pytest.mark.redis

STORE_LOG = "invocation_store.redis"
RETRY_LINE = "redis store: retrying after ConnectionError"

#: (operation name as logged, the call) for every store operation that talks to the server.
OPERATIONS: list[tuple[str, Callable[[Any, Any, Any], Any]]] = [
    ("get_run", lambda store, before, after: store.get_run(RUN)),
    ("end_run", lambda store, before, after: store.cancel_run(RUN)),
    ("end_run", lambda store, before, after: store.close_run(RUN)),
    ("create", lambda store, before, after: store.create(request("call_2"), LIMITS)),
    ("complete", lambda store, before, after: store.complete(before, after)),
    ("get", lambda store, before, after: store.get(RUN, "call_1")),
    ("get_many", lambda store, before, after: store.get_many(RUN, ["call_1"])),
    ("get_progress", lambda store, before, after: store.get_progress(RUN, ["call_1"])),
    ("raw_sizes", lambda store, before, after: store.raw_sizes(RUN, ["call_1"])),
    ("completed", lambda store, before, after: store.completed(RUN)),
    ("calls", lambda store, before, after: store.calls(RUN)),
    ("ttl_remaining_ms", lambda store, before, after: store.ttl_remaining_ms(RUN, "call_1")),
]


class _Sync:
    """The async face of a sync store (the same calls, awaited)."""

    def __init__(self, store: RedisStore) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return method(*args, **kwargs)

        return call


async def _scenario(flavour: str, budget_ms: int) -> list[tuple[str, str, list[tuple[str, int, str]]]]:
    """Each operation's name, what it raised, and the store's log lines, against a stopped server."""
    clock = FakeClock(1_000_000)
    policy = RetryPolicy(budget_ms=budget_ms, first_delay_ms=1, max_delay_ms=2)
    with redis_server() as url:
        if flavour == "sync":
            sync_store = RedisStore.from_url(url, clock=clock, retry_policy=policy)
            sync_store.check_server()
            open_default_run(sync_store, clock())
            before = admitted(sync_store, request("call_1"))
            store: Any = _Sync(sync_store)
        else:
            async_store = AsyncRedisStore.from_url(url, clock=clock, retry_policy=policy)
            await async_store.check_server()
            opened = await async_store.open_run(
                RUN, deadline_ms=clock() + 60_000, ttl_ms=600_000, tool_call_budget=10, byte_budget=1_000_000
            )
            assert not isinstance(opened, int)
            created = await async_store.create(request("call_1"), LIMITS)
            before = created.record  # type: ignore[union-attr]
            store = async_store
    after = ready(before, clock())
    handler = _Lines()
    logger = logging.getLogger(STORE_LOG)
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    seen = []
    try:
        for name, operation in OPERATIONS:
            handler.lines.clear()
            try:
                await operation(store, before, after)
            except StoreUnavailableError as exc:
                raised = f"{type(exc).__name__} {exc.code.value}"
            else:
                raised = "nothing"
            seen.append((name, raised, list(handler.lines)))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        if flavour == "sync":
            sync_store.close()
        else:
            await async_store.close()
    return seen


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[tuple[str, int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.name, record.levelno, record.getMessage()))


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_each_operation_names_itself_when_the_server_is_gone(flavour: str) -> None:
    """No retry budget: one WARNING per operation, its own name, the cause's type name; nothing else."""
    for name, raised, lines in asyncio.run(_scenario(flavour, budget_ms=0)):
        assert raised == "StoreUnavailableError STORE_UNAVAILABLE", name
        assert lines == [(STORE_LOG, logging.WARNING, f"redis store: {name} failed (ConnectionError)")], name


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_retries_are_logged_before_the_failure(flavour: str) -> None:
    """With a budget: INFO retry lines (at least one), then the one WARNING naming the operation."""
    for name, raised, lines in asyncio.run(_scenario(flavour, budget_ms=40)):
        assert raised == "StoreUnavailableError STORE_UNAVAILABLE", name
        *retries, last = lines
        assert retries, name
        assert set(retries) == {(STORE_LOG, logging.INFO, RETRY_LINE)}, name
        assert last == (STORE_LOG, logging.WARNING, f"redis store: {name} failed (ConnectionError)"), name


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_budget_of_zero_never_retries_yet_every_operation_works(flavour: str) -> None:
    """CIS-DUR-4, CIS-DUR-13: RetryPolicy(budget_ms=0) is "never retry". Against a healthy server
    every operation of several steps (server check, script load after NOSCRIPT, the script)
    answers as usual; it once answered STORE_UNAVAILABLE (TimeoutError) for each, its second
    step refused by a deadline of "now"."""

    async def scenario() -> list[Any]:
        clock = FakeClock(1_000_000)
        with redis_server() as url:
            sync = RedisStore.from_url(url, clock=clock, retry_policy=RetryPolicy(budget_ms=0))
            store: Any = (
                _Sync(sync)
                if flavour == "sync"
                else AsyncRedisStore.from_url(url, clock=clock, retry_policy=RetryPolicy(budget_ms=0))
            )
            opened = await store.open_run(
                RUN, deadline_ms=clock() + 60_000, ttl_ms=600_000, tool_call_budget=10, byte_budget=1_000_000
            )
            created = await store.create(request("call_1"), LIMITS)
            after = ready(created.record, clock())
            stored = await store.complete(created.record, after)
            answers = [type(opened).__name__, created.replayed, stored == after, await store.completed(RUN)]
            sync.close()
            if flavour == "async":
                await store.close()
            return answers

    assert asyncio.run(scenario()) == ["RunState", False, True, ("call_1",)]
