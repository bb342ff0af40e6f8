"""OpenAI Responses: ``function_call`` items in, ``function_call_output`` items out.

CIS-PRE-7, CIS-ECO-1, CIS-ECO-3.

A call is an output item ``{"type": "function_call", "id": "fc_...", "call_id":
"call_...", "name": ..., "arguments": "<JSON object text>"}``. The tool_call_id is
``call_id`` (what the answer must echo), never the item ``id``. The answer is
``{"type": "function_call_output", "call_id": <the call's call_id>, "output":
<agent text>}``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..kernel import ToolCallEnvelope
from ._common import document, envelope, get, items, plain_item, text
from ._formats import TranscriptFormat, TranscriptShapeError
from ._results import agent_text, checked_pair, required_id

if TYPE_CHECKING:
    from ..boundary import BoundaryResult

__all__ = [
    "FORMAT",
    "envelope_from_openai_responses",
    "envelopes_from_openai_responses",
    "openai_responses_function_call_output",
]

_ONE = "one Responses function_call item (a ResponseFunctionToolCall, its dict or JSON text)"
_MANY = "a Response, its output list or one output item (typed objects, their dicts or JSON text)"


def _call(item: object, run_id: str) -> ToolCallEnvelope:
    kind = get(item, "type")
    arguments = text(get(item, "arguments")) if kind == "function_call" else None
    return envelope(run_id, get(item, "call_id"), get(item, "name"), arguments, item)


#: Output and input item types of the Responses API that are not ``*_call`` items.
_ITEM_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "function_call_output",
        "custom_tool_call_output",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "compaction",
        "item_reference",
    }
)


def _is_item(item: Mapping[str, Any]) -> bool:
    """True for a Responses item: its ``type`` is a Responses type (an Anthropic Message,
    whose type is ``message`` too, has a ``stop_reason``)."""
    kind = get(item, "type")
    if not isinstance(kind, str) or "stop_reason" in item:
        return False
    return kind in _ITEM_TYPES or kind.endswith(("_call", "_call_output"))


def envelope_from_openai_responses(item: object, run_id: str) -> ToolCallEnvelope:
    """One OpenAI Responses ``function_call`` output item (CIS-PRE-7, CIS-ECO-1).

    ``item``: a ``ResponseFunctionToolCall``, its dump or its JSON text. An item of
    another type gets ``arguments=None`` (INVALID_ARGUMENTS). Raises
    ``TypeError``/``ValueError`` for anything that is not one item object (a whole
    Response included: use :func:`envelopes_from_openai_responses`).
    """
    data = document(item, _ONE)
    if not isinstance(data, Mapping):
        raise ValueError(f"expected {_ONE}; got a list")
    if "output" in data or get(data, "object") == "response":
        raise ValueError(f"expected {_ONE}; got a Response (use envelopes_from_openai_responses)")
    return _call(data, run_id)


def envelopes_from_openai_responses(response: object, run_id: str) -> list[ToolCallEnvelope]:
    """Every ``function_call`` item of a Response, in order (CIS-PRE-7, CIS-ECO-1).

    Accepts a ``Response`` (``{"output": [...]}``), its ``output`` list, or one output
    item, as typed objects, dicts or JSON text. Other items (``message``,
    ``reasoning``, built-in tool calls) are skipped. Raises ``ValueError`` for an
    ``output`` that is not a list, an item that is not an object, or an object of
    another shape; ``TypeError`` for a non-object.
    """
    data = document(response, _MANY)
    if isinstance(data, Mapping):
        if "output" in data or get(data, "object") == "response":
            found = items(get(data, "output"), "'output'")
        elif _is_item(data):
            found = [data]
        else:
            raise ValueError(f"expected {_MANY}; got an object of another shape")
    else:
        found = data
    calls = []
    for raw in found:
        item = plain_item(raw)
        if not isinstance(item, Mapping) or not _is_item(item):
            raise ValueError("a Responses output item is not an object with a Responses item type")
        if get(item, "type") == "function_call":
            calls.append(_call(item, run_id))
    return calls


def openai_responses_function_call_output(
    envelope: ToolCallEnvelope, result: BoundaryResult
) -> dict[str, Any]:
    """The ``function_call_output`` input item answering one call (CIS-ECO-3).

    ``{"type": "function_call_output", "call_id": <the envelope's original id>,
    "output": <agent text>}``. Raises ``ValueError`` when the call has no id.
    """
    envelope, result = checked_pair(envelope, result)
    return {
        "type": "function_call_output",
        "call_id": required_id(envelope, "OpenAI Responses"),
        "output": agent_text(result),
    }


# -- transcripts ---------------------------------------------------------------------------


def _detect(transcript: Mapping[str, Any]) -> bool:
    if transcript.get("object") == "response":
        return True
    for key in ("input", "output"):
        found = transcript.get(key)
        if isinstance(found, list) and any(
            isinstance(item, dict) and item.get("type") in ("function_call", "function_call_output")
            for item in found
        ):
            return True
    return False


def _call_items(transcript: Mapping[str, Any]) -> Iterator[object]:
    lists = [transcript[key] for key in ("input", "output") if isinstance(transcript.get(key), list)]
    if not lists:
        raise TranscriptShapeError("an openai-responses transcript needs an 'input' or 'output' list")
    for found in lists:
        for item in found:
            if isinstance(item, dict) and item.get("type") == "function_call":
                yield item


#: ``{"input": [...]}`` and/or ``{"output": [...]}`` holding ``function_call`` items.
FORMAT = TranscriptFormat(name="openai-responses", detect=_detect, call_items=_call_items, envelope=_call)
