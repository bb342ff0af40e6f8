"""Policy drift against a real server with the real check interval (CIS-DUR-3).

The store reads ``maxmemory-policy`` again at every run open and before a create once
the last reading is :data:`POLICY_CHECK_INTERVAL_MS` old. These tests keep that
interval as shipped and move the clock it is measured on (``_deadline.use_clock``: the
monotonic clock of every deadline, here the real one plus an offset the test advances)
instead of sleeping. After ``CONFIG SET maxmemory-policy`` to each evicting policy: a
create inside the window is still admitted (the window is real), the first create one
window later is refused, and from then on no re-sent id runs its tool again, although
its record is gone (deleted as an eviction would). The application embedding the
boundary gets STORE_UNAVAILABLE for the agent and the operator's text in its log; a
direct store user gets it in the exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections import Counter
from collections.abc import Iterator
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
from invocation_store.adapters import UnsafeServerError
from invocation_store.adapters._redis_keys import call_key, raw_key
from invocation_store.adapters._redis_server import POLICY_CHECK_INTERVAL_MS
from invocation_store.kernel import ErrorCode, EvidenceStatus, Projection
from invocation_store.testing.contract import LIMITS, request
from invocation_store.testing.redis_server import redis_server

pytestmark = pytest.mark.redis

EVICTING = (
    "volatile-lru",
    "allkeys-lru",
    "volatile-lfu",
    "allkeys-lfu",
    "volatile-random",
    "allkeys-random",
    "volatile-ttl",
)


class SteppedClock:
    """The monotonic clock of deadlines and of the policy schedule: the real one plus ``offset_s``."""

    def __init__(self) -> None:
        self.offset_s = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset_s

    def advance_ms(self, ms: int) -> None:
        self.offset_s += ms / 1000


@contextlib.contextmanager
def stepped() -> Iterator[SteppedClock]:
    clock = SteppedClock()
    with use_clock(clock):
        yield clock


class Runs:
    """An executor counting its runs per call id (the arguments carry it)."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()

    def __call__(self, args: Any) -> object:
        self.runs[str(args["id"])] += 1
        return {"id": args["id"]}


def _registry(executor: Any) -> ToolRegistry:
    def project(raw: object, args: Any) -> Projection:
        return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="x", scope="s")

    return ToolRegistry([ToolSpec(name="t", executor=executor, projector=project)])


def _call(run_id: str, tool_call_id: str) -> ToolCallEnvelope:
    return ToolCallEnvelope(
        run_id=run_id, tool_call_id=tool_call_id, tool_name="t", arguments=f'{{"id":"{tool_call_id}"}}'
    )


def _evict(url: str, prefix: str, run_id: str, ids: list[str]) -> None:
    """What an eviction does to the records of ``ids``: their keys are gone."""
    with redis.Redis.from_url(url) as admin:
        for tool_call_id in ids:
            assert admin.delete(call_key(prefix, run_id, tool_call_id)) == 1
            admin.delete(raw_key(prefix, run_id, tool_call_id))


def _set_policy(url: str, policy: str) -> None:
    with redis.Redis.from_url(url) as admin:
        admin.config_set("maxmemory-policy", policy)


def _assert_operator_text(text: str, policy: str, *, drifted: bool = True) -> None:
    """The policy named (as changed on the running server, for the drift check) and the setting to change."""
    changed = " (changed on the running server)" if drifted else ""
    assert f"maxmemory-policy {policy}{changed} can evict" in text
    assert "set maxmemory-policy noeviction" in text
    assert "UnprintableType" not in text


