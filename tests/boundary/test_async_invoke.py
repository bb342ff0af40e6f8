"""The seed scenarios through the AsyncToolBoundary, on every async store.

Each test runs its scenario in a fresh event loop (``asyncio.run``) and closes the
store in that loop. Executors and projectors are sync or async counting fakes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from invocation_store import (
    AsyncMemoryStore,
    AsyncToolBoundary,
    CitationKind,
    ErrorCode,
    EvidenceStatus,
    ExclusionReason,
    InvocationStatus,
    Limits,
    Projection,
    RunContext,
    StoreUnavailableError,
    ToolRegistry,
    ToolSpec,
)
from invocation_store.testing import FakeClock

from ._fakes import (
    MARKER,
    OTHER_RUN,
    RUN,
    CountingStore,
    FailingStore,
    FakeExecutor,
    FakeProjector,
    envelope,
    no_evidence,
)

FOUND = Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="found", scope="s")


class AsyncExecutor:
    """An async executor: returns ``result``, raises ``raises`` or sleeps ``sleep_s`` first."""

    def __init__(
        self, result: object = "raw", *, raises: BaseException | None = None, sleep_s: float = 0
    ) -> None:
        self.result, self.raises, self.sleep_s = result, raises, sleep_s
        self.calls: list[dict[str, Any]] = []
        self.cancelled = False

    async def __call__(self, args: Any) -> object:
        self.calls.append(dict(args))
        try:
            await asyncio.sleep(self.sleep_s)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        if self.raises is not None:
            raise self.raises
        return self.result


class AsyncProjector:
    """An async projector returning ``projection`` or raising ``raises``."""

    def __init__(self, projection: object = FOUND, *, raises: BaseException | None = None) -> None:
        self.projection, self.raises = projection, raises
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, raw: str, args: Any) -> Any:
        self.calls.append((raw, dict(args)))
        await asyncio.sleep(0)
        if self.raises is not None:
            raise self.raises
        return self.projection


def spec(executor: Any = None, projector: Any = None, **kwargs: Any) -> ToolSpec:
    return ToolSpec(
        name=kwargs.pop("name", "search"),
        executor=executor if executor is not None else AsyncExecutor(),
        projector=projector if projector is not None else AsyncProjector(),
        **kwargs,
    )


Scenario = Callable[[AsyncToolBoundary, RunContext, Any], Awaitable[None]]


def run(
    make_async_store: Any,
    clock: FakeClock,
    scenario: Scenario,
    *tools: ToolSpec,
    limits: Limits | None = None,
    wrap: Callable[[Any], Any] | None = None,
    **run_options: Any,
) -> None:
    """Open a run on a fresh async store, run ``scenario(boundary, context, store)``, close the store."""

    async def main() -> None:
        store = make_async_store(clock)
        try:
            boundary = AsyncToolBoundary(
                wrap(store) if wrap else store,
                ToolRegistry(list(tools) or [spec()]),
                limits=limits or Limits(),
            )
            options = {"ttl_ms": 3_600_000, "tool_call_budget": 100, "byte_budget": 1 << 24, **run_options}
            deadline = clock.now + options.pop("deadline_ms", 600_000)
            context = await AsyncToolBoundary(store, ToolRegistry()).open_run(
                RUN, deadline_ms=deadline, **options
            )
            assert isinstance(context, RunContext)
            await scenario(boundary, context, store)
        finally:
            await store.close()

    asyncio.run(main())


# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["async", "sync", "mixed"])
def test_async_success(make_async_store: Any, clock: FakeClock, kind: str) -> None:
    """CIS-BND-1, CIS-REC-5, CIS-BND-4: sync and async executors and projectors complete READY."""
    executor: Any = AsyncExecutor(f"raw {MARKER}") if kind != "sync" else FakeExecutor(f"raw {MARKER}")
    projector: Any = AsyncProjector() if kind == "async" else FakeProjector(FOUND)

    async def scenario(boundary: AsyncToolBoundary, context: RunContext, store: Any) -> None:
        result = await boundary.invoke(context, envelope())
        assert result.ok
        assert (result.content, result.evidence_status) == ("found", EvidenceStatus.EVIDENCE_FOUND)
        assert MARKER not in repr(result)
        record = await store.get(RUN, "call_1")
        assert record.status is InvocationStatus.READY
        assert record.raw_response == f"raw {MARKER}"
        assert executor.calls == [{"q": "disk"}]
        assert projector.calls == [(f"raw {MARKER}", {"q": "disk"})]

    run(make_async_store, clock, scenario, spec(executor, projector))


def test_async_no_evidence(make_async_store: Any, clock: FakeClock) -> None:
    """CIS-EVID-3, CIS-EVID-4: NO_EVIDENCE returned as a scoped negative observation, executor run once."""
    executor = AsyncExecutor()

    async def scenario(boundary: AsyncToolBoundary, context: RunContext, _store: Any) -> None:
        result = await boundary.invoke(context, envelope())
        assert (result.ok, result.negative, result.scope) == (True, True, "the scope")
        assert result.evidence_status is EvidenceStatus.NO_EVIDENCE
        assert len(executor.calls) == 1
        citation = await boundary.cite(context, "call_1")
        assert citation.kind is CitationKind.NEGATIVE_OBSERVATION

    run(make_async_store, clock, scenario, spec(executor, AsyncProjector(no_evidence("the scope"))))


@pytest.mark.parametrize(
    ("executor", "projector", "limits", "code"),
    [
        (AsyncExecutor(raises=RuntimeError(MARKER)), AsyncProjector(), None, ErrorCode.EXECUTION_FAILED),
        (FakeExecutor(raises=KeyError(MARKER)), AsyncProjector(), None, ErrorCode.EXECUTION_FAILED),
        (AsyncExecutor(object()), AsyncProjector(), None, ErrorCode.SERIALIZATION_FAILED),
        (AsyncExecutor("x" * 101), AsyncProjector(), Limits(raw_bytes=100), ErrorCode.RESULT_TOO_LARGE),
        (AsyncExecutor(), AsyncProjector(raises=ValueError(MARKER)), None, ErrorCode.PROJECTION_FAILED),
        (AsyncExecutor(), AsyncProjector("not a projection"), None, ErrorCode.PROJECTION_INVALID),
        (
            AsyncExecutor(),
            AsyncProjector(Projection(evidence_status="MAYBE", content="x", scope="s")),
            None,
            ErrorCode.PROJECTION_INVALID,
        ),
        (
            AsyncExecutor(),
            AsyncProjector(Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content=MARKER * 9)),
            Limits(agent_result_bytes=64),
            ErrorCode.RESULT_TOO_LARGE,
        ),
    ],
    ids=[
        "executor-raises",
        "sync-executor-raises",
        "unserializable",
        "raw-too-large",
        "projector-raises",
        "projection-not-a-projection",
        "projection-invalid-status",
        "projection-too-large",
    ],
)
def test_async_failures_map_to_codes(
    make_async_store: Any,
    clock: FakeClock,
    executor: Any,
    projector: Any,
    limits: Limits | None,
    code: ErrorCode,
) -> None:
    """CIS-BND-2, CIS-FAIL-2, CIS-FAIL-4, CIS-SIZE-3, CIS-SIZE-4, CIS-EVID-5: one code per failure."""
    executor.calls.clear()
    projector.calls.clear()

    async def scenario(boundary: AsyncToolBoundary, context: RunContext, store: Any) -> None:
        result = await boundary.invoke(context, envelope())
        assert (result.ok, result.code, result.content) == (False, code, None)
        assert MARKER not in repr(result)
        record = await store.get(RUN, "call_1")
        assert (record.status, record.error_code) == (InvocationStatus.ERROR, code)
        assert record.evidence_status is EvidenceStatus.ERROR
        if code in (ErrorCode.RESULT_TOO_LARGE, ErrorCode.SERIALIZATION_FAILED) and not projector.calls:
            assert record.raw_response is None  # refused whole, projector never called
        if code in (ErrorCode.PROJECTION_FAILED, ErrorCode.PROJECTION_INVALID):
            assert record.raw_response == "raw"  # CIS-FAIL-6: kept, harness-only
        if code is ErrorCode.EXECUTION_FAILED or (limits is not None and limits.raw_bytes == 100):
            assert projector.calls == []

    run(make_async_store, clock, scenario, spec(executor, projector), limits=limits)


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_async_timeout(make_async_store: Any, clock: FakeClock, kind: str) -> None:
    """CIS-FAIL-3: an async executor over its timeout is cancelled (unawaited), a sync one abandoned."""
    executor: Any = AsyncExecutor(sleep_s=5) if kind == "async" else FakeExecutor(block=True)
    projector = AsyncProjector()

    async def scenario(boundary: AsyncToolBoundary, context: RunContext, store: Any) -> None:
        try:
            result = await boundary.invoke(context, envelope())
        finally:
            if kind == "sync":
                executor.release.set()
        assert result.code is ErrorCode.EXECUTION_TIMEOUT
        assert projector.calls == []
        assert (await store.get(RUN, "call_1")).error_code is ErrorCode.EXECUTION_TIMEOUT
        if kind == "async":
            # Cancelled without being awaited: the cancellation lands at the loop's next turn.
            await asyncio.sleep(0)
            assert executor.cancelled

    run(make_async_store, clock, scenario, spec(executor, projector, timeout_ms=50))


def test_async_duplicates_and_parallel_calls(make_async_store: Any, clock: FakeClock) -> None:
    """CIS-ID-5, CIS-BND-6, CIS-RUN-5: gathered calls on one id execute once; a budget of 3 admits 3."""
    executor = AsyncExecutor(sleep_s=0.01)

    async def scenario(boundary: AsyncToolBoundary, context: RunContext, store: Any) -> None:
        same = await asyncio.gather(*(boundary.invoke(context, envelope()) for _ in range(6)))
        assert sum(r.ok for r in same) == 1
        assert [r.code for r in same if not r.ok] == [ErrorCode.CALL_IN_PROGRESS] * 5
        first = await store.get(RUN, "call_1")
        spread = await asyncio.gather(
            *(boundary.invoke(context, envelope(f"call_{i}")) for i in range(2, 10))
        )
        assert sum(r.ok for r in spread) == 2
        assert [r.code for r in spread if not r.ok] == [ErrorCode.TOOL_BUDGET_EXHAUSTED] * 6
        assert len(executor.calls) == 3
        assert await store.get(RUN, "call_1") == first

    run(make_async_store, clock, scenario, spec(executor), tool_call_budget=3)


@pytest.mark.parametrize(
    ("tool_kwargs", "envelope_kwargs", "code"),
    [
        ({}, {"run_id": OTHER_RUN}, ErrorCode.RUN_MISMATCH),
        ({"authorized": False}, {}, ErrorCode.UNAUTHORIZED),
        ({"read_only": False}, {}, ErrorCode.NOT_READ_ONLY),
        ({}, {"tool_name": "unknown"}, ErrorCode.UNAUTHORIZED),
        ({}, {"tool_call_id": None}, ErrorCode.MISSING_TOOL_CALL_ID),
        ({}, {"tool_call_id": "a b"}, ErrorCode.UNSAFE_TOOL_CALL_ID),
        ({}, {"arguments": "[]"}, ErrorCode.INVALID_ARGUMENTS),
    ],
)
def test_async_preflight_rejections(
    make_async_store: Any,
    clock: FakeClock,
    tool_kwargs: dict[str, Any],
    envelope_kwargs: dict[str, Any],
    code: Any,
) -> None:
    """CIS-PRE-1, CIS-PRE-3, CIS-PRE-4, CIS-ID-2, CIS-ID-3: rejected calls write nothing and never execute."""
    executor = AsyncExecutor()

    async def scenario(boundary: AsyncToolBoundary, context: RunContext, store: Any) -> None:
        result = await boundary.invoke(context, envelope(**envelope_kwargs))
        assert (result.ok, result.code) == (False, code)
        assert executor.calls == []
        assert await store.calls(RUN) == ()

    run(make_async_store, clock, scenario, spec(executor, **tool_kwargs))


def test_async_run_lifecycle(make_async_store: Any, clock: FakeClock) -> None:
    """CIS-RUN-1, CIS-RUN-2, CIS-RUN-3, CIS-RUN-4: cancelled, closed and past-deadline runs reject calls."""

    async def scenario(boundary: AsyncToolBoundary, context: RunContext, _store: Any) -> None:
        assert (await boundary.invoke(context, envelope("call_1"))).ok
        clock.advance(1_000)
        assert (await boundary.invoke(context, envelope("call_2"))).code is ErrorCode.RUN_DEADLINE_EXCEEDED
        other = await boundary.open_run(
            OTHER_RUN, deadline_ms=clock.now + 1_000, ttl_ms=10_000, tool_call_budget=5, byte_budget=1_000
        )
        assert isinstance(other, RunContext)
        cancelled = await boundary.cancel_run(other)
        assert not isinstance(cancelled, ErrorCode)
        assert cancelled.status.value == "CANCELLED"
        result = await boundary.invoke(other, envelope("call_3", run_id=OTHER_RUN))
        assert result.code is ErrorCode.RUN_INACTIVE
        assert await boundary.close_run(other) is ErrorCode.INVALID_TRANSITION
        closed = await boundary.close_run(context)
        assert not isinstance(closed, ErrorCode)
        assert closed.status.value == "CLOSED"
        assert await boundary.open_run(
            "bad id", deadline_ms=1, ttl_ms=1, tool_call_budget=0, byte_budget=0
        ) is (ErrorCode.RUN_MISMATCH)

    run(make_async_store, clock, scenario, deadline_ms=1_000)


def test_async_byte_budget(make_async_store: Any, clock: FakeClock) -> None:
    """CIS-RUN-6: the run byte budget refuses a call that would pass it."""

    async def scenario(boundary: AsyncToolBoundary, context: RunContext, _store: Any) -> None:
        assert (await boundary.invoke(context, envelope("call_1"))).ok
        big = envelope("call_2", arguments='{"q":"' + "x" * 80 + '"}')
        assert (await boundary.invoke(context, big)).code is ErrorCode.RUN_BYTES_EXHAUSTED

    run(make_async_store, clock, scenario, byte_budget=100)


def test_async_two_round_trips(make_async_store: Any, clock: FakeClock) -> None:
    """CIS-STORE-9: create and complete, nothing else, per successful call."""
    holder: dict[str, CountingStore] = {}

    def wrap(store: Any) -> CountingStore:
        holder["store"] = CountingStore(store)
        return holder["store"]

    async def scenario(boundary: AsyncToolBoundary, context: RunContext, _store: Any) -> None:
        assert (await boundary.invoke(context, envelope())).ok
        assert holder["store"].log == ["create", "complete"]

    run(make_async_store, clock, scenario, wrap=wrap)


@pytest.mark.parametrize("fail_on", ["create", "complete", "now_ms"])
def test_async_store_failure(make_async_store: Any, clock: FakeClock, fail_on: str) -> None:
    """CIS-FAIL-5: any async store exception is STORE_UNAVAILABLE in the result."""
    executor = AsyncExecutor()

    async def scenario(boundary: AsyncToolBoundary, context: RunContext, store: Any) -> None:
        result = await boundary.invoke(context, envelope())
        assert (result.ok, result.code) == (False, ErrorCode.STORE_UNAVAILABLE)
        assert MARKER not in repr(result)
        assert len(executor.calls) == (1 if fail_on == "complete" else 0)
        with pytest.raises(StoreUnavailableError):
            await AsyncToolBoundary(
                FailingStore(store, ["completed"], is_async=True), ToolRegistry()
            ).project_progress(context)

    run(
        make_async_store,
        clock,
        scenario,
        spec(executor),
        wrap=lambda store: FailingStore(store, [fail_on], is_async=True),
    )


def test_async_progress_cite_and_sweep(make_async_store: Any, clock: FakeClock) -> None:
    """CIS-PROG-2, CIS-PROG-3, CIS-REF-1, CIS-REF-3, CIS-LIFE-7: the read paths of the async boundary."""
    executor = AsyncExecutor(sleep_s=5)

    async def scenario(boundary: AsyncToolBoundary, context: RunContext, store: Any) -> None:
        assert (await boundary.invoke(context, envelope("call_1"))).ok
        executor.raises = RuntimeError("x")
        assert (await boundary.invoke(context, envelope("call_2"))).code is ErrorCode.EXECUTION_FAILED
        executor.raises = None
        executor.sleep_s = 5
        # A harness task cancelled mid-call leaves its record PROJECTING ...
        task = asyncio.create_task(boundary.invoke(context, envelope("call_3")))
        while len(executor.calls) < 3:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (await store.get(RUN, "call_3")).status is InvocationStatus.PROJECTING
        report = await boundary.project_progress(context)
        assert [f.tool_call_id for f in report.facts] == ["call_1"]
        assert dict(report.excluded) == {ExclusionReason.ERROR: 1}
        assert (await boundary.cite(context, "call_1")).kind is CitationKind.EVIDENCE
        assert (await boundary.cite(context, "call_2")).reason is ExclusionReason.ERROR
        assert (await boundary.cite(context, "call_3")).reason is ExclusionReason.PROJECTING
        assert (await boundary.cite(context, "no{")).reason is ExclusionReason.UNSAFE_ID
        # ... until a sweep moves it to ERROR/STALE_PROJECTION.
        assert await boundary.sweep_stale(context, 1_000) == 0
        clock.advance(1_000)
        assert await boundary.sweep_stale(context, 1_000) == 1
        assert (await store.get(RUN, "call_3")).error_code is ErrorCode.STALE_PROJECTION

    executor.sleep_s = 0
    run(make_async_store, clock, scenario, spec(executor))


def test_hung_sync_tools_neither_starve_the_loop_nor_delay_its_exit(clock: FakeClock) -> None:
    """CIS-FAIL-3, CIS-BND-5, CIS-PERF-1: a hung sync call holds only its own worker, none the loop needs."""
    executor = FakeExecutor(block=True)

    async def main() -> None:
        boundary = AsyncToolBoundary(
            AsyncMemoryStore(clock=clock), ToolRegistry([spec(executor, timeout_ms=30)])
        )
        context = await boundary.open_run(
            RUN, deadline_ms=clock.now + 60_000, ttl_ms=600_000, tool_call_budget=50, byte_budget=1 << 20
        )
        assert isinstance(context, RunContext)
        results = await asyncio.gather(*(boundary.invoke(context, envelope(f"call_{i}")) for i in range(40)))
        assert [r.code for r in results] == [ErrorCode.EXECUTION_TIMEOUT] * 40
        # 40 hung tools, yet the loop's default executor is still free:
        assert await asyncio.wait_for(asyncio.to_thread(lambda: 7), timeout=2) == 7

    try:
        asyncio.run(main())  # returns although 40 executor threads are still blocked
        assert len(executor.calls) == 40
    finally:
        executor.release.set()
