"""LiteLLM, for real over a mock HTTP transport: the ids it invents are missing ids (CIS-ECO-4, CIS-ID-6).

``litellm.completion`` talks to ``httpx.MockTransport`` handlers answering in each
provider's own JSON (Gemini ``generateContent``, Ollama ``/api/chat``, OpenAI Chat
Completions); its ``ModelResponse`` goes through :func:`envelopes_from_litellm`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no cost-map download at import

import httpx
import httpx2
import litellm
import openai
import pytest
from litellm.llms.custom_httpx.http_handler import HTTPHandler

from invocation_store.integrations.litellm import envelopes_from_litellm, is_fabricated
from invocation_store.providers import openai_chat_tool_message

from ._support import RUN, Lookup, sync_boundary

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
SIGNATURE = "c2lnbmF0dXJl+/==" * 16  # base64 with + / =, as Gemini 3 sends it


def _client(reply: Callable[[httpx.Request], dict[str, Any]]) -> HTTPHandler:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.host == "mock.invalid"
        return httpx.Response(200, json=reply(request))

    return HTTPHandler(client=httpx.Client(transport=httpx.MockTransport(handler)))


GEMINI = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"functionCall": {"name": "lookup", "args": {"q": "disk"}}},
                    {"functionCall": {"name": "lookup", "args": {"q": "cpu"}, "id": "fc-native-7"}},
                    {"functionCall": {"name": "lookup", "args": {"q": "mem"}}, "thoughtSignature": SIGNATURE},
                ],
            },
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
    "modelVersion": "gemini-2.5-flash",
}


def _gemini(**options: Any) -> Any:
    return litellm.completion(
        model="gemini/gemini-2.5-flash",
        messages=[{"role": "user", "content": "go"}],
        tools=TOOLS,
        api_key="test-key",
        api_base="http://mock.invalid",
        client=_client(lambda _request: GEMINI),
        **options,
    )


def _run(envelopes: list[Any]) -> tuple[list[str | None], Lookup]:
    lookup = Lookup()
    boundary, _, context = sync_boundary(lookup)
    return [_code(boundary, context, e) for e in envelopes], lookup


def _code(boundary: Any, context: Any, envelope: Any) -> str | None:
    result = boundary.invoke(context, envelope)
    return None if result.ok else result.code.value


def test_gemini_through_litellm_invented_ids_are_missing() -> None:
    """CIS-ECO-8, CIS-ID-6: ``call_<28 hex>`` (no native id) is MISSING_TOOL_CALL_ID; a native id runs."""
    response = _gemini(thought_signature_in_tool_call_id=False)
    ids = [call.id for call in response.choices[0].message.tool_calls]
    assert ids[1] == "fc-native-7"
    assert is_fabricated(ids[0], "gemini")
    assert is_fabricated(ids[2], "gemini")
    envelopes = envelopes_from_litellm(response, RUN)
    assert [e.tool_call_id for e in envelopes] == [None, "fc-native-7", None]
    codes, lookup = _run(envelopes)
    assert codes == ["MISSING_TOOL_CALL_ID", None, "MISSING_TOOL_CALL_ID"]
    assert lookup.calls == [{"q": "cpu"}]
    # a dump carries no provider: name it
    dumped = response.model_dump()
    assert [e.tool_call_id for e in envelopes_from_litellm(dumped, RUN, provider="gemini")] == [
        None,
        "fc-native-7",
        None,
    ]
    assert envelopes_from_litellm(dumped, RUN)[0].tool_call_id == ids[0]


def test_thought_signatures_in_the_id_are_unsafe_and_the_documented_setting_runs() -> None:
    """CIS-ID-3, CIS-ECO-4: LiteLLM's default ``<id>__thought__<signature>`` is UNSAFE_TOOL_CALL_ID;
    with ``thought_signature_in_tool_call_id=False`` the native id runs and the answer echoes it."""
    native = {**GEMINI}
    native["candidates"] = [
        {
            **GEMINI["candidates"][0],
            "content": {
                "role": "model",
                "parts": [
                    {
                        "functionCall": {"name": "lookup", "args": {"q": "mem"}, "id": "fc-9"},
                        "thoughtSignature": SIGNATURE,
                    }
                ],
            },
        }
    ]
    signed = litellm.completion(
        model="gemini/gemini-2.5-flash",
        messages=[{"role": "user", "content": "go"}],
        tools=TOOLS,
        api_key="test-key",
        api_base="http://mock.invalid",
        client=_client(lambda _request: native),
    )
    (envelope,) = envelopes_from_litellm(signed, RUN)
    assert envelope.tool_call_id == f"fc-9__thought__{SIGNATURE}"
    assert _run([envelope])[0] == ["UNSAFE_TOOL_CALL_ID"]
    clean = litellm.completion(
        model="gemini/gemini-2.5-flash",
        messages=[{"role": "user", "content": "go"}],
        tools=TOOLS,
        api_key="test-key",
        api_base="http://mock.invalid",
        client=_client(lambda _request: native),
        thought_signature_in_tool_call_id=False,
    )
    (envelope,) = envelopes_from_litellm(clean, RUN)
    assert envelope.tool_call_id == "fc-9"
    lookup = Lookup()
    boundary, _, context = sync_boundary(lookup)
    result = boundary.invoke(context, envelope)
    assert result.ok
    assert openai_chat_tool_message(envelope, result)["tool_call_id"] == "fc-9"


OLLAMA = {
    "model": "llama3.1",
    "created_at": "2026-01-01T00:00:00Z",
    "message": {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"function": {"name": "lookup", "arguments": {"q": "a"}}},
            {"function": {"name": "lookup", "arguments": {"q": "b"}}},
        ],
    },
    "done": True,
    "done_reason": "stop",
    "prompt_eval_count": 1,
    "eval_count": 1,
}


def test_ollama_through_litellm_every_id_is_invented() -> None:
    """CIS-ID-6, CIS-ECO-4: Ollama sent no ids; LiteLLM's uuid4 ids are all MISSING_TOOL_CALL_ID."""
    response = litellm.completion(
        model="ollama_chat/llama3.1",
        messages=[{"role": "user", "content": "go"}],
        tools=TOOLS,
        api_base="http://mock.invalid",
        client=_client(lambda _request: OLLAMA),
    )
    ids = [call.id for call in response.choices[0].message.tool_calls]
    assert all(is_fabricated(i, "ollama_chat") for i in ids)
    envelopes = envelopes_from_litellm(response, RUN)
    assert [e.tool_call_id for e in envelopes] == [None, None]
    assert _run(envelopes)[0] == ["MISSING_TOOL_CALL_ID", "MISSING_TOOL_CALL_ID"]


