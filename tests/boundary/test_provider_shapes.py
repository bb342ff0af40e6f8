"""Parsers know their provider: the full matrix of every provider's objects into every parser.

CIS-ECO-1, CIS-PRE-7. Each provider's objects are built by its own SDK (typed), then
dumped, dumped in JSON mode, and written as JSON text; sub-objects, lists of them and
streamed pieces are included. A parser given its own provider's object yields every
call in it (never ``[]`` for an object holding calls); another provider's object, or
a list of them, raises ``ValueError`` naming the right parser; a streamed piece raises
"accumulate the stream first".
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pydantic
import pytest
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import RawMessageStreamEvent
from google.genai import types as genai_types
from openai.lib.streaming.chat import ChatCompletionStreamState

from invocation_store import (
    ErrorCode,
    Limits,
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
from invocation_store.providers import _sdk_tables, _sdk_types
from invocation_store.providers.openai_responses import openai_responses_call_types

from .test_provider_sdks import CHAT_COMPLETION, GENERATE, MESSAGE, RESPONSE

RUN = "run-shapes"

CHAT = openai.types.chat.ChatCompletion.model_validate(CHAT_COMPLETION)


def _chunk(call: dict[str, Any]) -> Any:
    return openai.types.chat.ChatCompletionChunk.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-4.1",
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}, "finish_reason": None}
            ],
        }
    )


CHUNKS = [
    _chunk(
        {
            "index": 0,
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": "{"},
        }
    ),
    _chunk({"index": 0, "function": {"arguments": '"location": "Paris"}'}}),  # a continuation
]
RESP = openai.types.responses.Response.model_validate(RESPONSE)
RESP_EVENTS: list[dict[str, Any]] = [
    {
        "type": "response.output_item.added",
        "output_index": 0,
        "sequence_number": 1,
        "item": {**RESPONSE["output"][1], "status": "in_progress", "arguments": ""},
    },
    {
        "type": "response.function_call_arguments.delta",
        "item_id": "fc_1",
        "output_index": 0,
        "sequence_number": 2,
        "delta": '{"location"',
    },
]
MSG = anthropic.types.Message.model_validate(MESSAGE)
#: A beta Message: beta-only block types (compaction, an MCP tool listing, a server-run MCP
#: call, a fallback marker) beside the three tool_use calls.
BETA_MESSAGE: dict[str, Any] = {
    **MESSAGE,
    "content": [
        {"type": "compaction", "content": "Earlier: the user asked for weather.", "encrypted_content": None},
        {"type": "mcp_tool_listing", "mcp_server_name": "files", "tools": []},
        {
            "type": "mcp_tool_use",
            "id": "mcptoolu_1",
            "name": "read",
            "server_name": "files",
            "input": {"path": "a.txt"},
        },
        *MESSAGE["content"],
    ],
}
BETA = anthropic.types.beta.BetaMessage.model_validate(BETA_MESSAGE)
ANTHROPIC_EVENTS: list[dict[str, Any]] = [
    {"type": "message_start", "message": {**MESSAGE, "content": [], "stop_reason": None}},
    {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": '{"location": "Pa'},
    },
]
GEN = genai_types.GenerateContentResponse.model_validate(GENERATE)


def _gemini_content() -> genai_types.Content:
    assert GEN.candidates is not None
    content = GEN.candidates[0].content
    assert content is not None
    return content


def forms(typed: Any) -> Iterator[tuple[str, Any]]:
    """Typed, dumped, dumped as JSON, JSON text."""
    yield "typed", typed
    yield "dump", typed.model_dump()
    yield "json-dump", typed.model_dump(mode="json")
    yield "text", typed.model_dump_json()


def list_forms(typed: list[Any]) -> Iterator[tuple[str, Any]]:
    yield "typed", typed
    yield "dump", [t.model_dump() for t in typed]
    yield "json-dump", [t.model_dump(mode="json") for t in typed]
    yield "text", json.dumps([t.model_dump(mode="json") for t in typed])


#: (provider, name, [(form, object)], how many calls it holds) for each object kind.
OBJECTS: list[tuple[str, str, list[tuple[str, Any]], int]] = [
    ("openai-chat", "ChatCompletion", list(forms(CHAT)), 3),
    ("openai-chat", "message", list(forms(CHAT.choices[0].message)), 3),
    ("openai-chat", "tool call", list(forms(CHAT.choices[0].message.tool_calls[0])), 1),  # type: ignore[index]
    ("openai-chat", "tool call list", list(list_forms(CHAT.choices[0].message.tool_calls)), 3),  # type: ignore[arg-type]
    ("openai-responses", "Response", list(forms(RESP)), 3),
    ("openai-responses", "output list", list(list_forms(RESP.output)), 3),
    ("openai-responses", "function_call item", list(forms(RESP.output[1])), 1),
    ("anthropic", "Message", list(forms(MSG)), 3),
    ("anthropic", "content list", list(list_forms(MSG.content)), 3),
    ("anthropic", "tool_use block", list(forms(MSG.content[1])), 1),
    ("anthropic", "BetaMessage", list(forms(BETA)), 3),
    ("anthropic", "beta content list", list(list_forms(BETA.content)), 3),
    ("anthropic", "BetaToolUseBlock", list(forms(BETA.content[4])), 1),
    ("gemini", "GenerateContentResponse", list(forms(GEN)), 3),
    ("gemini", "Content", list(forms(_gemini_content())), 3),
    ("gemini", "parts", list(list_forms(_gemini_content().parts or [])), 3),
    ("gemini", "functionCall part", list(forms((_gemini_content().parts or [])[1])), 1),
    ("gemini", "FunctionCall", list(forms(GEN.function_calls[0])), 1),  # type: ignore[index]
    ("gemini", "function_calls", list(list_forms(GEN.function_calls or [])), 3),
    ("gemini", "stream chunks", list(list_forms([GEN, GEN])), 6),
]

PARSERS: dict[str, Callable[[Any, str], list[ToolCallEnvelope]]] = {
    "openai-chat": envelopes_from_openai_chat,
    "openai-responses": envelopes_from_openai_responses,
    "anthropic": envelopes_from_anthropic,
    "gemini": envelopes_from_gemini,
}
ONE: dict[str, Callable[[Any, str], ToolCallEnvelope]] = {
    "openai-chat": envelope_from_openai_chat,
    "openai-responses": envelope_from_openai_responses,
    "anthropic": envelope_from_anthropic,
    "gemini": envelope_from_gemini,
}
CASES = [
    pytest.param(provider, form, value, calls, id=f"{provider}-{name}-{form}")
    for provider, name, values, calls in OBJECTS
    for form, value in values
]


@pytest.mark.parametrize(("provider", "form", "value", "calls"), CASES)
@pytest.mark.parametrize("parser", list(PARSERS))
def test_every_object_into_every_parser(
    provider: str, form: str, value: Any, calls: int, parser: str
) -> None:
    """CIS-ECO-5, CIS-PRE-7: the own parser finds every call; any other raises naming the right one."""
    del form
    if parser == provider:
        found = PARSERS[parser](value, RUN)
        assert len(found) == calls
        assert all(
            e.tool_call_id is None
            or e.tool_call_id.startswith(("call", "toolu", "gcall"))
            or " " in e.tool_call_id
            for e in found
        )
    else:
        with pytest.raises(ValueError, match=f"use envelopes_from_{provider.replace('-', '_')}"):
            PARSERS[parser](value, RUN)


@pytest.mark.parametrize(("provider", "form", "value", "calls"), [c for c in CASES if c.values[3] == 1])
@pytest.mark.parametrize("parser", list(ONE))
def test_every_call_object_into_every_single_call_parser(
    provider: str, form: str, value: Any, calls: int, parser: str
) -> None:
    """CIS-ECO-5: ``envelope_from_X`` refuses another provider's call, naming the right parser."""
    del form, calls
    if parser == provider:
        assert ONE[parser](value, RUN).tool_call_id is not None
    else:
        with pytest.raises(ValueError, match=f"use envelopes_from_{provider.replace('-', '_')}"):
            ONE[parser](value, RUN)


