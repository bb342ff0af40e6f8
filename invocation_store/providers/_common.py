"""What every provider parser shares: reading what the harness has, I-JSON, envelopes.

Inputs (CIS-ECO-1). A parser is given what a harness naturally holds: the
provider SDK's typed object (any object whose class has a ``model_dump`` method,
i.e. the pydantic models of ``openai``, ``anthropic`` and ``google-genai``; no SDK is
imported here), its ``model_dump()`` / ``model_dump(mode="json")`` dict, the JSON
text (``str``, ``bytes``) of either, or a sub-object (a message, an output list, a
content list, one tool call). Lists and mappings may hold typed objects: they are
read through ``model_dump`` where they are met. Anything else is a programming
error of the caller and raises ``TypeError`` (not an object, a list or JSON text)
or ``ValueError`` (JSON text that is not JSON, or an object of another shape),
naming what was expected: never a silent empty list.

JSON text is parsed with the kernel's I-JSON document decoder, which marks a
duplicate member name, NaN/Infinity or an unrepresentable number where it occurs;
object-valued arguments with such a mark, a lone surrogate or excess depth
anywhere inside become ``arguments=None``, i.e. INVALID_ARGUMENTS, the same rule
string arguments meet in preflight (CIS-ECO-2).

Inside a call list parsers stay total: a malformed call item becomes an envelope
that preflight rejects with the right code (each call needs an answer), never a
raise and never a dropped item.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from json.encoder import encode_basestring
from typing import Any

from .._logs import package_logger
from ..kernel import DuplicateMembers, Limits, ToolCallEnvelope, is_safe_id, load_document

_ENCODE_STRING = encode_basestring

__all__ = [
    "DEFAULT_MAX_TEXT_BYTES",
    "DEFAULT_REQUEST_BYTES",
    "DuplicateMembers",
    "Fields",
    "document",
    "envelope",
    "get",
    "identifier",
    "items",
    "model_fields",
    "oversized_text",
    "plain",
    "plain_item",
    "report_unknown",
    "safe_tag",
    "serialize_object",
    "text",
    "text_size_error",
]


class Fields(dict[str, object]):
    """A typed SDK object's fields, one level deep: its own values, nothing dumped (CIS-SIZE-2).

    The keys are those ``model_dump()`` gives (field names, computed fields, extras);
    the values are the object's own attributes, so a nested model is still a model
    (read through :func:`plain` when it is reached) and an arguments ``dict`` is the
    SDK's own, measured by :func:`serialize_object` as it is written. ``module`` and
    ``name`` are the class's, by which :mod:`._shapes` knows the provider.
    """

    __slots__ = ("module", "name")

    def __init__(self, values: Mapping[str, object], module: str, name: str) -> None:
        super().__init__(values)
        self.module = module
        self.name = name


def model_fields(value: object) -> Fields | None:
    """The :class:`Fields` of a pydantic (v2) model instance, None for anything else.

    Reads the class's ``model_fields`` (fields excluded from dumps are left out),
    ``model_computed_fields`` and the instance's extras: O(number of fields), whatever
    the values hold. Raises ``TypeError`` naming the class when an attribute cannot be
    read.
    """
    cls = type(value)
    declared = getattr(cls, "model_fields", None)
    if not isinstance(declared, dict):
        return None
    values: dict[str, object] = {}
    try:
        for name, info in declared.items():
            if getattr(info, "exclude", None) is True:
                continue
            try:
                values[name] = getattr(value, name)
            except AttributeError:  # a model_construct()-ed object without the field
                continue
        computed = getattr(cls, "model_computed_fields", None)
        for name in computed if isinstance(computed, dict) else ():
            values[name] = getattr(value, name)
        extra = getattr(value, "__pydantic_extra__", None)
        if isinstance(extra, dict):
            values.update(extra)
    except Exception:  # noqa: BLE001 - reported as the caller's TypeError, with the type only
        raise TypeError(f"the fields of {_type_name(value)} cannot be read; pass its JSON instead") from None
    return Fields(values, str(cls.__module__), str(cls.__name__))


def plain(value: object) -> object:
    """``value`` as decoded-JSON-like data, one level deep (CIS-ECO-1, CIS-SIZE-2).

    Mappings, lists, strings, numbers and None are returned as they are. A pydantic
    model (the SDKs' typed objects) becomes its :class:`Fields`: nothing below its own
    fields is read, so a huge argument object costs nothing until it is measured.
    Another object whose class has a callable ``model_dump`` is dumped in full (python
    mode, so NaN and duplicates cannot hide behind a JSON serialization). A field or
    ``model_dump`` that cannot be read is a ``TypeError`` naming the class. Anything
    else is returned as is, for the caller to refuse or to treat as a malformed item.
    """
    if isinstance(value, Mapping | list | tuple | str | bytes | int | float) or value is None:
        return value
    fields = model_fields(value)
    if fields is not None:
        return fields
    dump = getattr(type(value), "model_dump", None)
    if not callable(dump):
        return value
    try:
        return dump(value)
    except Exception:  # noqa: BLE001 - reported as the caller's TypeError, with the type only
        raise TypeError(f"{_type_name(value)}.model_dump() failed; pass its JSON instead") from None


def plain_item(value: object) -> object:
    """One list item as plain data; an item whose fields cannot be read is None (malformed)."""
    try:
        return plain(value)
    except TypeError:
        return None


#: The largest JSON text a parser decodes when not told one (``max_text_bytes``), in UTF-8
#: bytes: 32 MiB, the command line's transcript limit too. A model turn holding 128 calls
#: at the default 256 KiB request limit fits.
DEFAULT_MAX_TEXT_BYTES: int = 32 * 1024 * 1024


def text_size_error(size: int | None, limit: int, expected: str) -> ValueError:
    """The error for JSON text over ``limit`` bytes (``size``: its size when known)."""
    over = f"{size} bytes" if size is not None else f"more than {limit} bytes"
    return ValueError(
        f"expected {expected}: the JSON text is {over}, over the limit of {limit} UTF-8 bytes "
        "(max_text_bytes); it was not decoded"
    )


def _checked_text(value: str, limit: int, expected: str) -> str:
    """``value`` after its UTF-8 size is checked against ``limit``, before any decoding.

    A text of more code points than the limit is refused by its length alone (each
    code point is at least one byte); otherwise its bytes are counted (a lone
    surrogate as the three bytes it would take), which is bounded by the limit.
    """
    length = str.__len__(value)
    if length > limit:
        raise text_size_error(None, limit, expected)
    if not value.isascii():
        size = len(value.encode("utf-8", "surrogatepass"))
        if size > limit:
            raise text_size_error(size, limit, expected)
    return value


def document(
    value: object, expected: str, max_text_bytes: int | None = None
) -> Mapping[str, object] | Sequence[object]:
    """The object or list a parser reads, from any accepted input (CIS-ECO-1, CIS-SIZE-2).

    JSON text (``str``, UTF-8 ``bytes``) larger than ``max_text_bytes`` UTF-8 bytes
    (default :data:`DEFAULT_MAX_TEXT_BYTES`) is refused with ``ValueError`` before it
    is decoded, so time and memory are bounded by the limit; within it, it is decoded
    by the I-JSON document decoder. A typed SDK object is read as its
    :class:`Fields` (nothing below them is dumped). Raises ``ValueError`` for text
    that is not JSON, or JSON that is neither an object nor an array, and
    ``TypeError`` for anything else; the messages name ``expected``.
    """
    limit = DEFAULT_MAX_TEXT_BYTES if max_text_bytes is None else max_text_bytes
    if isinstance(value, bytes | bytearray | memoryview):
        size = memoryview(value).nbytes
        if size > limit:
            raise text_size_error(size, limit, expected)
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"expected {expected}: the bytes are not UTF-8 JSON text") from None
    if isinstance(value, str):
        checked = _checked_text(str.__str__(value), limit, expected)
        try:
            value = load_document(checked)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"expected {expected}: the text is not JSON ({exc.msg} at line {exc.lineno}, "
                f"column {exc.colno})"
            ) from None
        except ValueError:
            raise ValueError(f"expected {expected}: the JSON text is nested too deeply") from None
        if not isinstance(value, dict | list):
            raise ValueError(f"expected {expected}: the JSON text is a {_json_type(value)}")
        return value
    data = plain(value)
    if isinstance(data, DuplicateMembers | Fields) or type(data) in (dict, list, tuple):
        return data  # type: ignore[return-value]
    if isinstance(data, Mapping | list | tuple):
        # A mapping or list of another class is read once, into a plain copy, so that
        # overridden lookups cannot answer differently later (or raise mid-parse).
        try:
            return dict(data) if isinstance(data, Mapping) else list(data)
        except Exception:  # noqa: BLE001 - reported as the caller's TypeError, with the type only
            raise TypeError(f"expected {expected}; the {_type_name(value)} cannot be read") from None
    raise TypeError(f"expected {expected}; got a {_type_name(value)}")


def get(obj: object, key: str) -> object:
    """``obj[key]`` read as plain data if ``obj`` is a mapping holding it, else None.

    Never raises on a hostile mapping; a typed SDK value found there is dumped.
    """
    if not isinstance(obj, Mapping):
        return None
    try:
        value = obj.get(key)
    except Exception:  # noqa: BLE001 - a hostile Mapping must not make a parser raise
        return None
    try:
        return plain(value)
    except TypeError:
        return None


def items(value: object, what: str) -> Sequence[object]:
    """``value`` as a list of items (JSON array, list or tuple), ``[]`` for None.

    Raises ``ValueError`` naming ``what`` when it is something else: a container
    whose list is not a list is a malformed payload, never "no calls".
    """
    if value is None:
        return ()
    if isinstance(value, list | tuple):
        return value
    raise ValueError(f"{what} is not a list")


def identifier(value: object) -> str | None:
    """The id exactly as supplied, or None when absent, not a string or empty (CIS-ID-2)."""
    copy = text(value)
    return copy if copy else None


def text(value: object) -> str | None:
    """``value`` if it is a string (an exact ``str`` copy), else None (also for an object
    claiming to be a ``str`` through ``__class__``)."""
    return str.__str__(value) if issubclass(type(value), str) else None


#: The request limit parsers measure object arguments against when not told one: the
#: kernel's default ``Limits().request_bytes`` (256 KiB of UTF-8).
DEFAULT_REQUEST_BYTES: int = Limits().request_bytes


def serialize_object(value: object, request_bytes: int | None = None, max_depth: int = 64) -> str | None:
    """Deterministic JSON text of an object-valued argument set, measured as it is written.

    CIS-PRE-7, CIS-ECO-2, CIS-SIZE-2.

    The text is what ``json.dumps(value, sort_keys=True, ensure_ascii=False,
    separators=(",", ":"), allow_nan=False)`` would give, written piece by piece while
    its UTF-8 size is counted. Returns:

    - the whole text, for an I-JSON object of at most ``request_bytes`` bytes
      (default :data:`DEFAULT_REQUEST_BYTES`; pass the boundary's
      ``limits.request_bytes``);
    - as soon as the count passes ``request_bytes``: :func:`oversized_text` (more
      than ``request_bytes`` bytes, an unclosed object that can never parse), so
      preflight answers REQUEST_TOO_LARGE and nothing past the limit is walked, copied
      or kept: time and memory are bounded by the limit, not by the input;
    - None for a non-object, and for an I-JSON violation met before the limit
      (duplicate member name, NaN/Infinity, a lone surrogate, depth over
      ``max_depth``, a member name that is not a string, an integer past Python's
      conversion limit, a value of no JSON type): INVALID_ARGUMENTS.

    ``value`` may be a typed SDK object (a pydantic model), and so may any value inside:
    each is read through its fields (:func:`model_fields`) when it is reached, never
    dumped in full first. Members are written in sorted order, so which of the two
    refusals a call meets (both before any record or execution) is decided by that
    fixed order.
    """
    limit = DEFAULT_REQUEST_BYTES if request_bytes is None else request_bytes
    if not isinstance(value, Mapping):
        try:
            value = model_fields(value)
        except TypeError:
            return None
    if not isinstance(value, Mapping) or isinstance(value, DuplicateMembers):
        return None
    try:
        top: dict[object, object] = dict(value)
    except Exception:  # noqa: BLE001 - an unreadable mapping is INVALID_ARGUMENTS, never a raise
        return None
    writer = _MeasuredWriter(limit, max_depth)
    try:
        writer.write(top)
    except _OversizeError:
        return oversized_text(limit)
    except _ViolationError:
        return None
    return "".join(writer.pieces)


def oversized_text(limit: int) -> str:
    """A text of ``limit + 1`` bytes that can never parse (an unclosed object): what a
    parser hands preflight for arguments past the limit, so that it answers
    REQUEST_TOO_LARGE without the real text ever being built (CIS-SIZE-2)."""
    return "{" + " " * limit


class _OversizeError(Exception):
    """Internal: the text passed the limit."""


class _ViolationError(Exception):
    """Internal: the value breaks an I-JSON rule."""


class _MeasuredWriter:
    """Writes one value as compact, key-sorted JSON into ``pieces``, counting UTF-8 bytes.

    Iterative (a stack of open containers, each read lazily), so no depth raises
    ``RecursionError`` and nothing past the limit is visited; a cycle is refused as too
    deep. A container whose member count alone passes the limit (each member needs at
    least 2 bytes with its separator) is refused before it is read or sorted, and a
    string is measured by its length before it is escaped, so one that alone passes
    the limit is never copied. A lone surrogate is refused (CIS-JSON-4); an integer past
    the int-conversion limit is unrepresentable (CIS-JSON-6).
    """

    def __init__(self, limit: int, max_depth: int) -> None:
        self.limit = limit
        self.max_depth = max_depth
        self.size = 0
        self.pieces: list[str] = []

    def _add(self, piece: str) -> None:
        if piece.isascii():
            self.size += len(piece)
        else:
            try:
                self.size += len(piece.encode("utf-8"))
            except UnicodeEncodeError:  # a lone surrogate
                raise _ViolationError from None
        if self.size > self.limit:
            raise _OversizeError
        self.pieces.append(piece)

    def _string(self, text: str) -> None:
        # Escaping only lengthens a string and every code point is at least one byte.
        if self.size + str.__len__(text) + 2 > self.limit:
            raise _OversizeError
        self._add(_encode_string(text))

    def write(self, value: object) -> None:
        # Each frame: (members left to write, closing bracket, depth, is an object).
        stack: list[tuple[Iterator[Any], str, int, bool]] = []
        self._value(value, 1, stack)
        while stack:
            members, closing, depth, is_object = stack[-1]
            member: Any = next(members, _END)
            if member is _END:
                stack.pop()
                self._add(closing)
                continue
            index: int = member[0]
            child: object
            if index:
                self._add(",")
            if is_object:
                key, child = member[1]
                self._string(key)
                self._add(":")
            else:
                child = member[1]
            self._value(child, depth + 1, stack)

    def _value(self, node: object, depth: int, stack: list[tuple[Iterator[Any], str, int, bool]]) -> None:
        if isinstance(node, str):
            self._string(node)
        elif node is None:
            self._add("null")
        elif node is True:
            self._add("true")
        elif node is False:
            self._add("false")
        elif isinstance(node, int):
            try:
                self._add(int.__repr__(node))
            except ValueError:  # past the int-conversion limit
                raise _ViolationError from None
        elif isinstance(node, float):
            if not math.isfinite(node):
                raise _ViolationError
            self._add(float.__repr__(node))
        elif isinstance(node, dict):
            if depth > self.max_depth or isinstance(node, DuplicateMembers):
                raise _ViolationError
            if self.size + 2 * len(node) > self.limit:
                raise _OversizeError  # '"":0,' per member at the least
            if any(type(key) is not str for key in node):
                raise _ViolationError
            self._add("{")
            members = sorted(node.items(), key=_first)
            stack.append((enumerate(members), "}", depth, True))
        elif isinstance(node, list | tuple):
            if depth > self.max_depth:
                raise _ViolationError
            if self.size + len(node) > self.limit:
                raise _OversizeError
            self._add("[")
            stack.append((enumerate(node), "]", depth, False))
        else:
            try:
                fields = model_fields(node)  # a typed SDK value: its fields, as model_dump() gives
            except TypeError:
                fields = None
            if fields is None:
                raise _ViolationError  # no JSON type
            self._value(dict(fields), depth, stack)


_END = object()


def _first(pair: tuple[str, object]) -> str:
    return pair[0]


def _encode_string(text: str) -> str:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise _ViolationError from None
    return _ENCODE_STRING(text)


def safe_tag(kind: object) -> str:
    """A type tag or field name fit for a message or a log record (at most 64 printable
    ASCII characters, no quotes, braces or backslashes), else ``"unknown"``."""
    if not issubclass(type(kind), str):
        return "unknown"
    tag = str.__str__(kind)
    ok = tag.isascii() and tag.isprintable() and 0 < len(tag) <= 64 and not set(tag) & set("{}\"'\\")
    return tag if ok else "unknown"


#: Where a parser reports an item it skipped (CIS-OBS-2: ``run_id`` on the record).
_LOG = package_logger("invocation_store.providers")


def report_unknown(provider: str, run_id: object, position: int, what: str) -> None:
    """Report one item of a kind this version does not know, skipped without stopping the turn.

    CIS-ECO-7, CIS-OBS-2. A WARNING on the logger ``invocation_store.providers``:
    ``"<provider>: skipped item <position> (<what>), a kind this version does not
    know; the turn's other calls are read"``, with ``run_id`` (the safe run id, else
    None) and ``tool_call_id`` None on the record. ``what`` names the item's type tag
    or fields, already made safe (:func:`safe_tag`); no payload is logged.
    """
    safe_run = str.__str__(run_id) if issubclass(type(run_id), str) and is_safe_id(run_id) else None
    _LOG.warning(
        "%s: skipped item %d (%s), a kind this version does not know; the turn's other calls are read",
        provider,
        position,
        what,
        extra={"run_id": safe_run, "tool_call_id": None},
    )


def cut_last(found: list[ToolCallEnvelope]) -> list[ToolCallEnvelope]:
    """``found`` with its last call's arguments dropped: a turn that stopped on its output
    limit may end in a cut call, answered INVALID_ARGUMENTS and never run (CIS-ECO-6)."""
    if not found:
        return found
    last = found[-1]
    return [
        *found[:-1],
        ToolCallEnvelope(
            run_id=last.run_id, tool_call_id=last.tool_call_id, tool_name=last.tool_name, arguments=None
        ),
    ]


def envelope(
    run_id: str, tool_call_id: object, tool_name: object, arguments: str | None, item: object = None
) -> ToolCallEnvelope:
    """An envelope of the exact fields; ``arguments=None`` when the call item itself
    carries a duplicate member name (which of its values is the call is unknowable)."""
    if isinstance(item, DuplicateMembers):
        arguments = None
    return ToolCallEnvelope(
        run_id=run_id, tool_call_id=identifier(tool_call_id), tool_name=text(tool_name), arguments=arguments
    )


def _type_name(value: object) -> str:
    name = type(value).__name__
    return name if name.isascii() and name.isidentifier() and len(name) <= 64 else "object"


def _json_type(value: object) -> str:
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"
