"""Adversarial tests of the ToolBoundary: each was a defect found by attack (a strict xfail until fixed)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, ClassVar

import pytest

from invocation_store import ToolCallEnvelope
from invocation_store.adapters import AsyncMemoryStore, InvocationStore, MemoryStore
from invocation_store.boundary import (
    AsyncToolBoundary,
    BoundaryResult,
    ToolBoundary,
    ToolRegistry,
    ToolSpec,
)
from invocation_store.kernel import (
    Admission,
    AdmissionRequest,
    ErrorCode,
    EvidenceStatus,
    InvocationStatus,
    Limits,
    Projection,
    RunContext,
)
from invocation_store.testing import FakeClock

from ._support import RUN, envelope, found, run_params


class _RetriedCreateStore:
    """A store whose ``create`` reaches the backend twice, as when redis-py retries a
    command whose first reply was lost (timeout, dropped connection)."""

    def __init__(self, inner: InvocationStore) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        self.inner.create(request, limits)  # applied; its reply is lost
        return self.inner.create(request, limits)  # the retry: recognised as a replay


def test_retried_create_of_the_same_invocation_still_runs_the_tool(clock: FakeClock) -> None:
    """CIS-RETRY-2, CIS-BND-6: a create that reached the store twice (a redis-py retry) is the
    same invocation: the tool runs exactly once and the record completes, instead of the
    agent being told DUPLICATE_TOOL_CALL and the record being left PROJECTING."""
    inner = MemoryStore(clock)
    runs: list[Mapping[str, Any]] = []

    def executor(args: Mapping[str, Any]) -> str:
        runs.append(args)
        return "raw"

    boundary = ToolBoundary(
        _RetriedCreateStore(inner),
        ToolRegistry([ToolSpec(name="t", executor=executor, projector=found)]),
    )
    context = boundary.open_run(RUN, **run_params(clock()))
    assert isinstance(context, RunContext)
    result = boundary.invoke(context, envelope("call_1"))
    record = inner.get(RUN, "call_1")
    assert record is not None
    assert (result.ok, len(runs), record.status) == (True, 1, InvocationStatus.READY)


def test_async_executor_that_ignores_cancellation_still_times_out(clock: FakeClock) -> None:
    """CIS-FAIL-3: an async executor over its timeout is EXECUTION_TIMEOUT even when it
    swallows the cancellation and returns a value late (here 6x its 50 ms timeout)."""

    async def stubborn(_args: Mapping[str, Any]) -> str:
        try:
            await asyncio.sleep(0.3)
        except asyncio.CancelledError:
            await asyncio.sleep(0.25)  # cleanup that ignores the cancel, then a late answer
        return "late raw"

    async def main() -> BoundaryResult:
        boundary = AsyncToolBoundary(
            AsyncMemoryStore(clock=clock),
            ToolRegistry([ToolSpec(name="t", executor=stubborn, projector=found, timeout_ms=50)]),
        )
        context = await boundary.open_run(RUN, **run_params(clock()))
        assert isinstance(context, RunContext)
        return await boundary.invoke(context, envelope("call_1"))

    result = asyncio.run(main())
    assert result.code is ErrorCode.EXECUTION_TIMEOUT


def test_async_executor_raising_cancelled_error_is_an_execution_failure(clock: FakeClock) -> None:
    """CIS-FAIL-2, CIS-BND-2: an async tool whose own sub-task was cancelled raises
    CancelledError although nobody cancelled invoke; that is EXECUTION_FAILED, not an
    exception escaping invoke with the record left PROJECTING."""

    async def tool(_args: Mapping[str, Any]) -> str:
        inner = asyncio.ensure_future(asyncio.sleep(10))
        await asyncio.sleep(0)
        inner.cancel()
        await inner  # raises CancelledError inside the tool
        return "unreachable"

    async def main() -> BoundaryResult | None:
        boundary = AsyncToolBoundary(
            AsyncMemoryStore(clock=clock), ToolRegistry([ToolSpec(name="t", executor=tool, projector=found)])
        )
        context = await boundary.open_run(RUN, **run_params(clock()))
        assert isinstance(context, RunContext)
        try:
            return await boundary.invoke(context, envelope("call_1"))
        except asyncio.CancelledError:
            return None

    result = asyncio.run(main())
    assert result is not None
    assert result.code is ErrorCode.EXECUTION_FAILED


class _HashLiar(str):
    """A str whose hash and equality lie (the text itself is a safe id)."""

    __slots__ = ()

    def __hash__(self) -> int:
        return 12345

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True


def test_str_subclass_id_cannot_run_the_executor_twice(clock: FakeClock) -> None:
    """CIS-ID-5, CIS-BND-6: a second call with the id "call_1" is a duplicate even when the
    id object is a str subclass with a lying __hash__/__eq__; the executor runs once."""
    runs: list[int] = []

    def executor(_args: Mapping[str, Any]) -> str:
        runs.append(1)
        return "raw"

    store = MemoryStore(clock)
    boundary = ToolBoundary(store, ToolRegistry([ToolSpec(name="t", executor=executor, projector=found)]))
    context = boundary.open_run(RUN, **run_params(clock()))
    assert isinstance(context, RunContext)
    assert boundary.invoke(context, envelope("call_1")).ok
    second = boundary.invoke(context, envelope(_HashLiar("call_1")))
    assert not second.ok
    assert len(runs) == 1


class _SizeLiar(str):
    """A str that claims to be ASCII and one character long."""

    __slots__ = ()

    def isascii(self) -> bool:
        return True

    def __len__(self) -> int:
        return 1


def test_projection_str_subclass_cannot_bypass_the_agent_result_limit(clock: FakeClock) -> None:
    """CIS-SIZE-1, CIS-SIZE-4: a projection whose content is a str subclass lying about its
    length is still measured in real UTF-8 bytes: 100,000 bytes never pass a 100-byte limit."""
    content = _SizeLiar("x" * 100_000)

    def projector(_raw: str, _args: Mapping[str, Any]) -> Projection:
        return Projection(evidence_status="EVIDENCE_FOUND", content=content, scope="s")

    boundary = ToolBoundary(
        MemoryStore(clock),
        ToolRegistry([ToolSpec(name="t", executor=lambda _args: "raw", projector=projector)]),
        limits=Limits(agent_result_bytes=100),
    )
    context = boundary.open_run(RUN, **run_params(clock()))
    assert isinstance(context, RunContext)
    result = boundary.invoke(context, envelope("call_1"))
    assert not result.ok


def test_citation_of_an_unsafe_id_does_not_echo_it(clock: FakeClock) -> None:
    """CIS-ERR-1, CIS-REF-3: like BoundaryResult (which echoes only safe ids), a Citation for
    an unsafe id does not carry the id text back (here key-like text and 100 KB of it)."""
    boundary = ToolBoundary(
        MemoryStore(clock), ToolRegistry([ToolSpec(name="t", executor=str, projector=found)])
    )
    context = boundary.open_run(RUN, **run_params(clock()))
    assert isinstance(context, RunContext)
    unsafe = "cis:{run-adv}:call:x " + "y" * 100_000
    citation = boundary.cite(context, unsafe)
    assert unsafe not in repr(citation)


def test_out_of_range_run_parameters_are_a_value_error_not_a_store_failure(clock: FakeClock) -> None:
    """CIS-RUN-1, CIS-FAIL-5: a deadline the store cannot keep exactly (>= 2**53 ms) is the
    caller's ValueError, as documented, not STORE_UNAVAILABLE (the store is fine)."""
    boundary = ToolBoundary(
        MemoryStore(clock), ToolRegistry([ToolSpec(name="t", executor=str, projector=found)])
    )
    with pytest.raises(ValueError):
        boundary.open_run(RUN, deadline_ms=2**53, ttl_ms=1_000, tool_call_budget=1, byte_budget=1)


