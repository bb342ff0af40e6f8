"""One deadline per operation, measured against a stalled server (CIS-DUR-4, CIS-DUR-13).

The private redis-server is stopped with SIGSTOP (and always resumed with SIGCONT): every
round trip to it then lasts the client's socket timeout. A run open and a create,
through the boundary of each flavour, must answer within ``RetryPolicy.budget_ms`` plus
one round trip, however many steps the operation has under its one deadline (the
eviction-policy check before the script, the clock reading of a fresh store). A create
whose durability wait was not reached takes its write back with one more attempt even
past the deadline: its exact bound, budget plus the wait in flight plus that one round
trip, is measured with the take-back stalled.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
import redis

from invocation_store import (
    AsyncRedisStore,
    AsyncToolBoundary,
    RedisStore,
    RunContext,
    ToolBoundary,
    ToolCallEnvelope,
    ToolRegistry,
    ToolSpec,
)
from invocation_store._deadline import use_clock
from invocation_store.adapters import Durability, RetryPolicy
from invocation_store.adapters._redis_server import POLICY_CHECK_INTERVAL_MS
from invocation_store.kernel import ErrorCode, EvidenceStatus, Projection, RunState
from invocation_store.testing.redis_server import redis_server

pytestmark = pytest.mark.redis

BUDGET_MS = 800
SOCKET_S = 0.3
#: Scheduling slack on a shared 2-core machine (never a retry: one more would take SOCKET_S).
SLACK_S = 0.25
POLICY = RetryPolicy(budget_ms=BUDGET_MS)


def _pid(url: str) -> int:
    with redis.Redis.from_url(url) as client:
        return int(client.info("server")["process_id"])


@contextlib.contextmanager
def stalled(pid: int) -> Iterator[None]:
    """The server stopped (SIGSTOP) for the block; always resumed (SIGCONT)."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


class SteppedClock:
    """The monotonic clock of deadlines and of the policy schedule: the real one plus an offset."""

    def __init__(self) -> None:
        self.offset_s = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset_s


class Runs:
    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, args: Any) -> object:
        self.runs += 1
        return {"ok": 1}


def _registry(executor: Runs) -> ToolRegistry:
    def project(raw: object, args: Any) -> Projection:
        return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="x", scope="s")

    return ToolRegistry([ToolSpec(name="t", executor=executor, projector=project)])


def _call(run_id: str, tool_call_id: str) -> ToolCallEnvelope:
    return ToolCallEnvelope(run_id=run_id, tool_call_id=tool_call_id, tool_name="t", arguments="{}")


def _assert_within_budget(waited: float) -> None:
    """Answered after at least one stalled round trip, and within the budget plus one round trip."""
    assert waited >= SOCKET_S, waited
    assert waited <= BUDGET_MS / 1000 + SOCKET_S + SLACK_S, waited


def _timed(operation: Callable[[], Any]) -> tuple[Any, float]:
    started = time.monotonic()
    result = operation()
    return result, time.monotonic() - started


