"""The providers' own SDKs, end to end: typed objects in, result messages out (CIS-ECO-1..3).

Every SDK client talks to an ``httpx2.MockTransport`` (the HTTP library the SDKs
use; no network): the typed objects the parsers receive are the ones each SDK
builds from a response in its documented JSON shape, and the result messages the
builders make are sent back through the same client, whose request body is then
checked. Also: the I-JSON rule for object arguments, on every provider.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from google import genai
from google.genai import types as genai_types

from invocation_store import (
    BoundaryResult,
    ErrorCode,
    EvidenceStatus,
    Limits,
    MemoryStore,
    Projection,
    RunContext,
    ToolBoundary,
    ToolCallEnvelope,
    ToolRegistry,
    ToolSpec,
    envelope_from_anthropic,
    envelope_from_gemini,
    envelope_from_openai_chat,
    envelope_from_openai_responses,
    envelopes_from_anthropic,
    envelopes_from_gemini,
    envelopes_from_openai_chat,
    envelopes_from_openai_responses,
)
from invocation_store._cli.replay import load_transcript
from invocation_store.kernel import ToolPolicy, check_envelope
from invocation_store.providers import (
    anthropic_tool_result,
    anthropic_tool_results_message,
    gemini_function_response,
    gemini_function_responses_content,
    openai_chat_tool_message,
    openai_responses_function_call_output,
)

RUN = "run-sdk"
UNSAFE = "call 7{x}"  # whitespace and braces: UNSAFE_TOOL_CALL_ID, but the provider's own id

CHAT_COMPLETION: dict[str, Any] = {
    "id": "chatcmpl-AB12",
    "object": "chat.completion",
    "created": 1_733_000_000,
    "model": "gpt-4.1",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "refusal": None,
                "tool_calls": [
                    {
                        "id": "call_Vq3Yd8mXb9Pz",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'},
                    },
                    {
                        "id": UNSAFE,
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"location": "Lyon"}'},
                    },
                    {
                        "id": "call_2nB0tQe7LkWs",
                        "type": "function",
                        "function": {"name": "launch_rocket", "arguments": "{}"},
                    },
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
}

RESPONSE: dict[str, Any] = {
    "id": "resp_67cc",
    "object": "response",
    "created_at": 1_733_000_000,
    "status": "completed",
    "model": "gpt-4.1",
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_unLAR8MvFNptuiZK",
            "name": "get_weather",
            "arguments": '{"location":"Paris"}',
            "status": "completed",
        },
        {
            "type": "function_call",
            "id": "fc_2",
            "call_id": UNSAFE,
            "name": "get_weather",
            "arguments": '{"location":"Lyon"}',
            "status": "completed",
        },
        {
            "type": "function_call",
            "id": "fc_3",
            "call_id": "call_Q2yq0Wk9dR3uVx",
            "name": "launch_rocket",
            "arguments": "{}",
            "status": "completed",
        },
    ],
}

MESSAGE: dict[str, Any] = {
    "id": "msg_01Aq",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_01A09q", "name": "get_weather", "input": {"location": "Paris"}},
        {"type": "tool_use", "id": UNSAFE, "name": "get_weather", "input": {"location": "Lyon"}},
        {"type": "tool_use", "id": "toolu_01JqR8", "name": "launch_rocket", "input": {}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 5},
}

GENERATE: dict[str, Any] = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"text": "Let me look."},
                    {
                        "functionCall": {
                            "id": "gcall-8f2d",
                            "name": "get_weather",
                            "args": {"location": "Paris"},
                        }
                    },
                    {"functionCall": {"id": UNSAFE, "name": "get_weather", "args": {"location": "Lyon"}}},
                    {"functionCall": {"name": "launch_rocket", "args": {}}},
                ],
            },
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "modelVersion": "gemini-2.5-flash",
}

FINAL_CHAT = {
    **CHAT_COMPLETION,
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Sunny."}}],
}
FINAL_RESPONSE = {**RESPONSE, "output": []}
FINAL_MESSAGE = {**MESSAGE, "content": [{"type": "text", "text": "Sunny."}], "stop_reason": "end_turn"}
FINAL_GENERATE = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Sunny."}]}, "index": 0}]}


class MockServer:
    """Answers each path with queued JSON bodies and records every request body."""

    def __init__(self, replies: dict[str, list[dict[str, Any]]]) -> None:
        self.replies = replies
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        assert request.url.host == "mock.invalid"
        self.requests.append(json.loads(request.content))
        return httpx2.Response(200, json=self.replies[request.url.path].pop(0))

    def client(self) -> httpx2.Client:
        return httpx2.Client(transport=httpx2.MockTransport(self))


def weather(arguments: Any) -> dict[str, Any]:
    return {"location": arguments["location"], "temp_c": 21, "secret": "RAW-ONLY"}


def project(raw: str, arguments: Any) -> Projection:
    return Projection(
        evidence_status=EvidenceStatus.EVIDENCE_FOUND,
        content=f"{json.loads(raw)['temp_c']} C in {arguments['location']}",
        scope="weather api",
    )


def boundary() -> tuple[ToolBoundary, RunContext]:
    registry = ToolRegistry(
        [
            ToolSpec(name="get_weather", executor=weather, projector=project),
            ToolSpec(name="launch_rocket", executor=weather, projector=project, read_only=False),
        ]
    )
    store = MemoryStore()
    tools = ToolBoundary(store, registry)
    context = tools.open_run(
        RUN, deadline_ms=store.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=10, byte_budget=1 << 20
    )
    assert isinstance(context, RunContext)
    return tools, context


def run_all(envelopes: list[ToolCallEnvelope]) -> list[tuple[ToolCallEnvelope, BoundaryResult]]:
    tools, context = boundary()
    return [(e, tools.invoke(context, e)) for e in envelopes]


def forms(typed: Any) -> Iterator[Any]:
    """Every form of one SDK object a harness may hold."""
    yield typed
    yield typed.model_dump()
    yield typed.model_dump(mode="json")
    yield typed.model_dump_json()
    yield typed.model_dump_json().encode("utf-8")


def assert_outcomes(pairs: list[tuple[ToolCallEnvelope, BoundaryResult]]) -> None:
    (_, first), (_, second), (_, third) = pairs[:3]
    assert first.ok
    assert first.content == "21 C in Paris"
    assert second.code is ErrorCode.UNSAFE_TOOL_CALL_ID
    assert second.tool_call_id is None  # never shown to the agent ...
    assert second.envelope_tool_call_id == UNSAFE  # ... but kept for the provider
    assert third.code is ErrorCode.NOT_READ_ONLY
    assert third.tool_name == "launch_rocket"


# ---------------------------------------------------------------------------
# OpenAI Chat Completions


def test_openai_chat_typed_objects_and_tool_messages() -> None:
    """CIS-ECO-1, CIS-ECO-3, CIS-ID-4: the SDK's ChatCompletion in every form; role=tool messages back."""
    server = MockServer({"/v1/chat/completions": [CHAT_COMPLETION, FINAL_CHAT]})
    client = openai.OpenAI(api_key="sk-test", base_url="http://mock.invalid/v1", http_client=server.client())
    question: list[Any] = [{"role": "user", "content": "Weather in Paris and Lyon?"}]
    completion = client.chat.completions.create(model="gpt-4.1", messages=question)
    assert isinstance(completion, openai.types.chat.ChatCompletion)

    expected = envelopes_from_openai_chat(CHAT_COMPLETION, RUN)
    assert [e.tool_call_id for e in expected] == ["call_Vq3Yd8mXb9Pz", UNSAFE, "call_2nB0tQe7LkWs"]
    message = completion.choices[0].message
    for form in [*forms(completion), *forms(message)]:
        assert envelopes_from_openai_chat(form, RUN) == expected
    assert message.tool_calls is not None
    assert envelopes_from_openai_chat(message.tool_calls, RUN) == expected
    assert [envelope_from_openai_chat(call, RUN) for call in message.tool_calls] == expected
    for form in forms(message.tool_calls[0]):
        assert envelope_from_openai_chat(form, RUN) == expected[0]
        assert envelopes_from_openai_chat(form, RUN) == expected[:1]

    pairs = run_all(expected)
    assert_outcomes(pairs)
    replies = [openai_chat_tool_message(e, r) for e, r in pairs]
    client.chat.completions.create(model="gpt-4.1", messages=[*question, message.model_dump(), *replies])
    sent = server.requests[-1]["messages"]
    assert sent[2:] == replies
    assert [m["tool_call_id"] for m in sent[2:]] == ["call_Vq3Yd8mXb9Pz", UNSAFE, "call_2nB0tQe7LkWs"]
    assert json.loads(sent[2]["content"]) == {
        "ok": True,
        "evidence_status": "EVIDENCE_FOUND",
        "negative": False,
        "content": "21 C in Paris",
        "scope": "weather api",
    }
    assert json.loads(sent[3]["content"]) == {
        "ok": False,
        "code": "UNSAFE_TOOL_CALL_ID",
        "message": pairs[1][1].message,
    }
    assert "RAW-ONLY" not in json.dumps(sent)


