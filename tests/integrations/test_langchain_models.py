"""The LangChain adapter with the real chat models, ``ChatOpenAI`` and ``ChatAnthropic`` (CIS-ECO-4).

Each model talks to an ``httpx2.MockTransport`` (no network) that answers in the
provider's documented JSON or server-sent-event shape. langchain-core 1.x keeps no
raw arguments text in ``additional_kwargs``; the adapter reads ``tool_call_chunks``
(streamed) and Anthropic blocks' ``partial_json``, so a duplicate member name, a
truncated or a trailing-text argument is INVALID_ARGUMENTS, never LangChain's parse.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_openai import ChatOpenAI

from invocation_store.integrations.langchain import envelopes_from_langchain, tool_messages

from ._support import RUN, Lookup, code, sync_boundary

DUPLICATE = '{"q": "disk", "q": "cpu"}'


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4.1",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _tool_delta(index: int, call_id: str | None, arguments: str) -> dict[str, Any]:
    call: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id is not None:
        call.update(id=call_id, type="function")
        call["function"]["name"] = "lookup"
    return {"tool_calls": [call]}


OPENAI_STREAM = [
    _chunk({"role": "assistant", **_tool_delta(0, "call_1", '{"q": "disk", ')}),
    _chunk(_tool_delta(0, None, '"q": "cpu"}')),
    _chunk(_tool_delta(1, "call_2", '{"q": "di')),
    _chunk(_tool_delta(2, "call_3", '{"q": 1} trailing')),
    _chunk(_tool_delta(3, "call_4", '{"q": "ok"}')),
    _chunk({}, "tool_calls"),
]
OPENAI_COMPLETION = {
    "id": "chatcmpl-2",
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
                        "id": "call_5",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": DUPLICATE},
                    },
                    {
                        "id": "call_6",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": '{"q": "di'},
                    },
                ],
            },
        }
    ],
}


def _sse(events: list[dict[str, Any]], named: bool) -> str:
    if named:
        return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"


def _transport(stream: list[dict[str, Any]], whole: dict[str, Any], named: bool) -> httpx2.Client:
    def handler(request: httpx2.Request) -> httpx2.Response:
        assert request.url.host == "mock.invalid"
        if json.loads(request.content).get("stream"):
            text = _sse(stream, named)
            return httpx2.Response(200, text=text, headers={"content-type": "text/event-stream"})
        return httpx2.Response(200, json=whole)

    return httpx2.Client(transport=httpx2.MockTransport(handler))


def _openai(**options: Any) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4.1",
        api_key="sk-test",  # type: ignore[arg-type]
        base_url="http://mock.invalid/v1",
        http_client=_transport(OPENAI_STREAM, OPENAI_COMPLETION, named=False),
        **options,
    )


def _streamed(model: Any) -> AIMessageChunk:
    merged: Any = None
    for piece in model.stream([HumanMessage("go")]):
        merged = piece if merged is None else merged + piece
    assert isinstance(merged, AIMessageChunk)
    return merged


def _codes(message: AIMessage) -> tuple[list[str | None], Lookup, Callable[[str], Any]]:
    lookup = Lookup()
    boundary, store, context = sync_boundary(lookup)
    answers = tool_messages(boundary, context, message)
    return [code(str(m.content)) for m in answers], lookup, lambda i: store.get(RUN, i)


def test_chat_openai_streamed_raw_text_decides() -> None:
    """CIS-ECO-4, CIS-ECO-2, CIS-JSON-2: duplicate, truncated and trailing text are INVALID_ARGUMENTS."""
    message = _streamed(_openai())
    assert message.tool_calls[0]["args"] == {"q": "cpu"}  # what LangChain alone would run ...
    assert message.tool_calls[1]["args"] == {"q": "di"}  # ... and its partial parse of a cut text
    assert message.tool_calls[2]["args"] == {"q": 1}
    envelopes = envelopes_from_langchain(message, RUN)
    assert [e.arguments for e in envelopes] == [DUPLICATE, '{"q": "di', '{"q": 1} trailing', '{"q": "ok"}']
    codes, lookup, record = _codes(message)
    assert codes == ["INVALID_ARGUMENTS", "INVALID_ARGUMENTS", "INVALID_ARGUMENTS", None]
    assert lookup.calls == [{"q": "ok"}]
    assert record("call_4").request_json == '{"q": "ok"}'


def test_chat_openai_invoke_keeps_only_the_parse_of_valid_calls() -> None:
    """CIS-ECO-4: ``ChatOpenAI.invoke`` keeps no raw text of a valid call (docs/integrations.md): its parse
    is used;
    a call whose text does not parse is still INVALID_ARGUMENTS from its ``invalid_tool_calls`` text."""
    message = _openai().invoke([HumanMessage("go")])
    assert message.additional_kwargs.get("tool_calls") is None  # langchain-openai 1.7 dropped it
    envelopes = envelopes_from_langchain(message, RUN)
    assert [e.arguments for e in envelopes] == ['{"q":"cpu"}', '{"q": "di']
    codes, _, _ = _codes(message)
    assert codes == [None, "INVALID_ARGUMENTS"]


def test_a_message_cut_by_its_output_limit_does_not_run_its_last_call() -> None:
    """CIS-ECO-6, CIS-ECO-4: ``finish_reason: length`` makes the last call INVALID_ARGUMENTS."""
    cut = AIMessage(
        content="",
        tool_calls=[
            {"id": "call_1", "name": "lookup", "args": {"q": "a"}},
            {"id": "call_2", "name": "lookup", "args": {"q": "di"}},
        ],
        response_metadata={"finish_reason": "length"},
    )
    codes, lookup, _ = _codes(cut)
    assert codes == [None, "INVALID_ARGUMENTS"]
    assert lookup.calls == [{"q": "a"}]


ANTHROPIC_MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "cpu"}}],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1},
}


def _anthropic_stream(pieces: list[str], stop: str | None) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {**ANTHROPIC_MESSAGE, "content": [], "stop_reason": None}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}},
        },
    ]
    events += [
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": p}}
        for p in pieces
    ]
    events.append({"type": "content_block_stop", "index": 0})
    if stop is not None:
        events.append(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 3},
            }
        )
        events.append({"type": "message_stop"})
    return events


def _anthropic(pieces: list[str], stop: str | None = "tool_use") -> ChatAnthropic:
    model = ChatAnthropic(model="claude-sonnet-4-5", api_key="sk-ant-test", base_url="http://mock.invalid")  # type: ignore[call-arg, arg-type]
    # The SDK client ChatAnthropic builds, over the mock transport (its http_client is internal).
    model._client._client = _transport(_anthropic_stream(pieces, stop), ANTHROPIC_MESSAGE, named=True)
    return model


def test_chat_anthropic_streamed_partial_json_decides() -> None:
    """CIS-ECO-4, CIS-ECO-2: the streamed ``partial_json`` text, duplicate or cut, is INVALID_ARGUMENTS."""
    duplicate = _streamed(_anthropic(['{"q": "disk", ', '"q": "cpu"}']))
    assert duplicate.tool_calls[0]["args"] == {"q": "cpu"}
    assert [e.arguments for e in envelopes_from_langchain(duplicate, RUN)] == [DUPLICATE]
    assert _codes(duplicate)[0] == ["INVALID_ARGUMENTS"]
    cut = _streamed(_anthropic(['{"q": "di'], stop="max_tokens"))
    assert _codes(cut)[0] == ["INVALID_ARGUMENTS"]
    fine = _streamed(_anthropic(['{"q": ', '"cpu"}']))
    codes, lookup, _ = _codes(fine)
    assert codes == [None]
    assert lookup.calls == [{"q": "cpu"}]


def test_chat_anthropic_invoke_reads_the_tool_use_input() -> None:
    """CIS-ECO-4: a non-streamed ChatAnthropic call is its ``tool_use`` block's input object."""
    message = _anthropic([]).invoke([HumanMessage("go")])
    (envelope,) = envelopes_from_langchain(message, RUN)
    assert (envelope.tool_call_id, envelope.arguments) == ("toolu_1", '{"q":"cpu"}')


