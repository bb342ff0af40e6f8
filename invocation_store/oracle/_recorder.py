"""Recording traces from our own boundary and stores (CIS-ORC-1).

:class:`RecordingBoundary` has the face of a
:class:`~invocation_store.boundary.ToolBoundary` and builds one around wrapped
parts, so that neither the boundary nor the store needs an option for it:

- the **store** is wrapped (:class:`_RecordingStore`): ``create`` and ``complete``
  write the ``submit`` and the final ``execute``/``project`` line while holding the
  recorder's lock, so the trace has the store's order even with several threads;
- every **executor and projector** of the registry is wrapped, to see what the tool
  really did (raw text or failure kind; projection or failure);
- the **token factory** is wrapped, to see the invocation token drawn;
- ``invoke`` itself is wrapped, to see the envelope and the policy going in and the
  :class:`~invocation_store.boundary.BoundaryResult` coming out (the ``result`` line).

The observed record of each step is read back through the (wrapped) store's own
``get`` and ``ttl_remaining_ms``, so a store that misbehaves on reads shows it in the
trace. Every line is stamped with the store's clock (never moving backwards in the
trace). Times are integer ms; the trace is ASCII JSON (non-ASCII text escaped).
"""

from __future__ import annotations

import contextvars
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TextIO

from attrs import evolve

from .. import codec
from ..adapters import ForwardingStore, InvocationStore
from ..boundary import BoundaryResult, ToolBoundary, ToolRegistry
from ..kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    Citation,
    ErrorCode,
    Limits,
    ProgressReport,
    Projection,
    RunContext,
    RunState,
    ToolCallEnvelope,
    duplicate_code,
    is_safe_id,
)
from ._model import TRACE_FORMAT, TRACE_VERSION
from ._views import citation_view, limits_view, progress_view, record_view, run_view

__all__ = ["BoundaryLike", "RecordingBoundary"]


class BoundaryLike(Protocol):
    """What :class:`RecordingBoundary` needs of the boundary it drives (ToolBoundary's face)."""

    def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunContext | ErrorCode:
        """See :meth:`ToolBoundary.open_run`."""
        ...

    def cancel_run(self, context: RunContext) -> RunState | ErrorCode:
        """See :meth:`ToolBoundary.cancel_run`."""
        ...

    def close_run(self, context: RunContext) -> RunState | ErrorCode:
        """See :meth:`ToolBoundary.close_run`."""
        ...

    def invoke(self, context: RunContext, envelope: ToolCallEnvelope) -> BoundaryResult:
        """See :meth:`ToolBoundary.invoke`."""
        ...

    def project_progress(self, context: RunContext) -> ProgressReport:
        """See :meth:`ToolBoundary.project_progress`."""
        ...

    def cite(self, context: RunContext, tool_call_id: str) -> Citation:
        """See :meth:`ToolBoundary.cite`."""
        ...

    def sweep_stale(self, context: RunContext, older_than_ms: int) -> int:
        """See :meth:`ToolBoundary.sweep_stale`."""
        ...


#: Builds the boundary under test from the wrapped store, registry, limits and token factory.
BoundaryFactory = Callable[[InvocationStore, ToolRegistry, Limits, Callable[[], str]], BoundaryLike]


def _default_factory(
    store: InvocationStore, registry: ToolRegistry, limits: Limits, token_factory: Callable[[], str]
) -> BoundaryLike:
    return ToolBoundary(store, registry, limits=limits, token_factory=token_factory)


def _raw_text(value: object) -> str | None:
    """An executor's return value as the raw text the boundary stores (its documented
    rule: a str as is, anything else compact key-sorted JSON), or None if it has none."""
    if isinstance(value, str):
        return str.__str__(value) if type(value) is not str else value
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None


_RUNNING = object()


class _Capture:
    """What one ``invoke`` did, gathered from the wrappers while it runs."""

    def __init__(self, number: int, context: RunContext, envelope: ToolCallEnvelope) -> None:
        self.number = number
        self.context = context
        self.envelope = envelope
        self.token: str | None = None
        self.submitted = False
        self.executor: object = None  # None: not called; _RUNNING; ("value", v) or ("raised",)
        self.projector: dict[str, Any] | None = None  # the outcome object, once returned
        self.projector_called = False
        self.step_written = False
        self.key: tuple[str, str] | None = None
        self.closed = False

    def executor_outcome(self) -> dict[str, Any]:
        state = self.executor
        if state is _RUNNING or state is None:
            return {"failure": "timeout"}
        assert isinstance(state, tuple)
        if state[0] == "raised":
            return {"failure": "raised"}
        raw = _raw_text(state[1])
        return {"failure": "not_serializable"} if raw is None else {"raw": raw}