def test_openai_chat_streamed_chunks_and_wrong_objects_are_refused() -> None:
    """CIS-ECO-1: a streamed chunk or another SDK object raises, naming what was expected."""
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": []}
    with pytest.raises(ValueError, match="accumulate"):
        envelopes_from_openai_chat(chunk, RUN)
    typed_message = anthropic.types.Message.model_validate(MESSAGE)
    with pytest.raises(ValueError, match="Anthropic Message: use envelopes_from_anthropic"):
        envelopes_from_openai_chat(typed_message, RUN)
    with pytest.raises(ValueError, match="use envelopes_from_openai_chat"):
        envelope_from_openai_chat(CHAT_COMPLETION["choices"][0]["message"], RUN)


# ---------------------------------------------------------------------------
# OpenAI Responses


def test_openai_responses_typed_objects_and_function_call_outputs() -> None:
    """CIS-ECO-1, CIS-ECO-3: the SDK's Response in every form; function_call_output items back."""
    server = MockServer({"/v1/responses": [RESPONSE, FINAL_RESPONSE]})
    client = openai.OpenAI(api_key="sk-test", base_url="http://mock.invalid/v1", http_client=server.client())
    response = client.responses.create(model="gpt-4.1", input="Weather in Paris and Lyon?")
    assert isinstance(response, openai.types.responses.Response)

    expected = envelopes_from_openai_responses(RESPONSE, RUN)
    assert [e.tool_call_id for e in expected] == ["call_unLAR8MvFNptuiZK", UNSAFE, "call_Q2yq0Wk9dR3uVx"]
    for form in forms(response):
        assert envelopes_from_openai_responses(form, RUN) == expected
    assert envelopes_from_openai_responses(response.output, RUN) == expected
    for form in forms(response.output[1]):
        assert envelope_from_openai_responses(form, RUN) == expected[0]
        assert envelopes_from_openai_responses(form, RUN) == expected[:1]
    assert envelopes_from_openai_responses(response.output[0], RUN) == []  # a reasoning item

    pairs = run_all(expected)
    assert_outcomes(pairs)
    outputs = [openai_responses_function_call_output(e, r) for e, r in pairs]
    calls = [item.model_dump(exclude_none=True) for item in response.output[1:]]
    client.responses.create(model="gpt-4.1", input=[*calls, *outputs])
    sent = server.requests[-1]["input"]
    assert sent[3:] == outputs
    assert [item["call_id"] for item in sent[3:]] == [item["call_id"] for item in sent[:3]]
    assert json.loads(sent[5]["output"])["code"] == "NOT_READ_ONLY"


