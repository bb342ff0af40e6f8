"""Which provider an object belongs to, by its defining fields (CIS-ECO-1).

Each provider's objects carry fields no other provider's have: a type tag
(``"tool_use"``, ``"function_call"``, ``"object": "chat.completion"``), a container
name (``choices``, ``output``, ``candidates``, ``parts``) or a field set (a Gemini
``FunctionCall`` is ``name`` with at most ``id``, ``args``, ``partial_args`` and
``will_continue``, and no ``type``). :func:`recognise` reads those fields of one
decoded mapping and says whose it is, what it is and whether it is a streamed
piece. A parser given another provider's shape raises ``ValueError`` naming the
parser to use (:func:`wrong_provider`); a streamed piece that is not a whole turn
raises "accumulate the stream first".

Shapes that hold no call and that several providers share (a bare ``{"type":
"text"}`` part, a ``{"role": "assistant", "content": "Hello"}`` message) are not
claimed by anyone: :func:`recognise` returns None for them and each parser reads
them by its own rules.
"""

from __future__ import annotations

from collections.abc import Mapping

from attrs import frozen

__all__ = [
    "ANTHROPIC",
    "CHAT",
    "GEMINI",
    "PARSERS",
    "RESPONSES",
    "Shape",
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

#: Anthropic content block types (``text`` is shared with Chat content parts and claimed
#: only inside an Anthropic message).
ANTHROPIC_BLOCKS = frozenset(
    {
        "tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use",
        "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
        "bash_code_execution_tool_result", "text_editor_code_execution_tool_result",
        "tool_search_tool_result", "mcp_tool_use", "mcp_tool_result", "container_upload",
        "document", "search_result", "tool_reference",
    }
)  # fmt: skip
#: Anthropic streaming events (``MessageStreamEvent``).
ANTHROPIC_EVENTS = frozenset(
    {"message_start", "message_delta", "message_stop", "content_block_start", "content_block_delta",
     "content_block_stop", "ping", "error"}
)  # fmt: skip
#: Fields of a Gemini ``FunctionCall`` (camelCase and the SDK's snake_case).
GEMINI_CALL_FIELDS = frozenset(
    {"id", "name", "args", "partial_args", "partialArgs", "will_continue", "willContinue"}
)
#: Fields by which a mapping is known to be a Gemini ``Part``.
GEMINI_PART_FIELDS = frozenset(
    {
        "functionCall", "function_call", "text", "thought", "thought_signature", "thoughtSignature",
        "inline_data", "inlineData", "file_data", "fileData", "function_response", "functionResponse",
        "executable_code", "executableCode", "code_execution_result", "codeExecutionResult",
        "video_metadata", "videoMetadata", "media_resolution", "mediaResolution", "part_metadata",
        "partMetadata", "tool_call", "toolCall", "tool_response", "toolResponse",
    }
)  # fmt: skip
#: Fields only OpenAI Chat messages have (``ChatCompletionMessage`` and request messages).
CHAT_MESSAGE_FIELDS = frozenset(
    {"tool_calls", "function_call", "refusal", "audio", "annotations", "tool_call_id"}
)
#: Content part types of OpenAI Responses messages.
RESPONSES_CONTENT = frozenset(
    {"output_text", "input_text", "refusal", "input_image", "input_file", "input_audio", "summary_text"}
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


def recognise(data: Mapping[str, object]) -> Shape | None:
    """The provider shape of one decoded mapping, or None when it has no defining field.

    Never raises on any mapping (a hostile one is read through ``keys``/``get``
    only inside ``try``).
    """
    try:
        keys = set(data.keys())
        kind = _type(data)
        obj = data.get("object")
        # OpenAI Chat Completions
        if obj == "chat.completion.chunk" or (
            "choices" in keys
            and isinstance(_first(data.get("choices")), Mapping)
            and "delta" in _first(data.get("choices"))  # type: ignore[operator]
        ):
            return Shape(CHAT, "an OpenAI Chat Completions stream chunk", stream=True)
        if obj == "chat.completion" or "choices" in keys:
            return Shape(CHAT, "an OpenAI ChatCompletion")
        # OpenAI Responses: the Response, its stream events
        if obj == "response":
            return Shape(RESPONSES, "an OpenAI Responses Response")
        if kind is not None and kind.startswith("response."):
            return Shape(RESPONSES, f"an OpenAI Responses stream event ({_safe(kind)})", stream=True)
        # Anthropic stream events
        if kind in ANTHROPIC_EVENTS:
            return Shape(ANTHROPIC, f"an Anthropic stream event ({kind})", stream=True)
        # Gemini
        if "candidates" in keys:
            return Shape(GEMINI, "a Gemini GenerateContentResponse")
        if "contents" in keys:
            return Shape(GEMINI, "a Gemini request (its contents list)")
        if "parts" in keys and kind is None:
            return Shape(GEMINI, "a Gemini Content")
        if kind is None and keys & GEMINI_PART_FIELDS and not keys & {"role", "content", "function"}:
            # (an OpenAI Chat message has a ``function_call`` field too, beside its ``role``)
            if keys & {"functionCall", "function_call"}:
                return Shape(GEMINI, "a Gemini functionCall part")
            return Shape(GEMINI, "a Gemini part")
        if kind is None and "name" in keys and keys <= GEMINI_CALL_FIELDS and "function" not in keys:
            return Shape(GEMINI, "a Gemini FunctionCall")
        # Anthropic messages and blocks
        if kind == "message" and (
            "stop_reason" in keys or _block_types(data.get("content")) & ANTHROPIC_BLOCKS
        ):
            return Shape(ANTHROPIC, "an Anthropic Message")
        if kind in ANTHROPIC_BLOCKS:
            return Shape(ANTHROPIC, f"an Anthropic {kind} block")
        # OpenAI Responses items and the Response's output list
        if kind == "message" and _block_types(data.get("content")) & RESPONSES_CONTENT:
            return Shape(RESPONSES, "an OpenAI Responses message item")
        if (
            kind is not None
            and kind != "tool_call"
            and (  # a LangChain ToolCall is "tool_call"
                kind.endswith(("_call", "_call_output", "_output"))
                or kind in ("reasoning", "compaction", "item_reference", "program", "additional_tools")
                or kind.startswith("mcp_")
                or "call_id" in keys
            )
        ):
            return Shape(RESPONSES, f"an OpenAI Responses {_safe(kind)} item")
        if "output" in keys and isinstance(data.get("output"), list | tuple):
            return Shape(RESPONSES, "an OpenAI Responses Response")
        # OpenAI Chat tool calls and messages
        if (kind in (None, "function") and isinstance(data.get("function"), Mapping)) or (
            kind == "custom" and "custom" in keys
        ):
            # A streamed delta has an ``index``; so do LiteLLM's whole calls. A delta without
            # id or name is a continuation (never a whole call); one with both is read as a
            # call (a cut first delta's text fails preflight's JSON check).
            function = data.get("function")
            if "index" in keys and (
                not isinstance(data.get("id"), str)
                or not (isinstance(function, Mapping) and isinstance(function.get("name"), str))
            ):
                return Shape(CHAT, "an OpenAI Chat Completions streamed tool-call delta", stream=True)
            return Shape(CHAT, "an OpenAI Chat Completions tool call")
        if "role" in keys:
            if keys & CHAT_MESSAGE_FIELDS or data.get("role") in ("tool", "system", "developer", "function"):
                return Shape(CHAT, "an OpenAI Chat Completions message")
            if _block_types(data.get("content")) & ANTHROPIC_BLOCKS:
                return Shape(ANTHROPIC, "an Anthropic message")
            if _block_types(data.get("content")) & RESPONSES_CONTENT:
                return Shape(RESPONSES, "an OpenAI Responses message item")
    except Exception:  # noqa: BLE001 - a hostile mapping has no shape; the parser reads it as malformed
        return None
    return None


def _safe(kind: str) -> str:
    """A type tag fit for an error message (short, printable ASCII), else ``"unknown"``."""
    ok = kind.isascii() and kind.isprintable() and len(kind) <= 64 and not set(kind) & set("{}\"'\\")
    return kind if ok else "unknown"


def wrong_provider(shape: Shape) -> ValueError:
    """The error for another provider's object: what it is, and the parser to use."""
    if shape.stream:
        return ValueError(
            f"this is {shape.what}: accumulate the stream first (then use {PARSERS[shape.provider]})"
        )
    return ValueError(f"this is {shape.what}: use {PARSERS[shape.provider]}")
