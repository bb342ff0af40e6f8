"""The complete operation of the Redis store, I/O-free: COMPLETE_SCRIPT's call and its reply.

:func:`plan_complete` builds the compare-and-set ``before`` -> ``after`` (every mutable
field of ``after`` written, a raw response already held kept on the server and checked
by size, a large one staged); the kernel's checks run before the script is sent
(kernel ``check_completion``, ``completion_charge``). A WRITE reply returns the
kernel-built ``after`` the caller passed: nothing is decoded and the kernel is not
run again. A refusal is re-decided by kernel ``decide_completion`` on the record the
script refused against (CIS-STORE-8). Contract of the script:
``_redis_scripts.COMPLETE_SCRIPT``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, NamedTuple

from ..kernel import (
    CanonicalRecord,
    ErrorCode,
    check_completion,
    completion_charge,
    decide_completion,
    is_safe_id,
    text_exceeds,
    utf8_len,
)
from ._redis_decode import (
    MAX_EXACT_INT,
    CorruptReplyError,
    Reply,
    check_int,
    decode_embedded,
    decode_record,
    split_reply,
)
from ._redis_keys import run_keys

__all__ = [
    "STAGE_ABOVE_BYTES",
    "STAGE_TTL_MS",
    "CompleteCall",
    "CompletePlan",
    "finish_complete",
    "plan_complete",
]

#: Raw responses above this many UTF-8 bytes are staged with a plain SET and renamed
#: into place by the script, rather than passed to it as an argument (copied into Lua).
STAGE_ABOVE_BYTES: Final = 16 * 1024
#: Lifetime of a staging key left behind by a failed script (NOSCRIPT, a crash).
STAGE_TTL_MS: Final = 60_000

#: COMPLETE_SCRIPT's reply to a write, as bytes and as str (``decode_responses=True``).
_WRITE: Final = (b"WRITE", "WRITE")
_FOUR: Final = b"4"
_FIVE: Final = b"5"


class CompleteCall(NamedTuple):
    """One COMPLETE_SCRIPT call (``command``: numkeys, KEYS, ARGV).

    When ``staged`` is not None it is SET at ``stage_key`` (the last KEYS entry) in
    the same round trip, before the script.
    """

    command: tuple[bytes | str, ...]
    staged: str | None
    stage_key: str | None


class CompletePlan(NamedTuple):
    """What ``complete`` sends; ``resend`` carries the raw response in full if asked."""

    call: CompleteCall
    resend: CompleteCall
    before: CanonicalRecord
    after: CanonicalRecord
    #: The store clock when the call was planned: the kernel re-decides a refusal at it.
    now_ms: int = 0


def plan_complete(
    prefix: str,
    before: CanonicalRecord,
    after: CanonicalRecord,
    now_ms: int,
    nonce: Callable[[], str],
    *,
    server_clock: bool = False,
) -> CompletePlan | ErrorCode:
    """Build the COMPLETE_SCRIPT call for ``before`` -> ``after``.

    Raises ``ValueError`` (from the kernel) when ``after`` changes a field no
    transition changes. Ids that are not safe have no record: INVALID_TRANSITION.
    Every mutable field of ``after`` is written (a None field is deleted), so the
    stored record becomes exactly ``after``; only a raw response that ``before``
    already held stays on the server, where the script checks its size (``RESEND``
    asks for it in full when it differs). A raw response above
    :data:`STAGE_ABOVE_BYTES` goes through a staging key named with ``nonce()``.
    ``now_ms`` is the store's clock; with ``server_clock`` the script decides on the
    server's clock instead (the record's own expiry, CIS-STORE-10) and ``now_ms`` only
    re-decides a refusal (a lower bound of that clock: a live key is live at it too).
    """
    check_completion(before, after)  # the kernel's programming-error checks
    run_id, tool_call_id = before.run_id, before.tool_call_id
    keys = run_keys(prefix, run_id)
    if keys is None or not is_safe_id(tool_call_id):
        return ErrorCode.INVALID_TRANSITION
    updated = after.updated_at_ms
    if not (-MAX_EXACT_INT <= now_ms < MAX_EXACT_INT and -MAX_EXACT_INT <= updated < MAX_EXACT_INT):
        check_int(now_ms, updated)
    charge = completion_charge(before, after)
    raw = after.raw_response
    evidence, code, result, scope = after.evidence_status, after.error_code, after.agent_result, after.scope
    # Header: "<head> <raw_size> <mask> <evidence>" (COMPLETE_SCRIPT's contract); the
    # mask's third letter, the raw response's, depends on the call.
    before_raw = ("D" if evidence is None else "S") + ("D" if code is None else "S")
    after_raw = ("D" if result is None else "S") + ("D" if scope is None else "S")
    done_id = tool_call_id if after.terminal else ""
    head = f"{'' if server_clock else now_ms} {after.status} {code or ''} {updated} {charge} {done_id}"
    tail = f"{evidence or ''} {before.created_at_ms} {before.expires_at_ms} {before.sequence}"
    sent = (keys.record_wire(tool_call_id), keys.run_wire, keys.done_wire, keys.raw_wire(tool_call_id))
    token = before.invocation_token
    texts = (result or "", scope or "", before.tool_name, before.request_json)
    if raw is None:
        header = f"{head}  {before_raw}D{after_raw} {tail}".encode()
        full = CompleteCall((_FOUR, *sent, header, token, "", *texts), None, None)
    elif text_exceeds(raw, STAGE_ABOVE_BYTES):  # decided on the length unless near the limit
        stage_key = keys.stage(nonce())
        header = f"{head}  {before_raw}T{after_raw} {tail}".encode()
        full = CompleteCall((_FIVE, *sent, stage_key, header, token, "", *texts), raw, stage_key)
    else:
        header = f"{head}  {before_raw}S{after_raw} {tail}".encode()
        full = CompleteCall((_FOUR, *sent, header, token, raw, *texts), None, None)
    unchanged = raw is not None and (raw is before.raw_response or raw == before.raw_response)
    size = utf8_len(raw) if unchanged and raw is not None else None  # measured only then
    if size is not None:
        # Unchanged raw response: keep it on the server, check its size there.
        header = f"{head} {size} {before_raw}K{after_raw} {tail}".encode()
        kept = CompleteCall((_FOUR, *sent, header, token, "", *texts), None, None)
        return CompletePlan(kept, full, before, after, now_ms)
    return CompletePlan(full, full, before, after, now_ms)


def _refused_complete(plan: CompletePlan, rest: str, items: Reply) -> ErrorCode:
    """COMPLETE_SCRIPT's refusal, re-decided by kernel ``decide_complete`` on the record it saw.

    ``items`` is ``()`` (no record) or the reply array: the tag, then the stored record's
    field/value pairs. Raises :class:`CorruptReplyError` ("KernelDisagrees") when the
    kernel, fed that record, would write or replay (CIS-STORE-8); a stored record that
    is not well-formed or not of this key is corrupt as on any read (CIS-STORE-6).
    """
    if rest != ErrorCode.INVALID_TRANSITION.value:
        raise CorruptReplyError("UnexpectedReply")
    before = plan.before
    stored = decode_record(items[1:], None, before.run_id, before.tool_call_id) if items else None
    if decide_completion(stored, before, plan.after, None, plan.now_ms) is not ErrorCode.INVALID_TRANSITION:
        raise CorruptReplyError("KernelDisagrees")
    return ErrorCode.INVALID_TRANSITION


def finish_complete(plan: CompletePlan, reply: object) -> CanonicalRecord | ErrorCode | None:
    """``after`` on WRITE, the stored record on REPLAY, a code, or ``None`` for RESEND."""
    if reply in _WRITE:
        return plan.after
    tag, rest, items = split_reply(reply)
    if tag == "ERR":
        return _refused_complete(plan, rest, items)
    if tag == "RESEND" and not rest and not items:
        return None
    if tag != "REPLAY" or rest or not items:
        raise CorruptReplyError("UnexpectedReply")
    before = plan.before
    stored = decode_embedded(items[1:], before.run_id, before.tool_call_id)
    if stored is None:
        raise CorruptReplyError("UnexpectedReply")
    return stored
