"""AG2 for real: its agent runs the boundary tool; AG2's uuid4 ids are refused (CIS-ECO-4, CIS-ECO-8).

ag2 1.2.1's ``Agent`` drives the tool with three model configurations: AG2's own
``TestConfig`` (scripted ``ToolCallEvent`` turns), and the real ``GeminiConfig`` and
``OllamaConfig`` clients, each over an ``httpx.AsyncClient`` whose
``MockTransport`` answers in that provider's JSON (Gemini ``generateContent``,
Ollama ``/api/chat``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from ag2 import Agent
from ag2.config.gemini import GeminiConfig
from ag2.config.ollama import OllamaConfig
from ag2.events import ToolCallEvent, ToolResultEvent
from ag2.middleware import BaseMiddleware
from ag2.testing import TestConfig

from invocation_store.integrations.ag2 import UUID4_ID, ag2_tool_call_id, boundary_tool

from .._support import RUN, Lookup, async_boundary, code, sync_boundary


def _ask(agent: Agent) -> tuple[str, list[tuple[str, str]], list[str]]:
    """(the reply, (call id, agent text) of each tool result, the ids of the calls) of one ``ask``."""

    async def main() -> tuple[str, list[Any]]:
        reply = await agent.ask("go")
        return reply.body, list(await reply.history.get_events())

    body, events = asyncio.run(main())
    results = [(e.parent_id, e.result.parts[0].content) for e in events if isinstance(e, ToolResultEvent)]
    calls = [c.id for e in events for c in getattr(getattr(e, "tool_calls", None), "calls", ())]
    return body, results, calls


def _reply(payload: Callable[[dict[str, Any]], dict[str, Any]]) -> httpx.AsyncClient:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=payload(json.loads(request.content)))

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def test_scripted_calls_provider_ids_run_and_invented_ones_are_missing() -> None:
    """CIS-ECO-4, CIS-ID-6: ``ToolCallEvent.id`` is the key; its uuid4 default is MISSING_TOOL_CALL_ID.

    The arguments are the event's text: a duplicate member name is INVALID_ARGUMENTS.
    """
    lookup = Lookup()
    boundary, store, context = sync_boundary(lookup)
    invented = ToolCallEvent("lookup", arguments='{"q": "b"}')  # what a client without an id builds
    assert UUID4_ID.fullmatch(invented.id)
    config = TestConfig(
        [
            ToolCallEvent("lookup", id="call_1", arguments='{"q": "a"}'),
            invented,
            ToolCallEvent("lookup", id="call_2", arguments='{"q": 1, "q": 2}'),
        ],
        [ToolCallEvent("lookup", id="call_1", arguments='{"q": "c"}')],
        "done",
    )
    agent = Agent("ops", config=config, tools=[boundary_tool(boundary, context, "lookup", "Look rows up")])
    body, results, _ = _ask(agent)
    assert body == "done"
    # AG2 runs a turn's calls concurrently: its results come in completion order.
    first, second = results[:3], results[3:]
    assert sorted((call_id, str(code(text))) for call_id, text in first) == sorted(
        [("call_1", "None"), (invented.id, "MISSING_TOOL_CALL_ID"), ("call_2", "INVALID_ARGUMENTS")]
    )
    assert [(call_id, code(text)) for call_id, text in second] == [("call_1", "DUPLICATE_TOOL_CALL")]
    assert store.calls(RUN) == ("call_1",)
    assert store.get(RUN, "call_1").request_json == '{"q": "a"}'
    assert lookup.calls == [{"q": "a"}]
    assert "RAW-ONLY" not in repr(results)


def test_the_gemini_client_invents_a_uuid_for_a_call_without_id() -> None:
    """CIS-ECO-8: AG2's Gemini client writes ``fc.id or uuid4()``; the native id runs, the other not."""

    def gemini(body: dict[str, Any]) -> dict[str, Any]:
        if len(body["contents"]) == 1:
            parts = [
                {"functionCall": {"name": "lookup", "args": {"q": "a"}}},
                {
                    "functionCall": {"id": "fc-native-7", "name": "lookup", "args": {"q": "b"}},
                    "thoughtSignature": base64.b64encode(b"\xfb\xff signature" * 16).decode(),
                },  # Gemini 3: the signature beside the id
            ]
        else:
            parts = [{"text": "done"}]
        return {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
        }

    lookup = Lookup()
    boundary, store, context = sync_boundary(lookup)
    config = GeminiConfig(model="gemini-2.5-flash", api_key="test-key", http_client=_reply(gemini))
    agent = Agent("ops", config=config, tools=[boundary_tool(boundary, context, "lookup", "Look rows up")])
    body, results, calls = _ask(agent)
    assert body == "done"
    assert UUID4_ID.fullmatch(calls[0])
    assert calls[1] == "fc-native-7"
    assert {call_id: code(text) for call_id, text in results} == {
        calls[0]: "MISSING_TOOL_CALL_ID",
        "fc-native-7": None,
    }
    assert store.calls(RUN) == ("fc-native-7",)
    assert store.get(RUN, "fc-native-7").request_json == '{"q": "b"}'  # AG2's json.dumps of Gemini's args
    assert lookup.calls == [{"q": "b"}]


