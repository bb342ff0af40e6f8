"""Traces and metrics of the boundary, and the decorators that bind a call for logs (CIS-OBS-1..4).

Theory of operation
-------------------
:func:`observed_invoke` (and :func:`observed_ainvoke`, its asyncio twin) wraps the
invocation pipeline (:mod:`._async.pipeline`). It binds the call for the package's log
records (:mod:`invocation_store._logs`: every record names its ``run_id`` and
``tool_call_id``) and, only when an application installed an OpenTelemetry SDK,
opens the call's span and hands the pipeline a :class:`Stopwatch` that times its
phases. Without an SDK (or without ``opentelemetry-api`` at all) the pipeline gets
:data:`NO_WATCH`, whose methods do nothing: no span, no instrument, no clock read,
no copy of the result (CIS-PERF-4).

Traces and metrics follow the OpenTelemetry semantic conventions for generative AI,
version 1.37.0 (status Development), span ``execute_tool``: one span per invoke,
named ``execute_tool <tool>`` (kind INTERNAL), current while the call runs so that a
tool's own spans are its children, with ``gen_ai.operation.name`` ``execute_tool``,
``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.type`` (``function``:
the harness runs the tool the model asked for) and, on failure, ``error.type`` (the
call's code, or the exception's type name when ``invoke`` raised). Its attributes are
exactly :data:`SPAN_ATTRIBUTES`. Durations are in seconds, as the conventions use:
the phase attributes and the histograms of :data:`INSTRUMENTS`. The library uses the
API only (the ``otel`` extra installs ``opentelemetry-api``); the application
chooses the SDK, exporters and providers, and the library uses the global ones, as
OpenTelemetry asks of libraries.

Nothing here reads a payload: request text is measured (UTF-8 bytes), never
recorded; a tool name the registry does not know is not recorded (it is the model's
text, not the harness's); codes are the closed :class:`ErrorCode` set.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, ParamSpec, TypeVar

from .._logs import bind_call, unbind_call
from .._runners import type_name
from ..kernel import (
    PREFLIGHT_ORDER,
    CanonicalRecord,
    InvocationStatus,
    RunContext,
    ToolCallEnvelope,
    utf8_len,
)
from ..kernel import is_safe_id as _is_safe_id
from ._registry import ToolRegistry
from ._result import BoundaryResult

__all__ = [
    "GEN_AI_SEMCONV_VERSION",
    "INSTRUMENTS",
    "NO_WATCH",
    "SPAN_ATTRIBUTES",
    "Stopwatch",
    "active_otel",
    "observed_ainvoke",
    "observed_invoke",
    "observed_run",
]

_INSTRUMENTATION = "invocation_store"

#: The version of the OpenTelemetry semantic conventions the span and metrics follow.
GEN_AI_SEMCONV_VERSION: Final = "1.37.0"

#: ``gen_ai.tool.type`` of every call: the harness (the client) runs the tool the model chose.
_TOOL_TYPE: Final = "function"

#: Every span attribute the boundary may set, with its meaning. Stable: renaming one
#: is a breaking change. Values are ids that passed the safe-id rule, registered tool
#: names, codes and statuses from closed sets, and numbers: never payload text.
SPAN_ATTRIBUTES: Final[dict[str, str]] = {
    "gen_ai.operation.name": 'always "execute_tool" (OpenTelemetry GenAI semantic conventions)',
    "gen_ai.tool.name": "the registered tool's name (absent for a name the registry does not know)",
    "gen_ai.tool.call.id": "the tool_call_id, only when it is a safe id",
    "gen_ai.tool.type": 'always "function": the harness runs the tool the model asked for',
    "error.type": (
        "on failure: the call's ErrorCode (e.g. EXECUTION_FAILED), or the exception's type name "
        "when invoke raised (a caller's error or cancellation)"
    ),
    "invocation_store.run_id": "the run id, only when it is a safe id",
    "invocation_store.status": "READY, ERROR, or REJECTED (refused by preflight: no record written)",
    "invocation_store.code": "the ErrorCode of a failed call (absent on success)",
    "invocation_store.evidence_status": "EVIDENCE_FOUND, NO_EVIDENCE or ERROR (absent when no record)",
    "invocation_store.request_bytes": "UTF-8 bytes of the arguments text (absent when not text)",
    "invocation_store.raw_bytes": "UTF-8 bytes of the raw response stored (absent when none)",
    "invocation_store.agent_result_bytes": "UTF-8 bytes of the agent result content and scope",
    "invocation_store.execute.duration": "seconds in the executor (float)",
    "invocation_store.project.duration": "seconds in the projector (float)",
    "invocation_store.store.duration": "seconds in the store's create and complete (float)",
}

#: The metric instruments: name -> (kind, unit, attributes). Durations in seconds.
INSTRUMENTS: Final[dict[str, tuple[str, str, tuple[str, ...]]]] = {
    "invocation_store.invocations": (
        "counter",
        "{invocation}",
        (
            "gen_ai.operation.name",
            "gen_ai.tool.name",
            "invocation_store.status",
            "invocation_store.code",
            "error.type",
        ),
    ),
    "invocation_store.invoke.duration": (
        "histogram",
        "s",
        ("gen_ai.operation.name", "gen_ai.tool.name", "invocation_store.status", "error.type"),
    ),
    "invocation_store.phase.duration": (
        "histogram",
        "s",
        ("gen_ai.operation.name", "gen_ai.tool.name", "invocation_store.phase"),
    ),
}

#: Histogram bucket boundaries (seconds): an in-memory call takes tens of microseconds,
#: a remote tool seconds; the SDK's default boundaries suit milliseconds, not seconds.
_BUCKETS_S: Final = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
)

PHASES: Final = ("execute", "project", "store")
_REJECTED: Final = frozenset(PREFLIGHT_ORDER)
_OPERATION: Final = {"gen_ai.operation.name": "execute_tool"}

T = TypeVar("T")
P = ParamSpec("P")


# ---------------------------------------------------------------------------
# The phase stopwatch


class Stopwatch:
    """Times the phases of one invoke; this base class (:data:`NO_WATCH`) does nothing.

    The pipeline calls :meth:`start` before a phase and :meth:`stop` after it, and
    :meth:`completed` with the terminal record it reports (for its sizes).
    """

    __slots__ = ()

    def start(self) -> None:
        """A phase begins."""

    def stop(self, phase: str) -> None:
        """The phase begun at the last :meth:`start` ends: its time counts to ``phase``."""

    def completed(self, record: CanonicalRecord) -> None:
        """The terminal record the call reports."""


#: The stopwatch of an invoke nobody observes: every method is a no-op.
NO_WATCH: Final = Stopwatch()


# ---------------------------------------------------------------------------
# OpenTelemetry (API only, optional)


class _Otel:
    """The tracer, the instruments and the API's types, built once (:func:`_otel`)."""

    def __init__(self, trace: Any, metrics: Any, version: str) -> None:
        self.tracer = trace.get_tracer(_INSTRUMENTATION, version)
        meter = metrics.get_meter(_INSTRUMENTATION, version)
        self.invocations = meter.create_counter(
            "invocation_store.invocations", unit="{invocation}", description="tool calls by outcome"
        )
        self.duration = _histogram(
            meter, "invocation_store.invoke.duration", "whole invoke, envelope to result"
        )
        self.phase_duration = _histogram(
            meter, "invocation_store.phase.duration", "executor, projector and store time"
        )
        self.status_error = trace.StatusCode.ERROR
        self.kind_internal = trace.SpanKind.INTERNAL
        self.use_span = trace.use_span
        self.configured = _provider_check(trace, metrics)


