"""LlamaIndex for real: agent workflows run the boundary tool; invented ids refused (CIS-ECO-4, CIS-ECO-8).

llama-index-core 0.14.25's ``FunctionAgent`` (through :class:`BoundaryFunctionAgent`)
and ``ReActAgent`` drive the tool with LlamaIndex's own ``MockFunctionCallingLLM``
(a scripted model: provider ids, and text for ReAct), and with the real
llama-index-llms-ollama ``Ollama`` LLM whose ``ollama.AsyncClient`` talks to an
``httpx.MockTransport`` answering in Ollama's ``/api/chat`` JSON.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import ollama
import pytest
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent, ReActAgent, ToolCall, ToolCallResult
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.llms.ollama import Ollama

from invocation_store.integrations.llama_index import (
    BoundaryFunctionAgent,
    ToolCallIds,
    boundary_tool,
    llama_index_tool_call_id,
)

from .._support import RUN, Lookup, async_boundary, code, sync_boundary


def _run(agent: Any) -> tuple[list[str], list[tuple[str, str]]]:
    """(the tool_id of each ToolCall event, (tool_id, agent text) of each result) of one run."""

    async def main() -> tuple[list[str], list[tuple[str, str]]]:
        handler = agent.run(user_msg="go")
        calls, results = [], []
        async for event in handler.stream_events():
            if isinstance(event, ToolCallResult):
                results.append((event.tool_id, event.tool_output.content))
            elif isinstance(event, ToolCall):
                calls.append(event.tool_id)
        await handler
        return calls, results

    return asyncio.run(main())


def _scripted(*turns: ChatMessage) -> MockFunctionCallingLLM:
    script = list(turns)

    def respond(messages: Any, **kwargs: Any) -> ChatMessage:
        return script.pop(0)

    return MockFunctionCallingLLM(response_generator=respond, is_chat_model=True)


def _calls(*calls: tuple[str | None, Any]) -> ChatMessage:
    blocks = [ToolCallBlock(tool_call_id=i, tool_name="lookup", tool_kwargs=a) for i, a in calls]
    return ChatMessage(role="assistant", blocks=blocks)


DONE = ChatMessage(role="assistant", content="done")


def test_function_agent_keys_calls_by_the_models_id() -> None:
    """CIS-ECO-4, CIS-ID-6: the ToolCall's tool_id is the key; an empty one is MISSING_TOOL_CALL_ID."""
    lookup = Lookup()
    boundary, store, context = sync_boundary(lookup)
    llm = _scripted(
        _calls(("call_1", '{"q": "a"}'), (None, {"q": "b"})), _calls(("call_1", {"q": "c"})), DONE
    )
    agent = BoundaryFunctionAgent(tools=[boundary_tool(boundary, context, "lookup", "Look rows up")], llm=llm)
    calls, results = _run(agent)
    assert calls == ["call_1", "", "call_1"]
    # A turn's calls run as concurrent workflow steps: its results come in completion order.
    assert sorted((tool_id, str(code(text))) for tool_id, text in results[:2]) == [
        ("", "MISSING_TOOL_CALL_ID"),
        ("call_1", "None"),
    ]
    assert [(tool_id, code(text)) for tool_id, text in results[2:]] == [("call_1", "DUPLICATE_TOOL_CALL")]
    assert store.calls(RUN) == ("call_1",)
    assert store.get(RUN, "call_1").request_json == '{"q":"a"}'
    assert lookup.calls == [{"q": "a"}]
    assert "RAW-ONLY" not in repr(results)


def test_react_agents_text_parsed_calls_get_uuid4_ids_which_are_refused() -> None:
    """CIS-ECO-8: ReActAgent invents a uuid4 per text-parsed call; the boundary tool gets no id.

    Also with the :class:`ToolCallIds` mixin: a ReAct id is never passed on.
    """

    class BoundaryReAct(ToolCallIds, ReActAgent):
        pass

    for agent_class in (ReActAgent, BoundaryReAct):
        lookup = Lookup()
        boundary, store, context = sync_boundary(lookup)
        llm = _scripted(
            ChatMessage(
                role="assistant", content='Thought: look it up\nAction: lookup\nAction Input: {"q": "c"}'
            ),
            ChatMessage(role="assistant", content="Thought: I can answer.\nAnswer: done"),
        )
        agent = agent_class(tools=[boundary_tool(boundary, context, "lookup", "Look rows up")], llm=llm)
        calls, results = _run(agent)
        assert len(calls) == 1
        assert len(calls[0]) == 36
        assert calls[0][14] == "4"
        assert [code(text) for _, text in results] == ["MISSING_TOOL_CALL_ID"]
        assert store.calls(RUN) == ()
        assert lookup.calls == []


