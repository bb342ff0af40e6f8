"""Logs, traces and metrics of the boundary (CIS-OBS-1..4).

Theory of operation
-------------------
Each :meth:`ToolBoundary.invoke` (and the async twin) runs inside one *call
scope*, opened by the :func:`observed_invoke` decorator: a context variable holds
the call's safe identity (run id and tool_call_id, each only when it is a safe id,
CIS-ID-3) and its phase stopwatch. Everything observable is derived from that
scope, so the boundary's own code only marks where phases begin and end:

- **Logs** (CIS-OBS-1, CIS-OBS-2). The package logger ``invocation_store`` has a
  :class:`logging.NullHandler` (set in the package ``__init__``), so an application
  without logging configured prints nothing. The boundary logs through
  :class:`CallLogger`, which puts ``run_id`` and ``tool_call_id`` on every record
  as ``extra`` attributes (None when a record is about no run or no call, or when
  the id is not safe); the Redis store's logger gets them from
  :class:`CallIdsFilter`. Never payloads: messages carry codes, tool names and
  exception type names only (CIS-ERR-2).
- **Traces and metrics** (CIS-OBS-3, CIS-OBS-4), through the OpenTelemetry *API*
  only (the ``otel`` extra installs ``opentelemetry-api``; without it, nothing is
  emitted and nothing is imported). The application chooses the SDK, exporters
  and providers; the library uses the global ones, as OpenTelemetry asks of
  libraries. One span per invoke, ``execute_tool <tool>`` (kind INTERNAL), made
  current while the call runs so that a tool's own spans are its children; its
  attributes are exactly :data:`SPAN_ATTRIBUTES`. Instruments:
  ``invocation_store.invocations`` (counter), ``invocation_store.invoke.duration``
  and ``invocation_store.phase.duration`` (histograms, milliseconds).

Nothing here ever reads a payload: request text is measured (UTF-8 bytes), never
recorded; a tool name the registry does not know is not recorded (it is the
model's text, not the harness's); codes are the closed :class:`ErrorCode` set.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import TYPE_CHECKING, Any, Final, ParamSpec, TypeVar

from attrs import define, evolve, field

from .kernel import (
    PREFLIGHT_ORDER,
    CanonicalRecord,
    InvocationStatus,
    RunContext,
    ToolCallEnvelope,
    is_safe_id,
    utf8_len,
)

if TYPE_CHECKING:
    from .boundary import BoundaryResult
    from .boundary._core import Core as _Core

__all__ = [
    "INSTRUMENTS",
    "SPAN_ATTRIBUTES",
    "CallIdsFilter",
    "CallLogger",
    "observed_ainvoke",
    "observed_invoke",
    "observed_run",
    "phase",
    "record_completed",
]

_INSTRUMENTATION = "invocation_store"

#: Every span attribute the boundary may set, with its meaning. Stable: renaming one
#: is a breaking change. Values are ids that passed the safe-id rule, registered tool
#: names, codes and statuses from closed sets, and numbers: never payload text.
SPAN_ATTRIBUTES: Final[dict[str, str]] = {
    "gen_ai.operation.name": 'always "execute_tool" (OpenTelemetry GenAI semantic conventions)',
    "gen_ai.tool.name": "the registered tool's name (absent for a name the registry does not know)",
    "gen_ai.tool.call.id": "the tool_call_id, only when it is a safe id",
    "invocation_store.run_id": "the run id, only when it is a safe id",
    "invocation_store.status": "READY, ERROR, or REJECTED (refused by preflight: no record written)",
    "invocation_store.code": "the ErrorCode of a failed call (absent on success)",
    "invocation_store.evidence_status": "EVIDENCE_FOUND, NO_EVIDENCE or ERROR (absent when no record)",
    "invocation_store.request_bytes": "UTF-8 bytes of the arguments text (absent when not text)",
    "invocation_store.raw_bytes": "UTF-8 bytes of the raw response stored (absent when none)",
    "invocation_store.agent_result_bytes": "UTF-8 bytes of the agent result content and scope",
    "invocation_store.execute_ms": "milliseconds in the executor (float)",
    "invocation_store.project_ms": "milliseconds in the projector (float)",
    "invocation_store.store_ms": "milliseconds in store calls (float)",
    "error.type": "the exception's type name when invoke raised (a caller's error or cancellation)",
}

#: The metric instruments: name -> (kind, unit, attributes).
INSTRUMENTS: Final[dict[str, tuple[str, str, tuple[str, ...]]]] = {
    "invocation_store.invocations": (
        "counter",
        "{invocation}",
        ("gen_ai.tool.name", "invocation_store.status", "invocation_store.code"),
    ),
    "invocation_store.invoke.duration": (
        "histogram",
        "ms",
        ("gen_ai.tool.name", "invocation_store.status"),
    ),
    "invocation_store.phase.duration": (
        "histogram",
        "ms",
        ("gen_ai.tool.name", "invocation_store.phase"),
    ),
}

_PHASES: Final = ("execute", "project", "store")
_REJECTED: Final = frozenset(PREFLIGHT_ORDER)

T = TypeVar("T")
P = ParamSpec("P")


# ---------------------------------------------------------------------------
# The call scope


@define
class _Scope:
    """One invoke (or one run-level operation) in progress: safe ids and phase times."""

    run_id: str | None
    tool_call_id: str | None = None
    tool_name: str | None = None  # registered names only
    durations_ns: dict[str, int] = field(factory=dict)
    record: CanonicalRecord | None = None


_SCOPE: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar("invocation_store_scope", default=None)


def _exact(value: object) -> str | None:
    """An exact ``str`` copy of real text (a subclass is copied; an impostor is None)."""
    return str.__str__(value) if issubclass(type(value), str) else None


def _safe(value: object) -> str | None:
    text = _exact(value)
    return text if text is not None and is_safe_id(text) else None


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Time the enclosed block as phase ``name`` (``execute``, ``project``, ``store``).

    Outside an invoke it does nothing; nested or repeated phases add up.
    """
    scope = _SCOPE.get()
    if scope is None:
        yield
        return
    start = time.perf_counter_ns()
    try:
        yield
    finally:
        scope.durations_ns[name] = scope.durations_ns.get(name, 0) + time.perf_counter_ns() - start


