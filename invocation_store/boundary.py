"""ToolBoundary: one tool call from envelope to bounded result (CIS-BND-1).

CONTRACT SKELETON: signatures and docstrings are fixed; bodies are being filled in.

Flow of :meth:`ToolBoundary.invoke` (each step's failure is a code, CIS-BND-2):
1. ``check_envelope`` (preflight 1-6) against the registry's policy: nothing written,
   executor not called on rejection.
2. ``store.create`` (preflight 7-11 + PROJECTING record, atomically).
3. executor(arguments) with the tool's timeout -> raw text (EXECUTION_FAILED,
   EXECUTION_TIMEOUT, SERIALIZATION_FAILED).
4. kernel RawReceived (RESULT_TOO_LARGE: raw not stored, projector not called).
5. projector(raw, arguments) -> Projection (PROJECTION_FAILED on raise), kernel
   ProjectionReceived (PROJECTION_INVALID, RESULT_TOO_LARGE).
6. ``store.complete`` (compare-and-set, TTL kept) -> READY or ERROR.
7. return :class:`BoundaryResult`: bounded content or a code, never raw data.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeAlias

from attrs import frozen

from .kernel import ErrorCode, EvidenceStatus, Projection, ToolPolicy

__all__ = [
    "AsyncExecutor",
    "AsyncProjector",
    "BoundaryResult",
    "Executor",
    "Projector",
    "ToolRegistry",
    "ToolSpec",
]

#: A sync executor: parsed arguments (a JSON object) -> raw response. A ``str`` is
#: stored as-is; any other value is serialized as compact sorted JSON, and a value
#: that cannot be is SERIALIZATION_FAILED.
Executor: TypeAlias = Callable[[Mapping[str, Any]], object]
#: An async executor, same contract.
AsyncExecutor: TypeAlias = Callable[[Mapping[str, Any]], Awaitable[object]]
#: A sync projector: (raw response text, parsed arguments) -> Projection.
Projector: TypeAlias = Callable[[str, Mapping[str, Any]], Projection]
#: An async projector, same contract.
AsyncProjector: TypeAlias = Callable[[str, Mapping[str, Any]], Awaitable[Projection]]


@frozen(kw_only=True)
class ToolSpec:
    """A tool registered once with a harness (CIS-BND-3).

    ``executor``/``projector`` may be sync or async callables (the async boundary
    accepts both; the sync boundary only sync). ``timeout_ms`` bounds the executor.
    """

    name: str
    executor: Executor | AsyncExecutor
    projector: Projector | AsyncProjector
    authorized: bool = True
    read_only: bool = True
    timeout_ms: int = 30_000

    @property
    def policy(self) -> ToolPolicy:
        """The kernel's view of this tool (CIS-PRE-5, CIS-PRE-6)."""
        return ToolPolicy(
            name=self.name, authorized=self.authorized, read_only=self.read_only, timeout_ms=self.timeout_ms
        )


class ToolRegistry:
    """Tools by name. ``register`` raises ``ValueError`` for a name registered twice."""

    def __init__(self, tools: list[ToolSpec] | None = None) -> None:
        self._tools: dict[str, ToolSpec] = {}
        for tool in tools or []:
            self.register(tool)

    def register(self, tool: ToolSpec) -> ToolSpec:
        """Add ``tool``; returns it."""
        if tool.name in self._tools:
            raise ValueError("tool already registered")
        self._tools[tool.name] = tool
        return tool

    def get(self, name: object) -> ToolSpec | None:
        """The tool named ``name``, or None (unknown tools are UNAUTHORIZED)."""
        return self._tools.get(name) if isinstance(name, str) else None

    def names(self) -> tuple[str, ...]:
        """Registered names, in registration order."""
        return tuple(self._tools)


@frozen(kw_only=True)
class BoundaryResult:
    """What the agent sees of one tool call (CIS-BND-4, CIS-ERR-1).

    Success: ``ok`` True, ``evidence_status`` EVIDENCE_FOUND or NO_EVIDENCE,
    ``content`` the bounded agent result, ``scope`` what was searched, ``negative``
    True for NO_EVIDENCE (a scoped negative observation, never upgraded or retried).
    Failure: ``ok`` False, ``code`` from :class:`ErrorCode`, ``message`` its fixed
    text. ``tool_call_id`` is echoed only when it is a safe id. Never raw data,
    request text, keys, credentials or exception text.
    """

    ok: bool
    tool_call_id: str | None
    code: ErrorCode | None = None
    message: str | None = None
    evidence_status: EvidenceStatus | None = None
    content: str | None = None
    scope: str | None = None
    negative: bool = False
