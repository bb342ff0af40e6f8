"""Decoding trace lines strictly: one JSON object per line, I-JSON rules (CIS-ORC-2, CIS-JSON-6).

:func:`decode_line` is the reference decoder (dicts); the checker's hot path uses
:func:`_decode_fast`, which leaves nested objects as tuples of pairs for the line's
compiled checker (:mod:`._validate`) to turn into dicts, rejecting repeated names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Final, cast

from ._report import (
    MalformedTraceError,
)

# ---------------------------------------------------------------------------
# Decoding


class _DuplicateKeyError(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _DuplicateKeyError("duplicate member name")
    return obj


def _no_constant(_name: str) -> Any:
    raise ValueError("NaN and Infinity are not JSON")


_DECODER: Final = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_no_constant)
#: The decoder's C scanner (an instance attribute: ``JSONDecoder.__init__`` sets it).
_SCAN: Final = cast(Callable[[str, int], tuple[Any, int]], vars(_DECODER)["scan_once"])


#: The hot path's decoder: JSON objects become tuples of pairs (a C call, no Python
#: frame per object); the line checkers turn them into dicts and reject repeated names.
_FAST_DECODER: Final = json.JSONDecoder(object_pairs_hook=tuple, parse_constant=_no_constant)
_FAST_SCAN: Final = cast(Callable[[str, int], tuple[Any, int]], vars(_FAST_DECODER)["scan_once"])


#: Longest integer literal a trace may carry (CIS-JSON-6), and a run of digits.
_MAX_INT_DIGITS: Final = 4300
_DIGIT_RUN: Final = re.compile(r"[0-9]{4301,}")


def _decode(text: str, line: int, *, fast: bool) -> Any:
    scan, decoder = (_FAST_SCAN, _FAST_DECODER) if fast else (_SCAN, _DECODER)
    try:
        if text[:1] == "{":
            value, end = scan(text, 0)  # the C scanner directly: a line is one value
            if end != len(text) and text[end:].strip(" \t\r\n"):
                raise ValueError("extra data")
            return value
        return decoder.decode(text)
    except StopIteration:
        raise MalformedTraceError(line, "<line>", "not valid JSON") from None
    except _DuplicateKeyError:
        raise MalformedTraceError(line, "<line>", "duplicate member name") from None
    except (ValueError, RecursionError):
        longest = max((len(match) for match in _DIGIT_RUN.findall(text)), default=0)
        if longest > _MAX_INT_DIGITS:
            raise MalformedTraceError(
                line,
                "<line>",
                f"an integer literal of {longest} digits: I-JSON allows at most {_MAX_INT_DIGITS} "
                "here (CIS-JSON-6)",
            ) from None
        raise MalformedTraceError(line, "<line>", "not valid JSON") from None


def decode_line(text: str, line: int) -> dict[str, Any]:
    """Decode one trace line strictly: one JSON object, I-JSON rules (no duplicate names,
    no NaN/Infinity, integers within the conversion limit). Raises :class:`MalformedTraceError`."""
    obj = _decode(text, line, fast=False)
    if type(obj) is not dict:
        raise MalformedTraceError(line, "<line>", "a trace line is a JSON object")
    return obj


def _decode_fast(text: str, line: int) -> dict[str, Any]:
    """:func:`decode_line` for :meth:`Oracle.feed`: nested objects stay pair tuples until
    the line's checker converts them (and rejects repeated names) in place."""
    pairs = _decode(text, line, fast=True)
    if type(pairs) is not tuple:
        raise MalformedTraceError(line, "<line>", "a trace line is a JSON object")
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise MalformedTraceError(line, "<line>", "duplicate member name")
    return obj


class OverlongLine:
    """Stands for a line longer than the line limit, which the reader did not keep."""

    __slots__ = ()


#: The one :class:`OverlongLine` (``check_lines`` reports it as malformed).
OVERLONG: Final = OverlongLine()
