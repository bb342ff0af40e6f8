"""Logs, traces and metrics of the boundary (CIS-OBS-1..4).

Spans and metrics go through the OpenTelemetry API to the SDK's in-memory exporter
and reader (installed once per process by ``_otel``).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import pkgutil
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from redis.backoff import NoBackoff
from redis.retry import Retry

import invocation_store
from invocation_store import (
    AsyncMemoryStore,
    AsyncToolBoundary,
    BoundaryResult,
    CompletionRetry,
    ErrorCode,
    EvidenceStatus,
    Limits,
    MemoryStore,
    Projection,
    RunContext,
    ToolBoundary,
    ToolCallEnvelope,
    ToolRegistry,
    ToolSpec,
)
from invocation_store._logs import PACKAGE_LOGGERS, CallIdsFilter
from invocation_store.adapters.redis import RedisStore
from invocation_store.boundary._telemetry import INSTRUMENTS, SPAN_ATTRIBUTES, _histogram

from ._otel import metric_reader, recording

RUN = "run-otel"


def lookup(arguments: Any) -> dict[str, Any]:
    with trace.get_tracer("tool").start_as_current_span("tool.lookup"):
        return {"rows": [arguments["q"]] * 3}


def project(raw: str, arguments: Any) -> Projection:
    return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="3 rows", scope="db")


def failing(arguments: Any) -> object:
    raise RuntimeError("boom")


def registry() -> ToolRegistry:
    return ToolRegistry(
        [
            ToolSpec(name="lookup", executor=lookup, projector=project),
            ToolSpec(name="failing", executor=failing, projector=project),
        ]
    )


def call(
    tool_call_id: str | None, tool_name: str = "lookup", arguments: str = '{"q": "x"}'
) -> ToolCallEnvelope:
    return ToolCallEnvelope(run_id=RUN, tool_call_id=tool_call_id, tool_name=tool_name, arguments=arguments)


def sync_boundary() -> tuple[ToolBoundary, RunContext]:
    store = MemoryStore()
    boundary = ToolBoundary(store, registry())
    context = boundary.open_run(
        RUN, deadline_ms=store.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=20, byte_budget=1 << 20
    )
    assert isinstance(context, RunContext)
    return boundary, context


@pytest.fixture
def spans() -> Iterator[Any]:
    with recording() as exporter:
        yield exporter


# ---------------------------------------------------------------------------
# Logs


def test_package_logger_has_a_null_handler() -> None:
    """CIS-OBS-1: importing the package puts a NullHandler on the ``invocation_store`` logger."""
    handlers = logging.getLogger("invocation_store").handlers
    assert any(isinstance(handler, logging.NullHandler) for handler in handlers)


def test_an_application_without_logging_prints_nothing() -> None:
    """CIS-OBS-1: a failing tool logs a warning; without logging configured, stderr stays empty."""
    script = """
from invocation_store import MemoryStore, ToolBoundary, ToolRegistry, ToolSpec, ToolCallEnvelope, Projection
def boom(arguments):
    raise RuntimeError("boom")
store = MemoryStore()
tools = ToolRegistry([ToolSpec(name="t", executor=boom, projector=lambda r, a: None)])
boundary = ToolBoundary(store, tools)
context = boundary.open_run(
    "r", deadline_ms=store.now_ms() + 9000, ttl_ms=9000, tool_call_budget=2, byte_budget=999
)
envelope = ToolCallEnvelope(run_id="r", tool_call_id="c", tool_name="t", arguments="{}")
result = boundary.invoke(context, envelope)
assert result.code.value == "EXECUTION_FAILED", result
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == ""


def test_every_log_record_carries_run_id_and_tool_call_id(caplog: pytest.LogCaptureFixture) -> None:
    """CIS-OBS-2, CIS-ERR-2: records name their run and call by safe ids only, never payloads."""
    boundary, context = sync_boundary()
    caplog.set_level(logging.DEBUG, logger="invocation_store")
    boundary.invoke(context, call("call_fail", tool_name="failing"))
    boundary.invoke(context, call("bad id {x}"))
    boundary.invoke(context, call("call_fail", tool_name="failing"))  # duplicate
    boundary.sweep_stale(context, 0)
    records = [r for r in caplog.records if r.name.startswith("invocation_store")]
    assert records
    for record in records:
        assert record.__dict__["run_id"] == RUN
        assert "tool_call_id" in record.__dict__
    by_message = {r.getMessage(): r.__dict__["tool_call_id"] for r in records}
    assert by_message["tool failing executor raised RuntimeError: EXECUTION_FAILED"] == "call_fail"
    assert by_message["tool call rejected at preflight: UNSAFE_TOOL_CALL_ID"] is None  # unsafe: not logged
    assert by_message["tool call refused at admission: DUPLICATE_TOOL_CALL"] == "call_fail"
    assert all("bad id" not in str(r.__dict__.values()) and "boom" not in r.getMessage() for r in records)


