"""Provider envelope parsers on payloads in each provider's documented shape (CIS-PRE-7).

Payloads follow the public API references: OpenAI Chat Completions (assistant
``message.tool_calls``), OpenAI Responses (``output`` items of type
``function_call``), Anthropic Messages (``content`` blocks of type ``tool_use``) and
Google Gemini (``candidates[].content.parts[].functionCall``). Hostile call items
never make a parser raise; preflight rejects what they produce with the right code.
Inputs that are no call or turn at all raise ``TypeError``/``ValueError`` (CIS-ECO-1).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from invocation_store import (
    ErrorCode,
    Limits,
    MemoryStore,
    RunContext,
    ToolCallEnvelope,
    envelope_from_anthropic,
    envelope_from_gemini,
    envelope_from_openai_chat,
    envelope_from_openai_responses,
    envelopes_from_anthropic,
    envelopes_from_gemini,
    envelopes_from_openai_chat,
    envelopes_from_openai_responses,
)
from invocation_store.kernel import ToolPolicy, check_envelope
from invocation_store.testing import FakeClock

from ._fakes import RUN, FakeExecutor, FakeProjector, boundary_for, open_run, tool

POLICY = ToolPolicy(name="get_weather", authorized=True, read_only=True)


def preflight(envelope: ToolCallEnvelope) -> ErrorCode | None:
    return check_envelope(RunContext(run_id=RUN), envelope, POLICY, Limits())


OPENAI_CHAT_COMPLETION: dict[str, Any] = {
    "id": "chatcmpl-9x8Yz",
    "object": "chat.completion",
    "created": 1_717_000_000,
    "model": "gpt-4o-2024-08-06",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_Vq3Yd8mXb9Pz",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"location": "Paris, France"}'},
                    },
                    {
                        "id": "call_2nB0tQe7LkWs",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{\n  "location": "Bogotá"\n}'},
                    },
                ],
                "refusal": None,
            },
            "logprobs": None,
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 82, "completion_tokens": 47, "total_tokens": 129},
}

OPENAI_RESPONSE: dict[str, Any] = {
    "id": "resp_67ccd2bed1ec8190",
    "object": "response",
    "status": "completed",
    "model": "gpt-4.1-2025-04-14",
    "output": [
        {"type": "reasoning", "id": "rs_6801", "summary": []},
        {
            "type": "function_call",
            "id": "fc_67ca09c6bedc8190",
            "call_id": "call_unLAR8MvFNptuiZK6K6HCy5k",
            "name": "get_weather",
            "arguments": '{"location":"Paris, France"}',
            "status": "completed",
        },
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
        },
        {
            "type": "function_call",
            "id": "fc_67ca09c6bedc8191",
            "call_id": "call_Q2yq0Wk9dR3uVx",
            "name": "get_weather",
            "arguments": '{"location":"Bogotá, Colombia"}',
            "status": "completed",
        },
    ],
}

ANTHROPIC_MESSAGE: dict[str, Any] = {
    "id": "msg_01Aq9w938a90dw8q",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [
        {"type": "text", "text": "I'll check the weather."},
        {
            "type": "tool_use",
            "id": "toolu_01A09q90qw90lq917835lq9",
            "name": "get_weather",
            "input": {"location": "San Francisco, CA", "unit": "celsius"},
        },
        {
            "type": "server_tool_use",
            "id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB",
            "name": "web_search",
            "input": {"query": "weather"},
        },
        {
            "type": "tool_use",
            "id": "toolu_01JqR8ZyKf3kX",
            "name": "get_weather",
            "input": {
                "unit": "celsius",
                "location": "Zürich",
                "days": [1, 2],
                "detail": {"b": True, "a": None},
            },
        },
    ],
    "stop_reason": "tool_use",
    "usage": {"input_tokens": 412, "output_tokens": 94},
}

GEMINI_RESPONSE: dict[str, Any] = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"text": "Let me look that up."},
                    {
                        "functionCall": {
                            "id": "gcall-8f2d1c",
                            "name": "get_weather",
                            "args": {"location": "Paris"},
                        }
                    },
                    {"functionCall": {"name": "get_weather", "args": {"location": "Lyon"}}},
                    {"functionCall": {"id": "", "name": "get_weather", "args": {"location": "Nice"}}},
                ],
            },
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": {"promptTokenCount": 30, "candidatesTokenCount": 20, "totalTokenCount": 50},
    "modelVersion": "gemini-2.5-flash",
}


# ---------------------------------------------------------------------------
# Documented shapes


def test_openai_chat_tool_calls() -> None:
    """CIS-PRE-7, CIS-ID-4, CIS-REC-2: ids and arguments text are kept byte for byte."""
    envelopes = envelopes_from_openai_chat(OPENAI_CHAT_COMPLETION, RUN)
    assert envelopes == [
        ToolCallEnvelope(
            run_id=RUN,
            tool_call_id="call_Vq3Yd8mXb9Pz",
            tool_name="get_weather",
            arguments='{"location": "Paris, France"}',
        ),
        ToolCallEnvelope(
            run_id=RUN,
            tool_call_id="call_2nB0tQe7LkWs",
            tool_name="get_weather",
            arguments='{\n  "location": "Bogotá"\n}',
        ),
    ]
    assert all(preflight(e) is None for e in envelopes)
    message = OPENAI_CHAT_COMPLETION["choices"][0]["message"]
    assert envelopes_from_openai_chat(message, RUN) == envelopes
    assert envelope_from_openai_chat(message["tool_calls"][1], RUN) == envelopes[1]


def test_openai_responses_function_calls_use_call_id() -> None:
    """CIS-PRE-7, CIS-ID-4: the tool_call_id is call_id, never the item id; other items are skipped."""
    envelopes = envelopes_from_openai_responses(OPENAI_RESPONSE, RUN)
    assert [(e.tool_call_id, e.arguments) for e in envelopes] == [
        ("call_unLAR8MvFNptuiZK6K6HCy5k", '{"location":"Paris, France"}'),
        ("call_Q2yq0Wk9dR3uVx", '{"location":"Bogotá, Colombia"}'),
    ]
    assert all(e.tool_name == "get_weather" and preflight(e) is None for e in envelopes)
    assert envelopes_from_openai_responses(OPENAI_RESPONSE["output"], RUN) == envelopes
    without_call_id = {k: v for k, v in OPENAI_RESPONSE["output"][1].items() if k != "call_id"}
    envelope = envelope_from_openai_responses(without_call_id, RUN)
    assert envelope.tool_call_id is None  # never falls back to "fc_..."
    assert preflight(envelope) is ErrorCode.MISSING_TOOL_CALL_ID


def test_anthropic_tool_use_input_is_serialized_once_deterministically() -> None:
    """CIS-PRE-7, CIS-ID-4: input objects become sorted, compact, UTF-8 JSON; server tools are skipped."""
    envelopes = envelopes_from_anthropic(ANTHROPIC_MESSAGE, RUN)
    assert [e.tool_call_id for e in envelopes] == ["toolu_01A09q90qw90lq917835lq9", "toolu_01JqR8ZyKf3kX"]
    assert envelopes[0].arguments == '{"location":"San Francisco, CA","unit":"celsius"}'
    assert envelopes[1].arguments == (
        '{"days":[1,2],"detail":{"a":null,"b":true},"location":"Zürich","unit":"celsius"}'
    )
    assert all(preflight(e) is None for e in envelopes)
    reordered = copy.deepcopy(ANTHROPIC_MESSAGE["content"][3])
    reordered["input"] = dict(reversed(list(reordered["input"].items())))
    assert envelope_from_anthropic(reordered, RUN) == envelopes[1]
    assert envelopes_from_anthropic(ANTHROPIC_MESSAGE["content"], RUN) == envelopes


def test_gemini_function_calls_never_get_a_generated_id() -> None:
    """CIS-PRE-7, CIS-ID-2, CIS-ID-6: an absent or empty Gemini id is MISSING_TOOL_CALL_ID."""
    envelopes = envelopes_from_gemini(GEMINI_RESPONSE, RUN)
    assert [e.tool_call_id for e in envelopes] == ["gcall-8f2d1c", None, None]
    assert [e.arguments for e in envelopes] == [
        '{"location":"Paris"}',
        '{"location":"Lyon"}',
        '{"location":"Nice"}',
    ]
    assert [preflight(e) for e in envelopes] == [
        None,
        ErrorCode.MISSING_TOOL_CALL_ID,
        ErrorCode.MISSING_TOOL_CALL_ID,
    ]
    content = GEMINI_RESPONSE["candidates"][0]["content"]
    assert envelopes_from_gemini(content, RUN) == envelopes
    assert envelopes_from_gemini(content["parts"], RUN) == envelopes


def test_gemini_sdk_spelling_and_empty_args() -> None:
    """CIS-PRE-7: the Python SDK's ``function_call`` key is read too; omitted or null args are ``{}``."""
    sdk_part = {"function_call": {"id": "c-1", "name": "get_weather", "args": {"b": 2, "a": 1}}}
    assert envelope_from_gemini(sdk_part, RUN).arguments == '{"a":1,"b":2}'
    no_args = envelope_from_gemini({"functionCall": {"id": "c-2", "name": "get_weather"}}, RUN)
    assert no_args.arguments == "{}"
    assert preflight(no_args) is None
    assert (
        envelope_from_gemini({"functionCall": {"id": "c-3", "name": "x", "args": None}}, RUN).arguments
        == "{}"
    )