def test_creates_stop_within_one_window_of_a_policy_change_and_no_resent_id_runs_twice(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """CIS-DUR-3, CIS-BND-6: for each evicting policy, set with ``CONFIG SET`` on the running server
    while a run is live, through ToolBoundary on a RedisStore with the shipped 5 s interval: a create
    right after the change is still admitted (the window is real); one POLICY_CHECK_INTERVAL_MS later
    the next create is refused STORE_UNAVAILABLE, with the policy named and the setting to change in
    the boundary's log and nowhere in what the agent gets; every re-sent id, its record evicted, is
    refused and runs its tool 0 more times; a direct store user gets UnsafeServerError naming the
    policy and the setting to change, from create and from open_run."""
    assert POLICY_CHECK_INTERVAL_MS == 5_000
    executor = Runs()
    with redis_server(extra_args=["--maxmemory", "64mb"]) as url, stepped() as clock:
        for policy in EVICTING:
            tag = f"p{EVICTING.index(policy)}"
            prefix = f"drift-{secrets.token_hex(3)}"
            run_id = f"run-{policy}"
            store = RedisStore.from_url(url, prefix=prefix)
            boundary = ToolBoundary(store, _registry(executor))
            context = boundary.open_run(
                run_id,
                deadline_ms=store.now_ms() + 600_000,
                ttl_ms=600_000,
                tool_call_budget=50,
                byte_budget=1 << 20,
            )
            assert isinstance(context, RunContext)
            assert boundary.invoke(context, _call(run_id, f"{tag}-a")).ok
            _set_policy(url, policy)
            assert boundary.invoke(context, _call(run_id, f"{tag}-b")).ok  # inside the window
            clock.advance_ms(POLICY_CHECK_INTERVAL_MS)
            caplog.clear()
            with caplog.at_level(logging.ERROR):
                refused = boundary.invoke(context, _call(run_id, f"{tag}-c"))
            assert refused.code is ErrorCode.STORE_UNAVAILABLE
            agent_text = json.dumps(refused.as_dict())
            assert policy not in agent_text
            assert "maxmemory" not in agent_text
            _assert_operator_text(caplog.text, policy)
            resent = [f"{tag}-a", f"{tag}-b"]
            _evict(url, prefix, run_id, resent)
            for tool_call_id in resent:
                assert (
                    boundary.invoke(context, _call(run_id, tool_call_id)).code is ErrorCode.STORE_UNAVAILABLE
                )
            with pytest.raises(UnsafeServerError) as caught:
                store.create(request(f"{tag}-d", run_id=run_id), LIMITS)
            _assert_operator_text(str(caught.value), policy, drifted=False)
            with pytest.raises(UnsafeServerError) as at_open:
                store.open_run(
                    "run-other",
                    deadline_ms=store.now_ms() + 60_000,
                    ttl_ms=60_000,
                    tool_call_budget=1,
                    byte_budget=1,
                )
            assert f"maxmemory-policy {policy}" in str(at_open.value)
            _set_policy(url, "noeviction")
            store.close()
    assert executor.runs == Counter(
        {f"p{index}-{step}": 1 for index in range(len(EVICTING)) for step in "ab"}
    )


def test_the_async_store_stops_creates_within_one_window_too(caplog: pytest.LogCaptureFixture) -> None:
    """CIS-DUR-3, CIS-DUR-10: the same window through AsyncToolBoundary on an AsyncRedisStore (one
    evicting policy of each family): admitted inside the window, refused one window after the change,
    no re-sent id run again after its record was evicted, UnsafeServerError for a direct store user."""
    executor = Runs()

    async def scenario(url: str, policy: str) -> None:
        prefix = f"adrift-{secrets.token_hex(3)}"
        tag = f"p{EVICTING.index(policy)}"
        run_id = f"run-{policy}"
        with stepped() as clock:
            store = AsyncRedisStore.from_url(url, prefix=prefix)
            try:
                boundary = AsyncToolBoundary(store, _registry(executor))
                base = await store.synced_now_ms()
                context = await boundary.open_run(
                    run_id,
                    deadline_ms=base + 600_000,
                    ttl_ms=600_000,
                    tool_call_budget=50,
                    byte_budget=1 << 20,
                )
                assert isinstance(context, RunContext)
                assert (await boundary.invoke(context, _call(run_id, f"{tag}-a"))).ok
                _set_policy(url, policy)
                assert (await boundary.invoke(context, _call(run_id, f"{tag}-b"))).ok
                clock.advance_ms(POLICY_CHECK_INTERVAL_MS)
                caplog.clear()
                with caplog.at_level(logging.ERROR):
                    refused = await boundary.invoke(context, _call(run_id, f"{tag}-c"))
                assert refused.code is ErrorCode.STORE_UNAVAILABLE
                assert policy not in json.dumps(refused.as_dict())
                _assert_operator_text(caplog.text, policy)
                resent = [f"{tag}-a", f"{tag}-b"]
                _evict(url, prefix, run_id, resent)
                for tool_call_id in resent:
                    again = await boundary.invoke(context, _call(run_id, tool_call_id))
                    assert again.code is ErrorCode.STORE_UNAVAILABLE
                with pytest.raises(UnsafeServerError) as caught:
                    await store.create(request(f"{tag}-d", run_id=run_id), LIMITS)
                _assert_operator_text(str(caught.value), policy, drifted=False)
            finally:
                await store.close()
                _set_policy(url, "noeviction")

    policies = ("allkeys-lru", "volatile-ttl", "allkeys-lfu")
    with redis_server(extra_args=["--maxmemory", "64mb"]) as url:
        for policy in policies:
            asyncio.run(scenario(url, policy))
    tags = [f"p{EVICTING.index(policy)}" for policy in policies]
    assert executor.runs == Counter({f"{tag}-{step}": 1 for tag in tags for step in "ab"})