def record_completed(record: CanonicalRecord) -> None:
    """Note the terminal record the boundary is about to report (for its sizes)."""
    scope = _SCOPE.get()
    if scope is not None:
        scope.record = record


# ---------------------------------------------------------------------------
# Logs


class CallLogger(logging.LoggerAdapter[logging.Logger]):
    """The boundary's logger: every record carries ``run_id`` and ``tool_call_id`` (CIS-OBS-2).

    Both come from the current call scope and are safe ids or None; an ``extra``
    given at a call site is merged over them.
    """

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__(logger, {})

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        scope = _SCOPE.get()
        ids = {
            "run_id": None if scope is None else scope.run_id,
            "tool_call_id": None if scope is None else scope.tool_call_id,
        }
        kwargs["extra"] = {**ids, **(kwargs.get("extra") or {})}
        return msg, kwargs


class CallIdsFilter(logging.Filter):
    """Adds ``run_id`` and ``tool_call_id`` (from the call scope) to records that lack them.

    Installed on the package's other loggers (the Redis store's), whose records are
    made inside a boundary call, so that they name the call too (CIS-OBS-2).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        scope = _SCOPE.get()
        if not hasattr(record, "run_id"):
            record.run_id = None if scope is None else scope.run_id
        if not hasattr(record, "tool_call_id"):
            record.tool_call_id = None if scope is None else scope.tool_call_id
        return True


#: The package's loggers other than the boundary's (which logs through CallLogger).
_STORE_LOGGERS: Final = ("invocation_store.redis",)
for _name in _STORE_LOGGERS:
    logging.getLogger(_name).addFilter(CallIdsFilter())


# ---------------------------------------------------------------------------
# OpenTelemetry (API only, optional)


@define
class _Otel:
    tracer: Any
    invocations: Any
    duration: Any
    phase_duration: Any
    status_error: Any
    kind_internal: Any
    use_span: Callable[..., Any]
    #: Whether an SDK provider is installed: the API's global getters and its proxy types.
    tracer_provider: Callable[[], Any]
    meter_provider: Callable[[], Any]
    proxies: tuple[type, ...]

    def configured(self) -> bool:
        """True once an application installed a tracer or meter provider (an SDK).

        Until then the API hands out proxies whose spans and instruments record nothing;
        building them for every call would cost each invoke for no output.
        """
        return not (
            isinstance(self.tracer_provider(), self.proxies)
            and isinstance(self.meter_provider(), self.proxies)
        )


@functools.cache
def _otel() -> _Otel | None:
    """The tracer and instruments, or None without ``opentelemetry-api`` (imported once)."""
    try:
        from opentelemetry import metrics, trace  # noqa: PLC0415 - optional extra, imported on first use
    except ImportError:
        return None
    from . import __version__  # noqa: PLC0415 - the package is initialised by the time a call runs

    tracer = trace.get_tracer(_INSTRUMENTATION, __version__)
    meter = metrics.get_meter(_INSTRUMENTATION, __version__)
    return _Otel(
        tracer=tracer,
        invocations=meter.create_counter(
            "invocation_store.invocations", unit="{invocation}", description="tool calls by outcome"
        ),
        duration=meter.create_histogram(
            "invocation_store.invoke.duration", unit="ms", description="whole invoke, envelope to result"
        ),
        phase_duration=meter.create_histogram(
            "invocation_store.phase.duration", unit="ms", description="executor, projector and store time"
        ),
        status_error=trace.StatusCode.ERROR,
        kind_internal=trace.SpanKind.INTERNAL,
        use_span=trace.use_span,
        tracer_provider=trace.get_tracer_provider,
        meter_provider=metrics.get_meter_provider,
        proxies=_proxy_types(trace),
    )


def _proxy_types(trace: Any) -> tuple[type, ...]:
    """The API's placeholder providers (the meter one is private: found by name, if present)."""
    from opentelemetry.metrics import _internal  # noqa: PLC0415 - optional extra

    meter_proxy = getattr(_internal, "_ProxyMeterProvider", None)
    return (trace.ProxyTracerProvider, *((meter_proxy,) if isinstance(meter_proxy, type) else ()))


