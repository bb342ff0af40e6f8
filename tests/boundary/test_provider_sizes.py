"""Size first for object arguments, typed objects and JSON text (CIS-SIZE-2).

Anthropic ``input``, Gemini ``args`` and Responses action objects are serialized by
``serialize_object``, which counts UTF-8 bytes as it writes and stops as soon as the
count passes ``request_bytes``; preflight then answers REQUEST_TOO_LARGE. Within the
limit its text is exactly ``json.dumps(sort_keys=True, ensure_ascii=False,
separators=(",", ":"))``. The SDKs' typed objects are read field by field, never
dumped in full; JSON text over ``max_text_bytes`` is refused before it is decoded,
the transcript API as the CLI. Time and memory for 137 MB objects and texts are
measured in ``benchmarks/bench_providers.py``, not asserted here.
"""

from __future__ import annotations

import json
import math
from typing import Any

import anthropic
import openai
import pydantic
import pytest
from google.genai import types as genai_types
from hypothesis import given, settings
from hypothesis import strategies as st

from invocation_store import (
    ErrorCode,
    Limits,
    RunContext,
    envelope_from_anthropic,
    envelope_from_gemini,
    envelope_from_openai_chat,
    envelope_from_openai_responses,
    envelopes_from_anthropic,
    envelopes_from_gemini,
    envelopes_from_openai_chat,
    envelopes_from_openai_responses,
)
from invocation_store._cli import replay
from invocation_store.kernel import ToolPolicy, check_envelope
from invocation_store.kernel._ijson import DuplicateMembers, violates_ijson
from invocation_store.providers import DEFAULT_MAX_TRANSCRIPT_BYTES, transcript_format
from invocation_store.providers import _common as common
from invocation_store.providers._common import DEFAULT_REQUEST_BYTES, oversized_text, serialize_object

RUN = "run-sizes"

_json: Any = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=25,
)