class _Tagged(str):
    """A str subclass: the boundary must copy it to an exact str before anything keeps it."""

    __slots__ = ()


class _EnvelopeSubclass(ToolCallEnvelope):
    """A subclass of the envelope whose tool_call_id reads "call_1" once, then "call_2": the
    boundary must rebuild it, reading each field once, or two parts of one call disagree."""

    reads: ClassVar[list[int]] = []

    @property
    def tool_call_id(self) -> str:
        self.reads.append(1)
        return "call_1" if len(self.reads) == 1 else "call_2"

    @tool_call_id.setter
    def tool_call_id(self, value: str) -> None:
        del value


@pytest.mark.parametrize("field", ["run_id", "tool_call_id", "tool_name", "arguments", "envelope"])
def test_every_text_the_store_keeps_is_an_exact_str(clock: FakeClock, field: str) -> None:
    """CIS-ID-4..6: whatever field arrives as a str subclass (or the envelope as a subclass), the
    record the store keeps holds exact ``str`` only, and the call runs as the same call would with
    plain text: the boundary's copy is made on every path, not only on the ones tests used."""
    store = MemoryStore(clock)
    boundary = ToolBoundary(
        store, ToolRegistry([ToolSpec(name="t", executor=lambda args: "raw", projector=found)])
    )
    context = boundary.open_run(RUN, **run_params(clock()))
    assert isinstance(context, RunContext)
    fields: dict[str, Any] = {"run_id": RUN, "tool_call_id": "call_1", "tool_name": "t", "arguments": "{}"}
    if field == "envelope":
        _EnvelopeSubclass.reads.clear()
        sent: Any = _EnvelopeSubclass(**fields)
    else:
        fields[field] = _Tagged(fields[field])
        sent = ToolCallEnvelope(**fields)
    result = boundary.invoke(context, sent)
    assert result.ok, result
    assert (result.tool_call_id, result.envelope_tool_call_id) == ("call_1", "call_1")
    assert store.calls(RUN) == ("call_1",)  # one call, under the id read once
    record = store.get(RUN, "call_1")
    assert record is not None
    for name in ("run_id", "tool_call_id", "tool_name", "request_json", "invocation_token"):
        assert type(getattr(record, name)) is str, name