# ---------------------------------------------------------------------------
# Anthropic Messages


def test_anthropic_typed_objects_and_tool_results() -> None:
    """CIS-ECO-1, CIS-ECO-3: the SDK's Message in every form; tool_result blocks with is_error back."""
    server = MockServer({"/v1/messages": [MESSAGE, FINAL_MESSAGE]})
    client = anthropic.Anthropic(
        api_key="sk-ant-test", base_url="http://mock.invalid", http_client=server.client()
    )
    question: list[Any] = [{"role": "user", "content": "Weather in Paris and Lyon?"}]
    message = client.messages.create(model="claude-sonnet-4-5", max_tokens=100, messages=question)
    assert isinstance(message, anthropic.types.Message)

    expected = envelopes_from_anthropic(MESSAGE, RUN)
    assert [e.tool_call_id for e in expected] == ["toolu_01A09q", UNSAFE, "toolu_01JqR8"]
    for form in forms(message):
        assert envelopes_from_anthropic(form, RUN) == expected
    assert envelopes_from_anthropic(message.content, RUN) == expected
    for form in forms(message.content[1]):
        assert envelope_from_anthropic(form, RUN) == expected[0]
    assert envelopes_from_anthropic(message.content[0], RUN) == []  # a text block

    pairs = run_all(expected)
    assert_outcomes(pairs)
    reply = anthropic_tool_results_message(pairs)
    assert reply["content"] == [anthropic_tool_result(e, r) for e, r in pairs]
    assistant = {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]}
    client.messages.create(model="claude-sonnet-4-5", max_tokens=100, messages=[*question, assistant, reply])
    sent = server.requests[-1]["messages"][2]
    assert sent == reply
    assert [b["is_error"] for b in sent["content"]] == [False, True, True]
    assert [b["tool_use_id"] for b in sent["content"]] == ["toolu_01A09q", UNSAFE, "toolu_01JqR8"]


