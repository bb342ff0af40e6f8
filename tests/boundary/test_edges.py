"""The boundary's edges, each defect kind beyond its one adversarial input.

Retried creates, async timeouts and cancellations, the BaseException policy, text
that is a ``str`` subclass (or only pretends to be a ``str``), citations of unsafe
ids, run parameters out of range and hostile type names in logs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
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
    MemoryStore,
    Projection,
    RunContext,
    ToolRegistry,
    ToolSpec,
)
from invocation_store.kernel import MAX_SAFE_INT, Admission, AdmissionRequest, ToolCallEnvelope
from invocation_store.testing import FakeClock

from ._fakes import RUN, FakeExecutor, FakeProjector, StoreWrapper, boundary_for, envelope, open_run, tool

FOUND = Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="found", scope="s")


@pytest.fixture
def store(make_store: Any, clock: FakeClock) -> Any:
    return make_store(clock)


# ---------------------------------------------------------------------------
# Retried creates (CIS-RETRY-2, CIS-BND-6)


class RetriedCreate(StoreWrapper):
    """``create`` reaches the store twice, as when the client resends after a lost reply."""

    def create(self, request: AdmissionRequest, limits: Limits) -> Any:
        self.inner.create(request, limits)
        return self.inner.create(request, limits)


class AsyncRetriedCreate(StoreWrapper):
    async def create(self, request: AdmissionRequest, limits: Limits) -> Any:
        await self.inner.create(request, limits)
        return await self.inner.create(request, limits)


def test_a_retried_create_runs_the_tool_once_on_every_store(store: Any) -> None:
    """CIS-RETRY-2, CIS-BND-6, CIS-STORE-8: on memory and Redis alike, our own replayed
    create is this invocation: the executor runs once and the record completes READY."""
    executor = FakeExecutor()
    boundary = boundary_for(RetriedCreate(store), tool(executor))
    context = open_run(boundary)
    result = boundary.invoke(context, envelope("call_1"))
    assert result.ok
    assert len(executor.calls) == 1
    assert store.get(RUN, "call_1").status is InvocationStatus.READY
    # A second call with the id is still a duplicate, retried or not.
    assert boundary.invoke(context, envelope("call_1")).code is ErrorCode.DUPLICATE_TOOL_CALL
    assert len(executor.calls) == 1


def test_a_retried_create_on_the_async_boundary_runs_the_tool_once(
    make_async_store: Any, clock: FakeClock
) -> None:
    """CIS-RETRY-2, CIS-BND-6: the same on the async boundary and every async store."""
    executor = FakeExecutor()

    async def main() -> None:
        store = make_async_store(clock)
        try:
            boundary = AsyncToolBoundary(AsyncRetriedCreate(store), ToolRegistry([tool(executor)]))
            context = await boundary.open_run(
                RUN, deadline_ms=clock.now + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=1 << 20
            )
            assert isinstance(context, RunContext)
            assert (await boundary.invoke(context, envelope("call_1"))).ok
            assert (await store.get(RUN, "call_1")).status is InvocationStatus.READY
        finally:
            await store.close()

    asyncio.run(main())
    assert len(executor.calls) == 1


def test_a_repeated_token_held_by_a_call_in_flight_is_a_duplicate(store: Any) -> None:
    """CIS-BND-6, CIS-ID-5: with a token factory that repeats itself, a concurrent second call
    of the same id (same ms, same arguments: the replay looks exactly like ours) is refused:
    the boundary knows the token is already held by its first call. The executor runs once."""
    executor = FakeExecutor(block=True)
    boundary = boundary_for(store, tool(executor), token_factory=lambda: "same-token")
    context = open_run(boundary)
    first: list[Any] = []
    worker = threading.Thread(target=lambda: first.append(boundary.invoke(context, envelope("call_1"))))
    worker.start()
    try:
        while not executor.calls:
            threading.Event().wait(0.001)
        second = boundary.invoke(context, envelope("call_1"))
    finally:
        executor.release.set()
        worker.join(10)
    assert second.code is ErrorCode.CALL_IN_PROGRESS  # the first call's fate: still running
    assert first[0].ok
    assert len(executor.calls) == 1


def test_a_repeated_token_over_an_interrupted_record_is_a_duplicate(store: Any, clock: FakeClock) -> None:
    """CIS-BND-6, CIS-LIFE-7: a PROJECTING record left by an earlier, interrupted call with the
    same (repeated) token is not this call's create (it was created earlier): DUPLICATE, the
    executor does not run, the record stays for the sweep."""
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor), token_factory=lambda: "same-token")
    context = open_run(boundary)
    crashed = AdmissionRequest(
        run_id=RUN,
        tool_call_id="call_1",
        tool_name="search",
        request_json='{"q":"disk"}',
        invocation_token="same-token",
    )
    assert isinstance(store.create(crashed, Limits()), Admission)
    clock.advance(1)
    assert boundary.invoke(context, envelope("call_1")).code is ErrorCode.CALL_IN_PROGRESS
    assert executor.calls == []
    assert store.get(RUN, "call_1").status is InvocationStatus.PROJECTING


# ---------------------------------------------------------------------------
# Async timeouts and cancellation (CIS-FAIL-2, CIS-FAIL-3, CIS-BND-2)


class Stubborn:
    """An async executor that ignores cancellation until released, then raises or returns."""

    def __init__(self, *, raises: BaseException | None = None) -> None:
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.cancels = 0
        self.raises = raises
        self.finished = False

    async def __call__(self, _args: Mapping[str, Any]) -> str:
        self.started.set()
        while not self.release.is_set():
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancels += 1  # swallowed: keep going
        self.finished = True
        if self.raises is not None:
            raise self.raises
        return "late raw"


def run_async(
    scenario: Callable[[AsyncToolBoundary, RunContext], Awaitable[None]], *tools: ToolSpec
) -> list[Any]:
    """Run ``scenario`` on an AsyncMemoryStore in a fresh loop; returns the loop's
    exception-handler calls (unretrieved task exceptions and the like)."""
    reported: list[Any] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: reported.append(ctx))
        boundary = AsyncToolBoundary(AsyncMemoryStore(clock=FakeClock()), ToolRegistry(list(tools)))
        context = await boundary.open_run(
            RUN,
            deadline_ms=boundary.now_ms() + 60_000,
            ttl_ms=60_000,
            tool_call_budget=9,
            byte_budget=1 << 20,
        )
        assert isinstance(context, RunContext)
        await scenario(boundary, context)

    asyncio.run(main())
    gc.collect()
    return reported


def test_a_tool_ignoring_cancellation_times_out_and_its_late_failure_is_quiet() -> None:
    """CIS-FAIL-3, CIS-ERR-2: a tool that swallows every cancellation is EXECUTION_TIMEOUT at its
    timeout; when it finally raises, the abandoned task's exception is retrieved (no "never
    retrieved" report) and no task is left behind."""
    stubborn = Stubborn(raises=RuntimeError("late"))

    async def scenario(boundary: AsyncToolBoundary, context: RunContext) -> None:
        try:
            result = await boundary.invoke(context, envelope("call_1"))
            assert result.code is ErrorCode.EXECUTION_TIMEOUT
            await asyncio.sleep(0)  # the cancellation was requested, not awaited
            assert (stubborn.cancels, stubborn.finished) == (1, False)
        finally:
            stubborn.release.set()
        for _ in range(10):
            await asyncio.sleep(0)
        assert stubborn.finished
        assert asyncio.all_tasks() == {asyncio.current_task()}

    reported = run_async(
        scenario, ToolSpec(name="search", executor=stubborn, projector=FakeProjector(), timeout_ms=30)
    )
    assert reported == []