def _histogram(meter: Any, name: str, description: str) -> Any:
    try:
        return meter.create_histogram(
            name, unit="s", description=description, explicit_bucket_boundaries_advisory=_BUCKETS_S
        )
    except TypeError:  # an API older than the advisory parameter
        return meter.create_histogram(name, unit="s", description=description)


def _provider_check(trace: Any, metrics: Any) -> Callable[[], bool]:
    """A check, cheap enough for every invoke, that an application installed an SDK provider.

    Until one is installed the API hands out proxies whose spans and instruments
    record nothing; building them would cost each invoke for no output. The public
    getters are called once here (they load a provider named by an environment
    variable); afterwards the check reads the API's globals, which it sets when a
    provider is installed. An API without those globals gets the public getters.
    """
    trace.get_tracer_provider()
    metrics.get_meter_provider()
    from opentelemetry.metrics import _internal  # noqa: PLC0415 - optional extra

    missing = object()
    if (
        getattr(trace, "_TRACER_PROVIDER", missing) is missing
        or getattr(_internal, "_METER_PROVIDER", missing) is missing
    ):  # pragma: no cover - an API that moved its globals
        proxies = (
            trace.ProxyTracerProvider,
            getattr(_internal, "_ProxyMeterProvider", trace.ProxyTracerProvider),
        )

        def public() -> bool:
            return not (
                isinstance(trace.get_tracer_provider(), proxies)
                and isinstance(metrics.get_meter_provider(), proxies)
            )

        return public

    def installed() -> bool:
        return trace._TRACER_PROVIDER is not None or _internal._METER_PROVIDER is not None

    return installed


