"""Safe ids (CIS-ID-1..6).

Ids are never generated, normalised, trimmed or replaced: a safe id is used exactly
as supplied, an unsafe one is rejected. A safe id holds no ``{`` or ``}``, which is
what makes the Redis adapter's keys injective (``adapters/_redis_keys.py``,
CIS-KEY-3); the key strings themselves are the adapter's, not the kernel's.
"""

from __future__ import annotations

import re
from typing import Final

from ._codes import ErrorCode

__all__ = [
    "BLANK_CODE_POINTS",
    "MAX_ID_LENGTH",
    "check_tool_call_id",
    "is_blank",
    "is_safe_id",
]

#: Longest safe id, in characters (= bytes, ids being ASCII) (CIS-ID-1).
MAX_ID_LENGTH = 128

_SAFE_ID = re.compile(r"[A-Za-z0-9_.:\-]{1,128}")

#: The code points that make a text *blank* (CIS-ID-2, CIS-EVID-3): U+0009 TAB,
#: U+000A LF, U+000B VT, U+000C FF, U+000D CR and U+0020 SPACE. Nothing else counts,
#: whatever a language's own notion of whitespace says (U+00A0 and U+3000 do not).
BLANK_CODE_POINTS: Final = frozenset("\t\n\x0b\x0c\r ")
_BLANK: Final = "".join(sorted(BLANK_CODE_POINTS))


def is_blank(text: str) -> bool:
    """True if ``text`` is empty or consists only of :data:`BLANK_CODE_POINTS`."""
    return not str.strip(text, _BLANK)  # what is left after removing blank code points


def is_safe_id(value: object) -> bool:
    """Return True if ``value`` is an exact ``str`` of 1-128 chars from ``A-Z a-z 0-9 _ - . :``.

    Total: any object is accepted and answered (CIS-ID-1).
    """
    # Exactly ``str``: a subclass can override ``__eq__``, ``__hash__`` or
    # ``__format__`` after passing the pattern, and so be one id when checked and
    # another when keyed or compared.
    return type(value) is str and _SAFE_ID.fullmatch(value) is not None


def check_tool_call_id(value: object) -> ErrorCode | None:
    """Classify a tool_call_id: ``None`` if safe, else its code (CIS-ID-2, CIS-ID-3).

    Missing, ``None``, non-string, or blank (empty, or only U+0009..U+000D and
    U+0020: :func:`is_blank`) -> MISSING_TOOL_CALL_ID; any other string that is not
    a safe id (padding, control characters, non-ASCII,
    ``{ } * ? [ ]``, over 128 characters, or an instance of a ``str`` subclass) ->
    UNSAFE_TOOL_CALL_ID.
    """
    if not isinstance(value, str) or is_blank(value):
        return ErrorCode.MISSING_TOOL_CALL_ID
    if type(value) is not str or _SAFE_ID.fullmatch(value) is None:
        return ErrorCode.UNSAFE_TOOL_CALL_ID  # a str subclass is never a safe id
    return None
