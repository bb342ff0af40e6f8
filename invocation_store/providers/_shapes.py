"""Which provider an object belongs to, by its defining fields (CIS-ECO-1).

Each provider's objects carry fields no other provider's have: a type tag
(``"tool_use"``, ``"function_call"``, ``"object": "chat.completion"``), a container
name (``choices``, ``output``, ``candidates``, ``parts``) or a field set (a Gemini
``FunctionCall`` is ``name`` with only ``FunctionCall`` fields, and no ``type``).
The tags and field names are the SDKs' own (:mod:`._sdk_types`: read from their
unions, not listed here). :func:`recognise` reads those fields of one decoded mapping
and says whose it is, what it is and whether it is a streamed piece:

- a typed SDK object (read as :class:`~._common.Fields`) is its SDK's, by its class's
  module (``anthropic.*``, ``openai.types.chat``, ``openai.types.responses``,
  ``google.genai``); a class of a streaming module (``ChatCompletionChunk`` and its
  deltas, the SDKs' stream events) is a streamed piece;
- a type tag declared by one provider only is that provider's (``mcp_tool_listing``
  is Anthropic's, ``mcp_list_tools`` OpenAI's);
- a tag several providers declare (``compaction``: an Anthropic beta block and a
  Responses item; ``text``: an Anthropic block and a Chat content part) is the one
  provider's whose declared fields hold every key of the object, else nobody's;
- a tag no SDK declares (a newer API's) is judged by the providers' naming: a
  ``call_id`` or a ``_call``/``_output`` suffix is a Responses item, a
  ``tool_use_id`` or a ``_tool_use``/``_tool_result`` suffix an Anthropic block.

A parser given another provider's shape raises ``ValueError`` naming the parser to
use (:func:`wrong_provider`); a streamed piece that is not a whole turn raises
"accumulate the stream first". Shapes that hold no call and that several providers
share (a bare ``{"type": "text", "text": ...}``, a ``{"role": "assistant",
"content": "Hello"}`` message) are claimed by no one: :func:`recognise` returns None
and each parser reads them by its own rules (inside a container, the container
decides).
"""

from __future__ import annotations

from collections.abc import Mapping

from attrs import frozen

from ._common import Fields, safe_tag
from ._sdk_types import tables

__all__ = [
    "ANTHROPIC",
    "CHAT",
    "CHAT_MESSAGE_FIELDS",
    "GEMINI",
    "PARSERS",
    "RESPONSES",
    "Shape",
    "anthropic_only",
    "recognise",
    "wrong_provider",
]

CHAT = "openai-chat"
RESPONSES = "openai-responses"
ANTHROPIC = "anthropic"
GEMINI = "gemini"

#: The parser of each provider's turns, as the error messages name it.
PARSERS: dict[str, str] = {
    CHAT: "envelopes_from_openai_chat",
    RESPONSES: "envelopes_from_openai_responses",
    ANTHROPIC: "envelopes_from_anthropic",
    GEMINI: "envelopes_from_gemini",
}
_NAMES = {
    CHAT: "an OpenAI Chat Completions",
    RESPONSES: "an OpenAI Responses",
    ANTHROPIC: "an Anthropic",
    GEMINI: "a Gemini",
}

#: Fields only OpenAI Chat messages have (``ChatCompletionMessage`` and request messages):
#: the fields the Chat message types add to the ``role``/``content`` every provider's has.
CHAT_MESSAGE_FIELDS = frozenset(
    {"tool_calls", "function_call", "refusal", "audio", "annotations", "tool_call_id"}
)

#: Modules of the SDKs' typed objects, most specific first: (module prefix, provider,
#: streamed piece). A class of the first matching prefix is that provider's.
_SDK_MODULES: tuple[tuple[str, str | None, bool], ...] = (
    ("openai.types.chat.chat_completion_chunk", CHAT, True),
    ("openai.lib.streaming.chat._events", CHAT, True),
    ("openai.types.chat", CHAT, False),
    ("openai.lib.streaming.chat", CHAT, False),
    ("openai.types.responses", RESPONSES, False),
    ("openai.lib.streaming.responses", RESPONSES, False),
    ("openai", None, False),  # shared models (usage, errors): nobody's turn
    ("anthropic.lib.streaming", ANTHROPIC, True),
    ("anthropic", ANTHROPIC, False),
    ("google.genai", GEMINI, False),
)


