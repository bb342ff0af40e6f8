"""The providers' own type tags and field names, read from their SDKs (CIS-ECO-1).

Which provider an object belongs to is decided by its defining fields
(:mod:`invocation_store.providers._shapes`): the type tags each provider's SDK
declares for its content blocks and items, and the field names of its models. Those
are read from the SDKs' own discriminated unions, never listed by hand:

- Anthropic: every member of ``ContentBlock``, ``ContentBlockParam`` and their beta
  twins (``BetaContentBlock``, ``BetaContentBlockParam``): block type -> field
  names; the raw stream events' types (``RawMessageStreamEvent`` and its beta twin);
- OpenAI Responses: every member of ``ResponseOutputItem``, ``ResponseInputItem`` and
  ``ResponseItem``: item type -> field names; the content part types of messages
  (``ResponseOutputMessage.content``, ``ResponseInputContent``);
- OpenAI Chat Completions: the tool call types of ``ChatCompletionMessageToolCallUnion``
  and the content part types of messages (``ChatCompletionContentPartParam``, refusal);
- Gemini: the fields of ``Part`` and ``FunctionCall`` (names and camelCase aliases).

The package imports no SDK (``import invocation_store`` stays light), so the tables
read from the SDK versions the project is tested with are kept in the generated
module :mod:`invocation_store.providers._sdk_tables` (``scripts/gen_provider_tables.py``
writes it; ``tests/boundary/test_provider_shapes.py`` fails when it differs from the
installed SDKs). At run time, :func:`tables` adds what an SDK the process has
*already imported* declares (a newer SDK's new types are then known too); it never
imports an SDK itself.
"""

from __future__ import annotations

import importlib
import json
import sys
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any

from attrs import evolve, frozen

__all__ = ["SDK_MODULES", "Tables", "derive", "render", "tables"]

#: The top-level module of each SDK read here.
SDK_MODULES = ("anthropic", "openai", "google.genai")

#: Anthropic stream events sent on the wire but declared by no SDK union (SSE ``ping``
#: keep-alives and the in-stream ``error`` event).
ANTHROPIC_WIRE_EVENTS = frozenset({"ping", "error"})


@frozen
class Tables:
    """What each provider's SDK declares (see the module docstring).

    ``anthropic_blocks`` / ``responses_items`` / ``chat_content``: type tag -> the
    field names of that block, item or content part (union over every model and param
    declaring the tag).
    """

    anthropic_blocks: Mapping[str, frozenset[str]]
    anthropic_events: frozenset[str]
    responses_items: Mapping[str, frozenset[str]]
    responses_content: frozenset[str]
    chat_tool_calls: frozenset[str]
    chat_content: Mapping[str, frozenset[str]]
    gemini_part_fields: frozenset[str]
    gemini_call_fields: frozenset[str]

    def merged(self, other: Tables) -> Tables:
        """Both tables' tags and fields together."""
        return Tables(
            anthropic_blocks=_merge(self.anthropic_blocks, other.anthropic_blocks),
            anthropic_events=self.anthropic_events | other.anthropic_events,
            responses_items=_merge(self.responses_items, other.responses_items),
            responses_content=self.responses_content | other.responses_content,
            chat_tool_calls=self.chat_tool_calls | other.chat_tool_calls,
            chat_content=_merge(self.chat_content, other.chat_content),
            gemini_part_fields=self.gemini_part_fields | other.gemini_part_fields,
            gemini_call_fields=self.gemini_call_fields | other.gemini_call_fields,
        )


EMPTY = Tables(
    anthropic_blocks={},
    anthropic_events=frozenset(),
    responses_items={},
    responses_content=frozenset(),
    chat_tool_calls=frozenset(),
    chat_content={},
    gemini_part_fields=frozenset(),
    gemini_call_fields=frozenset(),
)


def _merge(
    first: Mapping[str, frozenset[str]], second: Mapping[str, frozenset[str]]
) -> dict[str, frozenset[str]]:
    merged = dict(first)
    for tag, fields in second.items():
        merged[tag] = merged.get(tag, frozenset()) | fields
    return merged