class _SweepCapture:
    """The ids a sweep completed, gathered from the store wrapper."""

    def __init__(self) -> None:
        self.swept: list[str] = []


_CAPTURE: contextvars.ContextVar[_Capture | _SweepCapture | None] = contextvars.ContextVar(
    "invocation_store_trace_capture", default=None
)


class _RecordingStore(ForwardingStore):
    """An :class:`~invocation_store.adapters.InvocationStore` that reports to the recorder."""

    def __init__(self, inner: InvocationStore, recorder: RecordingBoundary) -> None:
        super().__init__(inner)
        self._recorder = recorder
        self.last_run: RunState | ErrorCode | None = None

    def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunState | ErrorCode:
        result = super().open_run(
            run_id,
            deadline_ms=deadline_ms,
            ttl_ms=ttl_ms,
            tool_call_budget=tool_call_budget,
            byte_budget=byte_budget,
        )
        self.last_run = result
        return result

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        capture = _CAPTURE.get()
        with self._recorder.lock:
            result = self.inner.create(request, limits)
            if isinstance(capture, _Capture) and not capture.closed:
                self._recorder.write_submit(capture, request, result)
        return result

    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        capture = _CAPTURE.get()
        with self._recorder.lock:
            result = self.inner.complete(before, after)
            if isinstance(capture, _SweepCapture) and isinstance(result, CanonicalRecord):
                capture.swept.append(before.tool_call_id)
            elif isinstance(capture, _Capture) and not capture.closed:
                self._recorder.write_step(capture)
        return result


def _wrap_executor(executor: Callable[..., Any]) -> Callable[..., object]:
    def recorded_executor(arguments: Mapping[str, Any]) -> object:
        capture = _CAPTURE.get()
        if isinstance(capture, _Capture):
            capture.executor = _RUNNING
        try:
            value = executor(arguments)
        except BaseException:
            if isinstance(capture, _Capture) and not capture.closed:
                capture.executor = ("raised",)
            raise
        if isinstance(capture, _Capture) and not capture.closed:
            capture.executor = ("value", value)
        return value

    return recorded_executor


def _projection_outcome(value: object) -> dict[str, Any]:
    if (
        isinstance(value, Projection)
        and isinstance(value.evidence_status, str)
        and isinstance(value.content, str)
        and isinstance(value.scope, str)
    ):
        return {"projection": codec.unstructure(value)}
    return {"failure": "invalid"}


def _wrap_projector(projector: Callable[..., Any], recorder: RecordingBoundary) -> Callable[..., Projection]:
    def recorded_projector(raw: str, arguments: Mapping[str, Any]) -> Projection:
        capture = _CAPTURE.get()
        if isinstance(capture, _Capture) and not capture.closed:
            with recorder.lock:
                recorder.write_execute_continuing(capture)
            capture.projector_called = True
        try:
            value: Projection = projector(raw, arguments)
        except Exception:
            if isinstance(capture, _Capture):
                capture.projector = {"failure": "raised"}
            raise
        if isinstance(capture, _Capture):
            capture.projector = _projection_outcome(value)
        return value

    return recorded_projector