@frozen
class Shape:
    """Whose an object is: ``provider`` (a key of :data:`PARSERS`), ``what`` (as an error
    message names it, e.g. "an OpenAI Responses function_call item") and ``stream``
    (True for a streamed piece that is no whole turn)."""

    provider: str
    what: str
    stream: bool = False


def _type(data: Mapping[str, object]) -> str | None:
    kind = data.get("type")
    return kind if isinstance(kind, str) else None


def _first(value: object) -> object:
    return value[0] if isinstance(value, list | tuple) and value else None


def _block_types(content: object) -> set[str]:
    if not isinstance(content, list | tuple):
        return set()
    kinds = set()
    for block in content:
        kind = block.get("type") if isinstance(block, Mapping) else getattr(block, "type", None)
        if isinstance(kind, str):
            kinds.add(kind)
    return kinds


_ANTHROPIC_ONLY: dict[int, frozenset[str]] = {}


def anthropic_only() -> frozenset[str]:
    """Anthropic block types no other provider declares (``tool_use``, ``thinking``, ...)."""
    found = tables()  # cached for the process: its id names it
    only = _ANTHROPIC_ONLY.get(id(found))
    if only is None:
        shared = set(found.responses_items) | set(found.chat_content) | found.responses_content
        only = _ANTHROPIC_ONLY[id(found)] = frozenset(set(found.anthropic_blocks) - shared)
    return only


def _sdk(data: Mapping[str, object]) -> Shape | None:
    """The shape of a typed SDK object, by its class's module; None for plain data."""
    if not isinstance(data, Fields):
        return None
    module = data.module
    for prefix, provider, stream in _SDK_MODULES:
        if module == prefix or module.startswith(prefix + "."):
            if provider is None:
                return None
            return Shape(provider, f"{_NAMES[provider]} {safe_tag(data.name.partition('[')[0])}", stream)
    return None


def _tagged(kind: str, keys: set[str]) -> Shape | None:
    """The owner of a type tag: the one provider declaring it, or the one whose declared
    fields hold every key; by the providers' naming for a tag no SDK declares."""
    found = tables()
    declared: list[tuple[str, frozenset[str]]] = []
    if kind in found.anthropic_blocks:
        declared.append((ANTHROPIC, found.anthropic_blocks[kind]))
    if kind in found.responses_items:
        declared.append((RESPONSES, found.responses_items[kind]))
    if kind in found.chat_content:
        declared.append((CHAT, found.chat_content[kind]))
    if len(declared) > 1:
        declared = [(provider, fields) for provider, fields in declared if keys <= fields]
    if declared:
        if len(declared) > 1 or declared[0][0] == CHAT:
            return None  # shared by several, or a Chat content part: no call, nobody's
        provider = declared[0][0]
        noun = "block" if provider == ANTHROPIC else "item"
        return Shape(provider, f"{_NAMES[provider]} {kind} {noun}")
    # A tag no SDK declares: the providers' naming.
    if kind == "tool_call":
        return None  # a LangChain ToolCall
    if kind.endswith(("_call", "_call_output", "_output")) or "call_id" in keys:
        return Shape(RESPONSES, f"{_NAMES[RESPONSES]} {safe_tag(kind)} item")
    if kind.endswith(("_tool_use", "_tool_result")) or "tool_use_id" in keys:
        return Shape(ANTHROPIC, f"{_NAMES[ANTHROPIC]} {safe_tag(kind)} block")
    return None


def recognise(data: Mapping[str, object]) -> Shape | None:
    """The provider shape of one decoded mapping, or None when it has no defining field.

    Never raises on any mapping (a hostile one is read through ``keys``/``get``
    only inside ``try``).
    """
    try:
        by_fields = _by_fields(data)
        typed = _sdk(data)
    except Exception:  # noqa: BLE001 - a hostile mapping has no shape; the parser reads it as malformed
        return None
    if typed is None:
        return by_fields
    if by_fields is not None and by_fields.provider == typed.provider:
        return Shape(typed.provider, by_fields.what, by_fields.stream or typed.stream)
    return typed