@pytest.mark.parametrize(
    "tool_call_id",
    [" call_1", "call_1 ", "call\t1", "call_é", "call_{1}", "x" * 129],
)
def test_ids_are_never_trimmed_or_normalised(tool_call_id: str) -> None:
    """CIS-PRE-7, CIS-ID-3, CIS-ID-4: an unsafe id is kept as is, so preflight rejects it as UNSAFE."""
    items = [
        envelope_from_openai_chat(
            {"id": tool_call_id, "type": "function", "function": {"name": "get_weather", "arguments": "{}"}},
            RUN,
        ),
        envelope_from_openai_responses(
            {"type": "function_call", "call_id": tool_call_id, "name": "get_weather", "arguments": "{}"}, RUN
        ),
        envelope_from_anthropic(
            {"type": "tool_use", "id": tool_call_id, "name": "get_weather", "input": {}}, RUN
        ),
        envelope_from_gemini({"functionCall": {"id": tool_call_id, "name": "get_weather", "args": {}}}, RUN),
    ]
    for envelope in items:
        assert envelope.tool_call_id == tool_call_id
        assert preflight(envelope) is ErrorCode.UNSAFE_TOOL_CALL_ID


# ---------------------------------------------------------------------------
# Hostile items: never raise, right code


class Exploding(dict[str, Any]):
    """A mapping whose lookups raise."""

    def get(self, *_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("boom")


#: Objects in a call's place whose fields are malformed: an envelope preflight rejects.
HOSTILE: list[Any] = [
    {},
    {"id": None},
    Exploding(),
    {"type": "function", "id": 5, "function": "get_weather"},
    '{"id": ""}',
]

#: Inputs that are no call object at all: a programming error, raised (CIS-ECO-1).
NOT_A_CALL: list[tuple[Any, type[Exception]]] = [
    (None, TypeError),
    (1, TypeError),
    (float("nan"), TypeError),
    (object(), TypeError),
    ("call_1", ValueError),  # JSON text that is not JSON
    ('"call_1"', ValueError),  # JSON text of a string
    ([], ValueError),
    (b"\xff", ValueError),
]

PARSERS = [
    envelope_from_openai_chat,
    envelope_from_openai_responses,
    envelope_from_anthropic,
    envelope_from_gemini,
]


@pytest.mark.parametrize("item", HOSTILE, ids=[f"hostile-{i}" for i in range(len(HOSTILE))])
@pytest.mark.parametrize("parse", PARSERS)
def test_hostile_items_give_missing_id(parse: Any, item: Any) -> None:
    """CIS-PRE-7, CIS-ID-2, CIS-PRE-2: a malformed call object is an envelope preflight rejects."""
    envelope = parse(item, RUN)
    assert envelope.run_id == RUN
    assert envelope.tool_call_id is None
    assert preflight(envelope) is ErrorCode.MISSING_TOOL_CALL_ID


@pytest.mark.parametrize(
    ("item", "error"), NOT_A_CALL, ids=[f"not-a-call-{i}" for i in range(len(NOT_A_CALL))]
)
@pytest.mark.parametrize("parse", PARSERS)
def test_what_is_no_call_object_raises(parse: Any, item: Any, error: type[Exception]) -> None:
    """CIS-ECO-1: an input that is none of the accepted kinds raises, naming what was expected."""
    with pytest.raises(error, match="expected one"):
        parse(item, RUN)


@pytest.mark.parametrize(
    ("envelope", "code"),
    [
        # OpenAI Chat: arguments must be the JSON text; an object (some servers) is refused.
        (
            envelope_from_openai_chat(
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"a": 1}}},
                RUN,
            ),
            ErrorCode.INVALID_ARGUMENTS,
        ),
        (
            envelope_from_openai_chat(
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}, RUN
            ),
            ErrorCode.INVALID_ARGUMENTS,
        ),
        (
            envelope_from_openai_chat(
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "[1]"}}, RUN
            ),
            ErrorCode.INVALID_ARGUMENTS,
        ),
        (
            envelope_from_openai_chat(
                {"id": "c1", "type": "custom", "custom": {"name": "x", "input": "{}"}}, RUN
            ),
            ErrorCode.INVALID_ARGUMENTS,
        ),
        (
            envelope_from_openai_chat(
                {"id": "c1", "type": "function", "function": {"name": ["get_weather"], "arguments": "{}"}},
                RUN,
            ),
            ErrorCode.UNAUTHORIZED,
        ),
        # OpenAI Responses: a non-function_call item, arguments of the wrong type.
        (
            envelope_from_openai_responses({"type": "message", "call_id": "c1", "name": "get_weather"}, RUN),
            ErrorCode.INVALID_ARGUMENTS,
        ),
        (
            envelope_from_openai_responses(
                {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": None}, RUN
            ),
            ErrorCode.INVALID_ARGUMENTS,
        ),
        # Anthropic: input not an object, or not serializable as I-JSON.
        (
            envelope_from_anthropic(
                {"type": "tool_use", "id": "t1", "name": "get_weather", "input": "{}"}, RUN
            ),
            ErrorCode.INVALID_ARGUMENTS,
        ),
        (
            envelope_from_anthropic(
                {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"x": float("inf")}}, RUN
            ),
            ErrorCode.INVALID_ARGUMENTS,
        ),
        (
            envelope_from_anthropic(
                {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {1: "a", "b": 2}}, RUN
            ),
            ErrorCode.INVALID_ARGUMENTS,
        ),
        (
            envelope_from_anthropic(
                {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"1": "a", 1: "b"}}, RUN
            ),
            ErrorCode.INVALID_ARGUMENTS,
        ),
        (
            envelope_from_anthropic(
                {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"s": "\ud800"}}, RUN
            ),
            ErrorCode.INVALID_ARGUMENTS,
        ),
        (
            envelope_from_anthropic(
                {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"o": object()}}, RUN
            ),
            ErrorCode.INVALID_ARGUMENTS,
        ),
        (
            envelope_from_anthropic({"type": "text", "id": "t1", "name": "get_weather", "input": {}}, RUN),
            ErrorCode.INVALID_ARGUMENTS,
        ),
        (
            envelope_from_anthropic({"type": "tool_use", "id": "t1", "input": {}}, RUN),
            ErrorCode.UNAUTHORIZED,
        ),
        # Gemini: args not an object.
        (
            envelope_from_gemini({"functionCall": {"id": "g1", "name": "get_weather", "args": [1]}}, RUN),
            ErrorCode.INVALID_ARGUMENTS,
        ),
        (
            envelope_from_gemini(
                {"functionCall": {"id": "g1", "name": "get_weather", "args": '{"a":1}'}}, RUN
            ),
            ErrorCode.INVALID_ARGUMENTS,
        ),
    ],
)
def test_hostile_fields_get_their_preflight_code(envelope: ToolCallEnvelope, code: ErrorCode) -> None:
    """CIS-PRE-7, CIS-PRE-2, CIS-JSON-1: wrong types become fields preflight rejects with the right code."""
    assert preflight(envelope) is code


