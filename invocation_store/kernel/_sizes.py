"""UTF-8 byte sizing (CIS-SIZE-1). Sizes are measured, never truncated.

ASCII text (the common case) is its length, which Python keeps, so measuring it costs
nothing; other text is encoded. So a value is measured once per decision that needs
its size, and carried where one decision feeds the next: the request's size, measured
by the caller of admission (a store, before its atomic step) or by admission itself,
serves the Begin row's record limit and the byte budget (``request_bytes`` of
:func:`~._admission.check_begin` and :func:`~._admission.admit`); a completion's
charge measures only the outcome texts it adds (:func:`outcome_bytes`), never the
request again. A limit far from a text's size is decided on its length alone
(:func:`text_exceeds`: every code point is 1 to 4 bytes). Pure functions: no cache,
nothing kept between calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._models import CanonicalRecord

__all__ = [
    "outcome_bytes",
    "record_bytes",
    "text_bytes",
    "text_exceeds",
    "utf8_len",
]


def utf8_len(text: str) -> int | None:
    """Return the UTF-8 byte length of ``text``, or ``None`` if it cannot be encoded.

    A string holding a lone surrogate has no UTF-8 form; callers map ``None`` to
    their code (INVALID_ARGUMENTS or SERIALIZATION_FAILED) rather than raise.
    ASCII strings are measured without encoding.
    """
    # Unbound str methods: a str subclass cannot lie about its own size.
    if str.isascii(text):
        return str.__len__(text)
    try:
        return len(str.encode(text, "utf-8"))
    except UnicodeEncodeError:
        return None


def text_bytes(text: str) -> int:
    """Size of ``text`` in bytes, total over every string (CIS-SIZE-1).

    Each code point counts as its UTF-8 length: 1 byte for U+0000..U+007F, 2 for
    U+0080..U+07FF, 3 for U+0800..U+FFFF, 4 for U+10000..U+10FFFF. A lone surrogate
    (U+D800..U+DFFF), which has no UTF-8 form, counts 3 bytes, as its generalized
    UTF-8 encoding would: unencodable text is never counted as free. Equal to
    :func:`utf8_len` wherever that is defined.
    """
    if str.isascii(text):
        return str.__len__(text)
    return len(str.encode(text, "utf-8", "surrogatepass"))


def text_exceeds(text: str, limit: int) -> bool:
    """``text_bytes(text) > limit``, decided without measuring a text far from the limit.

    Every code point is 1 to 4 bytes, so a text of more than ``limit`` code points is
    over and one of at most ``limit // 4`` is within; only texts in between (at most
    ``limit`` code points) are measured. Refusing 137 MB of arguments is then O(1)
    (CIS-SIZE-2).
    """
    length = str.__len__(text)
    if length > limit:
        return True
    if 4 * length <= limit:
        return False
    return text_bytes(text) > limit


def _n(text: str | None) -> int:
    if text is None:
        return 0
    return str.__len__(text) if str.isascii(text) else text_bytes(text)


def outcome_bytes(record: CanonicalRecord) -> int:
    """Bytes of what a completion stores in a record: raw response, agent result, scope (CIS-RUN-6)."""
    return _n(record.raw_response) + _n(record.agent_result) + _n(record.scope)


def record_bytes(record: CanonicalRecord, request_bytes: int | None = None) -> int:
    """Bytes a record stores (CIS-SIZE-5): ids, tool name, request, raw, result, scope.

    The ids count their length (they are safe ids: ASCII); every other text its
    :func:`text_bytes`. ``request_bytes``, when given, is the request's size already
    measured by the caller (its ``text_bytes``), carried instead of measured again.
    """
    return (
        len(record.run_id)
        + len(record.tool_call_id)
        + _n(record.tool_name)
        + (_n(record.request_json) if request_bytes is None else request_bytes)
        + outcome_bytes(record)
    )
