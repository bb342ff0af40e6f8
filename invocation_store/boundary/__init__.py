"""ToolBoundary: one tool call from envelope to bounded result (CIS-BND-1).

A harness registers its tools once in a :class:`ToolRegistry` and passes every tool
call through :meth:`ToolBoundary.invoke` (or ``await`` :meth:`AsyncToolBoundary.invoke`).
The boundary owns no lifecycle rule: every decision is the kernel's, every write the
store's; it orchestrates and turns every failure into a code. What it does and
promises (the steps, failures and exceptions, text at the edge, retried creates, held
calls, timeouts and workers) is told in ``docs/boundary.md``; each module below states
its own part.

Layout
------
One concern a module; only :mod:`._runner` is written per flavour:

- :mod:`._async.pipeline`: one invocation, top to bottom (the steps, in the order
  they run); :mod:`._async.boundary`: :class:`AsyncToolBoundary` (runs, reads,
  sweeps, held calls), both written once; :mod:`._sync.pipeline` and
  :mod:`._sync.boundary` (:class:`ToolBoundary`) are generated from them by
  ``scripts/unasync.py`` (never edited by hand).
- :mod:`._registry`: :class:`ToolSpec`, :class:`ToolRegistry`, the executor and
  projector types.
- :mod:`._result`: :class:`BoundaryResult`, the kernel's ``AgentView`` plus the
  provider's ids.
- :mod:`._edge`: exact ``str`` copies, raw text normalisation, ``copy_json``, the
  caller's parameter checks.
- :mod:`._core`: the state both flavours share (registry, limits, token window, the
  held-call tables, the logger) and the store-failure log lines; the held calls
  themselves are :mod:`invocation_store._completion`'s.
- :mod:`._telemetry`: the decorator around the pipeline (the call's ids for log
  records; with an OpenTelemetry SDK, its span, phase times and metrics).
- :mod:`._runner`: how each flavour runs tool code (thread with a timeout vs task
  with a timeout), which tools it takes and how it pauses between completion
  retries, over :mod:`invocation_store._runners`.
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
