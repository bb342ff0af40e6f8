"""Planted faults: stores and boundaries that each break one invariant (CIS-STATE-2).

A verification suite that never fails proves nothing. Each :class:`Mutant` below is
a small, realistic bug, planted in a :class:`~invocation_store.adapters.MemoryStore`
subclass or in a wrapper around the library's :class:`ToolBoundary`; the stateful
machine must catch every one of them. ``stateful_tests/test_mutants.py`` runs them
under the ``ci`` profile and ``invocation-store fuzz --mutant NAME`` shows one being
caught, with the minimal failing sequence.

The mutant stores reach into MemoryStore's private state on purpose: they *are*
broken stores. Use :func:`mutant_machine` to build a machine around one.

Size: a catalogue of planted faults, each a small class next to the entry that names
it; one module keeps every fault beside the list the machine iterates.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from attrs import evolve, frozen

from ..adapters import MemoryStore
from ..boundary import BoundaryResult, ToolBoundary, ToolRegistry
from ..kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    ErrorCode,
    EvidenceStatus,
    InvocationStatus,
    Limits,
    ObservedFact,
    ProgressReport,
    RunContext,
    RunState,
    ToolCallEnvelope,
    admit,
    check_tool_call_id,
)
from ._clock import FakeClock
from ._targets import BoundaryFactory

__all__ = ["MUTANTS", "Mutant", "mutant"]


# ---------------------------------------------------------------------------
# Faulty stores


class _TtlRefreshOnRead(MemoryStore):
    """A read slides the expiry forward, like ``GETEX ... PX`` (breaks CIS-TTL-5)."""

    def _refresh(self, record: CanonicalRecord | None) -> CanonicalRecord | None:
        if record is None:
            return None
        now = self._clock()
        fresh = evolve(record, expires_at_ms=now + (record.expires_at_ms - record.created_at_ms))
        with self._lock:
            self._records[(record.run_id, record.tool_call_id)] = fresh
        return fresh

    def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        return self._refresh(super().get(run_id, tool_call_id))

    def get_many(
        self, run_id: str, tool_call_ids: Sequence[str], **options: Any
    ) -> Mapping[str, CanonicalRecord | None]:
        found = super().get_many(run_id, tool_call_ids, **options)
        return {tcid: self._refresh(record) for tcid, record in found.items()}


class _PlainSetUpdate(MemoryStore):
    """An update rewrites the record with a fresh TTL, like a plain ``SET ... PX`` (breaks CIS-TTL-2)."""

    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        result = super().complete(before, after)
        if isinstance(result, CanonicalRecord):
            ttl = after.expires_at_ms - after.created_at_ms
            with self._lock:
                self._records[(after.run_id, after.tool_call_id)] = evolve(
                    result, expires_at_ms=self._clock() + ttl
                )
        return result


class _TerminalOverwritten(MemoryStore):
    """A completion of the same invocation overwrites a terminal record, READY -> ERROR (CIS-LIFE-3)."""

    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        with self._lock:
            stored = self._record(before.run_id, before.tool_call_id, self._clock())
            if stored is not None and stored.terminal and stored.invocation_token == before.invocation_token:
                self._records[(after.run_id, after.tool_call_id)] = after
                return after
        return super().complete(before, after)


class _DuplicateOverwrites(MemoryStore):
    """A second invocation of a live key replaces the first instead of being refused (breaks CIS-ID-5)."""

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        with self._lock:
            key = (request.run_id, request.tool_call_id)
            existing = self._record(*key, self._clock())
            if existing is not None and existing.invocation_token != request.invocation_token:
                del self._records[key]
        return super().create(request, limits)


class _CrossRunRead(MemoryStore):
    """A read of a missing key falls back to the same tool_call_id of another run (breaks CIS-STORE-6)."""

    def _other_run(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        now = self._clock()
        with self._lock:
            for (other_run, tcid), record in list(self._records.items()):
                if tcid == tool_call_id and other_run != run_id and now < record.expires_at_ms:
                    return record
        return None

    def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        found = super().get(run_id, tool_call_id)
        return found if found is not None else self._other_run(run_id, tool_call_id)

    def get_many(
        self, run_id: str, tool_call_ids: Sequence[str], **options: Any
    ) -> Mapping[str, CanonicalRecord | None]:
        found = super().get_many(run_id, tool_call_ids, **options)
        return {tcid: record or self._other_run(run_id, tcid) for tcid, record in found.items()}


class _RacyBudget(MemoryStore):
    """Admission reads the run, then writes it back later, as GET-then-SET would (breaks CIS-RUN-5).

    The gap between the read and the write stands for a network round trip; two
    workers admitted in that gap both take the same sequence number and budget slot.
    """

    gap_s: float = 0.002

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        with self._lock:
            now = self._clock()
            run = self._run(request.run_id, now)
            existing = self._record(request.run_id, request.tool_call_id, now)
        result = admit(run, existing, request, limits, now)
        if isinstance(result, Admission) and not result.replayed:
            time.sleep(self.gap_s)
            with self._lock:
                self._runs[request.run_id] = result.run
                self._records[(request.run_id, request.tool_call_id)] = result.record
                self._calls.setdefault(request.run_id, []).append(request.tool_call_id)
        return result


class _ServesExpired(MemoryStore):
    """Reads ignore the expiry: an expired record is still served (breaks CIS-TTL-4)."""

    def _record(self, run_id: str, tool_call_id: str, now_ms: int) -> CanonicalRecord | None:
        return self._records.get((run_id, tool_call_id))


class _DuplicateSpendsBudget(MemoryStore):
    """A refused duplicate still consumes a tool call from the budget (breaks CIS-PRE-8)."""

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        result = super().create(request, limits)
        if result is ErrorCode.DUPLICATE_TOOL_CALL:
            with self._lock:
                run = self._run(request.run_id, self._clock())
                if run is not None:
                    self._runs[request.run_id] = evolve(run, tool_calls_used=run.tool_calls_used + 1)
        return result


class _DeadlineInclusive(MemoryStore):
    """A call exactly at the deadline is still admitted (off by one; breaks CIS-RUN-4)."""

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        with self._lock:
            now = self._clock()
            run = self._run(request.run_id, now)
        if run is not None and now == run.deadline_ms:
            with self._lock:
                self._runs[request.run_id] = evolve(run, deadline_ms=run.deadline_ms + 1)
            try:
                return super().create(request, limits)
            finally:
                with self._lock:
                    current = self._runs.get(request.run_id)
                    if current is not None:
                        self._runs[request.run_id] = evolve(current, deadline_ms=run.deadline_ms)
        return super().create(request, limits)


class _CancelForgotten(MemoryStore):
    """Cancelling answers CANCELLED but does not persist it (breaks CIS-RUN-3)."""

    def cancel_run(self, run_id: str) -> RunState | ErrorCode:
        with self._lock:
            before = self._runs.get(run_id)
        result = super().cancel_run(run_id)
        if isinstance(result, RunState) and before is not None:
            with self._lock:
                self._runs[run_id] = before
        return result


class _ErrorsNotTracked(MemoryStore):
    """The tracker lists only READY completions; ERROR ones are forgotten (breaks CIS-PROG-1)."""

    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        result = super().complete(before, after)
        if isinstance(result, CanonicalRecord) and result.status is InvocationStatus.ERROR:
            with self._lock:
                done = self._done.get(after.run_id, [])
                if done and done[-1] == after.tool_call_id:
                    done.pop()
        return result


class _RawDroppedOnError(MemoryStore):
    """A failed projection drops the raw response it had kept (breaks CIS-FAIL-6)."""

    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        if after.status is InvocationStatus.ERROR and after.raw_response is not None:
            after = evolve(after, raw_response=None)
        return super().complete(before, after)


class _TokenBlindComplete(MemoryStore):
    """A completion checks the status but not the invocation token: a stale worker lands (CIS-STORE-3)."""

    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        with self._lock:
            stored = self._record(before.run_id, before.tool_call_id, self._clock())
            foreign = stored is not None and stored.invocation_token != before.invocation_token
            if foreign and stored is not None and not stored.terminal:
                self._records[(after.run_id, after.tool_call_id)] = after
                if after.terminal:
                    self._done.setdefault(after.run_id, []).append(after.tool_call_id)
                return after
        return super().complete(before, after)


class _ReopenResets(MemoryStore):
    """Reopening a live run with the same parameters starts it afresh: budgets refill (CIS-RETRY-3)."""

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
        if isinstance(result, RunState) and (result.tool_calls_used or result.bytes_used):
            fresh = evolve(result, tool_calls_used=0, bytes_used=0)
            with self._lock:
                self._runs[run_id] = fresh
            return fresh
        return result


class _EvidenceLost(MemoryStore):
    """An ERROR record is stored without its evidence status, as a lossy codec would (CIS-EVID-1)."""

    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        result = super().complete(before, after)
        if isinstance(result, CanonicalRecord) and result.status is InvocationStatus.ERROR:
            with self._lock:
                self._records[(after.run_id, after.tool_call_id)] = evolve(result, evidence_status=None)
        return result


# ---------------------------------------------------------------------------
# Faulty boundaries (wrappers around the library's ToolBoundary)


class _BoundaryWrapper:
    """Delegates everything to the real boundary; subclasses override one method."""

    def __init__(self, inner: ToolBoundary, store: Any, limits: Limits) -> None:
        self.inner = inner
        self.store = store
        self.limits = limits

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _FallbackId(_BoundaryWrapper):
    """A missing tool_call_id is replaced by a generated one (breaks CIS-ID-6)."""

    _counter = itertools.count(1)

    def invoke(self, context: RunContext, envelope: ToolCallEnvelope) -> BoundaryResult:
        if check_tool_call_id(envelope.tool_call_id) is ErrorCode.MISSING_TOOL_CALL_ID:
            envelope = evolve(envelope, tool_call_id=f"fallback-{next(self._counter)}")
        return self.inner.invoke(context, envelope)


class _RawToAgent(_BoundaryWrapper):
    """The agent gets the stored raw response instead of the bounded result (breaks CIS-BND-4)."""

    def invoke(self, context: RunContext, envelope: ToolCallEnvelope) -> BoundaryResult:
        result = self.inner.invoke(context, envelope)
        if result.ok and isinstance(envelope.tool_call_id, str):
            record = self.store.get(context.run_id, envelope.tool_call_id)
            if record is not None and record.raw_response is not None:
                return evolve(result, content=record.raw_response)
        return result


class _ErrorFacts(_BoundaryWrapper):
    """Progress keeps ERROR records as facts too (breaks CIS-PROG-3)."""

    def project_progress(self, context: RunContext) -> ProgressReport:
        report: ProgressReport = self.inner.project_progress(context)
        ids = self.store.completed(context.run_id)
        records = self.store.get_many(context.run_id, ids)
        extra = [
            ObservedFact(
                tool_call_id=tcid,
                tool_name=record.tool_name,
                sequence=record.sequence,
                evidence_status=EvidenceStatus.ERROR,
                negative=False,
                content="",
                scope="",
            )
            for tcid, record in records.items()
            if record is not None and record.status is InvocationStatus.ERROR
        ]
        return evolve(report, facts=(*report.facts, *extra))


class _NegativeUpgraded(_BoundaryWrapper):
    """NO_EVIDENCE is reported to the agent as found (breaks CIS-EVID-4)."""

    def invoke(self, context: RunContext, envelope: ToolCallEnvelope) -> BoundaryResult:
        result = self.inner.invoke(context, envelope)
        if result.ok and result.evidence_status is EvidenceStatus.NO_EVIDENCE:
            return evolve(result, evidence_status=EvidenceStatus.EVIDENCE_FOUND, negative=False)
        return result


class _SweepIgnoresAge(_BoundaryWrapper):
    """A stale sweep ends every PROJECTING record, however young (breaks CIS-LIFE-7)."""

    def sweep_stale(self, context: RunContext, older_than_ms: int) -> int:
        swept: int = self.inner.sweep_stale(context, 0)
        return swept


def _logging_registry(registry: ToolRegistry, logger: logging.Logger) -> ToolRegistry:
    def logged(executor: Callable[[Any], object]) -> Callable[[Any], object]:
        def run(args: Any) -> object:
            try:
                return executor(args)
            except Exception as exc:
                logger.warning("tool failed: %s", exc)  # the bug: exception text in the log
                raise

        return run

    tools = []
    for name in registry.names():
        tool = registry.get(name)
        assert tool is not None
        tools.append(evolve(tool, executor=logged(tool.executor)))
    return ToolRegistry(tools)


def _logs_exception_text(
    store: Any,
    registry: ToolRegistry,
    limits: Limits,
    token_factory: Callable[[], str],
    logger: logging.Logger,
) -> Any:
    """Executor failures are logged with their exception text (breaks CIS-ERR-2)."""
    registry = _logging_registry(registry, logger)
    return ToolBoundary(store, registry, limits=limits, token_factory=token_factory, logger=logger)


def _truncating_registry(registry: ToolRegistry, limit: int) -> ToolRegistry:
    def cut(executor: Callable[[Any], object]) -> Callable[[Any], object]:
        def run(args: Any) -> object:
            value = executor(args)
            if isinstance(value, str):
                data = value.encode("utf-8", "surrogatepass")
                if len(data) > limit:
                    return data[:limit].decode("utf-8", "ignore")
            return value

        return run

    tools = []
    for name in registry.names():
        tool = registry.get(name)
        assert tool is not None
        tools.append(evolve(tool, executor=cut(tool.executor)))
    return ToolRegistry(tools)


def _wrapping(cls: type[_BoundaryWrapper]) -> BoundaryFactory:
    def factory(
        store: Any,
        registry: ToolRegistry,
        limits: Limits,
        token_factory: Callable[[], str],
        logger: logging.Logger,
    ) -> Any:
        boundary = ToolBoundary(store, registry, limits=limits, token_factory=token_factory, logger=logger)
        return cls(boundary, store, limits)

    return factory


def _raw_truncated(
    store: Any,
    registry: ToolRegistry,
    limits: Limits,
    token_factory: Callable[[], str],
    logger: logging.Logger,
) -> Any:
    """Raw responses over the limit are cut to fit instead of refused (breaks CIS-SIZE-3)."""
    registry = _truncating_registry(registry, limits.raw_bytes)
    return ToolBoundary(store, registry, limits=limits, token_factory=token_factory, logger=logger)


# ---------------------------------------------------------------------------
# The catalogue


@frozen(kw_only=True)
class Mutant:
    """One planted fault.

    ``name`` (CLI spelling), ``summary`` (the bug in one line), ``breaks`` (the
    requirement it violates), ``caught_by`` (the invariants that may report it
    first, the one it breaks first: when the fault first shows in an operation's
    result rather than in the stores, the agreement check inv9 reports it),
    ``store`` (``factory(clock) -> faulty store``) and ``boundary`` (a faulty
    boundary factory, or None for the library's).
    """

    name: str
    summary: str
    breaks: str
    caught_by: tuple[str, ...]
    store: Callable[[FakeClock], Any] = MemoryStore
    boundary: BoundaryFactory | None = None


#: Every planted fault, by name (CIS-STATE-2).
MUTANTS: Final[dict[str, Mutant]] = {
    m.name: m
    for m in (
        Mutant(
            name="ttl-refresh-on-read",
            summary="a read slides the record's expiry forward (GETEX-style)",
            breaks="CIS-TTL-5",
            caught_by=("inv2_ttl_never_extended",),
            store=_TtlRefreshOnRead,
        ),
        Mutant(
            name="plain-set-update",
            summary="an update rewrites the record with a fresh TTL, as a plain SET would",
            breaks="CIS-TTL-2",
            caught_by=("inv2_ttl_never_extended",),
            store=_PlainSetUpdate,
        ),
        Mutant(
            name="ready-to-error",
            summary="a late completion overwrites a READY or ERROR record",
            breaks="CIS-LIFE-3",
            caught_by=("inv1_terminal_records_stay_terminal",),
            store=_TerminalOverwritten,
        ),
        Mutant(
            name="raw-truncated",
            summary="a raw response over its limit is cut to fit instead of refused",
            breaks="CIS-SIZE-3",
            caught_by=("inv4_byte_limits_hold",),
            boundary=_raw_truncated,
        ),
        Mutant(
            name="fallback-id",
            summary="a missing tool_call_id is replaced by a generated one",
            breaks="CIS-ID-6",
            caught_by=("inv3_no_fallback_ids", "inv9_stores_agree_with_kernel"),
            boundary=_wrapping(_FallbackId),
        ),
        Mutant(
            name="duplicate-overwrites",
            summary="a second invocation of a live key replaces the first",
            breaks="CIS-ID-5",
            caught_by=(
                "inv5_duplicates_never_overwrite",
                "inv3_no_fallback_ids",
                "inv9_stores_agree_with_kernel",
            ),
            store=_DuplicateOverwrites,
        ),
        Mutant(
            name="progress-includes-errors",
            summary="the progress projection keeps ERROR records as facts",
            breaks="CIS-PROG-3",
            caught_by=("inv8_progress_is_ready_records",),
            boundary=_wrapping(_ErrorFacts),
        ),
        Mutant(
            name="cross-run-read",
            summary="a read of a missing key serves the same tool_call_id of another run",
            breaks="CIS-STORE-6",
            caught_by=("inv0_reads_answer_what_was_asked",),
            store=_CrossRunRead,
        ),
        Mutant(
            name="raw-to-agent",
            summary="the agent is shown the raw response instead of the bounded result",
            breaks="CIS-BND-4",
            caught_by=("inv6_agent_sees_no_raw",),
            boundary=_wrapping(_RawToAgent),
        ),
        Mutant(
            name="evidence-lost",
            summary="an ERROR record is stored without its evidence status",
            breaks="CIS-EVID-1",
            caught_by=("inv7_status_and_evidence_agree",),
            store=_EvidenceLost,
        ),
        Mutant(
            name="racy-budget",
            summary="admission reads the run, then writes it back (GET then SET), so workers overspend",
            breaks="CIS-RUN-5",
            caught_by=("inv9_stores_agree_with_kernel",),
            store=_RacyBudget,
        ),
        Mutant(
            name="serves-expired",
            summary="reads ignore the expiry and serve expired records",
            breaks="CIS-TTL-4",
            caught_by=("inv9_stores_agree_with_kernel",),
            store=_ServesExpired,
        ),
        Mutant(
            name="duplicate-spends-budget",
            summary="a refused duplicate still consumes the tool-call budget",
            breaks="CIS-PRE-8",
            caught_by=("inv9_stores_agree_with_kernel",),
            store=_DuplicateSpendsBudget,
        ),
        Mutant(
            name="deadline-inclusive",
            summary="a call exactly at the run's deadline is still admitted",
            breaks="CIS-RUN-4",
            caught_by=("inv9_stores_agree_with_kernel", "inv3_no_fallback_ids"),
            store=_DeadlineInclusive,
        ),
        Mutant(
            name="cancel-forgotten",
            summary="cancelling a run answers CANCELLED but does not persist it",
            breaks="CIS-RUN-3",
            caught_by=("inv9_stores_agree_with_kernel",),
            store=_CancelForgotten,
        ),
        Mutant(
            name="errors-not-tracked",
            summary="the progress tracker forgets ERROR completions",
            breaks="CIS-PROG-1",
            caught_by=("inv8_progress_is_ready_records",),
            store=_ErrorsNotTracked,
        ),
        Mutant(
            name="raw-dropped-on-error",
            summary="a failed projection drops the raw response it had kept",
            breaks="CIS-FAIL-6",
            caught_by=("inv9_stores_agree_with_kernel",),
            store=_RawDroppedOnError,
        ),
        Mutant(
            name="token-blind-complete",
            summary="a completion checks the status but not the invocation token",
            breaks="CIS-STORE-3",
            caught_by=("inv5_duplicates_never_overwrite", "inv9_stores_agree_with_kernel"),
            store=_TokenBlindComplete,
        ),
        Mutant(
            name="reopen-resets-budget",
            summary="reopening a live run with its own parameters refills its budgets",
            breaks="CIS-RETRY-3",
            caught_by=("inv9_stores_agree_with_kernel",),
            store=_ReopenResets,
        ),
        Mutant(
            name="logs-exception-text",
            summary="executor failures are logged with their exception text",
            breaks="CIS-ERR-2",
            caught_by=("inv6_agent_sees_no_raw",),
            boundary=_logs_exception_text,
        ),
        Mutant(
            name="sweep-ignores-age",
            summary="a stale sweep ends every PROJECTING record, however young",
            breaks="CIS-LIFE-7",
            caught_by=("inv9_stores_agree_with_kernel",),
            boundary=_wrapping(_SweepIgnoresAge),
        ),
        Mutant(
            name="negative-upgraded",
            summary="NO_EVIDENCE is reported to the agent as found",
            breaks="CIS-EVID-4",
            caught_by=("inv9_stores_agree_with_kernel",),
            boundary=_wrapping(_NegativeUpgraded),
        ),
    )
}


def mutant(name: str) -> Mutant:
    """The mutant called ``name``; ``KeyError`` (listing the names) for an unknown one."""
    try:
        return MUTANTS[name]
    except KeyError:
        raise KeyError(f"unknown mutant {name!r}; known: {', '.join(MUTANTS)}") from None