def _import_every_module() -> None:
    """Import every module of the package (each makes its loggers at import)."""
    package = importlib.import_module("invocation_store")
    for module in pkgutil.walk_packages(package.__path__, "invocation_store."):
        with contextlib.suppress(ImportError):  # an optional extra this environment lacks
            importlib.import_module(module.name)


def test_every_logger_of_the_package_names_the_call() -> None:
    """CIS-OBS-2: every logger of the package (every module imported) carries the filter that sets
    ``run_id`` and ``tool_call_id``, so a formatter naming them never fails on a record of ours.
    A logger made with plain ``logging.getLogger`` in a new module fails here: make it with
    ``invocation_store._logs.package_logger`` (or list it in ``_logs.PACKAGE_LOGGERS``)."""
    _import_every_module()
    loggers = {
        name: logger
        for name, logger in logging.Logger.manager.loggerDict.items()
        if (name == "invocation_store" or name.startswith("invocation_store."))
        and isinstance(logger, logging.Logger)
    }
    assert {"invocation_store.boundary", "invocation_store.workers", "invocation_store.redis"} <= set(loggers)
    missing = sorted(
        name
        for name, logger in loggers.items()
        if not any(isinstance(f, CallIdsFilter) for f in logger.filters)
    )
    assert missing == []
    formatter = logging.Formatter("%(name)s %(run_id)s %(tool_call_id)s %(message)s")
    for name, logger in loggers.items():
        record = logger.makeRecord(name, logging.WARNING, __file__, 1, "outside any call", (), None)
        assert logger.filter(record)
        assert formatter.format(record) == f"{name} None None outside any call"  # the documented empty value


def test_a_store_used_without_the_boundary_names_its_records_too() -> None:
    """CIS-OBS-2: the filter is installed when the package is imported, not by the boundary: a process
    that imports only the Redis store formats that store's records with ``%(run_id)s`` (None)."""
    script = """
import logging, sys
import invocation_store.adapters.redis
assert "invocation_store.boundary" not in sys.modules
logger = logging.getLogger("invocation_store.redis")
record = logger.makeRecord(logger.name, logging.WARNING, "f", 1, "redis store: create failed", (), None)
assert logger.filter(record)
print(logging.Formatter("%(run_id)s|%(tool_call_id)s|%(message)s").format(record))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "None|None|redis store: create failed"


def _hung_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "invocation_store.workers" and "hung" in r.getMessage()]


def test_the_tool_worker_hung_record_names_its_call(caplog: pytest.LogCaptureFixture) -> None:
    """CIS-OBS-2, CIS-FAIL-3: the worker pool's "tool worker hung" warning, sync and async, carries the
    run_id and tool_call_id of the call that timed out, and formats with a formatter naming them."""
    release = threading.Event()

    def stuck(arguments: Any) -> object:
        release.wait(10)
        return {}

    tools = ToolRegistry([ToolSpec(name="stuck", executor=stuck, projector=project, timeout_ms=20)])
    caplog.set_level(logging.WARNING, logger="invocation_store")
    formatter = logging.Formatter("%(run_id)s/%(tool_call_id)s: %(message)s")
    try:
        store = MemoryStore()
        boundary = ToolBoundary(store, tools)
        context = boundary.open_run(
            RUN, deadline_ms=store.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=1 << 20
        )
        assert isinstance(context, RunContext)
        timed_out = boundary.invoke(context, call("call_sync_hang", tool_name="stuck"))
        assert timed_out.code is ErrorCode.EXECUTION_TIMEOUT
        (sync_record,) = _hung_records(caplog)
        assert formatter.format(sync_record).startswith(f"{RUN}/call_sync_hang: tool worker hung")

        async def scenario() -> BoundaryResult:
            async_store = AsyncMemoryStore()
            async_boundary = AsyncToolBoundary(async_store, tools)
            run = await async_boundary.open_run(
                RUN,
                deadline_ms=async_store.now_ms() + 60_000,
                ttl_ms=60_000,
                tool_call_budget=5,
                byte_budget=999,
            )
            assert isinstance(run, RunContext)
            return await async_boundary.invoke(run, call("call_async_hang", tool_name="stuck"))

        assert asyncio.run(scenario()).code is ErrorCode.EXECUTION_TIMEOUT
        records = _hung_records(caplog)
        assert len(records) == 2
        assert formatter.format(records[1]).startswith(f"{RUN}/call_async_hang: tool worker hung")
    finally:
        release.set()


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_custom_logger_gets_the_ids_too(caplog: pytest.LogCaptureFixture, flavour: str) -> None:
    """CIS-OBS-2: a harness's own logger gets the boundary's lines (and the ids), on both boundaries."""
    caplog.set_level(logging.INFO, logger="harness.tools")
    logger = logging.getLogger("harness.tools")
    if flavour == "sync":
        store = MemoryStore()
        boundary = ToolBoundary(store, registry(), logger=logger)
        context = boundary.open_run(
            RUN, deadline_ms=store.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=20, byte_budget=1 << 20
        )
        assert isinstance(context, RunContext)
        boundary.invoke(context, call(None))
    else:

        async def main() -> None:
            async_store = AsyncMemoryStore()
            async_boundary = AsyncToolBoundary(async_store, registry(), logger=logger)
            run = await async_boundary.open_run(
                RUN,
                deadline_ms=async_store.now_ms() + 60_000,
                ttl_ms=60_000,
                tool_call_budget=20,
                byte_budget=1 << 20,
            )
            assert isinstance(run, RunContext)
            await async_boundary.invoke(run, call(None))

        asyncio.run(main())
    (record,) = [r for r in caplog.records if r.name == "harness.tools"]
    assert record.getMessage() == "tool call rejected at preflight: MISSING_TOOL_CALL_ID"
    assert (record.__dict__["run_id"], record.__dict__["tool_call_id"]) == (RUN, None)


def test_the_redis_stores_records_name_the_call_too(caplog: pytest.LogCaptureFixture) -> None:
    """CIS-OBS-2, CIS-FAIL-5: the Redis store's own warning, made inside invoke, carries the ids."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = RedisStore.from_url(
        f"redis://127.0.0.1:{port}/0", socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0)
    )
    boundary = ToolBoundary(store, registry())
    caplog.set_level(logging.WARNING)
    try:
        result = boundary.invoke(RunContext(run_id=RUN), call("call_r1"))
    finally:
        store.close()
    assert result.code is ErrorCode.STORE_UNAVAILABLE
    redis_records = [r for r in caplog.records if r.name == "invocation_store.redis"]
    assert redis_records
    for record in redis_records:
        assert (record.__dict__["run_id"], record.__dict__["tool_call_id"]) == (RUN, "call_r1")


