"""A scenario that drives every kind of trace operation through a recording boundary.

``record_scenario(store, clock)`` returns the trace text recorded from ``store``
(any InvocationStore) through :class:`RecordingBoundary` and the real ToolBoundary:
runs opened (fresh, retried, conflicting, unsafe), calls of every outcome (found,
NO_EVIDENCE, executor raises / times out / returns no text / a lone surrogate / too
much, projector raises / returns junk / an invalid status / too much), every
preflight refusal, a duplicate, budget and deadline exhaustion, a sweep racing a
running call, a call whose record expires while it runs, reads, citations,
progress, cancel, close and clock jumps past every expiry.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from typing import Any

from invocation_store.adapters import InvocationStore
from invocation_store.boundary import ToolRegistry, ToolSpec
from invocation_store.kernel import EvidenceStatus, Limits, Projection, RunContext, ToolCallEnvelope
from invocation_store.oracle._recorder import BoundaryFactory, RecordingBoundary
from invocation_store.testing import FakeClock
from invocation_store.testing._vocabulary import REFUSALS

LIMITS = Limits(request_bytes=128, raw_bytes=256, agent_result_bytes=64)
RUN = "run-a"
TTL_MS = 60_000


class Hooks:
    """Late-bound callbacks the executors need (the recorder exists only after the registry)."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.boundary: RecordingBoundary | None = None
        self.context: RunContext | None = None
        self.release = threading.Event()


def registry(hooks: Hooks) -> ToolRegistry:
    """Tools with every outcome a call can have."""

    def search(arguments: dict[str, Any]) -> str:
        return "RAW-SEARCH-RESULT for " + str(arguments.get("q"))

    def found(raw: str, arguments: dict[str, Any]) -> Projection:
        return Projection(
            evidence_status=EvidenceStatus.EVIDENCE_FOUND,
            content="found " + str(arguments.get("q")),
            scope="web",
        )

    def nothing(raw: str, arguments: dict[str, Any]) -> Projection:
        return Projection(evidence_status=EvidenceStatus.NO_EVIDENCE, content="", scope="the knowledge base")

    def boom(arguments: dict[str, Any]) -> str:
        raise RuntimeError("executor failure with a secret payload")

    def slow(arguments: dict[str, Any]) -> str:
        hooks.release.wait(5)
        return "late"

    def opaque(arguments: dict[str, Any]) -> object:
        return object()

    def surrogate(arguments: dict[str, Any]) -> str:
        return "half \ud800 a pair"

    def big(arguments: dict[str, Any]) -> str:
        return "B" * 300

    def structured(arguments: dict[str, Any]) -> object:
        return {"b": [1, 2], "a": "text"}

    def project_boom(raw: str, arguments: dict[str, Any]) -> Projection:
        raise ValueError("projector failure")

    def project_junk(raw: str, arguments: dict[str, Any]) -> Any:
        return "not a projection"

    def project_maybe(raw: str, arguments: dict[str, Any]) -> Projection:
        return Projection(evidence_status="MAYBE", content="?", scope="web")

    def project_chatty(raw: str, arguments: dict[str, Any]) -> Projection:
        return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="c" * 100, scope="web")

    def swept_meanwhile(arguments: dict[str, Any]) -> str:
        assert hooks.boundary is not None
        assert hooks.context is not None
        # The same call re-sent while this one runs: CALL_IN_PROGRESS (CIS-ID-5).
        hooks.boundary.invoke(hooks.context, envelope("search", "call_swept"))
        hooks.clock.advance(1_000)
        hooks.boundary.sweep_stale(hooks.context, 500)
        return "too late"

    def outlives_ttl(arguments: dict[str, Any]) -> str:
        hooks.clock.advance(TTL_MS + 1)
        return "after the record expired"

    return ToolRegistry(
        [
            ToolSpec(name="search", executor=search, projector=found),
            ToolSpec(name="kb", executor=search, projector=nothing),
            ToolSpec(name="boom", executor=boom, projector=found),
            ToolSpec(name="slow", executor=slow, projector=found, timeout_ms=50),
            ToolSpec(name="opaque", executor=opaque, projector=found),
            ToolSpec(name="surrogate", executor=surrogate, projector=found),
            ToolSpec(name="big", executor=big, projector=found),
            ToolSpec(name="structured", executor=structured, projector=found),
            ToolSpec(name="projboom", executor=search, projector=project_boom),
            ToolSpec(name="projjunk", executor=search, projector=project_junk),
            ToolSpec(name="maybe", executor=search, projector=project_maybe),
            ToolSpec(name="chatty", executor=search, projector=project_chatty),
            ToolSpec(name="sweeper", executor=swept_meanwhile, projector=found),
            ToolSpec(name="aging", executor=outlives_ttl, projector=found),
            ToolSpec(name="write", executor=search, projector=found, read_only=False),
            ToolSpec(name="secret", executor=search, projector=found, authorized=False),
            # The tools the stateful kit's refusals name (testing/_vocabulary.py REFUSED_TOOLS);
            # its "flagged" tool (a string flag) has no trace form: here it is an unknown tool.
            ToolSpec(name="forbidden", executor=search, projector=found, authorized=False),
            ToolSpec(name="writer", executor=search, projector=found, read_only=False),
        ]
    )


def envelope(
    tool: str,
    tool_call_id: str | None,
    arguments: str | None = '{"q":"x"}',
    run_id: str | None = RUN,
) -> ToolCallEnvelope:
    """An envelope of run ``RUN`` by default."""
    return ToolCallEnvelope(run_id=run_id, tool_call_id=tool_call_id, tool_name=tool, arguments=arguments)


