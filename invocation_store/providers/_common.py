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
from collections.abc import Mapping, Sequence

from ..kernel import ToolCallEnvelope
from ..kernel._ijson import DuplicateMembers, load_document, violates_ijson

__all__ = [
    "DuplicateMembers",
    "document",
    "envelope",
    "get",
    "identifier",
    "items",
    "plain",
    "plain_item",
    "serialize_object",
    "text",
]


def plain(value: object) -> object:
    """``value`` as decoded-JSON data: a typed SDK object through ``model_dump()``.

    Mappings, lists, strings, numbers and None are returned as they are; an object
    whose class has a callable ``model_dump`` is dumped (python mode, so NaN and
    duplicates cannot hide behind pydantic's JSON serialization). A ``model_dump``
    that raises is a ``TypeError`` naming the class. Anything else is returned as
    is, for the caller to refuse or to treat as a malformed item.
    """
    if isinstance(value, Mapping | list | tuple | str | bytes | int | float) or value is None:
        return value
    dump = getattr(type(value), "model_dump", None)
    if not callable(dump):
        return value
    try:
        return dump(value)
    except Exception:  # noqa: BLE001 - reported as the caller's TypeError, with the type only
        raise TypeError(f"{_type_name(value)}.model_dump() failed; pass its JSON instead") from None


def plain_item(value: object) -> object:
    """One list item as plain data; an item whose ``model_dump`` fails is None (malformed)."""
    try:
        return plain(value)
    except TypeError:
        return None


def document(value: object, expected: str) -> Mapping[str, object] | Sequence[object]:
    """The object or list a parser reads, from any accepted input (CIS-ECO-1).

    JSON text (``str``, UTF-8 ``bytes``) is decoded by the I-JSON document decoder;
    an SDK object is dumped. Raises ``ValueError`` for text that is not JSON, or JSON
    that is neither an object nor an array, and ``TypeError`` for anything else;
    both messages name ``expected``.
    """
    if isinstance(value, bytes | bytearray | memoryview):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"expected {expected}: the bytes are not UTF-8 JSON text") from None
    if isinstance(value, str):
        try:
            value = load_document(str.__str__(value))
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
    if isinstance(data, DuplicateMembers) or type(data) in (dict, list, tuple):
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


def serialize_object(value: object) -> str | None:
    """Deterministic JSON text of an object-valued argument set, or None (CIS-PRE-7, CIS-ECO-2).

    ``json.dumps(sort_keys=True, ensure_ascii=False, separators=(",", ":"),
    allow_nan=False)``; None for a non-object, and for any I-JSON violation
    anywhere inside (duplicate member name, NaN/Infinity, lone surrogate, depth
    over 64, a value of no JSON type).
    """
    if not isinstance(value, Mapping) or violates_ijson(value):
        return None
    try:
        return json.dumps(
            dict(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
        )
    except Exception:  # noqa: BLE001 - unserializable input is INVALID_ARGUMENTS, never a raise
        return None


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
