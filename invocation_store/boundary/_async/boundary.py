"""The boundary class, written once as asyncio code (CIS-BND-1).

``scripts/unasync.py`` generates the synchronous :class:`ToolBoundary` from this
module: coroutine functions become functions, ``await`` goes, and names lose their
``Async`` and ``async_`` prefixes. One call is :mod:`.pipeline`'s, read top to bottom
there; this class holds the state (:class:`~.._core.Core`) and the run-level
operations, reads and sweeps. The only code written per flavour is in :mod:`.._runner`
(how tool code runs and which tools a flavour takes). Text here is worded to be true
of both flavours once generated.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from ..._completion import DEFAULT_COMPLETION_RETRY, CompletionRetry
from ...adapters import AsyncInvocationStore, StoreUnavailableError
from ...adapters._progress import async_progress_reader
from ...adapters._protocol import CorruptRecordError
from ...kernel import (
    CanonicalRecord,
    Citation,
    ErrorCode,
    Limits,
    ProgressReport,
    RunContext,
    RunState,
    SweptStale,
    ToolCallEnvelope,
    cite,
    is_safe_id,
    project_progress,
    sweep_candidates,
    transition,
)
from .. import _telemetry
from .._core import DEFAULT_LIMITS, Core, new_token, unavailable
from .._edge import check_context, check_older_than, check_run_parameters, exact_text
from .._registry import ToolRegistry
from .._result import BoundaryResult
from .._runner import AsyncStoreMethod, async_check_tool
from .._telemetry import NO_WATCH
from . import pipeline

__all__ = ["AsyncToolBoundary"]

T = TypeVar("T")


async def _store(method: AsyncStoreMethod[T], *args: Any, **kwargs: Any) -> T:
    """Call a store method; any exception it raises becomes a safe StoreUnavailableError (CIS-FAIL-5)."""
    try:
        return await method(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - any store failure is STORE_UNAVAILABLE
        raise unavailable(exc) from None


class AsyncToolBoundary(Core):
    """The boundary harnesses call for every tool call (CIS-BND-1, CIS-BND-5).

    ``store``: an :class:`~invocation_store.adapters.AsyncInvocationStore`
    (AsyncMemoryStore, AsyncRedisStore or your own). ``registry``: the harness's
    tools; which kinds of callable this boundary runs, and how, is
    :func:`~invocation_store.boundary._runner.async_run_tool`'s and
    :func:`~invocation_store.boundary._runner.async_check_tool`'s (the latter raises
    ``TypeError`` for a tool this boundary cannot run). ``limits``: byte limits (UTF-8
    bytes). ``token_factory``: draws the per-invocation retry token (CIS-RETRY-1; never
    an id, never derived from one). ``logger``: where type names and codes are logged
    (default ``invocation_store.boundary``). ``completion_retry``: how long a
    completion the store refuses to take is retried before it is held (CIS-DUR-5).

    Concurrent ``invoke`` calls of one run (from threads, or tasks of one loop) are
    safe when the store is: the store decides duplicates and budgets atomically
    (CIS-RUN-5).
    """

    def __init__(
        self,
        store: AsyncInvocationStore,
        registry: ToolRegistry,
        *,
        limits: Limits = DEFAULT_LIMITS,
        token_factory: Callable[[], str] = new_token,
        logger: logging.Logger | None = None,
        completion_retry: CompletionRetry = DEFAULT_COMPLETION_RETRY,
    ) -> None:
        super().__init__(registry, limits, token_factory, logger, completion_retry)
        self.store = store
        for name in registry.names():
            tool = registry.get(name)
            assert tool is not None
            async_check_tool(tool)

    def now_ms(self) -> int:
        """The store's clock in integer ms (for absolute deadlines: ``now_ms() + budget``).

        A store on a shared server's clock that has not read it yet (an asyncio Redis
        store before its first round trip) answers the host's clock here: take a
        deadline's base from the store's ``synced_now_ms()`` then. No decision of this
        boundary compares times with this value (CIS-STORE-10).
        """
        return self.store.now_ms()

    # -- runs -----------------------------------------------------------------------

    @_telemetry.observed_run
    async def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunContext | ErrorCode:
        """Open an ACTIVE run and return its :class:`RunContext` (CIS-RUN-1).

        ``deadline_ms`` is absolute (epoch ms, e.g. ``boundary.now_ms() + 60_000``);
        calls at or after it are RUN_DEADLINE_EXCEEDED (CIS-RUN-4). ``ttl_ms`` is the
        TTL every record of the run gets at creation (CIS-TTL-1); ``tool_call_budget``
        the most calls admitted (CIS-RUN-5); ``byte_budget`` the run's cumulative UTF-8
        bytes (CIS-RUN-6). Budgets are enforced atomically in the store, so worker
        processes sharing the run cannot overspend it.

        Domain failures are returned, never raised: RUN_MISMATCH for an unsafe run id,
        INVALID_TRANSITION for a live run opened with other parameters (reopening with
        the same ones returns the same context, CIS-RETRY-3), STORE_UNAVAILABLE when
        the store fails. Raises ``ValueError`` (programming errors) for a parameter
        that is not an int, a negative deadline or budget, a non-positive TTL, any
        value above ``2**53 - 1`` or ``deadline_ms + ttl_ms`` above it (the largest
        integer every store keeps exactly, kernel ``MAX_SAFE_INT``).
        """
        check_run_parameters(deadline_ms, ttl_ms, tool_call_budget, byte_budget)
        run_id = exact_text(run_id)
        if not is_safe_id(run_id):
            return ErrorCode.RUN_MISMATCH
        try:
            result = await _store(
                self.store.open_run,
                run_id,
                deadline_ms=deadline_ms,
                ttl_ms=ttl_ms,
                tool_call_budget=tool_call_budget,
                byte_budget=byte_budget,
            )
        except StoreUnavailableError as exc:
            return self.store_failed(exc, "open_run")
        return result if isinstance(result, ErrorCode) else RunContext(run_id=run_id)

    @_telemetry.observed_run
    async def cancel_run(self, context: RunContext) -> RunState | ErrorCode:
        """ACTIVE -> CANCELLED; later calls are RUN_INACTIVE (CIS-RUN-2, CIS-RUN-3).

        Returns the new run state, or RUN_INACTIVE (unknown or expired run),
        INVALID_TRANSITION (already cancelled or closed), STORE_UNAVAILABLE. Calls
        already running finish normally.
        """
        return await self._end_run(self.store.cancel_run, "cancel_run", context)

    @_telemetry.observed_run
    async def close_run(self, context: RunContext) -> RunState | ErrorCode:
        """ACTIVE -> CLOSED; later calls are RUN_INACTIVE (CIS-RUN-2, CIS-RUN-3).

        Same returns as :meth:`cancel_run`. Records are kept: progress and citations
        still read them until their TTL.
        """
        return await self._end_run(self.store.close_run, "close_run", context)

    async def _end_run(
        self, end: AsyncStoreMethod[RunState | ErrorCode], operation: str, context: RunContext
    ) -> RunState | ErrorCode:
        """``end(run_id)`` (the store's cancel_run or close_run); a store failure is its code."""
        context = check_context(context)
        try:
            return await _store(end, context.run_id)
        except StoreUnavailableError as exc:
            return self.store_failed(exc, operation)

    # -- one call -------------------------------------------------------------------

    async def invoke(self, context: RunContext, envelope: ToolCallEnvelope) -> BoundaryResult:
        """Run one tool call from envelope to bounded result (CIS-BND-1, CIS-BND-2).

        ``context`` is the harness's explicit run (the source of truth for the run id,
        CIS-PRE-3); ``envelope`` the call as the model framework produced it (see
        :mod:`invocation_store.providers`). Returns a :class:`BoundaryResult`: every
        executor, projector and store failure is a code in it, never an exception
        (CIS-FAIL-1). A rejected call writes nothing and never reaches the executor
        (CIS-PRE-1); the executor runs at most once per (run, tool_call_id)
        (CIS-BND-6), and once when the store client resent this call's create
        (CIS-RETRY-2) or when the harness re-sends a call whose create had an unknown
        outcome (:meth:`pending_creates`, CIS-BND-7). A success costs two store round
        trips: create, complete. The steps are :mod:`.pipeline`'s, in order.
        Envelope text is read as exact ``str`` copies (package docstring, "Text at
        the edge"). How the executor and projector run, and which interruptions
        escape, is :func:`~invocation_store.boundary._runner.async_run_tool`'s
        (CIS-FAIL-2, CIS-FAIL-3): an interrupted call leaves its record PROJECTING,
        for :meth:`sweep_stale`.

        Raises ``TypeError`` only for programming errors: a context that is not a
        RunContext, an envelope that is not a ToolCallEnvelope, a tool this boundary
        does not run (:func:`~invocation_store.boundary._runner.async_check_tool`), a
        token factory returning a non-string.
        """
        return await pipeline.invoke(self, self.store, context, envelope)

    # -- held calls -----------------------------------------------------------------

    async def finish_pending(self, context: RunContext) -> dict[str, BoundaryResult]:
        """Apply every completion this boundary holds for the run; results by tool_call_id (CIS-DUR-5).

        A completion the store takes (or answers with a code, e.g. INVALID_TRANSITION
        after a sweep) is no longer held; one that still fails stays held and its
        result is STORE_UNAVAILABLE. See :meth:`pending_completions`.
        """
        context = check_context(context)
        results: dict[str, BoundaryResult] = {}
        for _, tool_call_id in self.completions.keys(context.run_id):
            held = self.completions.get(context.run_id, tool_call_id)
            if held is not None:
                results[tool_call_id] = await pipeline.finish_held(self, self.store, held, None, NO_WATCH)
        return results

    # -- reads ----------------------------------------------------------------------

    @_telemetry.observed_run
    async def project_progress(self, context: RunContext) -> ProgressReport:
        """The run's completed calls as bounded observed facts (CIS-PROG-1..5).

        Reads the run's ordered completed ids (the tracker keeps identities only),
        resolves them in ONE batched read of only the fields facts need (the store's
        ``get_progress``, else ``get_many`` without raw responses, CIS-PERF-3), and lets the
        kernel keep READY records of this run in execution order, capped by
        ``limits.max_facts`` and ``limits.max_fact_bytes`` (a fact that does not fit
        is omitted whole, never truncated). Missing, expired, other-run, PROJECTING
        and ERROR identities are counted by reason in ``excluded``; NO_EVIDENCE facts
        are marked ``negative``. Raises :class:`StoreUnavailableError` (fixed, safe
        message) if the store fails.
        """
        context = check_context(context)
        run_id = context.run_id
        try:
            identities = await _store(self.store.completed, run_id)
            reader = async_progress_reader(self.store)
            records = await _store(reader, run_id, identities) if identities else {}
            now_ms = await pipeline.store_clock(self.store)
        except StoreUnavailableError as exc:
            raise self.store_failed_raise(exc, "progress") from None
        return project_progress(run_id, identities, records, now_ms, self.limits)

    @_telemetry.observed_run
    async def cite(self, context: RunContext, tool_call_id: str) -> Citation:
        """May the agent cite this call? (CIS-REF-1..3).

        READY + EVIDENCE_FOUND of this run: EVIDENCE with its content and scope;
        READY + NO_EVIDENCE: NEGATIVE_OBSERVATION with its scope; anything else
        (ERROR, PROJECTING, missing, expired, other run, unsafe id):
        NOT_REFERENCABLE with its reason. An unsafe id is answered without touching
        the store, as NOT_REFERENCABLE/UNSAFE_ID with ``tool_call_id`` None: its text is
        never echoed (CIS-ERR-1). A ``str`` subclass id is read as
        an exact copy of its characters. Never raw data. Raises
        :class:`StoreUnavailableError` if the store fails.
        """
        context = check_context(context)
        tool_call_id = exact_text(tool_call_id)
        if not is_safe_id(tool_call_id):
            return cite(context.run_id, tool_call_id, None, 0)
        try:
            record = await _store(self.store.get, context.run_id, tool_call_id)
            now_ms = await pipeline.store_clock(self.store)
        except StoreUnavailableError as exc:
            raise self.store_failed_raise(exc, "cite") from None
        return cite(context.run_id, tool_call_id, record, now_ms)

    @_telemetry.observed_run
    async def sweep_stale(self, context: RunContext, older_than_ms: int) -> int:
        """Move this run's PROJECTING records at least ``older_than_ms`` old to ERROR (CIS-LIFE-7).

        The candidates are kernel ``sweep_candidates`` (the run's live PROJECTING
        records); each becomes ERROR/STALE_PROJECTION through the kernel's SweptStale
        event and one compare-and-set (a raw response it held stays, harness-only);
        younger records are left alone (NOT_STALE). A worker completing concurrently
        either wins its compare-and-set or gets INVALID_TRANSITION, never both writes.
        A corrupt record (no TTL, a foreign type: :class:`CorruptRecordError`) is
        logged by tool_call_id and cause, left as it is, and the sweep carries on with
        the rest of the run (CIS-DUR-7). Returns the number of records swept. Raises
        :class:`StoreUnavailableError` if the store fails, ``ValueError`` for a negative age.
        """
        context = check_context(context)
        check_older_than(older_than_ms)
        run_id = context.run_id
        swept = 0
        corrupt: dict[str, str] = {}
        try:
            # An id re-admitted after its record expired is listed twice: sweep it once.
            ids = tuple(dict.fromkeys(await _store(self.store.calls, run_id)))
            try:
                records = await _store(self.store.get_many, run_id, ids) if ids else {}
            except CorruptRecordError as exc:  # carry on with the rest of the run
                corrupt.update(exc.corrupt)
                records = exc.readable
            listed = [records.get(tool_call_id) for tool_call_id in ids]
            now_ms = await pipeline.store_clock(self.store) if ids else 0
            candidates = sweep_candidates(listed, run_id, now_ms) if ids else ()
            for record in candidates:
                event = SweptStale(now_ms=await pipeline.store_clock(self.store), older_than_ms=older_than_ms)
                after = transition(record, event, self.limits)
                if isinstance(after, ErrorCode):
                    continue  # NOT_STALE, or expired meanwhile
                try:
                    stored = await _store(self.store.complete, record, after)
                except CorruptRecordError as exc:
                    corrupt.update(exc.corrupt)
                    continue
                if isinstance(stored, CanonicalRecord):
                    swept += 1
        except StoreUnavailableError as exc:
            raise self.store_failed_raise(exc, "sweep") from None
        self.corrupt_found(run_id, corrupt)
        return self.swept(swept)