def _version() -> str:
    try:
        return importlib.metadata.version("canonical-invocation-store")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source tree not installed
        return "0+unknown"


@functools.cache
def _otel() -> _Otel | None:
    """The tracer and instruments, or None without ``opentelemetry-api`` (imported once)."""
    try:
        from opentelemetry import metrics, trace  # noqa: PLC0415 - optional extra, imported on first use
    except ImportError:
        return None
    return _Otel(trace, metrics, _version())


def active_otel() -> _Otel | None:
    """:func:`_otel` when an SDK provider is installed, else None: nothing to record."""
    otel = _otel()
    return otel if otel is not None and otel.configured() else None


# ---------------------------------------------------------------------------
# One observed invoke


def _exact(value: object) -> str | None:
    """An exact ``str`` copy of real text (a subclass is copied; anything else is None)."""
    return str.__str__(value) if issubclass(type(value), str) else None


def _safe(value: object) -> str | None:
    text = _exact(value)
    return text if text is not None and _is_safe_id(text) else None


def _bytes(text: object) -> int | None:
    """UTF-8 length of exact text; None for non-text or text with a lone surrogate."""
    return utf8_len(text) if type(text) is str else None


class _Observation(Stopwatch):
    """The span, the phase times and the metrics of one invoke an SDK records."""

    __slots__ = (
        "context",
        "durations",
        "envelope",
        "otel",
        "phase_ns",
        "record",
        "span",
        "started_ns",
        "tool",
    )

    def __init__(self, otel: _Otel, registry: ToolRegistry, context: object, envelope: object) -> None:
        self.otel = otel
        self.context = context
        self.envelope = envelope
        registered = (
            registry.get(_exact(envelope.tool_name)) if isinstance(envelope, ToolCallEnvelope) else None
        )
        self.tool = None if registered is None else registered.name
        self.durations: dict[str, int] = {}
        self.record: CanonicalRecord | None = None
        self.phase_ns = 0
        self.started_ns = time.perf_counter_ns()
        self.span = otel.tracer.start_span(
            f"execute_tool {self.tool or 'unregistered'}", kind=otel.kind_internal
        )

    def start(self) -> None:
        self.phase_ns = time.perf_counter_ns()

    def stop(self, phase: str) -> None:
        self.durations[phase] = self.durations.get(phase, 0) + time.perf_counter_ns() - self.phase_ns

    def completed(self, record: CanonicalRecord) -> None:
        self.record = record

    def current(self) -> Any:
        """The context manager that makes the span current while the pipeline runs."""
        return self.otel.use_span(
            self.span, end_on_exit=False, record_exception=False, set_status_on_exception=False
        )

    def raised(self, exc: BaseException) -> None:
        """``invoke`` raised (a caller's programming error or cancellation): ERROR, the type name only."""
        self.span.set_attributes({**self._ids(), "error.type": type_name(exc)})
        self.span.set_status(self.otel.status_error)
        self.span.end()

    def _ids(self) -> dict[str, Any]:
        ids: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.type": _TOOL_TYPE}
        if self.tool is not None:
            ids["gen_ai.tool.name"] = self.tool
        call_id = _safe(self.envelope.tool_call_id) if isinstance(self.envelope, ToolCallEnvelope) else None
        if call_id is not None:
            ids["gen_ai.tool.call.id"] = call_id
        run_id = _safe(self.context.run_id) if isinstance(self.context, RunContext) else None
        if run_id is not None:
            ids["invocation_store.run_id"] = run_id
        return ids

    def finish(self, result: BoundaryResult) -> None:
        """Set the span's attributes and status, end it, and record the metrics."""
        elapsed_s = (time.perf_counter_ns() - self.started_ns) / 1e9
        attributes = self._ids()
        status = _status(result)
        code = None if result.code is None else result.code.value
        optional: dict[str, Any] = {
            "invocation_store.status": status,
            "invocation_store.code": code,
            "error.type": code,
            "invocation_store.evidence_status": self._evidence(result),
            "invocation_store.request_bytes": (
                _bytes(self.envelope.arguments) if isinstance(self.envelope, ToolCallEnvelope) else None
            ),
            "invocation_store.raw_bytes": None if self.record is None else _bytes(self.record.raw_response),
            "invocation_store.agent_result_bytes": (
                (_bytes(result.content) or 0) + (_bytes(result.scope) or 0) if result.ok else None
            ),
        }
        attributes.update({key: value for key, value in optional.items() if value is not None})
        for phase in PHASES:
            if phase in self.durations:
                attributes[f"invocation_store.{phase}.duration"] = self.durations[phase] / 1e9
        tool = {**_OPERATION, "gen_ai.tool.name": self.tool or "unregistered"}
        outcome = {**tool, "invocation_store.status": status}
        if code is not None:
            outcome["error.type"] = code
        self.otel.invocations.add(1, {**outcome, **({} if code is None else {"invocation_store.code": code})})
        self.otel.duration.record(elapsed_s, outcome)
        for phase in PHASES:
            if phase in self.durations:
                self.otel.phase_duration.record(
                    self.durations[phase] / 1e9, {**tool, "invocation_store.phase": phase}
                )
        self.span.set_attributes(attributes)
        if code is not None:
            self.span.set_status(self.otel.status_error, code)
        self.span.end()

    def _evidence(self, result: BoundaryResult) -> str | None:
        if result.evidence_status is not None:
            return result.evidence_status.value
        record = self.record
        if record is not None and record.evidence_status is not None:
            return record.evidence_status.value
        return None


