"""Result messages for every result kind, every provider, sent through the real SDK clients (CIS-ECO-3).

Kinds: READY with evidence (EVIDENCE_FOUND), READY with NO_EVIDENCE (a scoped
negative observation: it must read neither as a failure nor as evidence,
CIS-EVID-3), every failure code, and an unsafe id (answered with the provider's own
id, byte for byte). Each message is sent back through the provider's SDK client over
``httpx2.MockTransport`` and checked in the request body the "server" received.
READY results and the unsafe id come from a real :class:`ToolBoundary`; a failure of
each code is the boundary's own failure result for that code (``failure``), carrying
the envelope's id as ``invoke`` does.
"""

from __future__ import annotations

import json
import typing
from typing import Any

import anthropic
import attrs
import openai
import pydantic
import pytest
from google import genai
from google.genai import types as genai_types
from openai.types.responses import response_input_item_param

from invocation_store import (
    ERROR_MESSAGES,
    BoundaryResult,
    ErrorCode,
    EvidenceStatus,
    MemoryStore,
    Projection,
    RunContext,
    ToolBoundary,
    ToolCallEnvelope,
    ToolRegistry,
    ToolSpec,
    envelopes_from_openai_responses,
)
from invocation_store.boundary._result import failure
from invocation_store.providers import (
    anthropic_tool_results_message,
    gemini_function_responses_content,
    openai_chat_tool_message,
    openai_responses_function_call_output,
)
from invocation_store.providers.openai_responses import (
    openai_responses_call_outputs,
    openai_responses_failure_note,
)

from .test_provider_sdks import MockServer

RUN = "run-results"
UNSAFE = "call 7{x}"


def _found(raw: str, arguments: Any) -> Projection:
    return Projection(
        evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="2 errors", scope="logs 10:00-11:00"
    )


def _nothing(raw: str, arguments: Any) -> Projection:
    return Projection(
        evidence_status=EvidenceStatus.NO_EVIDENCE, content="no match", scope="logs 10:00-11:00, host a"
    )


def _results() -> list[tuple[str, ToolCallEnvelope, BoundaryResult]]:
    """(kind, envelope, result) for every kind: found, none, unsafe id, then each failure code."""
    registry = ToolRegistry(
        [
            ToolSpec(name="search", executor=lambda a: {"hits": 2, "raw": "RAW-ONLY"}, projector=_found),
            ToolSpec(name="scan", executor=lambda a: {"hits": 0, "raw": "RAW-ONLY"}, projector=_nothing),
        ]
    )
    store = MemoryStore()
    tools = ToolBoundary(store, registry)
    context = tools.open_run(
        RUN, deadline_ms=store.now_ms() + 60_000, ttl_ms=60_000, tool_call_budget=9, byte_budget=1 << 20
    )
    assert isinstance(context, RunContext)
    found = ToolCallEnvelope(run_id=RUN, tool_call_id="call_found1", tool_name="search", arguments="{}")
    none = ToolCallEnvelope(run_id=RUN, tool_call_id="call_none1", tool_name="scan", arguments="{}")
    unsafe = ToolCallEnvelope(run_id=RUN, tool_call_id=UNSAFE, tool_name="search", arguments="{}")
    kinds = [
        ("found", found, tools.invoke(context, found)),
        ("none", none, tools.invoke(context, none)),
        ("unsafe", unsafe, tools.invoke(context, unsafe)),
    ]
    for code in ErrorCode:
        envelope = ToolCallEnvelope(
            run_id=RUN, tool_call_id=f"call_{code.value.lower()}", tool_name="search", arguments="{}"
        )
        result = attrs.evolve(
            failure(code, envelope.tool_call_id),
            tool_name="search",
            envelope_tool_call_id=envelope.tool_call_id,
        )
        kinds.append((code.value, envelope, result))
    return kinds


KINDS = _results()


def _expected(kind: str, result: BoundaryResult) -> dict[str, Any]:
    if kind == "found":
        return {
            "ok": True,
            "evidence_status": "EVIDENCE_FOUND",
            "negative": False,
            "content": "2 errors",
            "scope": "logs 10:00-11:00",
        }
    if kind == "none":
        return {
            "ok": True,
            "evidence_status": "NO_EVIDENCE",
            "negative": True,
            "content": "no match",
            "scope": "logs 10:00-11:00, host a",
        }
    code = ErrorCode.UNSAFE_TOOL_CALL_ID if kind == "unsafe" else ErrorCode(kind)
    return {"ok": False, "code": code.value, "message": ERROR_MESSAGES[code]}