# ---------------------------------------------------------------------------
# Spans


def _invoke_ok(flavour: str) -> None:
    """One successful call of ``lookup`` on a boundary of ``flavour`` (sync or async)."""
    if flavour == "sync":
        boundary, context = sync_boundary()
        assert boundary.invoke(context, call("call_ok")).ok
        return

    async def main() -> None:
        store = AsyncMemoryStore()
        async_boundary = AsyncToolBoundary(store, registry())
        run = await async_boundary.open_run(
            RUN, deadline_ms=store.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=1 << 20
        )
        assert isinstance(run, RunContext)
        assert (await async_boundary.invoke(run, call("call_ok"))).ok

    asyncio.run(main())


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_one_span_per_invoke_with_stable_attributes(spans: Any, flavour: str) -> None:
    """CIS-OBS-3: name, kind, attributes (all documented), phase durations, status; tool spans nest.
    Sync and async pipelines are separate modules: each names its phases."""
    _invoke_ok(flavour)
    finished = spans.get_finished_spans()
    (span,) = [s for s in finished if s.name == "execute_tool lookup"]
    (child,) = [s for s in finished if s.name == "tool.lookup"]
    assert child.parent is not None
    assert child.parent.span_id == span.context.span_id  # the tool's span is the call's child
    assert span.kind is trace.SpanKind.INTERNAL
    attributes = dict(span.attributes)
    assert set(attributes) <= set(SPAN_ATTRIBUTES)
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.name"] == "lookup"
    assert attributes["gen_ai.tool.call.id"] == "call_ok"
    assert attributes["invocation_store.run_id"] == RUN
    assert attributes["invocation_store.status"] == "READY"
    assert attributes["invocation_store.evidence_status"] == "EVIDENCE_FOUND"
    assert attributes["invocation_store.request_bytes"] == len('{"q": "x"}')
    assert attributes["invocation_store.raw_bytes"] == len('{"rows":["x","x","x"]}')
    assert attributes["invocation_store.agent_result_bytes"] == len("3 rows") + len("db")
    assert attributes["gen_ai.tool.type"] == "function"
    whole_s = (span.end_time - span.start_time) / 1e9
    phases = [attributes[f"invocation_store.{phase}.duration"] for phase in ("execute", "project", "store")]
    assert all(isinstance(seconds, float) and seconds > 0 for seconds in phases), phases
    assert sum(phases) <= whole_s  # seconds, as the conventions use: the phases fit in the span
    assert "invocation_store.code" not in attributes
    assert "error.type" not in attributes
    assert span.status.status_code is trace.StatusCode.UNSET