def _status(result: BoundaryResult) -> str:
    if result.ok:
        return InvocationStatus.READY.value
    return "REJECTED" if result.code in _REJECTED else InvocationStatus.ERROR.value


# ---------------------------------------------------------------------------
# The decorators

#: The invocation pipeline: (boundary state, store, context, envelope, stopwatch) -> result.
Pipeline = Callable[[Any, Any, RunContext, ToolCallEnvelope, Stopwatch], BoundaryResult]
AsyncPipeline = Callable[[Any, Any, RunContext, ToolCallEnvelope, Stopwatch], Awaitable[BoundaryResult]]
Invoke = Callable[[Any, Any, RunContext, ToolCallEnvelope], BoundaryResult]
AsyncInvoke = Callable[[Any, Any, RunContext, ToolCallEnvelope], Awaitable[BoundaryResult]]


def observed_invoke(fn: Pipeline) -> Invoke:
    """Wrap the sync pipeline: the call bound for logs; with an SDK, its span, phase times and metrics."""

    @functools.wraps(fn)
    def invoke(core: Any, store: Any, context: RunContext, envelope: ToolCallEnvelope) -> BoundaryResult:
        token = bind_call(context, envelope)
        try:
            otel = active_otel()
            if otel is None:
                return fn(core, store, context, envelope, NO_WATCH)
            observation = _Observation(otel, core.registry, context, envelope)
            try:
                with observation.current():
                    result = fn(core, store, context, envelope, observation)
            except BaseException as exc:
                observation.raised(exc)
                raise
            observation.finish(result)
            return result
        finally:
            unbind_call(token)

    return invoke


def observed_ainvoke(fn: AsyncPipeline) -> AsyncInvoke:
    """Wrap the async pipeline, as :func:`observed_invoke` (the binding is the awaiting task's)."""

    @functools.wraps(fn)
    async def invoke(
        core: Any, store: Any, context: RunContext, envelope: ToolCallEnvelope
    ) -> BoundaryResult:
        token = bind_call(context, envelope)
        try:
            otel = active_otel()
            if otel is None:
                return await fn(core, store, context, envelope, NO_WATCH)
            observation = _Observation(otel, core.registry, context, envelope)
            try:
                with observation.current():
                    result = await fn(core, store, context, envelope, observation)
            except BaseException as exc:
                observation.raised(exc)
                raise
            observation.finish(result)
            return result
        finally:
            unbind_call(token)

    return invoke


def observed_run(fn: Callable[P, T]) -> Callable[P, T]:
    """Wrap a run-level method (``open_run``, ``close_run``, ...): its log records carry the run id.

    The run is the method's first argument after ``self``: a :class:`RunContext`, or the
    run id itself. Works for sync methods and coroutine functions alike.
    """
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def run_async(*args: P.args, **kwargs: P.kwargs) -> Any:
            token = bind_call(args[1] if len(args) > 1 else None)
            try:
                return await fn(*args, **kwargs)
            finally:
                unbind_call(token)

        return run_async  # type: ignore[return-value]

    @functools.wraps(fn)
    def run_sync(*args: P.args, **kwargs: P.kwargs) -> T:
        token = bind_call(args[1] if len(args) > 1 else None)
        try:
            return fn(*args, **kwargs)
        finally:
            unbind_call(token)

    return run_sync