def test_cancelling_the_caller_propagates_at_once_even_if_the_tool_ignores_it() -> None:
    """CIS-BND-2, CIS-LIFE-7: a real cancellation of the task awaiting invoke propagates without
    waiting for a stubborn tool; the record stays PROJECTING for the sweep."""
    stubborn = Stubborn()

    async def scenario(boundary: AsyncToolBoundary, context: RunContext) -> None:
        try:
            task = asyncio.create_task(boundary.invoke(context, envelope("call_1")))
            await stubborn.started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert not stubborn.finished
            record = await boundary.store.get(RUN, "call_1")
            assert record is not None
            assert record.status is InvocationStatus.PROJECTING
        finally:
            stubborn.release.set()
        for _ in range(10):
            await asyncio.sleep(0)
        assert stubborn.finished

    reported = run_async(scenario, ToolSpec(name="search", executor=stubborn, projector=FakeProjector()))
    assert reported == []


async def cancelled_by_itself(*_args: Any) -> Any:
    """Tool code whose own sub-task was cancelled: it raises CancelledError, uncancelled caller."""
    inner = asyncio.ensure_future(asyncio.sleep(10))
    await asyncio.sleep(0)
    inner.cancel()
    await inner
    return FOUND


def raising(exc: BaseException) -> Callable[..., Any]:
    def fn(*_args: Any) -> Any:
        raise exc

    return fn