# ---------------------------------------------------------------------------
# Google Gemini


def test_gemini_typed_objects_and_function_responses() -> None:
    """CIS-ECO-1, CIS-ECO-3, CIS-ID-6: a GenerateContentResponse in every form; functionResponse back."""
    server = MockServer({"/v1beta/models/gemini-2.5-flash:generateContent": [GENERATE, FINAL_GENERATE]})
    options = genai_types.HttpOptions(
        base_url="http://mock.invalid", api_version="v1beta", httpx_client=server.client()
    )
    client = genai.Client(api_key="test-key", http_options=options)
    question = genai_types.Content(role="user", parts=[genai_types.Part(text="Weather in Paris and Lyon?")])
    response = client.models.generate_content(model="gemini-2.5-flash", contents=[question])
    assert isinstance(response, genai_types.GenerateContentResponse)

    expected = envelopes_from_gemini(GENERATE, RUN)
    assert [e.tool_call_id for e in expected] == ["gcall-8f2d", UNSAFE, None]
    assert response.candidates is not None
    content = response.candidates[0].content
    assert content is not None
    assert content.parts is not None
    for form in [*forms(response), *forms(content)]:
        assert envelopes_from_gemini(form, RUN) == expected
    assert envelopes_from_gemini(content.parts, RUN) == expected
    assert envelopes_from_gemini(response.function_calls, RUN) == expected
    assert envelope_from_gemini(content.parts[1], RUN) == expected[0]
    assert envelope_from_gemini(response.function_calls[0], RUN) == expected[0]  # type: ignore[index]
    assert envelopes_from_gemini(content.parts[0], RUN) == []  # a text part

    pairs = run_all(expected)
    (_, ok), (_, unsafe), (_, missing) = pairs
    assert ok.ok
    assert unsafe.code is ErrorCode.UNSAFE_TOOL_CALL_ID
    assert missing.code is ErrorCode.MISSING_TOOL_CALL_ID  # never a generated id
    reply = gemini_function_responses_content(pairs)
    assert reply["parts"] == [gemini_function_response(e, r) for e, r in pairs]
    client.models.generate_content(model="gemini-2.5-flash", contents=[question, content, reply])
    sent = server.requests[-1]["contents"][2]
    responses = [part["functionResponse"] for part in sent["parts"]]
    assert [r.get("id") for r in responses] == ["gcall-8f2d", UNSAFE, None]
    assert [r["name"] for r in responses] == ["get_weather", "get_weather", "launch_rocket"]
    assert responses[0]["response"] == {
        "output": {
            "ok": True,
            "evidence_status": "EVIDENCE_FOUND",
            "negative": False,
            "content": "21 C in Paris",
            "scope": "weather api",
        }
    }
    assert responses[2]["response"] == {
        "error": {"ok": False, "code": "MISSING_TOOL_CALL_ID", "message": missing.message}
    }


