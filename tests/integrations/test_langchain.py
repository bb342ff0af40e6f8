"""The LangChain adapter, with langchain-core's fake chat model (no network) (CIS-ECO-4)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from invocation_store.integrations.langchain import (
    atool_messages,
    boundary_tool,
    envelopes_from_langchain,
    tool_messages,
)

from ._support import RUN, Lookup, async_boundary, code, sync_boundary


def openai_style(*calls: tuple[str, str, str]) -> AIMessage:
    """An AIMessage as LangChain's OpenAI integration builds it: raw calls kept in additional_kwargs."""
    raw = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls]
    return AIMessage(content="", additional_kwargs={"tool_calls": raw})


MESSAGE = openai_style(
    ("call_1", "lookup", '{"q": "x"}'),
    ("call_2", "lookup", '{"q": "x", "q": "y"}'),  # LangChain's parse keeps {"q": "y"}
    ("call_3", "lookup", '{"q": '),  # LangChain moves it to invalid_tool_calls
    ("call_4", "launch", "{}"),  # no such tool
    ("call_5", "lookup", '{"q": "z", "extra": 1}'),
)


def test_router_answers_every_call_valid_or_invalid_in_order() -> None:
    """CIS-ECO-4, CIS-ECO-2: invalid_tool_calls are answered; the raw text decides; ids kept."""
    lookup = Lookup()
    boundary, store, context = sync_boundary(lookup)
    model = GenericFakeChatModel(messages=iter([MESSAGE]))
    message = model.invoke([HumanMessage("go")])
    assert [c["id"] for c in message.invalid_tool_calls] == ["call_3"]
    assert message.tool_calls[1]["args"] == {"q": "y"}  # what LangChain alone would have run
    answers = tool_messages(boundary, context, message)
    assert [m.tool_call_id for m in answers] == ["call_1", "call_2", "call_3", "call_4", "call_5"]
    assert [code(str(m.content)) for m in answers] == [
        None,
        "INVALID_ARGUMENTS",
        "INVALID_ARGUMENTS",
        "UNAUTHORIZED",
        None,
    ]
    assert [m.status for m in answers] == ["success", "error", "error", "error", "success"]
    assert store.calls(RUN) == ("call_1", "call_5")
    assert store.get(RUN, "call_1").request_json == '{"q": "x"}'  # the model's text, byte for byte
    assert lookup.calls == [{"q": "x"}, {"q": "z", "extra": 1}]  # nothing dropped
    assert all("RAW-ONLY" not in str(m.content) for m in answers)


def test_router_without_raw_text_serializes_the_parse() -> None:
    """CIS-ECO-4: a message built from ToolCalls only (other providers) still keeps id and object."""
    boundary, store, context = sync_boundary(Lookup())
    message = AIMessage(content="", tool_calls=[{"id": "toolu_1", "name": "lookup", "args": {"q": "é"}}])
    (envelope,) = envelopes_from_langchain(message, RUN)
    assert envelope.arguments == '{"q":"é"}'
    (answer,) = tool_messages(boundary, context, message)
    assert code(str(answer.content)) is None
    assert store.calls(RUN) == ("toolu_1",)


def test_async_router_on_the_async_boundary() -> None:
    """CIS-ECO-4: atool_messages runs the calls concurrently on an AsyncToolBoundary."""

    async def main() -> list[ToolMessage]:
        boundary, _, context = await async_boundary(Lookup())
        return await atool_messages(boundary, context, MESSAGE)

    answers = asyncio.run(main())
    assert [code(str(m.content)) for m in answers] == [
        None,
        "INVALID_ARGUMENTS",
        "INVALID_ARGUMENTS",
        "UNAUTHORIZED",
        None,
    ]


def test_tool_answers_a_tool_call_with_a_tool_message() -> None:
    """CIS-ECO-4, CIS-BND-6: the BaseTool keeps the id and every key; a duplicate id is refused."""
    lookup = Lookup()
    boundary, store, context = sync_boundary(lookup)
    tool = boundary_tool(boundary, context, "lookup", "Look rows up")
    call: dict[str, Any] = {"type": "tool_call", "id": "call_9", "name": "lookup", "args": {"q": "z", "x": 1}}
    answer = tool.invoke(call)
    assert isinstance(answer, ToolMessage)
    assert answer.tool_call_id == "call_9"
    assert code(str(answer.content)) is None
    assert store.get(RUN, "call_9").request_json == '{"q":"z","x":1}'
    again = tool.invoke(call)
    assert code(str(again.content)) == "DUPLICATE_TOOL_CALL"
    assert again.status == "error"
    assert lookup.calls == [{"q": "z", "x": 1}]
    bare = tool.invoke({"q": "z"})  # no tool call, no id
    assert code(bare) == "MISSING_TOOL_CALL_ID"


def test_tool_ainvoke_and_an_unregistered_name() -> None:
    """CIS-ECO-4: ainvoke works on the async boundary; a tool must be registered."""

    async def main() -> Any:
        boundary, _, context = await async_boundary(Lookup())
        tool = boundary_tool(boundary, context, "lookup", "Look rows up")
        return await tool.ainvoke({"type": "tool_call", "id": "call_a", "name": "lookup", "args": {"q": 1}})

    answer = asyncio.run(main())
    assert answer.tool_call_id == "call_a"
    assert code(str(answer.content)) is None
    boundary, _, context = sync_boundary(Lookup())
    with pytest.raises(ValueError, match="not registered"):
        boundary_tool(boundary, context, "launch", "x")
