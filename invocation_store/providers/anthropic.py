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
from ._common import (
    cut_last,
    document,
    envelope,
    get,
    items,
    plain_item,
    report_unknown,
    safe_tag,
    serialize_object,
)
from ._formats import TranscriptFormat, TranscriptShapeError, has_block, messages
from ._results import agent_text, checked_pair, required_id
from ._sdk_types import tables
from ._shapes import ANTHROPIC, recognise, wrong_provider

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


def _call(block: object, run_id: str, request_bytes: int | None = None) -> ToolCallEnvelope:
    kind = get(block, "type")
    arguments = serialize_object(get(block, "input"), request_bytes) if kind == "tool_use" else None
    return envelope(run_id, get(block, "id"), get(block, "name"), arguments, block)


def _is_block(block: Mapping[str, Any]) -> bool:
    """True for a content block: a string ``type`` on an object no other provider claims."""
    kind = get(block, "type")
    if not isinstance(kind, str):
        return False
    shape = recognise(block)
    return shape is None or shape.provider == ANTHROPIC


def _own(data: Mapping[str, Any]) -> None:
    """Raise for another provider's shape, a stream event, or an unfinished Message."""
    shape = recognise(data)
    if shape is not None and (shape.provider != ANTHROPIC or shape.stream):
        if shape.stream and shape.provider == ANTHROPIC:
            raise ValueError(f"this is {shape.what}: {_ACCUMULATE}")
        raise wrong_provider(shape)
    if get(data, "type") == "message" and get(data, "stop_reason") is None:
        # A stream snapshot has stop_reason None, and its dump without None values
        # (``model_dump(exclude_none=True)``) has none at all: every finished Message has one.
        raise ValueError(f"this Message has no stop_reason yet (an unfinished stream): {_ACCUMULATE}")


_ACCUMULATE = (
    "accumulate the stream first (client.messages.stream(...).get_final_message()), "
    "then pass the finished Message"
)
#: Stop reasons after which the last block may be cut short: its tool_use is not run.
_CUT = frozenset({"max_tokens", "model_context_window_exceeded"})


def envelope_from_anthropic(
    block: object, run_id: str, *, request_bytes: int | None = None, max_text_bytes: int | None = None
) -> ToolCallEnvelope:
    """One Anthropic Messages ``tool_use`` content block (CIS-PRE-7, CIS-ECO-1, CIS-ECO-2).

    ``block``: a ``ToolUseBlock``, its dump or its JSON text. ``input`` is serialized
    while measured against ``request_bytes`` (default the kernel's; pass the
    boundary's ``limits.request_bytes``): past it the walk stops and preflight
    answers REQUEST_TOO_LARGE. A non-object input, an input breaking I-JSON, or a
    block of another type gets ``arguments=None`` (INVALID_ARGUMENTS). JSON text over
    ``max_text_bytes`` (default 32 MiB) is refused before it is decoded. Raises
    ``ValueError`` for another provider's object (naming its parser), a stream event,
    a whole Message (use :func:`envelopes_from_anthropic`); ``TypeError`` for a
    non-object.
    """
    data = document(block, _ONE, max_text_bytes)
    if not isinstance(data, Mapping):
        raise ValueError(f"expected {_ONE}; got a list")
    _own(data)
    if "role" in data or get(data, "type") == "message":
        raise ValueError(f"expected {_ONE}; got a Message (use envelopes_from_anthropic)")
    return _call(data, run_id, request_bytes)


def envelopes_from_anthropic(
    message: object, run_id: str, *, request_bytes: int | None = None, max_text_bytes: int | None = None
) -> list[ToolCallEnvelope]:
    """Every ``tool_use`` block of an assistant turn, in order (CIS-PRE-7, CIS-ECO-1).

    Accepts a ``Message`` or beta ``BetaMessage`` (``{"content": [...]}``), its
    content list, or one block, as typed objects, dicts or JSON text. Every block
    type the SDK declares (beta ones included: ``compaction``, ``mcp_tool_listing``,
    ...) other than ``tool_use`` is skipped: text, thinking, server-side tool blocks
    (``server_tool_use``, ``mcp_tool_use``, run by the provider); a string
    ``content`` has no calls. A block of a type this version does not know is
    reported (:func:`~._common.report_unknown`: a WARNING naming its type) and
    skipped: the turn's other calls are read. A Message that stopped on
    ``max_tokens`` (or the context window) may end in a cut ``tool_use``: that last
    block gets ``arguments=None`` (INVALID_ARGUMENTS), never run, still answered.
    Only a Message says whether it is finished: pass the Message, not its content
    list or a block, when the turn may come from a stream.
    Raises ``ValueError`` for a Message (``"type": "message"``) whose ``stop_reason``
    is missing or null (a stream snapshot or its dump), a stream event or a list of them
    ("accumulate the stream first"), another provider's object or a list of them
    (naming its parser), a block that is not an object with a type;
    ``TypeError`` for a non-object. JSON text over ``max_text_bytes`` (default 32
    MiB) is refused before it is decoded.
    """
    data = document(message, _MANY, max_text_bytes)
    cut = False
    if isinstance(data, Mapping):
        _own(data)
        if "content" in data and ("role" in data or get(data, "type") == "message" or "type" not in data):
            content = get(data, "content")
            blocks = [] if isinstance(content, str) else items(content, "'content'")
            cut = get(data, "stop_reason") in _CUT
        elif _is_block(data):
            blocks = [data]
        else:
            raise ValueError(f"expected {_MANY}; got an object of another shape")
    else:
        blocks = data
    calls: list[ToolCallEnvelope] = []
    last_is_call = False
    for index, raw in enumerate(blocks):
        block = plain_item(raw)
        if isinstance(block, Mapping):
            _own(block)
        if not isinstance(block, Mapping) or not _is_block(block):
            raise ValueError("an Anthropic content block is not an object with a block type")
        kind = get(block, "type")
        if kind != "tool_use" and kind not in tables().anthropic_blocks:
            report_unknown("Anthropic", run_id, index, f"type {safe_tag(kind)}")
        if kind == "tool_use":
            calls.append(_call(block, run_id, request_bytes))
            last_is_call = index == len(blocks) - 1
    return cut_last(calls) if cut and last_is_call else calls


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