def test_a_stalled_server_answers_opens_and_creates_within_the_retry_budget() -> None:
    """CIS-DUR-4, CIS-DUR-13, CIS-BND-7: with the server stalled, through ToolBoundary on a RedisStore
    (socket timeout 0.3 s, RetryPolicy.budget_ms 800): a run open (policy check, then the script), a
    create (the script), a create whose policy check is due (INFO, then the script, under one
    deadline) and the first create of a fresh store (its clock reading, then nothing) each answer
    STORE_UNAVAILABLE within the budget plus one round trip; no tool runs, and the creates sent are
    held for their re-send."""
    executor = Runs()
    clock = SteppedClock()
    with redis_server() as url, use_clock(clock):
        pid = _pid(url)
        store = RedisStore.from_url(
            url, prefix=f"stall-{secrets.token_hex(3)}", socket_timeout=SOCKET_S, retry_policy=POLICY
        )
        fresh = RedisStore.from_url(url, prefix="stall-fresh", socket_timeout=SOCKET_S, retry_policy=POLICY)
        boundary = ToolBoundary(store, _registry(executor))
        context = boundary.open_run(
            "run-s",
            deadline_ms=store.now_ms() + 600_000,
            ttl_ms=600_000,
            tool_call_budget=9,
            byte_budget=1 << 20,
        )
        assert isinstance(context, RunContext)
        steps: list[tuple[str, Callable[[], Any]]] = [
            (
                "open_run",
                lambda: boundary.open_run(
                    "run-t",
                    deadline_ms=store.now_ms() + 60_000,
                    ttl_ms=60_000,
                    tool_call_budget=1,
                    byte_budget=1,
                ),
            ),
            ("create", lambda: boundary.invoke(context, _call("run-s", "c1")).code),
            ("create, policy check due", lambda: boundary.invoke(context, _call("run-s", "c2")).code),
            (
                "create, fresh store",
                lambda: ToolBoundary(fresh, _registry(executor)).invoke(context, _call("run-s", "c3")).code,
            ),
        ]
        for name, step in steps:
            if name == "create, policy check due":
                clock.offset_s += POLICY_CHECK_INTERVAL_MS / 1000
            with stalled(pid):
                answer, waited = _timed(step)
            assert answer is ErrorCode.STORE_UNAVAILABLE, name
            _assert_within_budget(waited)
        assert executor.runs == 0
        assert boundary.pending_creates() == (("run-s", "c1"), ("run-s", "c2"))
        store.close()
        fresh.close()


def test_the_async_store_answers_a_stalled_server_within_the_retry_budget() -> None:
    """CIS-DUR-4, CIS-DUR-10, CIS-DUR-13: the same four operations through AsyncToolBoundary on an
    AsyncRedisStore with the server stalled: each STORE_UNAVAILABLE within the budget plus one round
    trip, no tool run."""
    executor = Runs()
    clock = SteppedClock()

    async def timed(operation: Callable[[], Awaitable[Any]]) -> tuple[Any, float]:
        started = time.monotonic()
        result = await operation()
        return result, time.monotonic() - started

    async def scenario(url: str, pid: int) -> None:
        with use_clock(clock):
            store = AsyncRedisStore.from_url(
                url, prefix="astall", socket_timeout=SOCKET_S, retry_policy=POLICY
            )
            fresh = AsyncRedisStore.from_url(
                url, prefix="astall-fresh", socket_timeout=SOCKET_S, retry_policy=POLICY
            )
            try:
                boundary = AsyncToolBoundary(store, _registry(executor))
                base = await store.synced_now_ms()
                context = await boundary.open_run(
                    "run-s",
                    deadline_ms=base + 600_000,
                    ttl_ms=600_000,
                    tool_call_budget=9,
                    byte_budget=1 << 20,
                )
                assert isinstance(context, RunContext)

                async def open_other() -> object:
                    return await boundary.open_run(
                        "run-t", deadline_ms=base + 60_000, ttl_ms=60_000, tool_call_budget=1, byte_budget=1
                    )

                async def create(tool_call_id: str, on: AsyncToolBoundary = boundary) -> object:
                    return (await on.invoke(context, _call("run-s", tool_call_id))).code

                steps: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
                    ("open_run", open_other),
                    ("create", lambda: create("c1")),
                    ("create, policy check due", lambda: create("c2")),
                    (
                        "create, fresh store",
                        lambda: create("c3", AsyncToolBoundary(fresh, _registry(executor))),
                    ),
                ]
                for name, step in steps:
                    if name == "create, policy check due":
                        clock.offset_s += POLICY_CHECK_INTERVAL_MS / 1000
                    with stalled(pid):
                        answer, waited = await timed(step)
                    assert answer is ErrorCode.STORE_UNAVAILABLE, name
                    _assert_within_budget(waited)
            finally:
                await store.close()
                await fresh.close()

    with redis_server() as url:
        asyncio.run(scenario(url, _pid(url)))
    assert executor.runs == 0