def test_the_gemini_parser_no_longer_misreads_other_providers_calls() -> None:
    """CIS-ECO-5: the round-2 misreadings: a Responses item or an Anthropic block as a Gemini call."""
    for value in (RESP.output[1], RESP.output[1].model_dump(), MSG.content[1], [MSG.content[1].model_dump()]):
        with pytest.raises(ValueError, match=r"use envelopes_from_(openai_responses|anthropic)"):
            envelopes_from_gemini(value, RUN)
    with pytest.raises(ValueError, match="use envelopes_from_openai_responses"):
        envelope_from_gemini(RESP.output[1].model_dump(), RUN)
    with pytest.raises(ValueError, match="use envelopes_from_openai_chat"):
        envelopes_from_gemini(CHAT.choices[0].message.model_dump(), RUN)
    with pytest.raises(ValueError, match="use envelopes_from_openai_responses"):
        envelopes_from_gemini(RESP, RUN)
    with pytest.raises(ValueError, match="Part field"):
        envelopes_from_gemini([{}], RUN)
    with pytest.raises(ValueError, match="conversation"):
        envelopes_from_gemini([_gemini_content(), _gemini_content()], RUN)
    with pytest.raises(ValueError, match="conversation"):
        envelopes_from_gemini({"contents": [_gemini_content().model_dump()]}, RUN)