@pytest.mark.parametrize(
    ("envelope", "status", "code", "tool"),
    [
        (call("call_f", tool_name="failing"), "ERROR", "EXECUTION_FAILED", "failing"),
        (call("call_u", tool_name="not_registered"), "REJECTED", "UNAUTHORIZED", None),
        (call("call {unsafe}"), "REJECTED", "UNSAFE_TOOL_CALL_ID", "lookup"),
        (call("call_a", arguments="[1]"), "REJECTED", "INVALID_ARGUMENTS", "lookup"),
    ],
)
def test_failed_calls_set_status_and_code(
    spans: Any, envelope: ToolCallEnvelope, status: str, code: str, tool: str | None
) -> None:
    """CIS-OBS-3, CIS-ID-3: a failure is status ERROR with its code, which is also its ``error.type``
    (OpenTelemetry GenAI conventions); unknown names and unsafe ids stay out."""
    boundary, context = sync_boundary()
    result = boundary.invoke(context, envelope)
    assert result.code is ErrorCode(code)
    (span,) = spans.get_finished_spans()
    attributes = dict(span.attributes)
    assert attributes["invocation_store.status"] == status
    assert attributes["invocation_store.code"] == code
    assert attributes["error.type"] == code
    assert attributes["gen_ai.tool.type"] == "function"
    assert attributes.get("gen_ai.tool.name") == tool
    assert span.name == f"execute_tool {tool or 'unregistered'}"
    assert span.status.status_code is trace.StatusCode.ERROR
    assert span.status.description == code
    if envelope.tool_call_id == "call {unsafe}":
        assert "gen_ai.tool.call.id" not in attributes


def test_an_invoke_that_raises_ends_its_span_with_the_type_only(spans: Any) -> None:
    """CIS-OBS-3, CIS-ERR-2: a programming error and a cancellation: ERROR, error.type, no text."""
    boundary, context = sync_boundary()
    with pytest.raises(TypeError):
        boundary.invoke(context, {"tool_call_id": "c"})  # type: ignore[arg-type]

    async def cancelled() -> None:
        store = AsyncMemoryStore()
        slow_tools = ToolRegistry([ToolSpec(name="slow", executor=slow, projector=project)])
        async_boundary = AsyncToolBoundary(store, slow_tools)
        run = await async_boundary.open_run(
            RUN, deadline_ms=store.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=1 << 20
        )
        assert isinstance(run, RunContext)
        task = asyncio.ensure_future(async_boundary.invoke(run, call("call_c", tool_name="slow")))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled())
    raised = {
        s.attributes.get("error.type"): s for s in spans.get_finished_spans() if s.name.startswith("execute")
    }
    assert set(raised) == {"TypeError", "CancelledError"}
    for span in raised.values():
        assert span.status.status_code is trace.StatusCode.ERROR
        assert span.status.description is None
        assert set(span.attributes) <= set(SPAN_ATTRIBUTES)


async def slow(arguments: Any) -> object:
    await asyncio.sleep(10)
    return {}


def test_async_invokes_each_get_their_own_span(spans: Any) -> None:
    """CIS-OBS-3: concurrent async invokes do not mix their attributes."""

    async def main() -> None:
        store = AsyncMemoryStore()
        boundary = AsyncToolBoundary(store, registry())
        context = await boundary.open_run(
            RUN, deadline_ms=store.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=20, byte_budget=1 << 20
        )
        assert isinstance(context, RunContext)
        results = await asyncio.gather(*(boundary.invoke(context, call(f"call_{i}")) for i in range(5)))
        assert all(r.ok for r in results)

    asyncio.run(main())
    calls = [s for s in spans.get_finished_spans() if s.name == "execute_tool lookup"]
    assert sorted(s.attributes["gen_ai.tool.call.id"] for s in calls) == [f"call_{i}" for i in range(5)]
    children = [s for s in spans.get_finished_spans() if s.name == "tool.lookup"]
    assert {c.parent.span_id for c in children} == {s.context.span_id for s in calls}


def test_without_opentelemetry_nothing_is_emitted_and_nothing_fails() -> None:
    """CIS-OBS-3, CIS-OBS-4: with the API not importable, invoke works and the telemetry is off."""
    script = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError(name)
