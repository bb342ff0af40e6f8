"""Envelopes from real provider formats (CIS-PRE-7).

Each function takes one provider item, decoded from JSON into Python objects
(``dict``/``list``/``str``/...; for an SDK object pass ``item.model_dump()`` or the
provider's equivalent), and the harness's run id, and returns a
:class:`~invocation_store.kernel.ToolCallEnvelope`. They are pure and total: hostile
input never raises, it produces envelope fields that preflight rejects with the
right code:

- an id that is absent, ``null``, not a string or empty -> ``tool_call_id=None``
  -> MISSING_TOOL_CALL_ID (CIS-ID-2); any other string is kept byte for byte, so
  padding or control characters become UNSAFE_TOOL_CALL_ID, never a trimmed id;
- arguments that are not a JSON-object text (or, for Anthropic and Gemini, an object
  that cannot be serialized) -> ``arguments=None`` -> INVALID_ARGUMENTS;
- a name that is not a string -> ``tool_name=None`` -> UNAUTHORIZED.

No id is ever generated, normalised or replaced (CIS-ID-4, CIS-ID-6). Object-valued
arguments (Anthropic ``input``, Gemini ``args``) are serialized once, here,
deterministically: ``json.dumps(sort_keys=True, ensure_ascii=False,
separators=(",", ":"), allow_nan=False)``; that text is the request the record keeps.

The ``envelopes_from_*`` helpers extract every call of one assistant turn, in the
provider's order, and never drop a malformed call item (each tool call id needs an
answer, so a bad item becomes an envelope that preflight rejects); items of other
kinds (text, reasoning, server-side tools) are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from .kernel import ToolCallEnvelope

__all__ = [
    "envelope_from_anthropic",
    "envelope_from_gemini",
    "envelope_from_openai_chat",
    "envelope_from_openai_responses",
    "envelopes_from_anthropic",
    "envelopes_from_gemini",
    "envelopes_from_openai_chat",
    "envelopes_from_openai_responses",
]


def _get(obj: object, key: str) -> object:
    """``obj[key]`` if ``obj`` is a mapping holding it, else None. Never raises."""
    if not isinstance(obj, Mapping):
        return None
    try:
        return obj.get(key)
    except Exception:  # noqa: BLE001 - a hostile Mapping must not make a parser raise
        return None


def _id(value: object) -> str | None:
    """The id exactly as supplied, or None when absent, not a string or empty (CIS-ID-2)."""
    return value if isinstance(value, str) and value != "" else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _seq(value: object) -> Sequence[object]:
    """``value`` as a list of items if it is a JSON array (list/tuple), else empty."""
    return value if isinstance(value, list | tuple) else ()


def _serialize_object(value: object) -> str | None:
    """Deterministic JSON text of an object-valued argument set, or None (CIS-PRE-7)."""
    if not isinstance(value, Mapping):
        return None
    try:
        return json.dumps(
            dict(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
        )
    except Exception:  # noqa: BLE001 - unserializable input is INVALID_ARGUMENTS, never a raise
        return None


def _envelope(
    run_id: str, tool_call_id: object, tool_name: object, arguments: str | None
) -> ToolCallEnvelope:
    return ToolCallEnvelope(
        run_id=run_id, tool_call_id=_id(tool_call_id), tool_name=_str(tool_name), arguments=arguments
    )


# ---------------------------------------------------------------------------
# OpenAI Chat Completions


def envelope_from_openai_chat(item: object, run_id: str) -> ToolCallEnvelope:
    """One OpenAI Chat Completions ``message.tool_calls[]`` item (CIS-PRE-7).

    Shape: ``{"id": "call_...", "type": "function", "function": {"name": ...,
    "arguments": "<JSON object text>"}}``. ``arguments`` is kept exactly as the model
    wrote it (CIS-REC-2). An item whose ``type`` is present and not ``"function"``
    (e.g. a custom tool call with free-form input) gets ``arguments=None``.
    """
    kind = _get(item, "type")
    function = _get(item, "function")
    arguments = _str(_get(function, "arguments")) if kind in (None, "function") else None
    return _envelope(run_id, _get(item, "id"), _get(function, "name"), arguments)


def envelopes_from_openai_chat(message: object, run_id: str) -> list[ToolCallEnvelope]:
    """Every tool call of an assistant message, or of a chat completion's first choice.

    Accepts the assistant message ``{"role": "assistant", "tool_calls": [...]}`` or a
    whole completion ``{"choices": [{"message": {...}}, ...]}`` (choice 0; pass the
    chosen message yourself when ``n > 1``). Anything else gives ``[]``.
    """
    if _get(message, "choices") is not None:
        choices = _seq(_get(message, "choices"))
        message = _get(choices[0], "message") if choices else None
    return [envelope_from_openai_chat(item, run_id) for item in _seq(_get(message, "tool_calls"))]


# ---------------------------------------------------------------------------
# OpenAI Responses


def envelope_from_openai_responses(item: object, run_id: str) -> ToolCallEnvelope:
    """One OpenAI Responses ``function_call`` output item (CIS-PRE-7).

    Shape: ``{"type": "function_call", "id": "fc_...", "call_id": "call_...",
    "name": ..., "arguments": "<JSON object text>"}``. The tool_call_id is
    ``call_id`` (what the ``function_call_output`` answer must echo), never the item
    ``id``. An item of another type gets ``arguments=None``.
    """
    kind = _get(item, "type")
    arguments = _str(_get(item, "arguments")) if kind == "function_call" else None
    return _envelope(run_id, _get(item, "call_id"), _get(item, "name"), arguments)


def envelopes_from_openai_responses(response: object, run_id: str) -> list[ToolCallEnvelope]:
    """Every ``function_call`` item of a Responses ``{"output": [...]}`` (or of the list itself).

    Other output items (``message``, ``reasoning``, built-in tool calls) are skipped.
    """
    items = _seq(response) if isinstance(response, list | tuple) else _seq(_get(response, "output"))
    calls = [item for item in items if _get(item, "type") == "function_call"]
    return [envelope_from_openai_responses(item, run_id) for item in calls]


# ---------------------------------------------------------------------------
# Anthropic Messages


def envelope_from_anthropic(block: object, run_id: str) -> ToolCallEnvelope:
    """One Anthropic Messages ``tool_use`` content block (CIS-PRE-7).

    Shape: ``{"type": "tool_use", "id": "toolu_...", "name": ..., "input": {...}}``.
    ``input`` is an object: it is serialized once, deterministically (sorted keys,
    compact, UTF-8 kept, no NaN); a non-object or unserializable input gets
    ``arguments=None``, as does a block of another type.
    """
    kind = _get(block, "type")
    arguments = _serialize_object(_get(block, "input")) if kind == "tool_use" else None
    return _envelope(run_id, _get(block, "id"), _get(block, "name"), arguments)


def envelopes_from_anthropic(message: object, run_id: str) -> list[ToolCallEnvelope]:
    """Every ``tool_use`` block of a Message ``{"content": [...]}`` (or of the block list).

    Text, thinking and server-side tool blocks (``server_tool_use``) are skipped.
    """
    blocks = _seq(message) if isinstance(message, list | tuple) else _seq(_get(message, "content"))
    return [envelope_from_anthropic(block, run_id) for block in blocks if _get(block, "type") == "tool_use"]


# ---------------------------------------------------------------------------
# Google Gemini


def _function_call(part: object) -> object:
    """The FunctionCall of a part (``functionCall``, or the SDK's ``function_call``)."""
    call = _get(part, "functionCall")
    return call if call is not None else _get(part, "function_call")


def envelope_from_gemini(part: object, run_id: str) -> ToolCallEnvelope:
    """One Gemini ``functionCall`` part (CIS-PRE-7).

    Shape: ``{"functionCall": {"id"?: ..., "name": ..., "args"?: {...}}}`` (the
    Python SDK's ``function_call`` spelling is accepted too). The ``id`` is optional
    in Gemini's API: an absent or empty id gives ``tool_call_id=None``, which
    preflight rejects with MISSING_TOOL_CALL_ID; an id is never generated. ``args``
    is a protobuf Struct, which JSON may omit when empty: absent or ``null`` args are
    the empty object ``{}``; any other non-object gets ``arguments=None``. Object
    args are serialized once, deterministically.
    """
    call = _function_call(part)
    args = _get(call, "args")
    arguments = "{}" if args is None and isinstance(call, Mapping) else _serialize_object(args)
    return _envelope(run_id, _get(call, "id"), _get(call, "name"), arguments)


def envelopes_from_gemini(response: object, run_id: str) -> list[ToolCallEnvelope]:
    """Every ``functionCall`` part of a model turn.

    Accepts a ``GenerateContentResponse`` ``{"candidates": [{"content": {...}}]}``
    (candidate 0), a ``Content`` ``{"role": "model", "parts": [...]}`` or a list of
    parts. Parts without a function call (text, thoughts) are skipped.
    """
    if isinstance(response, list | tuple):
        parts = _seq(response)
    else:
        content = response
        if _get(response, "candidates") is not None:
            candidates = _seq(_get(response, "candidates"))
            content = _get(candidates[0], "content") if candidates else None
        parts = _seq(_get(content, "parts"))
    return [envelope_from_gemini(part, run_id) for part in parts if _function_call(part) is not None]
