"""AutoGen for real: ``AssistantAgent`` runs the boundary tool with the client's ids (CIS-ECO-4, CIS-ECO-8).

Two model clients of autogen-ext 0.7.5 drive a real ``AssistantAgent``:
``ReplayChatCompletionClient`` (AutoGen's own test client) replaying provider ids,
and the real ``OllamaChatCompletionClient`` whose ``ollama.AsyncClient`` talks to an
``httpx.MockTransport`` answering in Ollama's ``/api/chat`` JSON; that client
invents the ids.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import httpx
import ollama
import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.messages import ToolCallExecutionEvent, ToolCallRequestEvent
from autogen_core import CancellationToken, FunctionCall
from autogen_core.models import CreateResult, ModelFamily, ModelInfo, RequestUsage
from autogen_ext.models.ollama import OllamaChatCompletionClient, _ollama_client
from autogen_ext.models.replay import ReplayChatCompletionClient

from invocation_store import ToolCallEnvelope
from invocation_store.integrations.autogen import autogen_tool_call_id, boundary_tool

from .._support import RUN, Lookup, async_boundary, code, sync_boundary

USAGE = RequestUsage(prompt_tokens=1, completion_tokens=1)
MODEL_INFO = ModelInfo(
    vision=False,
    function_calling=True,
    json_output=False,
    family=ModelFamily.UNKNOWN,
    structured_output=False,
)


def _calls(*calls: tuple[str, str]) -> CreateResult:
    return CreateResult(
        finish_reason="function_calls",
        content=[
            FunctionCall(id=call_id, name="lookup", arguments=arguments) for call_id, arguments in calls
        ],
        usage=USAGE,
        cached=False,
    )


def _run(agent: AssistantAgent) -> tuple[list[list[str]], list[tuple[str, str]]]:
    """(the ids of each ToolCallRequestEvent, (call_id, content) of every tool result), in order."""
    result = asyncio.run(agent.run(task="go"))
    requested = [[c.id for c in m.content] for m in result.messages if isinstance(m, ToolCallRequestEvent)]
    answered = [
        (r.call_id, r.content)
        for m in result.messages
        if isinstance(m, ToolCallExecutionEvent)
        for r in m.content
    ]
    return requested, answered


def test_provider_ids_are_the_key_and_autogen_decodes_the_arguments() -> None:
    """CIS-ECO-4: the FunctionCall id reaches run_json as call_id; a repeat is DUPLICATE_TOOL_CALL.

    AutoGen decodes the arguments text before the tool runs: a duplicate member name
    has collapsed to its last value, and text that is no JSON is AutoGen's own error
    answer (no record, the tool not called).
    """
    lookup = Lookup()
    boundary, store, context = sync_boundary(lookup)
    client = ReplayChatCompletionClient(
        [
            _calls(("call_A1", '{"q": "disk", "q": "cpu"}'), ("call_A2", '{"q": ')),
            _calls(("call_A1", '{"q": "mem"}')),
            "done",
        ],
        model_info=MODEL_INFO,
    )
    tool = boundary_tool(boundary, context, "lookup", "Look rows up")
    agent = AssistantAgent("ops", model_client=client, tools=[tool], max_tool_iterations=3)
    requested, answered = _run(agent)
    assert requested == [["call_A1", "call_A2"], ["call_A1"]]
    assert [call_id for call_id, _ in answered] == ["call_A1", "call_A2", "call_A1"]
    assert code(answered[0][1]) is None
    assert answered[1][1].startswith("Error: ")  # AutoGen's json.loads failure, not the boundary's
    assert code(answered[2][1]) == "DUPLICATE_TOOL_CALL"
    assert store.calls(RUN) == ("call_A1",)
    assert store.get(RUN, "call_A1").request_json == '{"q":"cpu"}'
    assert lookup.calls == [{"q": "cpu"}]
    assert "RAW-ONLY" not in repr(answered)


def test_the_ollama_clients_counter_ids_are_missing_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """CIS-ECO-8, CIS-ID-6: OllamaChatCompletionClient gives every call of a response one counter id.

    Both calls of the first response arrive as ``"0"`` (recorded, the second would be
    DUPLICATE_TOOL_CALL of a call that never ran); the adapter refuses them as
    MISSING_TOOL_CALL_ID: no record, the tool never runs. The next response counts on.
    """
    turns = iter(
        [
            {
                "tool_calls": [
                    {"function": {"name": "lookup", "arguments": {"q": "a"}}},
                    {"function": {"name": "lookup", "arguments": {"q": "b"}}},
                ]
            },
            {"tool_calls": [{"function": {"name": "lookup", "arguments": {"q": "c"}}}]},
            {"content": "done"},
        ]
    )

    def chat(request: httpx.Request) -> httpx.Response:
        assert (request.url.host, request.url.path) == ("mock.invalid", "/api/chat")
        message = {"role": "assistant", "content": "", **next(turns)}
        return httpx.Response(
            200,
            json={
                "model": "llama3.1",
                "created_at": "2026-01-01T00:00:00Z",
                "message": message,
                "done": True,
                "done_reason": "stop",
                "prompt_eval_count": 1,
                "eval_count": 1,
            },
        )

    monkeypatch.setattr(
        _ollama_client,
        "AsyncClient",
        functools.partial(ollama.AsyncClient, transport=httpx.MockTransport(chat)),
    )
    client = OllamaChatCompletionClient(model="llama3.1", host="http://mock.invalid", model_info=MODEL_INFO)
    lookup = Lookup()
    boundary, store, context = sync_boundary(lookup)
    agent = AssistantAgent(
        "ops",
        model_client=client,
        tools=[boundary_tool(boundary, context, "lookup", "Look rows up")],
        max_tool_iterations=3,
    )
    requested, answered = _run(agent)
    assert requested == [["0", "0"], ["1"]]
    assert [code(content) for _, content in answered] == ["MISSING_TOOL_CALL_ID"] * 3
    assert store.calls(RUN) == ()
    assert lookup.calls == []
    # What the counter would do if it were recorded: the second call of a response refused.
    raw_boundary, _, raw_context = sync_boundary(Lookup())
    first, second = (
        raw_boundary.invoke(
            raw_context,
            ToolCallEnvelope(run_id=RUN, tool_call_id="0", tool_name="lookup", arguments=f'{{"q":"{q}"}}'),
        )
        for q in "ab"
    )
    assert first.ok
    assert second.code is not None
    assert second.code.value == "DUPLICATE_TOOL_CALL"


@pytest.mark.parametrize(
    ("call_id", "expected"),
    [
        ("call_tIZjAVyKEDuijbBwLY6RHV2p", "call_tIZjAVyKEDuijbBwLY6RHV2p"),
        ("toolu_01A", "toolu_01A"),
        ("functions.get_weather:0", "functions.get_weather:0"),
        ("a1B2c3D4e", "a1B2c3D4e"),
        ("0", None),
        ("17", None),
        ("", None),
        ("unknown_id", None),
        (None, None),
        ("\u0661", "\u0661"),  # a non-ASCII digit is no counter: preflight refuses it as unsafe
    ],
)
def test_autogen_tool_call_id(call_id: Any, expected: str | None) -> None:
    """CIS-ECO-8: provider ids pass unchanged; the counter, the placeholders and None are missing."""
    assert autogen_tool_call_id(call_id) == expected


def test_the_async_boundary_the_schema_and_a_call_without_id() -> None:
    """CIS-ECO-4: the AsyncToolBoundary is awaited; ``run`` (no call id) is MISSING_TOOL_CALL_ID."""

    async def main() -> tuple[str, str, Any]:
        boundary, store, context = await async_boundary(Lookup())
        tool = boundary_tool(
            boundary,
            lambda _token: context,
            "lookup",
            "Look rows up",
            {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        )
        token = CancellationToken()
        ok = await tool.run_json({"q": "x"}, token, call_id="call_Z")
        bare = await tool.run(tool.args_type().model_validate({"q": "y"}), token)
        return ok, bare, (tool.schema, await store.calls(RUN))

    ok, bare, (schema, calls) = asyncio.run(main())
    assert code(ok) is None
    assert code(bare) == "MISSING_TOOL_CALL_ID"
    assert calls == ("call_Z",)
    assert schema["name"] == "lookup"
    assert schema["parameters"]["properties"] == {"q": {"type": "string"}}
    assert schema["parameters"]["required"] == ["q"]
    boundary, _, context = sync_boundary(Lookup())
    with pytest.raises(ValueError, match="not registered"):
        boundary_tool(boundary, context, "launch", "x")
