"""LlamaIndex agent workflows: a ``FunctionTool`` whose every call passes the boundary (CIS-ECO-4, CIS-ECO-8).

A LlamaIndex tool is called with its arguments only: the agent's ``call_tool``
step holds the call's ``ToolCall`` event (``tool_id``, ``tool_name``) but hands the
tool ``tool_kwargs`` alone. :class:`ToolCallIds` is a mixin whose ``call_tool`` step
makes the event's id visible to the boundary tools it runs (a context variable,
set for that one call); :class:`BoundaryFunctionAgent` is ``FunctionAgent`` with
it. A :func:`boundary_tool` run by any other agent sees no id:
MISSING_TOOL_CALL_ID, no record, the tool never runs. The one-line hook for
another agent class: ``class MyAgent(ToolCallIds, FunctionAgent): ...``.

Invented ids (checked against llama-index-core 0.14.25 and its provider
packages):

- ``ReActAgent`` and ``CodeActAgent`` parse calls out of the model's text and give
  each ``str(uuid.uuid4())``: there is no model id at all, so :class:`ToolCallIds`
  passes none on for them (every call MISSING_TOOL_CALL_ID);
- ``FunctionAgent`` takes the ids its LLM class reads: the provider's for
  llama-index-llms-openai and -anthropic (``""`` when absent);
  llama-index-llms-ollama uses *the tool name* (Ollama sends no ids), and
  llama-index-llms-google-genai the tool name when Gemini/Vertex sent no id
  (``tool_call_id or tool_name``). :func:`llama_index_tool_call_id` makes an empty
  id and an id equal to the tool's name missing.

The arguments: LlamaIndex decodes the model's text before the tool runs (its
``ToolSelection.tool_kwargs`` is a dict; a partial or broken JSON text becomes
``{}`` in some LLM classes), so the tool serializes the object it gets, measured
against the request limit, under the I-JSON rule (CIS-ECO-2): a duplicate member
name has collapsed, and a truncated text may arrive as ``{}``.

Requires ``pip install 'canonical-invocation-store[llama-index]'``.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from ._extras import missing_extra

try:
    from llama_index.core.agent.workflow import (
        BaseWorkflowAgent,
        CodeActAgent,
        FunctionAgent,
        ReActAgent,
        ToolCall,
        ToolCallResult,
    )
    from llama_index.core.tools import FunctionTool, ToolMetadata
    from llama_index.core.workflow import Context, step
    from pydantic import BaseModel, ConfigDict
except ImportError as _error:  # the framework is an optional extra
    raise missing_extra(__name__, "llama-index", _error) from _error

from ..kernel import ToolCallEnvelope
from ..providers import agent_text
from ..providers._common import serialize_object
from ._common import AnyBoundary, RunSource, check_tool, invoke, resolve_run

__all__ = ["BoundaryFunctionAgent", "ToolCallIds", "boundary_tool", "llama_index_tool_call_id"]

#: The call a ``ToolCallIds`` agent is running: (workflow context, tool_id or None, tool_name).
_CURRENT: ContextVar[tuple[Any, str | None, str] | None] = ContextVar(
    "invocation_store_llama_index_call", default=None
)

#: Agents whose every id is invented (text-parsed calls).
_TEXT_PARSED = (ReActAgent, CodeActAgent)


def llama_index_tool_call_id(tool_id: object, tool_name: object) -> str | None:
    """The model's id, or None when absent, empty or the tool's name (what LlamaIndex puts there)."""
    if not isinstance(tool_id, str) or tool_id in ("", tool_name):
        return None
    return tool_id


class ToolCallIds:
    """Mixin for a LlamaIndex agent workflow: its boundary tools see each call's ``tool_id``.

    Put it first: ``class MyAgent(ToolCallIds, FunctionAgent): ...``. For
    ``ReActAgent``/``CodeActAgent`` subclasses no id is passed on (theirs are uuid4s).
    Only for a single agent (a ``BaseWorkflowAgent``): an ``AgentWorkflow`` runs its
    agents' calls in its own step, and a ReAct agent among them would pass its
    invented ids, so a subclass of anything else raises ``TypeError``.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not issubclass(cls, BaseWorkflowAgent):
            raise TypeError("ToolCallIds is a mixin for a single LlamaIndex agent (FunctionAgent)")

    @step  # type: ignore[untyped-decorator]  # llama-index is untyped where mypy runs
    async def call_tool(self, ctx: Context, ev: ToolCall) -> ToolCallResult:
        """LlamaIndex's own ``call_tool`` step, with the call's id visible to boundary tools."""
        tool_id = None if isinstance(self, _TEXT_PARSED) else ev.tool_id
        token = _CURRENT.set((ctx, tool_id, ev.tool_name))
        try:
            return await super().call_tool(ctx, ev)  # type: ignore[misc]  # the agent class after the mixin
        finally:
            _CURRENT.reset(token)


class BoundaryFunctionAgent(ToolCallIds, FunctionAgent):  # type: ignore[misc]  # untyped where mypy runs
    """``FunctionAgent`` whose boundary tools are keyed by the model's call ids."""


class _AnyObject(BaseModel):
    """Any object: the boundary, not pydantic, checks the arguments."""

    model_config = ConfigDict(extra="allow")


def boundary_tool(
    boundary: AnyBoundary,
    run: RunSource,
    name: str,
    description: str,
    fn_schema: type[BaseModel] | None = None,
) -> FunctionTool:
    """A LlamaIndex ``FunctionTool`` named ``name`` (registered in ``boundary``) (CIS-ECO-4).

    Run it with a :class:`ToolCallIds` agent (:class:`BoundaryFunctionAgent`); run
    by another, every call is MISSING_TOOL_CALL_ID. ``run``: the
    :class:`~invocation_store.RunContext`, or a function of the workflow ``Context``
    (None outside a ``ToolCallIds`` agent) returning it. ``fn_schema``: the pydantic
    model the LLM is told about (default: any object). The tool returns the agent
    text. Raises ``TypeError``/``ValueError`` if the tool is not registered.
    """
    check_tool(boundary, name)

    async def call(**arguments: Any) -> str:
        current = _CURRENT.get()
        workflow_context, tool_id, tool_name = current if current is not None else (None, None, name)
        run_context = resolve_run(run, workflow_context)
        envelope = ToolCallEnvelope(
            run_id=run_context.run_id,
            tool_call_id=llama_index_tool_call_id(tool_id, tool_name) if tool_name == name else None,
            tool_name=name,
            arguments=serialize_object(arguments, boundary.limits.request_bytes),
        )
        return agent_text(await invoke(boundary, run_context, envelope))

    metadata = ToolMetadata(name=name, description=description, fn_schema=fn_schema or _AnyObject)
    return FunctionTool(async_fn=call, metadata=metadata)
