"""Strict decoders of Redis replies, shared by every operation of the Redis store.

The encoding of values (see ``_redis_scripts.py`` for the layout): str as UTF-8, ints
as decimal strings, ``None`` as an absent hash field, the raw response in its own
STRING key. Decoding is strict: an unknown or missing field, a non-decimal integer, an
unknown enum value, invalid UTF-8, or a record whose run id / tool_call_id differ from
the ones asked for (CIS-STORE-6) raise :class:`CorruptReplyError`, which the adapters
turn into :class:`~invocation_store.adapters.StoreUnavailableError`. Nothing here does
I/O or reads a clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeAlias

import attrs

from ..kernel import (
    PROGRESS_FIELDS,
    CanonicalRecord,
    ErrorCode,
    EvidenceStatus,
    InvocationStatus,
    ProgressView,
    RunState,
    RunStatus,
    is_safe_id,
    is_well_formed,
    is_well_formed_outcome,
    is_well_formed_run,
    lifetime_is_intact,
)
from ._redis_scripts import RUN_FIELDS

__all__ = [
    "CODES",
    "MAX_EXACT_INT",
    "MIN_VERSION",
    "CorruptReplyError",
    "Reply",
    "check_int",
    "decode_embedded",
    "decode_ids",
    "decode_int",
    "decode_progress",
    "decode_progress_reply",
    "decode_record",
    "decode_run",
    "decode_text",
    "finish_ttl",
    "parse_version",
    "refuse_corrupt",
    "split_reply",
    "split_words",
]

#: Integers at or above this are refused: Lua numbers are IEEE doubles.
MAX_EXACT_INT: Final = 2**53

#: Minimum server version (CIS-STORE-7).
MIN_VERSION: Final = (6, 2)

Reply: TypeAlias = Sequence[object]

#: Fields of a record HASH: every CanonicalRecord field but the raw response, which
#: lives in its own STRING key.
_RECORD_FIELDS: Final = frozenset(field.name for field in attrs.fields(CanonicalRecord)) - {"raw_response"}
#: Optional record fields, in the order of COMPLETE_SCRIPT's mask (``tests/oracle/test_field_survival.py``
#: holds this, RUN_FIELDS and decode_record / decode_run to the attrs fields).
_OPTIONAL_FIELDS: Final = ("evidence_status", "error_code", "raw_response", "agent_result", "scope")
_REQUIRED_FIELDS: Final = _RECORD_FIELDS - frozenset(_OPTIONAL_FIELDS)


class CorruptReplyError(ValueError):
    """Redis answered something that is not what the store wrote (CIS-STORE-6).

    ``cause`` is a fixed label (``CorruptRecord``, ``IdentityMismatch``, ...); the
    message never carries the reply.
    """

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


#: Error codes by their wire spelling (a script reply naming another is corrupt).
CODES: Final = {code.value: code for code in ErrorCode}


def decode_text(value: object) -> str:
    """A reply element as str: bytes are strict UTF-8, str passes, anything else is corrupt."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, str):
        return value
    raise CorruptReplyError("UnexpectedReply")


def decode_int(text: str) -> int:
    """A stored non-negative decimal integer; anything else is corrupt."""
    if not (text.isascii() and text.isdigit()):
        raise CorruptReplyError("CorruptInteger")
    return int(text)


def _pairs(flat: Sequence[object]) -> dict[str, str]:
    if len(flat) % 2:
        raise CorruptReplyError("UnexpectedReply")
    return {decode_text(flat[i]): decode_text(flat[i + 1]) for i in range(0, len(flat), 2)}


def _array(reply: object) -> Sequence[object]:
    """A reply that must be an array (a list or tuple, as redis-py answers one); anything else
    (an integer, a nil, a string, a map) is ``UnexpectedReply``, never a TypeError."""
    if not isinstance(reply, list | tuple):
        raise CorruptReplyError("UnexpectedReply")
    return reply


def _mapping(raw: Mapping[Any, object] | Sequence[object]) -> dict[str, str]:
    if isinstance(raw, Mapping):
        return {decode_text(k): decode_text(v) for k, v in raw.items()}
    return _pairs(_array(raw))


