"""MCP Python SDK: server-side middleware that passes ``tools/call`` through the boundary (CIS-ECO-4).

An MCP ``tools/call`` request names a tool and its arguments object, but carries no
tool_call_id: the id the *model* gave the call lives in the client (the harness)
and only reaches the server if the client sends it. The channel MCP offers for that
is the request's ``_meta``: the client puts the model's tool_call_id and the run id
under :data:`TOOL_CALL_ID_KEY` and :data:`RUN_ID_KEY` (helper: :func:`call_meta`);
this middleware reads them. Absent or empty ``tool_call_id`` means
MISSING_TOOL_CALL_ID: the JSON-RPC request id is a transport counter, not the
model's id, and is never used as one (CIS-ID-6). Absent ``run_id`` means the call
names no run: RUN_MISMATCH.

:func:`boundary_call_tool` returns an ``on_call_tool`` handler for
``mcp.server.Server``. Calls of tools registered in the boundary run through it;
calls of other tools go to the ``inner`` handler when one is given (the middleware
wraps an existing server), else to the boundary, which answers UNAUTHORIZED. The
result is one text content block holding the agent view, with ``is_error`` set for
a failure.

What reaches the boundary's codes, and what cannot: an unknown tool is
UNAUTHORIZED (without ``inner``); a repeated id DUPLICATE_TOOL_CALL; arguments are
a JSON object already decoded by the SDK's JSON-RPC layer, so a duplicate member
name or a NaN in the client's request is invisible here (the SDK decodes first,
last value wins); the adapter serializes what it received.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ._extras import missing_extra

try:
    import mcp_types
    from mcp.server.context import ServerRequestContext
except ImportError as _error:  # the framework is an optional extra
    raise missing_extra(__name__, "mcp", _error) from _error

from ..kernel import RunContext, ToolCallEnvelope
from ..providers import agent_text
from ..providers._common import serialize_object
from ._common import AnyBoundary, check_boundary, invoke

__all__ = ["RUN_ID_KEY", "TOOL_CALL_ID_KEY", "boundary_call_tool", "call_meta"]

#: ``_meta`` key of the model's tool_call_id (a prefixed name, as MCP asks of extensions).
TOOL_CALL_ID_KEY = "io.github.canonical-invocation-store/tool_call_id"
#: ``_meta`` key of the harness's run id.
RUN_ID_KEY = "io.github.canonical-invocation-store/run_id"

CallToolHandler = Callable[
    [ServerRequestContext[Any], mcp_types.CallToolRequestParams], Awaitable[mcp_types.CallToolResult]
]


def call_meta(tool_call_id: str, run_id: str) -> dict[str, str]:
    """The ``_meta`` a client sends with ``tools/call``: ``client.call_tool(name, args, meta=...)``."""
    return {TOOL_CALL_ID_KEY: tool_call_id, RUN_ID_KEY: run_id}


def _text(meta: Mapping[str, Any] | None, key: str) -> str | None:
    value = None if meta is None else meta.get(key)
    return value if isinstance(value, str) and value else None


def boundary_call_tool(
    boundary: AnyBoundary,
    run: RunContext | Callable[[str | None], RunContext],
    *,
    inner: CallToolHandler | None = None,
) -> CallToolHandler:
    """An ``on_call_tool`` handler running registered tools through ``boundary`` (CIS-ECO-4).

    ``run``: the server's :class:`RunContext`, or a function of the ``_meta`` run id
    (None when absent) returning the one to use, e.g. a lookup of runs the harness
    opened. ``inner``: the handler for tools the boundary does not know.
    """
    check_boundary(boundary)

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        if inner is not None and params.name not in boundary.registry:
            return await inner(ctx, params)
        meta = params.meta if isinstance(params.meta, Mapping) else None
        run_id = _text(meta, RUN_ID_KEY)
        context = run(run_id) if callable(run) else run
        if not isinstance(context, RunContext):
            raise TypeError("the run source must give a RunContext")
        envelope = ToolCallEnvelope(
            run_id=run_id,
            tool_call_id=_text(meta, TOOL_CALL_ID_KEY),  # never ctx.request_id
            tool_name=params.name,
            arguments=(
                "{}"
                if params.arguments is None
                else serialize_object(params.arguments, boundary.limits.request_bytes)
            ),
        )
        result = await invoke(boundary, context, envelope)
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(type="text", text=agent_text(result))], is_error=not result.ok
        )

    return on_call_tool