def _dumps(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(value=st.dictionaries(st.text(max_size=6), _json, max_size=5))
def test_within_the_limit_the_text_is_json_dumps(value: dict[str, Any]) -> None:
    """CIS-SIZE-2, CIS-ECO-2: the deterministic serialization, or None exactly where I-JSON is broken."""
    expected = None if violates_ijson(value) else _dumps(value)
    assert serialize_object(value, 1 << 20) == expected


@pytest.mark.parametrize(
    "value",
    [
        {"x": math.nan},
        {"x": [1, math.inf]},
        {1: "a"},
        {"s": "\ud800"},
        {"\udc00": 1},
        {"d": DuplicateMembers({"a": 1})},
        {"o": object()},
        {"n": 10**5000},
        {"a": {"a": {"a": {}}}},  # depth 4 > max_depth 3
    ],
    ids=["nan", "inf", "int-key", "surrogate", "surrogate-key", "duplicate", "object", "huge-int", "deep"],
)
def test_violations_before_the_limit_are_invalid_arguments(value: dict[Any, Any]) -> None:
    """CIS-ECO-2, CIS-JSON-2..6: the same breaches the string rule refuses give no arguments text."""
    assert serialize_object(value, 1 << 20, max_depth=3) is None


def test_a_cycle_is_refused_not_looped_on() -> None:
    """CIS-JSON-5: a cyclic value is too deep, never a hang or a RecursionError."""
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    assert serialize_object(cyclic) is None


def test_the_limit_is_utf8_bytes_and_exact() -> None:
    """CIS-SIZE-1, CIS-SIZE-2: a text of exactly the limit passes; one byte more is refused."""
    value = {"s": "é" * 100}  # 2 bytes per character
    text = _dumps(value)
    size = len(text.encode("utf-8"))
    assert serialize_object(value, size) == text
    assert serialize_object(value, size - 1) == oversized_text(size - 1)
    assert len(text) < size - 1  # fewer code points than the limit: the bytes decide


class _Counting(list[Any]):
    """A list that counts how many of its members are visited."""

    visited = 0

    def __iter__(self) -> Any:
        for item in list.__iter__(self):
            _Counting.visited += 1
            yield item


def test_nothing_past_the_limit_is_visited() -> None:
    """CIS-SIZE-2: the walk stops at the limit; a container too long for it is refused unread."""
    _Counting.visited = 0
    members = _Counting(["x" * 1000] * 100_000)  # about 100 MB of JSON
    assert serialize_object({"m": members}, 10_000) == oversized_text(10_000)
    assert _Counting.visited <= 11
    _Counting.visited = 0
    assert serialize_object({"m": _Counting([0] * 50_000)}, 10_000) == oversized_text(10_000)
    assert _Counting.visited == 0  # 50,000 members need more than 10,000 bytes: not read at all
    wide = dict.fromkeys((str(i) for i in range(10_000)), 0)
    assert serialize_object(wide, 10_000) == oversized_text(10_000)  # not even sorted


def test_an_oversized_text_can_never_parse_nor_run() -> None:
    """CIS-SIZE-2: the stand-in text is over the limit and no JSON value, whatever limit preflight uses."""
    text = oversized_text(100)
    assert len(text.encode("utf-8")) == 101
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


POLICY = ToolPolicy(name="get_weather", authorized=True, read_only=True)
SHELL = ToolPolicy(name="shell_call", authorized=True, read_only=True)


def _big(n: int) -> dict[str, Any]:
    return {"rows": [{"id": i, "text": "y" * 90} for i in range(n)]}


@pytest.mark.parametrize("provider", ["anthropic", "gemini", "openai-responses"])
def test_every_object_argument_provider_refuses_size_first(provider: str) -> None:
    """CIS-SIZE-2, CIS-ECO-2: a 5 MB object is REQUEST_TOO_LARGE on each provider; a wider limit admits it."""
    value = _big(50_000)
    if provider == "anthropic":
        turn: Any = {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": value}],
        }
        parse: Any = envelopes_from_anthropic
        policy = POLICY
    elif provider == "gemini":
        turn = {
            "role": "model",
            "parts": [{"functionCall": {"id": "g1", "name": "get_weather", "args": value}}],
        }
        parse = envelopes_from_gemini
        policy = POLICY
    else:
        turn = [{"type": "shell_call", "call_id": "s1", "action": value}]
        parse = envelopes_from_openai_responses
        policy = SHELL
    (envelope,) = parse(turn, RUN)
    assert envelope.arguments == oversized_text(DEFAULT_REQUEST_BYTES)
    context = RunContext(run_id=RUN)
    assert check_envelope(context, envelope, policy, Limits()) is ErrorCode.REQUEST_TOO_LARGE
    wide = Limits(request_bytes=8 << 20)
    (admitted,) = parse(turn, RUN, request_bytes=wide.request_bytes)
    assert admitted.arguments == _dumps(value)
    assert check_envelope(context, admitted, policy, wide) is None


# ---------------------------------------------------------------------------
# Typed SDK objects: read field by field, never dumped in full


def _typed_turns(value: Any) -> dict[str, tuple[Any, Any, ToolPolicy]]:
    """Each provider's SDK object holding ``value`` as its call's argument object."""
    message = anthropic.types.Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": value}],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
    beta = anthropic.types.beta.BetaMessage.model_validate(message.model_dump(), context=None)
    beta.content[0].input = value  # type: ignore[union-attr]
    response = genai_types.GenerateContentResponse.model_validate(
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [{"functionCall": {"id": "g1", "name": "get_weather"}}],
                    }
                }
            ]
        }
    )
    response.candidates[0].content.parts[0].function_call.args = value  # type: ignore[index, union-attr]
    output = openai.types.responses.Response.model_validate(
        {
            "id": "r",
            "object": "response",
            "created_at": 1,
            "status": "completed",
            "model": "m",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": [
                {
                    "type": "shell_call",
                    "id": "sh_1",
                    "call_id": "s1",
                    "status": "completed",
                    "action": {"commands": []},
                }
            ],
        }
    )
    output.output[0].action.rows = value  # type: ignore[union-attr]  # an extra field of the action
    return {
        "anthropic": (message, envelopes_from_anthropic, POLICY),
        "anthropic-beta": (beta, envelopes_from_anthropic, POLICY),
        "gemini": (response, envelopes_from_gemini, POLICY),
        "openai-responses": (output, envelopes_from_openai_responses, SHELL),
    }