# ---------------------------------------------------------------------------
# Builders: the pair and the id rule


def test_builders_refuse_a_mismatched_pair_and_a_missing_required_id() -> None:
    """CIS-ECO-3: a result of another call, or an OpenAI/Anthropic call without id, raises."""
    pairs = run_all(envelopes_from_openai_chat(CHAT_COMPLETION, RUN))
    (first, first_result), (second, _) = pairs[:2]
    for build in (openai_chat_tool_message, openai_responses_function_call_output, anthropic_tool_result):
        with pytest.raises(ValueError, match="another tool call"):
            build(second, first_result)
        with pytest.raises(TypeError):
            build(first, first_result.as_dict())  # type: ignore[arg-type]
    no_id = ToolCallEnvelope(run_id=RUN, tool_call_id=None, tool_name="get_weather", arguments="{}")
    refused = boundary()[0].invoke(RunContext(run_id=RUN), no_id)
    for build in (openai_chat_tool_message, openai_responses_function_call_output, anthropic_tool_result):
        with pytest.raises(ValueError, match="call id"):
            build(no_id, refused)
    assert "id" not in gemini_function_response(no_id, refused)["functionResponse"]


def test_error_results_carry_only_the_code_and_its_fixed_message() -> None:
    """CIS-ECO-3, CIS-ERR-1: nothing but ok, code and the fixed message goes back for a failure."""
    for envelope, result in run_all(envelopes_from_anthropic(MESSAGE, RUN))[1:]:
        block = anthropic_tool_result(envelope, result)
        assert set(block) == {"type", "tool_use_id", "content", "is_error"}
        assert json.loads(block["content"]) == {
            "ok": False,
            "code": result.code.value,
            "message": result.message,
        }  # type: ignore[union-attr]


# ---------------------------------------------------------------------------
# One I-JSON rule everywhere (CIS-ECO-2)

POLICY = ToolPolicy(name="get_weather", authorized=True, read_only=True)
BAD_ARGUMENTS = {
    "duplicate": '{"location": "Paris", "location": "Lyon"}',
    "nested duplicate": '{"where": {"city": "Paris", "city": "Lyon"}}',
    "duplicate in a list": '{"days": [1, {"d": 1, "d": 2}]}',
    "NaN": '{"temp": NaN}',
    "Infinity": '{"temp": -Infinity}',
    "overflow": '{"temp": 1e999}',
    "huge integer": '{"n": ' + "9" * 5000 + "}",
    "lone surrogate": '{"s": "\\ud800"}',
    "lone surrogate name": '{"\\udc00": 1}',
    "too deep": '{"a": ' * 70 + "1" + "}" * 70,
}