class RecordingBoundary:
    """A boundary over ``store`` and ``registry`` that writes a trace of all it does to ``sink``.

    ``sink`` receives one JSON line per operation (``sink.write``); the header line is
    written at construction with the store's clock and ``limits``. ``implementation``
    names the recorder in the header. ``boundary_factory`` builds the boundary under
    test from the wrapped parts (default: :class:`~invocation_store.boundary.ToolBoundary`),
    so a deliberately faulty boundary can be recorded too. ``token_factory`` draws
    invocation tokens (default: the boundary's own random tokens, 128 bits hex).

    Methods mirror :class:`~invocation_store.boundary.ToolBoundary` (same arguments,
    same returns) plus :meth:`read` (a harness read of one record) and :meth:`tick`
    (a ``clock`` line). Exceptions raised by the boundary propagate; the operation is
    then not recorded.
    """

    def __init__(
        self,
        sink: TextIO,
        store: InvocationStore,
        registry: ToolRegistry,
        *,
        limits: Limits | None = None,
        implementation: str = "invocation_store",
        token_factory: Callable[[], str] | None = None,
        boundary_factory: BoundaryFactory | None = None,
    ) -> None:
        self.lock = threading.RLock()
        self.limits = limits if limits is not None else Limits()
        self._sink = sink
        self._store = _RecordingStore(store, self)
        self._last_now = store.now_ms()
        self._calls = 0
        self._token_factory = token_factory
        tools = []
        for name in registry.names():
            tool = registry.get(name)
            assert tool is not None
            # evolve, not a field-by-field copy: every field the spec has (now or later) is kept.
            tools.append(
                evolve(
                    tool,
                    executor=_wrap_executor(tool.executor),
                    projector=_wrap_projector(tool.projector, self),
                )
            )
        self.registry = ToolRegistry(tools)
        self._policies = {tool.name: tool.policy for tool in tools}
        factory = boundary_factory or _default_factory
        self.boundary = factory(self._store, self.registry, self.limits, self._draw_token)
        self._write(
            {
                "op": "header",
                "format": TRACE_FORMAT,
                "version": TRACE_VERSION,
                "now_ms": self._last_now,
                "limits": limits_view(self.limits),
                "implementation": implementation,
            }
        )

    # -- writing --------------------------------------------------------------------

    def _write(self, line: dict[str, Any]) -> None:
        with self.lock:
            self._sink.write(json.dumps(line, ensure_ascii=True, separators=(",", ":")) + "\n")

    def _stamp(self, now: int | None = None) -> int:
        now = self._store.inner.now_ms() if now is None else now
        self._last_now = max(self._last_now, now)
        return self._last_now

    def _read(self, run_id: str, tool_call_id: str) -> tuple[CanonicalRecord | None, dict[str, Any] | None]:
        if not is_safe_id(run_id) or not is_safe_id(tool_call_id):
            return None, None
        record = self._store.inner.get(run_id, tool_call_id)
        if record is None:
            return None, None
        ttl = self._store.inner.ttl_remaining_ms(run_id, tool_call_id)
        return record, record_view(record, ttl)

    def _observed_record(self, run_id: str, tool_call_id: str) -> dict[str, Any] | None:
        return self._read(run_id, tool_call_id)[1]

    def _draw_token(self) -> str:
        if self._token_factory is not None:
            token = self._token_factory()
        else:
            import secrets  # noqa: PLC0415 - only when no factory was given

            token = secrets.token_hex(16)
        capture = _CAPTURE.get()
        if isinstance(capture, _Capture):
            capture.token = token
        return token

    def write_submit(
        self, capture: _Capture, request: AdmissionRequest | None, result: Admission | ErrorCode | None
    ) -> None:
        """Write the ``submit`` line of ``capture`` (lock held by the caller)."""
        envelope = capture.envelope
        code: ErrorCode | None
        record: dict[str, Any] | None = None
        if isinstance(result, ErrorCode):
            code = result
        elif isinstance(result, Admission):
            code = duplicate_code(result.record) if result.replayed else None
            if code is None:
                capture.key = (result.record.run_id, result.record.tool_call_id)
                record = self._observed_record(*capture.key)
        else:
            code = None
        policy = self._policies.get(envelope.tool_name) if isinstance(envelope.tool_name, str) else None
        capture.submitted = True
        self._write(
            {
                "op": "submit",
                # An admission happened at the store's time, which its record carries.
                "now_ms": self._stamp(result.record.created_at_ms if isinstance(result, Admission) else None),
                "call": capture.number,
                "context_run_id": capture.context.run_id,
                "envelope": codec.unstructure(envelope),
                "policy": None if policy is None else codec.unstructure(policy),
                "token": capture.token,
                "observed": {"code": None if code is None else code.value, "record": record},
            }
        )

    def write_execute_continuing(self, capture: _Capture) -> None:
        """Write the ``execute`` line of a call going on to its projector (lock held)."""
        key = capture.key
        assert key is not None
        self._write(
            {
                "op": "execute",
                "now_ms": self._stamp(),
                "call": capture.number,
                "outcome": capture.executor_outcome(),
                "observed": {"record": self._observed_record(*key)},
            }
        )

    def write_step(self, capture: _Capture) -> None:
        """Write the line of the step that ended ``capture``'s call (lock held)."""
        if capture.step_written or capture.key is None:
            return
        capture.step_written = True
        observed = {"record": self._observed_record(*capture.key)}
        if capture.projector_called:
            self._write(
                {
                    "op": "project",
                    "now_ms": self._stamp(),
                    "call": capture.number,
                    "outcome": capture.projector or {"failure": "raised"},
                    "observed": observed,
                }
            )
        else:
            self._write(
                {
                    "op": "execute",
                    "now_ms": self._stamp(),
                    "call": capture.number,
                    "outcome": capture.executor_outcome(),
                    "observed": observed,
                }
            )

    # -- the boundary's face -----------------------------------------------------------

    def now_ms(self) -> int:
        """The store's clock."""
        return self._store.inner.now_ms()

    def tick(self) -> None:
        """Write a ``clock`` line at the store's current time (records past expiry lapse)."""
        with self.lock:
            self._write({"op": "clock", "now_ms": self._stamp()})

    def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunContext | ErrorCode:
        """Open a run through the boundary and record ``run_open``."""
        with self.lock:
            self._store.last_run = None
            result = self.boundary.open_run(
                run_id,
                deadline_ms=deadline_ms,
                ttl_ms=ttl_ms,
                tool_call_budget=tool_call_budget,
                byte_budget=byte_budget,
            )
            state = self._store.last_run
            self._write(
                {
                    "op": "run_open",
                    "now_ms": self._stamp(),
                    "run_id": run_id,
                    "deadline_ms": deadline_ms,
                    "ttl_ms": ttl_ms,
                    "tool_call_budget": tool_call_budget,
                    "byte_budget": byte_budget,
                    "observed": {
                        "code": result.value if isinstance(result, ErrorCode) else None,
                        "run": run_view(state) if isinstance(state, RunState) else None,
                    },
                }
            )
        return result

    def _end_run(self, op: str, context: RunContext, cancel: bool) -> RunState | ErrorCode:
        with self.lock:
            result = self.boundary.cancel_run(context) if cancel else self.boundary.close_run(context)
            self._write(
                {
                    "op": op,
                    "now_ms": self._stamp(),
                    "run_id": context.run_id,
                    "observed": {
                        "code": result.value if isinstance(result, ErrorCode) else None,
                        "run": run_view(result) if isinstance(result, RunState) else None,
                    },
                }
            )
        return result

    def cancel_run(self, context: RunContext) -> RunState | ErrorCode:
        """Cancel through the boundary and record ``run_cancel``."""
        return self._end_run("run_cancel", context, cancel=True)

    def close_run(self, context: RunContext) -> RunState | ErrorCode:
        """Close through the boundary and record ``run_close``."""
        return self._end_run("run_close", context, cancel=False)

    def invoke(self, context: RunContext, envelope: ToolCallEnvelope) -> BoundaryResult:
        """Invoke through the boundary; record ``submit``, ``execute``, ``project`` and ``result``."""
        with self.lock:
            self._calls += 1
            capture = _Capture(self._calls, context, envelope)
        token = _CAPTURE.set(capture)
        try:
            result = self.boundary.invoke(context, envelope)
        finally:
            _CAPTURE.reset(token)
        with self.lock:
            if not capture.submitted:
                self.write_submit(capture, None, result.code)
            elif capture.key is not None and not capture.step_written and capture.executor is not None:
                self.write_step(capture)  # the call ended without a completion (kernel refusal)
            capture.closed = True
            self._write(
                {
                    "op": "result",
                    "now_ms": self._stamp(),
                    "call": capture.number,
                    "observed": {
                        "result": {
                            "ok": result.ok,
                            "tool_call_id": result.tool_call_id,
                            "code": None if result.code is None else result.code.value,
                            "evidence_status": None
                            if result.evidence_status is None
                            else result.evidence_status.value,
                            "content": result.content,
                            "scope": result.scope,
                            "negative": result.negative,
                            "message": result.message,
                        }
                    },
                }
            )
        return result

    def project_progress(self, context: RunContext) -> ProgressReport:
        """Progress through the boundary; record ``progress``."""
        with self.lock:
            report = self.boundary.project_progress(context)
            self._write(
                {
                    "op": "progress",
                    "now_ms": self._stamp(),
                    "context_run_id": context.run_id,
                    "observed": progress_view(report),
                }
            )
        return report

    def cite(self, context: RunContext, tool_call_id: str) -> Citation:
        """Cite through the boundary; record ``cite``."""
        with self.lock:
            citation = self.boundary.cite(context, tool_call_id)
            self._write(
                {
                    "op": "cite",
                    "now_ms": self._stamp(),
                    "context_run_id": context.run_id,
                    "tool_call_id": tool_call_id,
                    "observed": {"citation": citation_view(citation)},
                }
            )
        return citation

    def sweep_stale(self, context: RunContext, older_than_ms: int) -> int:
        """Sweep through the boundary; record ``sweep`` with the ids completed."""
        capture = _SweepCapture()
        with self.lock:
            token = _CAPTURE.set(capture)
            try:
                swept = self.boundary.sweep_stale(context, older_than_ms)
            finally:
                _CAPTURE.reset(token)
            self._write(
                {
                    "op": "sweep",
                    "now_ms": self._stamp(),
                    "context_run_id": context.run_id,
                    "older_than_ms": older_than_ms,
                    "observed": {"swept": swept, "tool_call_ids": capture.swept},
                }
            )
        return swept

    def read(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        """A harness read of one record through the store; record ``read``."""
        with self.lock:
            record, observed = self._read(run_id, tool_call_id)
            self._write(
                {
                    "op": "read",
                    "now_ms": self._stamp(),
                    "run_id": run_id,
                    "tool_call_id": tool_call_id,
                    "observed": {"record": observed},
                }
            )
        return record