def active_otel() -> _Otel | None:
    """:func:`_otel` when an SDK provider is installed, else None: nothing to record."""
    otel = _otel()
    return otel if otel is not None and otel.configured() else None


def _status(result: BoundaryResult) -> str:
    if result.ok:
        return InvocationStatus.READY.value
    return "REJECTED" if result.code in _REJECTED else InvocationStatus.ERROR.value


def _attributes(scope: _Scope, envelope: ToolCallEnvelope, result: BoundaryResult) -> dict[str, Any]:
    attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool"}
    optional = {
        "gen_ai.tool.name": scope.tool_name,
        "gen_ai.tool.call.id": scope.tool_call_id,
        "invocation_store.run_id": scope.run_id,
        "invocation_store.status": _status(result),
        "invocation_store.code": None if result.code is None else result.code.value,
        "invocation_store.evidence_status": _evidence(scope, result),
        "invocation_store.request_bytes": _bytes(envelope.arguments),
        "invocation_store.raw_bytes": None if scope.record is None else _bytes(scope.record.raw_response),
        "invocation_store.agent_result_bytes": (
            (_bytes(result.content) or 0) + (_bytes(result.scope) or 0) if result.ok else None
        ),
    }
    attributes.update({key: value for key, value in optional.items() if value is not None})
    for name in _PHASES:
        if name in scope.durations_ns:
            attributes[f"invocation_store.{name}_ms"] = scope.durations_ns[name] / 1e6
    return attributes


def _evidence(scope: _Scope, result: BoundaryResult) -> str | None:
    if result.evidence_status is not None:
        return result.evidence_status.value
    record = scope.record
    if record is not None and record.evidence_status is not None:
        return record.evidence_status.value
    return None


def _bytes(text: object) -> int | None:
    """UTF-8 length of exact text; None for non-text or text with a lone surrogate."""
    return utf8_len(text) if type(text) is str else None


# ---------------------------------------------------------------------------
# The decorators on the boundary's methods


def _open_scope(boundary: _Core, context: object, envelope: object) -> _Scope:
    run_id = _safe(context.run_id) if isinstance(context, RunContext) else None
    if not isinstance(envelope, ToolCallEnvelope):
        return _Scope(run_id=run_id)
    name = envelope.tool_name
    registered = boundary.registry.get(_exact(name))
    return _Scope(
        run_id=run_id,
        tool_call_id=_safe(envelope.tool_call_id),
        tool_name=None if registered is None else registered.name,
    )


def _identified(result: BoundaryResult, envelope: object, scope: _Scope) -> BoundaryResult:
    """``result`` with the registered tool name and the envelope's original id (CIS-ECO-3)."""
    if not isinstance(envelope, ToolCallEnvelope):
        return result
    # attrs.evolve keeps every other field, including any a later version adds.
    return evolve(result, tool_name=scope.tool_name, envelope_tool_call_id=_exact(envelope.tool_call_id))