class _ProjectionSubclass(Projection):
    """A Projection subclass whose content reads "first" once, then "second": the boundary must
    rebuild it, reading each field once, or the agent and the record get different results."""

    reads: ClassVar[list[int]] = []

    def __getattribute__(self, name: str) -> Any:
        if name == "content":
            type(self).reads.append(1)
            return "first" if len(type(self).reads) == 1 else "second"
        return super().__getattribute__(name)


@pytest.mark.parametrize("field", ["evidence_status", "content", "scope", "projection"])
@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_every_projection_text_the_store_keeps_is_an_exact_str(
    clock: FakeClock, field: str, flavour: str
) -> None:
    """CIS-EVID-2, CIS-ID-4: whatever projection field arrives as a str subclass (or the
    projection as a subclass whose fields read differently each time), the record holds exact
    ``str`` only, read once: the agent's result and the stored one are the same text."""
    fields: dict[str, Any] = {"evidence_status": "EVIDENCE_FOUND", "content": "first", "scope": "s"}
    if field == "projection":
        _ProjectionSubclass.reads.clear()
        made: Projection = _ProjectionSubclass(**fields)
    else:
        fields[field] = _Tagged(fields[field])
        made = Projection(**fields)
    spec = ToolSpec(name="t", executor=lambda _args: "raw", projector=lambda _raw, _args: made)
    if flavour == "sync":
        store: Any = MemoryStore(clock)
        boundary: Any = ToolBoundary(store, ToolRegistry([spec]))
        context = boundary.open_run(RUN, **run_params(clock()))
        result = boundary.invoke(context, envelope("call_1"))
    else:
        store = AsyncMemoryStore(clock=clock)
        boundary = AsyncToolBoundary(store, ToolRegistry([spec]))

        async def flow() -> Any:
            context = await boundary.open_run(RUN, **run_params(clock()))
            return await boundary.invoke(context, envelope("call_1"))

        result = asyncio.run(flow())
    assert result.ok, result
    record = store.get(RUN, "call_1")
    if flavour == "async":
        record = asyncio.run(record)
    assert record is not None
    assert (record.agent_result, record.scope, record.evidence_status) == (
        "first",
        "s",
        EvidenceStatus.EVIDENCE_FOUND,
    )
    assert (result.content, result.scope) == ("first", "s")
    for name in ("agent_result", "scope"):
        assert type(getattr(record, name)) is str, name
    assert type(record.evidence_status) is EvidenceStatus
    if field == "projection":
        assert len(_ProjectionSubclass.reads) == 1
