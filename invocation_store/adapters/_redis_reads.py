"""Consistent record reads with read rights alone: no MULTI, no script, no WATCH (CIS-DUR-9).

I/O-free, like ``_redis_core``: :func:`snapshot_commands` lists what the stores
pipeline, :func:`decide_snapshot` decides on the replies. A user granted ``+@read``
(and ``+@connection``) may send neither ``MULTI``/``EXEC`` (``@transaction``) nor a
script: ``EVAL_RO``/``EVALSHA_RO`` and ``#!lua flags=no-writes`` scripts are in the
``@scripting`` category on Redis 7.x and Valkey (and absent from 6.2), so no
read-only script helps such a user. Every supported server (6.2, 7.x, Valkey) is
therefore read the same way.

Why a pipeline of plain reads is consistent here (a *double collect*): a record's
HASH and its raw STRING are only ever written together, inside one script (create,
complete), and each write changes the record's ``status``, ``updated_at_ms`` or
``invocation_token`` (:data:`SNAPSHOT_FIELDS`). A read of a record with its raw
response pipelines ``HGETALL record``, ``GET raw``, ``PTTL record`` and, last, ``HMGET
record <SNAPSHOT_FIELDS>``. If the last read finds the same three values as the
``HGETALL``, no script wrote the record (hence its raw response) between them, and
the ``GET`` saw the raw response that belongs to the hash: the snapshot is the one
an atomic read would have taken at any instant between the two. Otherwise that record
is read again (:data:`MAX_ATTEMPTS` rounds in all: a record changes at most once,
PROJECTING to terminal, before it expires). A read without raw responses needs no
check: one ``HGETALL`` is atomic.

Corrupt records are isolated (CIS-DUR-7): a record whose key has no expiry (``PTTL``
-1), holds another type (``WRONGTYPE``) or does not decode is reported by id with a
fixed cause label, and the others are still decided, so that a batched read can carry
on with the rest of the run (:class:`~invocation_store.adapters.CorruptRecordError`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, NamedTuple

import redis

from ..kernel import CanonicalRecord, lifetime_is_intact
from ._redis_core import CorruptReplyError, RunKeys, decode_record, decode_text

__all__ = [
    "MAX_ATTEMPTS",
    "RECORD_CAUSES",
    "SNAPSHOT_FIELDS",
    "Snapshot",
    "corrupt_cause",
    "decide_snapshot",
    "snapshot_commands",
]

#: Fields that every write of a record changes (one of them at least).
SNAPSHOT_FIELDS: Final = ("status", "updated_at_ms", "invocation_token")

#: Rounds of a consistent read before the store gives up (``UnstableRead``).
MAX_ATTEMPTS: Final = 3


class Snapshot(NamedTuple):
    """The decision on one round of replies.

    ``records``: each stable, well-formed id's record (None: absent); ``unstable``:
    ids written between the reads, to read again; ``corrupt``: ids mapped to a fixed
    cause label.
    """

    records: dict[str, CanonicalRecord | None]
    unstable: list[str]
    corrupt: dict[str, str]


def _width(include_raw: bool) -> int:
    return 4 if include_raw else 2


def snapshot_commands(
    keys: RunKeys, tool_call_ids: Sequence[str], include_raw: bool
) -> list[tuple[str, ...]]:
    """The read-only commands (``@read`` category) to pipeline for ``tool_call_ids`` (safe ids).

    Per id: ``HGETALL record``, ``PTTL record`` and, with raw responses, ``GET raw``
    then (after every other command) ``HMGET record`` :data:`SNAPSHOT_FIELDS`.
    """
    commands: list[tuple[str, ...]] = []
    for tcid in tool_call_ids:
        record = keys.record(tcid)
        commands.append(("HGETALL", record))
        commands.append(("PTTL", record))
        if include_raw:
            commands.append(("GET", keys.raw(tcid)))
    if include_raw:
        commands.extend(("HMGET", keys.record(tcid), *SNAPSHOT_FIELDS) for tcid in tool_call_ids)
    return commands


#: CorruptReplyError causes that show a corrupt record or run (a key an operator must
#: repair): the scripts' ``CORRUPT <why>`` answers and the strict decoders' refusals.
#: Not here: ``IdentityMismatch`` (also what a desynchronised connection would read) and
#: replies of the wrong shape, which say nothing about the stored key.
RECORD_CAUSES: Final = frozenset(
    {"NoTTL", "ForeignKey", "BadInteger", "CorruptRecord", "CorruptInteger", "CorruptRun", "WrongType"}
)


def corrupt_cause(exc: BaseException) -> str | None:
    """The cause label of a failure that shows a corrupt record, or None for any other failure.

    A ``WRONGTYPE`` error reply (a key of the record's name holding another type, also
    inside a script's error) and a :class:`CorruptReplyError` of :data:`RECORD_CAUSES`
    are corrupt records; connection failures and other replies are not. The reply's
    text is read to classify it, never kept.
    """
    if isinstance(exc, CorruptReplyError):
        return exc.cause if exc.cause in RECORD_CAUSES else None
    if isinstance(exc, redis.ResponseError) and "WRONGTYPE" in str(exc):
        return "WrongType"
    return None


def _fields(reply: object) -> dict[str, object]:
    if isinstance(reply, dict):
        return {decode_text(name): value for name, value in reply.items()}
    if isinstance(reply, list | tuple) and len(reply) % 2 == 0:
        return {decode_text(reply[i]): reply[i + 1] for i in range(0, len(reply), 2)}
    raise CorruptReplyError("UnexpectedReply")


def _same(fields: dict[str, object], check: object) -> bool:
    if not isinstance(check, list | tuple) or len(check) != len(SNAPSHOT_FIELDS):
        raise CorruptReplyError("UnexpectedReply")
    return all(fields.get(name) == value for name, value in zip(SNAPSHOT_FIELDS, check, strict=True))


def decide_snapshot(
    replies: Sequence[object], run_id: str, tool_call_ids: Sequence[str], include_raw: bool
) -> Snapshot:
    """Decide one round of :func:`snapshot_commands` replies (error replies as values).

    Raises the first error reply that does not show a corrupt record (a connection
    failure, a refused command), and :class:`CorruptReplyError` for replies of the
    wrong shape. Expiry by the store clock is not judged here.
    """
    width = _width(include_raw)
    if len(replies) != width * len(tool_call_ids):
        raise CorruptReplyError("UnexpectedReply")
    for reply in replies:
        if isinstance(reply, Exception) and corrupt_cause(reply) is None:
            raise reply
    checks = replies[3 * len(tool_call_ids) :] if include_raw else ()
    step = 3 if include_raw else 2
    snapshot = Snapshot({}, [], {})
    for index, tcid in enumerate(tool_call_ids):
        hash_reply, pttl = replies[index * step], replies[index * step + 1]
        raw = replies[index * step + 2] if include_raw else None
        try:
            for reply in (hash_reply, pttl, raw, checks[index] if include_raw else None):
                if isinstance(reply, Exception):
                    raise reply
            fields = _fields(hash_reply)
            if include_raw and not _same(fields, checks[index]):
                snapshot.unstable.append(tcid)
                continue
            if fields and not (isinstance(pttl, int) and lifetime_is_intact(None if pttl == -1 else pttl)):
                raise CorruptReplyError("NoTTL")
            snapshot.records[tcid] = decode_record(fields, raw, run_id, tcid)
        except (redis.ResponseError, ValueError) as exc:  # CorruptReplyError, UnicodeDecodeError too
            cause = corrupt_cause(exc)
            if cause is None and (isinstance(exc, redis.ResponseError | CorruptReplyError)):
                raise
            snapshot.corrupt[tcid] = cause or "CorruptRecord"
    return snapshot
