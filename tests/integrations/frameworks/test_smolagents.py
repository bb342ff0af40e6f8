"""smolagents for real: when ``ToolCallingAgent`` invents ids, why no adapter can key its tools (CIS-ECO-8).

smolagents 1.26's ``ToolCallingAgent`` runs with a scripted ``Model`` (smolagents'
own extension point; no network). What is checked, as the table of docs/integrations.md states it:
a native tool call keeps the model's id; a call parsed out of the model's text gets
``str(uuid.uuid4())``; and a ``Tool`` is called with its arguments only (the agent's
``execute_tool_call(tool_name, arguments)`` has no id to give), so a boundary call
from inside a smolagents tool could only be MISSING_TOOL_CALL_ID.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import httpx
from smolagents import OpenAIModel, Tool, ToolCallingAgent
from smolagents.memory import ActionStep
from smolagents.models import (
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    Model,
)

from invocation_store import envelopes_from_openai_chat

from .._support import RUN, sync_boundary
from .._support import Lookup as BoundaryLookup

UUID4 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


class Lookup(Tool):
    name = "lookup"
    description = "Look rows up"
    inputs = {"q": {"type": "string", "description": "what to look up"}}  # noqa: RUF012  # smolagents' own shape
    output_type = "string"

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def forward(self, q: str) -> str:  # type: ignore[override]
        self.calls.append(((q,), {}))
        return "1 row"


class Scripted(Model):
    def __init__(self, turns: list[ChatMessage]) -> None:
        super().__init__(model_id="scripted")
        self.turns = turns

    def generate(
        self,
        messages: Any,
        stop_sequences: Any = None,
        response_format: Any = None,
        tools_to_call_from: Any = None,
        **kwargs: Any,
    ) -> ChatMessage:
        return self.turns.pop(0)


def _native(call_id: str, name: str, arguments: Any) -> ChatMessage:
    call = ChatMessageToolCall(
        id=call_id, type="function", function=ChatMessageToolCallFunction(name=name, arguments=arguments)
    )
    return ChatMessage(role=MessageRole.ASSISTANT, content=None, tool_calls=[call])


def test_native_calls_keep_the_models_id_and_text_parsed_calls_get_a_uuid4() -> None:
    """CIS-ECO-8: ``call_1`` is the model's; the JSON-in-text call's id is smolagents' uuid4."""
    lookup = Lookup()
    agent = ToolCallingAgent(
        tools=[lookup],
        model=Scripted(
            [
                _native("call_1", "lookup", '{"q": "a"}'),
                ChatMessage(
                    role=MessageRole.ASSISTANT, content='{"name": "lookup", "arguments": {"q": "b"}}'
                ),
                _native("call_2", "final_answer", {"answer": "done"}),
            ]
        ),
        max_steps=4,
        verbosity_level=0,
    )
    assert agent.run("go") == "done"
    ids = [
        [c.id for c in step.tool_calls]
        for step in agent.memory.steps
        if isinstance(step, ActionStep) and step.tool_calls
    ]
    assert ids[0] == ["call_1"]
    assert ids[2] == ["call_2"]
    assert len(ids[1]) == 1
    assert UUID4.fullmatch(ids[1][0])
    assert lookup.calls == [(("a",), {}), (("b",), {})]


def test_a_tool_is_called_with_its_arguments_only() -> None:
    """CIS-ECO-8: nothing on smolagents' tool-call path takes an id, so no adapter can pass one on."""
    assert list(inspect.signature(ToolCallingAgent.execute_tool_call).parameters) == [
        "self",
        "tool_name",
        "arguments",
    ]
    assert "id" not in inspect.signature(Tool.__call__).parameters


def test_a_harness_can_key_calls_by_the_providers_response_it_keeps() -> None:
    """CIS-ECO-8: ``OpenAIModel``'s ``ChatMessage.raw`` is the SDK's ChatCompletion: its parser keeps the ids.

    What docs/integrations.md offers instead of an adapter: the harness dispatches the model's
    calls itself, from the provider's own response (here over an httpx mock transport).
    """
    completion = {
        "id": "chatcmpl-1",
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4.1",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call_S1",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": '{"q": "a", "q": "b"}'},
                        },
                        {
                            "id": "call_S2",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": '{"q": "c"}'},
                        },
                    ],
                },
            }
        ],
    }

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.host == "mock.invalid"
        return httpx.Response(200, json=completion)

    model = OpenAIModel(
        model_id="gpt-4.1",
        api_base="http://mock.invalid/v1",
        api_key="test-key",
        client_kwargs={"http_client": httpx.Client(transport=httpx.MockTransport(handler))},
    )
    message = model.generate([ChatMessage(role=MessageRole.USER, content=[{"type": "text", "text": "go"}])])
    assert [c.id for c in message.tool_calls] == ["call_S1", "call_S2"]
    lookup = BoundaryLookup()
    boundary, store, context = sync_boundary(lookup)
    results = [boundary.invoke(context, e) for e in envelopes_from_openai_chat(message.raw, RUN)]
    assert [None if r.ok else r.code.value for r in results] == [
        "INVALID_ARGUMENTS",
        None,
    ]  # the raw text is read
    assert store.calls(RUN) == ("call_S2",)