def decode_record(
    raw: Mapping[Any, object] | Sequence[object], raw_response: object, run_id: str, tool_call_id: str
) -> CanonicalRecord | None:
    """Decode a record HASH (HGETALL mapping or flat pairs) and its raw STRING; ``None`` if absent.

    ``raw_response`` is the raw STRING's value (``None`` when absent or not read).
    Raises :class:`CorruptReplyError` for unknown/missing fields or bad values, and
    ``IdentityMismatch`` when the record is not the one asked for (CIS-STORE-6).
    Expiry is not judged here (see :func:`~invocation_store.kernel.phase_of`).
    """
    fields = _mapping(raw)
    if not fields:
        return None
    names = fields.keys()
    if not (names <= _RECORD_FIELDS and names >= _REQUIRED_FIELDS):
        raise CorruptReplyError("CorruptRecord")
    if fields["run_id"] != run_id or fields["tool_call_id"] != tool_call_id:
        raise CorruptReplyError("IdentityMismatch")
    get = fields.get
    evidence = get("evidence_status")
    error_code = get("error_code")
    record = CanonicalRecord(
        run_id=run_id,
        tool_call_id=tool_call_id,
        tool_name=fields["tool_name"],
        invocation_token=fields["invocation_token"],
        sequence=decode_int(fields["sequence"]),
        status=InvocationStatus(fields["status"]),
        evidence_status=None if evidence is None else EvidenceStatus(evidence),
        error_code=None if error_code is None else ErrorCode(error_code),
        request_json=fields["request_json"],
        raw_response=None if raw_response is None else decode_text(raw_response),
        agent_result=get("agent_result"),
        scope=get("scope"),
        created_at_ms=decode_int(fields["created_at_ms"]),
        updated_at_ms=decode_int(fields["updated_at_ms"]),
        expires_at_ms=decode_int(fields["expires_at_ms"]),
    )
    if not is_well_formed(record):  # no transition produces it: tampered or corrupt
        raise CorruptReplyError("CorruptRecord")
    return record


def decode_embedded(items: Sequence[object], run_id: str, tool_call_id: str) -> CanonicalRecord | None:
    """A script's ``<"1"|"0">, <raw>, <field/value pairs...>`` as a record."""
    if len(_array(items)) < 2:
        raise CorruptReplyError("UnexpectedReply")
    raw = items[1] if decode_text(items[0]) == "1" else None
    return decode_record(items[2:], raw, run_id, tool_call_id)


_STATUSES: Final = {status.value.encode(): status for status in InvocationStatus}
_EVIDENCE: Final = {evidence.value.encode(): evidence for evidence in EvidenceStatus}
_PROGRESS_WIDTH: Final = len(PROGRESS_FIELDS)


def _as_bytes(value: object) -> bytes | None:
    """A reply element as bytes (``decode_responses=True`` clients answer str)."""
    if value is None or type(value) is bytes:
        return value
    if type(value) is str:
        return value.encode()
    raise CorruptReplyError("UnexpectedReply")


def decode_progress(values: Sequence[object], run_id: str, tool_call_id: str) -> ProgressView | None:
    """Decode one record's :data:`~invocation_store.kernel.PROGRESS_FIELDS` values; ``None`` if absent.

    ``run_id`` and ``tool_call_id`` are the (safe) ids asked for. Raises
    :class:`CorruptReplyError` for a partial record or bad values, and
    ``IdentityMismatch`` when the record is not the one asked for (CIS-STORE-6,
    CIS-PERF-3). Expiry is not judged here.
    """
    if len(_array(values)) != _PROGRESS_WIDTH:
        raise CorruptReplyError("UnexpectedReply")
    return _decode_progress(
        [_as_bytes(value) for value in values], run_id.encode(), run_id, tool_call_id.encode(), tool_call_id
    )