def test_deep_input_is_refused_not_crashed_on() -> None:
    """CIS-PRE-7, CIS-JSON-5: a deeply nested input is INVALID_ARGUMENTS, never a RecursionError."""
    deep: Any = {}
    for _ in range(5_000):
        deep = {"a": deep}
    envelope = envelope_from_anthropic(
        {"type": "tool_use", "id": "t1", "name": "get_weather", "input": deep}, RUN
    )
    assert preflight(envelope) is ErrorCode.INVALID_ARGUMENTS
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    envelope = envelope_from_gemini(
        {"functionCall": {"id": "g1", "name": "get_weather", "args": cyclic}}, RUN
    )
    assert preflight(envelope) is ErrorCode.INVALID_ARGUMENTS


EXTRACTORS = {
    "chat": envelopes_from_openai_chat,
    "responses": envelopes_from_openai_responses,
    "anthropic": envelopes_from_anthropic,
    "gemini": envelopes_from_gemini,
}
ALL = tuple(EXTRACTORS)


@pytest.mark.parametrize(
    ("payload", "empty_for", "error"),
    [
        (None, (), TypeError),
        (3, (), TypeError),
        ("text", (), ValueError),
        ("3", (), ValueError),
        ({}, (), ValueError),
        ({"unrelated": 1}, (), ValueError),
        ([], ALL, None),
        ({"choices": []}, ("chat",), ValueError),
        ({"choices": "x"}, (), ValueError),
        ({"candidates": []}, ("gemini",), ValueError),
        ({"output": None}, ("responses",), ValueError),
        ({"content": 5}, (), ValueError),
        # A message holding no call: Chat's, Anthropic's and a Responses easy input message.
        ({"role": "assistant", "content": "Hello"}, ("chat", "anthropic", "responses"), ValueError),
        ('{"role": "assistant", "tool_calls": null}', ("chat",), ValueError),
    ],
)
def test_helpers_raise_for_what_is_no_model_turn(
    payload: Any, empty_for: tuple[str, ...], error: type[Exception] | None
) -> None:
    """CIS-ECO-1, CIS-PRE-7: a turn without calls gives ``[]``; anything of no accepted shape raises."""
    for name, extract in EXTRACTORS.items():
        if name in empty_for:
            assert extract(payload, RUN) == [], name
        else:
            assert error is not None
            with pytest.raises(error):
                extract(payload, RUN)