# ---------------------------------------------------------------------------
# ChatOpenAI in Responses mode (use_responses_api=True)

RESPONSES_BASE: dict[str, Any] = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1,
    "model": "gpt-4.1",
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
}
RESPONSES_ITEMS: list[dict[str, Any]] = [
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup", "arguments": DUPLICATE},
    {"type": "custom_tool_call", "id": "ctc_2", "call_id": "call_2", "name": "lookup", "input": "x = 1"},
    {"type": "function_call", "id": "fc_3", "call_id": "call_3", "name": "lookup", "arguments": '{"q": "di'},
    {
        "type": "function_call",
        "id": "fc_4",
        "call_id": "call_4",
        "name": "lookup",
        "arguments": '{"q": "ok"}',
    },
]


def _responses_events() -> list[dict[str, Any]]:
    """The server-sent events of the Responses API streaming ``RESPONSES_ITEMS``."""
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**RESPONSES_BASE, "status": "in_progress", "output": []}}
    ]
    for index, item in enumerate(RESPONSES_ITEMS):
        custom = item["type"] == "custom_tool_call"
        text = item["input"] if custom else item["arguments"]
        opened = {**item, "input": ""} if custom else {**item, "arguments": "", "status": "in_progress"}
        kind = "custom_tool_call_input" if custom else "function_call_arguments"
        done = {"input": text} if custom else {"arguments": text, "name": item["name"]}
        events += [
            {"type": "response.output_item.added", "output_index": index, "item": opened},
            {"type": f"response.{kind}.delta", "output_index": index, "item_id": item["id"], "delta": text},
            {"type": f"response.{kind}.done", "output_index": index, "item_id": item["id"], **done},
            {"type": "response.output_item.done", "output_index": index, "item": item},
        ]
    events.append(
        {
            "type": "response.completed",
            "response": {**RESPONSES_BASE, "status": "completed", "output": RESPONSES_ITEMS},
        }
    )
    return [{**event, "sequence_number": number} for number, event in enumerate(events)]


