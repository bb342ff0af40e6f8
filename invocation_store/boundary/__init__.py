"""ToolBoundary: one tool call from envelope to bounded result (CIS-BND-1).

Theory of operation
-------------------
A harness registers its tools once in a :class:`ToolRegistry` (CIS-BND-3) and
passes every tool call the model makes through :meth:`ToolBoundary.invoke` (or
``await`` :meth:`AsyncToolBoundary.invoke`). The boundary owns no lifecycle rule:
every decision is the kernel's, every write the store's. It only orchestrates, in
this order (each step's failure is a code, CIS-BND-2), in one module that reads top to
bottom (:mod:`._async.pipeline`):

1. kernel ``parse_envelope`` (preflight 1-6) against the registry's policy for the tool:
   on rejection nothing is written and the executor is not called (CIS-PRE-1).
2. ``store.create`` (preflight 7-11 and the PROJECTING record, atomically in the
   store, CIS-PRE-8). Round trip 1. A replay of this call's own create (resent by
   the client library) counts as created; any other replay is DUPLICATE_TOOL_CALL
   (see "Retried creates" below).
3. ``executor(arguments)`` with the tool's ``timeout_ms`` -> raw response
   (EXECUTION_FAILED, EXECUTION_TIMEOUT, CIS-FAIL-2, CIS-FAIL-3); a non-text raw
   response is serialized as compact sorted JSON, or SERIALIZATION_FAILED
   (CIS-FAIL-4).
4. kernel ``RawReceived``: over the raw limit the record is ERROR/RESULT_TOO_LARGE,
   the raw response is not kept and the projector is never called (CIS-SIZE-3).
5. ``projector(raw, arguments)`` -> :class:`~invocation_store.kernel.Projection`
   (PROJECTION_FAILED on raise, PROJECTION_INVALID for anything not a
   Projection), then kernel ``ProjectionReceived`` (PROJECTION_INVALID,
   RESULT_TOO_LARGE, CIS-EVID-5, CIS-SIZE-4). A raw response already received
   stays in the record, harness-only (CIS-FAIL-6).
6. ``store.complete(before=created, after=final)``: one compare-and-set write that
   keeps the TTL. Round trip 2: a successful call costs exactly two store round
   trips and no extra read (CIS-STORE-9).
7. a :class:`BoundaryResult`: the bounded agent result (READY) or a code and its
   fixed message (anything else). Never the raw response, the request text, a key,
   a credential or exception text (CIS-BND-4, CIS-ERR-1).

NO_EVIDENCE is returned as it came, as a scoped negative observation
(``negative=True`` with its ``scope``): never retried, never upgraded (CIS-EVID-4).

Failure containment: no exception raised by an executor, a projector or the store
escapes :meth:`ToolBoundary.invoke`. A :class:`StoreUnavailableError` (or any other
exception from a store method) becomes STORE_UNAVAILABLE (CIS-FAIL-5). Logs carry
exception *type names* and codes only, never ``str(exc)``, payloads or keys
(CIS-ERR-2); a type name that is not a short ASCII identifier is logged as
``UnprintableType``, since a hostile class name could carry text. Exceptions that do
escape are programming errors of the caller: a non-:class:`RunContext` context, a
non-envelope, an async tool on the sync boundary, run parameters out of range
(``ValueError``: ints within ``[0, 2**53 - 1]``, ``deadline_ms + ttl_ms`` included,
CIS-RUN-1).

BaseException policy, the same on both boundaries (CIS-FAIL-2, CIS-BND-2): whatever
tool code raises is that tool's failure, ``SystemExit`` and ``KeyboardInterrupt``
included: EXECUTION_FAILED from an executor, PROJECTION_FAILED from a projector. On
the async boundary a ``CancelledError`` the tool raises of its own (from a sub-task
it cancelled, say) is likewise EXECUTION_FAILED / PROJECTION_FAILED while the task
awaiting ``invoke`` is not itself being cancelled (``cancelling() == 0``). The only
interruptions that escape ``invoke`` are the caller's own: a real cancellation of the
awaiting task (propagated after cancelling the tool's task, which is not awaited), or
a ``KeyboardInterrupt`` delivered to the calling thread while the sync boundary
waits on an executor with a time limit or on the store. A real Ctrl-C landing while
tool code runs inline in the calling thread (a sync boundary's projector, or an
executor declared with ``timeout_ms=None``) cannot be told from one the tool raised:
it is PROJECTION_FAILED (EXECUTION_FAILED for the executor). An interrupted call
leaves its record PROJECTING;
:meth:`ToolBoundary.sweep_stale` moves it to ERROR/STALE_PROJECTION later
(CIS-LIFE-7).

Text at the edge (CIS-ID-4..6, CIS-SIZE-4): a ``str`` subclass can override
``__eq__``, ``__hash__``, ``__len__`` or ``isascii`` and be one string when checked
and another when keyed, compared or measured. None gets past the boundary's edge:
every envelope field (``run_id``, ``tool_call_id``, ``tool_name``, ``arguments``),
every :class:`~invocation_store.kernel.Projection` field (``evidence_status``,
``content``, ``scope``), the run id given to ``open_run``, the id given to ``cite``
and a raw response are *copied* to an exact ``str`` of the same characters
(``str.__str__``, which no subclass method intercepts) before any check. The copy is
what is validated, stored and echoed; no overridden method is ever called. An object
that is no ``str`` at all but claims to be one through ``__class__`` counts as
missing text. Envelopes and projections are rebuilt from fields read once, so a
subclass with properties cannot answer differently later.

Retried creates (CIS-RETRY-2, CIS-BND-6): a client library may resend ``create``
after a lost reply; the store then answers ``replayed=True`` with the record the
first attempt wrote. The invocation token is drawn per call (128 random bits), so a
replay carrying *this* call's token, of a record still exactly as this request
created it (PROJECTING, no raw response, same ids, tool, request text and
``created_at_ms``), is this call's own create: the executor runs, once. Any other
replay is DUPLICATE_TOOL_CALL: a record that moved on, or a token that more than one
call of the same boundary drew (a token factory that repeats itself, concurrently or
one call after another, within the last 65,536 tokens): fail closed, so the executor
never runs twice for one key; a record left PROJECTING is swept. Repeats across
processes cannot be seen locally: tokens must be unique (CIS-RETRY-1).

Held calls (CIS-DUR-5, CIS-BND-7; :mod:`invocation_store._completion`): a completion
the store does not take within ``CompletionRetry.budget_ms`` is held with its raw
response, and a create whose outcome is unknown (STORE_UNAVAILABLE past the store's
retries, or interrupted in flight) is held with its token. The harness re-sending the
same call gets the held completion applied, or the held create sent again with its
token (recognised as this call's own create if it had landed): the executor runs
exactly once. ``pending_completions()``, ``pending_creates()``, ``finish_pending`` and
``drop_pending`` settle them.

Timeouts and workers (CIS-FAIL-3, CIS-PERF-1; per flavour in :mod:`._runner`, the
mechanics in :mod:`invocation_store._runners`): no call starts a thread of its own.
On the sync boundary an executor declared without a limit (``timeout_ms=None``)
and every projector run inline, in the calling thread; an executor with a limit
runs on a persistent worker of a process-wide pool, and the boundary waits for it ``timeout_ms``. On the async
boundary every executor and projector call runs in an asyncio task of its own,
awaited (under ``timeout_ms`` for executors): a coroutine in the loop, a sync
callable on a persistent worker. Over the limit the task is
cancelled but never awaited, so a tool that ignores cancellation cannot stretch the
call, which is EXECUTION_TIMEOUT; an abandoned task stays referenced until it ends,
and its outcome is then retrieved and discarded. Python cannot kill a thread: a
sync tool that overruns keeps its worker busy until it returns by itself, its
result discarded (the record is already ERROR/EXECUTION_TIMEOUT). That worker is
counted as hung and leaves the pool; a call that finds no idle worker starts a new
one, so a hung tool never blocks other calls, nor the loop's default executor
behind ``asyncio.to_thread``. Workers are daemon threads: they never delay
interpreter exit nor the end of ``asyncio.run``. (A coroutine that ignores
cancellation for ever does delay the end of ``asyncio.run``, which cancels and
awaits every task left.) Tools should enforce their own deadlines too.

Layout
------
One concern a module; only :mod:`._runner` is written per flavour:

- :mod:`._registry`: :class:`ToolSpec`, :class:`ToolRegistry`, the executor and
  projector types.
- :mod:`._result`: :class:`BoundaryResult`, the kernel's ``AgentView`` plus the
  provider's ids.
- :mod:`._edge`: exact ``str`` copies, raw text normalisation, ``copy_json``, the
  caller's parameter checks.
- :mod:`._core`: the state both flavours share (registry, limits, token window, the
  held-call tables, the logger) and the store-failure log lines.
- :mod:`._telemetry`: the decorator around the pipeline (the call's ids for log
  records; with an OpenTelemetry SDK, its span, phase times and metrics).
- :mod:`._runner`: how each flavour runs tool code (thread with a timeout vs task
  with a timeout), which tools it takes and how it pauses between completion
  retries, over :mod:`invocation_store._runners`.
- :mod:`._async.pipeline`: one invocation, top to bottom; :mod:`._async.boundary`:
  :class:`AsyncToolBoundary` (runs, reads, sweeps, held calls), both written once;
  :mod:`._sync.pipeline` and :mod:`._sync.boundary` (:class:`ToolBoundary`) are
  generated from them by ``scripts/unasync.py`` (never edited by hand).

Example (sync)::

    store = MemoryStore()
    registry = ToolRegistry([ToolSpec(name="search", executor=search, projector=project)])
    boundary = ToolBoundary(store, registry)
    context = boundary.open_run(
        "run-1", deadline_ms=store.now_ms() + 60_000, ttl_ms=3_600_000,
        tool_call_budget=20, byte_budget=1 << 20,
    )
    assert isinstance(context, RunContext)
    for envelope in envelopes_from_openai_chat(assistant_message, context.run_id):
        result = boundary.invoke(context, envelope)
        reply = result.content if result.ok else result.code
    report = boundary.project_progress(context)
    boundary.close_run(context)

Example (asyncio)::

    boundary = AsyncToolBoundary(AsyncMemoryStore(), registry)
    context = await boundary.open_run("run-1", deadline_ms=..., ttl_ms=..., ...)
    results = await asyncio.gather(*(boundary.invoke(context, e) for e in envelopes))
"""

from __future__ import annotations

from ._async.boundary import AsyncToolBoundary
from ._edge import copy_json as copy_json
from ._registry import AsyncExecutor, AsyncProjector, Executor, Projector, ToolRegistry, ToolSpec
from ._result import BoundaryResult
from ._sync.boundary import ToolBoundary

__all__ = [
    "AsyncExecutor",
    "AsyncProjector",
    "AsyncToolBoundary",
    "BoundaryResult",
    "Executor",
    "Projector",
    "ToolBoundary",
    "ToolRegistry",
    "ToolSpec",
]
