"""Google ADK for real: its ``Runner`` calls the boundary tool; ADK's ids are refused (CIS-ECO-4, CIS-ECO-8).

google-adk 2.13's ``InMemoryRunner`` runs an ``LlmAgent`` whose model is a scripted
``BaseLlm`` (ADK's own extension point for models; no network): its turns are
``LlmResponse`` objects holding google-genai ``FunctionCall`` parts, one with the
model's id and one without, for which ADK invents ``adk-<uuid>``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.events import Event
from google.adk.flows.llm_flows.functions import AF_FUNCTION_CALL_ID_PREFIX
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types

from invocation_store.integrations.google_adk import ADK_ID_PREFIX, boundary_tool, envelopes_from_adk_event

from .._support import RUN, Lookup, async_boundary, sync_boundary


class ScriptedLlm(BaseLlm):
    """Answers each request with the next scripted response and keeps what ADK sent it."""

    model: str = "scripted"
    turns: list[LlmResponse]
    requests: list[LlmRequest]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        yield self.turns.pop(0)


def _calls(*calls: tuple[str | None, dict[str, Any]]) -> LlmResponse:
    parts = [types.Part(function_call=types.FunctionCall(id=i, name="lookup", args=a)) for i, a in calls]
    return LlmResponse(content=types.Content(role="model", parts=parts))


DONE = LlmResponse(content=types.Content(role="model", parts=[types.Part(text="done")]))


def _run(boundary: Any, context: Any, turns: list[LlmResponse]) -> tuple[list[Event], ScriptedLlm]:
    llm = ScriptedLlm(turns=turns, requests=[])
    agent = LlmAgent(
        name="ops", model=llm, tools=[boundary_tool(boundary, context, "lookup", "Look rows up")]
    )
    runner = InMemoryRunner(agent=agent, app_name="cis")

    async def main() -> list[Event]:
        session = await runner.session_service.create_session(app_name="cis", user_id="u")
        message = types.Content(role="user", parts=[types.Part(text="go")])
        return [e async for e in runner.run_async(user_id="u", session_id=session.id, new_message=message)]

    return asyncio.run(main()), llm


def test_the_runner_keys_calls_by_the_models_id_and_refuses_adks() -> None:
    """CIS-ECO-8, CIS-ID-6: ``function_call_id`` is the key; ADK's ``adk-<uuid>`` is MISSING_TOOL_CALL_ID.

    The id ADK invents reaches the tool and the events (checked here), never the
    model: ADK strips it from the next request. The adapter's prefix is ADK's own.
    """
    assert ADK_ID_PREFIX == AF_FUNCTION_CALL_ID_PREFIX
    lookup = Lookup()
    boundary, store, context = sync_boundary(lookup)
    events, llm = _run(
        boundary,
        context,
        [
            _calls(("fc-native-1", {"q": "a", "n": 1}), (None, {"q": "b"})),
            _calls(("fc-native-1", {"q": "c"})),
            DONE,
        ],
    )
    calls = [e for e in events if e.get_function_calls()]
    answers = [r for e in events for r in e.get_function_responses()]
    invented = calls[0].get_function_calls()[1].id
    assert invented is not None
    assert invented.startswith("adk-")
    assert [(r.id, (r.response or {}).get("code")) for r in answers] == [
        ("fc-native-1", None),
        (invented, "MISSING_TOOL_CALL_ID"),
        ("fc-native-1", "DUPLICATE_TOOL_CALL"),
    ]
    assert store.calls(RUN) == ("fc-native-1",)
    assert store.get(RUN, "fc-native-1").request_json == '{"n":1,"q":"a"}'
    assert lookup.calls == [{"q": "a", "n": 1}]
    assert "RAW-ONLY" not in repr(answers)
    # What ADK sent the model next: its own id stripped, the model's kept.
    sent = [p.function_call.id for c in llm.requests[1].contents for p in c.parts or [] if p.function_call]
    assert sent == ["fc-native-1", None]
    # The runner's events through envelopes_from_adk_event: the same rule.
    assert [[e.tool_call_id for e in envelopes_from_adk_event(ev, RUN)] for ev in calls] == [
        ["fc-native-1", None],
        ["fc-native-1"],
    ]


def test_the_runner_awaits_an_async_boundary() -> None:
    """CIS-ECO-4: an AsyncToolBoundary is awaited inside ADK's event loop."""

    async def make() -> tuple[Any, Any, Any]:
        return await async_boundary(Lookup())

    boundary, store, context = asyncio.run(make())
    events, _ = _run(boundary, context, [_calls(("fc-9", {"q": "z"})), DONE])
    answers = [r.response for e in events for r in e.get_function_responses()]
    assert answers
    assert answers[0]["ok"] is True
    assert asyncio.run(store.calls(RUN)) == ("fc-9",)


def test_a_thought_signature_stays_beside_the_id() -> None:
    """CIS-ECO-8: a Gemini 3 call's ``thought_signature`` is a field of its Part: the id stays the model's."""
    lookup = Lookup()
    boundary, store, context = sync_boundary(lookup)
    signed = types.Part(
        function_call=types.FunctionCall(id="fc-signed-1", name="lookup", args={"q": "s"}),
        thought_signature=b"\x00\xffsignature+/=" * 16,
    )
    events, _ = _run(
        boundary, context, [LlmResponse(content=types.Content(role="model", parts=[signed])), DONE]
    )
    answers = [r for e in events for r in e.get_function_responses()]
    assert [(r.id, (r.response or {}).get("ok")) for r in answers] == [("fc-signed-1", True)]
    assert store.calls(RUN) == ("fc-signed-1",)