sys.meta_path.insert(0, Block())
from invocation_store import MemoryStore, ToolBoundary, ToolRegistry, ToolSpec, ToolCallEnvelope
from invocation_store import EvidenceStatus, Projection
from invocation_store.boundary import _telemetry
found = Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="x", scope="s")
store = MemoryStore()
spec = ToolSpec(name="t", executor=lambda a: "{}", projector=lambda r, a: found)
boundary = ToolBoundary(store, ToolRegistry([spec]))
context = boundary.open_run(
    "r", deadline_ms=store.now_ms() + 9000, ttl_ms=9000, tool_call_budget=2, byte_budget=999
)
envelope = ToolCallEnvelope(run_id="r", tool_call_id="c", tool_name="t", arguments="{}")
result = boundary.invoke(context, envelope)
assert result.ok and result.tool_name == "t", result
assert _telemetry._otel() is None
assert "opentelemetry" not in sys.modules
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]


# ---------------------------------------------------------------------------
# Metrics


def _metrics(name: str) -> list[Any]:
    data = metric_reader().get_metrics_data()
    found: list[Any] = []
    if data is None:  # nothing recorded yet in this process
        return found
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            found.extend(metric for metric in scope.metrics if metric.name == name)
    return found


def _points(name: str) -> list[Any]:
    return [point for metric in _metrics(name) for point in metric.data.data_points]


def _count(status: str, tool: str, code: str | None = None) -> int:
    """Invocations counted so far with ``status`` for ``tool`` (and, if given, with ``code``)."""
    return sum(
        p.value
        for p in _points("invocation_store.invocations")
        if p.attributes.get("invocation_store.status") == status
        and p.attributes.get("gen_ai.tool.name") == tool
        and (code is None or p.attributes.get("invocation_store.code") == code)
    )


def test_outcome_counter_and_latency_histograms() -> None:
    """CIS-OBS-4: one count per invoke by tool, status and code; durations per invoke and per phase."""
    before_ready, before_error = _count("READY", "lookup"), _count("ERROR", "failing")
    # The reader is the process's: count this test's own recordings (deltas), not what others left.
    timed_before = sum(p.count for p in _points("invocation_store.invoke.duration"))
    phases_before = sum(p.count for p in _points("invocation_store.phase.duration"))
    boundary, context = sync_boundary()
    boundary.invoke(context, call("call_1"))
    boundary.invoke(context, call("call_2"))
    boundary.invoke(context, call("call_3", tool_name="failing"))
    assert _count("READY", "lookup") == before_ready + 2
    assert _count("ERROR", "failing") == before_error + 1
    codes = {p.attributes.get("invocation_store.code") for p in _points("invocation_store.invocations")}
    assert "EXECUTION_FAILED" in codes
    durations = _points("invocation_store.invoke.duration")
    assert sum(p.count for p in durations) == timed_before + 3
    # two READY calls time three phases each; the failed one its execute and store phases
    assert sum(p.count for p in _points("invocation_store.phase.duration")) == phases_before + 8
    phases = {p.attributes["invocation_store.phase"] for p in _points("invocation_store.phase.duration")}
    assert phases == {"execute", "project", "store"}
    failed_points = [p for p in durations if p.attributes.get("invocation_store.status") == "ERROR"]
    assert {p.attributes.get("error.type") for p in failed_points} >= {"EXECUTION_FAILED"}
    for name, (kind, unit, allowed) in INSTRUMENTS.items():
        assert _metrics(name), name  # exported under exactly this name
        for metric in _metrics(name):
            assert metric.unit == unit
        for point in _points(name):
            assert set(point.attributes) <= set(allowed)
            assert point.attributes["gen_ai.operation.name"] == "execute_tool"
            if kind == "histogram":
                # seconds, as the OpenTelemetry conventions use, with boundaries fit for them
                assert unit == "s"
                assert point.explicit_bounds[0] == 0.0001