def _ids() -> list[str]:
    return [e.tool_call_id or "" for _, e, _ in KINDS]


def test_the_kinds_are_what_they_claim() -> None:
    """CIS-EVID-3, CIS-ERR-1: the boundary's own READY/NO_EVIDENCE/unsafe results, and every code once."""
    (_, _, found), (_, _, none), (_, _, unsafe) = KINDS[:3]
    assert (found.ok, found.evidence_status, found.negative) == (True, EvidenceStatus.EVIDENCE_FOUND, False)
    assert (none.ok, none.evidence_status, none.negative) == (True, EvidenceStatus.NO_EVIDENCE, True)
    assert (unsafe.code, unsafe.tool_call_id, unsafe.envelope_tool_call_id) == (
        ErrorCode.UNSAFE_TOOL_CALL_ID,
        None,
        UNSAFE,
    )
    assert {r.code for _, _, r in KINDS[3:]} == set(ErrorCode)


def test_openai_chat_tool_messages_for_every_kind() -> None:
    """CIS-ECO-3, CIS-EVID-3: role=tool messages; the agent text says ok/negative/code exactly."""
    server = MockServer(
        {
            "/v1/chat/completions": [
                {"id": "c", "object": "chat.completion", "created": 1, "model": "m", "choices": []}
            ]
        }
    )
    client = openai.OpenAI(api_key="sk-test", base_url="http://mock.invalid/v1", http_client=server.client())
    calls = [
        {"id": e.tool_call_id, "type": "function", "function": {"name": "search", "arguments": "{}"}}
        for _, e, _ in KINDS
    ]
    replies = [openai_chat_tool_message(e, r) for _, e, r in KINDS]
    client.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "assistant", "tool_calls": calls}, *replies]
    )  # type: ignore[list-item]
    sent = server.requests[-1]["messages"][1:]
    assert [m["tool_call_id"] for m in sent] == _ids()
    for (kind, _, result), message in zip(KINDS, sent, strict=True):
        assert message["role"] == "tool"
        assert json.loads(message["content"]) == _expected(kind, result), kind
    assert "RAW-ONLY" not in json.dumps(sent)


RESPONSES_TYPES = ["function_call", "custom_tool_call", "local_shell_call", "shell_call", "apply_patch_call"]
# computer_call and tool_search_call: test_screenshot_and_tool_list_outputs_for_every_kind


@pytest.mark.parametrize("call_type", RESPONSES_TYPES)
def test_openai_responses_outputs_for_every_kind(call_type: str) -> None:
    """CIS-ECO-7, CIS-ECO-3, CIS-EVID-3: each call type's output; NO_EVIDENCE is a success (exit 0)."""
    server = MockServer(
        {
            "/v1/responses": [
                {
                    "id": "r",
                    "object": "response",
                    "created_at": 1,
                    "status": "completed",
                    "model": "m",
                    "output": [],
                    "parallel_tool_calls": True,
                    "tool_choice": "auto",
                    "tools": [],
                }
            ]
        }
    )
    client = openai.OpenAI(api_key="sk-test", base_url="http://mock.invalid/v1", http_client=server.client())
    outputs = [openai_responses_function_call_output(e, r, call_type=call_type) for _, e, r in KINDS]
    client.responses.create(model="gpt-4.1", input=outputs)  # type: ignore[arg-type]
    sent = server.requests[-1]["input"]
    assert sent == outputs
    for item in sent:
        _input_item_shape(item)
    for (kind, envelope, result), item in zip(KINDS, sent, strict=True):
        expected = _expected(kind, result)
        assert item["type"] == f"{call_type}_output"
        assert item.get("call_id", item.get("id")) == envelope.tool_call_id
        if call_type == "shell_call":
            (chunk,) = item["output"]
            assert chunk["outcome"] == {"type": "exit", "exit_code": 0 if expected["ok"] else 1}, kind
            text = chunk["stdout"] if expected["ok"] else chunk["stderr"]
            assert (chunk["stderr"] if expected["ok"] else chunk["stdout"]) == ""
        else:
            text = item["output"]
        if call_type == "apply_patch_call":
            assert item["status"] == ("completed" if expected["ok"] else "failed"), kind
        assert json.loads(text) == expected, kind


