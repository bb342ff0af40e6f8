"""Deliberately wrong implementations, each breaking one requirement, to record traces from.

Each is a wrapper (or a subclass) around a correct part, so that the recorder sees
exactly what a buggy store or boundary would report.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attrs import evolve

from invocation_store.adapters import ForwardingStore, InvocationStore, MemoryStore
from invocation_store.boundary import BoundaryResult, ToolBoundary, ToolRegistry
from invocation_store.kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    Citation,
    ErrorCode,
    EvidenceStatus,
    InvocationStatus,
    Limits,
    ProgressReport,
    RunContext,
    RunState,
    ToolCallEnvelope,
    admit,
)


class DelegatingStore(ForwardingStore):
    """A store wrapper whose subclasses plant one fault each."""


class RefreshingStore(DelegatingStore):
    """Reads refresh the TTL (a GETEX/EXPIRE on read): breaks CIS-TTL-5."""

    def __init__(self, inner: InvocationStore) -> None:
        super().__init__(inner)
        self.expiry: dict[tuple[str, str], int] = {}

    def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        record = self.inner.get(run_id, tool_call_id)
        if record is None:
            return None
        refreshed = self.inner.now_ms() + (record.expires_at_ms - record.created_at_ms)
        self.expiry[(run_id, tool_call_id)] = refreshed
        return evolve(record, expires_at_ms=refreshed)

    def ttl_remaining_ms(self, run_id: str, tool_call_id: str) -> int | None:
        remaining = self.inner.ttl_remaining_ms(run_id, tool_call_id)
        expiry = self.expiry.get((run_id, tool_call_id))
        if remaining is None or expiry is None:
            return remaining
        return expiry - self.inner.now_ms()


class LongerTtlStore(DelegatingStore):
    """Reports (and so keeps) a TTL longer than the run's: breaks CIS-TTL-2."""

    def ttl_remaining_ms(self, run_id: str, tool_call_id: str) -> int | None:
        remaining = self.inner.ttl_remaining_ms(run_id, tool_call_id)
        return None if remaining is None else remaining + 5_000


class DuplicateAcceptingStore(MemoryStore):
    """Admits a second invocation of a live key as if the key were free: breaks CIS-ID-5."""

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        with self._lock:
            now = self._clock()
            run = self._run(request.run_id, now)
            result = admit(run, None, request, limits, now)
            if isinstance(result, Admission):
                self._runs[request.run_id] = result.run
                self._records[(request.run_id, request.tool_call_id)] = result.record
                self._calls.setdefault(request.run_id, []).append(request.tool_call_id)
            return result


class TokenOnlyCasStore(MemoryStore):
    """Its compare-and-set checks the invocation token but not the status."""

    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        with self._lock:
            stored = self._record(before.run_id, before.tool_call_id, self._clock())
            if stored is None or stored.invocation_token != before.invocation_token:
                return ErrorCode.INVALID_TRANSITION
            self._records[(after.run_id, after.tool_call_id)] = after
            self._done.setdefault(after.run_id, []).append(after.tool_call_id)
            return after


class WrappedBoundary:
    """Forwards everything to a real ToolBoundary; subclasses change one behaviour."""

    def __init__(
        self, store: InvocationStore, registry: ToolRegistry, limits: Limits, token_factory: Callable[[], str]
    ) -> None:
        self.store = store
        self.inner = ToolBoundary(store, registry, limits=limits, token_factory=token_factory)

    def open_run(self, run_id: str, **parameters: int) -> RunContext | ErrorCode:
        return self.inner.open_run(run_id, **parameters)

    def cancel_run(self, context: RunContext) -> RunState | ErrorCode:
        return self.inner.cancel_run(context)

    def close_run(self, context: RunContext) -> RunState | ErrorCode:
        return self.inner.close_run(context)

    def invoke(self, context: RunContext, envelope: ToolCallEnvelope) -> BoundaryResult:
        return self.inner.invoke(context, envelope)

    def project_progress(self, context: RunContext) -> ProgressReport:
        return self.inner.project_progress(context)

    def cite(self, context: RunContext, tool_call_id: str) -> Citation:
        return self.inner.cite(context, tool_call_id)

    def sweep_stale(self, context: RunContext, older_than_ms: int) -> int:
        return self.inner.sweep_stale(context, older_than_ms)