def araising(exc: BaseException) -> Callable[..., Awaitable[Any]]:
    async def fn(*_args: Any) -> Any:
        raise exc

    return fn


ASYNC_EXECUTOR_FAILURES = {
    "async-cancelled": cancelled_by_itself,
    "async-system-exit": araising(SystemExit(2)),
    "async-keyboard-interrupt": araising(KeyboardInterrupt()),
    "sync-keyboard-interrupt": raising(KeyboardInterrupt()),
    "sync-asyncio-cancelled": raising(asyncio.CancelledError()),
    "sync-futures-cancelled": raising(concurrent.futures.CancelledError()),
}


@pytest.mark.parametrize("kind", sorted(ASYNC_EXECUTOR_FAILURES))
def test_async_boundary_executor_base_exceptions_are_execution_failed(kind: str) -> None:
    """CIS-FAIL-2, CIS-BND-2: whatever an executor raises on the async boundary (CancelledError
    of its own, SystemExit, KeyboardInterrupt, sync or async) is EXECUTION_FAILED; the loop
    keeps running and nothing escapes invoke."""
    projector = FakeProjector()

    async def scenario(boundary: AsyncToolBoundary, context: RunContext) -> None:
        result = await boundary.invoke(context, envelope("call_1"))
        assert result.code is ErrorCode.EXECUTION_FAILED
        record = await boundary.store.get(RUN, "call_1")
        assert record is not None
        assert (record.status, record.error_code) == (InvocationStatus.ERROR, ErrorCode.EXECUTION_FAILED)
        assert (await boundary.invoke(context, envelope("call_2"))).code is ErrorCode.EXECUTION_FAILED

    spec = ToolSpec(name="search", executor=ASYNC_EXECUTOR_FAILURES[kind], projector=projector)
    assert run_async(scenario, spec) == []
    assert projector.calls == []


ASYNC_PROJECTOR_FAILURES = {
    "async-cancelled": cancelled_by_itself,
    "async-system-exit": araising(SystemExit(2)),
    "async-keyboard-interrupt": araising(KeyboardInterrupt()),
    "sync-keyboard-interrupt": raising(KeyboardInterrupt()),
}