class _Observation:
    """Span and timing of one invoke, around the boundary's own code."""

    def __init__(self, boundary: _Core, context: object, envelope: object) -> None:
        self.envelope = envelope
        self.scope = _open_scope(boundary, context, envelope)
        self.otel = active_otel()
        self.started_ns = time.perf_counter_ns()
        self.span: Any = None
        self.span_context: Any = None
        if self.otel is not None:
            label = self.scope.tool_name or "unregistered"
            self.span = self.otel.tracer.start_span(f"execute_tool {label}", kind=self.otel.kind_internal)
            self.span_context = self.otel.use_span(self.span, end_on_exit=False, record_exception=False)

    def __enter__(self) -> _Observation:
        self.token = _SCOPE.set(self.scope)
        if self.span_context is not None:
            self.span_context.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.span_context is not None:
            self.span_context.__exit__(None, None, None)
        _SCOPE.reset(self.token)
        if exc_info[0] is not None and self.span is not None:
            # A programming error or the caller's own interruption: the type only.
            self.span.set_attribute("error.type", _type_name(exc_info[1]))
            self.span.set_status(self.otel.status_error if self.otel is not None else None)
            self.span.end()

    def finish(self, result: BoundaryResult) -> BoundaryResult:
        elapsed_ms = (time.perf_counter_ns() - self.started_ns) / 1e6
        result = _identified(result, self.envelope, self.scope)
        if self.otel is None or not isinstance(self.envelope, ToolCallEnvelope):
            return result
        attributes = _attributes(self.scope, self.envelope, result)
        tool = {"gen_ai.tool.name": attributes.get("gen_ai.tool.name", "unregistered")}
        status = attributes["invocation_store.status"]
        counted = {**tool, "invocation_store.status": status}
        if result.code is not None:
            counted["invocation_store.code"] = result.code.value
        self.otel.invocations.add(1, counted)
        self.otel.duration.record(elapsed_ms, {**tool, "invocation_store.status": status})
        for name in _PHASES:
            if name in self.scope.durations_ns:
                self.otel.phase_duration.record(
                    self.scope.durations_ns[name] / 1e6, {**tool, "invocation_store.phase": name}
                )
        self.span.set_attributes(attributes)
        if not result.ok:
            self.span.set_status(self.otel.status_error, attributes.get("invocation_store.code"))
        self.span.end()
        return result


def _type_name(exc: object) -> str:
    name = type(exc).__name__
    return name if name.isascii() and name.isidentifier() and len(name) <= 64 else "UnprintableType"


def observed_invoke(
    fn: Callable[[Any, RunContext, ToolCallEnvelope], BoundaryResult],
) -> Callable[[Any, RunContext, ToolCallEnvelope], BoundaryResult]:
    """Wrap the sync ``invoke``: call scope, logs' ids, span, metrics, result identity."""

    @functools.wraps(fn)
    def invoke(self: Any, context: RunContext, envelope: ToolCallEnvelope) -> BoundaryResult:
        with _Observation(self, context, envelope) as observation:
            result = fn(self, context, envelope)
        return observation.finish(result)

    return invoke


def observed_ainvoke(
    fn: Callable[[Any, RunContext, ToolCallEnvelope], Awaitable[BoundaryResult]],
) -> Callable[[Any, RunContext, ToolCallEnvelope], Awaitable[BoundaryResult]]:
    """Wrap the async ``invoke``, as :func:`observed_invoke` (the scope is the awaiting task's)."""

    @functools.wraps(fn)
    async def invoke(self: Any, context: RunContext, envelope: ToolCallEnvelope) -> BoundaryResult:
        with _Observation(self, context, envelope) as observation:
            result = await fn(self, context, envelope)
        return observation.finish(result)

    return invoke


def observed_run(fn: Callable[P, T]) -> Callable[P, T]:
    """Wrap a run-level method (``open_run``, ``close_run``, ...): its logs carry the run id.

    The run is the first argument: a :class:`RunContext`, or the run id itself.
    Works for sync methods and coroutine functions alike.
    """
    import inspect  # noqa: PLC0415 - only at class definition

    def scope_of(args: Any) -> _Scope:
        run = args[1] if len(args) > 1 else None
        return _Scope(run_id=_safe(run.run_id if isinstance(run, RunContext) else run))

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def run_async(*args: P.args, **kwargs: P.kwargs) -> Any:
            token = _SCOPE.set(scope_of(args))
            try:
                return await fn(*args, **kwargs)
            finally:
                _SCOPE.reset(token)

        return run_async  # type: ignore[return-value]

    @functools.wraps(fn)
    def run_sync(*args: P.args, **kwargs: P.kwargs) -> T:
        token = _SCOPE.set(scope_of(args))
        try:
            return fn(*args, **kwargs)
        finally:
            _SCOPE.reset(token)

    return run_sync
