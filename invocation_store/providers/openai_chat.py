"""OpenAI Chat Completions: tool calls in, ``role: "tool"`` messages out (CIS-PRE-7, CIS-ECO-1, CIS-ECO-3).

A call is a ``message.tool_calls[]`` item ``{"id": "call_...", "type": "function",
"function": {"name": ..., "arguments": "<JSON object text>"}}``; ``arguments`` is
kept exactly as the model wrote it (CIS-REC-2) and checked by preflight. The answer
is ``{"role": "tool", "tool_call_id": <the call's id>, "content": <agent text>}``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..kernel import ToolCallEnvelope
from ..kernel._ijson import DuplicateMembers
from ._common import document, envelope, get, items, plain_item, text
from ._formats import TranscriptFormat, TranscriptShapeError, messages
from ._results import agent_text, checked_pair, required_id

if TYPE_CHECKING:
    from ..boundary import BoundaryResult

__all__ = [
    "FORMAT",
    "envelope_from_openai_chat",
    "envelopes_from_openai_chat",
    "openai_chat_tool_message",
]

_ONE = "one Chat Completions tool call (a ChatCompletionMessageToolCall, its dict or JSON text)"
_MANY = (
    "a ChatCompletion, an assistant message (ChatCompletionMessage), one tool call or a list of "
    "tool calls (typed objects, their dicts or JSON text)"
)


def _call(item: object, run_id: str) -> ToolCallEnvelope:
    kind = get(item, "type")
    function = get(item, "function")
    arguments = text(get(function, "arguments")) if kind in (None, "function") else None
    if isinstance(function, DuplicateMembers):
        arguments = None
    return envelope(run_id, get(item, "id"), get(function, "name"), arguments, item)


def envelope_from_openai_chat(item: object, run_id: str) -> ToolCallEnvelope:
    """One OpenAI Chat Completions ``message.tool_calls[]`` item (CIS-PRE-7, CIS-ECO-1).

    ``item``: a ``ChatCompletionMessageToolCall``, its dump, or its JSON text. An
    item whose ``type`` is present and not ``"function"`` (a custom tool call with
    free-form input) gets ``arguments=None`` (INVALID_ARGUMENTS); malformed fields
    become fields preflight rejects (CIS-ID-2). Raises ``TypeError``/``ValueError``
    for anything that is not one tool call object (a whole message or completion
    included: use :func:`envelopes_from_openai_chat`).
    """
    data = document(item, _ONE)
    if not isinstance(data, Mapping):
        raise ValueError(f"expected {_ONE}; got a list")
    if any(key in data for key in ("choices", "tool_calls", "role")):
        raise ValueError(f"expected {_ONE}; got a message or completion (use envelopes_from_openai_chat)")
    return _call(data, run_id)


def envelopes_from_openai_chat(message: object, run_id: str) -> list[ToolCallEnvelope]:
    """Every tool call of an assistant turn, in order (CIS-PRE-7, CIS-ECO-1).

    Accepts a ``ChatCompletion`` (choice 0; pass the chosen message when ``n > 1``),
    a ``ChatCompletionMessage``, a list of tool calls or one tool call, as typed
    objects, dicts or JSON text. A message without ``tool_calls`` gives ``[]``.
    Raises ``ValueError`` for a streamed chunk (accumulate it first), a
    ``tool_calls``/``choices`` value that is not a list, or an object of another
    shape; ``TypeError`` for a non-object.
    """
    data = document(message, _MANY)
    if isinstance(data, Mapping):
        if "type" in data and get(data, "type") != "function":
            raise ValueError(f"expected {_MANY}; got a typed object of another API")
        if get(data, "object") == "chat.completion.chunk":
            raise ValueError("a streamed chunk has partial tool calls: accumulate the stream first")
        if "choices" in data:
            choices = items(get(data, "choices"), "'choices'")
            if not choices:
                return []
            chosen = get(plain_item(choices[0]), "message")
            if not isinstance(chosen, Mapping):
                raise ValueError("'choices[0].message' is not an object")
            data = chosen
        if "tool_calls" in data or get(data, "role") == "assistant":
            calls = items(get(data, "tool_calls"), "'tool_calls'")
        elif "function" in data or get(data, "type") == "function":
            calls = [data]
        else:
            raise ValueError(f"expected {_MANY}; got an object of another shape")
    else:
        calls = data
    return [_call(plain_item(item), run_id) for item in calls]


def openai_chat_tool_message(envelope: ToolCallEnvelope, result: BoundaryResult) -> dict[str, Any]:
    """The ``role: "tool"`` message answering one call (CIS-ECO-3).

    ``{"role": "tool", "tool_call_id": <the envelope's original id>, "content":
    <agent text>}``: success is the bounded result, failure the code and its fixed
    message (see :mod:`invocation_store.providers._results` for the id rule).
    Raises ``ValueError`` when the call has no id, ``TypeError`` for wrong types.
    """
    envelope, result = checked_pair(envelope, result)
    return {
        "role": "tool",
        "tool_call_id": required_id(envelope, "OpenAI Chat Completions"),
        "content": agent_text(result),
    }


# -- transcripts ---------------------------------------------------------------------------


def _detect(transcript: Mapping[str, Any]) -> bool:
    if isinstance(transcript.get("choices"), list):
        return True
    return any(
        isinstance(m, dict) and ("tool_calls" in m or m.get("role") == "tool") for m in messages(transcript)
    )


def _call_items(transcript: Mapping[str, Any]) -> Iterator[object]:
    found = messages(transcript)
    if not found and isinstance(transcript.get("choices"), list):
        found = [c.get("message") if isinstance(c, dict) else None for c in transcript["choices"][:1]]
    if not found:
        raise TranscriptShapeError("an openai-chat transcript needs a 'messages' (or 'choices') list")
    for message in found:
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if calls is None:
            continue
        if not isinstance(calls, list):
            raise TranscriptShapeError("an openai-chat 'tool_calls' value is not a list")
        yield from calls


#: ``{"messages": [...]}`` whose assistant messages carry ``tool_calls``, or a completion.
FORMAT = TranscriptFormat(name="openai-chat", detect=_detect, call_items=_call_items, envelope=_call)
