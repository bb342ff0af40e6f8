"""Which Redis failures the stores retry: one tested row per error class (CIS-DUR-4).

Each row plants one failure in the create's round trip (the store's ``EVALSHA`` call) of a
store on a private server, and asserts whether it is retried, how many sends it costs, the
code answered and the time taken (within ``RetryPolicy.budget_ms`` plus one round trip).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
import redis.exceptions

from invocation_store.adapters import AsyncRedisStore, RedisStore, RetryPolicy, StoreUnavailableError
from invocation_store.kernel import Admission, ErrorCode
from invocation_store.testing import FakeClock

from ._support import LIMITS, open_default_run, request

pytestmark = pytest.mark.redis

BUDGET_MS = 300
#: The most a retried row may take past the budget: one round trip to a local server, plus slack
#: for a loaded machine.
ROUND_TRIP_S = 0.25

#: (label, the failure, retried?, the StoreUnavailableError cause answered)
TABLE: list[tuple[str, Callable[[], Exception], bool, str]] = [
    (
        "connection loss",
        lambda: redis.ConnectionError("Connection closed by server."),
        True,
        "ConnectionError",
    ),
    ("timeout", lambda: redis.TimeoutError("Timeout reading from socket"), True, "TimeoutError"),
    (
        "TRYAGAIN",
        lambda: redis.exceptions.TryAgainError("Multiple keys request during rehashing"),
        True,
        "TryAgainError",
    ),
    ("MOVED", lambda: redis.exceptions.MovedError("3999 127.0.0.1:6381"), True, "MovedError"),
    ("ASK", lambda: redis.exceptions.AskError("3999 127.0.0.1:6381"), True, "AskError"),
    (
        "CLUSTERDOWN",
        lambda: redis.exceptions.ClusterDownError("The cluster is down"),
        True,
        "ClusterDownError",
    ),
    (
        "READONLY",
        lambda: redis.exceptions.ReadOnlyError("You can't write against a read only replica."),
        True,
        "ReadOnlyError",
    ),
    (
        "OOM",
        lambda: redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'."),
        False,
        "OutOfMemoryError",
    ),
    (
        "script error",
        lambda: redis.ResponseError("ERR user_script:12: Script attempted to access nonexistent global"),
        False,
        "ResponseError",
    ),
    (
        "unknown error reply",
        lambda: redis.ResponseError("WEIRD something no server says"),
        False,
        "ResponseError",
    ),
]


class _Planted:
    """Wraps a store's script sender (``_send``): every EVALSHA of the create script fails with ``make()``."""

    def __init__(self, execute: Callable[..., Any], sha: str, make: Callable[[], Exception]) -> None:
        self._execute = execute
        self._sha = sha
        self._make = make
        self.sends = 0

    def _planted(self, args: tuple[Any, ...]) -> bool:
        return len(args) > 1 and args[0] == "EVALSHA" and args[1] == self._sha

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._planted(args):
            self.sends += 1
            raise self._make()
        return self._execute(*args, **kwargs)

    async def async_call(self, *args: Any, **kwargs: Any) -> Any:
        if self._planted(args):
            self.sends += 1
            raise self._make()
        return await self._execute(*args, **kwargs)


def _check(retried: bool, sends: int, waited: float, caught: StoreUnavailableError, cause: str) -> None:
    assert caught.code is ErrorCode.STORE_UNAVAILABLE
    assert caught.cause == cause
    assert caught.__context__ is None
    if retried:
        assert sends >= 3, sends  # backoff 5, 10, 20, ... ms within a 300 ms budget
        assert BUDGET_MS / 1000 / 2 <= waited <= BUDGET_MS / 1000 + ROUND_TRIP_S, waited
    else:
        assert sends == 1
        assert waited <= ROUND_TRIP_S, waited


@pytest.mark.parametrize(("label", "make", "retried", "cause"), TABLE, ids=[row[0] for row in TABLE])
def test_retry_classification(
    label: str, make: Callable[[], Exception], retried: bool, cause: str, redis_url: str, clock: FakeClock
) -> None:
    """CIS-DUR-4: connection loss, timeouts, TRYAGAIN, MOVED/ASK, CLUSTERDOWN and READONLY are resent
    with backoff until the budget is spent (then STORE_UNAVAILABLE, within budget + one round trip); OOM,
    a script error and an unknown error reply are answered STORE_UNAVAILABLE after one send."""
    store = RedisStore.from_url(
        redis_url,
        prefix=f"retry-{label.replace(' ', '-')}",
        clock=clock,
        retry_policy=RetryPolicy(budget_ms=BUDGET_MS),
    )
    open_default_run(store, clock())
    planted = _Planted(store._send, store._create.sha, make)
    store._send = planted
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as caught:
        store.create(request(), LIMITS)
    _check(retried, planted.sends, time.monotonic() - started, caught.value, cause)
    store._send = planted._execute
    assert isinstance(store.create(request("call_2"), LIMITS), Admission)
    store.close()


@pytest.mark.parametrize(("label", "make", "retried", "cause"), TABLE, ids=[row[0] for row in TABLE])
def test_retry_classification_async(
    label: str, make: Callable[[], Exception], retried: bool, cause: str, redis_url: str, clock: FakeClock
) -> None:
    """CIS-DUR-4, CIS-DUR-10: the asyncio store classifies every row as the blocking one does."""

    async def scenario() -> tuple[int, float, StoreUnavailableError]:
        store = AsyncRedisStore.from_url(
            redis_url,
            prefix=f"aretry-{label.replace(' ', '-')}",
            clock=clock,
            retry_policy=RetryPolicy(budget_ms=BUDGET_MS),
        )
        try:
            opened = await store.open_run(
                "run-1", deadline_ms=clock() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=10**6
            )
            assert not isinstance(opened, ErrorCode)
            planted = _Planted(store._send, store._create.sha, make)
            store._send = planted.async_call
            started = time.monotonic()
            with pytest.raises(StoreUnavailableError) as caught:
                await store.create(request(), LIMITS)
            return planted.sends, time.monotonic() - started, caught.value
        finally:
            await store.close()

    sends, waited, caught = asyncio.run(scenario())
    _check(retried, sends, waited, caught, cause)


def test_noscript_reloads_the_scripts_and_resends_once(redis_url: str, clock: FakeClock) -> None:
    """CIS-STORE-5, CIS-DUR-4: NOSCRIPT is not a budgeted retry: the server is checked again, the
    scripts loaded and the call resent once (two sends); a second NOSCRIPT is STORE_UNAVAILABLE."""
    store = RedisStore.from_url(redis_url, prefix="retry-noscript", clock=clock)
    open_default_run(store, clock())
    planted = _Planted(store._send, store._create.sha, lambda: redis.exceptions.NoScriptError("NOSCRIPT"))
    store._send = planted
    with pytest.raises(StoreUnavailableError) as caught:
        store.create(request(), LIMITS)
    assert planted.sends == 2
    assert caught.value.cause == "NoScriptError"
    store.close()