def recorder(
    store: InvocationStore,
    clock: FakeClock,
    *,
    boundary_factory: BoundaryFactory | None = None,
    limits: Limits = LIMITS,
) -> tuple[RecordingBoundary, Hooks, io.StringIO]:
    """A recording boundary over ``store`` with the scenario's registry and ``limits``."""
    hooks = Hooks(clock)
    sink = io.StringIO()
    boundary = RecordingBoundary(
        sink, store, registry(hooks), limits=limits, implementation="tests", boundary_factory=boundary_factory
    )
    hooks.boundary = boundary
    return boundary, hooks, sink


def open_run(boundary: RecordingBoundary, clock: FakeClock, run_id: str = RUN, **changes: int) -> RunContext:
    """Open ``run_id`` with generous limits (override with ``changes``)."""
    parameters = {
        "deadline_ms": clock.now + 600_000,
        "ttl_ms": TTL_MS,
        "tool_call_budget": 40,
        "byte_budget": 1 << 20,
        **changes,
    }
    context = boundary.open_run(run_id, **parameters)
    assert isinstance(context, RunContext)
    return context


def record_scenario(store: InvocationStore, clock: FakeClock) -> str:
    """Run the whole scenario on ``store``; returns the recorded trace."""
    boundary, hooks, sink = recorder(store, clock)
    context = open_run(boundary, clock)
    hooks.context = context
    retried = boundary.open_run(
        RUN, deadline_ms=clock.now + 600_000, ttl_ms=TTL_MS, tool_call_budget=40, byte_budget=1 << 20
    )
    assert isinstance(retried, RunContext)
    boundary.open_run(RUN, deadline_ms=clock.now + 1, ttl_ms=TTL_MS, tool_call_budget=40, byte_budget=1 << 20)
    boundary.open_run("bad run", deadline_ms=clock.now + 1, ttl_ms=TTL_MS, tool_call_budget=1, byte_budget=1)

    invoke: Callable[[ToolCallEnvelope], Any] = lambda env: boundary.invoke(context, env)  # noqa: E731
    for index, tool in enumerate(
        [
            "search",
            "kb",
            "boom",
            "opaque",
            "surrogate",
            "big",
            "structured",
            "projboom",
            "projjunk",
            "maybe",
            "chatty",
        ]
    ):
        invoke(envelope(tool, f"call_{index}"))
        clock.advance(10)
    invoke(envelope("slow", "call_slow"))
    hooks.release.set()
    invoke(envelope("search", "call_0"))  # duplicate
    invoke(envelope("search", None))
    invoke(envelope("search", "   "))
    invoke(envelope("search", "call 1"))
    invoke(envelope("search", "call_x", run_id="run-other"))
    invoke(envelope("search", "call_y", arguments='{"q":1,"q":2}'))
    invoke(envelope("search", "call_z", arguments='{"q":"' + "z" * 200 + '"}'))
    invoke(envelope("write", "call_w"))
    invoke(envelope("secret", "call_s"))
    invoke(envelope("unknown", "call_u"))
    invoke(envelope("search", "toolu_01A09q90qw90lq917835lq9"))
    invoke(envelope("search", "functions.get_weather:0"))
    # Every hostile field the stateful kit tries (one list of refusals for both): a new
    # refusal code reached there is recorded here too. A trace carries text or null in an
    # envelope field; the other values (a number) are the preflight vectors' to try.
    traceable = [refusal for refusal in REFUSALS if refusal.value is None or isinstance(refusal.value, str)]
    for index, refusal in enumerate(traceable):
        fields: dict[str, Any] = {
            "run_id": RUN,
            "tool_call_id": f"call_r{index}",
            "tool_name": "search",
            "arguments": '{"q":"r"}',
        }
        value = refusal.value
        if refusal.field == "run_id" and value == RUN:
            value = f"{value}x"  # the kit's rule: another run's id
        fields[refusal.field] = value
        invoke(ToolCallEnvelope(**fields))

    boundary.read(RUN, "call_0")
    boundary.read(RUN, "call_2")
    boundary.read(RUN, "nope")
    for tool_call_id in ("call_0", "call_1", "call_2", "nope", "bad id"):
        boundary.cite(context, tool_call_id)
    boundary.project_progress(context)

    invoke(envelope("sweeper", "call_swept"))
    invoke(envelope("search", "call_swept"))  # re-sent after the sweep: STALE_PROJECTION, its fate
    invoke(envelope("aging", "call_aged"))
    boundary.read(RUN, "call_swept")
    boundary.sweep_stale(context, 0)
    boundary.project_progress(context)

    short = open_run(boundary, clock, "run-b", tool_call_budget=1, deadline_ms=clock.now + 1_000)
    boundary.invoke(short, envelope("search", "b_1", run_id="run-b"))
    boundary.invoke(short, envelope("search", "b_2", run_id="run-b"))  # budget
    clock.advance(1_000)
    boundary.invoke(short, envelope("search", "b_3", run_id="run-b"))  # deadline
    tiny = open_run(boundary, clock, "run-c", byte_budget=12)
    boundary.invoke(tiny, envelope("search", "c_1", run_id="run-c"))
    boundary.invoke(tiny, envelope("search", "c_2", run_id="run-c"))  # bytes
    boundary.cancel_run(tiny)
    boundary.cancel_run(tiny)
    boundary.invoke(tiny, envelope("search", "c_3", run_id="run-c"))  # inactive

    boundary.close_run(context)
    invoke(envelope("search", "call_after_close"))
    clock.advance(30_000)
    boundary.tick()
    boundary.read(RUN, "call_0")
    boundary.cite(context, "call_0")
    clock.advance(TTL_MS)
    boundary.tick()
    boundary.read(RUN, "call_0")
    boundary.cite(context, "call_0")
    boundary.project_progress(context)
    boundary.close_run(context)
    return sink.getvalue()
