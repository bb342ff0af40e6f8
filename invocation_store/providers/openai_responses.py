"""OpenAI Responses: ``function_call`` items in, ``function_call_output`` items out.

CIS-PRE-7, CIS-ECO-1, CIS-ECO-3.

A call is an output item ``{"type": "function_call", "id": "fc_...", "call_id":
"call_...", "name": ..., "arguments": "<JSON object text>"}``. The tool_call_id is
``call_id`` (what the answer must echo), never the item ``id``. The answer is
``{"type": "function_call_output", "call_id": <the call's call_id>, "output":
<agent text>}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..kernel import ToolCallEnvelope
from ._common import (
    document,
    envelope,
    get,
    items,
    plain_item,
    report_unknown,
    safe_tag,
    serialize_object,
    text,
)
from ._formats import TranscriptFormat, TranscriptShapeError
from ._results import agent_payload, agent_text, checked_pair, required_id
from ._sdk_types import tables
from ._shapes import RESPONSES, recognise, wrong_provider

if TYPE_CHECKING:
    from ..boundary import BoundaryResult

__all__ = [
    "FORMAT",
    "envelope_from_openai_responses",
    "envelopes_from_openai_responses",
    "openai_responses_call_outputs",
    "openai_responses_call_types",
    "openai_responses_failure_note",
    "openai_responses_function_call_output",
]

_ONE = "one Responses function_call item (a ResponseFunctionToolCall, its dict or JSON text)"
_MANY = "a Response, its output list or one output item (typed objects, their dicts or JSON text)"


#: Tool calls the provider runs itself: nothing for the harness to answer, skipped
#: (``program``: the JavaScript of programmatic tool calling, run by the server; the calls
#: it makes to the harness's functions arrive as ``function_call`` items).
_SERVER_RUN = frozenset(
    {
        "file_search_call", "web_search_call", "image_generation_call", "code_interpreter_call",
        "mcp_call", "program",
    }
)  # fmt: skip
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
#: Calls the harness answers: its functions, its custom tools and the client-run built-ins.
CALL_TYPES = frozenset({"function_call", "custom_tool_call", *CLIENT_RUN_CALLS})
#: Roles of an "easy" input message (``EasyInputMessage``: ``role`` and ``content``, no type).
_EASY_ROLES = frozenset({"user", "assistant", "system", "developer"})


def call_kind(item: Mapping[str, Any]) -> str | None:
    """The item's type when it is a call the harness must answer, else None.

    :data:`CALL_TYPES` (``tool_search_call`` only with ``"execution": "client"``),
    and any item of a type the SDK does not declare (a newer API's) that carries a
    ``call_id`` or whose type ends in ``_call`` (the API's naming of calls). Every
    other type the SDK declares is no call for the harness: messages, reasoning,
    outputs, compaction, the calls the provider runs itself (:data:`_SERVER_RUN`), MCP
    listings, and ``mcp_approval_request`` (the provider runs that MCP call once the
    harness approves it with an ``mcp_approval_response``: an approval, not a result
    of a tool the harness runs, so it is left to the harness).
    """
    kind = get(item, "type")
    if not isinstance(kind, str):
        return None
    if kind == "tool_search_call":
        return kind if get(item, "execution") == "client" else None
    if kind in CALL_TYPES:
        return kind
    if kind in _SERVER_RUN or kind in tables().responses_items or kind.endswith("_output"):
        return None
    return kind if kind.endswith("_call") or "call_id" in item else None


def _unknown(item: Mapping[str, Any]) -> bool:
    """An item of a type the SDK does not declare and that is no call: reported, skipped."""
    kind = get(item, "type")
    return isinstance(kind, str) and kind not in tables().responses_items and call_kind(item) is None


def _call(item: object, run_id: str, request_bytes: int | None = None) -> ToolCallEnvelope:
    kind = text(get(item, "type"))
    call_id = get(item, "call_id")
    if kind == "function_call":
        arguments = text(get(item, "arguments"))
    elif kind in CLIENT_RUN_CALLS:
        arguments = _client_run_arguments(item, kind, request_bytes)
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
    namespace = get(item, "namespace")
    if namespace is not None and name is not None:
        # A call of a tool grouped under a namespace (``NamespaceTool``) names the tool
        # ``<namespace>.<name>``: never the bare name, which may be another tool.
        name = (
            f"{namespace}.{name}"
            if isinstance(namespace, str) and isinstance(name, str) and namespace
            else None
        )
    return envelope(
        run_id, call_id, name if name is not None or kind == "function_call" else kind, arguments, item
    )


def _client_run_arguments(item: object, kind: str, request_bytes: int | None) -> str | None:
    """A client-run call's arguments: its action or operation object, serialized.

    A ``computer_call`` carries one ``action`` or a batch ``actions`` (a list): the
    batch is given as ``{"actions": [...]}``. An item carrying both, or neither, gets
    None (INVALID_ARGUMENTS): which of them is the call is unknowable.
    """
    actions = get(item, "actions") if kind == "computer_call" else None
    if actions is None:
        return serialize_object(get(item, CLIENT_RUN_CALLS[kind]), request_bytes)
    if get(item, "action") is not None or not isinstance(actions, list):
        return None
    return serialize_object({"actions": actions}, request_bytes)


def _is_item(item: Mapping[str, Any]) -> bool:
    """True for a Responses item: a string ``type`` (one this version does not know
    included: it is answered or reported, never a reason to drop the turn), or an easy
    input message (``{"role": "user", "content": ...}``, no type), on an object no
    other provider claims (an Anthropic Message, whose type is ``message`` too, has a
    ``stop_reason``)."""
    kind = get(item, "type")
    if "stop_reason" in item:
        return False
    if kind is None:
        fields = tables().responses_items.get("message", frozenset())
        if not ("content" in item and get(item, "role") in _EASY_ROLES and set(item.keys()) <= fields):
            return False
    elif not isinstance(kind, str):
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
    item: object, run_id: str, *, request_bytes: int | None = None, max_text_bytes: int | None = None
) -> ToolCallEnvelope:
    """One OpenAI Responses call item (CIS-PRE-7, CIS-ECO-1).

    ``item``: a ``ResponseFunctionToolCall`` (or another call item, see
    :func:`envelopes_from_openai_responses`), its dump or its JSON text. JSON text
    over ``max_text_bytes`` (default 32 MiB) is refused before it is decoded. Raises
    ``ValueError`` for another provider's object (naming its parser), a stream event
    or an unfinished item ("accumulate the stream first"), a whole Response (use
    :func:`envelopes_from_openai_responses`); ``TypeError`` for a non-object.
    """
    data = document(item, _ONE, max_text_bytes)
    if not isinstance(data, Mapping):
        raise ValueError(f"expected {_ONE}; got a list")
    _own(data)
    if "output" in data or get(data, "object") == "response":
        raise ValueError(f"expected {_ONE}; got a Response (use envelopes_from_openai_responses)")
    return _call(data, run_id, request_bytes)


def envelopes_from_openai_responses(
    response: object, run_id: str, *, request_bytes: int | None = None, max_text_bytes: int | None = None
) -> list[ToolCallEnvelope]:
    """Every call item of a Response, in order (CIS-PRE-7, CIS-ECO-1).

    Accepts a ``Response`` (``{"output": [...]}``), its ``output`` list (or an
    ``input`` list, easy messages ``{"role": "user", "content": "hi"}`` included), or
    one item, as typed objects, dicts or JSON text (at most ``max_text_bytes``,
    default 32 MiB, refused before it is decoded). Every call the harness must answer
    yields an envelope, tool_call_id = ``call_id``:

    - ``function_call``: its name and ``arguments`` text;
    - ``custom_tool_call``: its name, ``arguments=None`` (free-form input is no JSON
      object: INVALID_ARGUMENTS);
    - a function or custom call of a tool grouped under a ``namespace``: tool name
      ``<namespace>.<name>`` (register the tool by that name; OpenAI's function names
      have no dot, so it never meets a tool outside the namespace);
    - the client-run built-in calls (:data:`CLIENT_RUN_CALLS`): tool name = the item
      type (``shell_call``, ...), arguments = its action or operation object,
      serialized and measured against ``request_bytes`` (default the kernel's); a
      ``computer_call``'s batch ``actions`` as ``{"actions": [...]}`` (an item
      carrying both ``action`` and ``actions`` gets ``arguments=None``);
      UNAUTHORIZED unless the harness registered a tool by that name;
    - an item of a type unknown to this version that looks like a call (a
      ``call_id``, or a type ending ``_call``): its own envelope, ``arguments=None``
      (INVALID_ARGUMENTS), so the turn's other calls still run;
    - an item with ``"status": "incomplete"`` (cut by the output limit):
      ``arguments=None``.

    Skipped: messages, reasoning, outputs, the calls the provider runs itself
    (web/file search, code interpreter, image generation, MCP, programs) and MCP
    approval requests (see :func:`call_kind`); an item of a type this version does not
    know that is no call is reported (:func:`~._common.report_unknown`: a WARNING
    naming its type) and skipped. Raises
    ``ValueError`` for a stream event or a list of them, an item or Response still
    ``in_progress`` ("accumulate the stream first"), another provider's object or a
    list of them (naming its parser), an ``output`` that is not a list, an item that
    is not an object with a type; ``TypeError`` for a non-object.
    """
    data = document(response, _MANY, max_text_bytes)
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
    for position, raw in enumerate(found):
        item = plain_item(raw)
        if isinstance(item, Mapping):
            _own(item)
        if not isinstance(item, Mapping) or not _is_item(item):
            raise ValueError("a Responses output item is not an object with a Responses item type")
        if call_kind(item) is not None:
            calls.append(_call(item, run_id, request_bytes))
        elif _unknown(item):
            report_unknown("OpenAI Responses", run_id, position, f"type {safe_tag(get(item, 'type'))}")
    return calls


def openai_responses_call_types(response: object, *, max_text_bytes: int | None = None) -> list[str]:
    """The item type of every call :func:`envelopes_from_openai_responses` finds, in its order.

    Zip it with the envelopes to answer each call with its own output item
    (:func:`openai_responses_function_call_output`'s ``call_type``).
    """
    data = document(response, _MANY, max_text_bytes)
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
    """The input item answering one call (CIS-ECO-3, CIS-ECO-7), of the output type of its ``call_type``.

    ``call_type`` is the call item's type (:func:`openai_responses_call_types`); each
    output has the shape of the ``openai`` SDK's input item of that type:

    - ``function_call`` / ``custom_tool_call`` / an unknown ``X``: ``{"type":
      "<X>_output", "call_id": <the envelope's original id>, "output": <agent text>}``
      (``function_call_output``, ``custom_tool_call_output``);
    - ``local_shell_call``: ``{"type": "local_shell_call_output", "id": <id>,
      "output": <agent text>}``;
    - ``shell_call``: ``{"type": "shell_call_output", "call_id", "output": [{"stdout":
      <agent text> if ok else "", "stderr": "" if ok else <agent text>, "outcome":
      {"type": "exit", "exit_code": 0 | 1}}]}``;
    - ``apply_patch_call``: ``{"type": "apply_patch_call_output", "call_id",
      "status": "completed" | "failed", "output": <agent text>}``;
    - ``computer_call``: ``{"type": "computer_call_output", "call_id", "output":
      {"type": "computer_screenshot", "image_url": <url>}, "status": "completed" |
      "incomplete"}``: on success ``<url>`` is the result's ``content`` (the harness's
      ``computer_call`` tool projects its screenshot to an image URL or a ``data:``
      URL), else ``""``;
    - ``tool_search_call``: ``{"type": "tool_search_output", "call_id", "execution":
      "client", "tools": <the tool definitions>, "status": "completed" |
      "incomplete"}``: on success the tools are the result's ``content`` read as a
      JSON array of tool objects (the harness's ``tool_search_call`` tool projects
      them so), else ``[]``.

    A screenshot and a tool list have no room for text: when such a call fails (the
    boundary refused it, or the tool failed), the stable code is said by
    :func:`openai_responses_failure_note`, which :func:`openai_responses_call_outputs`
    adds after the turn's outputs. Raises ``ValueError`` when the call has no id (the
    Responses API matches an output by its ``call_id``) or ``call_type`` is no item
    type.
    """
    envelope, result = checked_pair(envelope, result)
    call_id = required_id(envelope, "OpenAI Responses")
    output = agent_text(result)
    status = "completed" if result.ok else "incomplete"
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
    if call_type == "computer_call":
        url = result.content if result.ok and isinstance(result.content, str) else ""
        screenshot = {"type": "computer_screenshot", "image_url": url}
        return {"type": "computer_call_output", "call_id": call_id, "output": screenshot, "status": status}
    if call_type == "tool_search_call":
        tools = _tool_list(result.content) if result.ok else []
        return {
            "type": "tool_search_output",
            "call_id": call_id,
            "execution": "client",
            "tools": tools,
            "status": status,
        }
    if not call_type.isascii() or not call_type.isidentifier():
        raise ValueError("call_type is not a Responses item type")
    return {"type": f"{call_type}_output", "call_id": call_id, "output": output}


def _tool_list(content: object) -> list[Any]:
    """The tool definitions a ``tool_search_call`` result's content holds: a JSON array of
    objects, else ``[]``."""
    if not isinstance(content, str):
        return []
    try:
        found = json.loads(content)
    except ValueError:
        return []
    return found if isinstance(found, list) and all(isinstance(tool, dict) for tool in found) else []


#: Call types whose output has no text field: a failure is said in a note beside it.
_TEXTLESS = frozenset({"computer_call", "tool_search_call"})


def openai_responses_failure_note(
    envelope: ToolCallEnvelope, result: BoundaryResult, *, call_type: str
) -> dict[str, Any] | None:
    """The input message saying a call's code, where its output cannot (CIS-ECO-3, CIS-ECO-7).

    For a failed ``computer_call`` or ``tool_search_call`` (whose outputs are a
    screenshot and a tool list), and for a call without an id (which no output can
    answer): ``{"type": "message", "role": "user", "content": [{"type":
    "input_text", "text": <JSON: {"call_type", "call_id", "ok": false, "code",
    "message"}>}]}``, the code and its fixed message as every output carries them.
    None for every other call (its output says it all).
    """
    envelope, result = checked_pair(envelope, result)
    call_id = (
        envelope.tool_call_id if isinstance(envelope.tool_call_id, str) and envelope.tool_call_id else None
    )
    if result.ok and call_id is not None:
        return None
    if call_id is not None and call_type not in _TEXTLESS:
        return None
    payload = {"call_type": call_type, "call_id": call_id, **agent_payload(result)}
    note = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": note}]}


def openai_responses_call_outputs(
    response: object, pairs: Iterable[tuple[ToolCallEnvelope, BoundaryResult]]
) -> list[dict[str, Any]]:
    """The input items answering every call of ``response``, in order (CIS-ECO-3, CIS-ECO-7).

    ``pairs``: each envelope of ``envelopes_from_openai_responses(response, ...)`` with
    its result, in that order. Each call is answered by the output of its item type
    (:func:`openai_responses_function_call_output`); then, for each call whose output
    cannot say its code (a failed ``computer_call`` or ``tool_search_call``) or that
    has no id to be answered by, one :func:`openai_responses_failure_note`. One call
    never stops the others' outputs. Raises ``ValueError`` when the pairs are not one
    per call of the response.
    """
    kinds = openai_responses_call_types(response)
    listed = list(pairs)
    if len(listed) != len(kinds):
        raise ValueError("the pairs are not one per call of the response")
    outputs: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    for kind, (call, result) in zip(kinds, listed, strict=True):
        if isinstance(call.tool_call_id, str) and call.tool_call_id:
            outputs.append(openai_responses_function_call_output(call, result, call_type=kind))
        note = openai_responses_failure_note(call, result, call_type=kind)
        if note is not None:
            notes.append(note)
    return outputs + notes


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