@pytest.mark.parametrize("parser", ["openai-responses", "anthropic", "gemini"])
def test_the_chat_parser_refuses_other_providers_lists(parser: str) -> None:
    """CIS-ECO-5: Responses output lists, Anthropic content lists, Gemini parts raise, never envelopes."""
    lists = {
        "openai-responses": [item.model_dump() for item in RESP.output],
        "anthropic": [block.model_dump() for block in MSG.content],
        "gemini": [part.model_dump() for part in _gemini_content().parts or []],
    }
    with pytest.raises(ValueError, match=f"use envelopes_from_{parser.replace('-', '_')}"):
        envelopes_from_openai_chat(lists[parser], RUN)


# ---------------------------------------------------------------------------
# Streamed pieces: accumulate first; unfinished calls never run


@pytest.mark.parametrize(
    ("parser", "pieces"),
    [
        ("openai-chat", [c.model_dump() for c in CHUNKS]),
        ("openai-chat", CHUNKS[0]),
        ("openai-chat", CHUNKS[1].choices[0].delta.tool_calls[0].model_dump()),  # type: ignore[index]
        ("openai-responses", RESP_EVENTS),
        ("openai-responses", RESP_EVENTS[0]),
        ("openai-responses", RESP_EVENTS[0]["item"]),
        ("openai-responses", {**RESPONSE, "status": "in_progress"}),
        ("anthropic", ANTHROPIC_EVENTS),
        ("anthropic", ANTHROPIC_EVENTS[1]),
        ("anthropic", {**MESSAGE, "stop_reason": None}),
        ("anthropic", anthropic.types.Message.model_validate({**MESSAGE, "stop_reason": None})),
    ],
)
def test_streamed_pieces_are_refused_until_accumulated(parser: str, pieces: Any) -> None:
    """CIS-ECO-6, CIS-PRE-7: a chunk, an event or an unfinished snapshot: "accumulate the stream first"."""
    with pytest.raises(ValueError, match="accumulate the stream first"):
        PARSERS[parser](pieces, RUN)


def test_a_cut_anthropic_snapshot_never_uses_up_the_real_calls_id() -> None:
    """CIS-ECO-6, CIS-ID-5: the snapshot is refused before any envelope, so the finished call runs."""
    snapshot = {**MESSAGE, "stop_reason": None, "content": [{**MESSAGE["content"][1], "input": {}}]}
    with pytest.raises(ValueError, match="no stop_reason"):
        envelopes_from_anthropic(snapshot, RUN)
    finished = envelopes_from_anthropic(MESSAGE, RUN)
    assert finished[0].arguments == '{"location":"Paris"}'


def test_a_message_cut_by_max_tokens_does_not_run_its_last_call() -> None:
    """CIS-ECO-6: after ``max_tokens`` the last tool_use may be cut: INVALID_ARGUMENTS, answered."""
    cut = {**MESSAGE, "stop_reason": "max_tokens"}
    found = envelopes_from_anthropic(cut, RUN)
    assert [e.arguments for e in found] == ['{"location":"Paris"}', '{"location":"Lyon"}', None]
    assert found[2].tool_call_id == "toolu_01JqR8"


def _snapshot_mid_call(partial_json: str) -> Any:
    """An Anthropic stream snapshot accumulated by the SDK's own code, one tool_use half sent."""
    events = pydantic.TypeAdapter(RawMessageStreamEvent)
    start = {**MESSAGE, "content": [], "stop_reason": None}
    block = {"type": "tool_use", "id": "toolu_01A", "name": "transfer", "input": {}}
    snapshot, buffers = None, {}
    for event in (
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": block},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": partial_json},
        },
    ):
        snapshot = accumulate_event(
            event=events.validate_python(event), current_snapshot=snapshot, json_bufs=buffers
        )
    return snapshot


@pytest.mark.parametrize("partial_json", ['{"to": "alice", "amount": 10', '{"to": "ali'])
@pytest.mark.parametrize("form", ["typed", "dump", "dump without None", "json text"])
def test_a_mid_stream_anthropic_snapshot_is_refused_in_every_form(partial_json: str, form: str) -> None:
    """CIS-ECO-6: a snapshot mid-call (its amount may be the start of 1000, or its input still
    ``{}``) is refused whether typed, dumped, dumped without None values (no ``stop_reason``
    key at all) or written as JSON text: nothing runs with arguments the model never sent."""
    snapshot = _snapshot_mid_call(partial_json)
    given = {
        "typed": snapshot,
        "dump": snapshot.model_dump(),
        "dump without None": snapshot.model_dump(exclude_none=True),
        "json text": snapshot.model_dump_json(exclude_none=True),
    }[form]
    with pytest.raises(ValueError, match="no stop_reason"):
        envelopes_from_anthropic(given, RUN)