@pytest.mark.parametrize("provider", ["anthropic", "anthropic-beta", "gemini", "openai-responses"])
def test_a_typed_object_is_measured_as_written_never_dumped(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CIS-SIZE-2: a typed SDK object's huge argument object is refused after the limit's worth of
    members; nothing is ``model_dump``'ed (every dump raises here)."""
    members = _Counting(["x" * 1000] * 100_000)  # about 100 MB of JSON
    turn, parse, policy = _typed_turns({"m": members})[provider]

    def no_dump(self: object, *args: object, **kwargs: object) -> object:
        raise AssertionError("a typed object was dumped in full")

    monkeypatch.setattr(pydantic.BaseModel, "model_dump", no_dump)
    monkeypatch.setattr(pydantic.BaseModel, "model_dump_json", no_dump)
    _Counting.visited = 0
    (envelope,) = parse(turn, RUN, request_bytes=10_000)
    assert envelope.arguments == oversized_text(10_000)
    assert _Counting.visited <= 11
    assert check_envelope(RunContext(run_id=RUN), envelope, policy, Limits(request_bytes=10_000)) is (
        ErrorCode.REQUEST_TOO_LARGE
    )


@pytest.mark.parametrize("provider", ["anthropic", "anthropic-beta", "gemini", "openai-responses"])
def test_a_typed_object_within_the_limit_reads_as_its_dump(provider: str) -> None:
    """CIS-ECO-1, CIS-ECO-2: read field by field, a typed object gives the envelope its dump gives."""
    turn, parse, _ = _typed_turns(_big(10))[provider]
    (typed,) = parse(turn, RUN)
    (dumped,) = parse(turn.model_dump(), RUN)
    (text,) = parse(turn.model_dump_json(), RUN)
    assert typed == dumped == text
    if provider != "openai-responses":
        assert typed.arguments == _dumps(_big(10))


def test_typed_values_inside_arguments_are_read_as_their_fields() -> None:
    """CIS-ECO-2: a model inside an argument object (a computer_call's drag path) is written as its
    ``model_dump()`` would be, and a value of no JSON type is INVALID_ARGUMENTS."""
    call = openai.types.responses.ResponseComputerToolCall.model_validate(
        {
            "type": "computer_call",
            "id": "cu_1",
            "call_id": "call_u",
            "status": "completed",
            "pending_safety_checks": [],
            "action": {"type": "drag", "path": [{"x": 1, "y": 2}, {"x": 3, "y": 4}]},
        }
    )
    (envelope,) = envelopes_from_openai_responses([call], RUN)
    assert envelope.arguments == _dumps(call.model_dump()["action"])
    assert serialize_object({"when": object()}) is None


# ---------------------------------------------------------------------------
# JSON text: a size limit checked before it is decoded

TEXT_PARSERS: dict[str, Any] = {
    "envelope_from_openai_chat": envelope_from_openai_chat,
    "envelopes_from_openai_chat": envelopes_from_openai_chat,
    "envelope_from_openai_responses": envelope_from_openai_responses,
    "envelopes_from_openai_responses": envelopes_from_openai_responses,
    "envelope_from_anthropic": envelope_from_anthropic,
    "envelopes_from_anthropic": envelopes_from_anthropic,
    "envelope_from_gemini": envelope_from_gemini,
    "envelopes_from_gemini": envelopes_from_gemini,
    "transcript": lambda text, run_id, **kw: transcript_format("anthropic").envelopes_from_transcript(
        text, run_id, **kw
    ),
}
ONE_CALL = {
    "envelope_from_openai_chat": {
        "id": "c1",
        "type": "function",
        "function": {"name": "q", "arguments": "{}"},
    },
    "envelope_from_openai_responses": {
        "type": "function_call",
        "call_id": "c1",
        "name": "q",
        "arguments": "{}",
    },
    "envelope_from_anthropic": {"type": "tool_use", "id": "c1", "name": "q", "input": {}},
    "envelope_from_gemini": {"functionCall": {"id": "c1", "name": "q", "args": {}}},
}


def _turn(name: str, padding: str) -> str:
    """The JSON text of one call for ``name``, with ``padding`` in a field nobody reads."""
    if name == "transcript":
        return json.dumps(
            {
                "messages": [
                    {"role": "user", "content": padding},
                    {"role": "assistant", "content": [ONE_CALL["envelope_from_anthropic"]]},
                ]
            },
            ensure_ascii=False,
        )
    one = ONE_CALL[name.replace("envelopes_", "envelope_")]
    return json.dumps({**one, "x_padding": padding}, ensure_ascii=False)


@pytest.mark.parametrize("name", list(TEXT_PARSERS))
def test_json_text_over_the_limit_is_refused_before_it_is_decoded(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CIS-SIZE-2: at exactly ``max_text_bytes`` UTF-8 bytes a text is read; one byte more (as
    ``str`` or ``bytes``, counted in bytes, not characters) is a ``ValueError`` naming the limit,
    and the decoder never runs."""
    parse = TEXT_PARSERS[name]
    text = _turn(name, "é" * 300)
    size = len(text.encode("utf-8"))
    assert len(text) < size - 1  # fewer characters than bytes: the bytes decide
    (found,) = (
        [parse(text, RUN, max_text_bytes=size)]
        if name.startswith("envelope_")
        else parse(text, RUN, max_text_bytes=size)
    )
    assert found.tool_call_id == "c1"
    decoded: list[str] = []
    monkeypatch.setattr(common, "load_document", decoded.append)
    for value in (text, text.encode("utf-8"), bytearray(text.encode("utf-8"))):
        with pytest.raises(ValueError, match=rf"over the limit of {size - 1} UTF-8 bytes \(max_text_bytes\)"):
            parse(value, RUN, max_text_bytes=size - 1)
    assert decoded == []


def test_the_text_limits_default_to_the_command_lines() -> None:
    """CIS-SIZE-2: 32 MiB for a parser's JSON text and for a transcript, API and CLI alike."""
    assert common.DEFAULT_MAX_TEXT_BYTES == 32 * 1024 * 1024
    assert (
        DEFAULT_MAX_TRANSCRIPT_BYTES == replay.DEFAULT_MAX_TRANSCRIPT_BYTES == common.DEFAULT_MAX_TEXT_BYTES
    )
    big = '{"messages": [], "x": "' + "y" * DEFAULT_MAX_TRANSCRIPT_BYTES + '"}'
    with pytest.raises(ValueError, match="max_text_bytes"):
        transcript_format("anthropic").envelopes_from_transcript(big, RUN)
    with pytest.raises(ValueError, match="max_text_bytes"):
        envelopes_from_anthropic(big, RUN)
