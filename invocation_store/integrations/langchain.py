"""LangChain (langchain-core): a tool and a router that pass every call through the boundary (CIS-ECO-4).

Two entry points:

- :func:`tool_messages` / :func:`atool_messages`: answer *every* call of an
  ``AIMessage`` with a ``ToolMessage``, in the model's order: its ``tool_calls``
  **and** its ``invalid_tool_calls`` (the calls whose arguments LangChain could not
  parse, which its own tool executors never run and never answer). This is the
  path that keeps the raw arguments, read from wherever langchain-core 1.x keeps
  them: ``tool_call_chunks`` of a streamed ``AIMessageChunk`` (the text as it
  arrived, so a duplicate member name, a truncated or a trailing-text argument is
  INVALID_ARGUMENTS rather than LangChain's partial parse), ``partial_json`` of a
  streamed ``ChatAnthropic`` message's ``tool_use`` blocks, ``arguments`` of the
  ``function_call`` content blocks of ``ChatOpenAI(use_responses_api=True)``
  (default and ``responses/v1`` output), and ``additional_kwargs["tool_calls"]``
  (older OpenAI integrations). A non-streamed Chat Completions ``ChatOpenAI``
  message (``invoke``, also with ``streaming=True``), and a Responses-mode one with
  ``output_version="v1"`` or ``"v0"``, keeps no raw text of its valid calls: there
  the parse is all there is (a duplicate member name has collapsed). Pass the
  aggregated ``AIMessageChunk`` of ``stream()`` to keep the text. A Responses
  ``custom_tool_call`` (free-form input) is answered INVALID_ARGUMENTS, never run
  with LangChain's ``{"__arg1": input}``;
- :func:`boundary_tool`: a ``BaseTool`` for LangChain's own executors (e.g. a
  LangGraph ``ToolNode``), called with a ``ToolCall``; it returns a ``ToolMessage``.

What LangChain drops, and what the adapter does about it:

- the raw arguments text: a ``ToolCall`` holds only LangChain's parse, in which a
  duplicate member name has already collapsed to its last value. The router uses
  the raw text when the message kept it; the tool (which only ever sees the
  ``ToolCall``) serializes the parsed object deterministically instead, so there a
  duplicate can no longer be seen;
- keys outside the tool's ``args_schema``: a LangChain tool with a pydantic schema
  silently ignores them. The adapter's tool takes a JSON-schema dict and hands the
  whole object to the boundary, nothing dropped;
- the call itself, when the arguments do not parse: LangChain moves it to
  ``invalid_tool_calls`` and no executor answers it. The router answers it
  (INVALID_ARGUMENTS, from the raw text);
- unknown tool names: the router sends them to the boundary (UNAUTHORIZED); a
  ``ToolNode`` answers them itself before any tool runs;
- a missing id: LangChain allows ``id=None``; the boundary answers
  MISSING_TOOL_CALL_ID and the ``ToolMessage`` carries an empty ``tool_call_id``
  (a provider cannot match it; the model's response was malformed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from ._extras import missing_extra

try:
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool
    from pydantic import ConfigDict, Field
except ImportError as _error:  # the framework is an optional extra
    raise missing_extra(__name__, "langchain", _error) from _error

from ..boundary import BoundaryResult, ToolBoundary
from ..kernel import RunContext, ToolCallEnvelope
from ..providers import agent_text
from ..providers._common import serialize_object
from ._common import AnyBoundary, RunSource, check_tool, invoke, resolve_run

__all__ = ["BoundaryTool", "atool_messages", "boundary_tool", "envelopes_from_langchain", "tool_messages"]

_OBJECT_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": True}


def _raw_texts(message: AIMessage) -> tuple[dict[str, str], set[str], list[str]]:
    """What the model sent, from wherever langchain-core keeps it (see the module docstring).

    Returns ``(texts, custom, order)``: id -> raw arguments text, from
    ``tool_call_chunks`` (a streamed ``AIMessageChunk``), Anthropic ``tool_use``
    content blocks' ``partial_json`` (a streamed ``ChatAnthropic`` message), OpenAI
    Responses ``function_call`` content blocks' ``arguments`` (``ChatOpenAI`` with
    ``use_responses_api=True``, default and ``responses/v1`` output), OpenAI-style
    ``additional_kwargs["tool_calls"]``; the ids of Responses ``custom_tool_call``
    blocks (free-form input, which LangChain turns into ``{"__arg1": input}``), also
    inside a ``non_standard`` block (``v1`` output); and every id in the order met
    (``v1`` output's ``tool_call`` blocks give the order, never a text).
    """
    texts: dict[str, str] = {}
    custom: set[str] = set()
    order: list[str] = []

    def found(call_id: object, text: object = None) -> None:
        if not isinstance(call_id, str):
            return
        if call_id not in order:
            order.append(call_id)
        if isinstance(text, str):
            texts.setdefault(call_id, text)

    for chunk in getattr(message, "tool_call_chunks", None) or ():
        found(chunk.get("id"), chunk.get("args"))
    content = message.content
    for item in content if isinstance(content, list) else ():
        if not isinstance(item, Mapping):
            continue
        wrapped = item.get("value") if item.get("type") == "non_standard" else None
        block = wrapped if isinstance(wrapped, Mapping) else item
        kind = block.get("type")
        if kind == "tool_use":
            partial = block.get("partial_json")
            found(block.get("id"), partial if isinstance(partial, str) and partial else None)
        elif kind == "function_call":
            found(block.get("call_id"), block.get("arguments"))
        elif kind == "custom_tool_call":
            found(block.get("call_id"))
            if isinstance(block.get("call_id"), str):
                custom.add(block["call_id"])
        elif kind in ("tool_call", "invalid_tool_call"):
            found(block.get("id"))  # ``v1`` output's standard blocks: the order only
    calls = message.additional_kwargs.get("tool_calls")
    for item in calls if isinstance(calls, list) else ():
        function = item.get("function") if isinstance(item, Mapping) else None
        arguments = function.get("arguments") if isinstance(function, Mapping) else None
        if isinstance(item, Mapping):
            found(item.get("id"), arguments)
    return texts, custom, order


def _anthropic_inputs(message: AIMessage) -> dict[str, object]:
    """id -> the ``input`` object of each Anthropic ``tool_use`` content block (the provider's
    own form of a non-streamed ``ChatAnthropic`` call)."""
    found: dict[str, object] = {}
    content = message.content
    for block in content if isinstance(content, list) else ():
        if (
            isinstance(block, Mapping)
            and block.get("type") == "tool_use"
            and isinstance(block.get("id"), str)
        ):
            found.setdefault(block["id"], block.get("input"))
    return found


#: Stop reasons after which the last call may be cut short (OpenAI, Anthropic).
_CUT = frozenset({"length", "max_tokens", "model_context_window_exceeded"})


def _cut(message: AIMessage) -> bool:
    metadata = message.response_metadata
    return metadata.get("finish_reason") in _CUT or metadata.get("stop_reason") in _CUT


def _envelope(run_id: str, tool_call_id: object, name: object, arguments: str | None) -> ToolCallEnvelope:
    return ToolCallEnvelope(
        run_id=run_id,
        tool_call_id=tool_call_id if isinstance(tool_call_id, str) and tool_call_id else None,
        tool_name=name if isinstance(name, str) else None,
        arguments=arguments,
    )


def envelopes_from_langchain(
    message: AIMessage, run_id: str, *, request_bytes: int | None = None
) -> list[ToolCallEnvelope]:
    """Every call of ``message`` (``tool_calls`` and ``invalid_tool_calls``) as an envelope,
    in the model's order where the message kept it (else valid calls first) (CIS-ECO-4).

    Arguments, first found: the raw text langchain-core kept for the id
    (``tool_call_chunks``, an Anthropic block's ``partial_json``, a Responses
    ``function_call`` block's ``arguments``, ``additional_kwargs["tool_calls"]``); an
    Anthropic ``tool_use`` block's ``input`` object; an invalid call's ``args`` text;
    else (no raw text kept, e.g. Chat Completions ``ChatOpenAI.invoke``, or Responses
    mode with ``output_version="v1"`` or ``"v0"``) the parsed ``args``. A Responses
    ``custom_tool_call`` (LangChain's ``{"__arg1": input}``) gets ``arguments=None``
    (INVALID_ARGUMENTS: free-form input is no JSON object), as
    ``envelopes_from_openai_responses`` answers it. Objects are serialized measured
    against ``request_bytes`` (default the kernel's). A message that stopped on its
    output limit (``finish_reason: length``, ``stop_reason: max_tokens``) gets
    ``arguments=None`` for its last call (INVALID_ARGUMENTS: it may be cut).
    ``TypeError`` for a non-``AIMessage``.
    """
    if not isinstance(message, AIMessage):
        raise TypeError("expected a langchain_core AIMessage")
    raw, custom, seen = _raw_texts(message)
    inputs = _anthropic_inputs(message)
    envelopes = []
    for call in message.tool_calls:
        call_id = call.get("id")
        text = raw.get(call_id) if isinstance(call_id, str) else None
        if isinstance(call_id, str) and call_id in custom:
            text = None  # a custom tool's free-form input is no JSON object: INVALID_ARGUMENTS
        elif text is None:
            parsed = inputs[call_id] if isinstance(call_id, str) and call_id in inputs else call.get("args")
            text = serialize_object(parsed, request_bytes)
        envelopes.append(_envelope(run_id, call_id, call.get("name"), text))
    for invalid in message.invalid_tool_calls:
        tool_call_id = invalid.get("id")
        text = raw.get(tool_call_id) if isinstance(tool_call_id, str) else None
        args = invalid.get("args")
        arguments = text if text is not None else (args if isinstance(args, str) else None)
        envelopes.append(_envelope(run_id, tool_call_id, invalid.get("name"), arguments))
    # The model's order where the message kept it; LangChain lists invalid calls last.
    # Only a complete order is used: a partial one (``v0`` output lists only its custom calls'
    # blocks) would move the calls it names before the others.
    order = {tool_call_id: index for index, tool_call_id in enumerate(seen)}
    ordered = envelopes
    if all(e.tool_call_id in order for e in envelopes):
        ordered = sorted(envelopes, key=lambda e: order[e.tool_call_id or ""])
    if ordered and _cut(message):
        last = ordered[-1]
        ordered[-1] = _envelope(run_id, last.tool_call_id, last.tool_name, None)
    return ordered


def _tool_message(envelope: ToolCallEnvelope, result: BoundaryResult) -> ToolMessage:
    return ToolMessage(
        content=agent_text(result),
        tool_call_id=envelope.tool_call_id or "",
        name=envelope.tool_name,
        status="success" if result.ok else "error",
    )


def tool_messages(boundary: ToolBoundary, context: RunContext, message: AIMessage) -> list[ToolMessage]:
    """One ``ToolMessage`` per call of ``message``, valid and invalid, in order (CIS-ECO-4)."""
    return [
        _tool_message(envelope, boundary.invoke(context, envelope))
        for envelope in envelopes_from_langchain(message, context.run_id, request_bytes=_limit(boundary))
    ]


def _limit(boundary: object) -> int | None:
    limits = getattr(boundary, "limits", None)
    return getattr(limits, "request_bytes", None)


async def atool_messages(boundary: AnyBoundary, context: RunContext, message: AIMessage) -> list[ToolMessage]:
    """:func:`tool_messages` for asyncio: concurrent on an :class:`AsyncToolBoundary`."""
    envelopes = envelopes_from_langchain(message, context.run_id, request_bytes=_limit(boundary))
    results = await asyncio.gather(*(invoke(boundary, context, envelope) for envelope in envelopes))
    return [_tool_message(envelope, result) for envelope, result in zip(envelopes, results, strict=True)]


class BoundaryTool(BaseTool):
    """A LangChain tool running through the boundary; build it with :func:`boundary_tool`.

    Invoked with a ``ToolCall`` (``{"type": "tool_call", "id", "name", "args"}``) it
    returns a ``ToolMessage`` answering that id (``status="error"`` for a failure);
    invoked with a bare arguments object there is no call id, and the answer is
    MISSING_TOOL_CALL_ID's text. Sync ``invoke`` needs a :class:`ToolBoundary`;
    ``ainvoke`` takes either boundary.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)
    boundary: Any = Field(exclude=True)
    run_source: Any = Field(exclude=True)

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        # Hand _run LangChain's parse of the arguments and the call's id, unvalidated:
        # the boundary, not a pydantic schema, decides what the arguments may be.
        return (), {"call_arguments": tool_input, "call_id": tool_call_id}

    def _prepare(
        self, call_arguments: object, call_id: object, config: RunnableConfig
    ) -> tuple[RunContext, ToolCallEnvelope]:
        context = resolve_run(self.run_source, config)
        arguments = serialize_object(call_arguments, _limit(self.boundary))
        return context, _envelope(context.run_id, call_id, self.name, arguments)

    def _run(self, call_arguments: object, call_id: object, config: RunnableConfig, **_: Any) -> Any:
        if not isinstance(self.boundary, ToolBoundary):
            raise TypeError("a sync invoke needs a ToolBoundary; use ainvoke with an AsyncToolBoundary")
        context, envelope = self._prepare(call_arguments, call_id, config)
        return _reply(envelope, self.boundary.invoke(context, envelope))

    async def _arun(self, call_arguments: object, call_id: object, config: RunnableConfig, **_: Any) -> Any:
        context, envelope = self._prepare(call_arguments, call_id, config)
        return _reply(envelope, await invoke(self.boundary, context, envelope))


def _reply(envelope: ToolCallEnvelope, result: BoundaryResult) -> ToolMessage | str:
    return agent_text(result) if envelope.tool_call_id is None else _tool_message(envelope, result)


def boundary_tool(
    boundary: AnyBoundary,
    run: RunSource,
    name: str,
    description: str,
    args_schema: dict[str, Any] | None = None,
) -> BoundaryTool:
    """A ``BaseTool`` named ``name`` (registered in ``boundary``) (CIS-ECO-4).

    ``run``: the :class:`RunContext`, or a function of the ``RunnableConfig`` the
    tool is invoked with returning it. ``args_schema``: a JSON-schema dict shown to
    the model (default: any object); LangChain does not filter by it.
    """
    check_tool(boundary, name)
    return BoundaryTool(
        name=name,
        description=description,
        args_schema=args_schema if args_schema is not None else dict(_OBJECT_SCHEMA),
        boundary=boundary,
        run_source=run,
    )
