"""OpenAI Agents SDK: a ``FunctionTool`` whose every call passes the boundary (CIS-ECO-4).

The Agents SDK is the best fit of the frameworks: its ``on_invoke_tool`` receives a
``ToolContext`` holding the model's ``tool_call_id`` and the raw ``tool_arguments``
text, exactly as the model wrote them. :func:`boundary_function_tool` builds the
``FunctionTool``; each call becomes an envelope with that id and that text, runs
through the boundary, and the model reads the agent view of the result
(:func:`~invocation_store.providers.agent_text`). Failures are results, not
exceptions: the SDK's failure handler never sees one.

What reaches the boundary's codes, and what cannot:

- arguments that are not an I-JSON object (bad JSON, duplicate names, NaN):
  INVALID_ARGUMENTS; the SDK passes the raw text unparsed;
- a repeated tool_call_id: within one ``Runner`` run the SDK refuses it itself
  (``ModelBehaviorError``) before any tool runs; across ``Runner`` runs of one
  harness run it reaches the boundary: DUPLICATE_TOOL_CALL, the executor not run;
- an id the SDK made up: the SDK's placeholder ``__fake_id__`` (it uses it for
  *item* ids when converting Chat Completions output) is treated as a missing id,
  MISSING_TOOL_CALL_ID, as is an empty id;
- a tool name the agent does not have: the SDK itself refuses it
  (``ModelBehaviorError``) before any tool runs; no record is written.

The SDK calls tools from asyncio only: an :class:`AsyncToolBoundary` is awaited, a
sync :class:`ToolBoundary` runs in a worker thread.
"""

from __future__ import annotations

from typing import Any

from ._extras import missing_extra

try:
    from agents import FunctionTool
    from agents.models.fake_id import FAKE_RESPONSES_ID
    from agents.tool_context import ToolContext
except ImportError as _error:  # the framework is an optional extra
    raise missing_extra(__name__, "openai-agents", _error) from _error

from ..kernel import ToolCallEnvelope
from ..providers import agent_text
from ._common import AnyBoundary, RunSource, check_tool, invoke, resolve_run

__all__ = ["boundary_function_tool"]

_OBJECT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": True}


def _tool_call_id(context: ToolContext[Any]) -> str | None:
    tool_call_id = context.tool_call_id
    if not isinstance(tool_call_id, str) or tool_call_id in ("", FAKE_RESPONSES_ID):
        return None
    return tool_call_id


def boundary_function_tool(
    boundary: AnyBoundary,
    run: RunSource,
    name: str,
    description: str,
    params_json_schema: dict[str, Any] | None = None,
    *,
    strict_json_schema: bool = False,
) -> FunctionTool:
    """A ``FunctionTool`` named ``name`` (a tool registered in ``boundary``) (CIS-ECO-4).

    ``run``: the :class:`RunContext`, or a function of the SDK's ``ToolContext``
    returning it (e.g. ``lambda ctx: ctx.context.run`` when the run lives in the
    agent's context object). ``params_json_schema``: what the model is told about
    the arguments (default: any object); the boundary, not the SDK, checks them.
    Raises ``TypeError``/``ValueError`` if the tool is not registered.
    """
    check_tool(boundary, name)

    async def on_invoke_tool(context: ToolContext[Any], arguments: str) -> str:
        run_context = resolve_run(run, context)
        envelope = ToolCallEnvelope(
            run_id=run_context.run_id,
            tool_call_id=_tool_call_id(context),
            tool_name=name,
            arguments=arguments,
        )
        return agent_text(await invoke(boundary, run_context, envelope))

    return FunctionTool(
        name=name,
        description=description,
        params_json_schema=params_json_schema if params_json_schema is not None else dict(_OBJECT_SCHEMA),
        on_invoke_tool=on_invoke_tool,
        strict_json_schema=strict_json_schema,
    )