def test_no_span_is_built_until_an_sdk_is_installed() -> None:
    """CIS-OBS-3, CIS-PERF-4: with the API but no SDK provider, invoke builds no span, no
    observation and reads no stopwatch clock (the pipeline gets the no-op stopwatch); once a
    provider is installed, the same process records."""
    script = """
import time
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from invocation_store import MemoryStore, ToolBoundary, ToolRegistry, ToolSpec, ToolCallEnvelope
from invocation_store import EvidenceStatus, Projection
from invocation_store.boundary import _telemetry
found = Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="x", scope="s")
store = MemoryStore()
spec = ToolSpec(name="t", executor=lambda a: "{}", projector=lambda r, a: found)
boundary = ToolBoundary(store, ToolRegistry([spec]))
context = boundary.open_run(
    "r", deadline_ms=store.now_ms() + 9000, ttl_ms=9000, tool_call_budget=3, byte_budget=999
)
def call(tcid):
    return ToolCallEnvelope(run_id="r", tool_call_id=tcid, tool_name="t", arguments="{}")
assert _telemetry._otel() is not None and _telemetry.active_otel() is None
built = []
class Counting(_telemetry._Observation):
    def __init__(self, *args, **kwargs):
        built.append(1)
        super().__init__(*args, **kwargs)
_telemetry._Observation = Counting
class Clock:
    reads = 0
    def perf_counter_ns(self):
        Clock.reads += 1
        return time.perf_counter_ns()
_telemetry.time = Clock()
assert boundary.invoke(context, call("c1")).ok
assert (built, Clock.reads) == ([], 0)
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
assert _telemetry.active_otel() is not None
assert boundary.invoke(context, call("c2")).ok
assert built == [1] and Clock.reads > 0
spans = exporter.get_finished_spans()
assert [span.attributes["gen_ai.tool.call.id"] for span in spans] == ["c2"], spans
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_no_module_makes_a_package_logger_the_filter_misses() -> None:
    """CIS-OBS-2: a logger made at run time (not at import: a simulation's, a worker's) gets the filter
    too. Every ``logging.getLogger("invocation_store...")`` in the package names a logger of
    ``_logs.PACKAGE_LOGGERS``; any other is made with ``package_logger``, which installs it."""
    package = Path(invocation_store.__file__).parent
    pattern = re.compile(r"""logging\.getLogger\(\s*["'](invocation_store[\w.]*)["']""")
    stray = sorted(
        f"{path.relative_to(package)}: {name}"
        for path in package.rglob("*.py")
        for name in pattern.findall(path.read_text(encoding="utf-8"))
        if name not in PACKAGE_LOGGERS
    )
    assert stray == [], "make these with invocation_store._logs.package_logger"


class _OldMeter:
    """A meter of an OpenTelemetry API older than the bucket advisory: it takes name, unit, description."""

    def __init__(self) -> None:
        self.made: list[tuple[str, str, str]] = []

    def create_histogram(self, name: str, unit: str = "", description: str = "") -> str:
        self.made.append((name, unit, description))
        return name


def test_an_older_metrics_api_still_gets_seconds() -> None:
    """CIS-OBS-3: where the meter refuses the bucket advisory, the histogram is made again with the
    same name, unit (seconds) and description, without it."""
    meter = _OldMeter()
    assert _histogram(meter, "invocation_store.duration", "whole invoke") == "invocation_store.duration"
    assert meter.made == [("invocation_store.duration", "s", "whole invoke")]


class _SlowStore:
    """Delegates to ``inner``; each create takes 20 ms, and the first complete takes 40 ms and then
    fails (the boundary retries it), the second takes 40 ms and succeeds: 100 ms of store time."""

    def __init__(self, inner: Any, is_async: bool, create_fails: bool = False) -> None:
        self.inner = inner
        self.is_async = is_async
        self.create_fails = create_fails
        self.completes = 0

    def _slow(self, name: str, seconds: float, fail: bool) -> Any:
        method = getattr(self.inner, name)
        if self.is_async:

            async def slow_async(*args: Any) -> Any:
                await asyncio.sleep(seconds)
                if fail:
                    raise ConnectionError("lost")
                return await method(*args)

            return slow_async

        def slow(*args: Any) -> Any:
            time.sleep(seconds)
            if fail:
                raise ConnectionError("lost")
            return method(*args)

        return slow

    def __getattr__(self, name: str) -> Any:
        if name == "create":
            return self._slow(name, 0.02, fail=self.create_fails)
        if name == "complete":
            self.completes += 1
            return self._slow(name, 0.04, fail=self.completes == 1)
        return getattr(self.inner, name)


def _slow_lookup(arguments: Any) -> object:
    time.sleep(0.03)
    return lookup(arguments)


def _slow_project(raw: str, arguments: Any) -> Projection:
    time.sleep(0.03)
    return project(raw, arguments)


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_each_phase_counts_all_of_its_time(spans: Any, flavour: str) -> None:
    """CIS-OBS-3: the store phase sums the create, the failed complete and its retry (>= 100 ms of
    sleeps), execute the executor's 30 ms, project the projector's 30 ms; no time is lost to a
    phase of another name on any path (sync and async pipelines alike). A create that fails
    after 20 ms counts too."""
    tools = ToolRegistry([ToolSpec(name="lookup", executor=_slow_lookup, projector=_slow_project)])
    retry = CompletionRetry(budget_ms=5_000)
    if flavour == "sync":
        inner = MemoryStore()
        boundary = ToolBoundary(_SlowStore(inner, False), tools, completion_retry=retry)
        context = boundary.open_run(
            RUN, deadline_ms=inner.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=1 << 20
        )
        assert isinstance(context, RunContext)
        assert boundary.invoke(context, call("call_ok")).ok
    else:

        async def main() -> None:
            inner = AsyncMemoryStore()
            async_boundary = AsyncToolBoundary(
                _SlowStore(inner, True),
                tools,
                completion_retry=retry,
            )
            run = await async_boundary.open_run(
                RUN,
                deadline_ms=inner.now_ms() + 60_000,
                ttl_ms=60_000,
                tool_call_budget=5,
                byte_budget=1 << 20,
            )
            assert isinstance(run, RunContext)
            assert (await async_boundary.invoke(run, call("call_ok"))).ok

        asyncio.run(main())
    (span,) = [s for s in spans.get_finished_spans() if s.name == "execute_tool lookup"]
    attributes = dict(span.attributes)
    assert attributes["invocation_store.store.duration"] >= 0.1
    assert attributes["invocation_store.execute.duration"] >= 0.03
    assert attributes["invocation_store.project.duration"] >= 0.03

    async def failing_create() -> None:
        inner = AsyncMemoryStore()
        async_boundary = AsyncToolBoundary(_SlowStore(inner, True, create_fails=True), tools)
        run = await async_boundary.open_run(
            RUN, deadline_ms=inner.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=1 << 20
        )
        assert isinstance(run, RunContext)
        assert (await async_boundary.invoke(run, call("call_lost"))).code is ErrorCode.STORE_UNAVAILABLE

    if flavour == "sync":
        inner = MemoryStore()
        boundary = ToolBoundary(_SlowStore(inner, False, create_fails=True), tools)
        context = boundary.open_run(
            RUN, deadline_ms=inner.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=1 << 20
        )
        assert isinstance(context, RunContext)
        assert boundary.invoke(context, call("call_lost")).code is ErrorCode.STORE_UNAVAILABLE
    else:
        asyncio.run(failing_create())
    (lost,) = [
        s
        for s in spans.get_finished_spans()
        if s.attributes is not None and s.attributes.get("gen_ai.tool.call.id") == "call_lost"
    ]
    assert lost.attributes is not None
    assert lost.attributes["invocation_store.store.duration"] >= 0.02


def test_metric_points_carry_exactly_their_outcome() -> None:
    """CIS-OBS-4: a READY count has no code, an ERROR or REJECTED count has exactly its code; a call
    to a tool that is not registered is counted under "unregistered"; every duration is seconds
    (a sum no larger than 60 s per recorded call: nanoseconds would read 1e9 times larger)."""
    unregistered_before = _count("REJECTED", "unregistered")
    unauthorized_before = _count("REJECTED", "unregistered", "UNAUTHORIZED")
    boundary, context = sync_boundary()
    boundary.invoke(context, call("call_m1"))
    boundary.invoke(context, call("call_m2", tool_name="failing"))
    boundary.invoke(context, call("call_m3", tool_name="not_registered"))
    for point in _points("invocation_store.invocations"):
        attributes = point.attributes
        if attributes["invocation_store.status"] == "READY":
            assert "invocation_store.code" not in attributes
            assert "error.type" not in attributes
        else:
            assert attributes["invocation_store.code"] == attributes["error.type"]
            assert attributes["invocation_store.code"] in {code.value for code in ErrorCode}
    # The reader is the process's: count this test's own call (a delta), not what others left.
    # (Other tests' unregistered calls may carry other codes, e.g. INVALID_ARGUMENTS: not counted.)
    assert _count("REJECTED", "unregistered") == unregistered_before + 1
    assert _count("REJECTED", "unregistered", "UNAUTHORIZED") == unauthorized_before + 1
    for name in ("invocation_store.invoke.duration", "invocation_store.phase.duration"):
        points = _points(name)
        assert points
        for point in points:
            assert 0 < point.sum <= 60 * point.count, (name, point.sum, point.count)


def test_a_raised_invoke_records_no_exception_event(spans: Any) -> None:
    """CIS-OBS-3, CIS-ERR-2: the span of an invoke that raised carries no exception event (an event
    would hold the exception's text, e.g. a payload a caller put in it)."""
    boundary, context = sync_boundary()
    with pytest.raises(TypeError):
        boundary.invoke(context, {"tool_call_id": "secret-payload"})  # type: ignore[arg-type]
    (span,) = [s for s in spans.get_finished_spans() if s.name.startswith("execute_tool")]
    assert span.status.status_code is trace.StatusCode.ERROR
    assert list(span.events) == []


def test_a_failed_call_reports_no_agent_result_size(spans: Any) -> None:
    """CIS-OBS-3: agent_result_bytes belongs to a result the agent sees whole (READY); a failed call's
    span has none."""
    boundary, context = sync_boundary()
    assert boundary.invoke(context, call("call_f2", tool_name="failing")).code is ErrorCode.EXECUTION_FAILED
    (span,) = [s for s in spans.get_finished_spans() if s.name == "execute_tool failing"]
    assert "invocation_store.agent_result_bytes" not in dict(span.attributes)


@pytest.mark.parametrize(
    ("projection", "code", "evidence", "result_bytes"),
    [
        # An empty result is still a result: 0 bytes, not "unknown".
        (
            Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="", scope=""),
            None,
            "EVIDENCE_FOUND",
            0,
        ),
        # Over the agent-result limit: the agent gets the code; the span still reports the record's
        # evidence status (the kernel's ERROR), read from the record since the result has none.
        (
            Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="x" * 100, scope="s"),
            "RESULT_TOO_LARGE",
            "ERROR",
            None,
        ),
    ],
)
def test_evidence_and_result_size_attributes(
    spans: Any, projection: Projection, code: str | None, evidence: str, result_bytes: int | None
) -> None:
    """CIS-OBS-3: the span's evidence status and agent-result size at their edges."""
    store = MemoryStore()
    tools = ToolRegistry(
        [ToolSpec(name="edge", executor=lookup, projector=lambda raw, arguments: projection)]
    )
    boundary = ToolBoundary(store, tools, limits=Limits(agent_result_bytes=16))
    context = boundary.open_run(
        RUN, deadline_ms=store.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=1 << 20
    )
    assert isinstance(context, RunContext)
    result = boundary.invoke(context, call("call_edge", tool_name="edge"))
    assert (None if result.code is None else result.code.value) == code
    (span,) = [s for s in spans.get_finished_spans() if s.name == "execute_tool edge"]
    attributes = dict(span.attributes)
    assert attributes["invocation_store.evidence_status"] == evidence
    assert attributes.get("invocation_store.agent_result_bytes") == result_bytes