def _decode_progress(
    values: Sequence[bytes | None], run_wire: bytes, run_id: str, tcid_wire: bytes, tool_call_id: str
) -> ProgressView | None:
    # The hot loop of a progress read: ids are compared and enums and integers
    # decoded as bytes; only the three free-text fields are decoded to str.
    run, tcid, name, sequence, status, evidence, result, scope, expires = values
    if run is None and all(value is None for value in values):
        return None
    if run != run_wire or tcid != tcid_wire:
        if run is None or tcid is None:
            raise CorruptReplyError("CorruptRecord")
        raise CorruptReplyError("IdentityMismatch")
    if name is None or sequence is None or expires is None or not (sequence.isdigit() and expires.isdigit()):
        raise CorruptReplyError("CorruptRecord")
    status_value = _STATUSES.get(status)  # type: ignore[arg-type]
    evidence_value = None if evidence is None else _EVIDENCE.get(evidence)
    if status_value is None or (evidence is not None and evidence_value is None):
        raise CorruptReplyError("CorruptRecord")
    view = ProgressView(
        run_id,
        tool_call_id,
        name.decode(),
        int(sequence),
        status_value,
        evidence_value,
        None if result is None else result.decode(),
        None if scope is None else scope.decode(),
        int(expires),
    )
    if not is_well_formed_outcome(view):  # the ids are the safe ones asked for
        raise CorruptReplyError("CorruptRecord")
    return view


def decode_progress_reply(
    reply: object, run_id: str, tool_call_ids: Sequence[str]
) -> list[ProgressView | None]:
    """Decode a PROGRESS_SCRIPT reply for the safe ``tool_call_ids`` (in the order sent) of run ``run_id``.

    One view (or None, absent) per id; raises :class:`CorruptReplyError` as
    :func:`decode_progress` does, or for a reply of the wrong shape.
    """
    width = _PROGRESS_WIDTH
    if not isinstance(reply, list) or len(reply) != width * len(tool_call_ids):
        raise CorruptReplyError("UnexpectedReply")
    if not all(value is None or type(value) is bytes for value in reply):
        reply = [_as_bytes(value) for value in reply]
    run_wire = run_id.encode()
    return [
        _decode_progress(reply[index * width : index * width + width], run_wire, run_id, tcid.encode(), tcid)
        for index, tcid in enumerate(tool_call_ids)
    ]


_RUN_STATUSES: Final = frozenset(status.value for status in RunStatus)


def decode_run(values: Sequence[object], run_id: str) -> RunState | None:
    """Decode run values in RUN_FIELDS order (HMGET or a script reply); ``None`` if absent.

    Raises :class:`CorruptReplyError` for a partial or foreign run (CIS-STORE-6).
    """
    if len(_array(values)) != len(RUN_FIELDS):
        raise CorruptReplyError("UnexpectedReply")
    missing = sum(value is None for value in values)
    if missing:
        if missing == len(values):
            return None
        raise CorruptReplyError("CorruptRun")
    text = [value if type(value) is str else decode_text(value) for value in values]
    if text[0] != run_id:
        raise CorruptReplyError("IdentityMismatch")
    if text[1] not in _RUN_STATUSES:
        raise CorruptReplyError("CorruptRun")
    run = RunState(
        run_id=run_id,
        status=RunStatus(text[1]),
        opened_at_ms=decode_int(text[2]),
        deadline_ms=decode_int(text[3]),
        ttl_ms=decode_int(text[4]),
        expires_at_ms=decode_int(text[5]),
        tool_call_budget=decode_int(text[6]),
        byte_budget=decode_int(text[7]),
        tool_calls_used=decode_int(text[8]),
        bytes_used=decode_int(text[9]),
    )
    if not is_well_formed_run(run):
        raise CorruptReplyError("CorruptRun")
    return run


def decode_ids(values: Sequence[object]) -> tuple[str, ...]:
    """Decode a LIST of tool_call_ids; each must be a safe id (CIS-STORE-6)."""
    ids = tuple(decode_text(value) for value in _array(values))
    if not all(is_safe_id(tcid) for tcid in ids):
        raise CorruptReplyError("CorruptList")
    return ids