def test_helpers_never_drop_a_malformed_call_item() -> None:
    """CIS-PRE-7, CIS-ID-2: every call item gets an envelope (each needs an answer), malformed or not."""
    message = {"role": "assistant", "tool_calls": [None, {"id": "call_1"}, "junk"]}
    envelopes = envelopes_from_openai_chat(message, RUN)
    assert [preflight(e) for e in envelopes] == [
        ErrorCode.MISSING_TOOL_CALL_ID,
        ErrorCode.INVALID_ARGUMENTS,
        ErrorCode.MISSING_TOOL_CALL_ID,
    ]
    blocks = [{"type": "tool_use", "name": "get_weather", "input": {}}]
    assert [preflight(e) for e in envelopes_from_anthropic(blocks, RUN)] == [ErrorCode.MISSING_TOOL_CALL_ID]


# ---------------------------------------------------------------------------
# End to end


def test_provider_envelopes_run_through_the_boundary(clock: FakeClock) -> None:
    """CIS-PRE-7, CIS-ID-4, CIS-REC-2, CIS-BND-1: each provider's id and request reach the record."""
    store = MemoryStore(clock)
    executor = FakeExecutor('{"temp_c": 21}')
    boundary = boundary_for(store, tool(executor, FakeProjector(), name="get_weather"))
    context = open_run(boundary)
    envelopes = [
        *envelopes_from_openai_chat(OPENAI_CHAT_COMPLETION, RUN),
        *envelopes_from_openai_responses(OPENAI_RESPONSE, RUN),
        *envelopes_from_anthropic(ANTHROPIC_MESSAGE, RUN),
        *envelopes_from_gemini(GEMINI_RESPONSE, RUN),
    ]
    results = [boundary.invoke(context, envelope) for envelope in envelopes]
    codes = [r.code for r in results]
    assert codes == [None] * 7 + [ErrorCode.MISSING_TOOL_CALL_ID] * 2
    for envelope in envelopes[:7]:
        record = store.get(RUN, envelope.tool_call_id)
        assert record.tool_call_id == envelope.tool_call_id
        assert record.request_json == envelope.arguments
    assert executor.calls[1] == {"location": "Bogotá"}
    assert json.loads(store.get(RUN, "toolu_01JqR8ZyKf3kX").request_json)["location"] == "Zürich"
    assert len(store.calls(RUN)) == 7