class RawLeakingBoundary(WrappedBoundary):
    """Hands the agent the raw response instead of the projection: breaks CIS-BND-4."""

    def invoke(self, context: RunContext, envelope: ToolCallEnvelope) -> BoundaryResult:
        result = self.inner.invoke(context, envelope)
        if result.ok and result.tool_call_id is not None:
            record = self.store.get(context.run_id, result.tool_call_id)
            if record is not None and record.raw_response is not None:
                return evolve(result, content=record.raw_response)
        return result


class TerminalSweepingBoundary(WrappedBoundary):
    """Sweeps every old record whatever its status (with a token-only CAS store, READY -> ERROR):
    breaks CIS-LIFE-3."""

    def sweep_stale(self, context: RunContext, older_than_ms: int) -> int:
        now = self.store.now_ms()
        swept = 0
        ids = self.store.calls(context.run_id)
        for tool_call_id, record in self.store.get_many(context.run_id, ids).items():
            if record is None or now - record.created_at_ms < older_than_ms:
                continue
            after = evolve(
                record,
                status=InvocationStatus.ERROR,
                evidence_status=EvidenceStatus.ERROR,
                error_code=ErrorCode.STALE_PROJECTION,
                agent_result=None,
                scope=None,
                updated_at_ms=now,
            )
            if isinstance(self.store.complete(record, after), CanonicalRecord):
                swept += 1
                del tool_call_id
        return swept


class AuthorizationFirstBoundary(WrappedBoundary):
    """Checks the tool's authorization before the arguments: breaks the preflight order CIS-PRE-2."""

    def __init__(
        self, store: InvocationStore, registry: ToolRegistry, limits: Limits, token_factory: Callable[[], str]
    ) -> None:
        super().__init__(store, registry, limits, token_factory)
        self.registry = registry

    def invoke(self, context: RunContext, envelope: ToolCallEnvelope) -> BoundaryResult:
        tool = self.registry.get(envelope.tool_name)
        if tool is None or tool.authorized is not True:
            return BoundaryResult(
                ok=False,
                tool_call_id=envelope.tool_call_id,
                code=ErrorCode.UNAUTHORIZED,
                message="The tool is not authorized.",
            )
        return self.inner.invoke(context, envelope)


def factory(cls: type[WrappedBoundary]) -> Callable[..., Any]:
    """A RecordingBoundary ``boundary_factory`` building ``cls``."""

    def build(
        store: InvocationStore, registry: ToolRegistry, limits: Limits, token_factory: Callable[[], str]
    ) -> WrappedBoundary:
        return cls(store, registry, limits, token_factory)

    return build


class RefusingBoundary(WrappedBoundary):
    """Refuses the call ``victim`` with ``code`` without running it, though the kernel admits it.

    One plausible bug per code (a check that fires when it should not): breaks the
    requirement the oracle ties to that code (``CODE_REQUIREMENTS``).
    """

    code: ErrorCode = ErrorCode.INVALID_TRANSITION

    def invoke(self, context: RunContext, envelope: ToolCallEnvelope) -> BoundaryResult:
        if envelope.tool_call_id != "victim":
            return self.inner.invoke(context, envelope)
        return BoundaryResult(ok=False, tool_call_id="victim", code=self.code, message="refused")


def refusing(code: ErrorCode) -> type[WrappedBoundary]:
    """A :class:`RefusingBoundary` class refusing with ``code``."""
    return type(f"Refusing{code.value.title().replace('_', '')}Boundary", (RefusingBoundary,), {"code": code})


class EarlyExpiringStore(DelegatingStore):
    """Drops a record once half its TTL has passed (a shortened expiry): breaks CIS-TTL-1.

    Reads answer None although the record's expiry is still ahead, so the record
    vanished before its time.
    """

    def _early(self, record: CanonicalRecord | None) -> CanonicalRecord | None:
        if record is None:
            return None
        halfway = record.created_at_ms + (record.expires_at_ms - record.created_at_ms) // 2
        return None if self.inner.now_ms() >= halfway else record

    def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        return self._early(self.inner.get(run_id, tool_call_id))


class RecordLimitIgnoringStore(MemoryStore):
    """Admits with the default limits, ignoring the whole-record limit it is given: breaks CIS-SIZE-5."""

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        return super().create(request, Limits())