def test_openai_through_litellm_keeps_the_providers_ids_and_raw_text() -> None:
    """CIS-ID-4, CIS-ECO-2: an OpenAI id passes through LiteLLM unchanged; the raw text decides."""
    completion = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4.1",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_Vq3Yd8mXb9Pz",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": '{"q": "a"}'},
                        },
                        {
                            "id": "call_2nB0tQe7LkWs",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": '{"q": 1, "q": 2}'},
                        },
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    sdk = openai.OpenAI(
        api_key="sk-test",
        base_url="http://mock.invalid/v1",
        http_client=httpx2.Client(
            transport=httpx2.MockTransport(lambda _r: httpx2.Response(200, json=completion))
        ),
    )
    response = litellm.completion(
        model="openai/gpt-4.1", messages=[{"role": "user", "content": "go"}], tools=TOOLS, client=sdk
    )
    envelopes = envelopes_from_litellm(response, RUN)
    assert [e.tool_call_id for e in envelopes] == ["call_Vq3Yd8mXb9Pz", "call_2nB0tQe7LkWs"]
    assert _run(envelopes)[0] == [None, "INVALID_ARGUMENTS"]


@pytest.mark.parametrize(
    ("tool_call_id", "provider", "fabricated"),
    [
        ("call_0123456789abcdef0123456789ab", "gemini", True),
        ("call_0123456789abcdef0123456789ab", "openai", False),  # an OpenAI id of that form is OpenAI's
        ("call_0123456789abcdef0123456789ab", None, False),
        ("call_0123456789abcdef0123456789a", "gemini", False),
        ("call_0123456789ABCDEF0123456789ab", "vertex_ai", False),
        ("call_12345678-1234-4abc-8def-1234567890ab", "ollama", True),
        ("12345678-1234-4abc-8def-1234567890ab", "ollama_chat", True),
        ("12345678-1234-4abc-8def-1234567890ab", "openai", False),
        ("call_12345678-1234-4abc-8def-1234567890ab", "gemini", False),
        ("fc-native", "gemini", False),
        (None, "gemini", False),
    ],
)
def test_the_invented_id_forms(tool_call_id: object, provider: str | None, fabricated: bool) -> None:
    """CIS-ECO-8: exactly LiteLLM's forms, for exactly the providers it invents them for."""
    assert is_fabricated(tool_call_id, provider) is fabricated


def test_a_turn_cut_by_its_output_limit_does_not_run_its_last_call_through_litellm() -> None:
    """CIS-ECO-6: an Anthropic turn stopped on ``max_tokens`` reaches the harness through
    LiteLLM as ``finish_reason: "length"``; its last call may be cut (a whole-looking
    ``{"amount": 10}`` may be the start of 1000), so it is INVALID_ARGUMENTS and never runs,
    as through the Anthropic parser itself; the turn's earlier call runs."""
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "stop_reason": "max_tokens",
        "stop_sequence": None,
        "usage": {"input_tokens": 9, "output_tokens": 9},
        "content": [
            {"type": "tool_use", "id": "toolu_01A", "name": "lookup", "input": {"q": "disk"}},
            {"type": "tool_use", "id": "toolu_01B", "name": "lookup", "input": {"q": "cpu", "limit": 10}},
        ],
    }
    response = litellm.completion(
        model="anthropic/claude-sonnet-4-5",
        messages=[{"role": "user", "content": "go"}],
        tools=TOOLS,
        api_key="test-key",
        api_base="http://mock.invalid",
        client=_client(lambda _request: message),
    )
    assert response.choices[0].finish_reason == "length"
    envelopes = envelopes_from_litellm(response, RUN)
    assert [e.tool_call_id for e in envelopes] == ["toolu_01A", "toolu_01B"]
    assert envelopes[1].arguments is None
    codes, lookup = _run(envelopes)
    assert codes == [None, "INVALID_ARGUMENTS"]
    assert lookup.calls == [{"q": "disk"}]
