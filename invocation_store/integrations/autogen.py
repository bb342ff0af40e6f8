"""AutoGen (``autogen-agentchat`` / ``autogen-core`` 0.7): a tool whose every call passes the boundary.

CIS-ECO-4, CIS-ECO-8.

AutoGen hands a tool its call's id: ``AssistantAgent`` runs a tool through its
workbench as ``tool.run_json(arguments, cancellation_token, call_id=...)``, with
``call_id`` the ``FunctionCall.id`` of the model client's ``CreateResult``.
:class:`BoundaryTool` is an ``autogen_core.tools.BaseTool`` whose ``run_json``
builds the envelope from that id and the arguments, runs it through the boundary
and returns the agent text (:func:`~invocation_store.providers.agent_text`).

Invented ids (checked against autogen-agentchat / autogen-ext 0.7.5): the OpenAI,
Anthropic, Azure and llama.cpp clients pass the provider's id. The Ollama client
(``OllamaChatCompletionClient``) invents one: a per-client counter, the same
decimal string (``"0"``, ``"1"``, ...) for every call of one response, counting
responses; its first two calls of one response would share a key
(DUPLICATE_TOOL_CALL) and a counter names no call of the model's. Streamed
OpenAI/Azure deltas start from the placeholder ``""``, and the Semantic Kernel
adapter uses ``"unknown_id"`` for a call without one. :func:`autogen_tool_call_id`
makes all of these missing ids: MISSING_TOOL_CALL_ID, no record, the tool never
runs. No provider this library knows sends an all-digit id.

What reaches the boundary's codes, and what cannot:

- the arguments: ``AssistantAgent`` decodes the model's arguments text itself
  (``json.loads``) before any tool runs, so the tool gets an object: it is
  serialized, measured against the request limit, under the I-JSON rule
  (CIS-ECO-2); a duplicate member name has already collapsed (the last one wins,
  as in ``json.loads``), and arguments that are not JSON are answered by AutoGen
  (``Error: ...``) without calling the tool, so no record is written;
- a repeated provider id: DUPLICATE_TOOL_CALL, the executor not run;
- an unknown tool name: AutoGen answers it (``tool ... not found``), no record.

Requires ``pip install 'canonical-invocation-store[autogen]'``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._extras import missing_extra

try:
    from autogen_core import CancellationToken
    from autogen_core.tools import BaseTool, ParametersSchema, ToolSchema
    from pydantic import BaseModel, ConfigDict
except ImportError as _error:  # the framework is an optional extra
    raise missing_extra(__name__, "autogen", _error) from _error

from ..kernel import RunContext, ToolCallEnvelope
from ..providers import agent_text
from ..providers._common import serialize_object
from ._common import AnyBoundary, RunSource, check_tool, invoke, resolve_run

__all__ = ["PLACEHOLDER_IDS", "BoundaryTool", "autogen_tool_call_id", "boundary_tool"]

#: Ids AutoGen's clients put on a call that came without one (besides the Ollama counter).
PLACEHOLDER_IDS = frozenset({"", "unknown_id"})


def autogen_tool_call_id(call_id: object) -> str | None:
    """The model's id, or None when absent or invented by AutoGen (module docstring).

    None for a non-string, for :data:`PLACEHOLDER_IDS` and for an all-ASCII-digit id
    (the Ollama client's response counter); any other string is returned unchanged
    (the boundary's preflight still judges whether it is a safe id).
    """
    if not isinstance(call_id, str) or call_id in PLACEHOLDER_IDS:
        return None
    if call_id.isascii() and call_id.isdigit():
        return None
    return call_id


class _Arguments(BaseModel):
    """Any object: the boundary, not pydantic, checks the arguments."""

    model_config = ConfigDict(extra="allow")


class BoundaryTool(BaseTool[_Arguments, str]):  # type: ignore[misc]  # autogen-core is untyped where mypy runs
    """An AutoGen tool running through the boundary; build it with :func:`boundary_tool`."""

    def __init__(
        self,
        boundary: AnyBoundary,
        run: RunSource,
        name: str,
        description: str,
        parameters: dict[str, Any],
    ) -> None:
        super().__init__(_Arguments, str, name, description)
        self._boundary = boundary
        self._run = run
        self._parameters = parameters

    @property
    def schema(self) -> ToolSchema:
        """What the model is told: the name, the description and the parameters schema given."""
        parameters = ParametersSchema(
            type="object",
            properties=dict(self._parameters.get("properties", {})),
            required=list(self._parameters.get("required", [])),
            additionalProperties=bool(self._parameters.get("additionalProperties", True)),
        )
        return ToolSchema(name=self.name, description=self.description, parameters=parameters, strict=False)

    async def run_json(
        self, args: Mapping[str, Any], cancellation_token: CancellationToken, call_id: str | None = None
    ) -> str:
        """One call: the envelope of ``call_id`` (:func:`autogen_tool_call_id`) and ``args``.

        Returns the agent text (a JSON object: the bounded result, or the code and
        its fixed message); never raises for a refused call.
        """
        context = resolve_run(self._run, cancellation_token)
        return await self._invoke(context, autogen_tool_call_id(call_id), args)

    async def run(self, args: _Arguments, cancellation_token: CancellationToken) -> str:
        """A call without an id (AutoGen's agents use :meth:`run_json`): MISSING_TOOL_CALL_ID."""
        context = resolve_run(self._run, cancellation_token)
        return await self._invoke(context, None, args.model_dump())

    async def _invoke(self, context: RunContext, tool_call_id: str | None, args: Mapping[str, Any]) -> str:
        envelope = ToolCallEnvelope(
            run_id=context.run_id,
            tool_call_id=tool_call_id,
            tool_name=self.name,
            arguments=serialize_object(dict(args), self._boundary.limits.request_bytes),
        )
        return agent_text(await invoke(self._boundary, context, envelope))


def boundary_tool(
    boundary: AnyBoundary,
    run: RunSource,
    name: str,
    description: str,
    parameters: dict[str, Any] | None = None,
) -> BoundaryTool:
    """An AutoGen ``BaseTool`` named ``name`` (registered in ``boundary``) (CIS-ECO-4).

    ``run``: the :class:`~invocation_store.RunContext`, or a function of the call's
    ``CancellationToken`` returning it (AutoGen hands a tool nothing else).
    ``parameters``: the JSON schema of the arguments the model is told (an object
    schema; default: any object). Raises ``TypeError``/``ValueError`` if the tool is
    not registered.
    """
    check_tool(boundary, name)
    schema = parameters if parameters is not None else {"type": "object", "properties": {}}
    return BoundaryTool(boundary, run, name, description, schema)