@pytest.mark.parametrize("kind", sorted(ASYNC_PROJECTOR_FAILURES))
def test_async_boundary_projector_base_exceptions_are_projection_failed(kind: str) -> None:
    """CIS-EVID-5, CIS-BND-2, CIS-FAIL-6: the same for projectors: PROJECTION_FAILED, the raw
    response kept harness-only."""

    async def scenario(boundary: AsyncToolBoundary, context: RunContext) -> None:
        result = await boundary.invoke(context, envelope("call_1"))
        assert result.code is ErrorCode.PROJECTION_FAILED
        record = await boundary.store.get(RUN, "call_1")
        assert record is not None
        assert (record.error_code, record.raw_response) == (ErrorCode.PROJECTION_FAILED, "raw")

    spec = ToolSpec(name="search", executor=lambda _args: "raw", projector=ASYNC_PROJECTOR_FAILURES[kind])
    assert run_async(scenario, spec) == []


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), SystemExit(1)], ids=type)
def test_sync_boundary_projector_base_exceptions_are_projection_failed(
    store: Any, exc: BaseException
) -> None:
    """CIS-EVID-5, CIS-BND-2: the sync boundary applies the same policy to a projector running in
    the caller's thread: PROJECTION_FAILED, never an exception out of invoke."""
    boundary = boundary_for(store, tool(projector=FakeProjector(raises=exc)))
    context = open_run(boundary)
    assert boundary.invoke(context, envelope("call_1")).code is ErrorCode.PROJECTION_FAILED
    assert store.get(RUN, "call_1").error_code is ErrorCode.PROJECTION_FAILED


# ---------------------------------------------------------------------------
# Text at the edge: str subclasses and impostors (CIS-ID-4..6, CIS-SIZE-4, CIS-PRE-2)


class Liar(str):
    """A str whose every observable method lies: equal to everything, one short ASCII char."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return 0

    def __len__(self) -> int:
        return 1

    def isascii(self) -> bool:
        return True

    def strip(self, chars: str | None = None) -> str:
        return "x"

    def __str__(self) -> str:
        return "call_1"


class Impostor:
    """Not a str at all, yet ``isinstance(x, str)`` is True through ``__class__``."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return str


def test_envelope_str_subclasses_are_read_as_their_real_characters(store: Any) -> None:
    """CIS-ID-4, CIS-ID-6, CIS-PRE-3: each envelope field is copied to an exact str first: a run
    id lying about equality is still another run, a tool name is looked up by its characters,
    and a stored id is an exact str."""
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary)
    assert (
        boundary.invoke(context, envelope("call_1", run_id=Liar("run-other"))).code is ErrorCode.RUN_MISMATCH
    )
    assert boundary.invoke(context, envelope("call_1", tool_name=Liar("nope"))).code is ErrorCode.UNAUTHORIZED
    result = boundary.invoke(
        context,
        envelope(Liar("call_9"), run_id=Liar(RUN), tool_name=Liar("search"), arguments=Liar('{"q":"d"}')),
    )
    assert result.ok
    assert type(result.tool_call_id) is str
    assert result.tool_call_id == "call_9"
    record = store.get(RUN, "call_9")
    assert (type(record.tool_call_id), type(record.request_json)) == (str, str)
    assert record.request_json == '{"q":"d"}'
    assert len(executor.calls) == 1


def test_arguments_str_subclass_is_measured_in_real_bytes(store: Any) -> None:
    """CIS-SIZE-1, CIS-SIZE-2: arguments lying about their length are measured as their real
    UTF-8 bytes: 2,000 bytes never pass a 100-byte request limit."""
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor), limits=Limits(request_bytes=100))
    context = open_run(boundary)
    arguments = Liar('{"q":"' + "é" * 1000 + '"}')
    assert boundary.invoke(context, envelope(arguments=arguments)).code is ErrorCode.REQUEST_TOO_LARGE
    assert executor.calls == []


@pytest.mark.parametrize("field", ["run_id", "tool_call_id", "tool_name", "arguments"])
def test_an_impostor_envelope_field_is_missing_text(store: Any, field: str) -> None:
    """CIS-PRE-2, CIS-ID-2: an object that only claims to be a str is refused with its field's
    preflight code, never used as text."""
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary)
    expected = {
        "run_id": ErrorCode.RUN_MISMATCH,
        "tool_call_id": ErrorCode.MISSING_TOOL_CALL_ID,
        "tool_name": ErrorCode.UNAUTHORIZED,
        "arguments": ErrorCode.INVALID_ARGUMENTS,
    }[field]
    fields: dict[str, Any] = {
        "run_id": RUN,
        "tool_call_id": "call_1",
        "tool_name": "search",
        "arguments": "{}",
    }
    fields[field] = Impostor()
    assert boundary.invoke(context, ToolCallEnvelope(**fields)).code is expected
    assert executor.calls == []


