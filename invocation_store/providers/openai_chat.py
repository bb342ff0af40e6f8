"""OpenAI Chat Completions: tool calls in, ``role: "tool"`` messages out (CIS-PRE-7, CIS-ECO-1, CIS-ECO-3).

A call is a ``message.tool_calls[]`` item ``{"id": "call_...", "type": "function",
"function": {"name": ..., "arguments": "<JSON object text>"}}``; ``arguments`` is
kept exactly as the model wrote it (CIS-REC-2) and checked by preflight. The answer
is ``{"role": "tool", "tool_call_id": <the call's id>, "content": <agent text>}``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..kernel import DuplicateMembers, ToolCallEnvelope
from ._common import cut_last, document, envelope, get, items, plain_item, text
from ._formats import TranscriptFormat, TranscriptShapeError, messages
from ._results import agent_text, checked_pair, required_id
from ._shapes import CHAT, recognise, wrong_provider

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


def _call(item: object, run_id: str, request_bytes: int | None = None) -> ToolCallEnvelope:
    """One tool call's envelope (``request_bytes`` is unused: Chat arguments are text)."""
    del request_bytes
    kind = get(item, "type")
    if kind == "custom":
        # A custom tool's free-form input is no JSON object: INVALID_ARGUMENTS, answered.
        return envelope(run_id, get(item, "id"), get(get(item, "custom"), "name"), None, item)
    function = get(item, "function")
    arguments = text(get(function, "arguments")) if kind in (None, "function") else None
    if isinstance(function, DuplicateMembers):
        arguments = None
    return envelope(run_id, get(item, "id"), get(function, "name"), arguments, item)


def _legacy_call(message: Mapping[str, Any], run_id: str) -> ToolCallEnvelope:
    """The deprecated ``function_call`` of a message: a call without an id (MISSING_TOOL_CALL_ID)."""
    function = get(message, "function_call")
    arguments = None if isinstance(function, DuplicateMembers) else text(get(function, "arguments"))
    return envelope(run_id, None, get(function, "name"), arguments, message)


def _own(data: Mapping[str, Any]) -> None:
    """Raise for another provider's shape, or a streamed piece (see :mod:`._shapes`)."""
    shape = recognise(data)
    if shape is not None and (shape.provider != CHAT or shape.stream):
        if shape.stream and shape.provider == CHAT:
            raise ValueError(f"this is {shape.what}, which holds partial tool calls: {_ACCUMULATE}")
        raise wrong_provider(shape)


_ACCUMULATE = (
    "accumulate the stream first (client.chat.completions.stream(...).get_final_completion(), "
    "or ChatCompletionStreamState), then pass the completion"
)


def envelope_from_openai_chat(
    item: object, run_id: str, *, max_text_bytes: int | None = None
) -> ToolCallEnvelope:
    """One OpenAI Chat Completions ``message.tool_calls[]`` item (CIS-PRE-7, CIS-ECO-1).

    ``item``: a ``ChatCompletionMessageToolCall`` (function or custom), its dump, or
    its JSON text. A custom tool call (free-form input, ``"type": "custom"``) gets its
    name and ``arguments=None`` (INVALID_ARGUMENTS: the boundary runs JSON-object
    arguments only), so it is still answered; malformed fields become fields
    preflight rejects (CIS-ID-2). JSON text over ``max_text_bytes`` (default 32 MiB)
    is refused before it is decoded. Raises ``ValueError`` for another provider's
    object (naming its parser), a streamed tool-call delta ("accumulate the stream
    first"), a whole message or completion (use :func:`envelopes_from_openai_chat`);
    ``TypeError`` for a non-object.
    """
    data = document(item, _ONE, max_text_bytes)
    if not isinstance(data, Mapping):
        raise ValueError(f"expected {_ONE}; got a list")
    _own(data)
    if any(key in data for key in ("choices", "tool_calls", "role")):
        raise ValueError(f"expected {_ONE}; got a message or completion (use envelopes_from_openai_chat)")
    return _call(data, run_id)


def envelopes_from_openai_chat(
    message: object, run_id: str, *, max_text_bytes: int | None = None
) -> list[ToolCallEnvelope]:
    """Every tool call of an assistant turn, in order (CIS-PRE-7, CIS-ECO-1).

    Accepts a ``ChatCompletion`` (choice 0; pass the chosen message when ``n > 1``),
    a ``ChatCompletionMessage``, a list of tool calls or one tool call, as typed
    objects, dicts or JSON text. Every call item yields an envelope: function and
    custom calls, malformed ones (for preflight to answer) and a deprecated
    ``function_call`` (no id: MISSING_TOOL_CALL_ID). A message without calls gives
    ``[]``. A completion whose choice stopped on its output limit (``finish_reason:
    "length"``) may end in a cut call: the last call gets ``arguments=None``
    (INVALID_ARGUMENTS), never run, still answered; only a completion says so, so pass
    the completion when the turn may be cut. JSON text over ``max_text_bytes``
    (default 32 MiB) is refused before it is decoded. Raises ``ValueError`` for a
    streamed chunk, a tool-call delta or a list of them, and for a completion whose
    choice has no ``finish_reason`` yet (an
    unfinished snapshot such as ``ChatCompletionStreamState.current_completion_snapshot``
    mid-stream): "accumulate the stream first"; for another provider's object or a
    list of them (naming the parser to use), a list of messages (a conversation: pass
    the assistant message), a ``tool_calls``/``choices`` value that is not a list, or
    an object of another shape; ``TypeError`` for a non-object.
    """
    data = document(message, _MANY, max_text_bytes)
    cut = False
    if isinstance(data, Mapping):
        _own(data)
        if "choices" in data:
            choices = items(get(data, "choices"), "'choices'")
            if not choices:
                return []
            choice = plain_item(choices[0])
            if (
                isinstance(choice, Mapping)
                and "finish_reason" in choice
                and get(choice, "finish_reason") is None
            ):
                raise ValueError(
                    f"this ChatCompletion has no finish_reason yet (an unfinished stream): {_ACCUMULATE}"
                )
            chosen = get(choice, "message")
            if not isinstance(chosen, Mapping):
                raise ValueError("'choices[0].message' is not an object")
            data = chosen
            cut = get(choice, "finish_reason") in _CUT
        if "tool_calls" in data or "function_call" in data or get(data, "role") == "assistant":
            calls = list(items(get(data, "tool_calls"), "'tool_calls'"))
            legacy = get(data, "function_call")
            if isinstance(legacy, Mapping):
                found = [_legacy_call(data, run_id), *(_call(plain_item(item), run_id) for item in calls)]
                return cut_last(found) if cut else found
        elif "function" in data or get(data, "type") in ("function", "custom"):
            calls = [data]
        else:
            raise ValueError(f"expected {_MANY}; got an object of another shape")
    else:
        calls = list(data)
        for raw in calls:
            item = plain_item(raw)
            if isinstance(item, Mapping):
                _own(item)
                if "role" in item or "choices" in item:
                    raise ValueError(
                        "this is a list of messages (a conversation): pass the assistant message"
                    )
    found = [_call(plain_item(item), run_id) for item in calls]
    return cut_last(found) if cut else found


#: Finish reasons after which the last call may be cut short: it is not run.
_CUT = frozenset({"length"})


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
