"""OpenAI Responses: ``function_call`` items in, ``function_call_output`` items out.

CIS-PRE-7, CIS-ECO-1, CIS-ECO-3.

A call is an output item ``{"type": "function_call", "id": "fc_...", "call_id":
"call_...", "name": ..., "arguments": "<JSON object text>"}``. The tool_call_id is
``call_id`` (what the answer must echo), never the item ``id``. The answer is
``{"type": "function_call_output", "call_id": <the call's call_id>, "output":
<agent text>}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..kernel import ToolCallEnvelope
from ._common import document, envelope, get, items, plain_item, serialize_object, text
from ._formats import TranscriptFormat, TranscriptShapeError
from ._results import agent_text, checked_pair, required_id
from ._shapes import RESPONSES, recognise, wrong_provider

if TYPE_CHECKING:
    from ..boundary import BoundaryResult

__all__ = [
    "FORMAT",
    "envelope_from_openai_responses",
    "envelopes_from_openai_responses",
    "openai_responses_call_outputs",
    "openai_responses_call_types",
    "openai_responses_function_call_output",
]

_ONE = "one Responses function_call item (a ResponseFunctionToolCall, its dict or JSON text)"
_MANY = "a Response, its output list or one output item (typed objects, their dicts or JSON text)"


#: Tool calls the provider runs itself: nothing for the harness to answer, skipped.
_SERVER_RUN = frozenset(
    {"file_search_call", "web_search_call", "image_generation_call", "code_interpreter_call", "mcp_call"}
)
#: Built-in tools the client (the harness) runs, and the field holding each call's input
#: object. The envelope's tool name is the item type: a harness that registers a tool by
#: that name runs the call through the boundary; otherwise it is UNAUTHORIZED, answered.
CLIENT_RUN_CALLS: dict[str, str] = {
    "local_shell_call": "action",
    "shell_call": "action",
    "apply_patch_call": "operation",
    "computer_call": "action",
    "tool_search_call": "arguments",
}
#: Items that are no call (messages, reasoning, outputs, MCP listings and approvals).
_NOT_CALLS = frozenset(
    {
        "message", "reasoning", "compaction", "item_reference", "program", "program_output",
        "additional_tools", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response",
    }
)  # fmt: skip


def call_kind(item: Mapping[str, Any]) -> str | None:
    """The item's type when it is a call the harness must answer, else None.

    ``function_call``, ``custom_tool_call``, the client-run built-in calls
    (:data:`CLIENT_RUN_CALLS`; ``tool_search_call`` only with ``"execution":
    "client"``), and any item of a type this version does not know that carries a
    ``call_id`` or whose type ends in ``_call`` (the API's naming of calls).
    """
    kind = get(item, "type")
    if not isinstance(kind, str) or kind in _NOT_CALLS or kind in _SERVER_RUN:
        return None
    if kind == "tool_search_call" and get(item, "execution") != "client":
        return None
    if kind in ("function_call", "custom_tool_call") or kind in CLIENT_RUN_CALLS:
        return kind
    if kind.endswith("_output"):
        return None
    return kind if kind.endswith("_call") or "call_id" in item else None


def _call(item: object, run_id: str, request_bytes: int | None = None) -> ToolCallEnvelope:
    kind = text(get(item, "type"))
    call_id = get(item, "call_id")
    if kind == "function_call":
        arguments = text(get(item, "arguments"))
    elif kind in CLIENT_RUN_CALLS:
        arguments = serialize_object(get(item, CLIENT_RUN_CALLS[kind]), request_bytes)
        return envelope(
            run_id, call_id, kind, None if get(item, "status") == "incomplete" else arguments, item
        )
    else:
        # custom_tool_call (free-form input, no JSON object), an item of an unknown type,
        # or no call at all: INVALID_ARGUMENTS, answered by its call_id.
        arguments = None
    if get(item, "status") == "incomplete":
        arguments = None  # cut by the output limit: its arguments may be cut too
    name = get(item, "name")
    return envelope(
        run_id, call_id, name if name is not None or kind == "function_call" else kind, arguments, item
    )


def _is_item(item: Mapping[str, Any]) -> bool:
    """True for a Responses item: a string ``type`` (one this version does not know
    included: it is reported by :func:`call_kind`, never a reason to drop the turn),
    on an object no other provider claims (an Anthropic Message, whose type is
    ``message`` too, has a ``stop_reason``)."""
    kind = get(item, "type")
    if not isinstance(kind, str) or "stop_reason" in item:
        return False
    shape = recognise(item)
    return shape is None or shape.provider == RESPONSES


def _own(data: Mapping[str, Any]) -> None:
    """Raise for another provider's shape, a stream event, or an unfinished item."""
    shape = recognise(data)
    if shape is not None and (shape.provider != RESPONSES or shape.stream):
        if shape.stream and shape.provider == RESPONSES:
            raise ValueError(f"this is {shape.what}: {_ACCUMULATE}")
        raise wrong_provider(shape)
    if get(data, "status") == "in_progress" and ("call_id" in data or get(data, "object") == "response"):
        raise ValueError(f"this call or Response is unfinished (status in_progress): {_ACCUMULATE}")


_ACCUMULATE = (
    "accumulate the stream first (client.responses.stream(...).get_final_response(), or the "
    "response.completed event's response), then pass the Response"
)


def envelope_from_openai_responses(
    item: object, run_id: str, *, request_bytes: int | None = None
) -> ToolCallEnvelope:
    """One OpenAI Responses call item (CIS-PRE-7, CIS-ECO-1).

    ``item``: a ``ResponseFunctionToolCall`` (or another call item, see
    :func:`envelopes_from_openai_responses`), its dump or its JSON text. Raises
    ``ValueError`` for another provider's object (naming its parser), a stream event
    or an unfinished item ("accumulate the stream first"), a whole Response (use
    :func:`envelopes_from_openai_responses`); ``TypeError`` for a non-object.
    """
    data = document(item, _ONE)
    if not isinstance(data, Mapping):
        raise ValueError(f"expected {_ONE}; got a list")
    _own(data)
    if "output" in data or get(data, "object") == "response":
        raise ValueError(f"expected {_ONE}; got a Response (use envelopes_from_openai_responses)")
    return _call(data, run_id, request_bytes)


def envelopes_from_openai_responses(
    response: object, run_id: str, *, request_bytes: int | None = None
) -> list[ToolCallEnvelope]:
    """Every call item of a Response, in order (CIS-PRE-7, CIS-ECO-1).

    Accepts a ``Response`` (``{"output": [...]}``), its ``output`` list (or an
    ``input`` list), or one item, as typed objects, dicts or JSON text. Every call the
    harness must answer yields an envelope, tool_call_id = ``call_id``:

    - ``function_call``: its name and ``arguments`` text;
    - ``custom_tool_call``: its name, ``arguments=None`` (free-form input is no JSON
      object: INVALID_ARGUMENTS);
    - the client-run built-in calls (:data:`CLIENT_RUN_CALLS`): tool name = the item
      type (``shell_call``, ...), arguments = its action or operation object,
      serialized and measured against ``request_bytes`` (default the kernel's);
      UNAUTHORIZED unless the harness registered a tool by that name;
    - an item of a type unknown to this version that looks like a call (a
      ``call_id``, or a type ending ``_call``): its own envelope, ``arguments=None``
      (INVALID_ARGUMENTS), so the turn's other calls still run;
    - an item with ``"status": "incomplete"`` (cut by the output limit):
      ``arguments=None``.

    Skipped: messages, reasoning, outputs and the calls the provider runs itself
    (web/file search, code interpreter, image generation, MCP). Raises
    ``ValueError`` for a stream event or a list of them, an item or Response still
    ``in_progress`` ("accumulate the stream first"), another provider's object or a
    list of them (naming its parser), an ``output`` that is not a list, an item that
    is not an object with a type; ``TypeError`` for a non-object.
    """
    data = document(response, _MANY)
    if isinstance(data, Mapping):
        _own(data)
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
        if isinstance(item, Mapping):
            _own(item)
        if not isinstance(item, Mapping) or not _is_item(item):
            raise ValueError("a Responses output item is not an object with a Responses item type")
        if call_kind(item) is not None:
            calls.append(_call(item, run_id, request_bytes))
    return calls


def openai_responses_call_types(response: object) -> list[str]:
    """The item type of every call :func:`envelopes_from_openai_responses` finds, in its order.

    Zip it with the envelopes to answer each call with its own output item
    (:func:`openai_responses_function_call_output`'s ``call_type``).
    """
    data = document(response, _MANY)
    if isinstance(data, Mapping):
        found: Any = get(data, "output") if "output" in data else [data]
    else:
        found = data
    kinds = []
    for raw in found if isinstance(found, list | tuple) else ():
        item = plain_item(raw)
        kind = call_kind(item) if isinstance(item, Mapping) else None
        if kind is not None:
            kinds.append(kind)
    return kinds


def openai_responses_function_call_output(
    envelope: ToolCallEnvelope, result: BoundaryResult, *, call_type: str = "function_call"
) -> dict[str, Any]:
    """The input item answering one call (CIS-ECO-3), of the output type of its ``call_type``.

    ``call_type`` is the call item's type (:func:`openai_responses_call_types`):

    - ``function_call`` / ``custom_tool_call`` / an unknown ``X``: ``{"type":
      "<X>_output", "call_id": <the envelope's original id>, "output": <agent text>}``
      (``function_call_output``, ``custom_tool_call_output``);
    - ``local_shell_call``: ``{"type": "local_shell_call_output", "id": <id>,
      "output": <agent text>}``;
    - ``shell_call``: ``{"type": "shell_call_output", "call_id", "output": [{"stdout":
      <agent text> if ok else "", "stderr": "" if ok else <agent text>, "outcome":
      {"type": "exit", "exit_code": 0 | 1}}]}``;
    - ``apply_patch_call``: ``{"type": "apply_patch_call_output", "call_id",
      "status": "completed" | "failed", "output": <agent text>}``.

    Raises ``ValueError`` when the call has no id, and for ``computer_call`` and
    ``tool_search_call``, whose answers are a screenshot and a tool list that a
    boundary result cannot be (the harness answers those itself).
    """
    envelope, result = checked_pair(envelope, result)
    call_id = required_id(envelope, "OpenAI Responses")
    output = agent_text(result)
    if call_type == "local_shell_call":
        return {"type": "local_shell_call_output", "id": call_id, "output": output}
    if call_type == "shell_call":
        chunk = {
            "stdout": output if result.ok else "",
            "stderr": "" if result.ok else output,
            "outcome": {"type": "exit", "exit_code": 0 if result.ok else 1},
        }
        return {"type": "shell_call_output", "call_id": call_id, "output": [chunk]}
    if call_type == "apply_patch_call":
        status = "completed" if result.ok else "failed"
        return {"type": "apply_patch_call_output", "call_id": call_id, "status": status, "output": output}
    if call_type in ("computer_call", "tool_search_call"):
        answer = "a screenshot" if call_type == "computer_call" else "a tool list"
        raise ValueError(
            f"a {call_type} is answered with {answer}, which a boundary result is not: "
            "answer it from the harness"
        )
    if not call_type.isascii() or not call_type.isidentifier():
        raise ValueError("call_type is not a Responses item type")
    return {"type": f"{call_type}_output", "call_id": call_id, "output": output}


def openai_responses_call_outputs(
    response: object, pairs: Iterable[tuple[ToolCallEnvelope, BoundaryResult]]
) -> list[dict[str, Any]]:
    """The input items answering every call of ``response``, in order (CIS-ECO-3).

    ``pairs``: each envelope of ``envelopes_from_openai_responses(response, ...)`` with
    its result, in that order; each is answered by the output of its item type.
    Raises ``ValueError`` when the pairs are not one per call of the response.
    """
    kinds = openai_responses_call_types(response)
    listed = list(pairs)
    if len(listed) != len(kinds):
        raise ValueError("the pairs are not one per call of the response")
    return [
        openai_responses_function_call_output(e, r, call_type=kind)
        for kind, (e, r) in zip(kinds, listed, strict=True)
    ]


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
            if isinstance(item, dict) and call_kind(item) is not None:
                yield item


#: ``{"input": [...]}`` and/or ``{"output": [...]}`` holding ``function_call`` items.
FORMAT = TranscriptFormat(name="openai-responses", detect=_detect, call_items=_call_items, envelope=_call)