# -- reading the SDKs' unions ---------------------------------------------------------------


def _members(union: object) -> Iterator[Any]:
    """The classes of a (possibly ``Annotated``, possibly nested) union, in order."""
    origin = typing.get_origin(union)
    if origin is typing.Annotated:
        yield from _members(typing.get_args(union)[0])
    elif origin is typing.Union or origin is types.UnionType:
        for member in typing.get_args(union):
            yield from _members(member)
    elif isinstance(union, type):
        yield union


def _literals(annotation: object) -> Iterator[str]:
    """The string literals inside an annotation (``Literal``, ``Optional``, ``Required``...)."""
    if typing.get_origin(annotation) is typing.Literal:
        yield from (value for value in typing.get_args(annotation) if isinstance(value, str))
        return
    for argument in typing.get_args(annotation):
        yield from _literals(argument)


def _fields(cls: Any) -> tuple[frozenset[str], object]:
    """A model's or TypedDict's field names (aliases too) and its ``type`` annotation."""
    model_fields = getattr(cls, "model_fields", None)
    if isinstance(model_fields, Mapping):
        names = set(model_fields)
        names.update(f.alias for f in model_fields.values() if isinstance(getattr(f, "alias", None), str))
        kind = model_fields.get("type")
        return frozenset(names), getattr(kind, "annotation", None)
    hints = typing.get_type_hints(cls, include_extras=True)
    return frozenset(hints), hints.get("type")


def _by_type(*unions: object) -> dict[str, frozenset[str]]:
    """type tag -> field names, over every member of ``unions`` with a literal ``type``."""
    found: dict[str, frozenset[str]] = {}
    for union in unions:
        for cls in _members(union):
            names, kind = _fields(cls)
            for tag in _literals(kind):
                found[tag] = found.get(tag, frozenset()) | names
    return found


def _tags(*unions: object) -> frozenset[str]:
    return frozenset(_by_type(*unions))


def _anthropic() -> Tables:
    types_ = importlib.import_module("anthropic.types")
    beta = importlib.import_module("anthropic.types.beta")
    return evolve(
        EMPTY,
        anthropic_blocks=_by_type(
            types_.ContentBlock, types_.ContentBlockParam, beta.BetaContentBlock, beta.BetaContentBlockParam
        ),
        anthropic_events=_tags(types_.RawMessageStreamEvent, beta.BetaRawMessageStreamEvent)
        | ANTHROPIC_WIRE_EVENTS,
    )


def _openai() -> Tables:
    responses = importlib.import_module("openai.types.responses")
    chat = importlib.import_module("openai.types.chat")
    message = responses.ResponseOutputMessage.model_fields["content"].annotation
    return evolve(
        EMPTY,
        responses_items=_by_type(
            responses.ResponseOutputItem, responses.ResponseInputItem, responses.ResponseItem
        ),
        responses_content=_tags(*typing.get_args(message), responses.ResponseInputContent),
        chat_tool_calls=_tags(chat.ChatCompletionMessageToolCallUnion),
        chat_content=_by_type(
            chat.ChatCompletionContentPartParam, chat.ChatCompletionContentPartRefusalParam
        ),
    )


def _gemini() -> Tables:
    genai = importlib.import_module("google.genai.types")
    return evolve(
        EMPTY, gemini_part_fields=_fields(genai.Part)[0], gemini_call_fields=_fields(genai.FunctionCall)[0]
    )


_READERS = {"anthropic": _anthropic, "openai": _openai, "google.genai": _gemini}
#: The modules each reader reads: an SDK counts as imported when all of them are loaded.
_NEEDS = {
    "anthropic": ("anthropic.types", "anthropic.types.beta"),
    "openai": ("openai.types.responses", "openai.types.chat"),
    "google.genai": ("google.genai.types",),
}


def derive(modules: tuple[str, ...] = SDK_MODULES) -> Tables:
    """The tables the named SDKs declare (importing them): what the generated module holds.

    Raises ``ImportError`` when an SDK is not installed.
    """
    found = EMPTY
    for name in modules:
        found = found.merged(_READERS[name]())
    return found


