"""Google Gemini: ``functionCall`` parts in, ``functionResponse`` parts out (CIS-PRE-7, CIS-ECO-1..3).

A call is a part ``{"functionCall": {"id"?: ..., "name": ..., "args"?: {...}}}``
(the Python SDK spells it ``function_call``). The ``id`` is optional in Gemini's
API: an absent or empty id gives ``tool_call_id=None`` (MISSING_TOOL_CALL_ID); an
id is never generated. ``args`` is a protobuf Struct, which JSON may omit when
empty: absent or ``null`` args are ``{}``; object args are serialized once,
deterministically, and refused if anything inside breaks I-JSON (CIS-ECO-2). The
answer is a part ``{"functionResponse": {"id"?: <the call's id>, "name": <the
call's tool name>, "response": {"output": ...} | {"error": ...}}}``: Gemini matches
a response by name (and id when there is one).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..kernel import DuplicateMembers, ToolCallEnvelope
from ._common import document, envelope, get, items, plain_item, report_unknown, safe_tag, serialize_object
from ._formats import TranscriptFormat, TranscriptShapeError
from ._results import agent_payload, checked_pair
from ._sdk_types import tables
from ._shapes import GEMINI, recognise, wrong_provider

if TYPE_CHECKING:
    from ..boundary import BoundaryResult

__all__ = [
    "FORMAT",
    "envelope_from_gemini",
    "envelopes_from_gemini",
    "gemini_function_response",
    "gemini_function_responses_content",
]

_ONE = "one Gemini part with a function call, or a FunctionCall (typed, its dict or JSON text)"
_MANY = (
    "a GenerateContentResponse, a Content, a list of parts or FunctionCalls, or one part "
    "(typed objects, their dicts or JSON text)"
)


def _function_call(part: object) -> object:
    """The FunctionCall of a part (``functionCall``, or the SDK's ``function_call``)."""
    call = get(part, "functionCall")
    return call if call is not None else get(part, "function_call")


def _is_function_call(data: Mapping[str, Any]) -> bool:
    """A bare FunctionCall object (``response.function_calls[i]``): ``name`` and only
    FunctionCall fields, no ``type`` (which every OpenAI and Anthropic call has)."""
    return "name" in data and set(data.keys()) <= tables().gemini_call_fields


def _is_part(data: Mapping[str, Any]) -> bool:
    """A Part: no ``type`` tag, and at least one Part field (the SDK's ``Part`` fields)."""
    return "type" not in data and bool(set(data.keys()) & tables().gemini_part_fields)


def _is_unknown_part(data: object) -> bool:
    """An object without a ``type`` tag, none of whose fields this version knows: a part of
    a newer kind (``{"audioTranscription": ...}`` before the SDK named it), or an empty one."""
    return (
        isinstance(data, Mapping)
        and "type" not in data
        and all(isinstance(key, str) for key in data)
        and recognise(data) is None
        and not _is_part(data)
        and not _is_function_call(data)
    )


def _unfinished(call: object) -> bool:
    """A streamed FunctionCall whose arguments are still arriving (``partial_args`` or
    ``will_continue``)."""
    partial = get(call, "partial_args")
    if partial is None:
        partial = get(call, "partialArgs")
    more = get(call, "will_continue")
    if more is None:
        more = get(call, "willContinue")
    return bool(partial) or more is True


def _call(part: object, run_id: str, request_bytes: int | None = None) -> ToolCallEnvelope:
    call = part if isinstance(part, Mapping) and _is_function_call(part) else _function_call(part)
    if _unfinished(call):
        raise ValueError(f"this FunctionCall is unfinished (partial_args / will_continue): {_ACCUMULATE}")
    args = get(call, "args")
    arguments = "{}" if args is None and isinstance(call, Mapping) else serialize_object(args, request_bytes)
    if isinstance(call, DuplicateMembers):
        arguments = None
    return envelope(run_id, get(call, "id"), get(call, "name"), arguments, part)


_ACCUMULATE = (
    "accumulate the stream first (join each call's partial_args until will_continue is false), "
    "then pass the finished FunctionCall"
)


def _own(data: Mapping[str, Any]) -> None:
    """Raise for another provider's shape (naming its parser)."""
    shape = recognise(data)
    if shape is not None and shape.provider != GEMINI:
        raise wrong_provider(shape)


def envelope_from_gemini(
    part: object, run_id: str, *, request_bytes: int | None = None, max_text_bytes: int | None = None
) -> ToolCallEnvelope:
    """One Gemini ``functionCall`` part, or a bare ``FunctionCall`` (CIS-PRE-7, CIS-ECO-1, CIS-ECO-2).

    ``args`` are serialized while measured against ``request_bytes`` (default the
    kernel's; pass the boundary's ``limits.request_bytes``): past it the walk stops
    and preflight answers REQUEST_TOO_LARGE. Args that are not an object, or break
    I-JSON, get ``arguments=None`` (INVALID_ARGUMENTS). JSON text over
    ``max_text_bytes`` (default 32 MiB) is refused before it is decoded. Raises
    ``ValueError`` for an unfinished streamed call (``partial_args``/``will_continue``: "accumulate the
    stream first"), another provider's object (naming its parser), a whole response
    or Content (use :func:`envelopes_from_gemini`); ``TypeError`` for a non-object.
    """
    data = document(part, _ONE, max_text_bytes)
    if not isinstance(data, Mapping):
        raise ValueError(f"expected {_ONE}; got a list")
    _own(data)
    if "candidates" in data or "parts" in data or "contents" in data:
        raise ValueError(f"expected {_ONE}; got a response or Content (use envelopes_from_gemini)")
    return _call(data, run_id, request_bytes)


def _parts_of_response(data: Mapping[str, Any]) -> Sequence[object]:
    candidates = items(get(data, "candidates"), "'candidates'")
    if not candidates:
        return ()
    content = get(plain_item(candidates[0]), "content")
    if content is None:
        return ()  # a candidate blocked by safety settings has no content
    if not isinstance(content, Mapping):
        raise ValueError("'candidates[0].content' is not an object")
    return items(get(content, "parts"), "'parts'")


def envelopes_from_gemini(
    response: object, run_id: str, *, request_bytes: int | None = None, max_text_bytes: int | None = None
) -> list[ToolCallEnvelope]:
    """Every function call of a model turn, in order (CIS-PRE-7, CIS-ECO-1).

    Accepts a ``GenerateContentResponse`` (candidate 0), a list of them (the chunks
    of ``generate_content_stream``, read in order: each chunk's calls are whole
    unless marked unfinished), a ``Content`` (``{"role": "model", "parts":
    [...]}``), a list of parts or of ``FunctionCall`` objects
    (``response.function_calls``), or one part, as typed objects, dicts or JSON text.
    Parts without a function call (text, thoughts) are skipped. A part none of whose
    fields this version knows (a newer kind of part), inside a response or Content or
    beside known parts, is reported (:func:`~._common.report_unknown`: a WARNING
    naming its fields) and skipped: the turn's function calls are still read. JSON
    text over ``max_text_bytes`` (default 32 MiB) is refused before it is decoded.
    Raises ``ValueError`` for an unfinished streamed call (``partial_args`` /
    ``will_continue``: "accumulate the stream first"), a list of Contents or a
    request's ``contents`` (a conversation: pass the model's turn), another
    provider's object or a list of them (naming its parser), a part that is not an
    object, and a list none of whose items is a known Gemini part or FunctionCall;
    ``TypeError`` for a non-object.
    """
    data = document(response, _MANY, max_text_bytes)
    if isinstance(data, Mapping):
        _own(data)
        if "contents" in data:
            raise ValueError("this is a Gemini request's contents (a conversation): pass the model's Content")
        if "candidates" in data:
            return _envelopes(_parts_of_response(data), run_id, request_bytes, trusted=True)
        if "parts" in data:
            return _envelopes(items(get(data, "parts"), "'parts'"), run_id, request_bytes, trusted=True)
        if not (_is_part(data) or _is_function_call(data)):
            raise ValueError(f"expected {_MANY}; got an object of another shape")
        parts: Sequence[object] = [data]
    else:
        plain_parts = [plain_item(raw) for raw in data]
        for part in plain_parts:
            if isinstance(part, Mapping):
                _own(part)
        if plain_parts and all(isinstance(p, Mapping) and "candidates" in p for p in plain_parts):
            chunks: list[ToolCallEnvelope] = []
            for chunk in plain_parts:
                assert isinstance(chunk, Mapping)
                chunks.extend(_envelopes(_parts_of_response(chunk), run_id, request_bytes, trusted=True))
            return chunks
        if any(isinstance(p, Mapping) and ("parts" in p or "candidates" in p) for p in plain_parts):
            raise ValueError("this is a list of Contents (a conversation): pass the model's Content")
        parts = plain_parts
        known = any(isinstance(p, Mapping) and (_is_part(p) or _is_function_call(p)) for p in plain_parts)
        return _envelopes(parts, run_id, request_bytes, trusted=known)
    return _envelopes(parts, run_id, request_bytes, trusted=False)


def _envelopes(
    parts: Sequence[object], run_id: str, request_bytes: int | None, *, trusted: bool
) -> list[ToolCallEnvelope]:
    """The calls of ``parts``; ``trusted``: the parts are known to be Gemini's (a response's
    or Content's, or beside a known part), so a part of an unknown kind is reported and
    skipped rather than refused."""
    calls = []
    for position, raw in enumerate(parts):
        part = plain_item(raw)
        if not isinstance(part, Mapping) or not (_is_part(part) or _is_function_call(part)):
            if trusted and _is_unknown_part(part):
                assert isinstance(part, Mapping)
                names = ", ".join(sorted(safe_tag(key) for key in part)[:4]) or "no fields"
                report_unknown("Gemini", run_id, position, f"a part with {names}")
                continue
            raise ValueError("a Gemini part is not an object with a Part field")
        _own(part)
        if _is_function_call(part) or _function_call(part) is not None:
            calls.append(_call(part, run_id, request_bytes))
    return calls


def gemini_function_response(envelope: ToolCallEnvelope, result: BoundaryResult) -> dict[str, Any]:
    """The ``functionResponse`` part answering one call (CIS-ECO-3).

    ``{"functionResponse": {"id": <the envelope's original id, omitted when it has
    none>, "name": <the envelope's tool name>, "response": {"output": <agent
    payload>}}}`` on success, ``{"error": <code and fixed message>}`` on failure
    (Gemini's documented ``output``/``error`` keys). Raises ``ValueError`` when the
    call has no tool name (Gemini matches responses by name).
    """
    envelope, result = checked_pair(envelope, result)
    name = envelope.tool_name
    if not isinstance(name, str) or name == "":
        raise ValueError("Gemini matches a function response by its tool name, and this call has none")
    payload = agent_payload(result)
    response: dict[str, Any] = {"output": payload} if result.ok else {"error": payload}
    function_response: dict[str, Any] = {"name": str.__str__(name), "response": response}
    if isinstance(envelope.tool_call_id, str) and envelope.tool_call_id != "":
        function_response = {"id": str.__str__(envelope.tool_call_id), **function_response}
    return {"functionResponse": function_response}


def gemini_function_responses_content(
    pairs: Iterable[tuple[ToolCallEnvelope, BoundaryResult]],
) -> dict[str, Any]:
    """The ``Content`` answering every call of one model turn, in order (CIS-ECO-3)."""
    return {"role": "user", "parts": [gemini_function_response(e, r) for e, r in pairs]}


# -- transcripts ---------------------------------------------------------------------------


def _detect(transcript: Mapping[str, Any]) -> bool:
    return isinstance(transcript.get("contents"), list) or isinstance(transcript.get("candidates"), list)


def _call_items(transcript: Mapping[str, Any]) -> Iterator[object]:
    contents = transcript.get("contents")
    if not isinstance(contents, list):
        candidates = transcript.get("candidates")
        contents = (
            [c.get("content") if isinstance(c, dict) else None for c in candidates[:1]]
            if isinstance(candidates, list)
            else None
        )
    if contents is None:
        raise TranscriptShapeError("a gemini transcript needs a 'contents' (or 'candidates') list")
    for content in contents:
        parts = content.get("parts") if isinstance(content, dict) else None
        if not isinstance(parts, list):
            continue
        for part in parts:
            if isinstance(part, dict) and ("functionCall" in part or "function_call" in part):
                yield part


#: ``{"contents": [...]}`` whose model turns hold ``functionCall`` parts, or a response.
FORMAT = TranscriptFormat(name="gemini", detect=_detect, call_items=_call_items, envelope=_call)
