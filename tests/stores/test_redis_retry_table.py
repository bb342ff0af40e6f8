"""Which Redis failures the stores retry: one tested row per error class (CIS-DUR-4).

Each row plants one failure in the create's round trip (the store's ``EVALSHA`` call) of a
store on a private server, and asserts whether it is retried, how many sends it costs (pinned
to the ``RetryPolicy``'s backoff schedule, so a loop without backoff fails), the code
answered and the time taken (within ``RetryPolicy.budget_ms`` plus one round trip). NOSCRIPT
and corrupt records have rows of their own; a server that is down or stalled (SIGSTOP) is
answered within the budget plus one round trip, each on both store flavours.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import redis.exceptions

from invocation_store.adapters import (
    AsyncRedisStore,
    CorruptRecordError,
    RedisStore,
    RetryPolicy,
    StoreUnavailableError,
)
from invocation_store.kernel import Admission, ErrorCode
from invocation_store.testing import FakeClock
from invocation_store.testing.redis_server import redis_server

from ._support import LIMITS, RUN, open_default_run, request

pytestmark = pytest.mark.redis

BUDGET_MS = 300
POLICY = RetryPolicy(budget_ms=BUDGET_MS)
#: The most a row may take past the budget: one round trip to a local server, plus slack
#: for a loaded machine.
ROUND_TRIP_S = 0.25


def most_sends(policy: RetryPolicy) -> int:
    """Sends of an operation whose every attempt fails at once: the first, then one per pause that fits.

    A retry starts only if its pause ends before the deadline (``_deadline.retry_allowed``), so
    the pauses taken are the longest prefix of ``policy.pauses_ms()`` whose sum is within
    ``policy.budget_ms``: 5+10+20+40+80 = 155 ms of the default schedule fit 300 ms, +160 does not.
    """
    sends, spent = 1, 0
    for pause in policy.pauses_ms():
        if spent + pause > policy.budget_ms:
            return sends
        spent += pause
        sends += 1
    raise AssertionError("unreachable: pauses_ms() never ends")


def pauses_before(policy: RetryPolicy, sends: int) -> float:
    """Seconds of pauses an operation sleeps before its ``sends``-th send (no send is faster)."""
    pauses = policy.pauses_ms()
    return sum(next(pauses) for _ in range(sends - 1)) / 1000


#: (label, what the planted send raises or answers, retried?, the StoreUnavailableError cause)
TABLE: list[tuple[str, Callable[[], object], bool, str]] = [
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
    # A corrupt record (CIS-DUR-7): the script refuses a record without expiry (its CORRUPT reply), or
    # the record's key holds another type (WRONGTYPE): permanent, CorruptRecordError naming the call.
    ("corrupt record (no TTL)", lambda: b"CORRUPT NoTTL", False, "NoTTL"),
    (
        "corrupt record (WRONGTYPE)",
        lambda: redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"),
        False,
        "WrongType",
    ),
]


class _Planted:
    """Wraps a store's script sender (``_send``): the create script's EVALSHA gets ``make()`` instead.

    ``make()`` is raised if it is an exception, else answered as the reply; only the first
    ``times`` sends are planted (all by default), later ones go to the server.
    """

    def __init__(
        self, execute: Callable[..., Any], sha: str, make: Callable[[], object], times: int | None = None
    ) -> None:
        self._execute = execute
        self._sha = sha
        self._make = make
        self._times = times
        self.sends = 0

    def _planted(self, args: tuple[Any, ...]) -> bool:
        if not (len(args) > 1 and args[0] == "EVALSHA" and args[1] == self._sha):
            return False
        self.sends += 1
        return self._times is None or self.sends <= self._times

    def _answer(self) -> object:
        made = self._make()
        if isinstance(made, Exception):
            raise made
        return made

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._planted(args):
            return self._answer()
        return self._execute(*args, **kwargs)

    async def async_call(self, *args: Any, **kwargs: Any) -> Any:
        if self._planted(args):
            return self._answer()
        return await self._execute(*args, **kwargs)


def _check(retried: bool, sends: int, waited: float, caught: StoreUnavailableError, cause: str) -> None:
    assert caught.code is ErrorCode.STORE_UNAVAILABLE
    assert caught.cause == cause
    assert caught.__context__ is None
    if retried:
        # Every pause of the schedule that fits the budget, on a loaded machine one fewer: never a
        # send without its pause, never a retry the budget has no room for.
        assert most_sends(POLICY) - 1 <= sends <= most_sends(POLICY), sends
        assert pauses_before(POLICY, sends) <= waited <= BUDGET_MS / 1000 + ROUND_TRIP_S, waited
    else:
        assert sends == 1
        assert waited <= ROUND_TRIP_S, waited
    if cause in ("NoTTL", "WrongType"):
        assert isinstance(caught, CorruptRecordError)
        assert caught.corrupt == {"call_1": cause}
        assert caught.permanent


def test_the_schedule_allows_six_sends_in_300_ms() -> None:
    """CIS-DUR-4: the default backoff (5 ms doubling to 200 ms) fits five pauses (155 ms) in a
    300 ms budget, not the sixth (+160 ms): six sends at most; none retried with a budget of 0."""
    assert most_sends(POLICY) == 6
    assert pauses_before(POLICY, 6) == 0.155
    assert most_sends(RetryPolicy(budget_ms=0)) == 1
    assert most_sends(RetryPolicy()) == 15  # 5+10+20+40+80+160 = 315 ms, then 8 x 200 ms (the cap): 1915 ms


@pytest.mark.parametrize(("label", "make", "retried", "cause"), TABLE, ids=[row[0] for row in TABLE])
def test_retry_classification(
    label: str, make: Callable[[], object], retried: bool, cause: str, redis_url: str, clock: FakeClock
) -> None:
    """CIS-DUR-4, CIS-DUR-7: connection loss, timeouts, TRYAGAIN, MOVED/ASK, CLUSTERDOWN and READONLY
    are resent with backoff until the budget is spent: every pause that fits, no more (then
    STORE_UNAVAILABLE, within budget + one round trip); OOM, a script error, an unknown error reply
    and a corrupt record are answered STORE_UNAVAILABLE after one send."""
    store = RedisStore.from_url(
        redis_url, prefix=f"retry-{label.replace(' ', '-')}", clock=clock, retry_policy=POLICY
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
    label: str, make: Callable[[], object], retried: bool, cause: str, redis_url: str, clock: FakeClock
) -> None:
    """CIS-DUR-4, CIS-DUR-10: the asyncio store classifies every row as the blocking one does."""

    async def scenario() -> tuple[int, float, StoreUnavailableError]:
        store = AsyncRedisStore.from_url(
            redis_url, prefix=f"aretry-{label.replace(' ', '-')}", clock=clock, retry_policy=POLICY
        )
        try:
            opened = await store.open_run(
                RUN, deadline_ms=clock() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=10**6
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


def _noscript() -> Exception:
    return redis.exceptions.NoScriptError("No matching script. Please use EVAL.")


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_noscript_reloads_the_scripts_and_resends_once(
    flavour: str, redis_url: str, clock: FakeClock
) -> None:
    """CIS-STORE-5, CIS-DUR-4: NOSCRIPT is not a budgeted retry: the server is checked again, the
    scripts loaded and the call resent once. One NOSCRIPT (a flushed or restarted server): the
    create lands, two sends; a second NOSCRIPT: STORE_UNAVAILABLE (NoScriptError) after exactly two
    sends, well inside the budget (one server check and two round trips), on both flavours."""

    def sync_side(times: int | None) -> tuple[object, int, float]:
        store = RedisStore.from_url(redis_url, prefix=f"noscript-{times}", clock=clock, retry_policy=POLICY)
        try:
            open_default_run(store, clock())
            planted = _Planted(store._send, store._create.sha, _noscript, times)
            store._send = planted
            started = time.monotonic()
            try:
                outcome: object = store.create(request(), LIMITS)
            except StoreUnavailableError as exc:
                outcome = exc
            return outcome, planted.sends, time.monotonic() - started
        finally:
            store.close()

    async def async_side(times: int | None) -> tuple[object, int, float]:
        store = AsyncRedisStore.from_url(
            redis_url, prefix=f"anoscript-{times}", clock=clock, retry_policy=POLICY
        )
        try:
            opened = await store.open_run(
                RUN, deadline_ms=clock() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=10**6
            )
            assert not isinstance(opened, ErrorCode)
            planted = _Planted(store._send, store._create.sha, _noscript, times)
            store._send = planted.async_call
            started = time.monotonic()
            try:
                outcome: object = await store.create(request(), LIMITS)
            except StoreUnavailableError as exc:
                outcome = exc
            return outcome, planted.sends, time.monotonic() - started
        finally:
            await store.close()

    def run(times: int | None) -> tuple[object, int, float]:
        return sync_side(times) if flavour == "sync" else asyncio.run(async_side(times))

    recovered, sends, waited = run(1)
    assert isinstance(recovered, Admission), recovered
    assert not recovered.replayed
    assert sends == 2
    assert waited <= 2 * ROUND_TRIP_S, waited
    refused, sends, waited = run(None)
    assert isinstance(refused, StoreUnavailableError)
    assert refused.code is ErrorCode.STORE_UNAVAILABLE
    assert refused.cause == "NoScriptError"
    assert refused.__context__ is None
    assert sends == 2
    assert waited <= 2 * ROUND_TRIP_S, waited


# -- a server that is down or stalled ---------------------------------------------------


#: The socket timeout of the stalled rows: one round trip to a stalled server costs this.
STALL_TIMEOUT_S = 0.2


@contextlib.contextmanager
def _failing_server(kind: str) -> Iterator[tuple[str, Callable[[], None]]]:
    """A private server and ``fail()``: kill it ("down": connections refused) or SIGSTOP it ("stalled")."""
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(redis_server())
        with redis.Redis.from_url(url) as admin:
            pid = int(admin.info("server")["process_id"])

        def fail() -> None:
            if kind == "down":
                os.kill(pid, signal.SIGKILL)
                for _ in range(100):  # until the port refuses connections
                    try:
                        with redis.Redis.from_url(url, socket_connect_timeout=0.1) as probe:
                            probe.ping()
                    except redis.ConnectionError:
                        return
                    time.sleep(0.01)
                raise AssertionError("the server did not go down")
            os.kill(pid, signal.SIGSTOP)
            stack.callback(os.kill, pid, signal.SIGCONT)

        yield url, fail


class _Sends:
    """Counts the create script's sends through a store's script sender (``_send``), then sends it."""

    def __init__(self, send: Callable[..., Any], sha: str) -> None:
        self.inner = send
        self.sha = sha
        self.count = 0

    def _counted(self, args: tuple[Any, ...]) -> None:
        if len(args) > 1 and args[0] == "EVALSHA" and args[1] == self.sha:
            self.count += 1

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._counted(args)
        return self.inner(*args, **kwargs)

    async def async_call(self, *args: Any, **kwargs: Any) -> Any:
        self._counted(args)
        return await self.inner(*args, **kwargs)


@pytest.mark.parametrize("flavour", ["sync", "async"])
@pytest.mark.parametrize("kind", ["down", "stalled"])
def test_a_down_or_stalled_server_is_answered_within_the_budget_plus_one_round_trip(
    kind: str, flavour: str, clock: FakeClock
) -> None:
    """CIS-DUR-4, CIS-DUR-13: once the server of an open run is killed (connections refused) or
    stalled (SIGSTOP: every send times out after the socket timeout), a create is STORE_UNAVAILABLE
    (ConnectionError, TimeoutError) within RetryPolicy.budget_ms plus one round trip (the socket
    timeout), having been resent (more than one send, never more than the schedule allows)."""
    options = {"socket_timeout": STALL_TIMEOUT_S, "retry_policy": POLICY}
    round_trip = STALL_TIMEOUT_S if kind == "stalled" else 0.0
    cause = "TimeoutError" if kind == "stalled" else "ConnectionError"
    with _failing_server(kind) as (url, fail):
        if flavour == "sync":
            store = RedisStore.from_url(url, prefix="failing", clock=clock, **options)
            open_default_run(store, clock())
            connects = _Sends(store._send, store._create.sha)
            store._send = connects
            fail()
            started = time.monotonic()
            with pytest.raises(StoreUnavailableError) as caught:
                store.create(request(), LIMITS)
            waited = time.monotonic() - started
            store.close()
            error = caught.value
        else:

            async def scenario() -> tuple[float, StoreUnavailableError, _Sends]:
                store = AsyncRedisStore.from_url(url, prefix="failing", clock=clock, **options)
                opened = await store.open_run(
                    RUN, deadline_ms=clock() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=10**6
                )
                assert not isinstance(opened, ErrorCode)
                counter = _Sends(store._send, store._create.sha)
                store._send = counter.async_call
                fail()
                started = time.monotonic()
                with pytest.raises(StoreUnavailableError) as raised:
                    await store.create(request(), LIMITS)
                took = time.monotonic() - started
                await store.close()
                return took, raised.value, counter

            waited, error, connects = asyncio.run(scenario())
    assert error.code is ErrorCode.STORE_UNAVAILABLE
    assert error.cause == cause
    assert error.__context__ is None
    assert BUDGET_MS / 1000 / 2 <= waited <= BUDGET_MS / 1000 + round_trip + ROUND_TRIP_S, waited
    assert 2 <= connects.count <= most_sends(POLICY), connects.count


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_the_version_check_of_a_first_read_shares_the_reads_budget(
    flavour: str, redis_url: str, clock: FakeClock
) -> None:
    """CIS-DUR-4, CIS-STORE-7: a store's first read checks the server's version (HELLO) and then reads,
    within one budget from the start of the read: a version check answered late (planted: 350 ms of a
    400 ms budget) leaves the read only the rest, so a read that keeps failing (connection refused)
    is STORE_UNAVAILABLE within the budget plus one round trip, not after a budget of its own."""
    policy = RetryPolicy(budget_ms=400)
    late_s = 0.35

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise redis.ConnectionError("Connection refused.")

    async def async_refused(*args: Any, **kwargs: Any) -> Any:
        raise redis.ConnectionError("Connection refused.")

    if flavour == "sync":
        store = RedisStore.from_url(redis_url, prefix="first-read", clock=clock, retry_policy=policy)
        probe = store._on_every_node

        def late_probe(commands: Any) -> Any:
            time.sleep(late_s)
            return probe(commands)

        store._on_every_node = late_probe
        store._client.hmget = refused
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError) as caught:
            store.get_run(RUN)
        waited = time.monotonic() - started
        assert store._versioned  # the version was checked: the read is what failed
        store.close()
        error = caught.value
    else:

        async def scenario() -> tuple[float, StoreUnavailableError]:
            store = AsyncRedisStore.from_url(redis_url, prefix="first-read", clock=clock, retry_policy=policy)
            probe = store._on_every_node

            async def late_probe(commands: Any) -> Any:
                await asyncio.sleep(late_s)
                return await probe(commands)

            store._on_every_node = late_probe
            store._client.hmget = async_refused
            started = time.monotonic()
            with pytest.raises(StoreUnavailableError) as raised:
                await store.get_run(RUN)
            took = time.monotonic() - started
            assert store._versioned
            await store.close()
            return took, raised.value

        waited, error = asyncio.run(scenario())
    assert error.cause == "ConnectionError"
    assert late_s <= waited <= policy.budget_ms / 1000 + 0.2, waited
