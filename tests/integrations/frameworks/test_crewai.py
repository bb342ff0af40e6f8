"""CrewAI for real: its Gemini provider over a mock transport, and the ids CrewAI puts on calls (CIS-ECO-8).

crewai 1.15.28 is installed without its vector-store stack (``chromadb`` without its
own dependencies, no ``lancedb``: .ci/frameworks.lock); what runs is CrewAI's code
path that names native tool calls: ``GeminiCompletion.call`` (the real google-genai
client, its HTTP through an ``httpx.MockTransport`` answering ``generateContent``
and ``streamGenerateContent``) and ``extract_tool_call_info``, which the agent
executor uses for every native call. Neither a Crew nor its telemetry is started.
What is checked, as the table of docs/integrations.md states it: every Gemini call gets
``call_<id(part)>`` (the CPython address of the Part object), also when Gemini sent
its own id, streamed or not; an OpenAI-style call keeps its id; and neither a tool
nor a tool hook is handed an id.
"""

from __future__ import annotations

import inspect
import json
import os
import re
from typing import Any

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

import httpx
import pytest
from crewai.hooks.tool_hooks import ToolCallHookContext
from crewai.llms.providers.gemini.completion import GeminiCompletion
from crewai.tools import BaseTool
from crewai.utilities.agent_utils import extract_tool_call_info
from google.genai import types
from openai.types.chat import ChatCompletionMessageToolCall

GEMINI = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"functionCall": {"id": "fc-native-7", "name": "lookup", "args": {"q": "a"}}},
                    {"functionCall": {"name": "lookup", "args": {"q": "b"}}},
                ],
            },
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look rows up",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
]


def _gemini(stream: bool) -> GeminiCompletion:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.host == "mock.invalid"
        if "streamGenerateContent" in request.url.path:
            return httpx.Response(
                200,
                content=b"data: " + json.dumps(GEMINI).encode() + b"\r\n\r\n",
                headers={"content-type": "text/event-stream"},
            )
        return httpx.Response(200, json=GEMINI)

    options = types.HttpOptions(
        base_url="http://mock.invalid", client_args={"transport": httpx.MockTransport(handler)}
    )
    return GeminiCompletion(
        model="gemini-2.5-flash", api_key="test-key", stream=stream, client_params={"http_options": options}
    )


@pytest.mark.parametrize("stream", [False, True])
def test_every_gemini_call_gets_a_crewai_id(stream: bool) -> None:
    """CIS-ECO-8: ``call_<id(part)>`` for both calls; Gemini's own ``fc-native-7`` is dropped."""
    parts = _gemini(stream).call([{"role": "user", "content": "go"}], tools=TOOLS)
    assert [p.function_call.id for p in parts] == ["fc-native-7", None]
    infos = [extract_tool_call_info(p) for p in parts]
    assert [(name, args) for _, name, args in infos] == [("lookup", {"q": "a"}), ("lookup", {"q": "b"})]
    assert [call_id for call_id, _, _ in infos] == [f"call_{id(p)}" for p in parts]
    assert all(re.fullmatch(r"call_\d+", call_id) for call_id, _, _ in infos)


def test_other_providers_keep_their_ids_and_an_id_less_dict_gets_one() -> None:
    """CIS-ECO-8: an OpenAI-style call keeps its id; a dict call without one gets ``call_<id(dict)>``."""
    openai_call = ChatCompletionMessageToolCall.model_validate(
        {"id": "call_A1", "type": "function", "function": {"name": "lookup", "arguments": '{"q":"a"}'}}
    )
    assert extract_tool_call_info(openai_call) == ("call_A1", "lookup", '{"q":"a"}')
    anonymous: dict[str, Any] = {"function": {"name": "lookup", "arguments": "{}"}}
    assert extract_tool_call_info(anonymous)[0] == f"call_{id(anonymous)}"


def test_neither_a_tool_nor_a_tool_hook_sees_an_id() -> None:
    """CIS-ECO-8: ``BaseTool._run(**kwargs)`` and ``ToolCallHookContext`` carry no call id: no adapter can."""
    hook_parameters = set(inspect.signature(ToolCallHookContext.__init__).parameters)
    assert not {p for p in hook_parameters if "id" in p.split("_")}
    assert "id" not in inspect.signature(BaseTool.run).parameters