def test_a_plain_function_agent_hands_its_tools_no_id() -> None:
    """CIS-ECO-4: without the mixin LlamaIndex gives the tool its arguments only: MISSING_TOOL_CALL_ID."""
    lookup = Lookup()
    boundary, store, context = sync_boundary(lookup)
    llm = _scripted(_calls(("call_1", '{"q": "a"}')), DONE)
    agent = FunctionAgent(tools=[boundary_tool(boundary, context, "lookup", "Look rows up")], llm=llm)
    calls, results = _run(agent)
    assert calls == ["call_1"]
    assert [code(text) for _, text in results] == ["MISSING_TOOL_CALL_ID"]
    assert store.calls(RUN) == ()


def test_the_ollama_llm_uses_the_tool_name_as_id() -> None:
    """CIS-ECO-8: llama-index-llms-ollama sets ``tool_id`` to the tool's name; that is no id: refused."""
    turns = iter(
        [
            {
                "tool_calls": [
                    {"function": {"name": "lookup", "arguments": {"q": "a"}}},
                    {"function": {"name": "lookup", "arguments": {"q": "b"}}},
                ]
            },
            {"content": "done"},
        ]
    )

    def chat(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/show":  # the LLM asks for the model's details first
            return httpx.Response(
                200,
                json={"model_info": {"llama.context_length": 8192}, "capabilities": ["completion", "tools"]},
            )
        assert request.url.path == "/api/chat"
        message = {"role": "assistant", "content": "", **next(turns)}
        body = {
            "model": "llama3.1",
            "created_at": "2026-01-01T00:00:00Z",
            "message": message,
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 1,
            "eval_count": 1,
        }
        if json.loads(request.content).get("stream"):
            return httpx.Response(200, content=json.dumps(body).encode() + b"\n")
        return httpx.Response(200, json=body)

    transport = httpx.MockTransport(chat)
    llm = Ollama(
        model="llama3.1",
        base_url="http://mock.invalid",
        request_timeout=5.0,
        client=ollama.Client(host="http://mock.invalid", transport=transport),
        async_client=ollama.AsyncClient(host="http://mock.invalid", transport=transport),
    )
    lookup = Lookup()
    boundary, store, context = sync_boundary(lookup)
    agent = BoundaryFunctionAgent(tools=[boundary_tool(boundary, context, "lookup", "Look rows up")], llm=llm)
    calls, results = _run(agent)
    assert calls == ["lookup", "lookup"]
    assert [code(text) for _, text in results] == ["MISSING_TOOL_CALL_ID"] * 2
    assert store.calls(RUN) == ()
    assert lookup.calls == []


def test_the_async_boundary_and_the_run_source() -> None:
    """CIS-ECO-4: an AsyncToolBoundary is awaited; a run source gets the workflow Context."""
    seen: list[Any] = []

    async def make() -> tuple[Any, Any, Any]:
        return await async_boundary(Lookup())

    boundary, store, context = asyncio.run(make())

    def run_of(workflow_context: Any) -> Any:
        seen.append(workflow_context)
        return context

    agent = BoundaryFunctionAgent(
        tools=[boundary_tool(boundary, run_of, "lookup", "Look rows up")],
        llm=_scripted(_calls(("call_7", {"q": "z"})), DONE),
    )
    _, results = _run(agent)
    assert [code(text) for _, text in results] == [None]
    assert seen
    assert seen[0] is not None
    assert asyncio.run(store.calls(RUN)) == ("call_7",)


@pytest.mark.parametrize(
    ("tool_id", "tool_name", "expected"),
    [
        ("call_1", "lookup", "call_1"),
        ("toolu_01", "lookup", "toolu_01"),
        ("lookup", "lookup", None),
        ("", "lookup", None),
        (None, "lookup", None),
    ],
)
def test_llama_index_tool_call_id(tool_id: Any, tool_name: str, expected: str | None) -> None:
    """CIS-ECO-8: an empty id and the tool's own name are no ids."""
    assert llama_index_tool_call_id(tool_id, tool_name) == expected


def test_an_unregistered_tool_is_refused() -> None:
    """CIS-ECO-4: the tool must be registered in the boundary."""
    boundary, _, context = sync_boundary(Lookup())
    with pytest.raises(ValueError, match="not registered"):
        boundary_tool(boundary, context, "launch", "x")


def test_the_mixin_is_for_a_single_agent() -> None:
    """CIS-ECO-8: an AgentWorkflow may hold ReAct agents, whose invented ids the mixin would pass on."""
    with pytest.raises(TypeError, match="single LlamaIndex agent"):

        class Workflow(ToolCallIds, AgentWorkflow):
            pass
