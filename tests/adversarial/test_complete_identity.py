"""Adversarial tests of a completion's identity check: memory and Redis refuse a forged `before` alike."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from attrs import evolve

from invocation_store.adapters import InvocationStore, MemoryStore, RedisStore
from invocation_store.kernel import Admission, AdmissionRequest, ErrorCode, Failed, Limits, transition
from invocation_store.testing import FakeClock

from ._support import RUN, run_params


def _forge_and_complete(
    store: InvocationStore, clock: FakeClock, field: str, value: str
) -> tuple[object, ...]:
    store.open_run(RUN, **run_params(clock()))
    request = AdmissionRequest(
        run_id=RUN,
        tool_call_id="call_1",
        tool_name="t",
        request_json="{}",
        invocation_token="tok",
    )
    admitted = store.create(request, Limits())
    assert isinstance(admitted, Admission)
    stored = admitted.record
    forged = evolve(stored, **{field: value})
    after = transition(forged, Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=clock()), Limits())
    assert not isinstance(after, ErrorCode)
    result = store.complete(forged, after)
    now = store.get(RUN, "call_1")
    return (result, None if now is None else now.status, now == stored)


@pytest.mark.parametrize(("field", "value"), [("request_json", '{"forged":1}'), ("tool_name", "forged")])
def test_complete_with_a_before_forging_only_text_identity_agrees(
    redis_store_factory: Callable[[FakeClock], RedisStore], field: str, value: str
) -> None:
    """CIS-STORE-3, CIS-STORE-8, CIS-LIFE-6: a completion whose ``before`` keeps the stored
    token, times and sequence but carries another request text or tool name is not the stored
    record (kernel ``decide_complete`` compares the whole identity): MemoryStore and Redis
    both answer INVALID_TRANSITION and leave the record PROJECTING and untouched."""
    memory_clock, redis_clock = FakeClock(), FakeClock()
    memory = _forge_and_complete(MemoryStore(memory_clock), memory_clock, field, value)
    assert memory[0] is ErrorCode.INVALID_TRANSITION
    assert memory[2] is True
    redis_outcome = _forge_and_complete(redis_store_factory(redis_clock), redis_clock, field, value)
    assert redis_outcome == memory
