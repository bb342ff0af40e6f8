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

__all__ = ["check_arguments", "parse_arguments"]

# A JSON string literal (unrolled-loop form; the closing quote is optional so that an
# unterminated string is consumed once instead of rescanned from every quote, which
# would be quadratic) or one structural bracket.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)
# A \u escape of a UTF-16 surrogate: only then can the parser produce a lone one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class _RejectError(ValueError):
    """Internal: the document breaks an I-JSON rule."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise _RejectError("duplicate member name")  # CIS-JSON-2
    return result


def _constant(_name: str) -> Any:
    raise _RejectError("NaN or Infinity")  # CIS-JSON-3


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 overflows to inf: not representable
        raise _RejectError("number out of range")  # CIS-JSON-3
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
    """:func:`check_arguments` that also returns what it parsed (CIS-PERF-2).

    The parsed object when ``text`` is one I-JSON object (same rules), else
    INVALID_ARGUMENTS. The object is fresh: nothing else holds it.
    """
    if type(text) is not str:  # a str subclass could lie about its own characters
        return ErrorCode.INVALID_ARGUMENTS
    try:
        if not text.isascii():
            text.encode("utf-8")  # raises on a raw lone surrogate (CIS-JSON-4)
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
