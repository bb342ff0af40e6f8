"""Adversarial tests of the boundary's "own retried create" rule: a repeated token runs a tool once.

CIS-BND-6.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from invocation_store import CompletionRetry
from invocation_store.adapters import AsyncMemoryStore, MemoryStore
from invocation_store.boundary import AsyncToolBoundary, ToolBoundary, ToolRegistry, ToolSpec
from invocation_store.kernel import Admission, AdmissionRequest, ErrorCode, Limits, RunContext
from invocation_store.testing import FakeClock

from ._support import RUN, envelope, found, run_params

_REASON = (
    "the in-flight token set only guards calls that overlap in the order claim-then-create; "
    "a repeated token whose record is still PROJECTING (created by a call that did not claim "
    "it, or by one that already ended) is taken as this call's own create: executor runs twice"
)


class _SlowFirstCreate(AsyncMemoryStore):
    """The first create waits until :attr:`release` is set (the other invoke has answered)."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock=clock)
        self.release = asyncio.Event()
        self.creates = 0

    async def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        self.creates += 1
        if self.creates == 1:
            await self.release.wait()
        return await super().create(request, limits)


@pytest.mark.parametrize("boundaries", [1, 2], ids=["one-boundary", "two-boundaries"])
def test_repeated_token_race_runs_the_executor_once(clock: FakeClock, boundaries: int) -> None:
    """CIS-BND-6, CIS-BND-7, CIS-RETRY-2: two concurrent invokes of one key under a token
    factory that repeats itself (same ms) run the executor at most once, whichever create
    lands first. Through one boundary the second send is CALL_IN_PROGRESS before any create
    is sent (one create per call in flight); through two boundaries over one store both
    creates reach the store, the later one lands first, and the earlier one's repeated
    token is not taken as its own create."""
    runs: list[int] = []

    def executor(_args: Mapping[str, Any]) -> str:
        runs.append(1)
        return "raw"

    async def main() -> tuple[list[ErrorCode | None], int]:
        store = _SlowFirstCreate(clock)
        registry = ToolRegistry([ToolSpec(name="t", executor=executor, projector=found)])
        first, second = (AsyncToolBoundary(store, registry, token_factory=lambda: "tok") for _ in range(2))
        if boundaries == 1:
            second = first
        context = await first.open_run(RUN, **run_params(clock()))
        assert isinstance(context, RunContext)

        async def then_release() -> Any:
            try:
                return await second.invoke(context, envelope("call_1"))
            finally:
                store.release.set()

        results = await asyncio.gather(first.invoke(context, envelope("call_1")), then_release())
        return [r.code for r in results], store.creates

    codes, creates = asyncio.run(main())
    assert len(runs) == 1, codes
    if boundaries == 1:
        assert codes[1] is ErrorCode.CALL_IN_PROGRESS, codes
        assert creates == 1, creates
    else:
        assert codes[1] is None, codes
        assert creates == 2, creates
        assert codes[0] in {ErrorCode.DUPLICATE_TOOL_CALL, ErrorCode.CALL_IN_PROGRESS}, codes


class _CompleteFailsOnce(MemoryStore):
    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.failed = False

    def complete(self, before: Any, after: Any) -> Any:
        if not self.failed:
            self.failed = True
            raise ConnectionError("lost")
        return super().complete(before, after)


def test_repeated_token_after_a_failed_complete_runs_the_executor_once(clock: FakeClock) -> None:
    """CIS-BND-6, CIS-DUR-5: a call whose complete failed (no retry budget) leaves its record
    PROJECTING; the same envelope invoked again (same ms, a token factory that repeats itself) is
    answered by applying the held completion, and from another boundary (no completion held) it is
    DUPLICATE_TOOL_CALL; the executor never runs a second time."""
    runs: list[int] = []

    def executor(_args: Mapping[str, Any]) -> str:
        runs.append(1)
        return "raw"

    store = _CompleteFailsOnce(clock)
    boundary = ToolBoundary(
        store,
        ToolRegistry([ToolSpec(name="t", executor=executor, projector=found)]),
        token_factory=lambda: "tok",
        completion_retry=CompletionRetry(budget_ms=0),
    )
    context = boundary.open_run(RUN, **run_params(clock()))
    assert isinstance(context, RunContext)
    first = boundary.invoke(context, envelope("call_1"))
    assert first.code is ErrorCode.STORE_UNAVAILABLE
    second = boundary.invoke(context, envelope("call_1"))
    assert len(runs) == 1
    assert second.ok
    other = ToolBoundary(store, ToolRegistry([ToolSpec(name="t", executor=executor, projector=found)]))
    assert other.invoke(context, envelope("call_1")).code is ErrorCode.DUPLICATE_TOOL_CALL
    assert len(runs) == 1