_CACHE: dict[tuple[str, ...], Tables] = {}
#: (``len(sys.modules)`` when last looked, the tables then): the parsers ask for the tables
#: several times per item, and the set of imported modules rarely changes between asks.
_LAST: list[tuple[int, Tables]] = []


def tables() -> Tables:
    """The generated tables, plus what every SDK the process has already imported declares.

    Never imports an SDK; an SDK whose unions cannot be read (an unexpected version)
    adds nothing. Cached per set of imported SDKs, looked up again only when the
    number of imported modules has changed.
    """
    count = len(sys.modules)
    if _LAST and _LAST[0][0] == count:
        return _LAST[0][1]
    loaded = tuple(name for name in SDK_MODULES if all(m in sys.modules for m in _NEEDS[name]))
    cached = _CACHE.get(loaded)
    if cached is not None:
        _LAST[:] = [(count, cached)]
        return cached
    from . import _sdk_tables  # noqa: PLC0415 - generated data, read once

    found = Tables(
        anthropic_blocks=_sdk_tables.ANTHROPIC_BLOCKS,
        anthropic_events=_sdk_tables.ANTHROPIC_EVENTS,
        responses_items=_sdk_tables.RESPONSES_ITEMS,
        responses_content=_sdk_tables.RESPONSES_CONTENT,
        chat_tool_calls=_sdk_tables.CHAT_TOOL_CALLS,
        chat_content=_sdk_tables.CHAT_CONTENT,
        gemini_part_fields=_sdk_tables.GEMINI_PART_FIELDS,
        gemini_call_fields=_sdk_tables.GEMINI_CALL_FIELDS,
    )
    for name in loaded:
        try:
            found = found.merged(_READERS[name]())
        except Exception:  # noqa: BLE001, S112 - an SDK of an unexpected shape adds nothing
            continue
    _CACHE[loaded] = found
    _LAST[:] = [(count, found)]
    return found


def render(found: Tables, versions: Mapping[str, str]) -> str:
    """The source of the generated module :mod:`invocation_store.providers._sdk_tables`."""

    def names(values: frozenset[str], indent: str) -> str:
        if not values:
            return "frozenset()"
        lines, line = [], ""
        for value in sorted(values):
            piece = json.dumps(value) + ","
            if line and len(indent) + 8 + len(line) + len(piece) > 100:
                lines.append(line)
                line = ""
            line = f"{line} {piece}" if line else piece
        lines.append(line)
        inner = "".join(f"{indent}        {text}\n" for text in lines)
        return f"frozenset(\n{indent}    {{\n{inner}{indent}    }}\n{indent})"

    def table(values: Mapping[str, frozenset[str]]) -> str:
        rows = "".join(f"    {json.dumps(tag)}: {names(values[tag], '    ')},\n" for tag in sorted(values))
        return "{\n" + rows + "}"

    pinned = ", ".join(f"{name} {versions[name]}" for name in sorted(versions))
    return (
        '"""Generated by scripts/gen_provider_tables.py from the installed SDKs: do not edit.\n\n'
        f"Read from {pinned}\n(see :mod:`invocation_store.providers._sdk_types`).\n"
        '"""\n\n'
        "# fmt: off\n"
        f"SDK_VERSIONS = {json.dumps(dict(sorted(versions.items())))}\n"
        f"ANTHROPIC_BLOCKS = {table(found.anthropic_blocks)}\n"
        f"ANTHROPIC_EVENTS = {names(found.anthropic_events, '')}\n"
        f"RESPONSES_ITEMS = {table(found.responses_items)}\n"
        f"RESPONSES_CONTENT = {names(found.responses_content, '')}\n"
        f"CHAT_TOOL_CALLS = {names(found.chat_tool_calls, '')}\n"
        f"CHAT_CONTENT = {table(found.chat_content)}\n"
        f"GEMINI_PART_FIELDS = {names(found.gemini_part_fields, '')}\n"
        f"GEMINI_CALL_FIELDS = {names(found.gemini_call_fields, '')}\n"
        "# fmt: on\n"
    )