@pytest.mark.parametrize("form", ["typed", "dump", "json text"])
def test_a_chat_completion_cut_by_its_output_limit_does_not_run_its_last_call(form: str) -> None:
    """CIS-ECO-6: ``finish_reason: "length"`` may cut the last call's arguments mid-way (a
    complete-looking ``{"amount": 10}`` may be the start of 1000): the last call gets
    INVALID_ARGUMENTS and is still answered by its id; the earlier calls are whole and run;
    another finish reason leaves every call as sent."""
    cut = {**CHAT_COMPLETION, "choices": [{**CHAT_COMPLETION["choices"][0], "finish_reason": "length"}]}
    typed = openai.types.chat.ChatCompletion.model_validate(cut)
    given = {"typed": typed, "dump": cut, "json text": json.dumps(cut)}[form]
    found = envelopes_from_openai_chat(given, RUN)
    assert [e.arguments for e in found] == ['{"location": "Paris"}', '{"location": "Lyon"}', None]
    assert [e.tool_call_id for e in found][2] == "call_2nB0tQe7LkWs"
    assert found[2].tool_name == "launch_rocket"
    for reason in ("tool_calls", "stop", "content_filter"):
        whole = {**CHAT_COMPLETION, "choices": [{**CHAT_COMPLETION["choices"][0], "finish_reason": reason}]}
        assert [e.arguments for e in envelopes_from_openai_chat(whole, RUN)][2] == "{}"


def _namespaced(call_id: str, namespace: object, kind: str = "function_call") -> dict[str, Any]:
    item = {"type": kind, "id": f"fc_{call_id}", "call_id": call_id, "name": "search", "status": "completed"}
    item["arguments" if kind == "function_call" else "input"] = "{}"
    return {**item, "namespace": namespace}


@pytest.mark.parametrize("kind", ["function_call", "custom_tool_call"])
def test_a_namespaced_responses_call_names_its_namespace(kind: str) -> None:
    """CIS-ECO-1, CIS-PRE-5: a call of a tool grouped under a namespace (``NamespaceTool``) is
    ``<namespace>.<name>``: ``jira.search`` never runs the harness's ``search`` or
    ``crm.search``; a namespace that is not a non-empty text leaves no tool name (refused)."""
    output = [_namespaced("c1", "crm", kind), _namespaced("c2", "jira", kind), _namespaced("c3", None, kind)]
    response = {**RESPONSE, "output": output}
    typed = openai.types.responses.Response.model_validate(response)
    for given in (response, typed, json.dumps(response)):
        found = envelopes_from_openai_responses(given, RUN)
        assert [(e.tool_call_id, e.tool_name) for e in found] == [
            ("c1", "crm.search"),
            ("c2", "jira.search"),
            ("c3", "search"),
        ]
    for bad in ("", 7):
        (found,) = envelopes_from_openai_responses(
            {**RESPONSE, "output": [_namespaced("c4", bad, kind)]}, RUN
        )
        assert found.tool_name in (None, kind)
        assert found.tool_name != "search"
    registered = {"search": ToolPolicy(name="search", authorized=True, read_only=True)}
    jira = envelopes_from_openai_responses({**RESPONSE, "output": output[1:2]}, RUN)[0]
    policy = registered.get(jira.tool_name or "")
    refused = ErrorCode.UNAUTHORIZED if kind == "function_call" else ErrorCode.INVALID_ARGUMENTS  # free-form
    assert check_envelope(RunContext(run_id=RUN), jira, policy, Limits()) is refused


@pytest.mark.parametrize(
    ("members", "arguments"),
    [
        ({"action": {"type": "screenshot"}}, '{"type":"screenshot"}'),
        (
            {"actions": [{"type": "click", "button": "left", "x": 1, "y": 2}, {"type": "screenshot"}]},
            '{"actions":[{"button":"left","type":"click","x":1,"y":2},{"type":"screenshot"}]}',
        ),
        ({"action": {"type": "screenshot"}, "actions": [{"type": "screenshot"}]}, None),
        ({}, None),
    ],
    ids=["one action", "batched actions", "both", "neither"],
)
def test_a_computer_call_carries_its_action_or_its_batch(
    members: dict[str, Any], arguments: str | None
) -> None:
    """CIS-ECO-7, CIS-ECO-1: a ``computer_call``'s one ``action`` is its arguments, a batch
    ``actions`` is ``{"actions": [...]}`` (never dropped: the call could never run), and an
    item carrying both or neither is INVALID_ARGUMENTS (which one is the call is unknowable)."""
    item = {"type": "computer_call", "id": "cu", "call_id": "call_C", "status": "completed", **members}
    item["pending_safety_checks"] = []
    (found,) = envelopes_from_openai_responses({**RESPONSE, "output": [item]}, RUN)
    assert (found.tool_call_id, found.tool_name) == ("call_C", "computer_call")
    if arguments is None:
        assert found.arguments is None
    else:
        assert json.loads(found.arguments or "null") == json.loads(arguments)