PROJECTIONS = {
    "content-lies-about-size": (
        Projection(evidence_status="EVIDENCE_FOUND", content=Liar("x" * 500), scope="s"),
        ErrorCode.RESULT_TOO_LARGE,
    ),
    "scope-lies-about-size": (
        Projection(evidence_status="EVIDENCE_FOUND", content="c", scope=Liar("é" * 500)),
        ErrorCode.RESULT_TOO_LARGE,
    ),
    "blank-scope-lies-about-strip": (
        Projection(evidence_status="NO_EVIDENCE", content="c", scope=Liar("   ")),
        ErrorCode.PROJECTION_INVALID,
    ),
    "status-equal-to-everything": (
        Projection(evidence_status=Liar("BOGUS"), content="c", scope="s"),
        ErrorCode.PROJECTION_INVALID,
    ),
    "impostor-content": (
        Projection(evidence_status="EVIDENCE_FOUND", content=Impostor(), scope="s"),  # type: ignore[arg-type]
        ErrorCode.PROJECTION_INVALID,
    ),
    "impostor-status": (
        Projection(evidence_status=Impostor(), content="c", scope="s"),  # type: ignore[arg-type]
        ErrorCode.PROJECTION_INVALID,
    ),
}


@pytest.mark.parametrize("name", sorted(PROJECTIONS))
def test_projection_text_is_validated_as_its_real_characters(store: Any, name: str) -> None:
    """CIS-SIZE-4, CIS-EVID-3, CIS-EVID-5: every Projection field is copied to an exact str
    before the kernel validates it: lies about size, blankness or equality do not pass."""
    projection, code = PROJECTIONS[name]
    boundary = boundary_for(
        store, tool(projector=FakeProjector(projection)), limits=Limits(agent_result_bytes=100)
    )
    context = open_run(boundary)
    assert boundary.invoke(context, envelope("call_1")).code is code
    assert store.get(RUN, "call_1").error_code is code


def test_a_valid_projection_of_str_subclasses_is_stored_as_exact_text(store: Any) -> None:
    """CIS-EVID-2, CIS-ID-4: honest str subclasses (such as numpy.str_) are accepted, stored as
    exact str copies of their characters."""

    class Honest(str):
        __slots__ = ()

    projection = Projection(
        evidence_status=Honest("NO_EVIDENCE"), content=Honest("none"), scope=Honest("db-1")
    )
    boundary = boundary_for(store, tool(projector=FakeProjector(projection)))
    context = open_run(boundary)
    result = boundary.invoke(context, envelope("call_1"))
    assert (result.ok, result.negative, result.content, result.scope) == (True, True, "none", "db-1")
    record = store.get(RUN, "call_1")
    assert record.evidence_status is EvidenceStatus.NO_EVIDENCE
    assert (type(record.agent_result), type(record.scope)) == (str, str)


def test_run_ids_and_tool_names_are_exact_text() -> None:
    """CIS-ID-4, CIS-BND-3: a str-subclass run id opens a run whose context holds an exact str;
    a str-subclass tool name is registered as an exact str."""

    class Honest(str):
        __slots__ = ()

    spec = ToolSpec(name=Honest("search"), executor=FakeExecutor(), projector=FakeProjector())
    assert type(spec.name) is str
    boundary = boundary_for(MemoryStore(FakeClock()), spec)
    context = boundary.open_run(
        Honest(RUN),
        deadline_ms=boundary.now_ms() + 1_000,
        ttl_ms=1_000,
        tool_call_budget=1,
        byte_budget=1 << 10,
    )
    assert isinstance(context, RunContext)
    assert type(context.run_id) is str


