"""Anthropic Messages: ``tool_use`` blocks in, ``tool_result`` blocks out (CIS-PRE-7, CIS-ECO-1..3).

A call is a content block ``{"type": "tool_use", "id": "toolu_...", "name": ...,
"input": {...}}``. ``input`` is an object: it is serialized once, deterministically
(sorted keys, compact, UTF-8 kept), and refused (INVALID_ARGUMENTS) if anything
inside breaks I-JSON: the rule string arguments meet (CIS-ECO-2). The answer is a
block ``{"type": "tool_result", "tool_use_id": <the call's id>, "content": <agent
text>, "is_error": <not ok>}``, sent in a ``user`` message.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..kernel import ToolCallEnvelope
from ._common import document, envelope, get, items, plain_item, serialize_object
from ._formats import TranscriptFormat, TranscriptShapeError, has_block, messages
from ._results import agent_text, checked_pair, required_id

if TYPE_CHECKING:
    from ..boundary import BoundaryResult

__all__ = [
    "FORMAT",
    "anthropic_tool_result",
    "anthropic_tool_results_message",
    "envelope_from_anthropic",
    "envelopes_from_anthropic",
]

_ONE = "one Anthropic tool_use block (a ToolUseBlock, its dict or JSON text)"
_MANY = "a Message, its content list or one content block (typed objects, their dicts or JSON text)"


def _call(block: object, run_id: str) -> ToolCallEnvelope:
    kind = get(block, "type")
    arguments = serialize_object(get(block, "input")) if kind == "tool_use" else None
    return envelope(run_id, get(block, "id"), get(block, "name"), arguments, block)


def _is_block(block: Mapping[str, Any]) -> bool:
    """True for a content block: a string ``type`` that is no OpenAI item type
    (``function``, ``function_call``, ``message``, ``*_call``)."""
    kind = get(block, "type")
    return isinstance(kind, str) and kind not in ("function", "message") and not kind.endswith("_call")


def envelope_from_anthropic(block: object, run_id: str) -> ToolCallEnvelope:
    """One Anthropic Messages ``tool_use`` content block (CIS-PRE-7, CIS-ECO-1, CIS-ECO-2).

    ``block``: a ``ToolUseBlock``, its dump or its JSON text. A non-object input, an
    input breaking I-JSON anywhere inside, or a block of another type gets
    ``arguments=None`` (INVALID_ARGUMENTS). Raises ``TypeError``/``ValueError`` for
    anything that is not one block object (a whole Message included: use
    :func:`envelopes_from_anthropic`).
    """
    data = document(block, _ONE)
    if not isinstance(data, Mapping):
        raise ValueError(f"expected {_ONE}; got a list")
    if "role" in data or get(data, "type") == "message":
        raise ValueError(f"expected {_ONE}; got a Message (use envelopes_from_anthropic)")
    return _call(data, run_id)


def envelopes_from_anthropic(message: object, run_id: str) -> list[ToolCallEnvelope]:
    """Every ``tool_use`` block of an assistant turn, in order (CIS-PRE-7, CIS-ECO-1).

    Accepts a ``Message`` (``{"content": [...]}``), its content list, or one block,
    as typed objects, dicts or JSON text. Text, thinking and server-side tool blocks
    (``server_tool_use``) are skipped; a string ``content`` has no calls. Raises
    ``ValueError`` for a block that is not an object or an object of another shape,
    ``TypeError`` for a non-object.
    """
    data = document(message, _MANY)
    if isinstance(data, Mapping):
        if {"tool_calls", "choices", "output", "candidates", "parts"} & data.keys():
            raise ValueError(f"expected {_MANY}; got an object of another API")
        if "content" in data and ("role" in data or get(data, "type") == "message" or "type" not in data):
            content = get(data, "content")
            blocks = [] if isinstance(content, str) else items(content, "'content'")
        elif _is_block(data):
            blocks = [data]
        else:
            raise ValueError(f"expected {_MANY}; got an object of another shape")
    else:
        blocks = data
    calls = []
    for raw in blocks:
        block = plain_item(raw)
        if not isinstance(block, Mapping) or not _is_block(block):
            raise ValueError("an Anthropic content block is not an object with a block type")
        if get(block, "type") == "tool_use":
            calls.append(_call(block, run_id))
    return calls


def anthropic_tool_result(envelope: ToolCallEnvelope, result: BoundaryResult) -> dict[str, Any]:
    """The ``tool_result`` block answering one call (CIS-ECO-3).

    ``{"type": "tool_result", "tool_use_id": <the envelope's original id>,
    "content": <agent text>, "is_error": not result.ok}``. Raises ``ValueError``
    when the call has no id.
    """
    envelope, result = checked_pair(envelope, result)
    return {
        "type": "tool_result",
        "tool_use_id": required_id(envelope, "Anthropic Messages"),
        "content": agent_text(result),
        "is_error": not result.ok,
    }


def anthropic_tool_results_message(
    pairs: Iterable[tuple[ToolCallEnvelope, BoundaryResult]],
) -> dict[str, Any]:
    """The ``user`` message answering every call of one assistant turn, in order (CIS-ECO-3).

    Anthropic requires all results of a turn in the next user message.
    """
    return {"role": "user", "content": [anthropic_tool_result(e, r) for e, r in pairs]}


# -- transcripts ---------------------------------------------------------------------------


def _detect(transcript: Mapping[str, Any]) -> bool:
    if any(has_block(m, "tool_use") or has_block(m, "tool_result") for m in messages(transcript)):
        return True
    return transcript.get("type") == "message" and has_block(transcript, "tool_use")


def _call_items(transcript: Mapping[str, Any]) -> Iterator[object]:
    found = messages(transcript)
    if not found and transcript.get("type") == "message":
        found = [transcript]
    if not found:
        raise TranscriptShapeError("an anthropic transcript needs a 'messages' list")
    for message in found:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                yield block


#: ``{"messages": [...]}`` whose assistant ``content`` holds ``tool_use`` blocks, or one Message.
FORMAT = TranscriptFormat(name="anthropic", detect=_detect, call_items=_call_items, envelope=_call)
