"""AG2 (the ``ag2`` 1.x package): a tool whose every call passes the boundary (CIS-ECO-4, CIS-ECO-8).

AG2 publishes each call the model made as a ``ToolCallEvent`` on the agent's
stream, carrying the call's ``id`` and its ``arguments`` text; a tool subscribes
to the events of its name. :class:`BoundaryTool` is such a tool: the envelope is
the event's id and arguments text, the boundary runs it, and the model reads the
agent text (:func:`~invocation_store.providers.agent_text`) as the tool's result.
The agent's tool middleware runs around it, as around AG2's own function tools.

Invented ids (checked against ag2 1.2.1): ``ToolCallEvent.id`` *defaults to a
uuid4* (``str(uuid4())``) for a call its model client built without one. The
Ollama client never passes an id (every Ollama call gets one), and the Gemini
client writes ``fc.id or str(uuid4())`` (a call without Gemini's own id gets
one); the OpenAI, Anthropic, Bedrock, Mistral and DashScope clients pass the
provider's id. Such an id names no call of the model's (CIS-ID-6), and once the
event exists nothing tells it from a provider's uuid, so the adapter refuses every
id of the form ``str(uuid4())`` gives (:func:`ag2_tool_call_id`):
MISSING_TOOL_CALL_ID, no record, the tool never runs. A harness whose provider
itself sends uuid4 ids passes ``accept_uuid_ids=True``.

What reaches the boundary's codes: the arguments text as the client wrote it (the
provider's own text for OpenAI-style clients; ``json.dumps`` of the decoded object
for Gemini and Ollama; an empty text is ``{}``, as AG2 reads it), so duplicate
member names, truncated or non-JSON text are INVALID_ARGUMENTS; a repeated id is
DUPLICATE_TOOL_CALL; a tool name the agent lacks is AG2's own ``ToolNotFoundEvent``
(no record).

Requires ``pip install 'canonical-invocation-store[ag2]'``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from contextlib import AsyncExitStack, ExitStack
from typing import Any

from ._extras import missing_extra

try:
    from ag2 import Context
    from ag2.events import ToolCallEvent, ToolResultEvent
    from ag2.middleware import BaseMiddleware, ToolExecution, ToolResultType
    from ag2.tools.final.function_tool import FunctionDefinition, FunctionToolSchema
    from ag2.tools.tool import Tool
except ImportError as _error:  # the framework is an optional extra
    raise missing_extra(__name__, "ag2", _error) from _error

from ..kernel import ToolCallEnvelope
from ..providers import agent_text
from ._common import AnyBoundary, RunSource, check_tool, invoke, resolve_run

__all__ = ["UUID4_ID", "BoundaryTool", "ag2_tool_call_id", "boundary_tool"]

#: The form of ``str(uuid.uuid4())``: what AG2 gives a call that came without an id.
UUID4_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def ag2_tool_call_id(call_id: object, *, accept_uuid_ids: bool = False) -> str | None:
    """The model's id, or None when absent, empty or of AG2's invented form (:data:`UUID4_ID`).

    ``accept_uuid_ids=True`` keeps uuid4-form ids (for a provider that sends them).
    Any other string is returned unchanged (preflight still judges whether it is safe).
    """
    if not isinstance(call_id, str) or call_id == "":
        return None
    if not accept_uuid_ids and UUID4_ID.fullmatch(call_id) is not None:
        return None
    return call_id


class BoundaryTool(Tool):  # type: ignore[misc]  # AG2 is untyped where mypy runs
    """An AG2 tool running through the boundary; build it with :func:`boundary_tool`."""

    def __init__(
        self,
        boundary: AnyBoundary,
        run: RunSource,
        name: str,
        description: str,
        parameters: dict[str, Any],
        *,
        accept_uuid_ids: bool,
    ) -> None:
        self.name = name
        self._boundary = boundary
        self._run = run
        self._accept_uuid_ids = accept_uuid_ids
        self._schema = FunctionToolSchema(
            function=FunctionDefinition(name=name, description=description, parameters=parameters)
        )

    def __deepcopy__(self, memo: dict[int, Any]) -> BoundaryTool:
        """A copy sharing the boundary (AG2 deep-copies every tool an agent registers)."""
        return BoundaryTool(
            self._boundary,
            self._run,
            self.name,
            self._schema.function.description,
            self._schema.function.parameters,
            accept_uuid_ids=self._accept_uuid_ids,
        )

    @property
    def source(self) -> str:
        """The implementation AG2 records as handling the call (``ToolCallEvent.source``)."""
        return f"boundary:{__name__}:{self.name}"

    async def schemas(self, context: Context) -> list[FunctionToolSchema]:
        """What the model is told about the tool."""
        return [self._schema]

    def register(
        self,
        stack: ExitStack | AsyncExitStack,
        context: Context,
        *,
        middleware: Iterable[BaseMiddleware] = (),
    ) -> None:
        """Subscribe to this tool's calls on the stream, the agent's tool middleware around it."""
        execution: ToolExecution = self
        for each in middleware:
            execution = _wrapped(each, execution)

        async def execute(event: ToolCallEvent, context: Context) -> None:
            await context.send(await execution(event.handled_by(self.source), context))

        stack.enter_context(context.stream.where(ToolCallEvent.name == self.name).sub_scope(execute))

    async def __call__(self, event: ToolCallEvent, context: Context) -> ToolResultEvent:
        """One call: the envelope of ``event.id`` (:func:`ag2_tool_call_id`) and ``event.arguments``."""
        run_context = resolve_run(self._run, context)
        envelope = ToolCallEnvelope(
            run_id=run_context.run_id,
            tool_call_id=ag2_tool_call_id(event.id, accept_uuid_ids=self._accept_uuid_ids),
            tool_name=self.name,
            arguments=event.arguments or "{}",  # AG2's own reading of an empty text
        )
        return ToolResultEvent.from_call(
            event, result=agent_text(await invoke(self._boundary, run_context, envelope))
        )


def _wrapped(middleware: BaseMiddleware, inner: ToolExecution) -> ToolExecution:
    async def call(event: ToolCallEvent, context: Context) -> ToolResultType:
        return await middleware.on_tool_execution(inner, event, context)

    return call


def boundary_tool(
    boundary: AnyBoundary,
    run: RunSource,
    name: str,
    description: str,
    parameters: dict[str, Any] | None = None,
    *,
    accept_uuid_ids: bool = False,
) -> BoundaryTool:
    """An AG2 tool named ``name`` (registered in ``boundary``) (CIS-ECO-4).

    ``run``: the :class:`~invocation_store.RunContext`, or a function of AG2's
    ``Context`` returning it (e.g. ``lambda ctx: ctx.dependencies["run"]``).
    ``parameters``: the JSON schema the model is told (default: any object).
    ``accept_uuid_ids``: see the module docstring (default False: uuid4-form ids are
    MISSING_TOOL_CALL_ID). Raises ``TypeError``/``ValueError`` if the tool is not
    registered.
    """
    check_tool(boundary, name)
    schema = parameters if parameters is not None else {"type": "object", "properties": {}}
    return BoundaryTool(boundary, run, name, description, schema, accept_uuid_ids=accept_uuid_ids)
