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
from typing import Any

import anthropic
import attrs
import openai
import pytest
from google import genai
from google.genai import types as genai_types

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
)
from invocation_store.boundary._result import failure
from invocation_store.providers import (
    anthropic_tool_results_message,
    gemini_function_responses_content,
    openai_chat_tool_message,
    openai_responses_function_call_output,
)
from invocation_store.providers.openai_responses import openai_responses_call_outputs

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


def test_openai_responses_outputs_of_a_mixed_turn() -> None:
    """CIS-ECO-3: openai_responses_call_outputs answers each call with its type's output, in order."""
    response = {
        "object": "response",
        "output": [
            {"type": "function_call", "call_id": "call_found1", "name": "search", "arguments": "{}"},
            {"type": "shell_call", "call_id": "call_none1", "action": {"commands": ["ls"]}},
        ],
    }
    pairs = [(e, r) for _, e, r in KINDS[:2]]
    first, second = openai_responses_call_outputs(response, pairs)
    assert (first["type"], second["type"]) == ("function_call_output", "shell_call_output")
    with pytest.raises(ValueError, match="one per call"):
        openai_responses_call_outputs(response, pairs[:1])
    for refused in ("computer_call", "tool_search_call"):
        with pytest.raises(ValueError, match="answer it from the harness"):
            openai_responses_function_call_output(*pairs[0], call_type=refused)


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