def _by_fields(data: Mapping[str, object]) -> Shape | None:
    found = tables()
    keys = set(data.keys())
    kind = _type(data)
    obj = data.get("object")
    # OpenAI Chat Completions
    first = _first(data.get("choices"))
    if obj == "chat.completion.chunk" or (isinstance(first, Mapping) and "delta" in first):
        return Shape(CHAT, "an OpenAI Chat Completions stream chunk", stream=True)
    if obj == "chat.completion" or "choices" in keys:
        return Shape(CHAT, "an OpenAI ChatCompletion")
    # OpenAI Responses: the Response, its stream events
    if obj == "response":
        return Shape(RESPONSES, "an OpenAI Responses Response")
    if kind is not None and kind.startswith("response."):
        return Shape(RESPONSES, f"an OpenAI Responses stream event ({safe_tag(kind)})", stream=True)
    # Anthropic stream events
    if kind in found.anthropic_events:
        return Shape(ANTHROPIC, f"an Anthropic stream event ({kind})", stream=True)
    # Gemini
    if "candidates" in keys:
        return Shape(GEMINI, "a Gemini GenerateContentResponse")
    if "contents" in keys:
        return Shape(GEMINI, "a Gemini request (its contents list)")
    if "parts" in keys and kind is None:
        return Shape(GEMINI, "a Gemini Content")
    if kind is None and keys & found.gemini_part_fields and not keys & {"role", "content", "function"}:
        # (an OpenAI Chat message has a ``function_call`` field too, beside its ``role``)
        if keys & {"functionCall", "function_call"}:
            return Shape(GEMINI, "a Gemini functionCall part")
        return Shape(GEMINI, "a Gemini part")
    if kind is None and "name" in keys and keys <= found.gemini_call_fields and "function" not in keys:
        return Shape(GEMINI, "a Gemini FunctionCall")
    # Messages: an Anthropic Message, a Responses message item
    if kind == "message":
        blocks = _block_types(data.get("content"))
        if "stop_reason" in keys or blocks & anthropic_only():
            return Shape(ANTHROPIC, "an Anthropic Message")
        if blocks & found.responses_content:
            return Shape(RESPONSES, "an OpenAI Responses message item")
        return None
    # OpenAI Chat tool calls (before the tags: ``function``/``custom`` are Chat's)
    if (kind in (None, "function") and isinstance(data.get("function"), Mapping)) or (
        kind == "custom" and "custom" in keys
    ):
        return _chat_call(data, keys)
    # Anthropic blocks, Responses items
    if kind is not None:
        return _tagged(kind, keys)
    if "output" in keys and isinstance(data.get("output"), list | tuple):
        return Shape(RESPONSES, "an OpenAI Responses Response")
    if "role" in keys:
        # ``system``/``developer`` messages of text are both Chat's and Responses' (an easy
        # input message): the content's part types decide, else nobody's.
        blocks = _block_types(data.get("content"))
        if keys & CHAT_MESSAGE_FIELDS or data.get("role") in ("tool", "function"):
            return Shape(CHAT, "an OpenAI Chat Completions message")
        if blocks & anthropic_only():
            return Shape(ANTHROPIC, "an Anthropic message")
        if blocks & found.responses_content:
            return Shape(RESPONSES, "an OpenAI Responses message item")
        if (blocks - set(found.anthropic_blocks) - found.responses_content) & set(found.chat_content):
            return Shape(CHAT, "an OpenAI Chat Completions message")
    return None


def _chat_call(data: Mapping[str, object], keys: set[str]) -> Shape:
    """A Chat tool call, or a streamed tool-call delta.

    A delta has an ``index``; so do LiteLLM's whole calls. A delta without id or name
    is a continuation; a first delta (id and name) still carries its ``arguments``
    empty (OpenAI sends ``""`` there): both are streamed pieces. A whole call has
    its arguments text, at least ``"{}"``.
    """
    function = data.get("function")
    if "index" in keys:
        name = function.get("name") if isinstance(function, Mapping) else None
        arguments = function.get("arguments") if isinstance(function, Mapping) else None
        if not isinstance(data.get("id"), str) or not isinstance(name, str) or arguments in ("", None):
            return Shape(CHAT, "an OpenAI Chat Completions streamed tool-call delta", stream=True)
    return Shape(CHAT, "an OpenAI Chat Completions tool call")


def wrong_provider(shape: Shape) -> ValueError:
    """The error for another provider's object: what it is, and the parser to use."""
    if shape.stream:
        return ValueError(
            f"this is {shape.what}: accumulate the stream first (then use {PARSERS[shape.provider]})"
        )
    return ValueError(f"this is {shape.what}: use {PARSERS[shape.provider]}")
