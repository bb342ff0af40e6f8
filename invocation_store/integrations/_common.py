"""What the framework adapters share: resolving the run and invoking either boundary."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeAlias

from ..boundary import AsyncToolBoundary, BoundaryResult, ToolBoundary
from ..kernel import RunContext, ToolCallEnvelope

__all__ = ["AnyBoundary", "RunSource", "check_boundary", "check_tool", "invoke", "resolve_run"]

#: Either boundary: adapters of async frameworks run a sync boundary in a worker thread.
AnyBoundary: TypeAlias = ToolBoundary | AsyncToolBoundary
#: The run a call belongs to: a fixed :class:`RunContext`, or a function of the framework's
#: own context object (its run context, tool context or request) returning one.
RunSource: TypeAlias = RunContext | Callable[[Any], RunContext]


def resolve_run(run: RunSource, framework_context: Any) -> RunContext:
    """The :class:`RunContext` of one call; ``TypeError`` if the source gives something else."""
    context = run(framework_context) if callable(run) else run
    if not isinstance(context, RunContext):
        raise TypeError("the run source must give a RunContext")
    return context


def check_boundary(boundary: object) -> None:
    """``TypeError`` unless ``boundary`` is a :class:`ToolBoundary` or :class:`AsyncToolBoundary`."""
    if not isinstance(boundary, ToolBoundary | AsyncToolBoundary):
        raise TypeError("boundary must be a ToolBoundary or an AsyncToolBoundary")


def check_tool(boundary: object, name: str) -> None:
    """``TypeError``/``ValueError`` unless ``boundary`` is a boundary with ``name`` registered."""
    check_boundary(boundary)
    assert isinstance(boundary, ToolBoundary | AsyncToolBoundary)
    if name not in boundary.registry:
        raise ValueError("the tool is not registered in the boundary's ToolRegistry")


async def invoke(boundary: AnyBoundary, context: RunContext, envelope: ToolCallEnvelope) -> BoundaryResult:
    """``await`` the async boundary, or run the sync one in a worker thread."""
    if isinstance(boundary, AsyncToolBoundary):
        return await boundary.invoke(context, envelope)
    return await asyncio.to_thread(boundary.invoke, context, envelope)