# ---------------------------------------------------------------------------
# Property: arbitrary decoded JSON never makes a parser (or preflight) raise

_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
_json = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
_keys = st.sampled_from(
    ["id", "call_id", "type", "name", "arguments", "input", "args", "function", "functionCall"]
)
_items = st.dictionaries(_keys, _json | st.dictionaries(_keys, _json, max_size=4), max_size=6) | _json


@settings(max_examples=100, deadline=None)
@given(item=_items)
def test_parsers_are_total_over_decoded_json(item: Any) -> None:
    """CIS-PRE-7, CIS-PRE-2, CIS-ECO-1: decoded JSON gives envelopes preflight answers, or says why not."""
    for parse in (
        envelope_from_openai_chat,
        envelope_from_openai_responses,
        envelope_from_anthropic,
        envelope_from_gemini,
    ):
        try:
            envelope = parse(item, RUN)
        except (TypeError, ValueError) as exc:  # not one call object: said so (CIS-ECO-1)
            message = str(exc)
        else:
            message = None
        if message is not None:
            # not one call object, or another provider's: said so, naming what to do (CIS-ECO-1)
            assert "expected" in message or "use envelopes_from_" in message or "accumulate" in message
            continue
        assert envelope.run_id == RUN
        assert envelope.tool_call_id is None or isinstance(envelope.tool_call_id, str)
        assert envelope.arguments is None or isinstance(envelope.arguments, str)
        code = preflight(envelope)
        assert code is None or isinstance(code, ErrorCode)
    for extract in (
        envelopes_from_openai_chat,
        envelopes_from_openai_responses,
        envelopes_from_anthropic,
        envelopes_from_gemini,
    ):
        try:
            envelopes = extract(item, RUN)
        except (TypeError, ValueError):
            continue
        for envelope in envelopes:
            assert envelope.run_id == RUN
