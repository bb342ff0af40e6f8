"""Google ADK (Agent Development Kit): a tool whose every call passes the boundary (CIS-ECO-4).

ADK hands a tool ``run_async(args=..., tool_context=...)``; the call's id is
``tool_context.function_call_id``. When the model sent a function call without an
id (Gemini before 3.5 often does), ADK *invents one*, ``adk-<uuid>``, to link the
call with its response, and strips it again before the next request. Such an id
names no call of the model's (CIS-ID-6): :class:`BoundaryTool` treats any id
starting :data:`ADK_ID_PREFIX` as missing, MISSING_TOOL_CALL_ID, no record, the tool
never runs. The same ids reach ``event.content``; :func:`envelopes_from_adk_event`
reads an event's function calls with them made missing (never pass an ADK event's
content to ``envelopes_from_gemini`` directly: its ``adk-`` ids would be recorded).

The arguments are ADK's ``args`` object (decoded from the model's JSON by
google-genai), serialized measured against the boundary's request limit under the
I-JSON rule (CIS-ECO-2). The tool returns the agent payload dict, which ADK sends as
the ``FunctionResponse.response``.

Requires ``pip install 'canonical-invocation-store[google-adk]'``. google-adk 2.x
pins ``google-genai<3`` and ``opentelemetry-*<=1.44``, which conflict with the SDK
versions this project's ``dev`` set pins, so the module is tested twice: against
ADK 2.13's own ``InMemoryRunner`` in the frameworks venv (.ci/frameworks.lock,
tests/integrations/frameworks/test_google_adk.py), and against a stand-in of ADK's
tool interface with the ``dev`` set's google-genai (tests/integrations/test_google_adk.py).
Verified there: ADK strips its ``adk-`` ids before the next model request, and a
Gemini 3 thought signature stays in the ``Part``, never in the id.
"""

from __future__ import annotations

from typing import Any

from ._extras import missing_extra

try:
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.tool_context import ToolContext
    from google.genai import types as genai_types
except ImportError as _error:  # the framework is an optional extra
    raise missing_extra(__name__, "google-adk", _error) from _error

from ..kernel import ToolCallEnvelope
from ..providers import agent_payload, envelopes_from_gemini
from ..providers._common import serialize_object
from ._common import AnyBoundary, RunSource, check_tool, invoke, resolve_run

__all__ = ["ADK_ID_PREFIX", "BoundaryTool", "adk_tool_call_id", "boundary_tool", "envelopes_from_adk_event"]

#: The prefix of the ids ADK invents for function calls that came without one.
ADK_ID_PREFIX = "adk-"

_OBJECT_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": True}


def adk_tool_call_id(tool_call_id: object) -> str | None:
    """The model's id, or None when absent, empty or invented by ADK (``adk-...``)."""
    if not isinstance(tool_call_id, str) or tool_call_id == "" or tool_call_id.startswith(ADK_ID_PREFIX):
        return None
    return tool_call_id


def envelopes_from_adk_event(
    event: Any, run_id: str, *, request_bytes: int | None = None
) -> list[ToolCallEnvelope]:
    """The function calls of an ADK ``Event`` (its ``content``), ADK's invented ids made missing.

    Raises what :func:`~invocation_store.providers.envelopes_from_gemini` raises; an
    event without content has no calls.
    """
    content = getattr(event, "content", None)
    if content is None:
        return []
    return [
        ToolCallEnvelope(
            run_id=e.run_id,
            tool_call_id=adk_tool_call_id(e.tool_call_id),
            tool_name=e.tool_name,
            arguments=e.arguments,
        )
        for e in envelopes_from_gemini(content, run_id, request_bytes=request_bytes)
    ]


class BoundaryTool(BaseTool):  # type: ignore[misc]  # ADK is untyped where it is installed
    """An ADK tool running through the boundary; build it with :func:`boundary_tool`."""

    def __init__(
        self, boundary: AnyBoundary, run: RunSource, name: str, description: str, schema: dict[str, Any]
    ) -> None:
        super().__init__(name=name, description=description)
        self._boundary = boundary
        self._run = run
        self._schema = schema

    def _get_declaration(self) -> Any:
        return genai_types.FunctionDeclaration(
            name=self.name, description=self.description, parameters_json_schema=self._schema
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> dict[str, object]:
        """Run one call: the envelope of ``tool_context.function_call_id`` and ``args``."""
        context = resolve_run(self._run, tool_context)
        envelope = ToolCallEnvelope(
            run_id=context.run_id,
            tool_call_id=adk_tool_call_id(getattr(tool_context, "function_call_id", None)),
            tool_name=self.name,
            arguments=serialize_object(args, self._boundary.limits.request_bytes),
        )
        return agent_payload(await invoke(self._boundary, context, envelope))


def boundary_tool(
    boundary: AnyBoundary,
    run: RunSource,
    name: str,
    description: str,
    parameters_json_schema: dict[str, Any] | None = None,
) -> BoundaryTool:
    """An ADK tool named ``name`` (registered in ``boundary``) (CIS-ECO-4).

    ``run``: the :class:`~invocation_store.RunContext`, or a function of ADK's
    ``ToolContext`` returning it. ``parameters_json_schema``: what the model is told
    about the arguments (default: any object). Raises ``TypeError``/``ValueError`` if
    the tool is not registered.
    """
    check_tool(boundary, name)
    schema = parameters_json_schema if parameters_json_schema is not None else dict(_OBJECT_SCHEMA)
    return BoundaryTool(boundary, run, name, description, schema)