def _literals(hint: object) -> set[str]:
    if typing.get_origin(hint) is typing.Literal:
        return {v for v in typing.get_args(hint) if isinstance(v, str)}
    return set().union(*(_literals(a) for a in typing.get_args(hint)))


def _fits(member: Any, item: dict[str, Any]) -> bool:
    hints = typing.get_type_hints(member, include_extras=True)
    required = {key for key, hint in hints.items() if typing.get_origin(hint) is typing.Required}
    if not (item["type"] in _literals(hints.get("type")) and required <= set(item) <= set(hints)):
        return False
    pydantic.TypeAdapter(member).validate_python(item)
    return True


def _input_item_shape(item: dict[str, Any]) -> None:
    """``item`` has the shape of one of the openai SDK's input items of its type: only that
    TypedDict's keys, all its required ones, and pydantic validates it against it."""
    members = typing.get_args(response_input_item_param.ResponseInputItemParam)
    assert any(_fits(member, item) for member in members), item


def _responses_client() -> tuple[openai.OpenAI, MockServer]:
    server = MockServer({"/v1/responses": [_EMPTY_RESPONSE]})
    client = openai.OpenAI(api_key="sk-test", base_url="http://mock.invalid/v1", http_client=server.client())
    return client, server


_EMPTY_RESPONSE = {
    "id": "r",
    "object": "response",
    "created_at": 1,
    "status": "completed",
    "model": "m",
    "output": [],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
}
SCREENSHOT = "data:image/png;base64,iVBORw0KGgo="
FOUND_TOOLS = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}, "strict": True}]


def _client_run_boundary() -> tuple[ToolBoundary, RunContext]:
    """A boundary whose harness runs the computer and the tool search itself."""

    def screenshot(raw: str, arguments: Any) -> Projection:
        return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content=SCREENSHOT, scope="screen")

    def tool_list(raw: str, arguments: Any) -> Projection:
        content = json.dumps(FOUND_TOOLS)
        return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content=content, scope="tools")

    registry = ToolRegistry(
        [
            ToolSpec(name="computer_call", executor=lambda a: {"png": "..."}, projector=screenshot),
            ToolSpec(name="tool_search_call", executor=lambda a: {"tools": 1}, projector=tool_list),
            ToolSpec(name="search", executor=lambda a: {"hits": 2}, projector=_found),
        ]
    )
    store = MemoryStore()
    tools = ToolBoundary(store, registry)
    context = tools.open_run(
        "run-client",
        deadline_ms=store.now_ms() + 60_000,
        ttl_ms=60_000,
        tool_call_budget=9,
        byte_budget=1 << 20,
    )
    assert isinstance(context, RunContext)
    return tools, context