@pytest.mark.parametrize(
    "call",
    [
        {
            "name": "get_weather",
            "id": "g1",
            "partial_args": [{"json_path": "$.location", "string_value": "Pa"}],
            "will_continue": True,
        },
        {"name": "get_weather", "id": "g1", "willContinue": True},
        {"name": "get_weather", "id": "g1", "partialArgs": [{"jsonPath": "$.location", "stringValue": "Pa"}]},
    ],
)
def test_unfinished_gemini_calls_never_run(call: dict[str, Any]) -> None:
    """CIS-ECO-6: ``partial_args``/``will_continue`` raise, typed or dumped, alone or in a response."""
    typed = genai_types.FunctionCall.model_validate(call)
    for value in (
        call,
        typed,
        {"functionCall": call},
        [{"functionCall": call}],
        {"candidates": [{"content": {"role": "model", "parts": [{"functionCall": call}]}}]},
    ):
        with pytest.raises(ValueError, match="unfinished"):
            envelopes_from_gemini(value, RUN)
    with pytest.raises(ValueError, match="unfinished"):
        envelope_from_gemini(typed, RUN)
    assert (
        envelopes_from_gemini({"name": "get_weather", "id": "g1", "will_continue": False}, RUN)[0].arguments
        == "{}"
    )


# ---------------------------------------------------------------------------
# Every call gets an answer

POLICY = ToolPolicy(name="get_weather", authorized=True, read_only=True)


def code_of(envelope: ToolCallEnvelope, policy: ToolPolicy | None = POLICY) -> ErrorCode | None:
    return check_envelope(RunContext(run_id=RUN), envelope, policy, Limits())


def test_every_responses_call_item_yields_an_envelope() -> None:
    """CIS-ECO-7, CIS-PRE-7: custom, client-run and unknown call items are answered; others still run."""
    output = [
        {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_c", "name": "grammar", "input": "x = 1"},
        {
            "type": "local_shell_call",
            "id": "lsh_1",
            "call_id": "call_l",
            "status": "completed",
            "action": {"type": "exec", "command": ["ls"], "env": {}},
        },
        {
            "type": "shell_call",
            "id": "sh_1",
            "call_id": "call_s",
            "status": "completed",
            "action": {"commands": ["ls"]},
        },
        {
            "type": "apply_patch_call",
            "id": "ap_1",
            "call_id": "call_p",
            "status": "completed",
            "operation": {"type": "delete_file", "path": "a.txt"},
        },
        {
            "type": "computer_call",
            "id": "cu_1",
            "call_id": "call_u",
            "status": "completed",
            "action": {"type": "screenshot"},
            "pending_safety_checks": [],
        },
        {"type": "hologram_call", "id": "hg_1", "call_id": "call_h", "status": "completed"},
        {
            "type": "tool_search_call",
            "id": "ts_1",
            "call_id": "call_t",
            "execution": "server",
            "arguments": {},
        },
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {"type": "future_note", "id": "fn_1"},
        RESPONSE["output"][1],
    ]
    found = envelopes_from_openai_responses({"object": "response", "output": output}, RUN)
    assert [e.tool_call_id for e in found] == [
        "call_c",
        "call_l",
        "call_s",
        "call_p",
        "call_u",
        "call_h",
        "call_unLAR8MvFNptuiZK",
    ]
    assert [e.tool_name for e in found] == [
        "grammar",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
        "computer_call",
        "hologram_call",
        "get_weather",
    ]
    assert openai_responses_call_types({"output": output}) == [
        "custom_tool_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
        "computer_call",
        "hologram_call",
        "function_call",
    ]
    codes = [code_of(e) for e in found]
    assert codes == [
        ErrorCode.INVALID_ARGUMENTS,  # free-form input is no JSON object
        ErrorCode.UNAUTHORIZED,  # client-run tools: not registered
        ErrorCode.UNAUTHORIZED,
        ErrorCode.UNAUTHORIZED,
        ErrorCode.UNAUTHORIZED,
        ErrorCode.INVALID_ARGUMENTS,  # an unknown item type: its arguments cannot be read
        None,  # the turn's function call still runs
    ]
    shell = ToolPolicy(name="shell_call", authorized=True, read_only=True)
    assert code_of(found[2], shell) is None  # a harness that registers the built-in tool runs it
    assert found[2].arguments == '{"commands":["ls"]}'
    client_search = {
        "type": "tool_search_call",
        "call_id": "call_t",
        "execution": "client",
        "arguments": {"q": 1},
    }
    assert envelopes_from_openai_responses([client_search], RUN)[0].arguments == '{"q":1}'


def test_an_incomplete_responses_call_never_runs() -> None:
    """CIS-ECO-6: an item cut by the output limit (``status: incomplete``) is INVALID_ARGUMENTS."""
    item = {**RESPONSE["output"][1], "status": "incomplete", "arguments": '{"location": "Pa'}
    (found,) = envelopes_from_openai_responses([item], RUN)
    assert found.arguments is None
    assert code_of(found) is ErrorCode.INVALID_ARGUMENTS


def test_chat_custom_and_legacy_function_calls_are_answered() -> None:
    """CIS-ECO-7: a Chat ``custom`` call keeps its name (INVALID_ARGUMENTS); ``function_call`` has no id."""
    message = {
        "role": "assistant",
        "function_call": {"name": "get_weather", "arguments": "{}"},
        "tool_calls": [{"id": "call_c", "type": "custom", "custom": {"name": "grammar", "input": "x"}}],
    }
    legacy, custom = envelopes_from_openai_chat(message, RUN)
    assert (custom.tool_call_id, custom.tool_name, code_of(custom)) == (
        "call_c",
        "grammar",
        ErrorCode.INVALID_ARGUMENTS,
    )
    assert (legacy.tool_name, code_of(legacy)) == ("get_weather", ErrorCode.MISSING_TOOL_CALL_ID)


def _chat_snapshot() -> Any:
    """``ChatCompletionStreamState.current_completion_snapshot`` after the first chunk: it says
    ``"object": "chat.completion"``, and its choice has no ``finish_reason`` yet."""
    state = ChatCompletionStreamState()
    state.handle_chunk(CHUNKS[0])
    snapshot = state.current_completion_snapshot
    assert (snapshot.object, snapshot.choices[0].finish_reason) == ("chat.completion", None)
    return snapshot


#: The first delta of each of two streamed calls: an id and a name, the arguments still to come.
FIRST_DELTAS = [
    openai.types.chat.chat_completion_chunk.ChoiceDeltaToolCall.model_validate(
        {
            "index": i,
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "get_weather", "arguments": ""},
        }
    )
    for i in range(2)
]