def test_an_impostor_raw_response_is_a_serialization_failure(store: Any) -> None:
    """CIS-FAIL-4: an executor returning an object that only claims to be a str is
    SERIALIZATION_FAILED, not an exception out of invoke."""
    boundary = boundary_for(store, tool(FakeExecutor(Impostor())))
    context = open_run(boundary)
    assert boundary.invoke(context, envelope("call_1")).code is ErrorCode.SERIALIZATION_FAILED


# ---------------------------------------------------------------------------
# Citations of unsafe ids (CIS-ERR-1, CIS-REF-3)

UNSAFE_IDS = [
    None,
    7,
    "",
    "   ",
    "a{b}",
    "call 1",
    "x" * 129,
    "cis:{run-1}:call:x\n" + "y" * 1000,
    Liar("a{b}"),
]


@pytest.mark.parametrize("unsafe", UNSAFE_IDS, ids=range(len(UNSAFE_IDS)))
def test_citations_never_echo_an_unsafe_id(store: Any, unsafe: Any) -> None:
    """CIS-ERR-1, CIS-REF-3: citing an unsafe id (any type, any length, key-like) answers
    NOT_REFERENCABLE/UNSAFE_ID with the id replaced by None, on the sync and async boundaries."""
    boundary = boundary_for(store)
    context = open_run(boundary)
    citation = boundary.cite(context, unsafe)
    assert (citation.kind, citation.reason, citation.tool_call_id) == (
        CitationKind.NOT_REFERENCABLE,
        ExclusionReason.UNSAFE_ID,
        None,
    )

    async def main() -> Any:
        async_boundary = AsyncToolBoundary(AsyncMemoryStore(clock=FakeClock()), ToolRegistry([tool()]))
        return await async_boundary.cite(context, unsafe)

    assert asyncio.run(main()) == citation


def test_citing_a_str_subclass_id_reads_its_real_characters(store: Any) -> None:
    """CIS-REF-1, CIS-ID-4: a safe id given as a str subclass is cited by its characters and
    echoed as an exact str."""

    class Honest(str):
        __slots__ = ()

    boundary = boundary_for(store)
    context = open_run(boundary)
    assert boundary.invoke(context, envelope("call_1")).ok
    citation = boundary.cite(context, Honest("call_1"))
    assert citation.kind is CitationKind.EVIDENCE
    assert type(citation.tool_call_id) is str


# ---------------------------------------------------------------------------
# Run parameters in range (CIS-RUN-1, CIS-FAIL-5)

GOOD = {"deadline_ms": 1_000, "ttl_ms": 1_000, "tool_call_budget": 1, "byte_budget": 1}
BAD_PARAMETERS = [
    {"deadline_ms": MAX_SAFE_INT + 1},
    {"ttl_ms": MAX_SAFE_INT + 1},
    {"tool_call_budget": MAX_SAFE_INT + 1},
    {"byte_budget": 2**64},
    {"deadline_ms": MAX_SAFE_INT - 10, "ttl_ms": 11},
    {"deadline_ms": -1},
    {"ttl_ms": 0},
    {"byte_budget": True},
    {"tool_call_budget": 1.0},
]


@pytest.mark.parametrize("bad", BAD_PARAMETERS, ids=range(len(BAD_PARAMETERS)))
def test_out_of_range_run_parameters_raise_value_error(store: Any, bad: dict[str, Any]) -> None:
    """CIS-RUN-1, CIS-FAIL-5: every parameter is an int within [0, 2**53 - 1] (the TTL >= 1), and
    so is deadline + TTL; anything else is the caller's ValueError on both boundaries, never
    STORE_UNAVAILABLE."""
    boundary = boundary_for(store)
    with pytest.raises(ValueError):
        boundary.open_run(RUN, **{**GOOD, **bad})

    async def main() -> None:
        async_boundary = AsyncToolBoundary(AsyncMemoryStore(clock=FakeClock()), ToolRegistry())
        with pytest.raises(ValueError):
            await async_boundary.open_run(RUN, **{**GOOD, **bad})

    asyncio.run(main())


