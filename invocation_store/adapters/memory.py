"""In-memory store: the embedded default (CIS-STORE-4).

A dictionary per kind of data behind one lock. Every decision is the kernel's:
``create`` runs :func:`~invocation_store.kernel.admit`, ``complete`` runs
:func:`~invocation_store.kernel.decide_completion` and applies the effects it
returns (record, run usage, completed-list append), runs use the kernel's run
functions. The store only keeps the results and honours expiry on every read
(an expired record or run reads as absent and is dropped).

Thread-safe (one ``threading.Lock``); usable from asyncio through
:class:`AsyncMemoryStore`, the shared asyncio face (``_face.py``) running each
operation inline: they never block on I/O. Reads answer through the shared helper
(``_reads.py``: kernel ``live``, ``without_raw``, ``ProgressView.of``); a lapsed
value is dropped only when kernel ``lapsed`` says so, a run's lists with it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence

from .._decided import report_decided_at
from ..kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    CompareAndSet,
    ErrorCode,
    Limits,
    ProgressView,
    RunState,
    admit,
    cancel_run,
    close_run,
    decide_completion,
    lapsed,
    open_run,
    remaining_ms,
)
from ._face import AsyncFace, inline
from ._reads import read_records, read_views, wanted_ids

__all__ = ["AsyncMemoryStore", "MemoryStore", "wall_clock_ms"]


def wall_clock_ms() -> int:
    """The default clock: wall time in integer ms since the epoch."""
    return time.time_ns() // 1_000_000


class MemoryStore:
    """The in-memory :class:`~invocation_store.adapters.InvocationStore`.

    ``clock`` returns integer ms (default: wall clock); tests inject a fake one.
    """

    def __init__(self, clock: Callable[[], int] | None = None) -> None:
        self._clock = clock or wall_clock_ms
        self._lock = threading.Lock()
        self._runs: dict[str, RunState] = {}
        self._records: dict[tuple[str, str], CanonicalRecord] = {}
        self._done: dict[str, list[str]] = {}
        self._calls: dict[str, list[str]] = {}

    def now_ms(self) -> int:
        """The injected clock's current time in ms."""
        return self._clock()

    def _now(self) -> int:
        """The store clock, read once for an operation's decision and reported (``_decided``)."""
        now = self._clock()
        report_decided_at(now)
        return now

    # -- internal reads, lock held -------------------------------------------------

    # Every operation reads the store's clock once, inside the lock, and decides with
    # it: an expired record or run reads as absent and is dropped then;
    # a run's call and completed lists lapse with the run state.

    def _run(self, run_id: str, now_ms: int) -> RunState | None:
        run = self._runs.get(run_id)
        if run is not None and lapsed(run, now_ms):
            del self._runs[run_id]
            self._done.pop(run_id, None)
            self._calls.pop(run_id, None)
            return None
        return run

    def _record(self, run_id: str, tool_call_id: str, now_ms: int) -> CanonicalRecord | None:
        record = self._records.get((run_id, tool_call_id))
        if record is not None and lapsed(record, now_ms):
            del self._records[(run_id, tool_call_id)]
            return None
        return record

    # -- runs ------------------------------------------------------------------------

    def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunState | ErrorCode:
        """Open an ACTIVE run (kernel ``open_run``); see the protocol."""
        with self._lock:
            now = self._now()
            result = open_run(
                self._run(run_id, now),
                run_id=run_id,
                now_ms=now,
                deadline_ms=deadline_ms,
                ttl_ms=ttl_ms,
                tool_call_budget=tool_call_budget,
                byte_budget=byte_budget,
            )
            if isinstance(result, RunState):
                self._runs[run_id] = result
            return result

    def _end(self, run_id: str, cancel: bool) -> RunState | ErrorCode:
        with self._lock:
            now = self._now()
            run = self._run(run_id, now)
            result = cancel_run(run, now) if cancel else close_run(run, now)
            if isinstance(result, RunState):
                self._runs[run_id] = result
            return result

    def cancel_run(self, run_id: str) -> RunState | ErrorCode:
        """ACTIVE -> CANCELLED (CIS-RUN-2)."""
        return self._end(run_id, cancel=True)

    def close_run(self, run_id: str) -> RunState | ErrorCode:
        """ACTIVE -> CLOSED (CIS-RUN-2)."""
        return self._end(run_id, cancel=False)

    def get_run(self, run_id: str) -> RunState | None:
        """The run's state, or None if unknown or expired."""
        with self._lock:
            return self._run(run_id, self._now())

    # -- records ---------------------------------------------------------------------

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        """Admit and create atomically under the lock, at the store's clock (CIS-PRE-8, CIS-STORE-10)."""
        with self._lock:
            now = self._now()
            run = self._run(request.run_id, now)
            existing = self._record(request.run_id, request.tool_call_id, now)
            result = admit(run, existing, request, limits, now)
            if isinstance(result, Admission) and not result.replayed:
                self._runs[request.run_id] = result.run
                self._records[(request.run_id, request.tool_call_id)] = result.record
                if result.append_call:
                    self._calls.setdefault(request.run_id, []).append(request.tool_call_id)
            return result

    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        """Compare-and-set keeping the expiry (CIS-STORE-3)."""
        with self._lock:
            now = self._now()
            stored = self._record(before.run_id, before.tool_call_id, now)
            effect = decide_completion(stored, before, after, self._run(after.run_id, now), now)
            if isinstance(effect, ErrorCode):
                return effect
            if effect.action is CompareAndSet.WRITE:
                self._records[(after.run_id, after.tool_call_id)] = effect.record
                if effect.run is not None:  # the run's lists live and lapse with the run state
                    self._runs[after.run_id] = effect.run
                if effect.append_done:
                    self._done.setdefault(after.run_id, []).append(after.tool_call_id)
            return effect.record

    def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        """Read one record; expired reads as absent (CIS-TTL-4, CIS-TTL-5)."""
        with self._lock:
            return self._record(run_id, tool_call_id, self._now())

    def get_many(
        self, run_id: str, tool_call_ids: Sequence[str], *, include_raw: bool = True
    ) -> Mapping[str, CanonicalRecord | None]:
        """Read several records of one run; ``include_raw=False`` omits raw (CIS-PROG-5)."""
        with self._lock:
            now = self._now()
            found = {tcid: self._record(run_id, tcid, now) for tcid in wanted_ids(tool_call_ids)}
        return read_records(run_id, tool_call_ids, found, now, include_raw=include_raw)

    def get_progress(self, run_id: str, tool_call_ids: Sequence[str]) -> Mapping[str, ProgressView | None]:
        """The progress fields of several records of one run (CIS-PERF-3); None if absent or expired."""
        with self._lock:
            now = self._now()
            found = {tcid: self._record(run_id, tcid, now) for tcid in wanted_ids(tool_call_ids)}
        return read_views(run_id, tool_call_ids, found, now)

    def completed(self, run_id: str) -> tuple[str, ...]:
        """Ordered ids of completed calls (CIS-PROG-1)."""
        with self._lock:
            if self._run(run_id, self._now()) is None:
                return ()
            return tuple(self._done.get(run_id, ()))

    def calls(self, run_id: str) -> tuple[str, ...]:
        """Ids of every record created in the run, in admission order."""
        with self._lock:
            if self._run(run_id, self._now()) is None:
                return ()
            return tuple(self._calls.get(run_id, ()))

    def ttl_remaining_ms(self, run_id: str, tool_call_id: str) -> int | None:
        """``expires_at_ms - now``; None if absent or expired."""
        with self._lock:
            now = self._now()
            return remaining_ms(self._record(run_id, tool_call_id, now), now)

    def close(self) -> None:
        """Nothing to release."""


class AsyncMemoryStore(AsyncFace):
    """asyncio face of a :class:`MemoryStore` (CIS-STORE-4); operations run inline, never blocking on I/O.

    ``store``: the MemoryStore to share (default: a new one on ``clock``), kept as ``self.sync``.
    """

    def __init__(self, store: MemoryStore | None = None, clock: Callable[[], int] | None = None) -> None:
        super().__init__(store if store is not None else MemoryStore(clock), inline)