#: Streamed pieces of each provider, typed and dumped, alone and as lists.
STREAMED: list[tuple[str, str, Any]] = [
    ("openai-chat", "chunk", CHUNKS[0]),
    ("openai-chat", "chunk list", [c.model_dump() for c in CHUNKS]),
    ("openai-chat", "unfinished snapshot", _chat_snapshot()),
    ("openai-chat", "unfinished snapshot dump", _chat_snapshot().model_dump()),
    ("openai-chat", "first deltas", FIRST_DELTAS),
    ("openai-chat", "first deltas dump", [d.model_dump() for d in FIRST_DELTAS]),
    ("openai-chat", "first delta", FIRST_DELTAS[0]),
    ("openai-responses", "event", RESP_EVENTS[1]),
    ("openai-responses", "event list", RESP_EVENTS),
    ("anthropic", "event", ANTHROPIC_EVENTS[2]),
    ("anthropic", "event list", ANTHROPIC_EVENTS),
    ("anthropic", "snapshot", anthropic.types.Message.model_validate({**MESSAGE, "stop_reason": None})),
    (
        "anthropic",
        "beta snapshot",
        anthropic.types.beta.BetaMessage.model_validate({**BETA_MESSAGE, "stop_reason": None}),
    ),
]


@pytest.mark.parametrize(("provider", "value"), [pytest.param(p, v, id=f"{p}-{n}") for p, n, v in STREAMED])
@pytest.mark.parametrize("parser", list(PARSERS))
def test_every_streamed_piece_into_every_parser(provider: str, value: Any, parser: str) -> None:
    """CIS-ECO-5, CIS-ECO-6: the own parser says "accumulate the stream first"; others name the right one."""
    with pytest.raises(ValueError) as raised:
        PARSERS[parser](value, RUN)
    message = str(raised.value)
    if parser == provider:
        assert "accumulate the stream first" in message
    else:
        assert f"use envelopes_from_{provider.replace('-', '_')}" in message


def test_a_finished_snapshot_and_whole_calls_with_an_index_still_run() -> None:
    """CIS-ECO-6: the same stream accumulated to its end parses; LiteLLM-style whole calls carrying
    an ``index`` are calls, not deltas."""
    state = ChatCompletionStreamState()
    for chunk in CHUNKS:
        state.handle_chunk(chunk)
    state.handle_chunk(
        openai.types.chat.ChatCompletionChunk.model_validate(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "gpt-4.1",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
            }
        )
    )
    final = state.get_final_completion()
    (found,) = envelopes_from_openai_chat(final, RUN)
    assert (found.tool_call_id, found.arguments) == ("call_1", '{"location": "Paris"}')
    whole = [{**d.model_dump(), "function": {"name": "get_weather", "arguments": "{}"}} for d in FIRST_DELTAS]
    assert [e.tool_call_id for e in envelopes_from_openai_chat(whole, RUN)] == ["call_0", "call_1"]