def _openai_responses(**options: Any) -> ChatOpenAI:
    whole = {**RESPONSES_BASE, "status": "completed", "output": RESPONSES_ITEMS}
    return ChatOpenAI(
        model="gpt-4.1",
        api_key="sk-test",  # type: ignore[arg-type]
        base_url="http://mock.invalid/v1",
        http_client=_transport(_responses_events(), whole, named=True),
        use_responses_api=True,
        **options,
    )


RESPONSES_CODES = ["INVALID_ARGUMENTS", "INVALID_ARGUMENTS", "INVALID_ARGUMENTS", None]


@pytest.mark.parametrize("output_version", [None, "responses/v1"])
def test_chat_openai_responses_invoke_keeps_the_raw_text(output_version: str | None) -> None:
    """CIS-ECO-4, CIS-ECO-7: the ``function_call`` blocks' own text decides (a duplicate member name is
    INVALID_ARGUMENTS, not LangChain's ``{"q": "cpu"}``); a custom tool call is INVALID_ARGUMENTS, never
    run with LangChain's ``{"__arg1": input}``."""
    options = {} if output_version is None else {"output_version": output_version}
    message = _openai_responses(**options).invoke([HumanMessage("go")])
    assert message.tool_calls[0]["args"] == {"q": "cpu"}  # what LangChain alone would run ...
    assert message.tool_calls[1]["args"] == {"__arg1": "x = 1"}  # ... and its wrapping of a custom input
    envelopes = envelopes_from_langchain(message, RUN)
    assert [e.tool_call_id for e in envelopes] == ["call_1", "call_2", "call_3", "call_4"]
    assert [e.arguments for e in envelopes] == [DUPLICATE, None, '{"q": "di', '{"q": "ok"}']
    codes, lookup, _ = _codes(message)
    assert codes == RESPONSES_CODES
    assert lookup.calls == [{"q": "ok"}]


def test_chat_openai_responses_streamed_keeps_the_raw_text() -> None:
    """CIS-ECO-4, CIS-ECO-7: streamed, the raw text is in ``tool_call_chunks``; the custom call's chunk
    holds LangChain's ``{"__arg1": ...}``, which is never run."""
    message = _streamed(_openai_responses())
    assert any(chunk["args"] == '{"__arg1": "x = 1"}' for chunk in message.tool_call_chunks)
    assert [e.arguments for e in envelopes_from_langchain(message, RUN)] == [
        DUPLICATE,
        None,
        '{"q": "di',
        '{"q": "ok"}',
    ]
    codes, lookup, _ = _codes(message)
    assert codes == RESPONSES_CODES
    assert lookup.calls == [{"q": "ok"}]


@pytest.mark.parametrize("output_version", ["v1", "v0"])
def test_chat_openai_responses_v1_and_v0_keep_no_raw_text(output_version: str) -> None:
    """CIS-ECO-4: ``output_version="v1"``/``"v0"`` keep only LangChain's parse of a valid call (the
    duplicate has collapsed: no raw text to read); the custom call is still INVALID_ARGUMENTS."""
    message = _openai_responses(output_version=output_version).invoke([HumanMessage("go")])
    envelopes = envelopes_from_langchain(message, RUN)
    arguments = {e.tool_call_id: e.arguments for e in envelopes}
    assert arguments == {
        "call_1": '{"q":"cpu"}',
        "call_2": None,
        "call_3": '{"q": "di',
        "call_4": '{"q":"ok"}',
    }
    # v1 keeps the model's order in its content blocks; v0 keeps none: LangChain's (valid calls first).
    order = (
        ["call_1", "call_2", "call_3", "call_4"]
        if output_version == "v1"
        else ["call_1", "call_2", "call_4", "call_3"]
    )
    assert [e.tool_call_id for e in envelopes] == order
    codes, lookup, _ = _codes(message)
    assert dict(zip(order, codes, strict=True)) == {
        "call_1": None,
        "call_2": "INVALID_ARGUMENTS",
        "call_3": "INVALID_ARGUMENTS",
        "call_4": None,
    }
    assert lookup.calls == [{"q": "cpu"}, {"q": "ok"}]
