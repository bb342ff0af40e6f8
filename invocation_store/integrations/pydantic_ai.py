"""pydantic-ai: a ``Tool`` whose every call passes the boundary (CIS-ECO-4).

pydantic-ai hands a tool its ``RunContext`` with the call's ``tool_call_id``. The
adapter's tool is built with ``Tool.from_schema`` (pydantic-ai validates nothing
beyond JSON decoding), and it reads the raw arguments from the call's own
``ToolCallPart`` in ``ctx.messages``: the text as the provider sent it when the
part holds text (OpenAI-style providers), else the object, serialized once
deterministically (Anthropic- and Gemini-style providers), under the I-JSON rule
(CIS-ECO-2).

Fabricated ids (the rule): when a provider sends a tool call without an id,
pydantic-ai *makes one up*, ``pyd_ai_<32 hex digits>``, so that its own messages
stay linked. Such an id names no call of the model's: recording it READY would be
exactly the fallback id the boundary forbids (CIS-ID-6). The adapter therefore
treats any id starting ``pyd_ai_`` as missing: MISSING_TOOL_CALL_ID, no record, the
executor never runs. A harness whose ids legitimately start so (or that accepts
pydantic-ai's ids as its own) passes ``accept_generated_ids=True``.

What reaches the boundary's codes, and what cannot:

- duplicate member names, NaN and the like in the arguments: INVALID_ARGUMENTS
  (the raw text is checked, not pydantic-ai's parse);
- a repeated tool_call_id: DUPLICATE_TOOL_CALL;
- arguments that are not JSON at all, and unknown tool names: pydantic-ai answers
  the model itself with a retry prompt before any tool runs (no record);
- pydantic-ai's own test model (``TestModel``) always fabricates ids, so with it
  every call is MISSING_TOOL_CALL_ID unless ``accept_generated_ids=True``.
"""

from __future__ import annotations

from typing import Any

from ._extras import missing_extra

try:
    from pydantic_ai import RunContext as AgentRunContext
    from pydantic_ai import Tool
    from pydantic_ai.messages import ModelResponse, ToolCallPart
except ImportError as _error:  # the framework is an optional extra
    raise missing_extra(__name__, "pydantic-ai", _error) from _error

from ..kernel import ToolCallEnvelope
from ..providers import agent_text
from ..providers._common import serialize_object
from ._common import AnyBoundary, RunSource, check_tool, invoke, resolve_run

__all__ = ["GENERATED_ID_PREFIX", "boundary_tool"]

#: The prefix of the ids pydantic-ai generates for calls that came without one.
GENERATED_ID_PREFIX = "pyd_ai_"

_OBJECT_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": True}


def _part(context: AgentRunContext[Any]) -> ToolCallPart | None:
    """The ToolCallPart of this call in the run's messages (the latest with its id)."""
    for message in reversed(context.messages):
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, ToolCallPart) and part.tool_call_id == context.tool_call_id:
                    return part
    return None


def _arguments(part: ToolCallPart | None, parsed: dict[str, Any], request_bytes: int | None) -> str | None:
    args: object = parsed if part is None else part.args
    if args is None:
        return "{}"
    if isinstance(args, str):
        return args if args.strip() else "{}"  # pydantic-ai's own reading of an empty text
    return serialize_object(args, request_bytes)


def boundary_tool(
    boundary: AnyBoundary,
    run: RunSource,
    name: str,
    description: str,
    json_schema: dict[str, Any] | None = None,
    *,
    accept_generated_ids: bool = False,
) -> Tool[Any]:
    """A pydantic-ai ``Tool`` named ``name`` (registered in ``boundary``) (CIS-ECO-4).

    ``run``: the :class:`~invocation_store.RunContext`, or a function of
    pydantic-ai's ``RunContext`` returning it (e.g. ``lambda ctx: ctx.deps.run``).
    ``json_schema``: what the model is told about the arguments (default: any
    object). ``accept_generated_ids``: see the module docstring (default False:
    ``pyd_ai_...`` ids are MISSING_TOOL_CALL_ID). The tool returns the agent text.
    """
    check_tool(boundary, name)

    async def call(ctx: AgentRunContext[Any], **arguments: Any) -> str:
        run_context = resolve_run(run, ctx)
        tool_call_id = ctx.tool_call_id
        if isinstance(tool_call_id, str) and tool_call_id.startswith(GENERATED_ID_PREFIX):
            tool_call_id = tool_call_id if accept_generated_ids else None
        envelope = ToolCallEnvelope(
            run_id=run_context.run_id,
            tool_call_id=tool_call_id or None,
            tool_name=name,
            arguments=_arguments(_part(ctx), arguments, boundary.limits.request_bytes),
        )
        return agent_text(await invoke(boundary, run_context, envelope))

    return Tool.from_schema(
        call,
        name=name,
        description=description,
        json_schema=json_schema if json_schema is not None else dict(_OBJECT_SCHEMA),
        takes_ctx=True,
    )