# ---------------------------------------------------------------------------
# Unknown items: reported one by one, never a reason to drop the turn's calls

UNKNOWN_GEMINI_PARTS = [
    {"audioTranscription": {"text": "hello"}},
    {"documentMetadata": {"pageCount": 2}},
    {"mediaProcessing": {}},
    {"speechMetadata": {}},
    {"spreadsheetMetadata": {}},
    {"audioMetadata": {}},
    {"hologramMetadata": {"frames": 3}},  # a field no SDK has yet
]


@pytest.mark.parametrize("part", UNKNOWN_GEMINI_PARTS, ids=lambda p: next(iter(p)))
def test_a_gemini_part_of_an_unknown_kind_does_not_stop_the_turn(
    part: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """CIS-ECO-7: REST JSON parts whose only field this version does not know (or that the SDK
    knows only by a newer name) are skipped, and the turn's function calls are all read."""
    parts = [part, *GENERATE["candidates"][0]["content"]["parts"]]
    response = {"candidates": [{**GENERATE["candidates"][0], "content": {"role": "model", "parts": parts}}]}
    expected = envelopes_from_gemini(GENERATE, RUN)
    with caplog.at_level("WARNING", logger="invocation_store.providers"):
        for value in (response, json.dumps(response), response["candidates"][0]["content"], parts):
            assert envelopes_from_gemini(value, RUN) == expected
    if not genai_types.Part.model_fields.keys() & _snake(part):
        assert caplog.records, "an unknown part is reported"
        record = caplog.records[0]
        assert "Gemini: skipped item 0" in record.getMessage()
        assert (record.run_id, record.tool_call_id) == (RUN, None)  # type: ignore[attr-defined]
    else:
        assert not caplog.records  # the installed SDK knows the field: a known part, not reported


def _snake(part: dict[str, Any]) -> set[str]:
    return {"".join(f"_{c.lower()}" if c.isupper() else c for c in key) for key in part}


def test_unknown_gemini_objects_alone_are_still_refused() -> None:
    """CIS-ECO-5: only beside known parts, or inside a response or Content, is a part of an unknown
    kind skipped: a bare list of unknown objects holds no known part and is refused."""
    for value in ([{}], [{"hologramMetadata": {}}], [{"tool_name": "x", "arguments": "{}"}]):
        with pytest.raises(ValueError, match="Part field"):
            envelopes_from_gemini(value, RUN)
    with pytest.raises(ValueError, match="Part field"):
        envelopes_from_gemini({"role": "model", "parts": ["text"]}, RUN)


def test_an_anthropic_block_of_an_unknown_type_is_reported_not_fatal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """CIS-ECO-7: a block type no SDK declares is reported and skipped; the calls are read."""
    message = {**MESSAGE, "content": [{"type": "hologram", "frames": 3}, *MESSAGE["content"]]}
    with caplog.at_level("WARNING", logger="invocation_store.providers"):
        found = envelopes_from_anthropic(message, RUN)
    assert found == envelopes_from_anthropic(MESSAGE, RUN)
    assert [r.getMessage() for r in caplog.records] == [
        "Anthropic: skipped item 0 (type hologram), a kind this version does not know; "
        "the turn's other calls are read"
    ]
    caplog.clear()
    with caplog.at_level("WARNING", logger="invocation_store.providers"):
        envelopes_from_anthropic(BETA, RUN)
    assert not caplog.records  # every beta block type is one the SDK declares


def test_a_responses_item_of_an_unknown_type_is_reported_or_answered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """CIS-ECO-7: an unknown call-like item gets its envelope; an unknown other item is reported."""
    output = [
        {"type": "hologram_note", "id": "hn_1"},
        {"type": "hologram_call", "id": "hc_1", "call_id": "call_h"},
        *RESPONSE["output"],
    ]
    with caplog.at_level("WARNING", logger="invocation_store.providers"):
        found = envelopes_from_openai_responses({**RESPONSE, "output": output}, RUN)
    assert [e.tool_call_id for e in found] == [
        "call_h",
        *(e.tool_call_id for e in envelopes_from_openai_responses(RESPONSE, RUN)),
    ]
    assert code_of(found[0]) is ErrorCode.INVALID_ARGUMENTS
    assert [r.getMessage() for r in caplog.records] == [
        "OpenAI Responses: skipped item 0 (type hologram_note), a kind this version does not know; "
        "the turn's other calls are read"
    ]


def test_responses_input_lists_take_easy_messages_and_approval_requests() -> None:
    """CIS-ECO-1: an input list's ``{"role": "user", "content": "hi"}`` (no type) is an item; an
    ``mcp_approval_request`` is no call of the harness (the provider runs the MCP call once approved)."""
    items = [
        {"role": "user", "content": "hi"},
        {"role": "developer", "content": [{"type": "input_text", "text": "be brief"}]},
        {
            "type": "mcp_approval_request",
            "id": "mcpr_1",
            "name": "read",
            "server_label": "files",
            "arguments": "{}",
        },
        RESPONSE["output"][1],
    ]
    typed = [pydantic.TypeAdapter(openai.types.responses.ResponseInputItem).validate_python(i) for i in items]
    assert type(typed[0]).__name__ == "EasyInputMessage"
    for value in (items, typed, json.dumps(items)):
        (found,) = envelopes_from_openai_responses(value, RUN)
        assert found.tool_call_id == "call_unLAR8MvFNptuiZK"
        assert openai_responses_call_types(value) == ["function_call"]


@pytest.mark.parametrize(
    ("block", "parser"),
    [
        ({"type": "compaction", "content": "summary"}, "anthropic"),
        (
            {"type": "compaction", "id": "cmp_1", "encrypted_content": "x", "created_by": "a"},
            "openai-responses",
        ),
        ({"type": "mcp_tool_listing", "mcp_server_name": "s", "tools": []}, "anthropic"),
        ({"type": "mcp_list_tools", "id": "l1", "server_label": "s", "tools": []}, "openai-responses"),
    ],
)
def test_a_tag_two_providers_declare_goes_to_the_one_whose_fields_it_has(
    block: dict[str, Any], parser: str
) -> None:
    """CIS-ECO-5: ``compaction`` is both an Anthropic beta block and a Responses item: the fields
    decide; the other parser names the right one."""
    assert PARSERS[parser]([block], RUN) == []
    for other in set(PARSERS) - {parser}:
        with pytest.raises(ValueError, match=f"use envelopes_from_{parser.replace('-', '_')}"):
            PARSERS[other]([block], RUN)


def test_the_sdk_tables_are_the_installed_sdks() -> None:
    """CIS-ECO-1: the generated tables are what the installed SDKs declare (else: regenerate with
    scripts/gen_provider_tables.py); the parsers' runtime tables include every type they declare."""
    derived = _sdk_types.derive()
    versions = {name: importlib.metadata.version(name) for name in _sdk_tables.SDK_VERSIONS}
    if versions == _sdk_tables.SDK_VERSIONS:
        assert _sdk_types.render(derived, versions) == Path(_sdk_tables.__file__).read_text(encoding="utf-8")
    found = _sdk_types.tables()
    for tag, fields in derived.anthropic_blocks.items():
        assert fields <= found.anthropic_blocks[tag]
    for tag, fields in derived.responses_items.items():
        assert fields <= found.responses_items[tag]
    assert derived.gemini_part_fields <= found.gemini_part_fields
    assert {"compaction", "mcp_tool_listing", "tool_use"} <= set(found.anthropic_blocks)
    assert {"compaction", "function_call", "computer_call"} <= set(found.responses_items)


def test_reading_the_tables_imports_no_sdk() -> None:
    """CIS-ECO-4: the parsers read the generated tables; an SDK is read only once imported."""
    probe = (
        "import sys\n"
        "import invocation_store as cis\n"
        "block = {'type': 'compaction', 'content': 'x'}\n"
        "cis.envelopes_from_anthropic({'role': 'assistant', 'content': [block]}, 'r')\n"
        "cis.envelopes_from_gemini({'role': 'model', 'parts': [{'audioTranscription': {}}]}, 'r')\n"
        "cis.envelopes_from_openai_responses([{'role': 'user', 'content': 'hi'}], 'r')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'anthropic', 'openai', 'google'}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


def test_a_chat_tool_call_of_an_unknown_type_is_answered_not_fatal() -> None:
    """CIS-ECO-7: a tool call of a type the SDK does not declare gets its own envelope (refused
    with a code, answered by its id); the message's other calls run."""
    message = CHAT.choices[0].message.model_dump()
    message["tool_calls"] = [
        {"id": "call_h", "type": "hologram", "hologram": {"frames": 3}},
        *message["tool_calls"],
    ]
    found = envelopes_from_openai_chat(message, RUN)
    assert [e.tool_call_id for e in found] == [
        "call_h",
        *(e.tool_call_id for e in envelopes_from_openai_chat(CHAT, RUN)),
    ]
    assert found[0].arguments is None
    assert code_of(found[0]) is ErrorCode.INVALID_ARGUMENTS
    assert code_of(found[1]) is None