def payload_text(provider: str, arguments: str) -> str:
    """A whole provider payload, as JSON text, whose first call has ``arguments`` and second is fine."""
    if provider == "openai-chat":
        calls = [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": arguments}},
            {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}},
        ]
        return json.dumps({"role": "assistant", "tool_calls": calls})
    if provider == "openai-responses":
        items = [
            {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": arguments},
            {"type": "function_call", "call_id": "call_2", "name": "get_weather", "arguments": "{}"},
        ]
        return json.dumps({"object": "response", "output": items})
    if provider == "anthropic":
        first = '{"type": "tool_use", "id": "call_1", "name": "get_weather", "input": ' + arguments + "}"
        second = '{"type": "tool_use", "id": "call_2", "name": "get_weather", "input": {}}'
        return '{"role": "assistant", "content": [' + first + ", " + second + "]}"
    first = '{"functionCall": {"id": "call_1", "name": "get_weather", "args": ' + arguments + "}}"
    second = '{"functionCall": {"id": "call_2", "name": "get_weather", "args": {}}}'
    return '{"role": "model", "parts": [' + first + ", " + second + "]}"


PARSE: dict[str, Callable[[Any, str], list[ToolCallEnvelope]]] = {
    "openai-chat": envelopes_from_openai_chat,
    "openai-responses": envelopes_from_openai_responses,
    "anthropic": envelopes_from_anthropic,
    "gemini": envelopes_from_gemini,
}


@pytest.mark.parametrize("provider", list(PARSE))
@pytest.mark.parametrize("case", list(BAD_ARGUMENTS))
def test_one_ijson_rule_for_string_and_object_arguments(provider: str, case: str) -> None:
    """CIS-ECO-2, CIS-JSON-2..6: the same breach is INVALID_ARGUMENTS on every provider, alone."""
    first, second = PARSE[provider](payload_text(provider, BAD_ARGUMENTS[case]), RUN)
    context = RunContext(run_id=RUN)
    assert check_envelope(context, first, POLICY, Limits()) is ErrorCode.INVALID_ARGUMENTS
    assert check_envelope(context, second, POLICY, Limits()) is None


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
def test_object_arguments_that_are_valid_stay_valid(provider: str) -> None:
    """CIS-ECO-2: surrogate pairs, nesting up to 64 and big-but-valid numbers are accepted."""
    arguments = (
        '{"s": "\\ud83d\\ude00", "n": ' + "9" * 4000 + ', "deep": ' + '{"a": ' * 62 + "1" + "}" * 62 + "}"
    )
    first, _ = PARSE[provider](payload_text(provider, arguments), RUN)
    assert check_envelope(RunContext(run_id=RUN), first, POLICY, Limits(request_bytes=1 << 20)) is None
    assert json.loads(first.arguments or "")["s"] == "\U0001f600"


def test_a_duplicate_in_a_call_item_itself_is_invalid_arguments() -> None:
    """CIS-ECO-2: a call item with two ``name`` (or two ``function``) members is not guessed at."""
    chat = (
        '[{"id": "c1", "type": "function", '
        '"function": {"name": "a", "name": "get_weather", "arguments": "{}"}}]'
    )
    blocks = '[{"type": "tool_use", "id": "c1", "name": "get_weather", "name": "x", "input": {}}]'
    for envelope in (*envelopes_from_openai_chat(chat, RUN), *envelopes_from_anthropic(blocks, RUN)):
        assert (
            check_envelope(RunContext(run_id=RUN), envelope, POLICY, Limits()) is ErrorCode.INVALID_ARGUMENTS
        )


@pytest.mark.parametrize("provider", list(PARSE))
def test_transcripts_are_read_by_the_same_rule(provider: str, tmp_path: Path) -> None:
    """CIS-ECO-2, CIS-PRE-7: a duplicate inside a transcript's call arguments is INVALID_ARGUMENTS."""
    turn = payload_text(provider, BAD_ARGUMENTS["duplicate"])
    wrapper = {
        "openai-chat": '{"messages": [%s]}',
        "openai-responses": "%s",
        "anthropic": '{"messages": [%s]}',
        "gemini": '{"contents": [%s]}',
    }[provider]
    path = tmp_path / "transcript.json"
    path.write_text(wrapper % turn, encoding="utf-8")
    transcript = load_transcript(path)
    assert transcript.format == provider
    first, second = (call.envelope for call in transcript.calls)
    context = RunContext(run_id=transcript.run_id)
    assert check_envelope(context, first, POLICY, Limits()) is ErrorCode.INVALID_ARGUMENTS
    assert check_envelope(context, second, POLICY, Limits()) is None


@pytest.mark.parametrize("provider", list(PARSE))
def test_a_document_too_deep_is_refused_before_parsing(provider: str) -> None:
    """CIS-ECO-2, CIS-JSON-5: payload text nested over 512 levels raises ValueError, never RecursionError."""
    with pytest.raises(ValueError, match="nested too deeply"):
        PARSE[provider]("[" * 100_000 + "]" * 100_000, RUN)


def test_importing_the_package_imports_no_sdk_or_framework() -> None:
    """CIS-ECO-1, CIS-ECO-4: the parsers duck-type; the adapters load their framework on import.

    (OpenTelemetry is not listed: redis-py imports it by itself when it is installed.)
    """
    script = (
        "import sys, invocation_store, invocation_store.providers, invocation_store.integrations\n"
        "heavy = ('openai', 'anthropic', 'google.genai', 'langchain_core', 'agents', 'pydantic_ai',\n"
        "         'mcp', 'httpx', 'httpx2')\n"
        "print([name for name in heavy if name in sys.modules])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
