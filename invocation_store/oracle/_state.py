"""The oracle's replay state: what a store would hold, decided only by the kernel (CIS-ORC-2).

:class:`OracleState` keeps run states, live records by key, each run's completed
and PROJECTING ids (:class:`RunBook`) and the calls in flight (:class:`Call`), drops
records and runs when the trace clock passes their expiry (a heap of expiry
times), and applies a completion's effects as a store does (kernel
``decide_completion``). The line checkers (:mod:`._runs`, :mod:`._calls`,
:mod:`._reads`) are mixins over it.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable
from typing import Any, Final

from .. import codec
from ..kernel import (
    CanonicalRecord,
    Completion,
    ErrorCode,
    Limits,
    RunContext,
    RunState,
    ToolPolicy,
    is_live,
    live,
)
from ._report import (
    SIZE_MISREADINGS,
    MalformedTraceError,
    misread_charge,
)

_EXECUTOR_FAILURES: Final[dict[str, ErrorCode]] = {
    "raised": ErrorCode.EXECUTION_FAILED,
    "timeout": ErrorCode.EXECUTION_TIMEOUT,
    "not_serializable": ErrorCode.SERIALIZATION_FAILED,
}
_PROJECTOR_FAILURES: Final[dict[str, ErrorCode]] = {
    "raised": ErrorCode.PROJECTION_FAILED,
    "invalid": ErrorCode.PROJECTION_INVALID,
}

# Call stages.
_EXECUTE: Final = 0  # admitted, awaiting the executor's outcome
_PROJECT: Final = 1  # raw received, awaiting the projector's outcome
_ENDED: Final = 2  # answer decided, awaiting the result line


# ---------------------------------------------------------------------------
# Replay state


class _Call:
    """One call in flight: the worker's copy of its record and what it awaits."""

    __slots__ = (
        "admitted",
        "before",
        "copy",
        "echo",
        "end_requirement",
        "expected",
        "explain",
        "explain_submit",
        "key",
        "raw",
        "record_requirement",
        "stage",
    )

    def __init__(self, key: tuple[str, str], echo: str | None) -> None:
        self.key = key
        self.echo = echo
        self.stage = _ENDED
        self.admitted = False
        self.before: CanonicalRecord | None = None
        self.copy: CanonicalRecord | None = None
        self.raw: str | None = None
        self.expected: dict[str, Any] | None = None
        self.end_requirement = "CIS-BND-1"
        self.record_requirement = ""
        #: Builds the clause with the quantities behind the kernel's last decision on
        #: this call (only when a divergence is reported: it may measure large texts).
        self.explain: Callable[[], str] | None = None
        self.explain_submit: Callable[[ErrorCode | None], str] | None = None


class _RunBook:
    """What a store keeps per live run besides its state: completed ids, PROJECTING ids.

    And, for the size error's message (CIS-SIZE-1), ``misread``: the run's
    ``bytes_used`` counted in each unit of :data:`._report.SIZE_MISREADINGS` (the same
    admitted arguments and stored completions, other counts of their texts).
    """

    __slots__ = ("done", "misread", "projecting")

    def __init__(self) -> None:
        self.done: list[str] = []
        self.projecting: dict[str, None] = {}
        self.misread: list[int] = [0] * len(SIZE_MISREADINGS)

    def charge(self, counts: tuple[int, ...]) -> None:
        """Add one admission's or completion's charge, counted in each misreading unit."""
        for n, count in enumerate(counts):
            self.misread[n] += count


_OUTCOME_FIELDS: Final = frozenset(
    {"status", "evidence_status", "error_code", "raw_bytes", "agent_result", "scope"}
)


@functools.lru_cache(maxsize=4096)
def _context(run_id: str) -> RunContext:
    return RunContext(run_id=run_id)


@functools.lru_cache(maxsize=1024)
def _policy(members: tuple[tuple[str, Any], ...]) -> ToolPolicy:
    """The policy of a checked ``Policy`` object's members (the codec's strict form, cached)."""
    return codec.policy_from_obj(dict(members))


class OracleState:
    """The replay state shared by the line checkers (see the module docstring)."""

    def __init__(self) -> None:
        self.limits: Limits | None = None
        self.now = 0
        self.runs: dict[str, RunState] = {}
        self.books: dict[str, _RunBook] = {}
        self.records: dict[tuple[str, str], CanonicalRecord] = {}
        self.calls: dict[int, _Call] = {}
        self.last_call = 0
        self.last_ttl: dict[tuple[str, str], int] = {}
        self.peak_records = 0
        self.peak_calls = 0
        self._record_expiry: list[tuple[int, str, str]] = []
        self._run_expiry: list[tuple[int, str]] = []
        self._line = 0
        self._view_cache: tuple[CanonicalRecord, dict[str, Any]] | None = None

    def _malformed(self, where: str, reason: str) -> MalformedTraceError:
        return MalformedTraceError(self._line, where, reason)

    # -- clock and expiry -----------------------------------------------------------

    def _advance(self, now: int) -> None:
        if now < self.now:
            raise self._malformed("now_ms", "the trace clock moved backwards")
        self.now = now
        heap = self._record_expiry
        while heap and heap[0][0] <= now:
            _expires, run_id, tool_call_id = heapq.heappop(heap)
            key = (run_id, tool_call_id)
            record = self.records.get(key)
            if record is not None and not is_live(record, now):
                del self.records[key]
                self.last_ttl.pop(key, None)
                book = self.books.get(run_id)
                if book is not None:
                    book.projecting.pop(tool_call_id, None)
        runs = self._run_expiry
        while runs and runs[0][0] <= now:
            _expires, run_id = heapq.heappop(runs)
            run = self.runs.get(run_id)
            if run is not None and not is_live(run, now):
                del self.runs[run_id]
                self.books.pop(run_id, None)

    def _live_run(self, run_id: str) -> RunState | None:
        return live(self.runs.get(run_id), self.now)

    def _live_record(self, key: tuple[str, str]) -> CanonicalRecord | None:
        return live(self.records.get(key), self.now)

    def _store(self, record: CanonicalRecord, *, new: bool) -> None:
        key = (record.run_id, record.tool_call_id)
        self.records[key] = record
        if new:
            heapq.heappush(self._record_expiry, (record.expires_at_ms, record.run_id, record.tool_call_id))
            self.last_ttl.pop(key, None)
            self.peak_records = max(self.peak_records, len(self.records))

    def _apply(self, effect: Completion, before: CanonicalRecord) -> None:
        """Apply a WRITE completion ``before -> effect.record`` as a store does (``decide_completion``)."""
        record = effect.record
        self._store(record, new=False)
        book = self.books.get(record.run_id)
        if effect.run is not None:
            self.runs[record.run_id] = effect.run
            if book is not None:
                book.charge(misread_charge(before, record))
        if book is not None and effect.append_done:
            book.done.append(record.tool_call_id)
        if book is not None and record.terminal:
            book.projecting.pop(record.tool_call_id, None)