def parse_version(info: Mapping[str, object]) -> tuple[int, ...]:
    """``redis_version`` of an ``INFO server`` reply as an int tuple; ``CorruptReplyError`` if absent."""
    version = info.get("redis_version")
    if isinstance(version, bytes):
        version = version.decode("ascii", "replace")
    if isinstance(version, int | float):
        version = str(version)
    if not isinstance(version, str):
        raise CorruptReplyError("NoVersion")
    parts: list[int] = []
    for part in version.split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def split_words(reply: object) -> tuple[str, Reply]:
    """Split a script reply: a one-string reply is space-separated, else an array."""
    if isinstance(reply, bytes | str):
        items = decode_text(reply).split(" ")
        return items[0], items
    if not isinstance(reply, list | tuple) or not reply:
        raise CorruptReplyError("UnexpectedReply")
    return decode_text(reply[0]), reply


def check_int(*values: int) -> None:
    """Raise ``ValueError`` for an integer a script cannot hold exactly (2**53 or more: Lua doubles)."""
    for value in values:
        if value >= MAX_EXACT_INT or value < -MAX_EXACT_INT:
            raise ValueError("the Redis store keeps integers exactly only below 2**53")


def split_reply(reply: object) -> tuple[str, str, Reply]:
    """A script reply as (tag, rest of its first string, the whole array or ``()``)."""
    if isinstance(reply, bytes):
        text = reply.decode()
        items: Reply = ()
    elif isinstance(reply, str):
        text, items = reply, ()
    elif isinstance(reply, list) and reply:
        text, items = decode_text(reply[0]), reply
    else:
        raise CorruptReplyError("UnexpectedReply")
    tag, _, rest = text.partition(" ")
    return tag, rest, items


# -- reads -----------------------------------------------------------------------------


def finish_ttl(
    fields: Sequence[object], pttl: object, run_id: str, tool_call_id: str, now_ms: int | None
) -> int | None:
    """Remaining TTL in ms: the smaller of Redis PTTL and the store clock's view.

    ``fields`` is HMGET run_id, tool_call_id, expires_at_ms; ``now_ms`` the store clock,
    or None when the store holds no reading of the server's clock (Redis' PTTL alone).
    ``None`` if absent or expired. A record without a Redis TTL is corrupt (it would
    never expire).
    """
    if len(_array(fields)) != 3 or not isinstance(pttl, int):
        raise CorruptReplyError("UnexpectedReply")
    if all(value is None for value in fields):
        return None
    if any(value is None for value in fields):
        raise CorruptReplyError("CorruptRecord")
    if not lifetime_is_intact(None if pttl == -1 else pttl):
        raise CorruptReplyError("NoTTL")
    if decode_text(fields[0]) != run_id or decode_text(fields[1]) != tool_call_id:
        raise CorruptReplyError("IdentityMismatch")
    if pttl < 0:
        return None
    expires_at_ms = decode_int(decode_text(fields[2]))
    remaining = pttl if now_ms is None else min(pttl, expires_at_ms - now_ms)
    return remaining if remaining > 0 else None


# -- integrity (CIS-DUR-7) ---------------------------------------------------------------

#: Why a script answered ``CORRUPT <why>`` (see ``_redis_scripts``), each a CorruptReplyError cause.
_CORRUPT_CAUSES: Final = frozenset({"NoTTL", "ForeignKey", "BadInteger"})


def refuse_corrupt(reply: object) -> object:
    """``reply`` unchanged, unless a script answered ``CORRUPT <why>``: then :class:`CorruptReplyError`.

    A CORRUPT reply wrote nothing (every check precedes a script's first write); the
    scripts' ``NoTTL`` mirrors kernel ``lifetime_is_intact``: a record or run without
    expiry is never completed, admitted into or reopened.
    """
    head = reply[:8] if isinstance(reply, bytes | str) else None
    if head not in (b"CORRUPT ", "CORRUPT "):
        return reply
    why = decode_text(reply)[8:]
    raise CorruptReplyError(why if why in _CORRUPT_CAUSES else "UnexpectedReply")