@pytest.fixture(scope="module")
def primary_and_replica() -> Iterator[tuple[str, str]]:
    """A private master and one private replica of it."""
    with contextlib.ExitStack() as stack:
        primary = stack.enter_context(redis_server(extra_args=["--repl-diskless-sync-delay", "0"]))
        port = primary.rsplit(":", 1)[1].split("/", 1)[0]
        replica = stack.enter_context(redis_server(extra_args=["--replicaof", "127.0.0.1", port]))
        end = time.monotonic() + 10
        with redis.Redis.from_url(primary) as on_primary:
            while (
                on_primary.info("replication").get("connected_slaves", 0) < 1
                or not isinstance(on_primary.info("replication").get("slave0"), dict)
                or on_primary.info("replication")["slave0"].get("state") != "online"
            ):
                assert time.monotonic() < end, "the replica never caught up"
                time.sleep(0.02)
        yield primary, replica


def test_a_take_back_after_a_missed_wait_is_one_round_trip_past_the_deadline(
    primary_and_replica: tuple[str, str],
) -> None:
    """CIS-DUR-13, CIS-DUR-2, CIS-BND-7: Durability(replicas=1, timeout_ms=500) with the replica stalled
    (the wait is not reached) and RetryPolicy.budget_ms 200: the create's round trip in flight outlasts
    the deadline, and its take-back (the record moved to ERROR/DURABILITY_NOT_REACHED) is one more
    attempt; with the master stalled during that attempt, the call answers DURABILITY_NOT_REACHED
    within the stated bound, budget + the wait's round trip + one take-back round trip (the socket
    timeout, 1 s), never more (no retry after the deadline). The tool never runs; the create is held."""
    primary, replica = primary_and_replica
    wait_ms, socket_s, budget_ms = 500, 1.0, 200
    prefix = f"takeback-{secrets.token_hex(3)}"
    opener = RedisStore.from_url(primary, prefix=prefix)  # the run opened without waiting: not under test
    assert isinstance(
        opener.open_run(
            "run-w",
            deadline_ms=opener.now_ms() + 600_000,
            ttl_ms=600_000,
            tool_call_budget=9,
            byte_budget=1 << 20,
        ),
        RunState,
    )
    opener.close()
    store = RedisStore.from_url(
        primary,
        prefix=prefix,
        durability=Durability(replicas=1, timeout_ms=wait_ms),
        retry_policy=RetryPolicy(budget_ms=budget_ms),
        socket_timeout=socket_s,
    )
    executor = Runs()
    boundary = ToolBoundary(store, _registry(executor))
    context = RunContext(run_id="run-w")
    master, follower = _pid(primary), _pid(replica)
    take_back = store.complete
    taken: list[float] = []

    def stalled_take_back(before: Any, after: Any) -> Any:
        taken.append(time.monotonic())
        os.kill(master, signal.SIGSTOP)  # the take-back's round trip lasts the socket timeout
        return take_back(before, after)

    store.complete = stalled_take_back  # type: ignore[method-assign]
    try:
        with stalled(follower):
            answer, waited = _timed(lambda: boundary.invoke(context, _call("run-w", "w1")))
    finally:
        os.kill(master, signal.SIGCONT)
        store.complete = take_back  # type: ignore[method-assign]
    assert answer.code is ErrorCode.DURABILITY_NOT_REACHED
    assert len(taken) == 1
    assert waited >= wait_ms / 1000 + socket_s  # the wait in flight, then one stalled take-back
    assert waited <= budget_ms / 1000 + wait_ms / 1000 + socket_s + SLACK_S, waited
    assert executor.runs == 0
    assert boundary.pending_creates() == (("run-w", "w1"),)
    store.close()