@pytest.mark.parametrize("call_type", ["computer_call", "tool_search_call"])
def test_screenshot_and_tool_list_outputs_for_every_kind(call_type: str) -> None:
    """CIS-ECO-7, CIS-ECO-3: a computer_call / client tool_search_call is answered by its own output
    item, in the SDK's shape, for READY and for every code; a failure's code is said in a note."""
    tools, context = _client_run_boundary()
    call = {
        "computer_call": {
            "type": "computer_call",
            "id": "cu_1",
            "call_id": "call_ok",
            "status": "completed",
            "action": {"type": "screenshot"},
            "pending_safety_checks": [],
        },
        "tool_search_call": {
            "type": "tool_search_call",
            "id": "ts_1",
            "call_id": "call_ok",
            "execution": "client",
            "status": "completed",
            "arguments": {"query": "lookup"},
        },
    }[call_type]
    response = openai.types.responses.Response.model_validate({**_EMPTY_RESPONSE, "output": [call]})
    (envelope,) = envelopes_from_openai_responses(response, context.run_id)
    ready = tools.invoke(context, envelope)
    assert ready.ok
    pairs = [(envelope, ready)] + [(e, r) for _, e, r in KINDS[3:]]
    outputs = [openai_responses_function_call_output(e, r, call_type=call_type) for e, r in pairs]
    notes = [openai_responses_failure_note(e, r, call_type=call_type) for e, r in pairs]
    client, server = _responses_client()
    client.responses.create(model="gpt-4.1", input=[*outputs, *(n for n in notes if n)])  # type: ignore[misc]
    sent = server.requests[-1]["input"]
    assert sent == [*outputs, *(n for n in notes if n)]
    for item in sent:
        _input_item_shape(item)
    ok, *failed = outputs
    assert (ok["call_id"], ok["status"]) == ("call_ok", "completed")
    if call_type == "computer_call":
        assert ok["output"] == {"type": "computer_screenshot", "image_url": SCREENSHOT}
    else:
        assert (ok["execution"], ok["tools"]) == ("client", FOUND_TOOLS)
    assert notes[0] is None  # a READY result needs no note
    for (envelope, result), output, note in zip(pairs[1:], failed, notes[1:], strict=True):
        assert (output["call_id"], output["status"]) == (envelope.tool_call_id, "incomplete")
        assert output.get("output", {}).get("image_url", "") == ""
        assert output.get("tools", []) == []
        assert note is not None
        assert note["role"] == "user"
        said = json.loads(note["content"][0]["text"])
        assert said == {
            "call_type": call_type,
            "call_id": envelope.tool_call_id,
            "ok": False,
            "code": result.code.value,  # type: ignore[union-attr]
            "message": ERROR_MESSAGES[result.code],  # type: ignore[index]
        }


def test_every_call_type_of_a_turn_is_answered_and_none_stops_the_others() -> None:
    """CIS-ECO-7, CIS-ECO-3: function_call + computer_call (refused: not registered here) + shell_call
    + custom_tool_call: an output for each, in the SDK's shapes, the refusal's code in a note."""
    registry = ToolRegistry([ToolSpec(name="search", executor=lambda a: {"hits": 2}, projector=_found)])
    store = MemoryStore()
    tools = ToolBoundary(store, registry)
    context = tools.open_run(
        "run-mixed",
        deadline_ms=store.now_ms() + 60_000,
        ttl_ms=60_000,
        tool_call_budget=9,
        byte_budget=1 << 20,
    )
    assert isinstance(context, RunContext)
    output = [
        {"type": "function_call", "id": "fc_1", "call_id": "call_f", "name": "search", "arguments": "{}"},
        {
            "type": "computer_call",
            "id": "cu_1",
            "call_id": "call_u",
            "status": "completed",
            "action": {"type": "click", "button": "left", "x": 1, "y": 2},
            "pending_safety_checks": [],
        },
        {
            "type": "shell_call",
            "id": "sh_1",
            "call_id": "call_s",
            "status": "completed",
            "action": {"commands": ["ls"]},
        },
        {"type": "custom_tool_call", "id": "ct_1", "call_id": "call_c", "name": "grammar", "input": "x = 1"},
    ]
    response = openai.types.responses.Response.model_validate({**_EMPTY_RESPONSE, "output": output})
    envelopes = envelopes_from_openai_responses(response, context.run_id)
    results = [tools.invoke(context, e) for e in envelopes]
    assert [r.code for r in results] == [
        None,
        ErrorCode.UNAUTHORIZED,
        ErrorCode.UNAUTHORIZED,
        ErrorCode.INVALID_ARGUMENTS,
    ]
    answer = openai_responses_call_outputs(response, zip(envelopes, results, strict=True))
    client, server = _responses_client()
    client.responses.create(model="gpt-4.1", input=answer)  # type: ignore[arg-type]
    sent = server.requests[-1]["input"]
    assert [(i["type"], i.get("call_id")) for i in sent] == [
        ("function_call_output", "call_f"),
        ("computer_call_output", "call_u"),
        ("shell_call_output", "call_s"),
        ("custom_tool_call_output", "call_c"),
        ("message", None),
    ]
    for item in sent:
        _input_item_shape(item)
    assert json.loads(sent[0]["output"])["ok"] is True
    assert json.loads(sent[4]["content"][0]["text"])["code"] == "UNAUTHORIZED"
    assert json.loads(sent[4]["content"][0]["text"])["call_id"] == "call_u"
    assert json.loads(sent[3]["output"])["code"] == "INVALID_ARGUMENTS"
    with pytest.raises(ValueError, match="one per call"):
        openai_responses_call_outputs(response, list(zip(envelopes, results, strict=True))[:3])


