"""I-JSON (RFC 7493) validation of tool-call arguments (CIS-JSON-1..6).

:func:`check_arguments` is total: it returns ``None`` for a valid object or
``ErrorCode.INVALID_ARGUMENTS`` for anything else, and never lets ``ValueError``,
``RecursionError`` or ``UnicodeError`` escape. The nesting depth is measured by a
linear scan *before* parsing, so 100,000 levels of nesting never reach the parser.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ._codes import ErrorCode

__all__ = [
    "DOCUMENT_MAX_DEPTH",
    "UNREPRESENTABLE",
    "DuplicateMembers",
    "check_arguments",
    "load_document",
    "parse_arguments",
    "violates_ijson",
]

# A JSON string literal (unrolled-loop form; the closing quote is optional so that an
# unterminated string is consumed once instead of rescanned from every quote, which
# would be quadratic) or one structural bracket.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)
# A \u escape of a UTF-16 surrogate: only then can the parser produce a lone one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class _RejectError(ValueError):
    """Internal: the document breaks an I-JSON rule."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's members; a duplicate member name is refused (CIS-JSON-2)."""
    result = dict(pairs)
    if len(result) != len(pairs):
        raise _RejectError("duplicate member name")
    return result


def _constant(_name: str) -> Any:
    """``NaN``, ``Infinity`` and ``-Infinity`` are refused (CIS-JSON-3)."""
    raise _RejectError("NaN or Infinity")


def _float(text: str) -> float:
    """A number; one that overflows to infinity is refused (CIS-JSON-3)."""
    value = float(text)
    if not math.isfinite(value):  # 1e999 overflows to inf: not representable
        raise _RejectError("number out of range")
    return value


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_float)


def _depth_exceeds(text: str, max_depth: int) -> bool:
    if text.count("{") + text.count("[") <= max_depth:
        return False
    depth = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in ("{", "["):
            depth += 1
            if depth > max_depth:
                return True
        elif token in ("}", "]"):
            depth -= 1
    return False


def check_arguments(text: object, max_depth: int = 64) -> ErrorCode | None:
    """Return ``None`` if ``text`` is one I-JSON object, else INVALID_ARGUMENTS.

    Rules, each with its requirement: a ``str`` holding exactly one JSON value, an
    object, with no leading BOM (CIS-JSON-1); no duplicate member names
    (CIS-JSON-2); no NaN, Infinity or number overflowing a double (CIS-JSON-3);
    valid Unicode, i.e. no lone surrogate raw or escaped (CIS-JSON-4); nesting depth
    at most ``max_depth`` (CIS-JSON-5); integers within Python's default
    int-conversion limit (4300 digits) (CIS-JSON-6).
    """
    parsed = parse_arguments(text, max_depth)
    return parsed if isinstance(parsed, ErrorCode) else None


def parse_arguments(text: object, max_depth: int = 64) -> dict[str, Any] | ErrorCode:
    """:func:`check_arguments` that also returns what it parsed (CIS-PERF-2, CIS-JSON-4).

    The parsed object when ``text`` is one I-JSON object (same rules), else
    INVALID_ARGUMENTS. The object is fresh: nothing else holds it.
    """
    if type(text) is not str:  # a str subclass could lie about its own characters
        return ErrorCode.INVALID_ARGUMENTS
    try:
        if not text.isascii():
            text.encode("utf-8")  # raises on a raw lone surrogate
        if _depth_exceeds(text, max_depth):
            return ErrorCode.INVALID_ARGUMENTS
        value = _DECODER.decode(text)
        if not isinstance(value, dict):
            return ErrorCode.INVALID_ARGUMENTS
        if _SURROGATE_ESCAPE.search(text) is not None:
            # Valid pairs were combined by the parser; what remains is lone.
            json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (ValueError, RecursionError, UnicodeError, TypeError):
        # json.JSONDecodeError, _RejectError and int-limit errors are ValueErrors.
        return ErrorCode.INVALID_ARGUMENTS
    return value