def test_spans_and_metrics_name_this_library_and_its_version(spans: Any) -> None:
    """CIS-OBS-3: the instrumentation scope of the spans and of the metrics is this library, with
    its installed version, so a collector can tell its telemetry from the harness's."""
    import importlib.metadata  # noqa: PLC0415

    version = importlib.metadata.version("canonical-invocation-store")
    _invoke_ok("sync")
    (span,) = [s for s in spans.get_finished_spans() if s.name == "execute_tool lookup"]
    assert (span.instrumentation_scope.name, span.instrumentation_scope.version) == (
        "invocation_store",
        version,
    )
    data = metric_reader().get_metrics_data()
    assert data is not None
    scopes = {
        (scope.scope.name, scope.scope.version)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        if any(metric.name.startswith("invocation_store.") for metric in scope.metrics)
    }
    assert scopes == {("invocation_store", version)}


def _documented_instruments() -> dict[str, tuple[str, str, str, tuple[str, ...]]]:
    """The table of docs/telemetry.md: name -> (kind, unit, description, attributes)."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "telemetry.md").read_text(encoding="utf-8")
    row = r"^\| `(invocation_store\.[^`]+)` \| (\w+) \| `([^`]+)` \| ([^|]+) \| ([^|]+) \|$"
    rows = re.findall(row, text, re.MULTILINE)
    return {
        name: (kind, unit, description.strip(), tuple(re.findall(r"`([^`]+)`", attributes)))
        for name, kind, unit, description, attributes in rows
    }


def test_the_documented_instruments_are_the_exported_ones() -> None:
    """CIS-OBS-4: every instrument the boundary exports has the name, unit and description that
    docs/telemetry.md lists (what an operator builds dashboards from), and the documented kinds
    and attributes are those of INSTRUMENTS."""
    documented = _documented_instruments()
    assert documented == {
        name: (kind, unit, documented.get(name, ("", "", "", ()))[2], allowed)
        for name, (kind, unit, allowed) in INSTRUMENTS.items()
    }
    _invoke_ok("sync")
    for name, (kind, unit, description, _attributes) in documented.items():
        (metric,) = _metrics(name)
        assert (metric.name, metric.unit, metric.description) == (name, unit, description)
        expected = "Sum" if kind == "counter" else "Histogram"
        assert type(metric.data).__name__ == expected


def test_an_interruption_during_a_create_is_raised_not_answered() -> None:
    """CIS-BND-7: a KeyboardInterrupt while the store creates is the caller's own interruption: it
    propagates (it is no store failure to answer STORE_UNAVAILABLE), and the create is held, its
    outcome unknown."""

    class Interrupted(MemoryStore):
        def create(self, request: Any, limits: Any) -> Any:
            raise KeyboardInterrupt

    store = Interrupted()
    boundary = ToolBoundary(store, registry())
    context = boundary.open_run(
        RUN, deadline_ms=store.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=1 << 20
    )
    assert isinstance(context, RunContext)
    with pytest.raises(KeyboardInterrupt):
        boundary.invoke(context, call("call_int"))
    assert boundary.pending_creates() == ((RUN, "call_int"),)