def test_a_call_without_an_id_is_said_in_a_note_not_a_raise() -> None:
    """CIS-ECO-3, CIS-ID-2: an id-less call cannot be matched by an output: the turn's other
    outputs are built, and a note says the id-less call's code."""
    response = {
        "object": "response",
        "output": [
            {"type": "function_call", "name": "search", "arguments": "{}"},
            {"type": "function_call", "call_id": "call_found1", "name": "search", "arguments": "{}"},
        ],
    }
    envelopes = envelopes_from_openai_responses(response, RUN)
    assert envelopes[0].tool_call_id is None
    missing = failure(ErrorCode.MISSING_TOOL_CALL_ID, None)
    answer = openai_responses_call_outputs(response, [(envelopes[0], missing), (envelopes[1], KINDS[0][2])])
    assert [i["type"] for i in answer] == ["function_call_output", "message"]
    assert json.loads(answer[1]["content"][0]["text"])["code"] == "MISSING_TOOL_CALL_ID"
    with pytest.raises(ValueError, match="call id"):
        openai_responses_function_call_output(envelopes[0], missing)


def test_anthropic_tool_results_for_every_kind() -> None:
    """CIS-ECO-3, CIS-EVID-3: ``is_error`` only for failures; NO_EVIDENCE is not an error, nor evidence."""
    server = MockServer(
        {
            "/v1/messages": [
                {
                    "id": "m",
                    "type": "message",
                    "role": "assistant",
                    "model": "c",
                    "content": [],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": 1, "output_tokens": 1},
                }
            ]
        }
    )
    client = anthropic.Anthropic(
        api_key="sk-ant-test", base_url="http://mock.invalid", http_client=server.client()
    )
    uses = [{"type": "tool_use", "id": e.tool_call_id, "name": "search", "input": {}} for _, e, _ in KINDS]
    reply = anthropic_tool_results_message([(e, r) for _, e, r in KINDS])
    client.messages.create(
        model="claude-sonnet-4-5", max_tokens=10, messages=[{"role": "assistant", "content": uses}, reply]
    )  # type: ignore[list-item]
    sent = server.requests[-1]["messages"][1]["content"]
    assert [b["tool_use_id"] for b in sent] == _ids()
    for (kind, _, result), block in zip(KINDS, sent, strict=True):
        expected = _expected(kind, result)
        assert block["is_error"] is (not expected["ok"]), kind
        assert json.loads(block["content"]) == expected, kind
    none = json.loads(sent[1]["content"])
    assert (sent[1]["is_error"], none["evidence_status"], none["negative"]) == (False, "NO_EVIDENCE", True)


def test_gemini_function_responses_for_every_kind() -> None:
    """CIS-ECO-3, CIS-EVID-3: ``output`` for READY (NO_EVIDENCE included), ``error`` for each failure."""
    server = MockServer({"/v1beta/models/gemini-2.5-flash:generateContent": [{"candidates": []}]})
    options = genai_types.HttpOptions(
        base_url="http://mock.invalid", api_version="v1beta", httpx_client=server.client()
    )
    client = genai.Client(api_key="test-key", http_options=options)
    model_turn = {
        "role": "model",
        "parts": [
            {"functionCall": {"id": e.tool_call_id, "name": "search", "args": {}}} for _, e, _ in KINDS
        ],
    }
    reply = gemini_function_responses_content([(e, r) for _, e, r in KINDS])
    client.models.generate_content(model="gemini-2.5-flash", contents=[model_turn, reply])  # type: ignore[arg-type]
    sent = [p["functionResponse"] for p in server.requests[-1]["contents"][1]["parts"]]
    assert [r["id"] for r in sent] == _ids()
    for (kind, _, result), response in zip(KINDS, sent, strict=True):
        expected = _expected(kind, result)
        assert response["name"] == ("scan" if kind == "none" else "search")
        assert response["response"] == ({"output": expected} if expected["ok"] else {"error": expected}), kind