def test_the_ollama_client_invents_every_id() -> None:
    """CIS-ECO-8: Ollama sends no ids and AG2's client gives each call a uuid4: every call is refused."""

    def ollama(body: dict[str, Any]) -> dict[str, Any]:
        if len(body["messages"]) == 1:
            message = {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"function": {"name": "lookup", "arguments": {"q": "a"}}},
                    {"function": {"name": "lookup", "arguments": {"q": "b"}}},
                ],
            }
        else:
            message = {"role": "assistant", "content": "done"}
        return {
            "model": "llama3.1",
            "created_at": "2026-01-01T00:00:00Z",
            "message": message,
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 1,
            "eval_count": 1,
        }

    lookup = Lookup()
    boundary, store, context = sync_boundary(lookup)
    config = OllamaConfig(model="llama3.1", host="http://mock.invalid", http_client=_reply(ollama))
    agent = Agent("ops", config=config, tools=[boundary_tool(boundary, context, "lookup", "Look rows up")])
    _, results, calls = _ask(agent)
    assert len(calls) == 2
    assert all(UUID4_ID.fullmatch(c) for c in calls)
    assert [code(text) for _, text in results] == ["MISSING_TOOL_CALL_ID"] * 2
    assert store.calls(RUN) == ()
    assert lookup.calls == []


def test_middleware_runs_around_it_and_the_async_boundary_is_awaited() -> None:
    """CIS-ECO-4: the agent's tool middleware sees the call; an AsyncToolBoundary is awaited."""
    seen: list[str] = []

    class Watch(BaseMiddleware):
        async def on_tool_execution(self, call_next: Any, event: ToolCallEvent, context: Any) -> Any:
            seen.append(event.id)
            return await call_next(event, context)

    async def make() -> tuple[Any, Any, Any]:
        return await async_boundary(Lookup())

    boundary, store, context = asyncio.run(make())
    config = TestConfig(ToolCallEvent("lookup", id="call_9", arguments=""), "done")  # "" is AG2's {}
    agent = Agent(
        "ops",
        config=config,
        middleware=[Watch],
        tools=[boundary_tool(boundary, lambda ctx: context, "lookup", "Look rows up")],
    )
    _, results, _ = _ask(agent)
    assert [(call_id, code(text)) for call_id, text in results] == [("call_9", None)]
    assert seen == ["call_9"]
    assert asyncio.run(store.calls(RUN)) == ("call_9",)


@pytest.mark.parametrize(
    ("call_id", "accept", "expected"),
    [
        ("call_abc", False, "call_abc"),
        ("toolu_01A", False, "toolu_01A"),
        ("fc-native-7", False, "fc-native-7"),
        (str(uuid.UUID(int=0x1F61CE49EDB9426D9BAD17D789644F19)), False, None),
        ("1f61ce49-edb9-426d-9bad-17d789644f19", True, "1f61ce49-edb9-426d-9bad-17d789644f19"),
        ("1F61CE49-EDB9-426D-9BAD-17D789644F19", False, "1F61CE49-EDB9-426D-9BAD-17D789644F19"),
        ("1f61ce49-edb9-126d-9bad-17d789644f19", False, "1f61ce49-edb9-126d-9bad-17d789644f19"),
        ("", False, None),
        (None, False, None),
    ],
)
def test_ag2_tool_call_id(call_id: Any, accept: bool, expected: str | None) -> None:
    """CIS-ECO-8: only ``str(uuid4())``'s form (lowercase, version 4) is AG2's; accept_uuid_ids keeps it."""
    assert ag2_tool_call_id(call_id, accept_uuid_ids=accept) == expected