def test_the_largest_safe_run_parameters_are_accepted() -> None:
    """CIS-RUN-1: the bounds are inclusive: deadline + TTL == 2**53 - 1 opens the run."""
    boundary = boundary_for(MemoryStore(FakeClock()))
    context = boundary.open_run(
        RUN, deadline_ms=MAX_SAFE_INT - 1, ttl_ms=1, tool_call_budget=MAX_SAFE_INT, byte_budget=MAX_SAFE_INT
    )
    assert isinstance(context, RunContext)


def test_sweep_age_and_tool_timeout_are_bounded_too(store: Any) -> None:
    """CIS-RUN-1, CIS-LIFE-7, CIS-FAIL-3: the sweep's age and a tool's timeout are ints within
    2**53 - 1; the largest timeout is usable (thread waits are capped, never overflow)."""
    with pytest.raises(ValueError):
        ToolSpec(name="t", executor=FakeExecutor(), projector=FakeProjector(), timeout_ms=MAX_SAFE_INT + 1)
    boundary = boundary_for(store, tool(timeout_ms=MAX_SAFE_INT))
    context = open_run(boundary)
    with pytest.raises(ValueError):
        boundary.sweep_stale(context, MAX_SAFE_INT + 1)
    assert boundary.invoke(context, envelope("call_1")).ok


# ---------------------------------------------------------------------------
# Hostile type names in logs (CIS-ERR-2)

HOSTILE = "password=hunter2 key=cis:{run-1}"
HostileError = type(HOSTILE, (Exception,), {})
HostileValue = type(HOSTILE, (), {})


def test_hostile_type_names_never_reach_the_logs(store: Any, caplog: pytest.LogCaptureFixture) -> None:
    """CIS-ERR-2: exception and value type names are logged only when they are short ASCII
    identifiers; an executor's or projector's hostile class name is logged as UnprintableType."""
    boundary = boundary_for(
        store,
        tool(FakeExecutor(raises=HostileError())),
        tool(FakeExecutor(HostileValue()), name="unserializable"),
        tool(projector=FakeProjector(raises=HostileError()), name="projector_raises"),
        tool(projector=FakeProjector(HostileValue()), name="projector_returns"),
    )
    context = open_run(boundary)
    with caplog.at_level(logging.DEBUG, logger="invocation_store"):
        codes = [
            boundary.invoke(context, envelope(f"call_{i}", tool_name=name)).code
            for i, name in enumerate(["search", "unserializable", "projector_raises", "projector_returns"])
        ]
    assert codes == [
        ErrorCode.EXECUTION_FAILED,
        ErrorCode.SERIALIZATION_FAILED,
        ErrorCode.PROJECTION_FAILED,
        ErrorCode.PROJECTION_INVALID,
    ]
    assert "hunter2" not in caplog.text
    assert caplog.text.count("UnprintableType") == 4


def test_hostile_store_exception_names_never_reach_the_logs(
    store: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """CIS-ERR-2, CIS-FAIL-5: a store raising an exception with a hostile class name is
    STORE_UNAVAILABLE, logged without the name."""

    class Hostile(StoreWrapper):
        def create(self, request: AdmissionRequest, limits: Limits) -> Any:
            raise HostileError()

    boundary = boundary_for(Hostile(store))
    context = open_run(boundary)
    with caplog.at_level(logging.DEBUG, logger="invocation_store"):
        assert boundary.invoke(context, envelope("call_1")).code is ErrorCode.STORE_UNAVAILABLE
    assert "hunter2" not in caplog.text
    assert "UnprintableType" in caplog.text


def test_a_token_factory_returning_an_impostor_is_a_programming_error(store: Any) -> None:
    """CIS-RETRY-1: the invocation token is an exact non-empty str; an object only claiming
    to be one is the harness's TypeError, raised before anything is written."""
    boundary = boundary_for(store, token_factory=Impostor)
    context = open_run(boundary)
    with pytest.raises(TypeError):
        boundary.invoke(context, envelope("call_1"))
    assert store.get(RUN, "call_1") is None