# ---------------------------------------------------------------------------
# Whole documents (transcripts, provider payloads): the same rules, marked in place
#
# A provider payload holds many calls; one call's bad arguments must not make the
# others unreadable. ``load_document`` therefore parses by the rules above but,
# instead of failing, marks what breaks them: an object with a duplicate member
# name decodes as a :class:`DuplicateMembers` dict (last value kept, like
# ``json.loads``), and NaN, Infinity, a number overflowing a double or an integer
# past the conversion limit decodes as :data:`UNREPRESENTABLE`. ``violates_ijson``
# then finds a mark, a lone surrogate or excess depth anywhere inside one call's
# arguments (CIS-ECO-2).

#: Nesting depth allowed for a whole document (a transcript or a payload): the call
#: arguments inside are held to ``max_depth`` (64) by :func:`violates_ijson`.
DOCUMENT_MAX_DEPTH = 512


class DuplicateMembers(dict[str, Any]):
    """An object decoded by :func:`load_document` that had a duplicate member name."""


class _Unrepresentable:
    """NaN, Infinity, an overflowing number or an over-long integer, as decoded by
    :func:`load_document`: no JSON value a reader of I-JSON could agree on."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNREPRESENTABLE"


#: The one marker :func:`load_document` puts where a number breaks CIS-JSON-3/6.
UNREPRESENTABLE: Any = _Unrepresentable()


def _marking_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    return result if len(result) == len(pairs) else DuplicateMembers(result)


def _marking_float(text: str) -> Any:
    value = float(text)
    return value if math.isfinite(value) else UNREPRESENTABLE


def _marking_int(text: str) -> Any:
    """An integer, or :data:`UNREPRESENTABLE` past the int-conversion limit (CIS-JSON-6)."""
    try:
        return int(text)
    except ValueError:  # past the int-conversion limit
        return UNREPRESENTABLE


_MARKING_DECODER = json.JSONDecoder(
    object_pairs_hook=_marking_pairs,
    parse_constant=lambda _name: UNREPRESENTABLE,
    parse_float=_marking_float,
    parse_int=_marking_int,
)


def load_document(text: str, max_depth: int = DOCUMENT_MAX_DEPTH) -> Any:
    """Parse one JSON document, marking I-JSON violations instead of failing on them.

    Raises ``json.JSONDecodeError`` (a ``ValueError``) for text that is not JSON, and
    ``ValueError("nested too deeply")`` beyond ``max_depth`` levels (measured before
    parsing, CIS-JSON-5). Marks: :class:`DuplicateMembers`, :data:`UNREPRESENTABLE`
    (CIS-ECO-2); lone surrogates stay in the strings and are found by
    :func:`violates_ijson`.
    """
    if type(text) is not str:
        raise TypeError("a JSON document is a str")
    if _depth_exceeds(text, max_depth):
        raise ValueError("nested too deeply")
    return _MARKING_DECODER.decode(text)


def violates_ijson(value: object, max_depth: int = 64) -> bool:
    """True if ``value`` (decoded JSON, e.g. one call's arguments) breaks an I-JSON rule.

    Found anywhere inside: a :class:`DuplicateMembers` object (CIS-JSON-2), the
    :data:`UNREPRESENTABLE` mark or a non-finite float (CIS-JSON-3), a string or
    member name with a lone surrogate (CIS-JSON-4), nesting deeper than
    ``max_depth`` (CIS-JSON-5), a member name that is not a string, or a value of no
    JSON type. Iterative, so hostile depth or a cycle never raises (a cycle is
    reported as too deep).
    """
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list | tuple) and depth > max_depth:
            return True
        if isinstance(item, DuplicateMembers):
            return True
        if isinstance(item, dict):
            for key, member in item.items():
                if type(key) is not str or not _valid_unicode(key):
                    return True
                stack.append((member, depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((member, depth + 1) for member in item)
        elif isinstance(item, str):
            if not _valid_unicode(item):
                return True
        elif isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif item is not None and not isinstance(item, bool | int):
            return True
    return False


def _valid_unicode(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeError:
        return False
    return True
