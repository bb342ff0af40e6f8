"""Adversarial tests of the stores (memory and Redis): each held a defect found by attack, now fixed."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
import redis
from attrs import evolve

from invocation_store.adapters import InvocationStore, MemoryStore, RedisStore, StoreUnavailableError
from invocation_store.boundary import ToolBoundary, ToolRegistry, ToolSpec
from invocation_store.kernel import (
    Admission,
    AdmissionRequest,
    ErrorCode,
    Failed,
    Limits,
    RunContext,
    transition,
)
from invocation_store.testing import FakeClock

from ._support import RUN, envelope, found, run_params

MakeStore = Callable[[FakeClock], InvocationStore]


def _request(clock: FakeClock, tool_call_id: str = "call_1", token: str = "token-1") -> AdmissionRequest:
    return AdmissionRequest(
        run_id=RUN,
        tool_call_id=tool_call_id,
        tool_name="t",
        request_json="{}",
        invocation_token=token,
    )


def test_complete_with_a_forged_before_neither_extends_the_ttl_nor_lies(
    make_store: MakeStore, clock: FakeClock
) -> None:
    """CIS-TTL-2, CIS-LIFE-6, CIS-STORE-3, CIS-STORE-8: a completion whose ``before`` carries
    the stored token but a later expiry and another request never moves the stored expiry
    or request, and what complete returns is what is stored (memory and Redis alike)."""
    store = make_store(clock)
    store.open_run(RUN, **run_params(clock()))
    admitted = store.create(_request(clock), Limits())
    assert isinstance(admitted, Admission)
    stored = admitted.record
    forged = evolve(stored, expires_at_ms=stored.expires_at_ms + 10**9, request_json='{"forged":1}')
    after = transition(forged, Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=clock()), Limits())
    result = store.complete(forged, after)  # type: ignore[arg-type]
    now = store.get(RUN, "call_1")
    assert now is not None
    assert (now.expires_at_ms, now.request_json) == (stored.expires_at_ms, stored.request_json)
    assert result is ErrorCode.INVALID_TRANSITION or result == now


def _observe(store: InvocationStore) -> tuple[object, ...]:
    run = store.get_run(RUN)
    record = store.get(RUN, "call_1")
    return (
        None if run is None else run.tool_calls_used,
        None if record is None else record.status,
        store.calls(RUN),
    )


def test_a_create_is_decided_at_the_store_clock_in_both_stores(
    redis_store_factory: Callable[[FakeClock], RedisStore], clock: FakeClock
) -> None:
    """CIS-STORE-8, CIS-STORE-10, CIS-TTL-4: a create carries no time of its own; both stores decide
    it at their clock: while the run lives a second invocation is CALL_IN_PROGRESS, once the store
    clock passes the run's end it is RUN_INACTIVE, and both stores then show the same state."""
    observed = []
    start = clock()
    for store in (MemoryStore(clock), redis_store_factory(clock)):
        clock.now = start
        run = store.open_run(RUN, **run_params(clock()))
        assert not isinstance(run, ErrorCode)
        assert isinstance(store.create(_request(clock), Limits()), Admission)
        assert store.create(_request(clock, token="token-2"), Limits()) is ErrorCode.CALL_IN_PROGRESS
        clock.now = run.expires_at_ms
        assert store.create(_request(clock, token="token-3"), Limits()) is ErrorCode.RUN_INACTIVE
        observed.append(_observe(store))
    assert observed[0] == observed[1] == (None, None, ())


def test_reopening_with_the_same_parameters_later_is_a_no_op(make_store: MakeStore, clock: FakeClock) -> None:
    """CIS-RETRY-3: opening a live run again with the same parameters (deadline, TTL,
    budgets) returns it unchanged, also when the retry comes a millisecond later."""
    store = make_store(clock)
    params = run_params(clock())
    first = store.open_run(RUN, **params)
    clock.advance(1)
    assert store.open_run(RUN, **params) == first


def test_reopening_a_cancelled_run_does_not_hand_out_a_context(
    make_store: MakeStore, clock: FakeClock
) -> None:
    """CIS-RUN-3, CIS-RETRY-3: a cancelled run is not ACTIVE: opening it again with its
    parameters does not tell the harness it is open (every call would be RUN_INACTIVE)."""
    boundary = ToolBoundary(
        make_store(clock), ToolRegistry([ToolSpec(name="t", executor=str, projector=found)])
    )
    params = run_params(clock())
    context = boundary.open_run(RUN, **params)
    assert isinstance(context, RunContext)
    boundary.cancel_run(context)
    assert not isinstance(boundary.open_run(RUN, **params), RunContext)


class _KeyLiar(str):
    """A str (a safe id's text) whose formatting and encoding name another id."""

    __slots__ = ()

    def __str__(self) -> str:
        return "victim"

    def __format__(self, spec: str) -> str:
        return "victim"

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        return b"victim"


def test_str_subclass_id_cannot_write_under_another_id(
    redis_store_factory: Callable[[FakeClock], RedisStore], clock: FakeClock
) -> None:
    """CIS-ID-4, CIS-ID-6, CIS-KEY-3: a call whose id text is "call_3" never creates a record
    (nor a key) for the id "victim", which no envelope supplied."""
    store = redis_store_factory(clock)
    boundary = ToolBoundary(
        store, ToolRegistry([ToolSpec(name="t", executor=lambda _a: "raw", projector=found)])
    )
    context = boundary.open_run(RUN, **run_params(clock()))
    assert isinstance(context, RunContext)
    boundary.invoke(context, envelope(_KeyLiar("call_3")))
    assert "victim" not in store.calls(RUN)
    assert store.get(RUN, "victim") is None


def _ready_record(store: RedisStore, clock: FakeClock) -> ToolBoundary:
    def executor(_args: Mapping[str, Any]) -> str:
        return "raw"

    boundary = ToolBoundary(store, ToolRegistry([ToolSpec(name="t", executor=executor, projector=found)]))
    context = boundary.open_run(RUN, **run_params(clock()))
    assert isinstance(context, RunContext)
    assert boundary.invoke(context, envelope("call_1")).ok
    return boundary


@pytest.mark.parametrize(
    "tamper",
    [
        lambda client, key: client.hset(key, "error_code", "EXECUTION_FAILED"),
        lambda client, key: client.hdel(key, "agent_result"),
        lambda client, key: client.hdel(key, "evidence_status"),
    ],
    ids=["READY-with-error-code", "READY-without-result", "READY-without-evidence"],
)
def test_a_tampered_ready_record_is_store_unavailable(
    redis_store_factory: Callable[[FakeClock], RedisStore],
    redis_url: str,
    clock: FakeClock,
    tamper: Callable[[redis.Redis, str], object],
) -> None:
    """CIS-STORE-6, CIS-FAIL-5, CIS-EVID-1: a record hash changed behind the store's back into
    something no transition produces (READY with an error code, without its result or its
    evidence status) reads as STORE_UNAVAILABLE, never as a record (or a citable one)."""
    store = redis_store_factory(clock)
    boundary = _ready_record(store, clock)
    with redis.Redis.from_url(redis_url) as client:
        tamper(client, f"{store.prefix}:{{{RUN}}}:call:call_1")
    with pytest.raises(StoreUnavailableError):
        store.get(RUN, "call_1")
    with pytest.raises(StoreUnavailableError):
        boundary.cite(RunContext(run_id=RUN), "call_1")
